"""How far a search's `--dry-run` price is from what the search cost, length by length.

For each PRESET:SCALE:AT (one length of a size preset's search), prices the search as a dry run
of an empty store would (`runs.search.price`: the worst case and the expected one, on `--workers`)
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
    print(f"{'search':<26}{'measured':>10}{'expected':>10}{'ratio':>7}{'worst':>10}{'ratio':>7}"
          f"{'steps':>9}{'all to end':>12}{'share':>7}   (core-hours; ratio = measured / estimate)")
    tot = [0.0, 0.0, 0.0, 0, 0]
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
        steps, to_end = cost["trial_steps"], cost["every_trial_to_the_end"]
        h = 3600.0
        print(f"{spec:<26}{measured / h:>10.2f}{est['expected_core_s'] / h:>10.2f}"
              f"{measured / est['expected_core_s']:>7.2f}{est['cpu_core_s'] / h:>10.2f}"
              f"{measured / est['cpu_core_s']:>7.2f}{steps:>9}{to_end:>12}{steps / to_end:>7.2f}")
        for i, x in enumerate((measured, est["expected_core_s"], est["cpu_core_s"], steps, to_end)):
            tot[i] += x
    if tot[1]:
        print(f"{'together':<26}{tot[0] / 3600:>10.2f}{tot[1] / 3600:>10.2f}{tot[0] / tot[1]:>7.2f}"
              f"{tot[2] / 3600:>10.2f}{tot[0] / tot[2]:>7.2f}{tot[3]:>9}{tot[4]:>12}{tot[3] / tot[4]:>7.2f}")


if __name__ == "__main__":
    main()
