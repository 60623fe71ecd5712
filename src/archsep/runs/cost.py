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
import math
import time
import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..config import RunConfig
from ..engine.evaluation import CHUNK, LOOKS
from ..engine.planning import group_key, model_stackable, plan_batches, step_flops
from . import timing
from .timing import (CACHE_NAME, TIMED_LENGTHS, StepCost, _extrapolate, _family, _read_cache, cache_file,  # noqa: F401
                     cost_key, estimated_flops, fingerprint, steady_step_times, step_cost, step_costs)

# one H100 running PyTorch eagerly: ~8 us of launch and dispatch per operator; small models are
# launch-bound. 1e14 FLOP/s sustained: well under the TF32/bf16 peak, as small matmuls get.
# Checked once against a GPU (2026-11-26, an H200, one process, fp32): qstr-fig3's RNN took 3.2,
# 3.5 and 4.1 ms a step at q = 2, 1, 5 (evaluations included), where this model says 2.5, 2.5
# and 3.0: about 1.3x low (fp32 runs no tensor-core FLOPs). Not recalibrated on one model.
GPU: dict[str, Any] = {"name": "one H100 (modelled)", "op_s": 8e-6, "flops": 1e14}


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
    return timing._TRAIN.get(cost_key(c)) or timing._STEPS.get(cost_key(c)) or step_cost(c)


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
    how = {k: timing._HOW.get(k, "timed") for k in costs}
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
            "busy_load": max((timing._BUSY[k] for k in costs if k in timing._BUSY and how[k] == "timed"), default=None),
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
             + (f"; {est['resumed']} go on from a checkpoint, counted from its step" if est.get("resumed") else "")
             + (f"; {est['same']} the store holds as the same run under another budget (stopped at its threshold "
                "within this one): copied, not trained" if est.get("same") else "")]
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
                     f"{timing.cores()} cores: the CPU times are upper bounds, and were not kept in the cache; "
                     "run --dry-run again on an idle machine for this machine's own)")
    return "\n".join(lines)
