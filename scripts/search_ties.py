"""Replay a preset's stored search with ties (`search.tie`, in standard errors of validation
error) and without: per cell, the trials each rung promotes, and whether the store holds the runs
the tied walk needs (a cell that lacks one stops there: "needs runs"). Reads the store, trains
nothing.

    .venv/bin/python scripts/search_ties.py PRESET SCALE STORE [--tie 2] [--at 20,50,100]

e.g. `scripts/search_ties.py lookup-fig2 search /work/runs/lookup-fig2-search --at 20,50,100`:
how many of each family's trials at 1k steps sit within two standard errors of the last one
kept (their order there is the validation set's noise).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from archsep.errors import ArchsepError
from archsep.experiments import EXPERIMENTS
from archsep.experiments.size_search import SearchScale, search_sweep
from archsep.store import open_store
from archsep.sweeps.search import replay


def search_scale(preset: str, scale: str) -> tuple[Any, SearchScale]:
    """The preset's experiment and its scale `scale`, which must be a search (ArchsepError: one
    line naming the field; an unknown preset's names the allowed ones)."""
    exp = EXPERIMENTS.get(preset)()
    s = exp.scale(scale)
    if not isinstance(s, SearchScale):
        raise ArchsepError(f"scale: {preset} --scale {scale} is not a search")
    return exp, s


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("preset")
    ap.add_argument("scale")
    ap.add_argument("store")
    ap.add_argument("--tie", type=float, default=2.0)
    ap.add_argument("--at", default="", help="lengths, e.g. 20,50 (default: every length of the scale)")
    a = ap.parse_args()
    try:
        exp, scale = search_scale(a.preset, a.scale)
        at = [int(x) for x in a.at.split(",") if x] or None
        search = search_sweep(a.preset, a.scale, scale, at).search
        assert search is not None
        with open_store(a.store, create=False) as st:
            by_id = {r.run_id: r for r in st.results()}
    except (ArchsepError, ValueError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    walks = [replay(dataclasses.replace(search, tie=t), by_id) for t in (0.0, a.tie)]
    print(f"{a.preset} --scale {a.scale}: trials promoted at each rung, without ties | with tie = {a.tie:g}")
    for c, cell in enumerate(search.cells):
        if not cell.searched:
            continue
        cols = []
        for w in walks:
            rungs = [len(r["promoted"]) for r in w.rungs.get(c, []) if r["promoted"]]  # the last rung promotes none
            cols.append(f"{rungs}" + (" (needs runs)" if c in w.incomplete else ""))
        print(f"  {cell.name:<28} of {len(cell.flats)}: {cols[0]:<22} | {cols[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
