"""Would a plateau rule have saved steps of a search without changing its winners? Replays a
stored search (sweeps/search.py) with each trial stopped where its validation error had not
improved for `patience` evaluations (the engine's `train.patience`, the same for every family),
reading the stopped trial's score from its stored curve, and compares every rung's promotions and
each cell's winner with the search as it ran. Reads only a store; trains nothing.

    python benchmarks/plateau_replay.py STORE (SWEEP.toml | PRESET:SCALE:AT) ... [--patience 4 8 16]

A stopped trial trains no more: its result stands at later rungs (as `finished_early` says).
Where the rule would promote a trial the search did not train further, its score there is
unknown: the cell is reported as undecided rather than guessed.
"""
from __future__ import annotations

import argparse
import dataclasses

from archsep.experiments.plan import from_experiment
from archsep.results import RunResult
from archsep.store import open_store
from archsep.sweeps.file import load_file
from archsep.sweeps.search import Search, replay, walk


def stopped(r: RunResult, patience: int, steps: int) -> tuple[RunResult, int]:
    """`r` as the engine would have left it with `train.patience = patience` (evaluations
    without a new best), and the steps it would have trained (of `steps`)."""
    bs = int(r.config["train"]["batch_size"])
    best, since = None, 0
    for samples, err in r.curve:
        if best is None or err < best[0]:
            best, since = (err, samples), 0
        else:
            since += 1
        before_hit = r.samples is None or r.status != "ok" or samples < r.samples
        if since >= patience and samples < steps * bs and before_hit:  # stopped short of the threshold
            return dataclasses.replace(r, status="censored", samples=samples, best_metric=best[0],
                                       best_samples=best[1]), samples // bs
    return r, (r.samples // bs if r.samples and r.status == "ok" else steps)


def search_of(spec: str) -> Search:
    if spec.endswith(".toml"):
        return load_file(spec).search
    preset, scale, at = spec.split(":")
    return from_experiment(preset, scale, at=[int(at)]).search


def winner(search: Search, w, c: int) -> int | None:
    """The first of cell `c`'s last rung (None: the walk stopped before it)."""
    rungs = w.rungs.get(c, [])
    return rungs[-1]["ranked"][0] if len(rungs) == len(search.steps) else None


def trained_steps(search: Search, w, results: dict[str, RunResult], patience: int | None) -> tuple[int, float]:
    """Steps the trials of walk `w` trained, rung after rung (a promoted trial only its
    increment), under the rule (`patience`) or as stored (None), and their time in seconds at
    each trial's own time per step (its first rung's wall time over the steps it trained)."""
    total, seconds = 0, 0.0
    for c, rungs in w.rungs.items():
        done: dict[int, int] = {}
        for r, rung in enumerate(rungs):
            for t in rung["trained"]:
                res = results.get(search.config(c, t, r).run_id)
                steps = rung["steps"]
                if res is not None and patience:
                    steps = stopped(res, patience, steps)[1]
                elif res is not None and res.status == "ok" and res.samples:
                    steps = min(steps, res.samples // int(res.config["train"]["batch_size"]))
                first = results.get(search.config(c, t, 0).run_id)
                per_step = first.wall_s / max(1, trained_steps_of(first, search.steps[0])) if first else 0.0
                total += max(0, steps - done.get(t, 0))
                seconds += max(0, steps - done.get(t, 0)) * per_step
                done[t] = steps
    return total, seconds


def trained_steps_of(r: RunResult, steps: int) -> int:
    """The steps a stored run trained: to its threshold when it stopped there, else its budget."""
    return min(steps, r.samples // int(r.config["train"]["batch_size"])) if r.status == "ok" and r.samples else steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store")
    p.add_argument("searches", nargs="+", help="sweep files, or PRESET:SCALE:AT (e.g. lookup-fig2:search:50)")
    p.add_argument("--patience", type=int, nargs="+", default=[4, 8, 16])
    a = p.parse_args()
    with open_store(a.store, create=False) as st:
        res = {r.run_id: r for r in st.results()}
    for spec in a.searches:
        search = search_of(spec)
        base = replay(search, res)
        base_steps, base_s = trained_steps(search, base, res, None)
        print(f"{spec}: as run, the trials trained {base_steps} steps (~{base_s:.0f} s); winners "
              + ", ".join(f"{search.cells[c].name}: trial {winner(search, base, c)}" for c in base.rungs))
        for pat in a.patience:
            def fetch(cfgs, _stage, pat=pat):
                out = []
                for cfg in cfgs:
                    r = res.get(cfg.run_id)
                    out.append(None if r is None else stopped(r, pat, int(cfg.train.budget) // cfg.train.batch_size)[0])
                return out
            w = walk(search, fetch)
            steps, secs = trained_steps(search, w, res, pat)
            undecided = [c for c in base.rungs if winner(search, w, c) is None]
            same_w = [c for c in base.rungs if c not in undecided and winner(search, w, c) == winner(search, base, c)]
            changed = [c for c in base.rungs if c not in undecided and c not in same_w]
            promos = sum(1 for c in base.rungs for x, y in zip(base.rungs[c], w.rungs[c])
                         if x["promoted"] != y["promoted"])
            print(f"  patience {pat:>2} ({pat} evaluations without a new best): trials trained {steps} steps "
                  f"({steps / base_steps:.2f} of as run; ~{secs:.0f} s, {secs / base_s:.2f} of the time); "
                  f"winners unchanged in {len(same_w)} cell(s), changed in "
                  f"{len(changed)} {[search.cells[c].name for c in changed]}, undecided in {len(undecided)} "
                  f"(a trial promoted that was not trained further); rungs with other promotions: {promos}")


if __name__ == "__main__":
    main()
