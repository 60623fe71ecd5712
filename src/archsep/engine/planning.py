"""Which runs train together, and in what order: runs that differ only in their seed or
learning rate share a `group_key` and train as one stacked computation where that pays (and
where their batches have one shape); batches are ordered by their cost in FLOPs."""
from __future__ import annotations

import json
import math
import os
from collections import OrderedDict
from typing import Callable, Collection, Sequence

import torch

from ..config import RunConfig
from ..models.attention import use_attention
from ..models.mamba import use_scan

STACK_MAX_FLOPS = 5e7  # per model and step, on a CPU: measured neutral below, slower above (benchmarks/lr_grid.py)
STACK_MAX_RUNS = 16  # runs per stack: bounds its memory

_FLOPS: dict[str, float] = {}  # by group_key: the planner, the worker and train_many all ask
_OPS: dict[str, int] = {}  # by group_key: operators dispatched by that step, counted in the same pass
_STACKABLE: dict[str, bool] = {}


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


def race_key(cfg: RunConfig) -> str:
    """Runs with the same key differ only in their learning rate: with successive halving
    (`TrainConfig.halving_lrs`) they are one race and must train side by side."""
    d = cfg.canonical()
    d["train"] = {k: v for k, v in d["train"].items() if k != "lr"}
    return json.dumps(d, sort_keys=True)


def races(configs: Sequence[RunConfig]) -> list[list[int]]:
    """Indices of `configs` grouped into races (successive halving) in first-seen order; a run
    without halving is a race of its own."""
    out: OrderedDict[str, list[int]] = OrderedDict()
    for i, c in enumerate(configs):
        out.setdefault(race_key(c) if c.train.halving_lrs else f"#{i}", []).append(i)
    return list(out.values())


def step_flops(cfg: RunConfig) -> float:
    """FLOPs of one training step (forward and backward) of one model of this config."""
    key = group_key(cfg)
    if key not in _FLOPS:
        _FLOPS[key], _OPS[key] = _count_step(cfg)
    return _FLOPS[key]


def longest_step_flops(cfg: RunConfig) -> float:
    """FLOPs of one training step on a batch of the task's longest sequences (`sample_test`):
    `step_flops` for a task of fixed shapes; what a cost estimate compares across lengths."""
    if cfg.build_task().fixed_shapes:
        return step_flops(cfg)
    key = "longest:" + group_key(cfg)
    if key not in _FLOPS:
        _FLOPS[key], _OPS[key] = _count_step(cfg, longest=True)
    return _FLOPS[key]


def record_count(cfg: RunConfig, flops: float, ops: int, longest: bool = False) -> None:
    """A step's FLOPs and operators counted elsewhere (a timing process), as `step_flops` (or
    `longest_step_flops`) counts them."""
    key = ("longest:" if longest and not cfg.build_task().fixed_shapes else "") + group_key(cfg)
    _FLOPS[key], _OPS[key] = flops, ops


def step_ops(cfg: RunConfig, longest: bool = False) -> int:
    """Operators one training step dispatches (what a GPU pays a launch for), counted in the
    pass that counts `step_flops` (so with the attention written out: a few more than fused)."""
    if longest and not cfg.build_task().fixed_shapes:
        longest_step_flops(cfg)
        return _OPS["longest:" + group_key(cfg)]
    step_flops(cfg)
    return _OPS[group_key(cfg)]


class _CountOps(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.n += 1
        return func(*args, **(kwargs or {}))


def _count_step(cfg: RunConfig, longest: bool = False) -> tuple[float, int]:
    from torch.utils.flop_counter import FlopCounterMode

    task = cfg.build_task()
    model = cfg.model_config().build(task.spec)
    model.prune_to_readout()  # as the engine trains it
    # count the attention written out: the same arithmetic as the fused kernel, for which torch's
    # counter has no formula on a CPU (it would count nothing, and plans would change with it)
    use_attention(model, "explicit")
    # and the selective scan as the chunked PyTorch form: the compiled one (models/kernels/native.py) is
    # invisible to the counter, and a plan must not depend on whether it compiled here
    use_scan(model, "chunked")
    batch = (task.sample_test if longest else task.sample)(cfg.train.batch_size, torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as fc, _CountOps() as ops:
        task.loss(model(batch.x), batch).backward()
    return float(fc.get_total_flops()), ops.n


def model_stackable(cfg: RunConfig) -> bool:
    """Whether the engine ever stacks this config's model (`SeqModel.stackable`: a property of
    the built model, not of its config), asked once per model."""
    key = json.dumps([cfg.arch, cfg.model_params], sort_keys=True, default=str)  # a property of the model alone
    if key not in _STACKABLE:
        with torch.device("meta"):
            _STACKABLE[key] = bool(getattr(cfg.model_config().build(cfg.build_task().spec), "stackable", True))
    return _STACKABLE[key]


def worth_stacking(cfg: RunConfig, flops: Callable[[RunConfig], float] = step_flops) -> bool:
    """Stacking removes per-step overhead: it pays for models whose step is small (on a CPU;
    on a GPU, whose cores small models leave idle, for every stackable model), and never for
    models whose fused library kernels vmap would replace by a loop (`SeqModel.stackable`)."""
    from ..config import resolve_device

    if not model_stackable(cfg):
        return False
    return resolve_device(cfg.train.device).type == "cuda" or flops(cfg) < STACK_MAX_FLOPS


def plan_batches(configs: Sequence[RunConfig], workers: int = 1,
                 flops: Callable[[RunConfig], float] = step_flops,
                 seconds: Callable[[RunConfig], float] | None = None,
                 resumed: Collection[str] = frozenset()) -> list[list[RunConfig]]:
    """Group runs by `group_key` (one batched `train_many` call each), at most STACK_MAX_RUNS
    per batch in the order given. Groups of compute-bound models, which are not stacked anyway,
    become one batch per run. The batches depend on the configs alone, never on `workers` or
    the executor: a stacked computation's rounding depends on its partners, and a run's stored
    numbers must not. They are ordered most expensive first (FLOPs per step x steps x runs), so
    the longest work starts first and the workers finish together. `flops` is the counted
    FLOPs of a step; a dry run passes its estimate (engine/cost.py), runs never do. `seconds`,
    where given, is a run's modelled time (its budget's, from measured step times): batches are
    then ordered by it instead, so a recurrence that is cheap in FLOPs but slow on the clock
    starts early rather than leaving a tail; it orders batches, never forms them. The runs
    of a successive-halving race (`races`) always share a batch: they train side by side.
    Batches whose first run is in `resumed` (run ids that go on from a checkpoint of theirs)
    come before all others, each part in that order: a rerun finishes what it began before it
    starts anything new (a checkpoint stays on its machine; only finished runs travel)."""
    groups: OrderedDict[str, list[RunConfig]] = OrderedDict()
    for c in configs:
        groups.setdefault(group_key(c), []).append(c)
    batches: list[list[RunConfig]] = []
    for g in groups.values():
        whole = [[g[i] for i in r] for r in races(g)]  # a halving race is never split
        if not worth_stacking(g[0], flops):
            batches += whole
            continue
        batch: list[RunConfig] = []
        for r in whole:
            if batch and len(batch) + len(r) > STACK_MAX_RUNS:
                batches.append(batch)
                batch = []
            batch += r
        batches.append(batch)
    cost = (lambda b: sum(seconds(c) for c in b)) if seconds is not None else (lambda b: batch_cost(b, flops))
    return sorted(batches, key=lambda b: (b[0].run_id not in resumed, -cost(b)))


def batch_cost(batch: Sequence[RunConfig], flops: Callable[[RunConfig], float] = step_flops) -> float:
    """Training FLOPs of a batch if every run used its whole budget."""
    return sum(flops(c) * (c.train.budget // c.train.batch_size) for c in batch)


# --- memory: refuse a run that cannot fit before allocating anything -----------------------
_MEMORY: dict[str, tuple[float, dict[str, float]]] = {}
MEMORY_PROBE_LENGTH = 128  # longer sequences: the step's memory is extrapolated from this length


def estimate_memory(cfg: RunConfig) -> tuple[float, dict[str, float]]:
    """Bytes one run needs, roughly: parameters with their gradients and AdamW state, the
    activations of one training step, and its data sets. The model is built and run on the
    meta device (no memory), recording the size of every tensor the step makes."""
    key = group_key(cfg) + f"|{cfg.train.eval_size}|{cfg.train.test_size}|{cfg.train.train_set_size}"
    if key in _MEMORY:
        return _MEMORY[key]
    from torch.utils._python_dispatch import TorchDispatchMode

    class Sizes(TorchDispatchMode):
        total = 0.0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else (out,):
                if isinstance(t, torch.Tensor):
                    Sizes.total += float(t.numel()) * t.element_size()
            return out

    spec = cfg.build_task().spec
    B, L = cfg.train.batch_size, spec.seq_len
    per_example = L * (8 if spec.input == "tokens" else 4 * spec.input_dim) + L * 8
    data = per_example * (cfg.train.eval_size + cfg.train.test_size + cfg.train.train_set_size + B)

    def step_bytes(model: torch.nn.Module, length: int) -> float:
        Sizes.total = 0.0
        with torch.device("meta"):
            x = torch.zeros((B, length), dtype=torch.long) if spec.input == "tokens" else \
                torch.zeros((B, length, spec.input_dim))
        with Sizes(), torch.no_grad():
            model(x)
        return 2 * Sizes.total  # what the forward pass keeps for backward, and backward's own as much again

    try:
        with torch.device("meta"):
            model = cfg.model_config().build(spec)
        model.prune_to_readout()
        # the attention written out, (B, H, L, L) scores and all: on the meta device no fused
        # kernel runs, and this bounds what the fused one keeps from above
        use_attention(model, "explicit")
        params = float(sum(p.numel() for p in model.parameters())) * 4 * 4  # value, gradient, two AdamW moments
        if L <= MEMORY_PROBE_LENGTH:
            act = step_bytes(model, L)
        else:  # recurrent models step through the length in Python: probe two lengths, extrapolate
            a, b = step_bytes(model, MEMORY_PROBE_LENGTH // 2), step_bytes(model, MEMORY_PROBE_LENGTH)
            act = b * (L / MEMORY_PROBE_LENGTH) ** max(1.0, math.log2(max(b, 1.0) / max(a, 1.0)))
        parts = {"parameters and optimizer state": params, "activations": act, "data": float(data)}
    except (RuntimeError, ValueError, OverflowError, NotImplementedError) as e:
        if "overflow" not in str(e).lower() and not isinstance(e, OverflowError):
            return 0.0, {}  # a model that cannot be built on the meta device: no estimate
        parts = {"parameters and optimizer state": math.inf, "activations": math.inf, "data": float(data)}
    _MEMORY[key] = (sum(parts.values()), parts)
    return _MEMORY[key]


def available_memory(device: torch.device) -> float:
    if device.type == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


_FIELDS = {"parameters and optimizer state": "model_params (and the task's input width)",
           "activations": "train.batch_size or task_params.N", "data": "train.eval_size / test_size / train_set_size"}


def check_memory(cfg: RunConfig) -> None:
    """Refuse a run whose estimated memory exceeds what the machine has, naming what drives it."""
    from ..config import resolve_device
    from ..errors import ArchsepError

    need, parts = estimate_memory(cfg)
    have = available_memory(resolve_device(cfg.train.device))
    if need > have:
        big = max(parts, key=lambda k: parts[k])
        gb = lambda b: "an astronomical amount" if not math.isfinite(b) else f"{b / 2**30:,.1f} GB"  # noqa: E731
        raise ArchsepError(f"{_FIELDS[big]}: run '{cfg.label or cfg.arch}' ({cfg.task} "
                           f"{json.dumps(cfg.task_params, sort_keys=True)}) needs about {gb(need)} "
                           f"({big}: {gb(parts[big])}), more than the {gb(have)} this machine has free")
