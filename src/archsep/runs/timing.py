"""How long one training step of a model shape takes on this machine: measured, cached, or
extrapolated (the half of the dry run's cost model that times things; `runs.cost` turns these
step costs into a run's and a preset's cost).

A step's cost depends on the model's shape, not on the seed or the learning rate (`cost_key`).
In a family of shapes that differ only in the length N, the three shortest are timed and the
longer ones extrapolated from the two longest of those, linearly in the step's FLOPs; the FLOPs
themselves are counted at the three shortest lengths and extrapolated by the quadratic through
them. Measured costs are kept per machine, torch version and archsep source in a cache file
(`cache_file`), so a second dry run times nothing it has timed before; timings taken while other
work keeps every core busy are upper bounds, said so, and never kept.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import multiprocessing as mp
import os
import platform
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import torch

from ..config import RunConfig
from ..fileio import cache_root
from ..engine.evaluation import CHUNK
from ..plugins import activate, payload
from ..engine.planning import (group_key, longest_step_flops, record_count, step_flops,
                       step_ops)
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


def cores() -> int:
    """The cores this process may run on (its affinity, where the OS says; else every core): the
    one core count the runner, the timings and the cost model use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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
    h = hashlib.sha256(f"{cpu}|{cores()}|{torch.__version__}".encode())
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
    draws (`_length_factor`), p the family's growth in N (in [0, 2]) through its two longest
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
    if load >= cores() - 0.5:  # every core was busy with other work: use, never keep
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


def estimated_flops(cfg: RunConfig) -> float:
    """A step's FLOPs as the last `step_costs` estimated them (counted where it did not)."""
    return _FLOPS_EST.get(cost_key(cfg)) or step_flops(cfg)


def _exponent(y1: float, y2: float, x1: float, x2: float) -> float:
    """The exponent of the power law through (x1, y1), (x2, y2), held to [0, 2]: from a step the
    length hardly moves (a one-layer Transformer read at its last position: its fixed part, the
    MLP and readout of one position, outweighs its (B, H, L) attention) to quadratic growth
    (attention from every position); a recurrence grows about linearly."""
    p = math.log(y2 / y1) / math.log(x2 / x1) if min(y1, y2, x1) > 0 and x2 > x1 else 1.0
    return min(2.0, max(0.0, p))


def _family_flops(Ns: list, by_N: dict, known: dict | None = None) -> dict:
    """FLOPs per length, at its longest sequence: counted at the three shortest (or taken from
    `known`, counted before), the quadratic through them beyond (at least the line through the two
    longest counted: a step with a fixed part, such as a one-layer Transformer read at its last
    position, grows by its per-position part alone, not in proportion to N)."""
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
        out[N] = max(quad, y2 + (y2 - y1) / (x2 - x1) * (N - x2), y2)
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
    return max(1, cores() - round(_load()))


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
