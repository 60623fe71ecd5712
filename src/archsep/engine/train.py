"""The one training loop: every run of every experiment trains here.

A run draws a fresh batch every step (or replays a fixed training set in epochs), and at each
scheduled point evaluates its held-out set, drawn once from its own seed by the same
`task.sample_test` (the training distribution, or length N for tasks trained on variable
lengths). It stops at the first held-out point below its threshold, or at its budget
(censored). Optionally it keeps its best checkpoint and tests it on a set of its own.

Runs that differ only in their seed or learning rate train as one stacked computation
(`stack.Stacked`); each keeps its own seeds, data, held-out set, optimizer state and stop.

With `eval_lengths` (length generalisation), the same checkpoint is also evaluated at each
listed length on a set drawn at exactly that length (`evaluation.length_set`), recorded in
`extra["by_length"]`; before training, the model reads one example of each length, so a model
that cannot fails at once, not after its training.

Two optional stops before the budget, both recorded in the result's `extra["stopped"]` and
both censoring the run where it stopped: a plateau (`patience` full evaluations without a new
best), and successive halving across a learning-rate grid (`halving_lrs`): the grid's runs
train side by side (stacked, or `stack.Lockstep`) and at each rung the worse half stops.
"""
from __future__ import annotations

import contextlib

import math
import time
import traceback
from dataclasses import dataclass, field

import torch

from ..config import EXTRA_TEST_ROLE, LENGTH_ROLE, RunConfig, resolve_device
from ..errors import ArchsepError
from ..results import RunResult
from ..tasks.base import Batch, Task
from ..plugins import code_of
from . import checkpoint
from .checkpoint import Checkpoints
from .evaluation import (HeldOutLooks, Point, block_metrics, evaluate, held_out_set, length_chunk, length_set,
                         test_set)
from .planning import group_key, races, worth_stacking
from .stack import Lockstep, Single, Stacked


def train_run(cfg: RunConfig, checkpoints: Checkpoints | None = None) -> RunResult:
    """Train one run on its own (the plain path); a failing run is recorded, never raised."""
    return train_many([cfg], stack=False, checkpoints=checkpoints)[0]


def train_many(configs: list[RunConfig], stack: bool = True, checkpoints: Checkpoints | None = None) -> list[RunResult]:
    """Train several runs; results come back in order. With `stack`, runs that share a
    `group_key` are trained as one batched computation. With `checkpoints`, each group of runs
    trained together saves its state there as it trains and goes on from a state it saved
    (`engine.checkpoint`)."""
    out: dict[int, RunResult] = {}
    groups: dict[str, list[int]] = {}
    stack = stack and not (checkpoints is not None and checkpoints.ends)  # an end is one run's state
    for i, c in enumerate(configs):
        groups.setdefault(group_key(c) if stack else str(i), []).append(i)
    for idx in groups.values():
        group = [configs[i] for i in idx]
        if len(group) == 1 or not worth_stacking(group[0]):
            for race in races(group):  # halving races side by side, every other run alone
                rs = [group[i] for i in race]
                out.update(zip([idx[i] for i in race],
                               [_train_alone(rs[0], checkpoints)] if len(rs) == 1 else _train_side(rs, checkpoints)))
            continue
        try:
            results = _train_group(group, stacked=True, checkpoints=checkpoints)
        except (KeyboardInterrupt, SystemExit):
            raise
        except Exception:
            # a crash is one run's, not the group's: retry each alone, recording its own error
            results = [_train_alone(c, checkpoints) for c in group]
        out.update(zip(idx, results))
    return [out[i] for i in range(len(configs))]


def _train_side(cfgs: list[RunConfig], checkpoints: Checkpoints | None = None) -> list[RunResult]:
    try:
        return _train_group(cfgs, stacked=False, checkpoints=checkpoints)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception:
        return [_train_alone(c, checkpoints) for c in cfgs]


def _train_alone(cfg: RunConfig, checkpoints: Checkpoints | None = None) -> RunResult:
    try:
        return _train_group([cfg], stacked=False, checkpoints=checkpoints)[0]
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception:
        return _error(cfg)


def _base(cfg: RunConfig) -> dict:
    tc = cfg.train
    return dict(run_id=cfg.run_id, config=cfg.to_dict(), resolution=tc.resolution,
                eval_schedule={"every_steps": tc.eval_every, "batch_size": tc.batch_size,
                               "eval_size": tc.eval_size, "mode": tc.eval_mode,
                               "z": tc.progressive_z, "band": tc.progressive_band, "screen_z": tc.screen_z,
                               "curve_every": tc.curve_every,
                               **({"early_steps": list(tc.early_steps())} if tc.eval_early else {})})


def _error(cfg: RunConfig) -> RunResult:
    exc = traceback.format_exc(limit=4)
    last = exc.strip().splitlines()[-1]
    return RunResult(**_base(cfg), status="error", samples=None, final_metric=None, best_metric=None,
                     error=last + "\n" + exc)


class Stream:
    """A run's training data: fresh batches from its own generator, or (train_set_size > 0) a
    fixed set drawn once from it and replayed in reshuffled epochs. With a length curriculum
    (`train.curriculum`) the first stages' batches come from the task at their lengths, from the
    same generator; then the task's own."""

    def __init__(self, cfg: RunConfig, task: Task, device: torch.device):
        self.task, self.bs = task, cfg.train.batch_size
        self.gen = torch.Generator(device).manual_seed(cfg.derived_seed("train"))
        n = cfg.train.train_set_size
        self.pool = task.sample(n, self.gen) if n else None
        self.order, self.pos = torch.empty(0, dtype=torch.long), 0
        self.stages = cfg.curriculum_tasks(task) if cfg.train.curriculum else []  # [(last step, task)]
        self.step = 0

    def next(self) -> Batch:
        self.step += 1
        while self.stages and self.step > self.stages[0][0]:
            self.stages.pop(0)
        if self.stages:
            return self.stages[0][1].sample(self.bs, self.gen)
        if self.pool is None:
            return self.task.sample(self.bs, self.gen)
        if self.pos + self.bs > len(self.order):  # a new epoch
            self.order, self.pos = torch.randperm(len(self.pool), generator=self.gen, device=self.gen.device), 0
        idx = self.order[self.pos:self.pos + self.bs]
        self.pos += self.bs
        p = self.pool
        return Batch(p.x[idx], p.y[idx], None if p.mask is None else p.mask[idx],
                     None if p.tuples is None else p.tuples[idx])


@dataclass
class _Track:
    """One run's bookkeeping inside a (possibly stacked) training loop."""

    cfg: RunConfig
    task: Task
    held_out: Batch
    data: Stream
    params: int
    state_size: int | None
    t0: float
    window: list = field(default_factory=list)  # pre-update metrics since the last scheduled point
    curve: list = field(default_factory=list)
    train_curve: list = field(default_factory=list)
    probes: list = field(default_factory=list)
    status: str = "censored"
    hit: int | None = None
    best: tuple[float, int] | None = None  # (metric, samples) of the best full evaluation
    best_state: dict | None = None
    test_metric: float | None = None
    extra_tests: dict = field(default_factory=dict)  # name -> metric on the task's extra test sets
    by_length: dict = field(default_factory=dict)  # str(n) -> metric at length n (train.eval_lengths)
    done: bool = False
    t_end: float | None = None  # when the run left the stack (stacked runs share the compute)
    looks: HeldOutLooks = field(default_factory=HeldOutLooks)
    since_best: int = 0  # full evaluations since the best one (patience)
    stopped: dict | None = None  # {"why": "plateau" | "halved", "step": ...}: stopped before its budget
    race: int = 1  # runs in its successive-halving race in this loop
    resumed_at: list = field(default_factory=list)  # steps it went on from a checkpoint

    def window_stats(self, samples: int) -> tuple[float, float, float]:
        """Mean and standard error of the window, and its recent drop per window (from the trend
        over the last few windows: one difference is noise); the window moves to the curve."""
        window = torch.stack(self.window).double()
        progressive = float(window.mean())
        se = float(window.std() / math.sqrt(len(window))) if len(window) > 1 else math.inf
        back = self.train_curve[-4:]
        drop = max(0.0, (back[0][1] - progressive) / len(back)) if back else 0.0
        self.window.clear()
        self.train_curve.append((samples, progressive))
        return progressive, se, drop

    def result(self, max_steps: int) -> RunResult:
        tc = self.cfg.train
        base = _base(self.cfg)
        base["eval_schedule"].update(full_evals=self.looks.full_evals, screened_out=self.looks.screened_out)
        return RunResult(
            **base, status=self.status,  # type: ignore[arg-type]
            samples=self.hit if self.status == "ok" else (
                (self.stopped["step"] if self.stopped else max_steps) * tc.batch_size if self.status == "censored"
                else None),
            final_metric=self.curve[-1][1] if self.curve else None,
            best_metric=self.best[0] if self.best else None,
            curve=self.curve, train_curve=self.train_curve,
            wall_s=(self.t_end or time.perf_counter()) - self.t0,
            params=self.params, state_size=self.state_size,
            test_metric=self.test_metric, best_samples=self.best[1] if self.best else None,
            extra={**({"probes": self.probes} if self.probes else {}),
                   **({"tests": self.extra_tests} if self.extra_tests else {}),
                   **({"by_length": self.by_length} if self.by_length else {}),
                   **({"stopped": self.stopped} if self.stopped else {}),
                   **({"resumed_at": self.resumed_at} if self.resumed_at else {}),
                   **({"code": code} if (code := code_of(type(self.task), type(self.cfg.model_config()))) else {}),
                   **({"halving": {"race": self.race, "grid": len(tc.halving_lrs)}} if tc.halving_lrs else {})})


@contextlib.contextmanager
def flush_denormals():
    """Denormal floats (below 1.2e-38) as zeros while training: an LSTM over 200 positions
    otherwise spends most of its backward pass in the CPU's slow path for them (6x slower,
    measured: Dyck, N = 200, LSTM-64). Every path trains under it, so results stay the same
    across executors."""
    torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_flush_denormal(False)  # torch's default: the caller's process is left as it was


@contextlib.contextmanager
def matmul_precision(mode: str, dev: torch.device):
    """CUDA matmuls and cuDNN kernels (convolutions and the RNNs' fused cells) in TensorFloat-32
    while a "tf32" group trains, and in full fp32 otherwise: torch lets cuDNN use TF32 by
    default, so an "fp32" RNN on a GPU would round its products to 10 mantissa bits unless told
    not to. The process's settings are restored afterwards."""
    if dev.type != "cuda":
        yield
        return
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = mode == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def autocast(mode: str, dev: torch.device):
    """The training forward pass's arithmetic: bfloat16 autocast for "bf16", else as is."""
    if mode == "bf16":
        return torch.autocast(dev.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _train_group(cfgs: list[RunConfig], stacked: bool, checkpoints: Checkpoints | None = None) -> list[RunResult]:
    with flush_denormals(), matmul_precision(cfgs[0].train.precision, resolve_device(cfgs[0].train.device)):
        return _train_group_flushed(cfgs, stacked, checkpoints)


def _train_group_flushed(cfgs: list[RunConfig], stacked: bool, checkpoints: Checkpoints | None = None,
                         resume: bool = True) -> list[RunResult]:
    t0 = time.perf_counter()
    tc = cfgs[0].train
    dev = resolve_device(tc.device)
    tracks, models = [], []
    for c in cfgs:
        task = c.build_task()
        model = c.build_model(task).to(dev)
        model.prune_to_readout()
        if c.train.eval_lengths:
            _reads_lengths(model, c, task, dev)
        models.append(model)
        tracks.append(_Track(c, task, held_out_set(c, task, dev), Stream(c, task, dev),
                             model.n_params(), model.state_size(task.spec.seq_len), t0))
    lrs = [c.train.lr for c in cfgs]
    stack: Single | Stacked | Lockstep = (Stacked(models, lrs, tc.weight_decay) if stacked
                                          else Single(models[0], lrs[0], tc.weight_decay) if len(models) == 1
                                          else Lockstep(models, lrs, tc.weight_decay))
    race_of = [[tracks[i] for i in r] for r in races(cfgs)]  # successive halving: the runs still racing
    for r in race_of:
        for tr in r:
            tr.race = len(r)
    rungs = set(tc.rung_steps()) if tc.halving_lrs else set()
    limit = tc.diverge_factor * tracks[0].task.baseline
    max_steps = tc.budget // tc.batch_size
    active = list(tracks)
    early = set(tc.early_steps())
    # the group keeps a checkpoint (engine/checkpoint.py) and goes on from one it saved
    saved = checkpoint.load(checkpoints, cfgs) if checkpoints is not None and resume else None
    start = 0
    ends = checkpoints is not None and checkpoints.ends and len(cfgs) == 1 and checkpoint.continuable(cfgs[0])
    if saved is None and ends and resume:  # the same run with a smaller budget, kept at its end
        saved = checkpoint.load_end(checkpoints, cfgs[0])  # type: ignore[arg-type]
    if saved is not None:
        try:
            start, active, race_of = _restore(tracks, stack, saved)
        except Exception:  # noqa: BLE001 - a state naming these runs that does not fit them: start afresh
            return _train_group_flushed(cfgs, stacked, checkpoints, resume=False)
    last_save = time.perf_counter()
    stack.train(True)
    for step in range(start + 1, max_steps + 1):
        # sample -> forward -> loss -> backward -> step
        batches = [tr.data.next() for tr in active]
        with autocast(tc.precision, dev):
            preds = stack.forward([b.x for b in batches])
        preds = [p.float() for p in preds]  # the loss and metric in fp32 whatever the forward's precision
        losses = [tr.task.loss(p, b) for tr, p, b in zip(active, preds, batches)]
        for tr, p, b, loss in zip(active, preds, batches, losses):
            # progressive validation: the metric on a batch before its update
            tr.window.append(tr.task.metric(p.detach(), b) if tr.task.kind == "classification" else loss.detach())
        stack.opt.zero_grad(set_to_none=True)
        torch.stack(losses).sum().backward()
        stack.opt.step()
        if step % tc.eval_every and step not in early:
            continue
        # evaluate what is due
        samples = step * tc.batch_size
        curve_point = (step // tc.eval_every) % tc.curve_every == 0 or step + tc.eval_every > max_steps
        stack.train(False)
        for k, tr in enumerate(active):
            progressive, window_se, drop = tr.window_stats(samples)
            if not math.isfinite(progressive) or progressive > limit:
                tr.status, tr.done = "diverged", True
                continue
            _evaluate(tr, k, stack, samples, Point(progressive, window_se, drop, curve_point), limit)
        if step in rungs:
            race_of = [_halve(r, step) for r in race_of]
        stack.train(True)
        # retire finished runs
        if any(tr.done for tr in active):
            for k, tr in enumerate(active):
                if tr.done:
                    _finish(tr, k, stack, dev)
            keep = [k for k, tr in enumerate(active) if not tr.done]
            if not keep:
                break
            stack.keep(keep)
            active = [active[k] for k in keep]
        if checkpoints is not None and time.perf_counter() - last_save >= checkpoints.every_s:
            checkpoint.save(checkpoints, cfgs, _state(tracks, active, race_of, stack, step))
            last_save = time.perf_counter()
    else:
        if ends and active:  # trained to its budget: a larger budget goes on from here
            checkpoint.save_end(checkpoints, cfgs[0], max_steps,  # type: ignore[arg-type]
                                _state(tracks, active, race_of, stack, max_steps))
        for k, tr in enumerate(active):
            _finish(tr, k, stack, dev)
    return [tr.result(max_steps) for tr in tracks]


# what a _Track carries from step to step, beyond what building the group gives it again (its
# config, task, held-out set, data stream and race size)
TRACK_FIELDS = ("window", "curve", "train_curve", "probes", "status", "hit", "best", "best_state", "test_metric",
                "extra_tests", "by_length", "done", "since_best", "stopped", "resumed_at")


def _state(tracks: list[_Track], active: list[_Track], race_of: list[list[_Track]],
           stack: Single | Stacked | Lockstep, step: int) -> dict:
    """Everything a group carries from one step to the next, at a scheduled evaluation point
    (each active run's window of pre-update metrics was just emptied onto its train curve):
    the stack's parameters and optimizer, each run's data stream and bookkeeping (a run that
    has finished keeps its result), which runs still train, and the torch generator."""
    t0 = tracks[0].t0
    at = {id(tr): k for k, tr in enumerate(tracks)}  # by identity (a _Track's == compares its fields)
    return {"step": step, "elapsed": time.perf_counter() - t0, "torch_rng": torch.get_rng_state(),
            "stack": stack.state(), "active": [at[id(tr)] for tr in active],
            "races": [[at[id(tr)] for tr in r] for r in race_of],
            "tracks": [{"data": {"gen": tr.data.gen.get_state(), "order": tr.data.order, "pos": tr.data.pos,
                                 "step": tr.data.step},
                        "looks": {"ref": tr.looks.ref, "se": tr.looks.se, "full_evals": tr.looks.full_evals,
                                  "screened_out": tr.looks.screened_out},
                        "ended": None if tr.t_end is None else tr.t_end - t0,
                        **{f: getattr(tr, f) for f in TRACK_FIELDS}} for tr in tracks]}


def _restore(tracks: list[_Track], stack: Single | Stacked | Lockstep,
             s: dict) -> tuple[int, list[_Track], list[list[_Track]]]:
    """Load a `_state` into a group just built (the same configs); returns the step it was
    saved at, the runs still training and the learning-rate races."""
    assert len(s["tracks"]) == len(tracks), "a state of as many runs"
    active = [tracks[k] for k in s["active"]]
    if len(active) < len(tracks):
        stack.keep(list(s["active"]))
    stack.load(s["stack"])
    torch.set_rng_state(s["torch_rng"])
    t0 = time.perf_counter() - s["elapsed"]
    for tr, st in zip(tracks, s["tracks"]):
        d, dev = tr.data, tr.held_out.x.device
        d.gen.set_state(st["data"]["gen"])
        d.order, d.pos, d.step = st["data"]["order"].to(d.gen.device), st["data"]["pos"], st["data"]["step"]
        for f in TRACK_FIELDS:
            setattr(tr, f, st[f])
        tr.looks = HeldOutLooks(**st["looks"])
        if tr.looks.ref is not None:
            tr.looks.ref = tr.looks.ref.to(dev)
        if tr.best_state is not None:
            tr.best_state = {k: v.to(dev) for k, v in tr.best_state.items()}
        tr.t0 = t0
        tr.t_end = None if st["ended"] is None else t0 + st["ended"]
        tr.resumed_at = [*tr.resumed_at, s["step"]]
    return s["step"], active, [[tracks[k] for k in r] for r in s["races"]]


@torch.no_grad()
def _reads_lengths(model: torch.nn.Module, cfg: RunConfig, task: Task, dev: torch.device) -> None:
    """Before training: the model reads one example at each of `train.eval_lengths` (drawn from
    a generator of its own; no parameter, no other draw changes), so a model whose bound its
    config does not declare (`ModelConfig.max_length`) fails now, naming the field."""
    model.train(False)
    try:
        for n, at in cfg.length_tasks(task).items():
            g = torch.Generator(dev).manual_seed(cfg.derived_seed(f"{LENGTH_ROLE}:{n}:probe"))
            try:
                model(at.sample_test(1, g).x)
            except Exception as e:  # noqa: BLE001 - whatever the model raises, said as the field's error
                msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise ArchsepError.at("train.eval_lengths",
                                      f"model '{cfg.arch}' cannot read length {n}: {msg}") from None
    finally:
        model.train(True)


def _halve(race: list[_Track], step: int) -> list[_Track]:
    """A rung of successive halving: rank the race as `analysis.size.select` chooses (best
    held-out metric, then the samples it took, then grid order; none yet: last), keep the
    better half (rounded up), and stop the others still training. Returns those kept."""
    def rank(tr: _Track) -> tuple:
        best = tr.best or (math.inf, math.inf)
        return (best[0], best[1], tr.cfg.train.halving_lrs.index(tr.cfg.train.lr))
    ordered = sorted(race, key=rank)
    keep = ordered[:math.ceil(len(race) / 2)]
    for tr in ordered[len(keep):]:
        if not tr.done:
            tr.done, tr.stopped = True, {"why": "halved", "step": step}
    return keep


def _evaluate(tr: _Track, k: int, stack: Single | Stacked | Lockstep, samples: int, point: Point, limit: float) -> None:
    """Run k's look at its held-out set at a scheduled point: skipped, screened out (confidently
    above the threshold), or a full evaluation recorded on its curve."""
    tc = tr.cfg.train
    err = tr.looks.look(tc, point, lambda a, b: block_metrics(lambda x: stack.call(k, x), tr.task, tr.held_out, a, b),
                        len(tr.held_out))
    if err is None:
        return
    tr.curve.append((samples, err))
    if tc.probe:
        probe = getattr(stack.module(k), "probe", None)
        if probe is not None:
            tr.probes.append({"samples": samples, **probe()})
    if not math.isfinite(err) or err > limit:
        tr.status, tr.done = "diverged", True
        return
    if tr.best is None or err < tr.best[0]:
        tr.best, tr.since_best = (err, samples), 0
        if tc.keep_best:
            tr.best_state = stack.snapshot(k)
    else:
        tr.since_best += 1
    if err < tc.threshold and tr.hit is None:
        tr.hit, tr.status = samples, "ok"
        tr.done = tc.stop_at_threshold
    if tc.patience and tr.since_best >= tc.patience and not tr.done:
        tr.done, tr.stopped = True, {"why": "plateau", "step": samples // tc.batch_size}


def _finish(tr: _Track, k: int, stack: Single | Stacked | Lockstep, dev: torch.device) -> None:
    """A run leaves the loop: its end time, and its test metric and its metric at each of
    `eval_lengths` (on the best checkpoint with keep_best, else on the final parameters)."""
    tr.t_end = time.perf_counter()
    tc = tr.cfg.train
    if not (tc.test_size or tc.eval_lengths):
        return
    model = stack.module(k, tr.best_state)
    model.train(False)
    if tc.test_size:
        tr.test_metric, _ = evaluate(model, tr.task, test_set(tr.cfg, tr.task, dev))
        g = torch.Generator(dev).manual_seed(tr.cfg.derived_seed(EXTRA_TEST_ROLE))
        extra = tr.task.extra_tests(tc.test_size, g)
        tr.extra_tests = {name: evaluate(model, tr.task, b)[0] for name, b in extra.items()}
    for n, at in tr.cfg.length_tasks(tr.task).items():  # the same checkpoint at each length
        chunk = length_chunk(tr.task.spec.seq_len, at.spec.seq_len)
        tr.by_length[str(n)] = evaluate(model, at, length_set(tr.cfg, at, n, dev), chunk)[0]
    tr.t_end = time.perf_counter()
