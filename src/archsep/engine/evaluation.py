"""The held-out set and its evaluation: whether to evaluate at a scheduled point (`decide`),
and how: in full, or screened against the last full evaluation (`screen`).

A held-out evaluation is a mean over fixed blocks of examples. Between two nearby evaluation
points the model changes little, so each block's metric changes little: the change of the
first few blocks since the last full evaluation predicts the change of the whole mean far
more tightly than the blocks predict the mean itself (a control variate). `screen` uses this
to stop an evaluation early once its mean is confidently above the threshold; whenever the
threshold is within reach it finishes, and returns the exact full mean.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

import torch

from ..config import HELD_OUT_ROLE, LENGTH_ROLE, TEST_ROLE, VALIDATION_ROLE, RunConfig, TrainConfig
from ..tasks.base import Batch, Task

BLOCK = 25  # examples per block: the unit of the standard errors and of screening
CHUNK = 250  # examples per forward pass: keeps the activations of a large RNN in cache
LOOKS = (500, 1000, 2000)  # examples evaluated before each early-stopping look

Model = Callable[[torch.Tensor], torch.Tensor]


def held_out_set(cfg: RunConfig, task: Task, device: torch.device | str = "cpu") -> Batch:
    """The held-out set, drawn once from its own seed by `task.sample_test`: the training
    distribution itself (qSTR; the authors' code evaluated 1STR on simple-1STR data), or, for a
    task trained on variable lengths, that distribution at exactly length N (paper A). A run
    with a test set uses it as its validation set."""
    role = VALIDATION_ROLE if cfg.train.test_size else HELD_OUT_ROLE
    g = torch.Generator(device).manual_seed(cfg.derived_seed(role))
    if cfg.train.heldout == "as-published":
        return task.sample_as_published(cfg.train.eval_size, g)  # type: ignore[attr-defined]
    return task.sample_test(cfg.train.eval_size, g)


def test_set(cfg: RunConfig, task: Task, device: torch.device | str = "cpu") -> Batch:
    """The test set (train.test_size examples), from a seed of its own: never seen in training
    or model selection."""
    return task.sample_test(cfg.train.test_size, torch.Generator(device).manual_seed(cfg.derived_seed(TEST_ROLE)))


def length_set(cfg: RunConfig, at: Task, n: int, device: torch.device | str = "cpu") -> Batch:
    """The held-out set at length n of `train.eval_lengths`: `at` (the task at length n,
    `RunConfig.length_tasks`) draws test_size examples (eval_size without a test set) by its
    `sample_test`, every one at exactly that length, from a seed of its own (role
    "length-test:<n>"): apart from the training, validation and test draws, and the same set
    whichever other lengths are listed."""
    size = cfg.train.test_size or cfg.train.eval_size
    return at.sample_test(size, torch.Generator(device).manual_seed(cfg.derived_seed(f"{LENGTH_ROLE}:{n}")))


def length_chunk(trained: int, evaluated: int) -> int:
    """Examples per forward pass at `evaluated` positions for a model trained at `trained`: CHUNK
    scaled down so that a chunk holds about the positions it holds in training (an attention
    layer's activations grow with the length squared), a multiple of BLOCK, at least BLOCK."""
    return max(BLOCK, min(CHUNK, CHUNK * trained // max(1, evaluated)) // BLOCK * BLOCK)


Action = Literal["skip", "screen", "full"]


def decide(*, mode: str, curve_point: bool, has_reference: bool, progressive: float, window_se: float,
           held_out_se: float, drop: float, z: float, threshold: float, band: float = 0.0) -> Action:
    """What to do at a scheduled evaluation point (a pure function of the run's statistics).

    `progressive` is the mean pre-update loss of the training batches since the last point (an
    unbiased risk estimate) with standard error `window_se`; it lags the current risk by about
    its recent `drop`. Skip while it stays above the threshold's band, `threshold * (1 + band)`,
    by more than `z` standard errors (of it and of the held-out mean, `held_out_se`): the band
    covers what no standard error sees, how far the held-out metric of the model at one step
    strays from the risk averaged over the window's steps (a hovering curve that crosses by a
    transient dip). Curve points and mode 'every' are always evaluated in full, and so is the
    first evaluation near the threshold (the reference that screening compares against)."""
    if mode == "every" or curve_point:
        return "full"
    se = math.sqrt(window_se**2 + (held_out_se if math.isfinite(held_out_se) else window_se) ** 2)
    if progressive - drop - z * se >= threshold * (1 + band):
        return "skip"
    return "screen" if has_reference else "full"


def data_slice(data: Batch, a: int, b: int) -> Batch:
    return Batch(data.x[a:b], data.y[a:b], None if data.mask is None else data.mask[a:b])


@torch.no_grad()
def block_metrics(model: Model, task: Task, data: Batch, start: int = 0, stop: int | None = None,
                  chunk: int = CHUNK) -> torch.Tensor:
    """The metric of each block of BLOCK examples in data[start:stop] (float64), computed
    `chunk` examples (a multiple of BLOCK) per forward pass: the same blocks whatever the chunk."""
    stop = len(data) if stop is None else stop
    out = []
    for i in range(start, stop, chunk):
        part = data_slice(data, i, min(i + chunk, stop))
        pred = model(part.x)
        for j in range(0, len(part), BLOCK):
            out.append(float(task.metric(pred[j:j + BLOCK], data_slice(part, j, j + BLOCK))))
    return torch.tensor(out, dtype=torch.float64)


def block_sizes(n: int) -> torch.Tensor:
    """Examples per block of an n-example set (all BLOCK but maybe the last)."""
    sizes = torch.full((math.ceil(n / BLOCK),), float(BLOCK), dtype=torch.float64)
    sizes[-1] = n - BLOCK * (len(sizes) - 1)
    return sizes


def mean_se(blocks: torch.Tensor, sizes: torch.Tensor) -> tuple[float, float]:
    """Example-weighted mean of block metrics, and its standard error from their spread."""
    mean = float((blocks * sizes).sum() / sizes.sum())
    se = float(blocks.std() / math.sqrt(len(blocks))) if len(blocks) > 1 else math.inf
    return mean, se


def evaluate(model: Model, task: Task, data: Batch, chunk: int = CHUNK) -> tuple[float, float]:
    """Held-out metric averaged over examples, and its standard error."""
    return mean_se(block_metrics(model, task, data, chunk=chunk), block_sizes(len(data)))


@dataclass
class Screened:
    """One screened evaluation: `mean`/`se`/`blocks` are exact and complete unless `stopped`,
    in which case `mean` is the control-variate estimate and `examples` says how far it got."""

    mean: float
    se: float
    blocks: torch.Tensor | None
    stopped: bool
    examples: int


def screen(model: Model, task: Task, data: Batch, ref: torch.Tensor | None, threshold: float, z: float) -> Screened:
    """`screen_blocks` over a model's held-out set."""
    return screen_blocks(lambda a, b: block_metrics(model, task, data, a, b), len(data), ref, threshold, z)


Blocks = Callable[[int, int], torch.Tensor]  # (start, stop) examples -> the metric of each block in them


def screen_blocks(blocks: Blocks, n: int, ref: torch.Tensor | None, threshold: float, z: float) -> Screened:
    """Evaluate block by block; at each look, estimate the full mean as the last full
    evaluation's (`ref`, its block metrics) plus the mean change on the blocks seen so far, and
    stop if that estimate is more than `z` standard errors above `threshold`. The standard
    error is that of the change's mean on the unseen blocks, estimated from the seen ones."""
    sizes = block_sizes(n)
    seen = torch.empty(0, dtype=torch.float64)
    for look in LOOKS if math.isfinite(z) and ref is not None else ():
        assert ref is not None
        if look >= n:
            break
        seen = torch.cat([seen, blocks(len(seen) * BLOCK, look)])
        k = len(seen)
        d = seen - ref[:k]
        w_rest = float(sizes[k:].sum() / sizes.sum())  # weight of the unseen blocks in the mean
        est = float((seen * sizes[:k]).sum() / sizes.sum()) + w_rest * float(
            (ref[k:] * sizes[k:]).sum() / sizes[k:].sum() + d.mean())
        se = w_rest * float(d.std()) * math.sqrt(1 / k + 1 / (len(sizes) - k))
        if est - z * se > threshold:
            return Screened(est, se, None, True, k * BLOCK)
    all_blocks = torch.cat([seen, blocks(len(seen) * BLOCK, n)])
    mean, se = mean_se(all_blocks, sizes)
    return Screened(mean, se, all_blocks, False, n)


@dataclass
class Point:
    """What a scheduled evaluation point knows before it evaluates: the window's progressive
    loss, its standard error and recent drop (see `decide`), and whether it is a curve point."""

    progressive: float
    window_se: float
    drop: float
    curve_point: bool


@dataclass
class HeldOutLooks:
    """One run's held-out evaluations under its schedule (`TrainConfig.eval_mode`): the last
    full evaluation's blocks (the screening reference) and standard error, and how many
    evaluations ran in full or were screened out. Training and `first_hit` (which replays
    recorded evaluations) both look through it, so they take the same decisions."""

    ref: torch.Tensor | None = None
    se: float = math.inf
    full_evals: int = 0
    screened_out: int = 0

    def look(self, tc: TrainConfig, point: Point, blocks: Blocks, n: int) -> float | None:
        """The exact held-out mean at this point, or None where it was skipped or screened out
        (then it is above the threshold, with the confidence the schedule asks for)."""
        action = decide(mode=tc.eval_mode, curve_point=point.curve_point, has_reference=self.ref is not None,
                        progressive=point.progressive, window_se=point.window_se, held_out_se=self.se,
                        drop=point.drop, z=tc.progressive_z, threshold=tc.threshold, band=tc.progressive_band)
        if action == "skip":
            return None
        ev = screen_blocks(blocks, n, self.ref, tc.threshold, math.inf if action == "full" else tc.screen_z)
        if ev.stopped:
            self.screened_out += 1
            return None
        self.full_evals += 1
        self.se, self.ref = ev.se, ev.blocks
        return ev.mean


def first_hit(tc: TrainConfig, points: list[Point], blocks: list[torch.Tensor]) -> int | None:
    """Replays a run's schedule over recorded evaluations: `blocks[i]` holds the metric of every
    held-out block at point i (what evaluating in full there gives). Returns the index of the
    first point whose looked-at mean is below the threshold, or None: with `eval_mode='every'`
    the true first crossing, with 'progressive' what the skipping and screening find."""
    looks = HeldOutLooks()
    for i, (p, b) in enumerate(zip(points, blocks)):
        def block_slice(start: int, stop: int, b: torch.Tensor = b) -> torch.Tensor:
            return b[start // BLOCK:math.ceil(stop / BLOCK)]

        mean = looks.look(tc, p, block_slice, tc.eval_size)
        if mean is not None and mean < tc.threshold:
            return i
    return None
