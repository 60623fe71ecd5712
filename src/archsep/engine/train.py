"""Online training of one run until its held-out metric first drops below the threshold.

Every step draws a fresh batch from the training stream; the held-out set (heldout.py) is drawn
once from its own seed by the same `task.sample`, so it has the training distribution.
"""
from __future__ import annotations

import json
import math
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Literal

import torch

from ..config import RunConfig, resolve_device
from .evaluation import held_out_set, screen
from .stack import Single, Stacked
from ..tasks.base import Batch, Task

Status = Literal["ok", "censored", "diverged", "error"]


@dataclass
class RunResult:
    """What one run produced. `samples` is the first evaluated sample count whose held-out
    metric was below the threshold (status 'ok'), or the budget (censored: a lower bound)."""

    run_id: str
    config: dict
    status: Status
    samples: int | None
    resolution: int  # samples between two scheduled evaluations
    final_metric: float | None
    best_metric: float | None
    curve: list[tuple[int, float]] = field(default_factory=list)  # (samples, held-out metric)
    train_curve: list[tuple[int, float]] = field(default_factory=list)  # (samples, progressive metric)
    eval_schedule: dict = field(default_factory=dict)
    wall_s: float = 0.0
    params: int = 0
    state_size: int | None = None
    error: str | None = None

    @property
    def censored(self) -> bool:
        return self.status == "censored"

    @property
    def diverged(self) -> bool:
        return self.status == "diverged"

    def to_dict(self) -> dict:
        return asdict(self)


def train_run(cfg: RunConfig) -> RunResult:
    """Train one run on its own (the plain path); a failing run is recorded, never raised."""
    return train_many([cfg], stack=False)[0]


def group_key(cfg: RunConfig) -> str:
    """Runs with the same key differ only in their seed and can be trained as one batched
    computation by `train_many`."""
    d = cfg.canonical()
    d.pop("seed")
    d["task_params"] = {k: v for k, v in d["task_params"].items() if k != "seed"}
    return json.dumps(d, sort_keys=True)


def train_many(configs: list[RunConfig], stack: bool = True) -> list[RunResult]:
    """Train several runs; results come back in order. With `stack`, runs that share a
    `group_key` are trained as one batched computation (see `stack.Stacked`); each run keeps its
    own seeds, data stream, held-out set, optimizer state and stopping point."""
    out: dict[int, RunResult] = {}
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(configs):
        groups.setdefault(group_key(c) if stack else str(i), []).append(i)
    for idx in groups.values():
        group = [configs[i] for i in idx]
        try:
            results = _train_group(group, stacked=len(group) > 1 and _worth_stacking(group[0]))
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:
            # a crash is one run's, not the group's: retry each alone, recording its own error
            results = [_train_alone(c) for c in group] if len(group) > 1 else [_error(group[0])]
        out.update(zip(idx, results))
    return [out[i] for i in range(len(configs))]


STACK_MAX_FLOPS = 5e8  # per model and step; above it a model is compute-bound and the fused kernels win


_FLOPS: dict[str, float] = {}  # by group_key: the planner, the worker and train_many all ask


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
    batch = task.sample(cfg.train.batch_size, torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as fc:
        task.loss(model(batch.x), batch).backward()
    return float(fc.get_total_flops())


def _worth_stacking(cfg: RunConfig) -> bool:
    """Stacking removes per-step overhead; a model whose step is large is compute-bound, and
    its library kernels (e.g. the fused GRU) beat the vmapped plain ops."""
    return step_flops(cfg) < STACK_MAX_FLOPS


def _train_alone(cfg: RunConfig) -> RunResult:
    try:
        return _train_group([cfg], stacked=False)[0]
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception:
        return _error(cfg)


def _base(cfg: RunConfig) -> dict:
    tc = cfg.train
    return dict(run_id=cfg.run_id, config=cfg.to_dict(), resolution=tc.resolution,
                eval_schedule={"every_steps": tc.eval_every, "batch_size": tc.batch_size,
                               "eval_size": tc.eval_size, "mode": tc.eval_mode,
                               "z": tc.progressive_z, "screen_z": tc.screen_z,
                               "curve_every": tc.curve_every})


def _error(cfg: RunConfig) -> RunResult:
    exc = traceback.format_exc(limit=4)
    last = exc.strip().splitlines()[-1]
    return RunResult(**_base(cfg), status="error", samples=None, final_metric=None, best_metric=None,
                     error=last + "\n" + exc)


@dataclass
class _Track:
    """One run's bookkeeping inside a (possibly stacked) training loop."""

    cfg: RunConfig
    task: Task
    test: Batch
    gen: torch.Generator
    params: int
    state_size: int | None
    t0: float
    window: list = field(default_factory=list)
    curve: list = field(default_factory=list)
    train_curve: list = field(default_factory=list)
    status: str = "censored"
    test_se: float = math.inf  # standard error of the held-out mean, known after the first evaluation
    hit: int | None = None
    done: bool = False
    t_end: float | None = None  # when the run left the stack (stacked runs share the compute)
    ref: torch.Tensor | None = None  # block metrics of the last full held-out evaluation
    full_evals: int = 0
    screened_out: int = 0

    def result(self, max_steps: int) -> RunResult:
        tc = self.cfg.train
        metrics = [m for _, m in self.curve if math.isfinite(m)]
        censored_at = max_steps * tc.batch_size
        base = _base(self.cfg)
        base["eval_schedule"].update(full_evals=self.full_evals, screened_out=self.screened_out)
        return RunResult(
            **base, status=self.status,  # type: ignore[arg-type]
            samples=self.hit if self.status == "ok" else (censored_at if self.status == "censored" else None),
            final_metric=self.curve[-1][1] if self.curve else None,
            best_metric=min(metrics) if metrics else None,
            curve=self.curve, train_curve=self.train_curve,
            wall_s=(self.t_end or time.perf_counter()) - self.t0,
            params=self.params, state_size=self.state_size)


def _train_group(cfgs: list[RunConfig], stacked: bool) -> list[RunResult]:
    t0 = time.perf_counter()
    tc = cfgs[0].train
    dev = resolve_device(tc.device)
    tracks, models = [], []
    for c in cfgs:
        task = c.build_task()
        torch.manual_seed(c.derived_seed("init"))
        model = c.model_config().build(task.spec).to(dev)
        models.append(model)
        tracks.append(_Track(c, task, held_out_set(c, task, dev),
                             torch.Generator(dev).manual_seed(c.derived_seed("train")),
                             model.n_params(), model.state_size(task.spec.seq_len), t0))
    stack = Stacked(models, tc.lr, tc.weight_decay) if stacked else Single(models[0], tc.lr, tc.weight_decay)
    stack.train(True)
    limit = tc.diverge_factor * tracks[0].task.baseline
    max_steps = tc.budget // tc.batch_size
    active = list(tracks)
    for step in range(1, max_steps + 1):
        batches = [tr.task.sample(tc.batch_size, tr.gen) for tr in active]
        preds = stack.forward([b.x for b in batches])
        losses = [tr.task.loss(p, b) for tr, p, b in zip(active, preds, batches)]
        for tr, p, b, loss in zip(active, preds, batches, losses):
            # progressive validation: the loss on a fresh batch before its update
            tr.window.append(tr.task.metric(p.detach(), b) if tr.task.kind == "classification" else loss.detach())
        stack.opt.zero_grad(set_to_none=True)
        torch.stack(losses).sum().backward()
        stack.opt.step()
        if step % tc.eval_every:
            continue
        samples = step * tc.batch_size
        last = step + tc.eval_every > max_steps
        stack.train(False)
        for k, tr in enumerate(active):
            window = torch.stack(tr.window).double()
            progressive = float(window.mean())
            window_se = float(window.std() / math.sqrt(len(window))) if len(window) > 1 else math.inf
            # recent drop per window, from the trend over the last few windows (one difference is noise)
            back = tr.train_curve[-4:]
            drop = max(0.0, (back[0][1] - progressive) / len(back)) if back else 0.0
            tr.window.clear()
            tr.train_curve.append((samples, progressive))
            if not math.isfinite(progressive) or progressive > limit:
                tr.status, tr.done = "diverged", True
                continue
            # the window mean lags the current risk by about its latest drop, and both it and the
            # held-out mean are noisy: evaluate once the threshold is within that reach
            se = math.sqrt(window_se**2 + (tr.test_se if math.isfinite(tr.test_se) else window_se) ** 2)
            near = progressive - drop - tc.progressive_z * se < tc.threshold
            full = tc.eval_mode == "every" or (step // tc.eval_every) % tc.curve_every == 0 or last
            if not (full or near):
                continue
            full = full or tr.ref is None  # the first evaluation near the threshold is the screening reference
            model = lambda x, k=k: stack.call(k, x)  # noqa: E731
            ev = screen(model, tr.task, tr.test, tr.ref, tc.threshold, math.inf if full else tc.screen_z)
            if ev.stopped:  # confidently above the threshold: not a curve point
                tr.screened_out += 1
                continue
            tr.full_evals += 1
            err, tr.test_se, tr.ref = ev.mean, ev.se, ev.blocks
            tr.curve.append((samples, err))
            if not math.isfinite(err) or err > limit:
                tr.status, tr.done = "diverged", True
            elif err < tc.threshold and tr.hit is None:
                tr.hit, tr.status = samples, "ok"
                tr.done = tc.stop_at_threshold
        stack.train(True)
        if any(tr.done for tr in active):
            for tr in active:
                if tr.done:
                    tr.t_end = time.perf_counter()
            keep = [k for k, tr in enumerate(active) if not tr.done]
            if not keep:
                break
            stack.keep(keep)
            active = [active[k] for k in keep]
    return [tr.result(max_steps) for tr in tracks]
