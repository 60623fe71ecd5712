"""Why the search promotes synchronously (sweeps/search.py) and not as ASHA does (Optuna's
SuccessiveHalvingPruner, Ray Tune's ASHA): replayed on a search's stored first rung, ASHA's rule
(whenever a worker is free, a trial goes on if it is in the top 1/eta of the trials that have
reported at that rung so far; Li et al. 2020, "A System for Massively Parallel Hyperparameter Tuning") gives
promotions that depend on the order in which the runs finish, which differs between a 2-worker
pool and a cluster; the synchronous rule gives one set. Reads only a store; trains nothing.

    python benchmarks/asha_order.py SWEEP.toml STORE [--orders 200]
"""
from __future__ import annotations

import argparse
import math
import random

from archsep.store import open_store
from archsep.sweeps.file import load_file
from archsep.sweeps.search import rank


def asha_promoted(order: list[int], keys: dict[int, tuple], eta: float) -> set[int]:
    """ASHA at one rung: trials report in `order`; after each report (when a worker asks for a
    job), every trial in the top floor(n / eta) of the n reported so far that has not gone on goes
    on. A promotion is never taken back."""
    seen: list[int] = []
    out: set[int] = set()
    for t in order:
        seen.append(t)
        out |= set(sorted(seen, key=lambda i: keys[i])[:math.floor(len(seen) / eta)])
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("sweep")
    p.add_argument("store")
    p.add_argument("--orders", type=int, default=200)
    a = p.parse_args()
    search = load_file(a.sweep).search
    with open_store(a.store, create=False) as st:
        res = {r.run_id: r for r in st.results()}
    eta = 1 / search.keep
    rng = random.Random(0)
    for c, cell in enumerate(search.cells):
        if not cell.searched:
            continue
        got = {t: res.get(search.config(c, t, 0).run_id) for t in range(len(cell.flats))}
        if any(r is None for r in got.values()):
            continue
        sync = sorted(rank(list(got.items()))[:search.promoted(len(got))])
        keys = {t: (r.best_metric, r.best_samples, t) for t, r in got.items()}
        sets = {}
        for _ in range(a.orders):
            order = list(got)
            rng.shuffle(order)
            s = tuple(sorted(asha_promoted(order, keys, eta)))
            sets[s] = sets.get(s, 0) + 1
        top = max(sets.values())
        print(f"{cell.name}: synchronous promotes {sync}; ASHA over {a.orders} finishing orders gives "
              f"{len(sets)} different promoted sets (the commonest in {top}), sizes "
              f"{min(map(len, sets))}-{max(map(len, sets))}")


if __name__ == "__main__":
    main()
