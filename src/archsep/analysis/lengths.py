"""Length generalisation: the metric of runs trained with `train.eval_lengths` at each length
(`RunResult.extra["by_length"]`), per curve (model) and length, over seeds: what the figure
`reporting.plots.accuracy_vs_length` draws."""
from __future__ import annotations

import json
import math
from collections import defaultdict
from typing import Any

from ..results import RunResult
from .grid import curve_keys, describe_runs, flat
from .stats import t_quantile


def by_length(r: RunResult) -> dict[int, float]:
    """{length: metric} of one run (none without eval_lengths); lengths and values that are not
    numbers (a foreign or damaged store) are left out."""
    out = {}
    for k, v in ((r.extra or {}).get("by_length") or {}).items():
        try:
            n = int(k)
        except (TypeError, ValueError):
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out[n] = float(v)
    return out


def length_points(results: list[RunResult], level: float = 0.95) -> dict[str, Any]:
    """Per curve and evaluated length, over the runs of that curve (its seeds): the mean of
    their metric at that length with a t interval (none from one run). For a classification
    task the value is the accuracy (1 - the stored error), else the task's metric (MSE).
    Curves are as `analysis.grid` names them (the label, plus any other field that varies
    within it: task_params.N when runs trained at several N, say). A JSON-safe dict: points
    ({curve, length, mean, ci, runs, train_N}), the measure ("accuracy" or the metric's name),
    and each curve's longest training length `train_N` (its task's N, where one)."""
    runs = [r for r in results if by_length(r)]
    if not runs:
        return {"points": [], "measure": "accuracy", "train_N": {}}
    flats = [flat(r) for r in runs]
    _, _, keys = curve_keys(flats, None)
    metric = describe_runs(runs)["metric"]
    accuracy = metric == "error"
    values: dict[tuple[str, int], list[float]] = defaultdict(list)
    train_N: dict[str, set] = defaultdict(set)
    for r, f, key in zip(runs, flats, keys):
        train_N[key.name].add(json.dumps(f.get("task_params.N")))
        for n, v in by_length(r).items():
            values[(key.name, n)].append(1.0 - v if accuracy else v)
    points = []
    for (curve, n), vs in sorted(values.items()):
        mean = sum(vs) / len(vs)
        ci: list[float | None] = [None, None]
        if len(vs) >= 2:
            sd = math.sqrt(sum((v - mean) ** 2 for v in vs) / (len(vs) - 1))
            half = t_quantile(0.5 + level / 2, len(vs) - 1) * sd / math.sqrt(len(vs))
            ci = [mean - half, mean + half]
            if accuracy:
                ci = [max(0.0, mean - half), min(1.0, mean + half)]
        points.append({"curve": curve, "length": n, "mean": mean, "ci": ci, "runs": len(vs)})
    trained = {c: json.loads(next(iter(ns))) for c, ns in train_N.items() if len(ns) == 1}
    return {"points": points, "measure": "accuracy" if accuracy else metric,
            "train_N": {c: n for c, n in trained.items() if isinstance(n, int) and not isinstance(n, bool)}}
