"""Size measurements (paper A's kind): test accuracy per cell, a cell being one (architecture
family, width, length N, seed) trained at each learning rate of a grid, the learning rate chosen
on validation (`select`). Used by the size presets (`experiments/size.py`, whose cells come
from their plan) and by any sweep whose file says `[analysis] measure = "size"` (`size_cells`
groups its runs into cells); `size_points` gives the mean test accuracy per (family, width, N)
with a t interval over seeds."""
from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Sequence

from ..config import RunConfig
from ..results import RunResult
from .grid import _curve_fields, flat
from .stats import t_quantile

WIDTH_FIELDS = ("width", "hidden")  # a model's width, where `[analysis] width` does not name it


@dataclass(frozen=True)
class CellKey:
    """What makes a cell: its family (the architecture without its width, e.g. "LSTM" or
    "TF-(1,w)"), the width, the length N and the seed. `label` is what tables call the model."""

    family: str
    width: int
    N: Any
    seed: int
    label: str


def select(runs: Sequence[RunResult | None]) -> tuple[int, RunResult] | None:
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


def _batch(r: RunResult) -> int:
    return int((r.config.get("train") or {}).get("batch_size") or 1)


def _steps(r: RunResult) -> int:
    """Steps trained: to the target when reached, else the whole budget (or to divergence)."""
    bs = _batch(r)
    if r.status == "ok" and r.samples:
        return r.samples // bs
    return (r.curve[-1][0] if r.curve else int(r.config["train"]["budget"])) // bs


def _acc(err: float | None) -> float | None:
    return None if err is None else 1.0 - err


def cell_record(key: CellKey, lrs: Sequence[float], results: Sequence[RunResult | None],
                arch: str, task: str, budget_steps: int | None = None) -> dict:
    """One cell as a JSON-safe row: its runs (one per learning rate, in grid order), the chosen
    one, its test and validation accuracy, steps, size and wall time, and what it was given: its
    learning-rate grid and its step budget (`budget_steps`; default: read from its runs)."""
    if budget_steps is None:
        budget_steps = next((int(r.config["train"]["budget"]) // _batch(r) for r in results
                             if r is not None and "budget" in (r.config.get("train") or {})), None)
    rec: dict[str, Any] = {"label": key.label, "family": key.family, "N": key.N, "width": key.width,
                           "seed": key.seed, "arch": arch, "task": task, "lr_grid": [float(lr) for lr in lrs],
                           "budget_steps": budget_steps}
    runs = [{"lr": lr, "status": r.status, "steps": _steps(r), "val_acc": _acc(r.best_metric),
             "best_step": (r.best_samples or 0) // _batch(r), "run_id": r.run_id,
             "curve": [(s // _batch(r), 1 - m) for s, m in r.curve]}
            for lr, r in zip(lrs, results) if r is not None and r.status != "error"]
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
    rec.update(status="ok", test_acc=_acc(r.test_metric), val_acc=_acc(r.best_metric), best_lr=lrs[k],
               steps=_steps(r), reached=r.status == "ok", params=r.params, state_size=r.state_size, runs=runs,
               error=None)
    tests = (r.extra or {}).get("tests") or {}
    if isinstance(tests, dict) and tests:  # the task's extra test sets (e.g. Dyck's type swaps)
        rec["extra_acc"] = {str(k): _acc(float(v)) for k, v in tests.items() if isinstance(v, (int, float))}
    return rec


def accuracy_table(cells: list[dict]) -> dict[str, dict[tuple[Any, int], float]]:
    """{label: {(N, width): mean test accuracy over seeds}}."""
    acc: dict[str, dict[tuple[Any, int], list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in cells:
        if c["test_acc"] is not None:
            acc[c["label"]][(c["N"], c["width"])].append(c["test_acc"])
    return {lab: {k: sum(v) / len(v) for k, v in d.items()} for lab, d in acc.items()}


def size_points(cells: list[dict], level: float = 0.95) -> list[dict]:
    """Per (label, N): the mean test accuracy over seeds with a t interval (none from one seed),
    the seeds behind it and the learning rates chosen."""
    by: dict[tuple, list[dict]] = defaultdict(list)
    for c in cells:
        by[(c["label"], c.get("family", c["label"]), c["width"], json.dumps(c["N"]))].append(c)
    out = []
    for (label, family, width, n_text), cs in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][2], _order(kv[0][3]),
                                                                                 kv[0][0])):
        acc = [c["test_acc"] for c in cs if c["test_acc"] is not None]
        mean = sum(acc) / len(acc) if acc else None
        ci: list[float | None] = [None, None]
        if len(acc) >= 2 and mean is not None:
            sd = math.sqrt(sum((a - mean) ** 2 for a in acc) / (len(acc) - 1))
            half = t_quantile(0.5 + level / 2, len(acc) - 1) * sd / math.sqrt(len(acc))
            ci = [max(0.0, mean - half), min(1.0, mean + half)]
        out.append({"label": label, "family": family, "width": width, "N": json.loads(n_text), "mean": mean,
                    "ci": ci, "seeds": len(acc), "cells": len(cs),
                    "lrs": sorted({c["best_lr"] for c in cs if c["best_lr"] is not None})})
    return out


def extra_points(cells: list[dict], level: float = 0.95) -> dict[tuple, dict]:
    """Per (label, N, name of an extra test set, e.g. equality's "same-counts"): the mean
    accuracy on that set over seeds with a t interval, as `size_points` gives for the test set."""
    names = sorted({n for c in cells for n in c.get("extra_acc") or {}})
    out = {}
    for name in names:
        moved = [{**c, "test_acc": (c.get("extra_acc") or {}).get(name)} for c in cells]
        out.update({(p["label"], p["N"], name): p for p in size_points(moved, level)})
    return out


def _order(n_text: str) -> tuple:
    v = json.loads(n_text)
    return (0, v, "") if isinstance(v, (int, float)) and not isinstance(v, bool) else (1, 0, n_text)


# --- a sweep's runs as cells -----------------------------------------------------------------
def _width(r: RunResult, field: str | None) -> int:
    """The run's width: the model parameter `field` names ("model_params.hidden"), else the
    first of WIDTH_FIELDS its model has, read from the built model config (defaults included)
    or, for a model not registered here, from the stored parameters."""
    names = [field.split(".", 1)[1]] if field else list(WIDTH_FIELDS)
    params = dict(r.config.get("model_params") or {})
    try:
        cfg = RunConfig.from_dict(r.config).model_config()
        params = {n: getattr(cfg, n) for n in names if hasattr(cfg, n)} | params
    except Exception:  # noqa: BLE001 - a model not registered here: its stored parameters
        pass
    for n in names:
        if isinstance(params.get(n), int) and not isinstance(params.get(n), bool):
            return int(params[n])
    return 0


def size_cells(results: list[RunResult], x: str = "task_params.N", width: str | None = None) -> list[dict]:
    """A sweep's runs as cells: the runs that differ only in `train.lr` are one cell's grid (in
    the order the sweep planned them); its family is the run's label (its arch where it has
    none) with any other field that varies within the label; its width the model's width."""
    flats = [flat(r) for r in results]
    fields = sorted({k for f in flats for k in f} - {"seed", "train.device", "train.lr"})
    varying = [k for k in fields if len({json.dumps(f.get(k), sort_keys=True) for f in flats}) > 1]
    # fields that split a label into families: not the width (the cell's own axis)
    extras = [k for k in _curve_fields(flats, varying, x)
              if k != width and not (width is None and k.split(".")[-1] in WIDTH_FIELDS)]
    cells: dict[tuple, tuple[CellKey, list[float], list[RunResult]]] = {}
    for r, f in zip(results, flats):
        w = _width(r, width)
        name = str(f.get("label") or f.get("arch") or "?")
        extra = " ".join(f"{k.split('.')[-1]}={f.get(k)}" for k in extras)
        family = f"{name} {extra}".strip()
        label = f"{family}-{w}" if w else family
        rest = json.dumps({k: v for k, v in f.items() if k not in ("train.lr",)}, sort_keys=True, default=str)
        key = CellKey(family, w, f.get(x), int(f.get("seed") or 0), label)
        entry = cells.setdefault((rest,), (key, [], []))
        entry[1].append(float(f.get("train.lr", (r.config.get("train") or {}).get("lr", 0.0))))
        entry[2].append(r)
    return [cell_record(k, lrs, rs, str(rs[0].config.get("arch")), str(rs[0].config.get("task")))
            for k, lrs, rs in cells.values()]


def analyze_size(results: list[RunResult], x: str = "task_params.N", width: str | None = None) -> dict:
    """A size measurement of any runs (a JSON-safe dict): x, width, cells, points."""
    cells = size_cells(results, x, width)
    return {"measure": "size", "x": x, "width": width, "cells": cells, "points": size_points(cells)}
