"""Which runs train together, and in what order: runs that differ only in their seed or
learning rate share a `group_key` and train as one stacked computation where that pays (and
where their batches have one shape); batches are ordered by their cost in FLOPs."""
from __future__ import annotations

import json
from collections import OrderedDict
from typing import Sequence

import torch

from ..config import RunConfig

STACK_MAX_FLOPS = 5e8  # per model and step; above it a model is compute-bound and the fused kernels win

_FLOPS: dict[str, float] = {}  # by group_key: the planner, the worker and train_many all ask


def group_key(cfg: RunConfig) -> str:
    """Runs with the same key differ only in their seed or learning rate. A task whose batches
    vary in shape (variable training lengths) keeps the seed in the key: only runs that share
    a data stream (the learning rates of one seed) can be stacked."""
    d = cfg.canonical()
    if cfg.build_task().fixed_shapes:
        d.pop("seed")
    d["task_params"] = {k: v for k, v in d["task_params"].items() if k != "seed"}
    d["train"] = {k: v for k, v in d["train"].items() if k != "lr"}
    return json.dumps(d, sort_keys=True)


def step_flops(cfg: RunConfig) -> float:
    """FLOPs of one training step (forward and backward) of one model of this config."""
    key = group_key(cfg)
    if key not in _FLOPS:
        _FLOPS[key] = _count_step_flops(cfg)
    return _FLOPS[key]


def _count_step_flops(cfg: RunConfig) -> float:
    from torch.utils.flop_counter import FlopCounterMode

    task = cfg.build_task()
    model = cfg.model_config().build(task.spec)
    model.prune_to_readout()  # as the engine trains it
    batch = task.sample(cfg.train.batch_size, torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as fc:
        task.loss(model(batch.x), batch).backward()
    return float(fc.get_total_flops())


def worth_stacking(cfg: RunConfig) -> bool:
    """Stacking removes per-step overhead; a model whose step is large is compute-bound, and
    its library kernels (e.g. the fused GRU) beat the vmapped plain ops."""
    return step_flops(cfg) < STACK_MAX_FLOPS


def plan_batches(configs: Sequence[RunConfig], workers: int) -> list[list[RunConfig]]:
    """Group runs by `group_key` (one batched `train_many` call each). Groups of compute-bound
    models, which are not stacked anyway, become one batch per run; batches are ordered most
    expensive first (FLOPs per step x steps x runs), so the longest work starts first and the
    workers finish together; the largest groups are split while workers would sit idle."""
    groups: OrderedDict[str, list[RunConfig]] = OrderedDict()
    for c in configs:
        groups.setdefault(group_key(c), []).append(c)
    batches: list[list[RunConfig]] = []
    for g in groups.values():
        batches += [[c] for c in g] if step_flops(g[0]) >= STACK_MAX_FLOPS else [g]
    while len(batches) < workers:
        i = max(range(len(batches)), key=lambda j: len(batches[j]), default=None)
        if i is None or len(batches[i]) < 2:
            break
        b = batches.pop(i)
        half = (len(b) + 1) // 2
        batches[i:i] = [b[:half], b[half:]]
    return sorted(batches, key=lambda b: -batch_cost(b))


def batch_cost(batch: Sequence[RunConfig]) -> float:
    """Training FLOPs of a batch if every run used its whole budget."""
    return sum(step_flops(c) * (c.train.budget // c.train.batch_size) for c in batch)
