"""Running a sweep file's search (`sweeps.search`): rung after rung, every trial an ordinary run
in the store, then each cell's winner with every seed; and its price before anything runs.

A rung's runs go to the executor together (every cell at once), so a rung is as parallel as the
executor allows; the promotions read only the store's results, which are the same on the local
pool and on Ray, so the trials, promotions and winners are too. Killed, the same command goes on:
the finished runs of every rung are in the store, a run cut short goes on from its checkpoint,
and a promoted trial from its end at the rung before (kept in OUT/checkpoints/ends until the
search no longer needs it). What the search found goes to OUT/search.json (`outcome`, `save_outcome`).
"""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Sequence

from ..config import RunConfig
from ..engine.checkpoint import Checkpoints, discard_ends, tidy
from ..fileio import atomic_write
from ..results import RunResult
from ..store.db import DB_NAME, open_store
from ..sweeps.file import Sweep
from ..sweeps.search import Search, Walk, finished_early, replay, stage_rung, stage_sweep, walk
from .launch import Launch
from .runner import launch_runs

OUTCOME = "search.json"


def _brief(r: RunResult | None) -> dict[str, Any]:
    if r is None:
        return {"status": "missing"}
    return {"run_id": r.run_id, "status": r.status, "best_metric": r.best_metric, "best_samples": r.best_samples,
            "test_metric": r.test_metric, "wall_s": r.wall_s,
            "steps": int(r.config["train"]["budget"]) // int(r.config["train"]["batch_size"])}


def _rung_sweep(sweep: Sweep, what: str, configs: Sequence[RunConfig]) -> Sweep:
    return Sweep(stage_sweep(sweep.name, what), list(configs), sweep.source, sweep.origin, preset=sweep.preset,
                 quick=sweep.quick, analysis=sweep.analysis)


def run_search(sweep: Sweep, launch: Launch) -> dict[str, Any]:
    """Run `sweep`'s search into `launch.out` and return its outcome: per cell, every trial's
    result at each rung it reached, the promotions, and the winner with its runs at every seed
    (the caller writes it, `save_outcome`: `archsep sweep` this one, a preset the whole search)."""
    search = sweep.search
    assert search is not None
    launch = dataclasses.replace(launch, ends=True)
    ck = Checkpoints.beside(launch.out, math.inf, ends=True) if launch.out is not None else None
    stages = len(search.steps)

    def fetch(configs: list[RunConfig], stage: str) -> list[RunResult]:
        n = stage_rung(stage)
        what = f"rung {n}/{stages} ({search.steps[n - 1]} steps)" if n is not None else stage
        return launch_runs(configs, launch, desc=f"{sweep.name}: {what}", sweep=_rung_sweep(sweep, stage, configs))

    def done(configs: list[RunConfig]) -> None:
        if ck is not None:
            discard_ends(ck, configs)

    def have(configs: list[RunConfig]) -> list[RunResult | None]:
        if launch.out is None or not (Path(launch.out) / DB_NAME).exists():
            return [None] * len(configs)
        with open_store(launch.out, create=False) as st:
            found = {r.run_id: r for r in st.results([c.run_id for c in configs])}
        return [found.get(c.run_id) for c in configs]

    w = walk(search, fetch, done, have)
    if ck is not None:
        tidy(ck)
    return outcome(search, w)


def save_outcome(out: Path, found: dict[str, Any]) -> Path:
    """Write a search's outcome to OUT/search.json (a replace, never through a link)."""
    return atomic_write(Path(out) / OUTCOME, json.dumps(found, indent=1, sort_keys=True) + "\n", field="out")


def outcome(search: Search, w: Walk) -> dict[str, Any]:
    """A walk as JSON: the search as declared, and per cell its trials, rungs and winner's runs."""
    cells_out = []
    for c, cell in enumerate(search.cells):
        runs = {s: r for (cc, _t, s), r in w.final.items() if cc == c}
        winner = w.winner(c)
        entry: dict[str, Any] = {"label": cell.label, "point": cell.point, "searched": cell.searched,
                                 "runs": [{"seed": s, **_brief(r)} for s, r in sorted(runs.items())]}
        if c in w.settled:
            entry["settled"] = w.settled[c]
        if cell.searched:
            entry.update(winner=winner, winner_params=None if winner is None else cell.params(winner),
                         rungs=w.rungs[c], trials=[{"trial": t, "params": cell.params(t),
                                                    "last": _brief(w.latest[c].get(t))}
                                                   for t in range(len(cell.flats))])
        cells_out.append(entry)
    return {"search": search.describe(), "complete": w.complete, "cells": cells_out}


def table(out: dict[str, Any]) -> str:
    """What a search found, one line per cell: the winner's configuration and its runs."""
    lines = []
    for cell in out["cells"]:
        point = " ".join(f"{k.split('.')[-1]}={v}" for k, v in cell["point"].items())
        accs = [1 - r["best_metric"] for r in cell["runs"] if r.get("best_metric") is not None]
        tests = [1 - r["test_metric"] for r in cell["runs"] if r.get("test_metric") is not None]
        what = (", ".join(f"{k.split('.')[-1]}={v}" for k, v in cell["winner_params"].items())
                if cell["searched"] else "not searched")
        acc = (f"best validation {min(accs):.3f}-{max(accs):.3f}" if accs else "no evaluation") + (
            f", test {min(tests):.3f}-{max(tests):.3f}" if tests else "")
        settled = cell.get("settled")
        if settled:
            acc += (f"; settled: its control fails (the mean of {settled['seeds']} seeds at most "
                    f"{settled['most']:.3f} < {settled['level']:g}), the other seeds not trained")
        lines.append(f"  {cell['label']:<14} {point:<10} {what:<44} {len(cell['runs'])} seed(s): {acc}")
    return "\n".join(lines)


# --- its price ---------------------------------------------------------------------------------
def standing(search: Search, results: dict[str, RunResult], w: Walk | None = None
             ) -> dict[int, tuple[int, list[int], set[int]]]:
    """What a store's results (run id -> result) already decide, per searched cell: the first
    rung not yet decided, the trials still in the search there (the promoted ones; every rung
    decided: the winner alone, at len(steps)) and those of them that stopped early (their result
    stands at every later rung: they train no more). `w`: their replay, where made already."""
    w = replay(search, results) if w is None else w
    out: dict[int, tuple[int, list[int], set[int]]] = {}
    for c, rungs in w.rungs.items():
        if len(rungs) == len(search.steps):
            out[c] = (len(rungs), rungs[-1]["ranked"][:1], set())
        elif rungs:
            prev, alive = search.steps[len(rungs) - 1], rungs[-1]["promoted"]
            stopped = {t for t in alive if t in w.latest[c] and finished_early(w.latest[c][t], prev)}
            out[c] = (len(rungs), alive, stopped)
    return out


def price(search: Search, workers: int, finished: set[str], results: dict[str, RunResult] | None = None,
          started: dict[str, int] | None = None) -> dict[str, Any]:
    """The whole search's cost at its worst: at each rung the trials that go on are the most
    expensive ones (with a `tie`, every trial: all tied), none stops early, every winner trains
    every seed. Beside it the size-blind cost (`expected_core_s`, `expected_wall_s`): keep's share
    goes on (none tied) and costs the rung's average trial, as when promotion does not depend on
    a trial's size; still none stops early. The point estimate (`estimate_core_s`,
    `estimate_wall_s`) is the geometric middle of the two: the search lands between them, near the
    size-blind price where small trials win or stop early, near the worst where the big ones win
    (lookup at N = 100) or ties send most trials on. Runs finished in the store (`finished`) cost
    nothing; a promoted trial costs its steps after the rung before. With the store's `results`,
    a cell's rungs they decide (`standing`) are priced as decided: the trials they promoted,
    exactly, then the worst and size-blind counts from those; a winner whose first seed settled
    its control (`Walk.settled`) trains no other seed (before then every winner counts every
    seed). A run with a checkpoint (`started`: run id -> the step saved) costs only its steps
    after it. Rungs run one after another: the
    wall time is each rung's, over `workers`, summed."""
    from .cost import run_seconds, step_costs

    cells = search.cells
    w = replay(search, results) if results else None
    stand = standing(search, results or {}, w) if w is not None else {}
    settled = w.settled if w is not None else {}  # their other seeds train no more
    shapes = [search.config(c, t, None) for c, cell in enumerate(cells) for t in range(len(cell.flats))]
    step_costs(shapes, workers=workers)  # each shape timed once (or read from the cache)

    started = started or {}

    def cost(cfg: RunConfig, steps: int, start: int = 0) -> tuple[float, float]:
        """A run that trains `steps` steps from step `start` (a promoted trial: its rung before's)."""
        if cfg.run_id in finished:
            return (0.0, 0.0)
        return run_seconds(cfg, max(0, steps - max(0, started.get(cfg.run_id, start) - start)))

    def wall(cpu: float, longest: float) -> float:
        return max(cpu / max(1, workers), longest)

    def where(c: int) -> tuple[int, list[int], set[int]]:
        return stand.get(c, (0, list(range(len(cells[c].flats))), set())) if cells[c].searched else (0, [0], set())

    def counts(c: int, r: int) -> tuple[int, int]:
        """(at most, size-blind) trials of cell c trained at rung r > its first undecided one."""
        dec, alive, _ = where(c)
        worst = blind = len(alive)
        for _ in range(dec, r):
            blind = search.promoted(blind)
            worst = worst if search.tie > 0 else search.promoted(worst)
        return worst, blind

    per_arm: dict[str, dict[str, float]] = {}
    walls, mean_walls, mean_core, gpu_total = [], [], 0.0, 0.0
    for r, steps, start in [*((r, s - p, p) for r, (s, p) in enumerate(zip(search.steps, [0, *search.steps[:-1]]))),
                            (None, search.steps[-1], 0)]:  # the rungs, then the winners' other seeds
        rung_cpu, rung_mean, longest = 0.0, 0.0, 0.0
        for c, cell in enumerate(cells):
            if r is not None and not cell.searched:
                continue
            arm = per_arm.setdefault(cell.label, {"cpu_s": 0.0, "gpu_s": 0.0, "runs": 0})
            dec, alive, stopped = where(c)
            if r is None:  # the first seed's winner is a trial
                seeds = () if c in settled else search.seeds[1:] if cell.searched else search.seeds
                costs_by = [[cost(search.config(c, t, None, s), steps) for t in alive] for s in seeds]
                costs = [max(x) for x in costs_by]
                mean = sum(sum(x for x, _ in row) / len(row) for row in costs_by)
            elif r < dec:  # decided: trained and in the store
                continue
            else:
                every = [cost(search.config(c, t, r), steps, start) for t in alive if r > dec or t not in stopped]
                worst, blind = counts(c, r) if r > dec else (len(every), len(every))
                costs = sorted(every, reverse=True)[:worst]
                mean = blind * sum(x for x, _ in every) / max(1, len(every))
            arm["cpu_s"] += sum(x for x, _ in costs)
            arm["gpu_s"] += sum(g for _, g in costs)
            arm["runs"] += len(costs)
            rung_cpu += sum(x for x, _ in costs)
            rung_mean += mean
            gpu_total += sum(g for _, g in costs)
            longest = max([longest] + [x for x, _ in costs])
        walls.append(wall(rung_cpu, longest))
        mean_walls.append(rung_mean / max(1, workers))
        mean_core += rung_mean
    worst_core = sum(a["cpu_s"] for a in per_arm.values())
    return {"arms": per_arm, "schedule": search.worst_schedule(), "steps": list(search.steps),
            "cpu_core_s": worst_core, "cpu_wall_s": sum(walls),
            "expected_core_s": mean_core, "expected_wall_s": sum(mean_walls),
            "estimate_core_s": math.sqrt(mean_core * worst_core),
            "estimate_wall_s": math.sqrt(sum(mean_walls) * sum(walls)),
            "decided": {cells[c].name: dec for c, (dec, _, _) in stand.items()}, "gpu_s": gpu_total, "workers": workers,
            "resumed": sum(rid not in finished for rid in started)}


def price_report(name: str, search: Search, est: dict[str, Any]) -> str:
    from .cost import GPU, hms

    arms = len({c.label for c in search.cells if c.searched})
    per_arm = len(search.cells) // max(1, len({c.label for c in search.cells}))
    lines = [f"{name}: a search over {arms} arm(s) x {per_arm} "
             f"cell(s): {search.trials} trials per arm and cell, rungs at {est['steps']} steps, at most "
             f"{est['schedule']} trials trained at each (keep {search.keep:g}"
             + (f", and every trial within {search.tie:g} standard errors of the last kept one's held-out error"
                if search.tie else "")
             + f"); each winner with "
             f"{len(search.seeds)} seed(s). Priced at its worst: the most expensive trials go on and none stops early"
             + (f"; {est['resumed']} go on from a checkpoint, counted from its step" if est.get("resumed") else "")
             + (f"; {est['same']} of its runs the store holds as the same run under another budget (stopped at "
                "its threshold within this one): copied, not trained, priced at 0" if est.get("same") else "")]
    if est.get("decided"):  # a search under way: what the store already decides
        lines.append("  the store decides: " + "; ".join(
            f"{name}: {'every rung' if dec == len(est['steps']) else f'rung(s) 1-{dec}' if dec else 'no rung yet'}"
            for name, dec in est["decided"].items()) + " (priced from there on)")
    w = max([4] + [len(k) for k in est["arms"]]) + 2
    lines.append(f"  {'arm':<{w}}{'runs':>6}{'CPU core-time':>15}{'GPU time':>10}")
    for lab, a in est["arms"].items():
        lines.append(f"  {lab:<{w}}{a['runs']:>6}{hms(a['cpu_s']):>15}{hms(a['gpu_s']):>10}")
    lines.append(f"  total: on this machine about {hms(est['cpu_wall_s'])} with {est['workers']} worker(s), rung after "
                 f"rung ({hms(est['cpu_core_s'])} of one core); on {GPU['name']} about {hms(est['gpu_s'])}")
    lines.append(f"  size-blind: about {hms(est['expected_wall_s'])} with {est['workers']} worker(s) "
                 f"({hms(est['expected_core_s'])} of one core), where keep's share goes on"
                 + (" (none tied)" if search.tie else "") + " and costs the rung's average trial (still none "
                 "stopping early)")
    lines.append(f"  estimate: about {hms(est['estimate_wall_s'])} with {est['workers']} worker(s) "
                 f"({hms(est['estimate_core_s'])} of one core), the geometric middle of the two "
                 "(benchmarks/search_estimate.py sets it against finished searches)")
    return "\n".join(lines)
