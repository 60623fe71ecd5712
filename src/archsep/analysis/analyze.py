"""`archsep.analyze`: the analysis of runs, or of every run an output directory's store holds,
as its sweep file asked for it (`[analysis]`: x, separations, measure, width)."""
from __future__ import annotations

import json
from pathlib import Path

from ..registry import reading
from ..results import RunResult
from ..store import open_store
from .grid import analyze_runs
from .size import analyze_size


def analyze(results: list[RunResult] | str | Path, x: str | None = None, separations: list | None = None,
            measure: str | None = None, width: str | None = None) -> dict:
    """Per-point statistics, exponent fits and separation statements of `results` (a JSON-safe
    dict, `analysis.grid.analyze_runs`), or, for a size measurement, the accuracy of each cell
    (`analysis.size.analyze_size`). Given an output directory, its runs are read from the store,
    and what the arguments leave open comes from the sweep file's [analysis] when the store's
    sweeps agree on one. The names in the runs' configs are data: nothing is imported because
    of them (`registry.reading`)."""
    meta: dict = {}
    with reading():
        if isinstance(results, (str, Path)):
            with open_store(results, create=False) as store:
                metas = {json.dumps(sw["analysis_data"], sort_keys=True) for sw in store.sweeps()}
                meta = json.loads(metas.pop()) if len(metas) == 1 else {}
                # in the order the sweeps planned them (as `archsep report` reads them), then any
                # others: a size cell's learning rates in grid order, not in the order they finished
                pos = {rid: i for i, rid in enumerate(dict.fromkeys(p["run_id"] for p in store.planned()))}
                results = sorted(store.results(), key=lambda r: pos.get(r.run_id, len(pos)))
        x = x or meta.get("x") or "task_params.N"
        if (measure or meta.get("measure")) == "size":
            return analyze_size(results, x, width or meta.get("width"))
        return analyze_runs(results, x, separations if separations is not None else meta.get("separations"))
