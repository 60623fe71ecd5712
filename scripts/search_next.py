"""Train the runs a preset's stored search trains next, for the cells named, before the others:
to look at some cells' next rung early (e.g. mamba-width's narrower widths, whose rung comes after
the widest's hours). Each is the search's own run (its config, so its run id), trained into the
search's store, where the search then reuses it; nothing else changes.

    .venv/bin/python scripts/search_next.py PRESET SCALE STORE --at N --label L [--label L ...]
                                            [--limit K] [--workers W] [--dry-run]

The store is replayed (`sweeps.search.walk`) as the search would walk it, without the cells no
claim can use (`reproduce.without_unused`, as the search leaves them out): a cell whose rung lacks
runs stops there, and those missing runs are what it trains next; with --label only those cells'
(each cell's name is its arm's label, with " N=..." where the search has several lengths), in the
walk's order, the first K with --limit. --dry-run lists them and trains nothing. Train it beside
nothing else of the same store (two writers would train the same run twice). A one-line error and
exit 2 for a preset, scale, length or label that does not exist.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archsep.config import RunConfig
from archsep.errors import ArchsepError
from archsep.experiments.reproduce import without_unused
from archsep.experiments.size_search import search_sweep
from archsep.results import RunResult
from archsep.store import open_store
from archsep.sweeps.search import Search, stage_rung, walk

sys.path.insert(0, str(Path(__file__).resolve().parent))
from search_ties import search_scale  # noqa: E402  (the script beside this one)


def missing(search: Search, by_id: dict[str, RunResult]) -> list[tuple[str, str, RunConfig]]:
    """(cell name, stage, config) of every run the search trains next over these results: a cell
    stops at the first rung it lacks runs at (winners' seeds after the rungs). Best first: ordered
    by each trial's place in its cell's ranking at the rung before (the first rung's and the
    winners' runs have none: first), then in the walk's order, cell by cell."""
    asked: list[tuple[str, RunConfig]] = []

    def fetch(cfgs: list[RunConfig], stage: str = "") -> list[RunResult | None]:
        got = [by_id.get(c.run_id) for c in cfgs]
        asked.extend((stage, c) for c, r in zip(cfgs, got) if r is None)
        return got

    w = walk(search, fetch)
    where: dict[str, tuple[int, int]] = {}  # run id -> (cell, trial)
    for c, cell in enumerate(search.cells):
        for t in range(len(cell.flats)):
            for r in range(len(search.steps)):
                where[search.config(c, t, r).run_id] = (c, t)
            for seed in search.seeds:
                where[search.config(c, t, None, seed).run_id] = (c, t)
    out = []
    for i, (stage, cfg) in enumerate(asked):
        c, t = where[cfg.run_id]
        before = w.rungs.get(c) or []
        ranked = before[-1]["ranked"] if before and stage_rung(stage) is not None else []
        out.append(((ranked.index(t) if t in ranked else 0, i), search.cells[c].name, stage, cfg))
    return [(name, stage, cfg) for _, name, stage, cfg in sorted(out, key=lambda x: x[0])]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("preset")
    ap.add_argument("scale")
    ap.add_argument("store", type=Path)
    ap.add_argument("--at", required=True, help="the length, e.g. 100 (one of the scale's)")
    ap.add_argument("--label", action="append", default=[], help="a cell's arm (repeat; default: every cell)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many runs (0: all)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--dry-run", action="store_true", help="list them, train nothing")
    a = ap.parse_args(argv)
    try:
        exp, scale = search_scale(a.preset, a.scale)
        try:
            at = [int(x) for x in a.at.split(",")]
        except ValueError:
            raise ArchsepError(f"at: '{a.at}' is not a length; allowed: {', '.join(map(str, scale.Ns))}") from None
        sweep = search_sweep(a.preset, a.scale, scale, at)
        assert sweep.search is not None
        labels = {cell.name.split(" ")[0] for cell in sweep.search.cells}
        bad = [lab for lab in a.label if lab not in labels]
        if bad:
            raise ArchsepError(f"label: '{bad[0]}' is not an arm of {a.preset} --scale {a.scale}; "
                               f"allowed: {', '.join(sorted(labels))}")
        if not (a.store / "archsep.db").is_file():
            raise ArchsepError(f"store: {a.store} holds no archsep.db (the search's --out)")
        search = without_unused(exp, a.scale, sweep, a.store)[0].search
        assert search is not None
        with open_store(a.store, create=False) as st:
            by_id = {r.run_id: r for r in st.results()}
    except (ArchsepError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    todo = [(name, stage, cfg) for name, stage, cfg in missing(search, by_id)
            if not a.label or name.split(" ")[0] in a.label]
    if a.limit > 0:
        todo = todo[:a.limit]
    for name, stage, cfg in todo:
        rung = stage_rung(stage)
        where = "the winner's seeds" if rung is None else f"rung {rung}"
        print(f"{cfg.run_id} {name} {where}: {cfg.train.budget // cfg.train.batch_size} steps, "
              f"lr {cfg.train.lr:g}, {cfg.model_params}")
    if a.dry_run or not todo:
        print(f"{len(todo)} run(s)" + (" (dry run: nothing trained)" if a.dry_run else ""))
        return 0
    from archsep.runs.runner import run_configs

    results = run_configs([cfg for _, _, cfg in todo], out_dir=a.store, workers=a.workers, progress=False,
                          desc="search_next")
    for (name, _, cfg), r in zip(todo, results):
        best = "n/a" if r.best_metric is None else f"{r.best_metric:.4g}"
        print(f"{cfg.run_id} {name}: {r.status}, best held-out metric {best} (lower is better)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
