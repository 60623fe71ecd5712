"""`archsep.analyze`: the analysis of runs, or of every run an output directory's store holds,
as its sweep file asked for it (`[analysis]`: x, separations, measure, width)."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import ArchsepError
from ..registry import reading
from ..results import RunResult
from ..store import open_store
from .grid import analyze_runs
from .size import analyze_size


def analyze(results: list[RunResult] | str | Path, x: str | None = None, separations: list | None = None,
            measure: str | None = None, width: str | None = None, sweep: str | None = None) -> dict:
    """Per-point statistics, exponent fits and separation statements of `results` (a JSON-safe
    dict, `analysis.grid.analyze_runs`), or, for a size measurement, the accuracy of each cell
    (`analysis.size.analyze_size`). Given an output directory, its runs are read from the store,
    and what the arguments leave open comes from the sweep file's [analysis] when the store's
    sweeps agree on one. A store holding several sweeps (e.g. one sweep run again with a larger
    budget) is analysed sweep by sweep, as `archsep report` does: {"sweeps": [{"sweep": name,
    "sweep_id": ..., **its analysis}, ...], "differs": the config fields whose values differ
    between them}; `sweep` (a name or id) picks one. The names in the runs' configs are data:
    nothing is imported because of them (`registry.reading`)."""
    meta: dict = {}
    with reading():
        if isinstance(results, (str, Path)):
            with open_store(results, create=False) as store:
                sweeps = store.sweeps()
                if sweep is not None:
                    chosen = [sw for sw in sweeps if sweep in (sw["name"], sw["sweep_id"])]
                    if not chosen:
                        names = ", ".join(sw["name"] for sw in sweeps) or "none"
                        raise ArchsepError.at("sweep", f"no sweep named {sweep!r} in {results}; its sweeps: {names}")
                    meta = chosen[0]["analysis_data"]
                    ids = list(dict.fromkeys(p["run_id"] for p in store.planned(chosen[0]["sweep_id"])))
                    results = store.results(ids)
                elif len({frozenset(p["run_id"] for p in store.planned(sw["sweep_id"])) for sw in sweeps}) > 1:
                    plans = {sw["sweep_id"]: store.planned(sw["sweep_id"]) for sw in sweeps}
                    parts = [{"sweep": sw["name"], "sweep_id": sw["sweep_id"],
                              **analyze(results, x, separations, measure, width, sw["sweep_id"])} for sw in sweeps]
                    return {"sweeps": parts, "differs": differs(plans)}
                else:
                    metas = {json.dumps(sw["analysis_data"], sort_keys=True) for sw in sweeps}
                    meta = json.loads(metas.pop()) if len(metas) == 1 else {}
                    # in the order the sweeps planned them (as `archsep report` reads them), then any
                    # others: a size cell's learning rates in grid order, not in the order they finished
                    pos = {rid: i for i, rid in enumerate(dict.fromkeys(p["run_id"] for p in store.planned()))}
                    results = sorted(store.results(), key=lambda r: pos.get(r.run_id, len(pos)))
        x = x or meta.get("x") or "task_params.N"
        if (measure or meta.get("measure")) == "size":
            return analyze_size(results, x, width or meta.get("width"))
        return analyze_runs(results, x, separations if separations is not None else meta.get("separations"))


def differs(plans: dict[str, list[dict]]) -> dict[str, dict[str, list]]:
    """The config fields (dotted) whose values differ between sweeps: field -> {sweep id: its values}."""
    def flat(cfg: dict, prefix: str = "") -> dict:
        out: dict = {}
        for k, v in cfg.items():
            if isinstance(v, dict):
                out.update(flat(v, f"{prefix}{k}."))
            else:
                out[f"{prefix}{k}"] = json.dumps(v, sort_keys=True)
        return out

    values: dict[str, dict[str, set]] = {}
    for sid, rows in plans.items():
        for row in rows:
            cfg = json.loads(row["config"]) if isinstance(row.get("config"), str) else row.get("config") or {}
            for k, v in flat(cfg).items():
                values.setdefault(k, {}).setdefault(sid, set()).add(v)
    return {k: {sid: [json.loads(v) for v in sorted(vs)] for sid, vs in by.items()}
            for k, by in sorted(values.items())
            if len({frozenset(vs) for vs in by.values()}) > 1 and k not in ("label", "seed")}
