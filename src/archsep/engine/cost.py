"""What a set of runs will cost, before any of it runs (`archsep reproduce P --dry-run`).

Per run: training steps x the time of one step, plus the held-out evaluations. The time of a
step on this machine is measured, not guessed: a few real steps of each distinct model (one
thread, as a worker trains) and a forward pass over one evaluation chunk. A GPU's time is
modelled, not measured: every operator costs a launch, and the FLOPs run at a sustained rate
(`GPU`). Runs stop early when they reach their threshold; the estimate assumes they do not (an
upper bound), and uses what the store already holds where a run has finished.
"""
from __future__ import annotations

import heapq
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from ..config import RunConfig
from .evaluation import CHUNK, LOOKS
from .planning import group_key, plan_batches, step_flops

# one H100 running PyTorch eagerly: ~8 us of launch and dispatch per operator; small models are
# launch-bound. 1e14 FLOP/s sustained: well under the TF32/bf16 peak, as small matmuls get.
GPU: dict[str, Any] = {"name": "one H100 (modelled)", "op_s": 8e-6, "flops": 1e14}
TIMED_STEPS = 8


@dataclass
class StepCost:
    cpu_s: float  # one training step on one CPU thread
    eval_s: float  # one forward pass over CHUNK held-out examples
    flops: float  # one training step
    ops: int  # operators launched by one training step


_STEPS: dict[str, StepCost] = {}


class _CountOps(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def step_cost(cfg: RunConfig) -> StepCost:
    """Measure one training step and one evaluation chunk of this config's model."""
    key = group_key(cfg)
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
        def step() -> None:  # a fresh batch each: tasks trained on variable lengths vary in cost
            batch = task.sample(cfg.train.batch_size, gen)
            opt.zero_grad(set_to_none=True)
            task.loss(model(batch.x), batch).backward()
            opt.step()

        step()  # warm-up: allocations, lazy init
        counter = _CountOps()
        with counter:
            step()
        times = []
        for _ in range(TIMED_STEPS):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
            if sum(times) > 3.0:  # a slow model: a few seconds of it say enough
                break
        held = task.sample_test(CHUNK, gen)
        with torch.no_grad():
            model.eval()
            model(held.x)
            t0 = time.perf_counter()
            model(held.x)
            eval_s = time.perf_counter() - t0
    finally:
        torch.set_num_threads(threads)
        torch.set_flush_denormal(False)
    _STEPS[key] = StepCost(sum(times) / len(times), eval_s, step_flops(cfg), counter.n)
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


def run_seconds(cfg: RunConfig, steps: int) -> tuple[float, float]:
    """(CPU seconds on one thread, modelled GPU seconds) of one run of `steps` steps."""
    sc = step_cost(cfg)
    _, examples = evaluations(cfg, steps)
    cpu = steps * sc.cpu_s + examples / CHUNK * sc.eval_s
    # evaluation on a GPU: forward only (~1/3 of a step's FLOPs and operators), CHUNK at a time
    eval_gpu = examples / CHUNK * (sc.ops / 3 * GPU["op_s"]
                                   + sc.flops / 3 * CHUNK / cfg.train.batch_size / GPU["flops"])
    gpu = steps * (sc.ops * GPU["op_s"] + sc.flops / GPU["flops"]) + eval_gpu
    return cpu, gpu


def estimate(configs: Sequence[RunConfig], workers: int = 1, finished: set[str] | None = None) -> dict:
    """Costs per architecture label and in all: every run to its budget, except runs already
    finished (`finished`: their run ids), which cost nothing more. The wall time on
    this machine schedules the batches longest first over `workers` single-thread workers."""
    finished = finished or set()
    by_label: dict[str, ArchCost] = {}
    run_s: dict[str, tuple[float, float]] = {}
    t0 = time.perf_counter()
    for c in configs:
        label = c.arm
        name = c.model_config().short_name()
        a = by_label.setdefault(label, ArchCost(label, name))
        if name not in a.model.split(" .. "):  # one label over several sizes, e.g. heads = q
            a.model = f"{a.model.split(' .. ')[0]} .. {name}"
        steps = c.train.budget // c.train.batch_size
        a.runs += 1
        if c.run_id in finished:
            continue
        cpu, gpu = run_seconds(c, steps)
        run_s[c.run_id] = (cpu, gpu)
        a.steps += steps
        a.train_flops += steps * step_flops(c)
        a.cpu_s += cpu
        a.gpu_s += gpu
        a.step_flops.append(step_flops(c))
    measure_s = time.perf_counter() - t0
    todo = [c for c in configs if c.run_id not in finished]
    batches = plan_batches(todo) if todo else []
    loads = [0.0] * max(1, workers)
    heapq.heapify(loads)
    for b in batches:  # in the planner's order, each to the first free worker
        heapq.heappush(loads, heapq.heappop(loads) + sum(run_s[c.run_id][0] for c in b))
    gpu_batches = defaultdict(list)  # on a GPU every stackable group trains as one stack
    for c in todo:
        gpu_batches[group_key(c)].append(c)
    gpu_wall = 0.0
    for g in gpu_batches.values():
        sc = step_cost(g[0])
        per_run = [run_s[c.run_id][1] for c in g]
        launch_share = (len(g) - 1) * (g[0].train.budget // g[0].train.batch_size) * sc.ops * GPU["op_s"]
        stackable = getattr(g[0].model_config(), "stackable", True)
        gpu_wall += sum(per_run) - (launch_share if stackable else 0.0)
    return {"archs": list(by_label.values()), "runs": len(configs), "to_run": len(todo), "batches": len(batches),
            "cpu_core_s": sum(a.cpu_s for a in by_label.values()), "cpu_wall_s": max(loads) if batches else 0.0,
            "workers": max(1, workers), "gpu_s": max(gpu_wall, 0.0), "measure_s": measure_s,
            "train_flops": sum(a.train_flops for a in by_label.values()), "gpu": GPU["name"]}


def hms(s: float) -> str:
    if not math.isfinite(s):
        return "?"
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min" if s < 5400 else f"{s / 3600:.1f} h"


def report(name: str, est: dict) -> str:
    lines = [f"{name}: {est['runs']} runs, {est['to_run']} to run in {est['batches']} batches; every run "
             f"to its budget (runs that reach their threshold stop sooner)"]
    w = max([4] + [len(a.label) for a in est["archs"]]) + 2
    m = max([5] + [len(a.model) for a in est["archs"]]) + 2
    lines.append(f"  {'arch':<{w}}{'model':<{m}}{'runs':>5}{'GFLOP/step':>16}{'train TFLOP':>13}"
                 f"{'CPU core-time':>15}{'GPU time':>10}")
    for a in est["archs"]:
        gf = f"{min(a.step_flops) / 1e9:.3g}-{max(a.step_flops) / 1e9:.3g}" if a.step_flops else "-"
        lines.append(f"  {a.label:<{w}}{a.model:<{m}}{a.runs:>5}{gf:>16}{a.train_flops / 1e12:>13.1f}"
                     f"{hms(a.cpu_s):>15}{hms(a.gpu_s):>10}")
    lines.append(f"  total: {est['train_flops'] / 1e15:.3g} PFLOP of training; on this machine about "
                 f"{hms(est['cpu_wall_s'])} with {est['workers']} worker(s) ({hms(est['cpu_core_s'])} of one core); "
                 f"on {est['gpu']} about {hms(est['gpu_s'])}")
    lines.append(f"  (steps timed on this machine, one thread each, in {est['measure_s']:.0f} s; a GPU's time is "
                 "a model: operators x launch cost + FLOPs at a sustained rate)")
    return "\n".join(lines)
