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
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ..analysis.size import CellKey, accuracy_table, extra_points, size_points
from ..analysis.size import select as select  # re-exported: the presets' selection rule
from ..analysis.size import cell_record as size_record
from ..config import RunConfig, TrainConfig
from ..reporting.plots import size_figures
from ..results import Claim, RunResult, Summary
from . import size_search
from .base import Experiment, _fmt_setting, claim_lines, run_settings, time_text
from .size_search import SearchScale
from .size_claims import CONTROL as CONTROL  # re-exported: the presets name it
from .size_claims import SizeClaims
from .size_claims import pct as pct  # re-exported
from .size_claims import untrained as untrained  # re-exported

TARGET = 0.99  # early stop at validation accuracy >= target
BATCH = 64
BASELINE_SIZE, BASELINE_SEED = 5000, 20251  # the trivial baselines' test set: its size and its own seed


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

    def name(self, width: int | str) -> str:
        return f"{self.label}-{width}" if not self.label.startswith("TF") else f"TF-({self.label[3:]},{width})"

    def family(self) -> str:
        """The name without a width: "LSTM-w", "TF-(1,w)"."""
        return self.name("w")

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
    # the same stopping rules for every arm (TrainConfig): a plateau of `patience` evaluations
    # without a new best, and successive halving across the lr grid at these fractions of the
    # budget (empty, or a one-lr grid: off)
    patience: int = 0
    halving: tuple[float, ...] = ()
    # a length curriculum for every arm (TrainConfig.curriculum): ((n, steps), ...); a cell at
    # length N trains the stages with n < N first, then the rest of its budget at N
    curriculum: tuple[tuple[int, int], ...] = ()

    def labels(self) -> list[str]:
        """The arms' names, in the order of `archs` and their widths (e.g. "TF-(2,64)", "LSTM-64")."""
        return [a.name(w) for a in self.archs for w in a.widths]

    def stages(self, N: int) -> tuple[tuple[int, int], ...]:
        """The curriculum of a cell at length N: the stages shorter than N."""
        return tuple(st for st in self.curriculum if st[0] < N)

    def unequal(self) -> list[str]:
        """Where this scale's architectures are not trained alike (a step budget, a learning-rate
        grid or lengths of their own): empty for a fair comparison."""
        out = []
        for a in self.archs:
            for what, own, common in (("steps", a.steps, self.steps), ("lrs", a.lrs, self.lrs), ("Ns", a.Ns, self.Ns)):
                if own is not None and own != common:
                    out.append(f"{a.family()}: {what} {own} (the scale's: {common})")
        return out


def tf(layers: int, widths: tuple[int, ...] = (64,), heads: int | None = None, positions: str = "learned",
       **only) -> SizeArch:
    # default: 4 heads of width 16 at width 64 (fewer for narrow models); learned positions, causal
    extra = {} if heads is None else {"heads": heads}
    return SizeArch(f"TF-{layers}", "tf-preln", {"layers": layers, "positions": positions, "causal": True, **extra},
                    widths, **only)


def lstm(widths: tuple[int, ...] = (64,), **only) -> SizeArch:
    return SizeArch("LSTM", "lstm", {"layers": 1}, widths, "hidden", **only)


def mamba(widths: tuple[int, ...] = (64,), only: dict | None = None, **kw) -> SizeArch:
    return SizeArch("Mamba", "mamba", {"layers": 1, **kw}, widths, **(only or {}))


def dss(widths: tuple[int, ...] = (64,)) -> SizeArch:
    return SizeArch("DSS", "s4d", {"layers": 1}, widths)


def retnet(widths: tuple[int, ...] = (64,)) -> SizeArch:
    # one layer of multi-scale retention, 4 heads, the paper's rotation (as RetNetConfig's defaults)
    return SizeArch("RetNet", "retnet", {"layers": 1}, widths)


def linear_tf(widths: tuple[int, ...] = (64,)) -> SizeArch:
    # one layer of causal linear attention (elu+1 features), 4 heads, learned positions as tf()
    return SizeArch("LinTF", "linear-tf", {"layers": 1}, widths)


@dataclass(frozen=True)
class Cell:
    label: str  # the architecture's name in tables and figures, e.g. "TF-(1,64)"
    N: int
    width: int
    seed: int
    runs: tuple[RunConfig, ...]  # one per learning rate, in grid order
    family: str = ""  # the architecture without its width, e.g. "TF-(1,w)" (default: the label)
    variant: str = ""  # the task variant's name (SizeScale.variants), "" for the task itself


def cell_runs(task: str, arch: SizeArch, width: int, N: int, seed: int, s: SizeScale, label: str,
              task_params: dict, device: str = "auto") -> tuple[RunConfig, ...]:
    lrs = arch.lrs or s.lrs
    race = s.halving and len(lrs) > 1

    def train(lr: float) -> TrainConfig:
        return TrainConfig(lr=lr, weight_decay=0.0, batch_size=BATCH, budget=(arch.steps or s.steps) * BATCH,
                           threshold=1 - TARGET + 1e-12, eval_every=s.eval_every, eval_size=s.val_size,
                           eval_mode="every", keep_best=True, test_size=s.test_size, device=device,
                           patience=s.patience, halving_lrs=tuple(lrs) if race else (),
                           halving_rungs=s.halving if race else (), curriculum=s.stages(N))

    return tuple(RunConfig(task, arch.arch, {**task_params, "N": N}, arch.model_params(width), train(lr), seed, label)
                 for lr in lrs)


def cell_record(cell: Cell, results: list[RunResult | None]) -> dict:
    """The cell's row (`analysis.size.cell_record`): its runs, the lr chosen, its accuracies."""
    key = CellKey(cell.family or cell.label, cell.width, cell.N, cell.seed, cell.label)
    first = cell.runs[0].train
    return size_record(key, [c.train.lr for c in cell.runs], results, cell.runs[0].arch, cell.runs[0].task,
                       first.budget // first.batch_size)


CELL_COLUMNS = ["label", "arch", "task", "N", "width", "seed", "test_acc", "val_acc", "best_lr", "lr_grid", "steps",
                "budget_steps", "reached", "status", "params", "state_size", "wall_s"]


# paper A's `full` scales predate the fair protocol: said wherever such a scale is named
NOT_FAIR_FULL = ("not yet the fair protocol (1 seed, claims without controls or trivial baselines, not the paper's "
                 "search): its verdicts are not a test; use --scale cpu or paper-n")


class SizeExperiment(SizeClaims, Experiment):
    """A (length x width) accuracy grid. A figure names its task, its scales and its claims
    (`claims(table, scale)`, reading `table[label][(N, width)]`, the mean test accuracy)."""

    task: str
    full: SizeScale
    quick: SizeScale
    axis: ClassVar[str | None] = "N"  # cells lie along the length N (and the width)

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
                            suffix = f" [{vname}]" if vname else ""
                            label = a.name(w) + suffix
                            out.append(Cell(label, N, w, seed,
                                            cell_runs(self.task, a, w, N, seed, s, label, dict(vparams), device),
                                            a.family() + suffix, vname))
        return out

    def plan(self, scale: str, device: str = "auto") -> list[RunConfig]:
        s = self.scale(scale)
        if isinstance(s, SearchScale):  # what runs first: the rest follows from the results (sweeps/search.py)
            return list(size_search.search_sweep(self.registry_name, scale, s).configs)
        return [c for cell in self.cells(scale, device) for c in cell.runs]

    record = staticmethod(cell_record)  # a cell's row (size_search reads cells through the experiment)

    @staticmethod
    def winner_cells(search, w) -> list[Cell]:
        """A search scale's cells: each family's winner and the arm not searched, at every seed; an
        arm of a task variant (its `variant` task parameter, e.g. equality's eq-one) is that
        variant's cell, read against that variant's baselines."""
        return [Cell(lab, N, width, seed, (cfg,), lab, str(cfg.task_params.get("variant", "")))
                for lab, N, width, seed, cfg in size_search.winner_runs(search, w)]

    def planned_cells(self, scale: str) -> list[Cell]:
        """The cells as they were run: `cells(scale)` with the summary's --set overrides applied
        (the same override of the whole plan that planned the runs, so the run ids match).
        Built once per scale and overrides: an analysis and its curves.csv both ask."""
        key = (scale, json.dumps(self.overrides, sort_keys=True, default=str))
        cache = self.__dict__.setdefault("_planned", {})
        if key not in cache:
            cache[key] = self._planned_cells(scale)
        return cache[key]

    def _planned_cells(self, scale: str) -> list[Cell]:
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
        if isinstance(self.scale(scale), SearchScale):  # "the paper's search": its winners are the cells
            return size_search.analyze(self, results, scale)
        s = self.scale(scale)
        by_id = {r.run_id: r for r in results}
        planned = self.planned_cells(scale)
        cells = [cell_record(c, [by_id.get(r.run_id) for r in c.runs]) for c in planned]
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
        baselines = self.baselines(planned)
        data = {"task": self.task, "baselines": baselines, "unequal": s.unequal(),
                "Ns": sorted({n for r in results if (n := (r.config.get("task_params") or {}).get("N")) is not None})
                or list(s.Ns),
                "lrs": lrs, "steps": max(budgets) // batch, "seeds": settings["seeds"],
                "seed_list": settings["seed_list"], "budget": settings["budget"], "eval_size": settings["eval_size"],
                "target": round(1 - max(thresholds), 6) if thresholds else TARGET, "threshold": settings["threshold"],
                "test_size": settings["test_size"], "n_cells": len(cells),
                "n_errors": sum(c["status"] == "error" for c in cells),
                "n_missing": sum(c["status"] == "missing" for c in cells), "cells": cells, "notes": notes}
        return Summary(self.registry_name, scale, data, self.claims_of(data, scale), results)

    def curves(self, summary: Summary) -> list[dict]:
        """Every run's validation curve, a row per evaluation, with its cell and its place in
        the cell's learning-rate grid (what `analysis.halving.replay` needs)."""
        by_id = {r.run_id: r for r in summary.results}
        rows = []
        planned = (self.winner_cells(*summary.walk) if hasattr(summary, "walk")
                   else self.planned_cells(summary.scale))
        for cell in planned:
            for k, cfg in enumerate(cell.runs):
                r = by_id.get(cfg.run_id)
                if r is None:
                    continue
                bs, stop = cfg.train.batch_size, (r.extra or {}).get("stopped") or {}
                head = {"label": cell.label, "N": cell.N, "width": cell.width, "seed": cell.seed,
                        "variant": cell.variant, "grid_index": k, "lr": cfg.train.lr}
                rows += [{**head, "step": samples // bs, "budget_steps": cfg.train.budget // bs, "val_acc": 1.0 - err,
                          "status": r.status, "stopped": stop.get("why", "")} for samples, err in r.curve]
        return rows

    def claims_of(self, data: dict, scale: str) -> list[Claim]:
        """The claims of a summary's own data (its cells and baselines, what summary.json holds):
        the same claims `analyze` makes, for a committed summary whose store is gone."""
        self.best_trivial = {(b["variant"], b["N"]): b["best_acc"] for b in data.get("baselines") or []}
        self.points = {(p["label"], p["N"]): p for p in size_points(data["cells"])}
        self.extra = extra_points(data["cells"])  # (label, N, extra test set) -> its point
        s = self.scale(scale)
        if isinstance(s, SearchScale):  # claims at the lengths the search has finished
            s = s.at(tuple(data["Ns"]))
        return size_search.tag(self.claims(accuracy_table(data["cells"]), s), data)

    def claims(self, table: dict, s: SizeScale) -> list[Claim]:
        """The figure's claims from {label: {(N, width): test accuracy}} at the scale whose
        settings are `s` (its name: `scale_name(s)`); `self.best_trivial[(variant, N)]` is the
        best trivial baseline's accuracy at each length."""
        return []

    def baselines(self, cells: list[Cell]) -> list[dict]:
        """The task's trivial baselines (`Task.trivial_baselines`: the best constant and the
        task's simple heuristics, e.g. Dyck's type-blind depth counter) at each (variant, N) the
        cells train at, on BASELINE_SIZE examples drawn from their own seed: the line a model
        must clear, in place of a fixed chance level."""
        out, seen = [], set()
        for c in cells:
            if (c.variant, c.N) in seen:
                continue
            seen.add((c.variant, c.N))
            found = trivial_baselines(c.runs[0].build_task())
            best = max(found, key=lambda k: found[k])  # a tie goes to the first listed, as Task.best_trivial
            out.append({"variant": c.variant, "N": c.N, "baselines": found, "best": best,
                        "best_acc": found[best]})
        return out

    def scale_name(self, s: SizeScale) -> str:
        """The name of the scale whose settings equal `s` (compared by value, not identity)."""
        return next((n for n in self.scales if self.scale(n) == s), "")

    @staticmethod
    def acc(table: dict, label: str, N: int, width: int) -> float | None:
        return table.get(label, {}).get((N, width))

    def table(self, summary: Summary) -> list[dict]:
        """One row per cell; a task's extra test sets add a column each, test_acc[NAME]."""
        names = sorted({n for c in summary.data["cells"] for n in c.get("extra_acc") or {}})
        return [{**{k: c.get(k) for k in CELL_COLUMNS}, "lr_grid": " ".join(f"{lr:g}" for lr in c.get("lr_grid") or []),
                 **{f"test_acc[{n}]": (c.get("extra_acc") or {}).get(n) for n in names}} for c in summary.data["cells"]]

    def figures(self, summary: Summary, out: Path) -> list[Path]:
        """Heat maps (only where a family has two widths or more), test accuracy against N with
        the trivial baselines, validation curves; every title names the preset and its scale."""
        cells = summary.data["cells"]
        return size_figures(cells, size_points(cells), f"{self.registry_name} ({summary.scale})", out,
                            summary.data.get("target", TARGET), summary.data.get("baselines"))

    def text(self, summary: Summary) -> str:
        d = summary.data
        missing = f", {d['n_missing']} with no finished run yet" if d.get("n_missing") else ""
        lines = [f"{summary.experiment} ({summary.scale}): {d['n_cells']} cells ({d['n_errors']} errors{missing}; "
                 f"{time_text(summary)}); test accuracy at length N (lr grid {d['lrs']}, <= {d['steps']} "
                 f"steps, early stop at {100 * d['target']:.0f}% validation accuracy; validation "
                 f"{_fmt_setting(d.get('eval_size'))}, test {_fmt_setting(d.get('test_size'))} examples, "
                 f"seed{'s' if len(d.get('seed_list') or []) > 1 else ''} {_fmt_setting(d.get('seed_list') or [])})"]
        lines += size_search.protocol_text(d)
        if "unequal" in d and d.get("protocol") != size_search.SEARCH:
            lines.append("  protocol: " + ("the same step budget, learning-rate grid and lengths for every architecture"
                                           if not d["unequal"] else "NOT the same for every architecture: "
                                           + "; ".join(d["unequal"])))
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
        extra: dict[tuple[str, str], dict[int, list]] = defaultdict(dict)
        for c in d["cells"]:
            for name, a in (c.get("extra_acc") or {}).items():
                if a is not None:
                    extra[(c["label"], name)].setdefault(c["N"], []).append(a)
        for (lab, name), by_N in sorted(extra.items()):
            lines.append(f"  {lab + ' [' + name + ']':<22}" + "".join(
                f"{100 * sum(by_N[N]) / len(by_N[N]):8.1f}%" if N in by_N else f"{'n/a':>9}" for N in d["Ns"]))
        for v in sorted({b["variant"] for b in d.get("baselines") or []}):
            bs = {b["N"]: b for b in d["baselines"] if b["variant"] == v}
            lines.append(f"  {'best trivial' + (f' [{v}]' if v else ''):<22}"
                         + "".join(f"{100 * bs[N]['best_acc']:8.1f}%" if N in bs else f"{'n/a':>9}" for N in d["Ns"])
                         + "  (" + ", ".join(sorted({bs[N]["best"] for N in bs})) + ")")
        return "\n".join(lines + claim_lines(summary.claims))


_BASELINES: dict[tuple[str, str], dict[str, float]] = {}


def trivial_baselines(task) -> dict[str, float]:
    """`task.trivial_baselines` on BASELINE_SIZE examples of BASELINE_SEED, drawn once per task
    instance and process (every summary and report of the same cells asks again)."""
    import torch

    key = (f"{type(task).__module__}.{type(task).__qualname__}", repr(task))
    if key not in _BASELINES:
        _BASELINES[key] = task.trivial_baselines(BASELINE_SIZE, torch.Generator().manual_seed(BASELINE_SEED))
    return dict(_BASELINES[key])
