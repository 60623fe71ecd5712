"""What a set of runs will cost, before any of it runs (`archsep reproduce P --dry-run`).

Per run: training steps x the time of one step, plus the held-out evaluations. The time of a
step on this machine is measured, not guessed: a few real steps of each distinct model shape
(one thread, as a worker trains) and a forward pass over one evaluation chunk. Three things keep
a dry run short (issue "speed": at most about 30 s for any preset):
- a step's cost depends on the model's shape, not on the seed or the learning rate (`cost_key`);
- in a family of shapes that differ only in the length N, the three shortest are timed and the
  longer ones extrapolated from the two longest of those, linearly in the step's FLOPs (which
  grow with N as the model's own arithmetic does: N^2 for attention, N for a recurrence); the
  FLOPs themselves are counted at the three shortest lengths and extrapolated by the quadratic
  through them (exact for a model whose arithmetic is a polynomial of degree 2 in N, and never
  below linear growth).
  `benchmarks/dry_run.py` measures both extrapolations against real steps. Runs never use
  these estimates: their planner counts every shape's FLOPs (`planning.step_flops`);
- measured costs are kept per machine, torch version and archsep source in a cache file
  (`cache_file`: $ARCHSEP_CACHE_DIR, else $XDG_CACHE_HOME/archsep or ~/.cache/archsep; an empty
  ARCHSEP_CACHE_DIR turns it off), so a second dry run times nothing it has timed before.
A GPU's time is modelled, not measured: every operator costs a launch, and the FLOPs run at a
sustained rate (`GPU`). Runs stop early when they reach their threshold; the estimate assumes
they do not (an upper bound), and uses what the store already holds where a run has finished.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import heapq
import json
import math
import multiprocessing as mp
import os
import platform
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch

from ..config import RunConfig
from ..fileio import cache_root
from .evaluation import CHUNK, LOOKS
from ..plugins import activate, payload
from .planning import (group_key, longest_step_flops, model_stackable, plan_batches, record_count, step_flops,
                       step_ops)

# one H100 running PyTorch eagerly: ~8 us of launch and dispatch per operator; small models are
# launch-bound. 1e14 FLOP/s sustained: well under the TF32/bf16 peak, as small matmuls get.
# Checked once against a GPU (2026-11-26, an H200, one process, fp32): qstr-fig3's RNN took 3.2,
# 3.5 and 4.1 ms a step at q = 2, 1, 5 (evaluations included), where this model says 2.5, 2.5
# and 3.0: about 1.3x low (fp32 runs no tensor-core FLOPs). Not recalibrated on one model.
GPU: dict[str, Any] = {"name": "one H100 (modelled)", "op_s": 8e-6, "flops": 1e14}
EVAL_PROBE = 32  # held-out examples in the timed evaluation forward
TIMED_STEPS, TIMED_S = 8, 0.25  # steps timed per shape: at most 8, or until they took TIMED_S seconds


@dataclass
class StepCost:
    cpu_s: float  # one training step on one CPU thread
    eval_s: float  # one forward pass over CHUNK held-out examples
    flops: float  # one training step
    ops: int  # operators launched by one training step


_STEPS: dict[str, StepCost] = {}  # by cost_key: measured in this process, read from the cache, or extrapolated
_TRAIN: dict[str, StepCost] = {}  # by cost_key, tasks trained on variable lengths: the mean training step
_HOW: dict[str, str] = {}  # by cost_key: "timed", "cached" or "extrapolated"
# by cost_key: the load (1-minute average) on a machine whose every core was busy with other work
# when the shape was timed; such a time measures the contention too, so it is used (an upper
# bound) but never kept in the cache, where it would pass for this machine's own on a later run
_BUSY: dict[str, float] = {}
_FLOPS_EST: dict[str, float] = {}  # by cost_key: counted (the three shortest of a family) or extrapolated
CACHE_NAME = "step-costs.json"
# the shortest lengths of a family that are timed; the longer ones are extrapolated from the two
# longest of these (a step of a few hundred positions is far from its overhead-bound short end)
TIMED_LENGTHS = 3


def cost_key(cfg: RunConfig) -> str:
    """What one step's cost depends on: the task and model shape and the batch (not the seed, the
    learning rate or the evaluation schedule)."""
    d = json.loads(group_key(cfg))
    d.pop("seed", None)
    d["train"] = {k: v for k, v in d["train"].items() if k in ("batch_size", "precision")}
    return json.dumps(d, sort_keys=True)


def _family(cfg: RunConfig) -> tuple[str, float | None]:
    """(the cost key without the length N, N): shapes of one family differ only in N."""
    d = json.loads(cost_key(cfg))
    N = d["task_params"].pop("N", None)
    return json.dumps(d, sort_keys=True), (float(N) if isinstance(N, (int, float)) else None)


def cache_file() -> Path | None:
    """Where measured step costs are kept between dry runs (None: nowhere)."""
    root = cache_root()
    return root / CACHE_NAME if root else None


@functools.cache
def fingerprint() -> str:
    """The machine, torch and archsep's own model, task and engine code: a cached cost is used
    only where all four are the same as when it was measured."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), cpu)
    except OSError:
        pass
    src = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(f"{cpu}|{os.cpu_count()}|{torch.__version__}".encode())
    for part in ("models", "tasks", "engine"):
        for f in sorted(p for ext in ("*.py", "*.c") for p in (src / part).rglob(ext)):
            h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:16]


def _read_cache() -> dict[str, list[float]]:
    path = cache_file()
    try:
        doc = json.loads(path.read_text()) if path else {}
    except (OSError, ValueError):
        return {}  # none yet, unreadable or damaged: measure again
    if not isinstance(doc, dict) or doc.get("fingerprint") != fingerprint() or not isinstance(doc.get("costs"), dict):
        return {}
    return {k: v for k, v in doc["costs"].items()  # [cpu_s, eval_s, ops] and, since it is kept, the FLOPs
            if isinstance(v, list) and len(v) in (3, 4) and all(isinstance(x, (int, float)) and x >= 0 for x in v)}


def _write_cache(costs: dict[str, list[float]]) -> None:
    """Keep these measured costs (with those already kept); a cache that cannot be written is
    left alone: an estimate never fails for it."""
    from ..errors import ArchsepError
    from ..fileio import atomic_write

    path = cache_file()
    if path is None or not costs:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"fingerprint": fingerprint(), "costs": {**_read_cache(), **costs}}
        atomic_write(path, json.dumps(doc, sort_keys=True), "cache")
    except (OSError, ArchsepError):
        pass


def step_costs(configs: Sequence[RunConfig], measure: bool = True, workers: int = 1) -> dict[str, StepCost] | None:
    """The step cost of every shape among `configs` (by `cost_key`): read from the cache, or
    timed for the TIMED_LENGTHS shortest lengths of each family and extrapolated for the longer
    ones. Shapes are timed in `workers` processes at once (one thread each, as runs train).

    Every shape is timed and counted at its longest sequence (`sample_test`), so a family's
    lengths compare like fixed shapes. For a task trained on variable lengths the training
    step's mean is then that cost times the mean of (L / L_max)^p over the lengths training
    draws (`_length_factor`), p the family's growth in N (in [1, 2]) through its two longest
    counted FLOPs (for FLOPs) or timed lengths (for time)."""
    cached = _read_cache()
    families: dict[str, dict[float | None, RunConfig]] = defaultdict(dict)
    for c in configs:
        fam, N = _family(c)
        families[fam].setdefault(N, c)
    new: dict[str, list[float]] = {}
    out: dict[str, StepCost] = {}
    todo = [cfg for by_N in families.values() for i, (N, cfg) in enumerate(sorted(
        by_N.items(), key=lambda kv: -1.0 if kv[0] is None else kv[0])) if (i < TIMED_LENGTHS or N is None)
        and cost_key(cfg) not in _STEPS and cost_key(cfg) not in cached]
    if todo and not measure:
        return None  # a shape nobody has timed: the caller does without
    load = _load() if todo else 0.0
    _measure(todo, workers)
    for by_N in families.values():
        Ns = sorted(by_N, key=lambda n: -1.0 if n is None else n)
        known = {}  # FLOPs already counted: in this process, or kept in the cache with the shape's time
        for N in Ns:
            key = cost_key(by_N[N])
            if key in _STEPS:
                known[N] = _STEPS[key].flops
            elif len(cached.get(key, ())) == 4:
                known[N] = cached[key][3]
                record_count(by_N[N], known[N], int(cached[key][2]), longest=True)
        flops = _family_flops(Ns, by_N, known)
        timed: list[tuple[float, StepCost]] = []
        for i, N in enumerate(Ns):
            cfg = by_N[N]
            key = cost_key(cfg)
            if key in _STEPS:
                sc = _STEPS[key]
                if _HOW.get(key) == "timed" and key not in cached and key not in _BUSY:  # timed by _measure
                    new[key] = [sc.cpu_s, sc.eval_s, sc.ops, sc.flops]
            elif key in cached:
                cpu_s, eval_s, ops = cached[key][:3]
                sc = StepCost(cpu_s, eval_s, flops[N], int(ops))
                _HOW[key] = "cached"
            elif i < TIMED_LENGTHS or N is None:
                sc = step_cost(cfg)
                new[key] = [sc.cpu_s, sc.eval_s, sc.ops, sc.flops]
            else:
                sc = _extrapolate(timed[-2:], flops[N], N)
                _HOW[key] = "extrapolated"
            _STEPS[key] = out[key] = sc
            if N is not None and i < TIMED_LENGTHS:
                timed.append((N, sc))
        variable = not by_N[Ns[0]].build_task().fixed_shapes
        p_t = _exponent(timed[-2][1].cpu_s, timed[-1][1].cpu_s, timed[-2][0], timed[-1][0]) if len(timed) >= 2 else 1.5
        p_f = _exponent(timed[-2][1].flops, timed[-1][1].flops, timed[-2][0], timed[-1][0]) if len(timed) >= 2 else 1.5
        for N in Ns:
            key = cost_key(by_N[N])
            sc = out[key]
            if variable:
                sc = dataclasses.replace(sc, cpu_s=sc.cpu_s * _length_factor(by_N[N], p_t),
                                         flops=sc.flops * _length_factor(by_N[N], p_f))
            out[key] = _TRAIN[key] = sc
            _FLOPS_EST[key] = sc.flops
    if load >= (os.cpu_count() or 1) - 0.5:  # every core was busy with other work: use, never keep
        _BUSY.update({k: load for k in new})
        new = {}
    _write_cache(new)
    return out


def _length_factor(cfg: RunConfig, p: float) -> float:
    """Mean of (L / L_max)^p over the lengths of the training batches `_length_ratios` draws."""
    ratios = _length_ratios(cfg)
    return sum(r**p for r in ratios) / len(ratios)


_RATIOS: dict[str, tuple[float, ...]] = {}  # by cost_key: the lengths a shape's training draws


def _length_ratios(cfg: RunConfig, batches: int = 32) -> tuple[float, ...]:
    """L / L_max of `batches` training batches (seeded: the same every time), L_max the length
    `sample_test` draws; drawn once per shape for both the time and the FLOPs factor."""
    key = cost_key(cfg)
    if key not in _RATIOS:
        task = cfg.build_task()
        gen = torch.Generator().manual_seed(0)
        top = task.sample_test(1, gen).x.shape[1]
        _RATIOS[key] = tuple(task.sample(cfg.train.batch_size, gen).x.shape[1] / top for _ in range(batches))
    return _RATIOS[key]


def progress_weights(configs: Sequence[RunConfig], started: Mapping[str, int] | None = None) -> dict[str, float]:
    """Each run's share of the work, for a progress bar's ETA: its remaining budget's modelled
    time where every shape's step cost is in the cache (a dry run measured it), else its
    remaining budget's FLOPs; remaining is the whole budget, or what is left after the step
    its checkpoint saved (`started`: run id -> step, as `estimate` takes it). Nothing is timed
    here. Runs that stop at their threshold take less; the shares stay comparable as long as
    they stop at similar fractions of their budgets."""
    costs = step_costs(configs, measure=False)
    started = started or {}
    out = {}
    for c in configs:
        steps = max(0, planned_steps(c) - started.get(c.run_id, 0))
        per_step = costs[cost_key(c)].cpu_s if costs is not None else step_flops(c)
        out[c.run_id] = max(steps * per_step, 1e-12)
    return out


def estimated_flops(cfg: RunConfig) -> float:
    """A step's FLOPs as the last `step_costs` estimated them (counted where it did not)."""
    return _FLOPS_EST.get(cost_key(cfg)) or step_flops(cfg)


def _exponent(y1: float, y2: float, x1: float, x2: float) -> float:
    """The exponent of the power law through (x1, y1), (x2, y2), held to [1, 2]: growth between
    linear (a recurrence) and quadratic (attention) in the length."""
    p = math.log(y2 / y1) / math.log(x2 / x1) if min(y1, y2, x1) > 0 and x2 > x1 else 1.0
    return min(2.0, max(1.0, p))


def _family_flops(Ns: list, by_N: dict, known: dict | None = None) -> dict:
    """FLOPs per length, at its longest sequence: counted at the three shortest (or taken from
    `known`, counted before), the quadratic through them beyond (at least linear growth from the
    longest counted)."""
    known = known or {}

    def counted(N):
        return known[N] if N in known else longest_step_flops(by_N[N])

    out = {N: counted(N) for N in Ns[:3]}
    if len(Ns) <= 3 or None in Ns:
        return {**out, **{N: counted(N) for N in Ns[3:]}}
    (x0, x1, x2), (y0, y1, y2) = Ns[:3], (out[N] for N in Ns[:3])
    for N in Ns[3:]:
        quad = (y0 * (N - x1) * (N - x2) / ((x0 - x1) * (x0 - x2)) + y1 * (N - x0) * (N - x2) / ((x1 - x0) * (x1 - x2))
                + y2 * (N - x0) * (N - x1) / ((x2 - x0) * (x2 - x1)))
        out[N] = max(quad, y2 * N / x2)
    return out


def _extrapolate(timed: list[tuple[float, StepCost]], flops: float, N: float) -> StepCost:
    """A longer shape's cost from two shorter ones of its family (all at their longest length):
    time linear in FLOPs through both points (through the longer point and the origin where the
    fit would fall below it), operators linear in N."""
    (n1, a), (n2, b) = timed[0], timed[1]

    def line(y1: float, y2: float, x1: float, x2: float, x: float) -> float:
        if x2 > x1 and y2 > y1:
            return y2 + (y2 - y1) / (x2 - x1) * (x - x2)
        return y2 * x / x2 if x2 > 0 else y2  # flat or noisy: proportional to the longer point

    ratio = line(a.cpu_s, b.cpu_s, a.flops, b.flops, flops) / b.cpu_s if b.cpu_s > 0 else 1.0
    ratio = max(ratio, 1.0)  # a longer sequence never costs less
    ops = max(b.ops, round(line(float(a.ops), float(b.ops), n1, n2, N)))
    return StepCost(b.cpu_s * ratio, b.eval_s * ratio, flops, int(ops))


def _measure_one(cfg_dict: dict, plugins: list | None) -> tuple[float, float, float, int]:
    """A timing process's work: one shape's step cost (the plugins that define it imported)."""
    activate(plugins)
    sc = step_cost(RunConfig.from_dict(cfg_dict))
    return sc.cpu_s, sc.eval_s, sc.flops, sc.ops


def _measure(cfgs: list[RunConfig], workers: int) -> None:
    """Time these shapes into `_STEPS` (and their counted FLOPs into the planner's): in
    `workers` spawned processes at once (no more than the machine's idle cores) where there
    are several, longest first, else here. A
    pool that fails (a plugin its processes cannot import) leaves the work to this process."""
    same: dict[str, list[RunConfig]] = defaultdict(list)  # shapes alike but for task params that draw the data
    for c in cfgs:
        same[_shape_key(c)].append(c)
    cfgs = [g[0] for g in same.values()]
    workers = min(workers, _idle_cores())
    if workers > 1 and len(cfgs) > 1:
        order = sorted(cfgs, key=lambda c: -float(c.task_params.get("N") or 0))
        try:
            with ProcessPoolExecutor(min(workers, len(order)), mp_context=mp.get_context("spawn")) as pool:
                done = list(pool.map(_measure_one, [c.to_dict() for c in order], [payload()] * len(order)))
        except Exception:  # noqa: BLE001  (a broken pool: time them here instead)
            done = []
        for cfg, (cpu_s, eval_s, flops, ops) in zip(order, done):
            key = cost_key(cfg)
            _STEPS[key], _HOW[key] = StepCost(cpu_s, eval_s, flops, ops), "timed"
            record_count(cfg, flops, ops, longest=True)
    for g in same.values():
        sc = step_cost(g[0])
        for c in g[1:]:
            key = cost_key(c)
            _STEPS[key], _HOW[key] = sc, "timed"
            record_count(c, sc.flops, sc.ops, longest=True)


def _load() -> float:
    """The 1-minute load average (0 where the system does not say)."""
    try:
        return os.getloadavg()[0]
    except (OSError, AttributeError):
        return 0.0


def _idle_cores() -> int:
    """Cores not busy with other work (by the 1-minute load average): timing beside another
    job's processes would measure the contention, not the step."""
    return max(1, (os.cpu_count() or 1) - round(_load()))


def _shape_key(cfg: RunConfig) -> str:
    """What a timed step sees: the task (its name, what its model is built for, whether its
    lengths vary) and the model, batch and precision; not the task parameters that only change
    which examples are drawn (e.g. equality's eq-random and eq-one negatives)."""
    task = cfg.build_task()
    d = json.loads(cost_key(cfg))
    d["task_params"] = {"spec": dataclasses.asdict(task.spec), "fixed_shapes": task.fixed_shapes}
    return json.dumps(d, sort_keys=True)


def steady_step_times(step: Callable[[], None], clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Seconds of the training steps after the first full one, which is run but not counted
    (its allocations made a slow model's first step twice its later ones: TF-(2,64) on Dyck at
    N = 400, 0.77 s against 0.35 s): up to TIMED_STEPS of them, fewer once they took TIMED_S (a
    slow model: a few steps of it say enough), at least one."""
    step()  # the first full step: the allocations
    times: list[float] = []
    while len(times) < TIMED_STEPS and sum(times) <= TIMED_S:
        t0 = clock()
        step()
        times.append(clock() - t0)
    return times


def step_cost(cfg: RunConfig) -> StepCost:
    """Measure one training step and one evaluation chunk of this config's model."""
    key = cost_key(cfg)
    if key in _STEPS:
        return _STEPS[key]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a worker trains
    try:
        torch.set_flush_denormal(True)  # as the engine trains (see train.flush_denormals)
        task = cfg.build_task()
        gen = torch.Generator().manual_seed(0)
        torch.manual_seed(0)
        model = cfg.model_config().build(task.spec)
        model.prune_to_readout()
        opt = torch.optim.AdamW(model.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
        def step(n: int = cfg.train.batch_size) -> None:  # variable lengths: timed at the longest (step_costs scales)
            batch = (task.sample if task.fixed_shapes else task.sample_test)(n, gen)
            opt.zero_grad(set_to_none=True)
            task.loss(model(batch.x), batch).backward()
            opt.step()

        step(min(4, cfg.train.batch_size))  # the warm-up (lazy init), on a small batch
        times = steady_step_times(step)
        # one forward over EVAL_PROBE held-out examples (the training steps warmed the model up),
        # scaled to a chunk of CHUNK: a forward pass is linear in its batch
        held = task.sample_test(min(CHUNK, EVAL_PROBE), gen)
        with torch.no_grad():
            model.eval()
            t0 = time.perf_counter()
            model(held.x)
            eval_s = (time.perf_counter() - t0) * CHUNK / len(held.x)
    finally:
        torch.set_num_threads(threads)
        torch.set_flush_denormal(False)
    _STEPS[key] = StepCost(sum(times) / len(times), eval_s, longest_step_flops(cfg), step_ops(cfg, longest=True))
    _HOW[key] = "timed"
    return _STEPS[key]


def evaluations(cfg: RunConfig, steps: int) -> tuple[int, float]:
    """(number of held-out evaluations, examples evaluated in all) over `steps` steps: every
    eval_every steps; progressive mode evaluates most points only partly (screening stops after
    its first looks), every curve_every-th in full."""
    tc = cfg.train
    n = steps // tc.eval_every + sum(e <= steps for e in tc.early_steps())
    if tc.eval_mode == "every":
        return n, n * tc.eval_size
    full = n // tc.curve_every + 1
    partial = min(LOOKS[1], tc.eval_size)
    return n, full * tc.eval_size + (n - full) * partial


@dataclass
class ArchCost:
    label: str
    model: str
    runs: int = 0
    steps: int = 0
    train_flops: float = 0.0
    cpu_s: float = 0.0  # one thread, all runs
    gpu_s: float = 0.0
    step_flops: list = field(default_factory=list)


def planned_steps(cfg: RunConfig) -> int:
    """The most steps a run can train: its budget, or under successive halving its share of its
    race's (the worse half of the race stops at each rung whatever happens)."""
    steps = cfg.train.budget // cfg.train.batch_size
    if not cfg.train.halving_lrs:
        return steps
    n = racing = len(cfg.train.halving_lrs)
    total, prev = 0, 0
    for r in cfg.train.rung_steps():
        total += racing * (r - prev)
        racing, prev = math.ceil(racing / 2), r
    return round((total + racing * (steps - prev)) / n)


def stage_configs(cfg: RunConfig) -> list[RunConfig]:
    """The shapes a run's length curriculum trains at (`train.curriculum`): the run at each
    stage's length, without a curriculum; priced as their own shapes (empty without one)."""
    out = []
    for n, _ in cfg.train.curriculum:
        train = dataclasses.replace(cfg.train, curriculum=())
        out.append(dataclasses.replace(cfg, task_params={**cfg.task_params, "N": n}, train=train))
    return out


def _split(cfg: RunConfig, steps: int) -> list[tuple[RunConfig, int]]:
    """`steps` of the run by the shape that trains them: its curriculum's stages first, then itself."""
    out, left = [], steps
    for stage, (_, n_steps) in zip(stage_configs(cfg), cfg.train.curriculum):
        k = min(left, n_steps)
        out.append((stage, k))
        left -= k
    return out + [(cfg, left)]


def _train_cost(c: RunConfig) -> StepCost:
    return _TRAIN.get(cost_key(c)) or _STEPS.get(cost_key(c)) or step_cost(c)


def run_seconds(cfg: RunConfig, steps: int) -> tuple[float, float]:
    """(CPU seconds on one thread, modelled GPU seconds) of one run of `steps` steps (a length
    curriculum's stages each at their own shape's cost; evaluations at the run's own)."""
    sc = _train_cost(cfg)
    _, examples = evaluations(cfg, steps)
    parts = [(_train_cost(c), k) for c, k in _split(cfg, steps)]
    cpu = sum(k * p.cpu_s for p, k in parts) + examples / CHUNK * sc.eval_s
    # evaluation on a GPU: forward only (~1/3 of a step's FLOPs and operators), CHUNK at a time
    eval_gpu = examples / CHUNK * (sc.ops / 3 * GPU["op_s"]
                                   + sc.flops / 3 * CHUNK / cfg.train.batch_size / GPU["flops"])
    gpu = sum(k * (p.ops * GPU["op_s"] + p.flops / GPU["flops"]) for p, k in parts) + eval_gpu
    return cpu, gpu


def estimate(configs: Sequence[RunConfig], workers: int = 1, finished: set[str] | None = None,
             started: dict[str, int] | None = None) -> dict:
    """Costs per architecture label and in all: every run to its budget (or its share of its
    halving race's, `planned_steps`), except runs already
    finished (`finished`: their run ids), which cost nothing more, and runs that go on from a
    checkpoint (`started`: run id -> the step saved), which cost only their remaining steps.
    The wall time on this machine schedules the batches in the runner's order (those that go on
    from a checkpoint first, then longest first by `progress_weights`, the runner's weights;
    "order" lists each batch's first run) over `workers` single-thread workers."""
    finished, started = finished or set(), started or {}
    by_label: dict[str, ArchCost] = {}
    run_s: dict[str, tuple[float, float]] = {}
    t0 = time.perf_counter()
    todo_cfgs = [c for c in configs if c.run_id not in finished]
    costs = step_costs(todo_cfgs + [st for c in todo_cfgs for st in stage_configs(c)], workers=workers) or {}
    how = {k: _HOW.get(k, "timed") for k in costs}
    for c in configs:
        label = c.arm
        name = c.model_config().short_name()
        a = by_label.setdefault(label, ArchCost(label, name))
        if name not in a.model.split(" .. "):  # one label over several sizes, e.g. heads = q
            a.model = f"{a.model.split(' .. ')[0]} .. {name}"
        steps = max(0, planned_steps(c) - started.get(c.run_id, 0))
        a.runs += 1
        if c.run_id in finished:
            continue
        cpu, gpu = run_seconds(c, steps)
        run_s[c.run_id] = (cpu, gpu)
        a.steps += steps
        a.train_flops += sum(k * estimated_flops(st) for st, k in _split(c, steps))
        a.cpu_s += cpu
        a.gpu_s += gpu
        a.step_flops.append(estimated_flops(c))
    measure_s = time.perf_counter() - t0
    todo = [c for c in configs if c.run_id not in finished]
    # in the runner's order: by the same weights (every shape's step cost is known by now)
    weights = progress_weights(todo, started) if todo else {}
    batches = plan_batches(todo, flops=estimated_flops, seconds=lambda c: weights[c.run_id], resumed=started) \
        if todo else []
    loads = [0.0] * max(1, workers)
    heapq.heapify(loads)
    for b in batches:  # in the planner's order, each to the first free worker
        heapq.heappush(loads, heapq.heappop(loads) + sum(run_s[c.run_id][0] for c in b))
    gpu_batches = defaultdict(list)  # on a GPU every stackable group trains as one stack
    for c in todo:
        gpu_batches[group_key(c)].append(c)
    gpu_wall = 0.0
    for g in gpu_batches.values():
        per_run = [run_s[c.run_id][1] for c in g]
        # a stack launches each operator once for all its runs: every run's launches but one are saved
        launches = [sum(k * _train_cost(st).ops * GPU["op_s"] for st, k in _split(c, planned_steps(c))) for c in g]
        saved = sum(launches) - max(launches) if model_stackable(g[0]) else 0.0
        gpu_wall += sum(per_run) - saved
    return {"archs": list(by_label.values()), "runs": len(configs), "to_run": len(todo), "batches": len(batches),
            "cpu_core_s": sum(a.cpu_s for a in by_label.values()), "cpu_wall_s": max(loads) if batches else 0.0,
            "workers": max(1, workers), "gpu_s": max(gpu_wall, 0.0), "measure_s": measure_s,
            "shapes": {h: sum(v == h for v in how.values()) for h in ("timed", "cached", "extrapolated")},
            "busy_load": max((_BUSY[k] for k in costs if k in _BUSY and how[k] == "timed"), default=None),
            "cache": str(cache_file() or ""), "resumed": sum(c.run_id in started for c in todo),
            "order": [b[0].run_id for b in batches],  # the first run of each batch, as they start
            "train_flops": sum(a.train_flops for a in by_label.values()), "gpu": GPU["name"]}


def hms(s: float) -> str:
    if not math.isfinite(s):
        return "?"
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def report(name: str, est: dict) -> str:
    lines = [f"{name}: {est['runs']} runs, {est['to_run']} to run in {est['batches']} batches; every run "
             f"to its budget, the losers of a learning-rate race to their rung (runs that reach their threshold "
             f"or a plateau stop sooner)"
             + (f"; {est['resumed']} go on from a checkpoint, counted from its step" if est.get("resumed") else "")]
    w = max([4] + [len(a.label) for a in est["archs"]]) + 2
    m = max([5] + [len(a.model) for a in est["archs"]]) + 2
    lines.append(f"  {'arch':<{w}}{'model':<{m}}{'runs':>5} {'GFLOP/step':>16}{'train TFLOP':>13}"
                 f"{'CPU core-time':>15}{'GPU time':>10}")
    for a in est["archs"]:
        gf = f"{min(a.step_flops) / 1e9:.3g}-{max(a.step_flops) / 1e9:.3g}" if a.step_flops else "-"
        lines.append(f"  {a.label:<{w}}{a.model:<{m}}{a.runs:>5} {gf:>16}{a.train_flops / 1e12:>13.1f}"
                     f"{hms(a.cpu_s):>15}{hms(a.gpu_s):>10}")
    lines.append(f"  total: {est['train_flops'] / 1e15:.3g} PFLOP of training; on this machine about "
                 f"{hms(est['cpu_wall_s'])} with {est['workers']} worker(s) ({hms(est['cpu_core_s'])} of one core); "
                 f"on {est['gpu']} about {hms(est['gpu_s'])}")
    shapes = est.get("shapes", {})
    lines.append(f"  (step costs on this machine, one thread each: {shapes.get('timed', 0)} shape(s) timed now, "
                 f"{shapes.get('cached', 0)} from the cache{' ' + est['cache'] if est.get('cache') else ''}, "
                 f"{shapes.get('extrapolated', 0)} extrapolated from shorter N; {est['measure_s']:.0f} s in all. "
                 "A GPU's time is a model: operators x launch cost + FLOPs at a sustained rate)")
    if est.get("busy_load") is not None:
        lines.append(f"  (timed while other work kept every core busy, load {est['busy_load']:.1f} on "
                     f"{os.cpu_count() or 1} cores: the CPU times are upper bounds, and were not kept in the cache; "
                     "run --dry-run again on an idle machine for this machine's own)")
    return "\n".join(lines)
