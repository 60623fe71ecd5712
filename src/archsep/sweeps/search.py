"""A search in a sweep file: every searched arm's best configuration per cell, by successive
halving over a space of what the papers vary (layers, width, learning rate), chosen on
validation. The `[search]` table of a sweep file:

    seeds = 3                      # the winners train with these seeds; the trials with the first
    [grid]                         # the cells: each arm x grid point has its own search
    "task_params.N" = [20, 50]
    [search]
    steps = [2000, 8000, 32000]    # the rungs: steps a trial trains to; the last is every run's budget
    keep = 0.25                    # the share of a cell's trials that goes on at each rung (rounded up)
    tie = 2                        # optional (default 0): a trial within this many standard errors of
                                   # the last kept one's held-out error goes on too (halving decides
                                   # only what its validation set can tell apart)
    trials = 12                    # configurations drawn per searched arm: the same for every arm
    seed = 0                       # the draw's seed
    [search.settle]                # optional: where a searched arm's positive control is
    level = 0.95                   # the mean test accuracy over the seeds it must reach
    at = { "task_params.N" = 20 }  # the grid point(s) of the control (every key a grid axis)
    [search.axes]                  # searched in every arm named under search.arms
    "train.lr" = [1e-2, 1e-3, 1e-4]
    "model_params.layers" = [1, 2, 4]
    [search.arms.LSTM]             # an arm's own axes, by its label; an arm not named is not searched:
    "model_params.hidden" = [64, 256]  # it trains as declared, at the last rung's budget, every seed

Each searched arm draws `trials` points of its space (the product of the axes) without
replacement, from a generator seeded by the search's seed and the arm's label: the same trials in
every cell and on every machine. Every arm of a comparison gets the same number of trials and the
same rungs: the same search budget. A trial at a rung is an ordinary run (its budget is the rung's
steps), stored by its config's hash; a promoted trial goes on from its end at the rung before
(`engine.checkpoint`, "Ends"), so it costs only the steps between the rungs, and gives the numbers
it would give trained from the start. A trial that stopped before its rung's end (its threshold,
a plateau, divergence) keeps that result at every later rung.

At each rung but the last, a cell's trials still in the search are ranked by their best held-out
metric, then the samples it took to get there, then their order (`rank`), and the first
ceil(keep x n) go on, and with `tie` > 0 also every further trial whose best held-out error is
within `tie` standard errors of the last of those's, e: sqrt(e (1 - e) / n) on its n = eval_size
validation examples (the binomial standard error of an error rate; a metric outside [0, 1], e.g.
an MSE, has no ties). On a task whose trials all sit at chance after a short rung their order
is the validation set's noise, and a trial that would learn later is not dropped for it.
After the last rung the first is the cell's winner, and its configuration
trains at the last rung's budget with every seed of the sweep (the first seed's run is the trial
itself where it reached the last rung). The driver is `runs.search`; the table is read by
`sweeps.search_plan`.

With `[search.settle]`, a winner at a control's grid point whose first seed's test accuracy x
already decides the control trains no other seed: the mean over the n seeds is at most
(x + n - 1) / n, even if every other seed scored 100%, and where that is below `level` the control
fails whatever they score (`Walk.settled`; a claim reads the bound, `experiments.size_claims`).
A control can only be settled as failing this way: a passing one needs every seed. It applies to
tasks scored by an error rate (accuracy = 1 - the test metric) and to searched arms only (an arm
not searched trains every seed at the first rung).
"""
from __future__ import annotations

import hashlib
import itertools
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..config import RunConfig
from ..results import RunResult
from .flat import _nest


@dataclass(frozen=True)
class Cell:
    """One arm at one grid point: its trials (flat configs without budget or seed), or, for an
    arm that is not searched, its one configuration."""

    label: str
    point: dict[str, Any]  # the grid's values here
    flats: list[dict[str, Any]]  # a searched arm: one per trial; else one
    searched: bool
    space: dict[str, list] = field(default_factory=dict)  # the searched axes (searched arms)

    @property
    def name(self) -> str:
        return " ".join([self.label] + [f"{k.split('.')[-1]}={v}" for k, v in self.point.items()])

    def params(self, trial: int) -> dict[str, Any]:
        """A trial's point in its space."""
        return {k: self.flats[trial][k] for k in self.space}


@dataclass(frozen=True)
class Settle:
    """`[search.settle]`: an arm's positive control is at the grid point `at` (axis -> value), where
    its mean test accuracy over the seeds must reach `level`."""

    level: float
    at: dict[str, Any]

    def applies(self, cell: Cell) -> bool:
        return all(cell.point.get(k) == v for k, v in self.at.items())

    def decide(self, first: RunResult | None, seeds: int) -> dict[str, Any] | None:
        """What the first seed's run settles: with its test accuracy x, the mean over `seeds`
        seeds is at most (x + seeds - 1) / seeds; below `level` the control fails whatever the
        others score, and they need not train (None: not settled, or no test accuracy)."""
        if first is None or first.test_metric is None or not 0 <= first.test_metric <= 1 or seeds < 2:
            return None
        x = 1.0 - first.test_metric
        most = (x + seeds - 1) / seeds
        if most >= self.level:
            return None
        return {"run_id": first.run_id, "accuracy": x, "most": most, "level": self.level, "seeds": seeds}

    def describe(self) -> dict[str, Any]:
        return {"level": self.level, "at": dict(self.at)}


@dataclass(frozen=True)
class Search:
    steps: tuple[int, ...]
    keep: float
    trials: int
    seed: int
    seeds: tuple[int, ...]
    cells: list[Cell]
    batch_sizes: dict[int, int] = field(default_factory=dict)  # cell index -> its batch size
    device: str | None = None  # every run's train.device (not part of a run's identity); None: the file's
    tie: float = 0.0  # trials within this many standard errors of the last kept one's error go on too (0: none)
    settle: Settle | None = None  # where a first seed can settle a positive control's failure

    def config(self, c: int, trial: int, rung: int | None = None, seed: int | None = None) -> RunConfig:
        """Cell c's trial (its only configuration, for an arm not searched) at a rung (None: the
        last) with a seed (None: the trials' seed, the sweep's first)."""
        steps = self.steps[-1 if rung is None else rung]
        flat = {**self.cells[c].flats[trial], "seed": self.seeds[0] if seed is None else seed,
                "train.budget": steps * self.batch_sizes[c], **({"train.device": self.device} if self.device else {})}
        return RunConfig.from_dict(_nest(flat))

    def first_rung(self) -> list[RunConfig]:
        """What runs first: every trial at the first rung, and the arms not searched."""
        out = []
        for c, cell in enumerate(self.cells):
            if cell.searched:
                out += [self.config(c, t, 0) for t in range(len(cell.flats))]
            else:
                out += [self.config(c, 0, None, s) for s in self.seeds]
        return out

    def promoted(self, n: int) -> int:
        """How many of n trials go on at a rung."""
        return max(1, math.ceil(self.keep * n))

    def schedule(self) -> list[int]:
        """Trials trained at each rung, none stopping early and none tied: `keep`'s share."""
        out, n = [], self.trials
        for _ in self.steps:
            out.append(n)
            n = self.promoted(n)
        return out

    def worst_schedule(self) -> list[int]:
        """Trials trained at each rung, at most: `schedule`, or with `tie` every trial (all tied)."""
        return [self.trials] * len(self.steps) if self.tie > 0 else self.schedule()

    def kept(self, order: list[int], latest: dict[int, RunResult]) -> list[int]:
        """The trials that go on from a rung, in their order: the first `promoted(n)` of `order`
        (best first), then any further one within `tie` standard errors of the last of those's
        held-out error (`margin`)."""
        n = self.promoted(len(order))
        out = order[:n]
        if self.tie > 0 and out and (r := latest.get(out[-1])) is not None and (m := margin(r, self.tie)) > 0:
            last = rank_key(r, 0)[0]
            out += [t for t in order[n:] if rank_key(latest.get(t), 0)[0] <= last + m]
        return out

    def describe(self) -> dict:
        """The search as a summary states it: each searched arm's space, the budget, the schedule."""
        arms: dict[str, dict] = {}
        for cell in self.cells:
            if cell.searched:
                arms.setdefault(cell.label, {"space": cell.space, "trials": len(cell.flats)})
        return {"steps": list(self.steps), "keep": self.keep, "trials": self.trials, "seed": self.seed,
                "seeds": list(self.seeds), "arms": arms, "schedule": self.schedule(),
                **({"tie": self.tie, "worst_schedule": self.worst_schedule()} if self.tie > 0 else {}),
                **({"settle": self.settle.describe()} if self.settle is not None else {})}


# what a walk asks for: the results of these configs at this stage ("rung1", ..., "winners"),
# in order (None where a run is not there: a replay over a store that lacks it)
Fetch = Callable[[list[RunConfig], str], Sequence[RunResult | None]]
# told, after each rung, the configs whose kept ends the search no longer needs
Done = Callable[[list[RunConfig]], None]
# the results of these configs where they are already there (a store's), training nothing
Have = Callable[[list[RunConfig]], Sequence[RunResult | None]]


@dataclass
class Walk:
    """Where a search stands: each searched cell's latest result per trial, its rungs (trained,
    ranked, promoted), and the winners' runs ((cell, trial, seed) -> result). `incomplete` holds
    the cells a fetch lacked a result for (a replay of a search still running, or of a store that
    holds only some cells): each stopped there, the others went on. `settled` holds the cells
    whose winner's first seed settled its control's failure (`Settle.decide`): their other seeds
    did not train."""

    latest: dict[int, dict[int, RunResult]]
    rungs: dict[int, list[dict]]
    final: dict[tuple[int, int, int], RunResult]
    incomplete: set[int] = field(default_factory=set)
    settled: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.incomplete

    def winner(self, c: int) -> int | None:
        return next((t for (cc, t, _s) in self.final if cc == c), None)

    def results(self) -> list[RunResult]:
        """Each run once: every trial's latest (its whole training, rung after rung) and every
        winner's run at each seed."""
        out = {r.run_id: r for by in self.latest.values() for r in by.values()}
        out.update({r.run_id: r for r in self.final.values()})
        return list(out.values())


WINNERS = "winners"


def rung_stage(r: int) -> str:
    """The stage name of rung `r` (0-based) as `walk` hands it to `fetch`: "rung1", "rung2", ..."""
    return f"rung{r + 1}"


def stage_rung(stage: str) -> int | None:
    """The rung (1-based) of a stage name `rung_stage` made; None for any other (`WINNERS`)."""
    n = stage[4:]
    return int(n) if stage.startswith("rung") and n.isdigit() else None


def stage_sweep(name: str, stage: str) -> str:
    """The store's name of a search's sweep for one stage: `{name}.rung{n}` or `{name}.winners`."""
    return f"{name}.{stage}"


def next_rung_sweep(sweep_name: str) -> str | None:
    """The name of the rung sweep after `sweep_name`, when that is a rung's (`stage_sweep`)."""
    name, _, stage = sweep_name.rpartition(".")
    n = stage_rung(stage)
    return stage_sweep(name, rung_stage(n)) if name and n is not None else None


def walk(search: Search, fetch: Fetch, done: Done | None = None, have: Have | None = None) -> Walk:
    """The search, rung after rung: at each, the trials still in it that have not stopped train
    to the rung's steps (`fetch`), are ranked (`rank`), and the first `promoted(n)` go on; then
    each cell's winner (the first of the last rung) and the arms not searched at every seed. The
    promotions read only the results, so running it (`runs.search`) and replaying it over a
    store's results take the same path to the same winners. Cells are independent: a cell with a
    result missing stops, the others go on. A winner whose first seed settles its control
    (`Search.settle`) trains no other seed; those already there (`have`: e.g. trained before the
    search settled anything) are read as usual, and a cell with every seed there is not settled."""
    cells = search.cells
    latest: dict[int, dict[int, RunResult]] = {c: {} for c, cell in enumerate(cells) if cell.searched}
    alive = {c: list(range(len(cells[c].flats))) for c in latest}
    rungs: dict[int, list[dict]] = {c: [] for c in latest}
    incomplete: set[int] = set()
    last = len(search.steps) - 1
    for r, steps in enumerate(search.steps):
        todo = [(c, t) for c in alive for t in alive[c]
                if t not in latest[c] or not finished_early(latest[c][t], search.steps[r - 1])]
        results = fetch([search.config(c, t, r) for c, t in todo], rung_stage(r))
        trains = set(todo)
        for (c, t), res in zip(todo, results):
            if res is None:
                incomplete.add(c)
            else:
                latest[c][t] = res
        stale: list[RunConfig] = []
        for c in [c for c in alive if c in incomplete]:
            del alive[c]
        for c in alive:
            order = rank([(t, latest[c].get(t)) for t in alive[c]])
            keep = sorted(search.kept(order, latest[c])) if r < last else order[:1]
            trained = [t for t in alive[c] if (c, t) in trains]
            rungs[c].append({"steps": steps, "trained": trained, "ranked": order,
                             "promoted": keep if r < last else []})
            # kept ends no longer needed: superseded ones, and those of trials that stop here
            stale += [search.config(c, t, r - 1) for t in trained if r]
            stale += [search.config(c, t, r) for t in alive[c] if t not in keep or r == last]
            alive[c] = keep
        if done is not None:
            done(stale)
    settled: dict[int, dict[str, Any]] = {}
    if search.settle is not None:
        for c in alive:
            got = search.settle.decide(latest[c].get(alive[c][0]), len(search.seeds)) \
                if search.settle.applies(cells[c]) else None
            if got is not None:
                settled[c] = got
    there: dict[int, list[int]] = {}  # a settled cell's other seeds already there
    for c in settled:
        others = search.seeds[1:]
        found = have([search.config(c, alive[c][0], None, s) for s in others]) if have else [None] * len(others)
        there[c] = [s for s, r in zip(others, found) if r is not None]
    settled = {c: got for c, got in settled.items() if len(there[c]) < len(search.seeds) - 1}
    final = [(c, alive[c][0] if c in alive else 0, s) for c in range(len(cells))
             if c not in incomplete for s in ([search.seeds[0], *there[c]] if c in settled else search.seeds)]
    configs = [search.config(c, t, None, s) for c, t, s in final]
    results = fetch(configs, WINNERS)
    if done is not None:
        done(configs)
    incomplete |= {c for (c, _t, _s), res in zip(final, results) if res is None}
    return Walk(latest, rungs, {k: res for k, res in zip(final, results) if res is not None and k[0] not in incomplete},
                incomplete, {c: s for c, s in settled.items() if c not in incomplete})


def replay(search: Search, results: dict[str, RunResult]) -> Walk:
    """The search as the results it has (run id -> result, e.g. a store's) decide it, running
    nothing: complete where every run it needs is there."""
    def get(cfgs: list[RunConfig], _stage: str = "") -> list[RunResult | None]:
        return [results.get(c.run_id) for c in cfgs]

    return walk(search, get, have=get)


def rank_key(r: RunResult | None, index: int) -> tuple:
    """A trial's place in its cell (smaller is better): best held-out metric, then the samples it
    took to get there, then its order; a failed run or one with no evaluation last."""
    if r is None or r.status == "error" or r.best_metric is None or not math.isfinite(r.best_metric):
        return (math.inf, math.inf, index)
    return (r.best_metric, r.best_samples if r.best_samples is not None else math.inf, index)


def margin(r: RunResult, tie: float) -> float:
    """`tie` binomial standard errors of r's best held-out error e on its eval_size examples,
    sqrt(e (1 - e) / n); 0 for a metric outside [0, 1] (not an error rate) or none."""
    e, n = r.best_metric, int((r.config.get("train") or {}).get("eval_size") or 0)
    if e is None or not 0 <= e <= 1 or n <= 0:
        return 0.0
    return tie * math.sqrt(e * (1 - e) / n)


def rank(results: Sequence[tuple[int, RunResult | None]]) -> list[int]:
    """Trial indices, best first, from (trial index, its latest result) pairs."""
    return [i for i, r in sorted(results, key=lambda ir: rank_key(ir[1], ir[0]))]


def finished_early(r: RunResult, steps: int) -> bool:
    """Whether a trial's run stopped before its rung's end (its threshold, a plateau, divergence,
    an error): it trains no more, and its result stands at every later rung."""
    if r.status != "censored":
        return True
    return bool(r.samples is not None and r.samples < steps * int(r.config["train"]["batch_size"]))


def draw(space: dict[str, list], trials: int, seed: int, label: str) -> list[dict[str, Any]]:
    """`trials` points of the product of `space`'s axes, without replacement, in the product's
    order; the generator is seeded by the search's seed and the arm's label."""
    keys = list(space)
    points = list(itertools.product(*(space[k] for k in keys)))
    h = int(hashlib.sha256(f"archsep-search:{seed}:{label}".encode()).hexdigest()[:16], 16)
    chosen = sorted(random.Random(h).sample(range(len(points)), trials)) if trials < len(points) \
        else list(range(len(points)))
    return [dict(zip(keys, points[i])) for i in chosen]
