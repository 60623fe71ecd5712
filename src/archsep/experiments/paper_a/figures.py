"""Paper A's size separations (SPEC 5): test accuracy over a (length x width) grid per
architecture, with validation curves, for index lookup, bounded Dyck-(2,2) and equality.

These presets measure cells (`archsep.size`), not samples-to-threshold runs, so they bring
their own `run` (reproduce() calls it), runs.csv columns, figures and text summary.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..size import SizeCell, run_cells, write_cells_csv
from ..base import PRESETS, Preset


@dataclass(frozen=True)
class SizeArch:
    """An architecture family swept over widths; `width_key` is the model parameter set to
    the width (e.g. 'width', or 'hidden' for the LSTM)."""

    label: str  # e.g. "TF-1"
    arch: str
    params: dict = field(default_factory=dict)
    widths: tuple[int, ...] = (64,)
    width_key: str = "width"

    def name(self, width: int) -> str:
        return f"{self.label}-{width}" if not self.label.startswith("TF") else f"TF-({self.label[3:]},{width})"


@dataclass(frozen=True)
class SizeScale:
    Ns: tuple[int, ...]
    archs: tuple[SizeArch, ...]
    lrs: tuple[float, ...]
    steps: int
    eval_every: int = 100
    val_size: int = 1000
    test_size: int = 5000
    seeds: int = 1
    variants: tuple[tuple[str, dict], ...] = (("", {}),)  # (name, extra task params)


def tf(layers: int, widths: tuple[int, ...] = (64,), heads: int | None = None) -> SizeArch:
    # default: 4 heads of width 16 at width 64 (fewer for narrow models); learned positions, causal
    extra = {} if heads is None else {"heads": heads}
    return SizeArch(f"TF-{layers}", "tf-preln", {"layers": layers, "positions": "learned", "causal": True, **extra}, widths)


def lstm(widths: tuple[int, ...] = (64,)) -> SizeArch:
    return SizeArch("LSTM", "lstm", {"layers": 1}, widths, "hidden")


def mamba(widths: tuple[int, ...] = (64,), **kw) -> SizeArch:
    return SizeArch("Mamba", "mamba", {"layers": 1, **kw}, widths)


def dss(widths: tuple[int, ...] = (64,)) -> SizeArch:
    return SizeArch("DSS", "dss", {"layers": 1}, widths)


def _heads(arch: SizeArch, width: int) -> dict:
    if arch.arch != "tf-preln":
        return {}
    return {"heads": max(1, min(4, width // 16))}


class SizePreset(Preset):
    task: str
    full: SizeScale
    quick: SizeScale
    ref_width: int = 64  # the width the claims and validation-curve figure are read at

    def scale(self, quick: bool) -> SizeScale:
        return self.quick if quick else self.full

    def cells(self, quick: bool, device: str = "auto") -> list[SizeCell]:
        s = self.scale(quick)
        out = []
        for vname, vparams in s.variants:
            for a in s.archs:
                for w in a.widths:
                    for N in s.Ns:
                        for seed in range(s.seeds):
                            label = a.name(w) + (f" [{vname}]" if vname else "")
                            out.append(SizeCell(self.task, a.arch, label, N, w, dict(vparams),
                                                {**_heads(a, w), **a.params, a.width_key: w},
                                                s.lrs, s.steps, 64, s.eval_every, s.val_size, s.test_size,
                                                0.99, seed, device))
        return out

    def configs(self, quick: bool, device: str = "auto") -> list:
        """The training runs behind the cells (one per learning rate)."""
        return [c.run_config(lr) for c in self.cells(quick, device) for lr in c.lrs]

    def run(self, out_dir: Path, quick: bool, workers: int, device: str, progress: bool = True) -> list[dict]:
        results = run_cells(self.cells(quick, device), out_dir, workers, progress, desc=self.registry_name)
        write_cells_csv(results, Path(out_dir) / "runs.csv")
        return results

    # --- summary ----------------------------------------------------------------------------
    def table(self, results: list[dict]) -> dict[str, dict[tuple[int, int], float | None]]:
        """{label: {(N, width): mean test accuracy over seeds}}, label including the width."""
        acc: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in results:
            if r["test_acc"] is not None:
                acc[r["label"]][(r["N"], r["width"])].append(r["test_acc"])
        return {lab: {k: sum(v) / len(v) for k, v in d.items()} for lab, d in acc.items()}

    def summarize(self, results: list[dict], quick: bool) -> dict:
        s = self.scale(quick)
        cells = [{k: r.get(k) for k in ("label", "N", "width", "seed", "test_acc", "val_acc", "best_lr",
                                         "steps", "reached", "status", "params", "state_size", "wall_s", "cpu_s")}
                 for r in results]
        summary = {"preset": self.registry_name, "quick": quick, "task": self.task, "Ns": list(s.Ns),
                   "lrs": list(s.lrs), "steps": s.steps, "seeds": s.seeds, "target": 0.99,
                   "test_size": s.test_size, "n_cells": len(results),
                   "n_errors": sum(r["status"] == "error" for r in results), "cells": cells}
        summary["cpu_s"] = round(sum(r.get("cpu_s") or 0 for r in results), 1)
        summary["claims"] = self.claims(self.table(results), s)
        return summary

    def claims(self, table: dict, s: SizeScale) -> list[dict]:
        return []

    @staticmethod
    def acc(table: dict, label: str, N: int, width: int) -> float | None:
        return table.get(label, {}).get((N, width))

    # --- figures ------------------------------------------------------------------------
    def plot(self, results: list[dict], summary: dict, out: Path) -> list[Path]:
        return heatmaps(results, self, out / "heatmaps") + val_curves(results, self, out / "val_curves")

    @classmethod
    def text_summary(cls, summary: dict) -> str:
        lines = [f"{summary['preset']}{' (quick)' if summary.get('quick') else ''}: {summary['n_cells']} cells "
                 f"({summary['n_errors']} errors) in {summary.get('wall_s', 0):.0f}s wall, {summary.get('cpu_s', 0):.0f}s CPU; test accuracy at length N "
                 f"(lr grid {summary['lrs']}, <= {summary['steps']} steps, early stop at 99% validation accuracy)"]
        by = defaultdict(dict)
        for c in summary["cells"]:
            by[c["label"]].setdefault(c["N"], []).append(c["test_acc"])
        Ns = summary["Ns"]
        lines.append("  " + f"{'model':<22}" + "".join(f"{'N=' + str(N):>9}" for N in Ns))
        for lab in sorted(by):
            row = []
            for N in Ns:
                v = [a for a in by[lab].get(N, []) if a is not None]
                row.append(f"{100 * sum(v) / len(v):8.1f}%" if v else f"{'n/a':>9}")
            lines.append(f"  {lab:<22}" + "".join(row))
        for c in summary.get("claims", []):
            lines.append(f"  claim {'HELD' if c['held'] else 'DID NOT HOLD'}: {c['text']}")
        return "\n".join(lines)


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _claim(text: str, held: bool, **extra) -> dict:
    return {"text": text, "held": bool(held), **extra}


@PRESETS.register("lookup-fig2")
class LookupFig2(SizePreset):
    description = "Index lookup: 1-layer Transformer vs LSTM, Mamba-style and DSS over lengths (paper A, Fig. 2 left)"
    runtime = {"quick": "about 5 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "index-lookup"
    # one head, as in Theorem 1's construction. Variable training lengths make the largest
    # indices rare (p = N needs k = N), so most of the budget goes into the last few indices.
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(1, (64,), heads=1), lstm((64, 128, 256)),
                                                     mamba((64, 128, 256)), dss((64, 128, 256))),
                     lrs=(2e-3, 1e-3, 3e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(20, 50, 100), archs=(tf(1, (64,), heads=1), lstm((64,))),
                      lrs=(2e-3,), steps=4000, eval_every=200, val_size=500, test_size=5000)

    def claims(self, table: dict, s: SizeScale) -> list[dict]:
        N = 100 if 100 in s.Ns else max(s.Ns)
        t, l_ = self.acc(table, "TF-(1,64)", N, 64), self.acc(table, "LSTM-64", N, 64)
        out = [_claim(f"TF-(1,64) reaches >= 95% test accuracy on index lookup at N={N} ({_pct(t)})",
                      t is not None and t >= 0.95, value=t)]
        out.append(_claim(f"LSTM-64 is far lower at N={N}: at least 30 points below TF-(1,64) ({_pct(l_)} vs {_pct(t)})",
                          t is not None and l_ is not None and l_ <= t - 0.30, value=l_))
        return out


@PRESETS.register("dyck-fig2")
class DyckFig2(SizePreset):
    description = "Bounded Dyck-(2,2): TF-(1,w) and TF-(2,64) vs LSTM-64 and Mamba-style-64 (paper A, Fig. 2 right)"
    runtime = {"quick": "about 5 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "dyck"
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(1, (64, 128, 256)), tf(2, (64,)), lstm((64,)), mamba((64,))),
                     lrs=(1e-3, 3e-4, 1e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(20, 50, 100), archs=(tf(1, (64,)), lstm((64,))),
                      lrs=(1e-3,), steps=1000, eval_every=100, val_size=500, test_size=5000)

    def claims(self, table: dict, s: SizeScale) -> list[dict]:
        lo, hi = min(s.Ns), max(s.Ns)
        ls = {N: self.acc(table, "LSTM-64", N, 64) for N in s.Ns}
        ok = all(v is not None and v >= 0.95 for v in ls.values())
        out = [_claim("LSTM-64 reaches >= 95% on Dyck-(2,2) at every length ("
                      + ", ".join(f"N={N}: {_pct(v)}" for N, v in ls.items()) + ")", ok)]
        a, b = self.acc(table, "TF-(1,64)", lo, 64), self.acc(table, "TF-(1,64)", hi, 64)
        seq = [self.acc(table, "TF-(1,64)", N, 64) for N in s.Ns]
        out.append(_claim(f"TF-(1,64)'s Dyck accuracy falls as N grows (N={lo}: {_pct(a)} -> N={hi}: {_pct(b)}; "
                          "held = lower at the largest N than at the smallest, by >= 2 points)",
                          a is not None and b is not None and b <= a - 0.02,
                          values=seq))
        return out


@PRESETS.register("mamba-width")
class MambaWidth(SizePreset):
    description = "Index lookup with Mamba-style models across widths and lengths (paper A, Fig. 3)"
    runtime = {"quick": "about 5 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "index-lookup"
    ref_width = 32
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(mamba((32, 64, 128, 256, 512)),),
                     lrs=(1e-3, 3e-4, 1e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(10, 20, 40), archs=(mamba((16, 32, 64), d_state=8),),
                      lrs=(3e-3,), steps=1500, eval_every=100, val_size=500, test_size=2000)

    def claims(self, table: dict, s: SizeScale) -> list[dict]:
        widths = s.archs[0].widths
        lo, hi = min(s.Ns), max(s.Ns)
        out = []
        falls = [(w, self.acc(table, f"Mamba-{w}", lo, w), self.acc(table, f"Mamba-{w}", hi, w)) for w in widths]
        out.append(_claim("At every width, Mamba's accuracy is lower at the largest N than at the smallest ("
                          + "; ".join(f"w={w}: {_pct(a)} -> {_pct(b)}" for w, a, b in falls) + ")",
                          all(a is not None and b is not None and b < a for _, a, b in falls)))
        def mean(w: int) -> float | None:
            v = [self.acc(table, f"Mamba-{w}", N, w) for N in s.Ns]
            return None if any(x is None for x in v) else sum(v) / len(v)

        narrow, wide = mean(min(widths)), mean(max(widths))
        out.append(_claim(f"Wider is better: averaged over N, Mamba-{max(widths)} beats Mamba-{min(widths)} "
                          f"by >= 2 points ({_pct(wide)} vs {_pct(narrow)})",
                          wide is not None and narrow is not None and wide >= narrow + 0.02))
        return out


@PRESETS.register("equality-fig4")
class EqualityFig4(SizePreset):
    description = "String equality (eq-random, eq-one): 2-layer Transformer vs 1-layer, LSTM and Mamba-style (paper A, Fig. 4)"
    runtime = {"quick": "about 5 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "equality"
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(2, (64,)), tf(1, (64,)), lstm((64, 256)), mamba((64, 256))),
                     lrs=(1e-3, 3e-4, 1e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1,
                     variants=(("eq-random", {"variant": "eq-random"}), ("eq-one", {"variant": "eq-one"})))
    quick = SizeScale(Ns=(20, 40), archs=(tf(2, (64,)), lstm((8, 64))),
                      lrs=(1e-3,), steps=2000, eval_every=100, val_size=500, test_size=2000,
                      variants=(("eq-random", {"variant": "eq-random"}), ("eq-one", {"variant": "eq-one"})))

    def claims(self, table: dict, s: SizeScale) -> list[dict]:
        hi = max(s.Ns)
        out = []
        widths = next(a.widths for a in s.archs if a.label == "LSTM")
        for v, _ in s.variants:
            t = self.acc(table, f"TF-(2,64) [{v}]", hi, 64)
            for w in sorted(widths):
                l_ = self.acc(table, f"LSTM-{w} [{v}]", hi, w)
                out.append(_claim(f"{v}: TF-(2,64) beats LSTM-{w} by >= 2 points at N={hi} ({_pct(t)} vs {_pct(l_)})",
                                  t is not None and l_ is not None and t >= l_ + 0.02))
        return out


# --- figures -------------------------------------------------------------------------------
def _families(results: list[dict]) -> dict[str, list[dict]]:
    fam: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        lab, w = r["label"], r["width"]
        key = lab.replace(f",{w})", ",w)") if lab.startswith("TF") else lab.replace(f"-{w}", "-w", 1)
        fam[key].append(r)
    return dict(sorted(fam.items()))


def heatmaps(results: list[dict], preset: SizePreset, stem: Path) -> list[Path]:
    """One panel per architecture family: mean test accuracy, rows = widths, columns = N."""
    import numpy as np

    from ...reporting.plots import plt, save

    fams = _families(results)
    n = max(1, len(fams))
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols + 1.0, 2.5 * rows + 0.5), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[n:]:
        ax.axis("off")
    im = None
    for ax, (fam, rs) in zip(axes.flat, fams.items()):
        Ns = sorted({r["N"] for r in rs})
        ws = sorted({r["width"] for r in rs})
        grid = np.full((len(ws), len(Ns)), np.nan)
        for i, w in enumerate(ws):
            for j, N in enumerate(Ns):
                v = [r["test_acc"] for r in rs if r["N"] == N and r["width"] == w and r["test_acc"] is not None]
                if v:
                    grid[i, j] = float(np.mean(v))
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", origin="lower", aspect="auto")
        for i in range(len(ws)):
            for j in range(len(Ns)):
                txt = "–" if np.isnan(grid[i, j]) else f"{100 * grid[i, j]:.0f}"
                ax.text(j, i, txt, ha="center", va="center", fontsize=8,
                        color="w" if np.isnan(grid[i, j]) or grid[i, j] < 0.6 else "k")
        ax.set_xticks(range(len(Ns)), [str(N) for N in Ns])
        ax.set_yticks(range(len(ws)), [str(w) for w in ws])
        ax.set_xlabel("length N")
        ax.set_ylabel("width")
        ax.set_title(fam, fontsize=9)
    if im is not None:
        fig.colorbar(im, ax=list(axes.flat), shrink=0.8, label="test accuracy")
    fig.suptitle(f"{preset.registry_name}: test accuracy (%)", fontsize=10)
    return save(fig, stem)


def val_curves(results: list[dict], preset: SizePreset, stem: Path) -> list[Path]:
    """Validation accuracy over training steps of each cell's selected learning rate, one panel
    per length N (first seed), one line per model."""
    from ...reporting.plots import MARKERS, plt, save

    Ns = sorted({r["N"] for r in results})
    fig, axes = plt.subplots(1, max(1, len(Ns)), figsize=(3.4 * max(1, len(Ns)), 3.2), squeeze=False, sharey=True,
                             layout="constrained")
    labels = sorted({r["label"] for r in results})
    for ax, N in zip(axes[0], Ns):
        for k, lab in enumerate(labels):
            rs = [r for r in results if r["N"] == N and r["label"] == lab and r["seed"] == 0 and r["runs"]]
            if not rs:
                continue
            r = rs[0]
            run = next((x for x in r["runs"] if x["lr"] == r["best_lr"]), r["runs"][0])
            steps = [p[0] for p in run["curve"]]
            acc = [p[1] for p in run["curve"]]
            ax.plot(steps, acc, marker=MARKERS[k % len(MARKERS)], markersize=3, label=lab)
        ax.axhline(0.99, color="grey", lw=0.8, ls="--")
        ax.set_title(f"N = {N}", fontsize=9)
        ax.set_xlabel("training steps")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("validation accuracy")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{preset.registry_name}: validation curves (selected lr)", fontsize=10)
    return save(fig, stem)
