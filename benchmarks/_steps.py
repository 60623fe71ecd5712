"""Side-by-side step timing shared by the benchmarks: variants alternate step by step on the
same batches, so a shared machine's load falls on each alike."""
from __future__ import annotations

import copy
import time
from typing import Callable

import torch

from archsep.engine.stack import make_optimizer

# what a step is timed with: wall time (an idle machine's), or `time.thread_time` (the CPU time of
# the one thread torch computes in, set by a benchmark's `--clock thread`): on a machine whose
# cores other work keeps busy, wall time counts the waits for a core; thread time does not (the
# caches and memory that work shares still slow a step)
clock: Callable[[], float] = time.perf_counter


def alternate_steps(models: dict, task, batches: list, warmup: int) -> dict[str, list[float]]:
    """Seconds per training step (zero_grad, forward, loss, backward, AdamW step) of each model
    on every batch after the first `warmup`, the models taking turns on each batch."""
    opts = {k: make_optimizer(list(m.parameters()), 1e-3, 0.0) for k, m in models.items()}
    times: dict[str, list[float]] = {k: [] for k in models}
    for i, b in enumerate(batches):
        for k, m in models.items():
            t = clock()
            opts[k].zero_grad(set_to_none=True)
            task.loss(m(b.x), b).backward()
            opts[k].step()
            if i >= warmup:
                times[k].append(clock() - t)
    return times


def time_variants(cfg, forms: dict[str, Callable | None], steps: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per training step of `cfg`'s model as the engine trains it (readout pruned) in
    each of `forms` ({name: switch(copy) -> an older form of the same weights, or None for the
    model as built}), alternating on the same batches drawn from the task's training
    distribution: {name: the timed steps after `warmup`}."""
    task = cfg.build_task()
    torch.manual_seed(0)
    built = cfg.model_config().build(task.spec)
    built.prune_to_readout()
    models = {k: built if f is None else f(copy.deepcopy(built)) for k, f in forms.items()}
    g = torch.Generator().manual_seed(0)
    batches = [task.sample(cfg.train.batch_size, g) for _ in range(warmup + steps)]
    return alternate_steps(models, task, batches, warmup)


def time_before_after(cfg, before: Callable, steps: int, warmup: int) -> tuple[list[float], list[float]]:
    """Seconds per training step of `cfg`'s model as the engine trains it (readout pruned) and of
    `before(copy)`, an older form of the same weights, alternating on the same batches drawn from
    the task's training distribution: (before, after), the timed steps after `warmup`."""
    t = time_variants(cfg, {"before": before, "after": None}, steps, warmup)
    return t["before"], t["after"]


def add_timing_args(ap, steps: int = 8, warmup: int = 2) -> None:
    """--steps, --warmup and --clock, as the side-by-side benchmarks take them."""
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--warmup", type=int, default=warmup)
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="wall time (an idle machine) or the thread's CPU time (a busy one)")


def start_timing(a) -> None:
    """One torch thread, and the clock `a.clock` names (`add_timing_args`)."""
    global clock
    if a.clock == "thread":
        clock = time.thread_time
    torch.set_num_threads(1)
