"""Size experiments (paper A, SPEC 3): test accuracy over a (length x width) grid per
architecture, with validation curves.

A cell is one (architecture, width, length N, seed). Each learning rate of the cell's grid is
an ordinary run of the one engine: cross-entropy, Adam (AdamW without decay), a fresh batch
every step and a step budget; the held-out set is the cell's validation set (length N, drawn
once from the seed's validation role); training stops at the first validation point with
accuracy >= target, keeps its best-validation checkpoint (training on these tasks can
oscillate late on) and tests it on `test_size` fresh examples at length N (the seed's test
role). Every learning rate of a cell shares the initialisation and the training stream, so
the grid compares learning rates on equal terms, and they train as one stacked computation
where that pays. Choosing the learning rate is analysis (`select`): the best validation
accuracy wins, ties go to the one that got there in fewer steps, then to the first in the grid.
"""
from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..config import RunConfig, TrainConfig
from ..results import Claim, RunResult, Summary
from .base import Experiment, _fmt_setting, claim_lines, run_settings

TARGET = 0.99  # early stop at validation accuracy >= target
BATCH = 64


@dataclass(frozen=True)
class SizeArch:
    """An architecture family swept over widths; `width_key` is the model parameter set to
    the width (e.g. 'width', or 'hidden' for the LSTM)."""

    label: str  # e.g. "TF-1"
    arch: str
    params: dict = field(default_factory=dict)
    widths: tuple[int, ...] = (64,)
    width_key: str = "width"
    # where a scale gives this family less than the others (a CPU scale: an expensive model at
    # the lengths its claim needs, or fewer steps); None: the scale's own
    Ns: tuple[int, ...] | None = None
    steps: int | None = None
    lrs: tuple[float, ...] | None = None

    def name(self, width: int) -> str:
        return f"{self.label}-{width}" if not self.label.startswith("TF") else f"TF-({self.label[3:]},{width})"

    def model_params(self, width: int) -> dict:
        heads = {"heads": max(1, min(4, width // 16))} if self.arch == "tf-preln" else {}
        return {**heads, **self.params, self.width_key: width}


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


def tf(layers: int, widths: tuple[int, ...] = (64,), heads: int | None = None, **only) -> SizeArch:
    # default: 4 heads of width 16 at width 64 (fewer for narrow models); learned positions, causal
    extra = {} if heads is None else {"heads": heads}
    return SizeArch(f"TF-{layers}", "tf-preln", {"layers": layers, "positions": "learned", "causal": True, **extra},
                    widths, **only)


def lstm(widths: tuple[int, ...] = (64,), **only) -> SizeArch:
    return SizeArch("LSTM", "lstm", {"layers": 1}, widths, "hidden", **only)


def mamba(widths: tuple[int, ...] = (64,), only: dict | None = None, **kw) -> SizeArch:
    return SizeArch("Mamba", "mamba", {"layers": 1, **kw}, widths, **(only or {}))


def dss(widths: tuple[int, ...] = (64,)) -> SizeArch:
    return SizeArch("DSS", "s4d", {"layers": 1}, widths)


@dataclass(frozen=True)
class Cell:
    label: str  # the architecture's name in tables and figures, e.g. "TF-(1,64)"
    N: int
    width: int
    seed: int
    runs: tuple[RunConfig, ...]  # one per learning rate, in grid order


def cell_runs(task: str, arch: SizeArch, width: int, N: int, seed: int, s: SizeScale, label: str,
              task_params: dict, device: str = "auto") -> tuple[RunConfig, ...]:
    def train(lr: float) -> TrainConfig:
        return TrainConfig(lr=lr, weight_decay=0.0, batch_size=BATCH, budget=(arch.steps or s.steps) * BATCH,
                           threshold=1 - TARGET + 1e-12, eval_every=s.eval_every, eval_size=s.val_size,
                           eval_mode="every", keep_best=True, test_size=s.test_size, device=device)

    return tuple(RunConfig(task, arch.arch, {**task_params, "N": N}, arch.model_params(width), train(lr), seed, label)
                 for lr in arch.lrs or s.lrs)


def select(runs: list[RunResult | None]) -> tuple[int, RunResult] | None:
    """The learning rate of a cell chosen on validation: best validation accuracy, then fewer
    steps to it, then the first in the grid. Runs that failed take no part."""
    best = None
    for k, r in enumerate(runs):
        if r is None or r.status == "error" or r.best_metric is None:
            continue
        key = (-r.best_metric, -(r.best_samples or 0), -k)
        if best is None or key > best[0]:
            best = (key, k, r)
    return None if best is None else (best[1], best[2])


def _steps(r: RunResult) -> int:
    """Steps trained: to the target when reached, else the whole budget (or to divergence)."""
    bs = r.config["train"]["batch_size"]
    if r.status == "ok" and r.samples:
        return r.samples // bs
    return (r.curve[-1][0] if r.curve else r.config["train"]["budget"]) // bs


def cell_record(cell: Cell, results: list[RunResult | None]) -> dict:
    rec = {"label": cell.label, "N": cell.N, "width": cell.width, "seed": cell.seed,
           "arch": cell.runs[0].arch, "task": cell.runs[0].task}
    runs = [{"lr": c.train.lr, "status": r.status, "steps": _steps(r), "val_acc": _acc(r.best_metric),
             "best_step": (r.best_samples or 0) // BATCH, "run_id": r.run_id,
             "curve": [(s // BATCH, 1 - m) for s, m in r.curve]}
            for c, r in zip(cell.runs, results) if r is not None and r.status != "error"]
    chosen = select(results)
    done = [r for r in results if r is not None]
    rec["wall_s"] = round(sum(r.wall_s for r in done), 3)
    if chosen is None:
        errors = [r.error for r in done if r.error]
        rec.update(status="error" if done else "missing", test_acc=None, val_acc=None, best_lr=None, steps=None,
                   reached=False, params=None, state_size=None, runs=runs,
                   error=errors[0].splitlines()[0] if errors else None)
        return rec
    k, r = chosen
    rec.update(status="ok", test_acc=_acc(r.test_metric), val_acc=_acc(r.best_metric), best_lr=cell.runs[k].train.lr,
               steps=_steps(r), reached=r.status == "ok", params=r.params, state_size=r.state_size, runs=runs,
               error=None)
    return rec


def _acc(err: float | None) -> float | None:
    return None if err is None else 1.0 - err


CELL_COLUMNS = ["label", "arch", "task", "N", "width", "seed", "test_acc", "val_acc", "best_lr", "steps",
                "reached", "status", "params", "state_size", "wall_s"]


class SizeExperiment(Experiment):
    """A (length x width) accuracy grid. A figure names its task, its scales and its claims
    (`claims(table, scale)`, reading `table[label][(N, width)]`, the mean test accuracy)."""

    task: str
    full: SizeScale
    quick: SizeScale

    def cells(self, scale: str, device: str = "auto") -> list[Cell]:
        s = self.scale(scale)
        out = []
        for vname, vparams in s.variants:
            for a in s.archs:
                for w in a.widths:
                    for N in s.Ns:
                        if a.Ns is not None and N not in a.Ns:
                            continue
                        for seed in range(s.seeds):
                            label = a.name(w) + (f" [{vname}]" if vname else "")
                            out.append(Cell(label, N, w, seed,
                                            cell_runs(self.task, a, w, N, seed, s, label, dict(vparams), device)))
        return out

    def plan(self, scale: str, device: str = "auto") -> list[RunConfig]:
        return [c for cell in self.cells(scale, device) for c in cell.runs]

    def planned_cells(self, scale: str) -> list[Cell]:
        """The cells as they were run: `cells(scale)` with the summary's --set overrides applied
        (the same override of the whole plan that planned the runs, so the run ids match)."""
        cells = self.cells(scale)
        if not self.overrides:
            return cells
        from .plan import override_plan

        flat = override_plan([c for cell in cells for c in cell.runs], self.overrides, self.registry_name)
        out, i = [], 0
        for cell in cells:
            runs = tuple(flat[i:i + len(cell.runs)])
            i += len(cell.runs)
            out.append(dataclasses.replace(cell, seed=runs[0].seed, runs=runs))
        return out

    def analyze(self, results: list[RunResult], scale: str) -> Summary:
        s = self.scale(scale)
        by_id = {r.run_id: r for r in results}
        cells = [cell_record(c, [by_id.get(r.run_id) for r in c.runs]) for c in self.planned_cells(scale)]
        # the settings as the runs were made (a --set changes them), not the scale's
        settings, notes = run_settings(results, {"budget": "train.budget", "eval_size": "train.eval_size",
                                                 "test_size": "train.test_size", "threshold": "train.threshold"},
                                       {"budget": s.steps * BATCH, "eval_size": s.val_size, "test_size": s.test_size,
                                        "threshold": 1 - TARGET + 1e-12, "seeds": s.seeds})
        budgets = settings["budget"] if isinstance(settings["budget"], list) else [settings["budget"]]
        thresholds = [float(t) for t in (settings["threshold"] if isinstance(settings["threshold"], list)
                                         else [settings["threshold"]]) if t is not None]
        trains = [r.config.get("train") or {} for r in results]
        batch = max([int(t["batch_size"]) for t in trains if "batch_size" in t] or [BATCH])
        lrs = sorted({float(t["lr"]) for t in trains if "lr" in t}) or \
            sorted({lr for a in s.archs for lr in a.lrs or s.lrs})
        data = {"task": self.task, "Ns": sorted({(r.config.get("task_params") or {}).get("N") for r in results} - {None}) or list(s.Ns),
                "lrs": lrs, "steps": max(budgets) // batch, "seeds": settings["seeds"],
                "seed_list": settings["seed_list"], "budget": settings["budget"], "eval_size": settings["eval_size"],
                "target": round(1 - max(thresholds), 6) if thresholds else TARGET, "threshold": settings["threshold"],
                "test_size": settings["test_size"], "n_cells": len(cells),
                "n_errors": sum(c["status"] != "ok" for c in cells), "cells": cells, "notes": notes}
        return Summary(self.registry_name, scale, data, self.claims(accuracy_table(cells), s), results)

    def claims(self, table: dict, s: SizeScale) -> list[Claim]:
        """The figure's claims from {label: {(N, width): test accuracy}} at the scale whose
        settings are `s` (its name: `scale_name(s)`)."""
        return []

    def scale_name(self, s: SizeScale) -> str:
        """The name of the scale whose settings equal `s` (compared by value, not identity)."""
        return next((n for n in self.scales if self.scale(n) == s), "")

    @staticmethod
    def acc(table: dict, label: str, N: int, width: int) -> float | None:
        return table.get(label, {}).get((N, width))

    def table(self, summary: Summary) -> list[dict]:
        return [{k: c.get(k) for k in CELL_COLUMNS} for c in summary.data["cells"]]

    def figures(self, summary: Summary, out: Path) -> list[Path]:
        cells = summary.data["cells"]
        return heatmaps(cells, self.registry_name, out / "heatmaps") + val_curves(cells, self.registry_name,
                                                                                 out / "val_curves")

    def text(self, summary: Summary) -> str:
        d = summary.data
        lines = [f"{summary.experiment} ({summary.scale}): {d['n_cells']} cells ({d['n_errors']} errors) in "
                 f"{summary.wall_s or 0:.0f}s wall; test accuracy at length N (lr grid {d['lrs']}, <= {d['steps']} "
                 f"steps, early stop at {100 * d['target']:.0f}% validation accuracy; validation "
                 f"{_fmt_setting(d.get('eval_size'))}, test {_fmt_setting(d.get('test_size'))} examples, "
                 f"seed{'s' if len(d.get('seed_list') or []) > 1 else ''} {_fmt_setting(d.get('seed_list') or [])})"]
        by: dict[str, dict[int, list]] = defaultdict(dict)
        for c in d["cells"]:
            by[c["label"]].setdefault(c["N"], []).append(c["test_acc"])
        lines.append("  " + f"{'model':<22}" + "".join(f"{'N=' + str(N):>9}" for N in d["Ns"]))
        for lab in sorted(by):
            row = []
            for N in d["Ns"]:
                v = [a for a in by[lab].get(N, []) if a is not None]
                row.append(f"{100 * sum(v) / len(v):8.1f}%" if v else f"{'n/a':>9}")
            lines.append(f"  {lab:<22}" + "".join(row))
        return "\n".join(lines + claim_lines(summary.claims))


def accuracy_table(cells: list[dict]) -> dict[str, dict[tuple[int, int], float]]:
    """{label: {(N, width): mean test accuracy over seeds}}."""
    acc: dict[str, dict[tuple[int, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        if c["test_acc"] is not None:
            acc[c["label"]][(c["N"], c["width"])].append(c["test_acc"])
    return {lab: {k: sum(v) / len(v) for k, v in d.items()} for lab, d in acc.items()}


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


# --- figures -------------------------------------------------------------------------------
def _families(cells: list[dict]) -> dict[str, list[dict]]:
    fam: dict[str, list[dict]] = defaultdict(list)
    for c in cells:
        lab, w = c["label"], c["width"]
        key = lab.replace(f",{w})", ",w)") if lab.startswith("TF") else lab.replace(f"-{w}", "-w", 1)
        fam[key].append(c)
    return dict(sorted(fam.items()))


def heatmaps(cells: list[dict], name: str, stem: Path) -> list[Path]:
    """One panel per architecture family: mean test accuracy, rows = widths, columns = N."""
    import numpy as np

    from ..reporting.plots import plt, save

    fams = _families(cells)
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
        ax.set_title(fam, fontsize=9)
    if im is not None:
        fig.colorbar(im, ax=list(axes.flat), shrink=0.8, label="test accuracy")
    fig.suptitle(f"{name}: test accuracy (%)", fontsize=10)
    return save(fig, stem)


def val_curves(cells: list[dict], name: str, stem: Path) -> list[Path]:
    """Validation accuracy over training steps of each cell's selected learning rate, one panel
    per length N (first seed), one line per model."""
    from ..reporting.plots import MARKERS, plt, save

    Ns = sorted({c["N"] for c in cells})
    fig, axes = plt.subplots(1, max(1, len(Ns)), figsize=(3.4 * max(1, len(Ns)), 3.2), squeeze=False, sharey=True,
                             layout="constrained")
    labels = sorted({c["label"] for c in cells})
    first = min((c["seed"] for c in cells), default=0)  # the first seed (a --set seed=S shifts them)
    for ax, N in zip(axes[0], Ns):
        for k, lab in enumerate(labels):
            cs = [c for c in cells if c["N"] == N and c["label"] == lab and c["seed"] == first and c["runs"]]
            if not cs:
                continue
            c = cs[0]
            run = next((x for x in c["runs"] if x["lr"] == c["best_lr"]), c["runs"][0])
            ax.plot([p[0] for p in run["curve"]], [p[1] for p in run["curve"]], marker=MARKERS[k % len(MARKERS)],
                    markersize=3, label=lab)
        ax.axhline(TARGET, color="grey", lw=0.8, ls="--")
        ax.set_title(f"N = {N}", fontsize=9)
        ax.set_xlabel("training steps")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("validation accuracy")
    axes[0][-1].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{name}: validation curves (selected lr)", fontsize=10)
    return save(fig, stem)
