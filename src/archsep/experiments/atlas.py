"""The atlas: every built-in sequence mixer, at the Transformer's parameter count, on each
separation task, measured alike: samples until the held-out error drops below a threshold,
against the length N, fitted as samples ~ N^alpha per (task, mixer), and for each mixer the
verdict of "the Transformer's exponent is the smaller" (`analysis.separation.separation`).

Alike means: one step budget, one learning rate, one evaluation schedule and one threshold per
task for every mixer; each mixer's width chosen per (task, N) so that its trainable parameters
are within 5% of the Transformer's (`models.matching`, MAD's iso-parameter protocol). A task's
verdicts need its control (the Transformer reaches the threshold at every N; otherwise no
verdict), and its threshold must lie below the task's best trivial predictor's error.

Not in the atlas: qSTR (its targets read later tokens, which causal mixers cannot see; paper B's
presets measure it), and paper B's `tf-b`, `rnn-b`, `ffn` (not mixers of a causal stack).

A mixer of one's own joins the comparison with `--with NAME` (`Atlas.with_archs`): a registered
arch (a plugin's, loaded with `--import FILE`) planned beside the built-in ones on every task,
matched alike. The analysis finds the arms from the runs' labels ("task/ARM"), so a store that
holds such an arm is analysed with it, whatever the preset's own list.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..analysis.grid import CurveKey, fit_grid, group
from ..analysis.separation import separation
from ..config import RunConfig, TrainConfig
from ..errors import ArchsepError, has_control, unknown
from ..models import MODELS
from ..registry import PLUGIN_HINT, init_fields
from ..models.matching import match_width, measure, width_field
from ..results import Claim, RunResult, Summary
from .base import EXPERIMENTS, Experiment, _fmt_setting, claim_lines, n_runs, run_settings, time_text
from .samples import Arch

TF = Arch("TF", "tf-preln", {"layers": 2, "width": 32, "heads": 2})
HEADS2 = {"layers": 2, "heads": 2}  # two heads: widths in steps of 2 (4 with rotary positions) match finely
MIXERS = (
    Arch("LSTM", "lstm", {"layers": 2}), Arch("Mamba", "mamba", {"layers": 2}), Arch("S4D", "s4d", {"layers": 2}),
    Arch("RetNet", "retnet", HEADS2), Arch("LinTF", "linear-tf", HEADS2), Arch("GLA", "gla", HEADS2),
    Arch("Mamba2", "mamba2", HEADS2), Arch("DeltaNet", "deltanet", HEADS2), Arch("SWA", "swa", HEADS2),
    Arch("BaseConv", "baseconv", {"layers": 2}), Arch("RWKV", "rwkv", {"layers": 2}),
    Arch("Hyena", "hyena", {"layers": 2}), Arch("H3", "h3", {"layers": 2}), Arch("Based", "based", HEADS2),
)


@dataclass(frozen=True)
class AtlasTask:
    """One task of the atlas; `train` overrides the scale's training settings for every mixer of
    this task alike (its budget, its threshold)."""

    label: str
    task: str
    params: dict
    Ns: tuple[int, ...]
    train: dict = field(default_factory=dict)


# The cpu scale's lengths, budgets and thresholds were calibrated on the control, TF-(2,32) at
# lr 1e-3 (2 seeds, budget 300-400k): its largest samples-to-threshold at the largest N were
# lookup (16 symbols) 59k at N = 32, Dyck 54k at N = 16 (149k and one seed stuck at 0.32 error
# after 300k at N = 24), equality (error < 0.05) 94k at N = 16, MQAR 34k at N = 32, recall 32k
# at N = 16 (98k at N = 32). Each budget is 1.4-1.8x that (equality's 1.36x); the lengths stop where the
# control stops being cheap. Equality's threshold is 0.05: counting symbols (order ignored)
# already errs only 0.101-0.106 at N = 8-16 (0.064 at 32), so error < 0.1 would sit a hair below
# a predictor that ignores the order the task is about.
TASKS = (
    AtlasTask("lookup", "index-lookup", {"train_lengths": "fixed", "vocab": 16}, (8, 16, 32), {"budget": 88_000}),
    AtlasTask("dyck", "dyck", {}, (8, 12, 16), {"budget": 88_000}),
    AtlasTask("equality", "equality", {"train_lengths": "fixed"}, (8, 12, 16),
              {"budget": 128_000, "threshold": 0.05}),
    AtlasTask("mqar", "mqar", {}, (8, 16, 32), {"budget": 56_000}),
    AtlasTask("recall", "in-context-recall", {}, (8, 12, 16), {"budget": 56_000}),
)


@dataclass(frozen=True)
class AtlasScale:
    tasks: tuple[AtlasTask, ...]
    archs: tuple[Arch, ...]
    seeds: int
    train: dict
    indicative: str = ""


TRAIN = {"lr": 1e-3, "batch_size": 64, "threshold": 0.1, "eval_every": 25, "eval_size": 512}


@EXPERIMENTS.register("atlas")
class Atlas(Experiment):
    description = ("Every built-in mixer at the Transformer's parameter count on lookup, Dyck, equality, MQAR "
                   "and recall: samples-to-threshold exponents and the verdict against TF")
    scales = ("quick", "cpu", "full")
    runtime = {"quick": "about 90 s (2 CPU cores)",
               "cpu": "68 min measured (2 CPU cores; --dry-run says 1.9 h, an upper bound)",
               "full": "not run (a GPU's: see --dry-run)"}
    quick = AtlasScale((AtlasTask("lookup", "index-lookup", {"train_lengths": "fixed", "vocab": 16}, (4, 6, 8),
                                  {"budget": 40_000}),), (TF, MIXERS[0], MIXERS[6]), 3, TRAIN,
                       indicative="quick scale: one task, a few mixers, short lengths")
    cpu = AtlasScale(TASKS, (TF, *MIXERS), 3, TRAIN)
    # full: each task at twice the lengths, 5 seeds and a budget that paper A's Transformers meet
    full = AtlasScale(tuple(AtlasTask(t.label, t.task, t.params, tuple(2 * n for n in t.Ns),
                                      {**t.train, "budget": 500_000}) for t in TASKS),
                      (TF, *MIXERS), 5, TRAIN)
    extra: tuple[Arch, ...] = ()  # mixers of one's own beside the built-in ones (`with_archs`)

    def with_archs(self, names: Iterable[str]) -> Atlas:
        """This atlas with the registered archs `names` (a plugin's mixer, loaded with --import)
        planned beside the built-in mixers on every task of every scale: Arch(NAME, NAME,
        {"layers": 2}), its width matched like theirs. The runs of the built-in arms stay the
        same runs (same ids): only runs are added. A name repeated counts once; an unknown arch,
        or one of the atlas's own mixers, is refused."""
        own = {k: a for a in (TF, *MIXERS) for k in (a.label.lower(), a.arch)}
        extra = []
        for name in sorted(dict.fromkeys(names), key=lambda n: (n.lower(), n)):
            if not name or "/" in name or "$" in name or has_control(name):
                raise ArchsepError.at("with", f"{name!r}: expected an arch's name, printable, without '/' or '$' "
                                              "(its runs' label is TASK/NAME)")
            hit = own.get(name.lower())
            if hit is None:
                try:
                    cls = MODELS.get(name)
                except ArchsepError:
                    raise unknown("with", name, MODELS.names(), f"not a registered arch; {PLUGIN_HINT}") from None
                hit = own.get(getattr(cls, "registry_name", name))  # an alias of one (dss: s4d)
            if hit is not None:
                raise ArchsepError.at("with", f"'{name}' is the atlas's own {hit.label} (arch {hit.arch}); --with adds "
                                              "a mixer that is not among its built-in ones (--scale cpu or full plans "
                                              "every one of those)")
            extra.append(Arch(name, name, {"layers": 2}))
        out = copy.copy(self)
        out.extra = tuple(extra)
        return out

    def plan(self, scale: str, device: str = "auto") -> list[RunConfig]:
        s = self.scale(scale)
        out = []
        for t in s.tasks:
            train = TrainConfig(**{**s.train, **t.train, "device": device})
            for N in t.Ns:
                task_params = {**t.params, "N": N}
                spec = RunConfig(t.task, TF.arch, task_params, dict(TF.params), train).build_task().spec
                target = measure(TF.arch, dict(TF.params), spec)
                for a in (*s.archs, *self.extra):
                    params = dict(a.params) if a is TF else _matched(a, spec, target, a in self.extra,
                                                                     f"{t.label} at N = {N}")
                    out += [RunConfig(t.task, a.arch, task_params, params, train, seed, f"{t.label}/{a.label}")
                            for seed in range(s.seeds)]
        return out

    def analyze(self, results: list[RunResult], scale: str) -> Summary:
        s = self.scale(scale)
        grid = fit_grid(group(results, lambda r: CurveKey(r.config["label"]),
                              lambda r: r.config["task_params"]["N"]))
        claims, rows, notes, by_task = [], [], [], {}
        for t in s.tasks:
            tf = f"{t.label}/{TF.label}"
            if tf not in grid.samples:
                continue
            # a task's settings from its runs' stored configs, never from the preset
            mine = [r for r in results if str(r.config.get("label", "")).startswith(f"{t.label}/")]
            fallback = {**s.train, **t.train}
            settings, disagree = run_settings(mine, {"budget": "train.budget", "threshold": "train.threshold"},
                                         {"budget": fallback.get("budget"), "threshold": fallback.get("threshold")})
            notes += [f"{t.label}: {w}" for w in disagree]
            threshold = settings["threshold"]
            by_task[t.label] = {"budget": settings["budget"], "threshold": threshold, "Ns": list(t.Ns),
                                "seeds": settings["seeds"]}
            trivial = _trivial_error(t)
            beyond = isinstance(threshold, float) and threshold < trivial
            claims.append(Claim("baseline", f"{t.label}: the threshold (error < {threshold}) lies below the best "
                                            f"trivial predictor's error {trivial:.3f}", beyond,
                                {"trivial_error": trivial, "threshold": threshold}))
            cens = sum(int(c.sum()) for c in grid.censored[tf].values())
            control = cens == 0 and len(grid.samples[tf]) == len(t.Ns)
            claims.append(Claim("threshold", f"{t.label}: control: TF reaches the threshold at every N "
                                             f"({cens} censored run(s))", control, {"censored": cens}))
            for label in arms(s.archs, (k.label for k in grid.keys.values()), t.label):
                name = f"{t.label}/{label}"
                if name not in grid.samples:
                    continue
                sep = separation(tf, grid.samples[tf], name, grid.samples[name], censored_a=grid.censored[tf],
                                 censored_b=grid.censored[name])
                held = sep.held if control and beyond else None
                why = "" if control and beyond else " (no verdict: the control or the threshold failed)"
                what = (f"TF's exponent is smaller than {label}'s" if sep.basis == "exponent"
                        else f"TF needs fewer samples than {label}")
                claims.append(Claim("separation", f"{t.label}: {what}: {sep.text()}{why}", held, sep.to_dict()))
                fit = grid.fits.get(name, {})
                n_cens = sum(int(c.sum()) for c in grid.censored[name].values())
                if n_cens == sum(len(c) for c in grid.censored[name].values()):
                    fit = {}  # every run censored: no exponent, only a bound at the budget
                shown = [r for r in sep.ratios if r.kind != "none"]
                rows.append({"task": t.label, "arch": label, "alpha": fit.get("alpha"), "ci": fit.get("ci"),
                             "tf_alpha": grid.fits.get(tf, {}).get("alpha"), "censored": n_cens,
                             "tf_censored": cens, "basis": sep.basis,
                             "ratio_bound": shown[-1].ci[0] if shown and sep.basis == "samples" else None,
                             "verdict": {True: "held", False: "not held", None: "no verdict"}[held]})
        if s.indicative:
            claims = [Claim(c.kind, f"indicative ({s.indicative}): {c.text}", c.held, c.values) for c in claims]
        data = {"tasks": by_task, "seeds": max((v["seeds"] for v in by_task.values()), default=s.seeds),
                "points": grid.points, "fits": grid.fits, "atlas": rows, "notes": notes}
        return Summary(self.registry_name, scale, data, claims, results)

    def text(self, summary: Summary) -> str:
        head = f"{summary.experiment} ({summary.scale}): {n_runs(summary)} runs ({time_text(summary)})"
        lines = [head] + [f"  {t}: N = {'/'.join(map(str, v['Ns']))}, budget {_fmt_setting(v['budget'])} samples, "
                          f"error < {_fmt_setting(v['threshold'])}, {v['seeds']} seeds, every mixer alike"
                          for t, v in summary.data.get("tasks", {}).items()]
        lines.append("  task       mixer      alpha_TF  alpha (95% CI)        censored  basis       bound  "
                     "TF needs fewer?")
        for r in summary.data.get("atlas", []):
            ci = r["ci"] or [math.nan, math.nan]
            alpha = f"{_f(r['alpha'])} [{_f(ci[0])}, {_f(ci[1])}]"
            bound = f">={r['ratio_bound']:.2f}x" if r.get("ratio_bound") is not None else "-"
            lines.append(f"  {r['task']:<10} {r['arch']:<10} {_f(r['tf_alpha']):>8}  {alpha:<22} "
                         f"{r['censored']:>8}  {r.get('basis', 'exponent'):<9} {bound:>7}  {r['verdict']}")
        seps = [c.verdict for c in summary.claims if c.kind == "separation"]
        lines.append(f"  separations: held {seps.count('held')}, did not hold {seps.count('did not hold')}, no verdict "
                     f"{seps.count('no verdict')} (of {len(seps)}); basis 'samples': the mixer's censored runs leave "
                     "its exponent unidentified, the verdict rests on the ratio of median samples at the largest N "
                     "(bound: its 95% lower bound)")
        if (re := summary.data.get("recomputed")):
            lines.append(f"  recomputed from runs.csv by the current analysis: {re['verdicts_changed']} of "
                         f"{re['claims']} claims changed verdict ({re['by']})")
        return "\n".join(lines + claim_lines([c for c in summary.claims if c.kind != "separation"]))

    def figures(self, summary: Summary, out: Path) -> list[Path]:
        from ..reporting.plots import plt, save

        rows = summary.data.get("atlas", [])
        tasks = list(dict.fromkeys(r["task"] for r in rows))
        archs = list(dict.fromkeys(r["arch"] for r in rows))
        if not rows:
            return []
        grid = [[math.nan] * len(archs) for _ in tasks]
        fig, ax = plt.subplots(figsize=(1.0 + 0.62 * len(archs), 1.4 + 0.5 * len(tasks)), layout="constrained")
        for r in rows:
            i, j = tasks.index(r["task"]), archs.index(r["arch"])
            grid[i][j] = colour_value(r)
            mark = {"held": "✓", "not held": "✗", "no verdict": "?"}[r["verdict"]]
            if r.get("ratio_bound") is not None and r["verdict"] == "held":
                mark += f"\n≥{r['ratio_bound']:.1f}x"
            ax.text(j, i, f"{mark}\n{r['censored']}c" if r["censored"] else mark, ha="center", va="center", fontsize=7)
        cmap = plt.get_cmap("RdBu_r").with_extremes(bad="0.85")
        im = ax.imshow(grid, cmap=cmap, vmin=-2, vmax=2, aspect="auto")
        ax.set_xticks(range(len(archs)), archs, rotation=45, ha="right")
        ax.set_yticks(range(len(tasks)), tasks)
        ax.set_title("colour: alpha_mixer − alpha_TF where both were measured (red: TF's the smaller); grey: a "
                     "censored\nmixer's exponent, not compared. ✓ held, ✗ not held, ? no verdict; ≥r x: the mixer "
                     "needs at least\nr times the TF's samples at the largest N (95% bound); c: censored runs",
                     fontsize=7)
        fig.colorbar(im, ax=ax, shrink=0.8)
        return save(fig, out / "figure")


def colour_value(row: dict) -> float:
    """What a cell's colour shows: alpha_mixer - alpha_TF where the TF's runs all reached the
    threshold and so did the mixer's, or where the mixer's censored runs (entering at the
    budget: a lower bound on its exponent) still leave the gap positive; nan (grey) otherwise,
    so that a censored mixer's flat line at the budget never reads as scaling better."""
    if row["alpha"] is None or row["tf_alpha"] is None or row.get("tf_censored", 0):
        return math.nan
    gap = row["alpha"] - row["tf_alpha"]
    if row["censored"] and (gap <= 0 or row.get("basis") == "samples"):
        return math.nan
    return gap


def arms(archs: tuple[Arch, ...], labels: Iterable[str], task: str) -> list[str]:
    """The mixers of one task to compare with the TF, by label: the scale's built-in ones in its
    order, then every other arm the runs hold ("task/ARM" in `labels`: a mixer added with --with)
    in name order."""
    own = [a.label for a in archs if a is not TF]
    held = {lab.split("/", 1)[1] for lab in labels if lab.split("/", 1)[0] == task and "/" in lab}
    return own + sorted(held - set(own) - {TF.label}, key=lambda n: (n.lower(), n))


def _matched(a: Arch, spec, target: int, added: bool = False, where: str = "") -> dict:
    """`a`'s parameters with its width chosen so that its parameters are within 5% of `target`;
    where no width is (widths step by the heads; a small model's count jumps), the Transformer's
    width with the MLP's width chosen instead. A mixer `added` with --with that cannot be
    matched (or built) is one error naming --with, the arch and `where`."""
    if added:
        try:
            return _matched(a, spec, target)
        except ArchsepError as e:
            raise ArchsepError.at("with", f"{a.arch} on {where}: {e}") from None
    field = width_field(a.arch)
    try:
        return {**a.params, field: match_width(a.arch, dict(a.params), spec, target).value}
    except ArchsepError:
        if "mlp_width" not in init_fields(MODELS.get(a.arch)):
            raise
    params = {**a.params, "width": TF.params["width"]}
    return {**params, "mlp_width": match_width(a.arch, params, spec, target, field="mlp_width").value}


def _trivial_error(t: AtlasTask) -> float:
    """1 - the best trivial predictor's accuracy, at the N where it is best (the strictest: on
    Dyck and equality the trivial predictors improve with N), from a fixed seed."""
    errors = []
    for N in t.Ns:
        task = RunConfig(t.task, TF.arch, {**t.params, "N": N}, dict(TF.params)).build_task()
        errors.append(1.0 - task.best_trivial(2000, torch.Generator().manual_seed(0))[1])
    return min(errors)


def _f(v) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else f"{v:.2f}"
