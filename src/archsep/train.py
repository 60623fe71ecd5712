"""Online training of one run until its held-out metric first drops below the threshold.

Every step draws a fresh batch from the training stream; the held-out set is drawn once from
its own seed by the same `task.sample`, so it has the training distribution.
"""
from __future__ import annotations

import json
import math
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Callable, Literal

import torch

from .config import RunConfig, resolve_device
from .tasks.base import Batch, Task

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


@torch.no_grad()
def evaluate(model: torch.nn.Module, task: Task, data: Batch, chunk: int = 1000) -> float:
    """Held-out metric, averaged over examples (chunks keep memory flat)."""
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, len(data), chunk):
        part = Batch(data.x[i:i + chunk], data.y[i:i + chunk],
                     None if data.mask is None else data.mask[i:i + chunk])
        total += float(task.metric(model(part.x), part)) * len(part)
    model.train(was_training)
    return total / len(data)


def held_out_set(cfg: RunConfig, task: Task, device: torch.device | str = "cpu") -> Batch:
    """The held-out set: drawn once from the test seed by the same sampler as training, so it
    comes from the training distribution (the authors' code evaluated 1STR on simple-1STR data)."""
    return task.sample(cfg.train.eval_size, torch.Generator(device).manual_seed(cfg.derived_seed("test")))


def train_run(cfg: RunConfig, on_eval: Callable[[int, float], None] | None = None) -> RunResult:
    """Train one run; never raises for a failing run (status 'error' carries the message)."""
    t0 = time.perf_counter()
    tc = cfg.train
    base = dict(run_id=cfg.run_id, config=cfg.to_dict(), resolution=tc.resolution,
                eval_schedule={"every_steps": tc.eval_every, "batch_size": tc.batch_size,
                               "eval_size": tc.eval_size, "mode": tc.eval_mode,
                               "slack": tc.progressive_slack, "curve_every": tc.curve_every})
    try:
        return _train(cfg, base, t0, on_eval)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # a crashing run is recorded, the sweep goes on
        msg = f"{type(e).__name__}: {e}"
        return RunResult(**base, status="error", samples=None, final_metric=None, best_metric=None,
                         wall_s=time.perf_counter() - t0, error=msg + "\n" + traceback.format_exc(limit=3))


def _train(cfg: RunConfig, base: dict, t0: float, on_eval) -> RunResult:
    tc = cfg.train
    dev = resolve_device(tc.device)
    task = cfg.build_task()
    torch.manual_seed(cfg.derived_seed("init"))
    model = cfg.model_config().build(task.spec).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay)
    train_gen = torch.Generator(dev).manual_seed(cfg.derived_seed("train"))
    test = held_out_set(cfg, task, dev)

    curve: list[tuple[int, float]] = []
    train_curve: list[tuple[int, float]] = []
    window: list[torch.Tensor] = []
    status: str = "censored"
    hit: int | None = None
    limit = tc.diverge_factor * task.baseline
    max_steps = tc.budget // tc.batch_size
    for step in range(1, max_steps + 1):
        batch = task.sample(tc.batch_size, train_gen)
        pred = model(batch.x)
        loss = task.loss(pred, batch)
        window.append(task.metric(pred.detach(), batch) if task.kind == "classification" else loss.detach())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % tc.eval_every:
            continue
        samples = step * tc.batch_size
        progressive = float(torch.stack(window).mean())
        window.clear()
        train_curve.append((samples, progressive))
        if not math.isfinite(progressive) or progressive > limit:
            status = "diverged"
            break
        k = step // tc.eval_every
        due = (tc.eval_mode == "every" or progressive < tc.progressive_slack * tc.threshold
               or k % tc.curve_every == 0 or step + tc.eval_every > max_steps)
        if not due:
            continue
        err = evaluate(model, task, test)
        curve.append((samples, err))
        if on_eval:
            on_eval(samples, err)
        if not math.isfinite(err) or err > limit:
            status = "diverged"
            break
        if err < tc.threshold and hit is None:
            hit, status = samples, "ok"
            if tc.stop_at_threshold:
                break
    metrics = [m for _, m in curve if math.isfinite(m)]
    return RunResult(
        **base,
        status=status,  # type: ignore[arg-type]
        samples=hit if status == "ok" else (max_steps * tc.batch_size if status == "censored" else None),
        final_metric=curve[-1][1] if curve else None,
        best_metric=min(metrics) if metrics else None,
        curve=curve, train_curve=train_curve,
        wall_s=time.perf_counter() - t0,
        params=sum(p.numel() for p in model.parameters()),
        state_size=model.state_size(task.spec.seq_len),
    )


def group_key(cfg: RunConfig) -> str:
    """Runs with the same key differ only in their seed and can be trained as one batched
    computation by `train_many`."""
    d = cfg.canonical()
    d.pop("seed")
    d["task_params"] = {k: v for k, v in d["task_params"].items() if k != "seed"}
    return json.dumps(d, sort_keys=True)


def train_many(configs: list[RunConfig]) -> list[RunResult]:
    """Train several runs; returns their results in order. Runs that share a `group_key` may be
    stacked into one computation; each result is identical to what `train_run` gives alone."""
    return [train_run(c) for c in configs]
