"""The task checks of `check_task` (listed in the docstring of `archsep.testing`)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch
import torch.nn.functional as F

from ..registry import from_params
from ..tasks.base import Batch, Task, TaskSpec
from .common import SEEDS, _Checks, _gen, _is_int, _require

BASELINE_N = 4096  # examples of the baseline check
TRIVIAL_N = 256  # examples of the trivial-baselines check's determinism and best_trivial parts
# the smallest tolerance of the baseline check: relative for regression, absolute for classification
BASELINE_FLOOR = {"regression": 0.02, "classification": 0.01}


def _check_batch(task: Task, spec: TaskSpec, b: Any, n: int, gen: torch.Generator, what: str) -> None:
    _require(isinstance(b, Batch), f"{what} returned {type(b).__name__}, not a Batch")
    x, y, mask = b.x, b.y, b.mask
    _require(isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor), f"{what}: x and y must be tensors")
    _require(x.shape[0] == n and len(b) == n, f"{what}: {x.shape[0]} examples, expected {n}")
    for name, t in (("x", x), ("y", y), ("mask", mask), ("tuples", b.tuples)):
        _require(t is None or t.device == gen.device, f"{what}: {name} on {t.device if t is not None else ''}, "
                 f"the generator on {gen.device}")
    if spec.input == "tokens":
        _require(x.dim() == 2, f"{what}: token x must be (B, L), got shape {tuple(x.shape)}")
        _require(x.dtype == torch.int64, f"{what}: token x must be int64, got {x.dtype}")
        _require(bool(((x >= 0) & (x < spec.input_dim)).all()),
                 f"{what}: token ids must be in [0, input_dim={spec.input_dim}), got [{int(x.min())}, {int(x.max())}]")
    else:
        _require(x.dim() == 3 and x.shape[2] == spec.input_dim,
                 f"{what}: vector x must be (B, L, input_dim={spec.input_dim}), got shape {tuple(x.shape)}")
        _require(x.dtype == torch.float32, f"{what}: vector x must be float32, got {x.dtype}")
        _require(bool(torch.isfinite(x).all()), f"{what}: x has NaN or inf")
    L = x.shape[1]
    _require(1 <= L <= spec.seq_len, f"{what}: length {L} outside [1, seq_len={spec.seq_len}]")
    if spec.readout == "last":
        _require(tuple(y.shape) == (n,), f"{what}: y must be (B,)=({n},) for readout 'last', got {tuple(y.shape)}")
        sel = y
    else:
        _require(tuple(y.shape) == (n, L),
                 f"{what}: y must be (B, L)=({n}, {L}) for readout '{spec.readout}', got {tuple(y.shape)}")
        sel = y
        if spec.readout == "mask":
            _require(isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and tuple(mask.shape) == (n, L),
                     f"{what}: readout 'mask' needs a (B, L) bool mask, got "
                     f"{None if mask is None else (tuple(mask.shape), mask.dtype)}")
            _require(bool(mask.any()), f"{what}: the mask selects no target")
            sel = y[mask]
    if task.kind == "regression":
        _require(y.dtype == torch.float32, f"{what}: regression y must be float32, got {y.dtype}")
        _require(bool(torch.isfinite(sel).all()), f"{what}: y has NaN or inf")
    else:
        _require(y.dtype == torch.int64, f"{what}: classification y must be int64 labels, got {y.dtype}")
        _require(bool(((sel >= 0) & (sel < spec.output_dim)).all()),
                 f"{what}: labels must be in [0, output_dim={spec.output_dim}), got [{int(sel.min())}, "
                 f"{int(sel.max())}]")


def _same_batch(a: Batch, b: Batch) -> str | None:
    """None if identical, else the first field that differs."""
    for name in ("x", "y", "mask", "tuples"):
        s, t = getattr(a, name), getattr(b, name)
        if (s is None) != (t is None):
            return name
        if s is not None and (s.shape != t.shape or s.dtype != t.dtype or not torch.equal(s, t)):
            return name
    return None


def _selected(task: Task, b: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """The labels per example (B, K) and weights (B, K): 1 where the task reads a target."""
    y = b.y
    if task.spec.readout == "last":
        return y.unsqueeze(1), torch.ones(len(y), 1)
    if task.spec.readout == "mask":
        _require(b.mask is not None, "a task read by 'mask' must give its batches a mask")
        assert b.mask is not None
        return y, b.mask.float()
    w = torch.ones(y.shape, dtype=torch.float32)
    return y, w


def _perfect(task: Task, b: Batch) -> torch.Tensor:
    """The prediction (B, L, output_dim) that reads off the labels."""
    spec, y = task.spec, b.y
    n, L = b.x.shape[0], b.x.shape[1]
    if task.kind == "regression":
        if spec.readout == "last":
            p = torch.zeros(n, L, 1)
            p[:, -1, 0] = y
            return p
        return y.unsqueeze(-1).clone()
    logits = lambda lab: 10.0 * F.one_hot(lab.clamp(0, spec.output_dim - 1), spec.output_dim).float()  # noqa: E731
    if spec.readout == "last":
        p = torch.zeros(n, L, spec.output_dim)
        p[:, -1] = logits(y)
        return p
    return logits(y)


def _baseline_estimate(task: Task, b: Batch) -> tuple[float, float, str]:
    """The metric of the best constant prediction on `b`, its standard error over examples, and
    what the constant was."""
    spec = task.spec
    n, L = b.x.shape[0], b.x.shape[1]
    y, w = _selected(task, b)
    count = w.sum(1)
    keep = count > 0
    if task.kind == "regression":
        yf = y.double()
        c = float((yf * w).sum() / w.sum())
        pred = torch.full((1, 1, 1), c).expand(n, L, spec.output_dim)
        est = float(task.metric(pred, b))
        per = ((yf - c) ** 2 * w).sum(1)[keep] / count[keep]
        what = f"the label mean {c:.4g}"
    else:
        labels = y[w > 0]
        mode = int(torch.bincount(labels.flatten(), minlength=spec.output_dim).argmax())
        logit = torch.zeros(spec.output_dim)
        logit[mode] = 1.0
        est = float(task.metric(logit.expand(n, L, spec.output_dim), b))
        per = (((y != mode).float() * w).sum(1))[keep] / count[keep]
        what = f"the most frequent label {mode}"
    per = per.double()
    se = float(per.std() / math.sqrt(len(per))) if len(per) > 1 else float("inf")
    return est, se, what


def task_checks(c: _Checks, name: str, build: Callable[[], Task]) -> None:
    """Run the task checks in order on what `build()` gives (inside the 'builds' check)."""
    with c.check("builds"):
        task = build()
        _require(isinstance(task, Task), f"built a {type(task).__name__}, not a Task")
        _require(dataclasses.is_dataclass(task) and type(task).__dataclass_params__.frozen,
                 "a task must be a frozen dataclass (its fields are its identity)")
        _require(task.kind in ("regression", "classification"),
                 f"kind must be 'regression' or 'classification', got {task.kind!r}")
    with c.check("params"):
        p = task.params()
        _require(isinstance(p, dict), f"params() returned {type(p).__name__}, not a dict")
        again = from_params(type(task), p, f"task '{name}'")
        _require(again == task, f"from_params(params()) gave {again!r}, not {task!r}")
        d = task.describe()
        _require(isinstance(d, str) and "\n" not in d, "describe() must return one line")
    with c.check("spec"):
        spec = task.spec
        _require(isinstance(spec, TaskSpec), f"spec is a {type(spec).__name__}, not a TaskSpec")
        _require(spec.input in ("vector", "tokens"), f"input must be 'vector' or 'tokens', got {spec.input!r}")
        for f in ("input_dim", "seq_len", "output_dim"):
            v = getattr(spec, f)
            _require(_is_int(v) and v >= 1, f"{f} must be a positive int, got {v!r}")
        _require(spec.readout in ("all", "last", "mask"),
                 f"readout must be 'all', 'last' or 'mask', got {spec.readout!r}")
        _require(spec.paper_ffn_width is None or (_is_int(spec.paper_ffn_width) and spec.paper_ffn_width >= 1),
                 f"paper_ffn_width must be None or a positive int, got {spec.paper_ffn_width!r}")
        if task.kind == "regression":
            _require(spec.output_dim == 1,
                     f"regression needs output_dim 1 (the loss squeezes it), got {spec.output_dim}")
        else:
            _require(spec.output_dim >= 2, f"classification needs output_dim >= 2 classes, got {spec.output_dim}")
        base = task.baseline
        _require(isinstance(base, (int, float)) and not isinstance(base, bool) and math.isfinite(base) and base > 0,
                 f"baseline must be a finite positive number, got {base!r}")
        _require(task.spec == spec, "spec changes between two reads")
    samplers = (("sample", task.sample), ("sample_test", task.sample_test))
    for label, sampler in samplers:
        with c.check(f"{label.replace('_', '-')}-shapes"):
            for n, s in ((1, SEEDS[0]), (16, SEEDS[0]), (16, SEEDS[1])):
                g = _gen(s)
                _check_batch(task, spec, sampler(n, g), n, g, f"{label}({n}) with seed {s}")
    if task.fixed_shapes:
        with c.check("fixed-shapes"):
            shapes = {tuple(task.sample(16, _gen(s)).x.shape) for s in (*SEEDS, 2, 3)}
            _require(len(shapes) == 1, f"fixed_shapes is true but sample(16) gave shapes {sorted(shapes)}")
    with c.check("generator-only"):
        for label, sampler in samplers:
            before = torch.get_rng_state()
            sampler(16, _gen(SEEDS[0]))
            _require(torch.equal(before, torch.get_rng_state()),
                     f"{label} drew from the global torch RNG; every draw must come from `generator`")
    with c.check("determinism"):
        for label, sampler in samplers:
            for s in SEEDS:
                diff = _same_batch(sampler(16, _gen(s)), sampler(16, _gen(s)))
                _require(diff is None, f"{label}(16) with the same seed {s} gave different {diff}")
    with c.check("seeds-differ"):
        for label, sampler in samplers:
            a, b = sampler(16, _gen(SEEDS[0])), sampler(16, _gen(SEEDS[1]))
            _require(_same_batch(a, b) is not None, f"{label}(16) gave the same batch for seeds {SEEDS}")
    with c.check("labels-vary"):
        b = task.sample_test(64, _gen(SEEDS[0]))
        y, w = _selected(task, b)
        sel = y[w > 0]
        _require(sel.numel() >= 2 and not bool((sel == sel.flatten()[0]).all()),
                 f"all {sel.numel()} targets of 64 test examples equal {sel.flatten()[0].item()}")
        _require(not bool((b.x == b.x[:1]).all()), "all 64 test inputs are identical")
    with c.check("loss-metric"):
        b = task.sample(16, _gen(SEEDS[0]))
        pred = torch.randn(16, b.x.shape[1], spec.output_dim, generator=_gen(7), requires_grad=True)
        loss = task.loss(pred, b)
        _require(isinstance(loss, torch.Tensor) and loss.dim() == 0, f"loss must be a scalar tensor, got {loss!r}")
        _require(bool(torch.isfinite(loss)), f"loss of a random prediction is {loss.item()}")
        loss.backward()
        _require(pred.grad is not None and bool(torch.isfinite(pred.grad).all()) and bool(pred.grad.abs().sum() > 0),
                 "the loss gives the prediction no finite, nonzero gradient")
        m = task.metric(pred.detach(), b)
        _require(isinstance(m, torch.Tensor) and m.dim() == 0 and bool(torch.isfinite(m)),
                 f"metric of a random prediction must be a finite scalar, got {m!r}")
        if task.kind == "classification":
            _require(0 <= float(m) <= 1, f"classification metric (error rate) {float(m)} outside [0, 1]")
        else:
            _require(float(m) >= 0, f"regression metric (MSE) {float(m)} < 0")
        best = float(task.metric(_perfect(task, b), b))
        _require(abs(best) < 1e-6, f"the metric of predicting the labels themselves is {best}, not 0")
    if spec.readout == "last":
        with c.check("pruned-readout"):
            b = task.sample(16, _gen(SEEDS[0]))
            pred = torch.randn(16, b.x.shape[1], spec.output_dim, generator=_gen(7))
            for cut in (pred[:, -1:], pred[:, -1]):
                for fn in ("loss", "metric"):
                    full, pruned = float(getattr(task, fn)(pred, b)), float(getattr(task, fn)(cut, b))
                    _require(math.isclose(full, pruned, rel_tol=1e-5, abs_tol=1e-6),
                             f"{fn} of a {tuple(cut.shape)} prediction {pruned} != {full} of the full (B, L, C) one")
    with c.check("baseline"):
        b = task.sample_test(BASELINE_N, _gen(12345))
        est, se, constant = _baseline_estimate(task, b)
        base = float(task.baseline)
        tol = max(BASELINE_FLOOR[task.kind] * (base if task.kind == "regression" else 1.0), 5 * se)
        _require(abs(est - base) <= tol,
                 f"baseline {base:.4g}, but predicting {constant} scores {est:.4g} on {BASELINE_N} test examples "
                 f"(tolerance {tol:.3g}, standard error {se:.2g})")
    if task.kind == "classification":
        with c.check("trivial-baselines"):
            _check_trivial(task, tol, se)


def _check_trivial(task: Task, tol: float, se: float) -> None:
    """`trivial_baselines`: accuracies in [0, 1] by name, "constant" among them and within the
    baseline check's tolerance of the chance accuracy; seeded and generator-only; `best_trivial`
    is their maximum."""
    chance = 1.0 - float(task.baseline)
    before = torch.get_rng_state()
    found = task.trivial_baselines(BASELINE_N, _gen(12345))
    _require(torch.equal(before, torch.get_rng_state()),
             "trivial_baselines drew from the global torch RNG; every draw must come from `generator`")
    _require(isinstance(found, dict) and len(found) > 0,
             f"trivial_baselines must return a non-empty dict of accuracies by name, got {found!r}")
    for k, v in found.items():
        _require(isinstance(k, str) and k != "", f"trivial_baselines: names must be non-empty strings, got {k!r}")
        _require(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 1,
                 f"trivial_baselines: accuracy of {k!r} must be a number in [0, 1], got {v!r}")
    _require("constant" in found, f"trivial_baselines must include 'constant', got {sorted(found)}")
    _require(abs(found["constant"] - chance) <= tol,
             f"trivial_baselines: 'constant' scores {found['constant']:.4g} on {BASELINE_N} test examples, but "
             f"chance_accuracy is {chance:.4g} (tolerance {tol:.3g}, standard error {se:.2g})")
    first, second = (task.trivial_baselines(TRIVIAL_N, _gen(SEEDS[1])) for _ in range(2))
    _require(first == second, f"trivial_baselines({TRIVIAL_N}) with the same seed gave {first} and {second}")
    name, acc = task.best_trivial(TRIVIAL_N, _gen(SEEDS[1]))
    _require(name in first and acc == first[name] == max(first.values()),
             f"best_trivial gave ({name!r}, {acc}), not the best of {first}")
