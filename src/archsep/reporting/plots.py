"""Figures for papers: PNG and SVG side by side."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import IO

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from ..analysis.grid import point_arm  # noqa: E402

MARKERS = "osD^vP*X"
BASELINE_STYLES = ("--", ":", "-.")  # one per task variant, so two variants' baselines are told apart


def plain(text: object, limit: int = 100) -> str:
    """`text` drawn as written: a '$' in a label or a name read from a store would otherwise
    start matplotlib's mathtext (and an unbalanced one fails the whole figure); cut at `limit`
    characters a line (a megabyte-long stored label would make an image too large to draw), at
    a space where there is one, so that no number is cut into a smaller one."""
    lines = []
    for line in str(text).split("\n")[:4]:
        if len(line) > limit:
            cut = line[:limit - 3]
            line = (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "..."
        lines.append(line)
    return "\n".join(lines).replace("$", r"\$")


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


class PlainLogFormatter(matplotlib.ticker.LogFormatter):
    """A log (or symlog) axis's tick labels in plain text: 10⁴, 2×10³, 10⁻², written with
    Unicode superscripts, where matplotlib's own log formatters write mathtext
    (`$\\mathdefault{10^{4}}$`), which prints as it is written under `text.parse_math: False`
    (`archsep report`, so that stored labels are drawn as written). Which ticks get a label is
    matplotlib's (`LogFormatter`): the decades, and the minor ticks when few decades are shown."""

    def __call__(self, x, pos=None) -> str:
        s = super().__call__(x, pos)  # '' for an unlabelled tick; the value's size alone
        return self.fix_minus("-") + s if s and x < 0 else s

    def _num_to_string(self, x, vmin, vmax) -> str:
        return log_label(x, getattr(self, "_base", 10.0))


def log_label(x: float, base: float = 10.0) -> str:
    """x > 0 as a log axis labels it, in plain text: '10³' (a decade), '2×10³' (a minor tick),
    '%g' in another base."""
    if base != 10 or not math.isfinite(x) or x <= 0:
        return f"{x:g}"
    exponent = math.floor(math.log10(x) + 1e-9)
    coeff = round(x / 10.0**exponent, 6)
    if coeff >= 10:  # rounding at a decade's edge
        coeff, exponent = coeff / 10, exponent + 1
    power = "10" + str(exponent).translate(_SUPERSCRIPT)
    return power if coeff == 1 else f"{coeff:g}×{power}"


def plain_ticks(fig) -> None:
    """Every tick formatter of `fig` that would write mathtext made to write plain text: a log
    or symlog axis gets `PlainLogFormatter` (keeping its base and which ticks it labels), a linear
    axis's `ScalarFormatter` stops using mathtext. Called on every figure archsep writes (`save`,
    and the report's own figures), so that no label prints as '$\\mathdefault{...}$' where
    `text.parse_math` is off."""
    ticker = matplotlib.ticker
    for ax in fig.get_axes():
        for axis in (ax.xaxis, ax.yaxis):
            for formatter, setter in ((axis.get_major_formatter(), axis.set_major_formatter),
                                      (axis.get_minor_formatter(), axis.set_minor_formatter)):
                if isinstance(formatter, ticker.LogFormatterMathtext):  # LogFormatterSciNotation too
                    setter(PlainLogFormatter(base=getattr(formatter, "_base", 10.0),
                                             labelOnlyBase=formatter.labelOnlyBase,
                                             minor_thresholds=formatter.minor_thresholds,
                                             linthresh=getattr(formatter, "_linthresh", None)))
                elif isinstance(formatter, ticker.ScalarFormatter) and formatter.get_useMathText():
                    formatter.set_useMathText(False)


def save(fig, stem: Path) -> list[Path]:
    """STEM.png and STEM.svg, each written atomically (archsep.fileio), their tick labels in
    plain text (`plain_ticks`)."""
    from ..fileio import atomic_write

    plain_ticks(fig)
    paths = []
    try:
        for ext in ("png", "svg"):
            def draw(f: IO[bytes], ext: str = ext) -> None:
                fig.savefig(f, format=ext, dpi=150, bbox_inches="tight")

            paths.append(atomic_write(stem.with_suffix(f".{ext}"), draw, "out", binary=True))
    finally:
        plt.close(fig)
    return paths


def samples_vs_N(summary: dict, stem: Path, title: str = "", published: dict | None = None) -> list[Path]:
    """`draw_samples_vs_N`, written to STEM.png and STEM.svg."""
    return save(draw_samples_vs_N(summary, title, published), stem)


def draw_samples_vs_N(summary: dict, title: str = "", published: dict | None = None):
    """Mean samples-to-threshold vs N (log-log) with bootstrap CIs and the fitted power law
    (alpha and its 95% CI in the legend); runs censored at the budget make the mean a lower
    bound, drawn as an open upward triangle; published means as large hollow circles. Arms
    measured under the authors' held-out protocol ("[as published]") share their arm's colour,
    with dashed lines."""
    import numpy as np

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    archs = sorted({p["arch"] for p in summary["points"]})
    base_of = {p["arch"]: point_arm(p) for p in summary["points"]}
    bases = sorted(set(base_of.values()))
    colour = {b: f"C{i}" for i, b in enumerate(bases)}
    for arch in archs:
        base = base_of[arch]
        alt = base != arch
        pts = sorted((p for p in summary["points"] if p["arch"] == arch and p["mean"] is not None),
                     key=lambda p: p["N"])
        if not pts:
            continue
        N = [p["N"] for p in pts]
        mean = [p["mean"] for p in pts]
        lo = [p["mean"] - (p["ci"][0] if p["ci"][0] is not None else p["mean"]) for p in pts]
        hi = [(p["ci"][1] if p["ci"][1] is not None else p["mean"]) - p["mean"] for p in pts]
        fit = summary.get("fits", {}).get(arch, {})
        a, ci = fit.get("alpha"), fit.get("ci") or [None, None]
        name = summary.get("names", {}).get(base)
        shown_as = arch if not name or name == base else f"{arch} ({name})"
        interval = "" if ci[0] is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]"
        lab = shown_as if a is None else f"{shown_as}: α={a:.2f}{interval}"
        ax.errorbar(N, mean, yerr=[lo, hi], marker=MARKERS[bases.index(base) % len(MARKERS)], capsize=3, ls="none",
                    color=colour[base], mfc="white" if alt else colour[base], label=plain(lab))
        if a is not None and fit.get("intercept") is not None:
            xs = np.geomspace(min(N), max(N), 50)
            ax.plot(xs, np.exp(fit["intercept"]) * xs**a, color=colour[base], ls="--" if alt else "-", lw=1.2)
        cN = [p["N"] for p in pts if p["n_censored"]]
        cM = [p["mean"] for p in pts if p["n_censored"]]
        if cN:
            ax.scatter(cN, cM, marker="^", s=120, facecolors="none", edgecolors=colour[base], zorder=5)
    shown = False
    for base in bases:
        pub = (published or {}).get(base, {})
        pub_N = [n for n in sorted(pub) if any(p["N"] == n for p in summary["points"])]
        if pub_N:
            ax.scatter(pub_N, [pub[n] for n in pub_N], marker="o", s=140, facecolors="none", edgecolors=colour[base],
                       linewidths=1.5, zorder=4)
            shown = True
    if shown:
        ax.scatter([], [], marker="o", s=140, facecolors="none", edgecolors="k", label="published (hollow circles)")
    if any(p["n_censored"] for p in summary["points"]):
        ax.scatter([], [], marker="^", facecolors="none", edgecolors="k", label="censored runs (lower bound)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    Ns = sorted({p["N"] for p in summary["points"]})
    ticks_at(ax, Ns)  # the measured lengths, written plainly, not as 2x10^0
    ax.set_xlabel("sequence length N")
    ax.set_ylabel(plain(f"samples to held-out {summary.get('metric', 'MSE')} < {summary['threshold']}"))
    ax.set_title(plain(title), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # outside the data
    return fig


def _families(cells: list[dict]) -> dict[str, list[dict]]:
    """Cells by their family (the architecture without its width, as the analysis keyed it)."""
    fam: dict[str, list[dict]] = {}
    for c in cells:
        fam.setdefault(c.get("family") or c["label"], []).append(c)
    return dict(sorted(fam.items()))


def multi_width(cells: list[dict]) -> bool:
    """Whether some family was run at two widths or more: only then does a heat map (widths
    against N) show anything that `accuracy_vs_N` does not."""
    return any(len({c.get("width") for c in cs}) >= 2 for cs in _families(cells).values())


def heatmaps(cells: list[dict], name: str, stem: Path) -> list[Path]:
    """`draw_heatmaps`, written to STEM.png and STEM.svg."""
    return save(draw_heatmaps(cells, name), stem)


def draw_heatmaps(cells: list[dict], name: str):
    """One panel per architecture family run at two widths or more (a one-width family is a
    strip that repeats the accuracy plot; the title names those left out; where no family has
    two widths, every family is drawn): mean test accuracy, rows = widths, columns = N."""
    import math

    import numpy as np

    every = _families(cells)
    fams = {f: cs for f, cs in every.items() if len({c.get("width") for c in cs}) >= 2} or every
    left = [f for f in every if f not in fams]
    n = max(1, len(fams))
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols + 1.0, 2.5 * rows + 0.5), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[n:]:
        ax.axis("off")
    im = None
    for ax, (fam, cs) in zip(axes.flat, fams.items()):
        Ns = sorted({c["N"] for c in cs})
        ws = sorted({c["width"] for c in cs})
        grid = np.full((len(ws), len(Ns)), np.nan)
        for i, w in enumerate(ws):
            for j, N in enumerate(Ns):
                v = [c["test_acc"] for c in cs if c["N"] == N and c["width"] == w and c["test_acc"] is not None]
                if v:
                    grid[i, j] = float(np.mean(v))
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", origin="lower", aspect="auto")
        for i in range(len(ws)):
            for j in range(len(Ns)):
                txt = "not run" if np.isnan(grid[i, j]) else f"{100 * grid[i, j]:.0f}"
                ax.text(j, i, txt, ha="center", va="center", fontsize=8,
                        color="grey" if np.isnan(grid[i, j]) else "w" if grid[i, j] < 0.6 else "k")
        ax.set_xticks(range(len(Ns)), [str(N) for N in Ns])
        ax.set_yticks(range(len(ws)), [str(w) for w in ws])
        ax.set_xlabel("length N")
        ax.set_ylabel("width")
        ax.set_title(plain(fam), fontsize=9)
    if im is not None:
        fig.colorbar(im, ax=list(axes.flat), shrink=0.8, label="test accuracy")
    one = f"\n(one width only, not drawn: {', '.join(left)})" if left else ""
    fig.suptitle(plain(f"{name}: mean test accuracy over seeds (%), widths against N{one}"), fontsize=10)
    return fig


def _seed_curve(cell: dict) -> list[tuple[float, float]]:
    """The validation curve of the learning rate a cell chose ((step, accuracy) pairs)."""
    run = next((x for x in cell["runs"] if x["lr"] == cell.get("best_lr")), cell["runs"][0])
    return [(float(p[0]), float(p[1])) for p in run.get("curve") or []]


def mean_curve(curves: list[list[tuple[float, float]]]) -> tuple[list[float], list[float]]:
    """The mean of seeds' validation curves, at every step any of them was evaluated at. At a
    step inside a seed's own range the seed counts only if it has a point there (curves share
    their evaluation steps, so this is every seed); past a seed's last point it counts with its
    last value: a seed that stopped early (it reached the target, or a plateau or a halving rung
    ended it) keeps that model, so dropping it would pull the mean down to the seeds still
    training. Before a seed's first point it does not count."""
    steps = sorted({s for c in curves for s, _ in c})
    own = [(dict(c), max(c)) for c in curves if c]  # each seed's points and its last one
    xs, ys = [], []
    for s in steps:
        vals = [d[s] if s in d else last[1] for d, last in own if s in d or s > last[0]]
        if vals:
            xs.append(s)
            ys.append(sum(vals) / len(vals))
    return xs, ys


def val_curves(cells: list[dict], name: str, stem: Path, target: float | None = None) -> list[Path]:
    """`draw_val_curves`, written to STEM.png and STEM.svg."""
    return save(draw_val_curves(cells, name, target), stem)


def draw_val_curves(cells: list[dict], name: str, target: float | None = None):
    """Validation accuracy over training steps of each cell's selected learning rate, one panel
    per length N, one colour per model: every seed as a thin line (gid "seed") and their mean as
    a thick one (gid "mean", labelled with the model; see `mean_curve` for curves of unequal
    length); `target` (the early stop) a dashed grey line."""
    Ns = sorted({c["N"] for c in cells})
    fig, axes = plt.subplots(1, max(1, len(Ns)), figsize=(3.4 * max(1, len(Ns)), 3.2), squeeze=False, sharey=True,
                             layout="constrained")
    labels = sorted({c["label"] for c in cells})
    seeds = sorted({c["seed"] for c in cells})
    for ax, N in zip(axes[0], Ns):
        for k, lab in enumerate(labels):
            cs = sorted((c for c in cells if c["N"] == N and c["label"] == lab and c.get("runs")),
                        key=lambda c: c["seed"])
            curves = [_seed_curve(c) for c in cs]
            colour = f"C{k % 10}"  # a model's colour is the same in every panel
            for c, curve in zip(cs, curves):
                if curve:
                    ax.plot([p[0] for p in curve], [p[1] for p in curve], color=colour, lw=0.6, alpha=0.45,
                            label=f"_seed {c['seed']}", gid="seed")
            xs, ys = mean_curve(curves)
            if xs:
                ax.plot(xs, ys, color=colour, lw=2.0, marker=MARKERS[k % len(MARKERS)], markersize=3,
                        markevery=max(1, len(xs) // 8), label=plain(lab), gid="mean")
        if target is not None:
            ax.axhline(target, color="grey", lw=0.8, ls="--", zorder=1)
            ax.text(0.01, target, f"early stop {target:g}", transform=ax.get_yaxis_transform(), fontsize=6,
                    color="grey", va="bottom")
        ax.set_title(f"N = {N}", fontsize=9)
        ax.set_xlabel("training steps")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("validation accuracy")
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines() if not h.get_label().startswith("_")}
    shown = [plain(lab) for lab in labels if plain(lab) in handles]
    # every model, even one missing from the last panel; outside the data, right of the last panel
    axes[0][-1].legend([handles[lab] for lab in shown], shown, fontsize=7, loc="upper left",
                       bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    n_seeds = f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}"
    fig.suptitle(plain(f"{name}: validation accuracy of the selected lr ({n_seeds}: every seed thin, mean thick)"),
                 fontsize=10)
    return fig


def accuracy_vs_N(points: list[dict], name: str, stem: Path, baselines: list[dict] | None = None,
                  target: float | None = None) -> list[Path]:
    """`draw_accuracy_vs_N`, written to STEM.png and STEM.svg."""
    return save(draw_accuracy_vs_N(points, name, baselines, target), stem)


MODEL_Z, BASELINE_Z = 2, 6  # the baselines are drawn over the models' lines: never hidden under one


def draw_accuracy_vs_N(points: list[dict], name: str, baselines: list[dict] | None = None,
                       target: float | None = None):
    """Mean test accuracy against length N, one line per model (family and width), with the
    t interval over seeds as error bars (none from a single seed), and the task's best trivial
    baseline at each N as a black line over them (dashed, dotted or dash-dotted by task
    variant), named in the legend and on the line at its first point. `target`: the early stop, in the title."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    labels = sorted({p["label"] for p in points})
    for k, lab in enumerate(labels):
        ps = [p for p in points if p["label"] == lab and p["mean"] is not None
              and isinstance(p["N"], (int, float)) and not isinstance(p["N"], bool)]
        ps.sort(key=lambda p: p["N"])
        if not ps:
            continue
        lo = [p["mean"] - (p["ci"][0] if p["ci"][0] is not None else p["mean"]) for p in ps]
        hi = [(p["ci"][1] if p["ci"][1] is not None else p["mean"]) - p["mean"] for p in ps]
        ax.errorbar([p["N"] for p in ps], [p["mean"] for p in ps], yerr=[lo, hi], marker=MARKERS[k % len(MARKERS)],
                    capsize=3, label=plain(lab), color=f"C{k % 10}", zorder=MODEL_Z)  # one colour per model
    for j, v in enumerate(sorted({b["variant"] for b in baselines or []})):
        bs = sorted((b for b in baselines or [] if b["variant"] == v and isinstance(b["N"], (int, float))),
                    key=lambda b: b["N"])
        if not bs:
            continue
        names = ", ".join(sorted({b["best"] for b in bs}))
        ax.plot([b["N"] for b in bs], [b["best_acc"] for b in bs], color="k",
                ls=BASELINE_STYLES[j % len(BASELINE_STYLES)], lw=1.6, zorder=BASELINE_Z, gid="baseline",
                label=plain(f"best trivial baseline{f' [{v}]' if v else ''} ({names})"))
        # named on the line too, at its first point (inside the axes, clear of the legend)
        ax.annotate(plain(f"trivial baseline{f' [{v}]' if v else ''}"), (bs[0]["N"], bs[0]["best_acc"]),
                    xytext=(6, -4 - 10 * j), textcoords="offset points", fontsize=7, va="top",
                    zorder=BASELINE_Z)  # no box: it would hide the models' lines beneath
    ax.set_xscale("log")
    Ns = sorted({p["N"] for p in points if isinstance(p["N"], (int, float)) and not isinstance(p["N"], bool)})
    if Ns:
        ticks_at(ax, Ns)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("length N")
    ax.set_ylabel("test accuracy (mean over seeds, 95% t interval)")
    stop = "" if target is None else f"\n(training stops at validation accuracy >= {target:g})"
    ax.set_title(plain(f"{name}: test accuracy against N{stop}"), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # outside the data
    return fig


SIZE_FIGURES = ("heatmaps", "accuracy", "val_curves")  # the stems `size_figures` may draw


def size_figures(cells: list[dict], points: list[dict], name: str, out: Path,
                 target: float | None = None, baselines: list[dict] | None = None) -> list[Path]:
    """A size measurement's figures, for a preset and a sweep alike: heat maps of test accuracy
    (only where some family has two widths or more: a one-width map is a strip that repeats the
    accuracy plot), test accuracy against N (with the task's best trivial baseline where known),
    validation curves of the chosen learning rates (`target` dashed). `name` heads every title
    (a preset's: "dyck-fig2 (cpu)"). A caller redrawing into a folder removes a heatmaps.* left
    there by an earlier drawing when none is returned."""
    maps = heatmaps(cells, name, out / "heatmaps") if multi_width(cells) else []
    return (maps + accuracy_vs_N(points, name, out / "accuracy", baselines, target)
            + val_curves(cells, name, out / "val_curves", target))


def ticks_at(ax, values: list) -> None:
    """A log x axis ticked at exactly `values`, each written plainly (8, not 2^3 or 8x10^0)."""
    ax.set_xticks(values)
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def accuracy_vs_width(points: list[dict], name: str, stem: Path) -> list[Path]:
    """Test accuracy against width, one line per (family, N), the mean over seeds with its 95% t
    interval (none from one seed); widths on a log-2 axis, written plainly. Nothing where no
    family has two widths (the accuracy-against-N figure then says it all)."""
    lines: dict[tuple, list[dict]] = {}
    for p in points:
        if p["mean"] is not None and isinstance(p["width"], (int, float)) and p["width"]:
            lines.setdefault((p["family"], json.dumps(p["N"])), []).append(p)
    lines = {k: sorted(v, key=lambda p: p["width"]) for k, v in lines.items() if len({p["width"] for p in v}) >= 2}
    if not lines:
        return []
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for k, ((family, n), ps) in enumerate(sorted(lines.items())):
        lo = [p["mean"] - (p["ci"][0] if p["ci"][0] is not None else p["mean"]) for p in ps]
        hi = [(p["ci"][1] if p["ci"][1] is not None else p["mean"]) - p["mean"] for p in ps]
        ax.errorbar([p["width"] for p in ps], [p["mean"] for p in ps], yerr=[lo, hi], capsize=3,
                    color=f"C{k % 10}", marker=MARKERS[k % len(MARKERS)], label=plain(f"{family}, N = {json.loads(n)}"))
    widths = sorted({p["width"] for ps in lines.values() for p in ps})
    ax.set_xscale("log", base=2)
    ticks_at(ax, widths)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("width")
    ax.set_ylabel("test accuracy (mean over seeds, 95% t interval)")
    ax.set_title(plain(f"{name}: test accuracy against width"), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, stem)


def accuracy_vs_length(lengths: dict, name: str, stem: Path) -> list[Path]:
    """Length generalisation: accuracy (the task's metric for regression) against the length
    evaluated, one line per curve (model), the mean over its seeds with the 95% t interval as
    error bars (none from one seed); lengths on a log axis, the curves' longest training lengths
    (their task's N) as dotted grey lines. `lengths` is `analysis.lengths.length_points`."""
    points, measure = lengths["points"], lengths.get("measure", "accuracy")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    curves = sorted({p["curve"] for p in points})
    for k, curve in enumerate(curves):
        ps = sorted((p for p in points if p["curve"] == curve and p["mean"] is not None), key=lambda p: p["length"])
        lo = [p["mean"] - (p["ci"][0] if p["ci"][0] is not None else p["mean"]) for p in ps]
        hi = [(p["ci"][1] if p["ci"][1] is not None else p["mean"]) - p["mean"] for p in ps]
        colour = f"C{k % 10}"
        ax.errorbar([p["length"] for p in ps], [p["mean"] for p in ps], yerr=[lo, hi], capsize=3, color=colour,
                    marker=MARKERS[k % len(MARKERS)], label=plain(curve))
    for n in sorted({n for c, n in lengths.get("train_N", {}).items() if c in curves}):
        ax.axvline(n, color="grey", ls=":", lw=1.2)
        ax.text(n, 0.02, f" trained to N = {n}", transform=ax.get_xaxis_transform(), fontsize=7, color="grey",
                va="bottom")
    ax.set_xscale("log")
    ns = sorted({p["length"] for p in points})
    if ns:
        ticks_at(ax, ns)  # the lengths evaluated, written plainly
    if measure == "accuracy":
        ax.set_ylim(-0.02, 1.02)
    else:
        ax.set_yscale("log")
    ax.set_xlabel("length evaluated (the task's N; dotted: longest training length)")
    ax.set_ylabel(plain(f"{measure} (mean over seeds, 95% t interval)"))
    ax.set_title(plain(f"{name}: {measure} against length"), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    return save(fig, stem)
