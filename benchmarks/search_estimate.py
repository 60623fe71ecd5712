"""How far a search's `--dry-run` price is from what the search cost, length by length.

For each PRESET:SCALE:AT (one length of a size preset's search), prices the search as a dry run
of an empty store would (`runs.search.price`: the size-blind price, the worst case and the estimate
between them, on `--workers`)
and reads from STORE what its runs cost (`experiments.size_search.search_cost`, as the preset's
summary states it): every trial's latest run (its stored `wall_s` covers all its rungs) and the
winners' other seeds, each run's own time. Also the steps the trials trained
against training every trial to the last rung (the issue's "at most a third"). Reads a store and
times step shapes (or reads them from the step-cost cache); trains nothing.

    python benchmarks/search_estimate.py STORE lookup-fig2:search:20 lookup-fig2:search:50 [--workers 2]

The runs' own times are what they took where they ran (two workers on two cores, so each beside
another); the estimate times its shapes two at a time for the same reason.
"""
from __future__ import annotations

import argparse

from archsep.experiments.plan import from_experiment
from archsep.experiments.size_search import search_cost
from archsep.runs.search import price
from archsep.store import open_store
from archsep.sweeps.search import replay


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store")
    p.add_argument("searches", nargs="+", help="PRESET:SCALE:AT, e.g. lookup-fig2:search:50")
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args()
    with open_store(a.store, create=False) as st:
        res = {r.run_id: r for r in st.results()}
    print(f"{'search':<26}{'measured':>9}{'blind':>8}{'ratio':>7}{'estimate':>9}{'ratio':>7}{'worst':>8}{'ratio':>7}"
          f"{'steps':>9}{'all to end':>12}{'share':>7}   (core-hours; ratio = measured / price)")
    keys = ("expected_core_s", "estimate_core_s", "cpu_core_s")
    tot = [0.0] * 6
    for spec in a.searches:
        preset, scale, at = spec.split(":")
        search = from_experiment(preset, scale, at=[int(at)]).search
        w = replay(search, res)
        if w.incomplete:
            print(f"{spec:<26} not finished in this store ({len(w.incomplete)} cell(s)): skipped")
            continue
        cost = search_cost(search, w)  # what the preset's summary states as its search_cost
        measured = cost["trials_wall_s"] + cost["winners_wall_s"]
        est = price(search, a.workers, set())
        row = (measured, *(est[k] for k in keys), cost["trial_steps"], cost["every_trial_to_the_end"])
        print(f"{spec:<26}" + _row(row))
        tot = [t + x for t, x in zip(tot, row)]
    if tot[1]:
        print(f"{'together':<26}" + _row(tot))


def _row(r: list[float] | tuple[float, ...]) -> str:
    h = 3600.0
    prices = "".join(f"{p / h:>{8 if i != 1 else 9}.2f}{r[0] / p:>7.2f}" for i, p in enumerate(r[1:4]))
    return f"{r[0] / h:>9.2f}{prices}{int(r[4]):>9}{int(r[5]):>12}{r[4] / r[5]:>7.2f}"


if __name__ == "__main__":
    main()
