"""Contract checks for extensions: does a task or a model keep the interface the engine relies on?

A new task or architecture is one registered dataclass (see `archsep.tasks` and
`archsep.models`); these checks tell its author, in seconds, whether it honours the contract of
`archsep.tasks.base.Task` or `archsep.models.base.ModelConfig` / `SeqModel`:

    from archsep.testing import check_task, check_model
    check_task("my-task", N=8)        # -> ["builds", "spec", ...]: the names of the checks passed
    check_model("my-arch", width=16)  # builds it for two small tasks, and trains it briefly

or from the command line: `archsep check-task NAME [--param KEY=VALUE ...]` and
`archsep check-model NAME [--task TASK] [--param KEY=VALUE ...]`.

A failed check raises `ArchsepError` with one line naming the task or model and the check,
e.g. "task 'my-task': check 'determinism' failed: sample(16) with the same seed gave different x".
Every check is seeded: the same code passes or fails the same way on every run. The global
torch RNG is left as it was found.

Task checks, in order:
- builds: the registered dataclass builds (frozen, a `Task`, kind 'regression'|'classification');
- params: `from_params(type(task), task.params())` rebuilds an equal task, `describe()` is a line;
- spec: a `TaskSpec` with sane values (input 'vector'|'tokens', positive sizes, a known readout;
  regression has output_dim 1, classification at least 2 classes) and a finite positive baseline;
- sample-shapes / sample-test-shapes: batches of `sample` and `sample_test` (n = 1 and 16, two
  seeds) match the spec and the readout, as `Batch` documents them: x (B, L, input_dim) float32
  or (B, L) int64 ids in [0, input_dim), 1 <= L <= seq_len; y (B,) for 'last', (B, L) for 'all'
  and 'mask' (with a (B, L) bool mask selecting at least one target); y float32 for regression,
  int64 labels in [0, output_dim) for classification; everything finite, on the generator's device;
- fixed-shapes: (when `task.fixed_shapes`) batches of different seeds share one shape;
- generator-only: sampling draws nothing from the global torch RNG;
- determinism: the same seed gives the identical batch (x, y, mask, tuples), for both samplers;
- seeds-differ: different seeds give different batches;
- labels-vary: the targets of 64 test examples are not all equal, nor the inputs;
- loss-metric: for a random prediction of shape (B, L, output_dim) the loss is a finite scalar
  with a finite, nonzero gradient and the metric a finite scalar (in [0, 1] for classification);
  a perfect prediction (the labels, or their one-hot logits) has metric 0;
- pruned-readout: (readout 'last') the loss and metric of predictions pruned to (B, 1, C) or
  (B, C), as a pruned model returns them, equal those of the full (B, L, C) prediction;
- baseline: `task.baseline` is what the best input-independent predictor scores, measured on
  4096 `sample_test` examples: for regression the metric (MSE) of predicting the label mean;
  for classification the metric of always predicting the most frequent label (1 - its
  frequency). Tolerance: 5 standard errors of the estimate, the standard error taken over
  examples (the unit that is i.i.d.: positions of one example may share labels, e.g. qstr
  `simple=True` or `distribution="prop3"`, so per-position errors would understate it), but at
  least 2% of the baseline (regression) or 0.01 (classification). Sampling noise alone exceeds
  5 standard errors with probability ~1e-6 (normal approximation over 4096 i.i.d. examples;
  picking the most frequent of K labels biases the estimate by ~sqrt(2 ln K) < 5 standard
  errors), and the check is seeded, so a task either passes it or not; a baseline that is
  wrong by more than the tolerance fails (measured tolerances: qstr 0.05 to 0.26, depending on
  the link and distribution; the classification tasks 0.011 to 0.04).
- trivial-baselines: (classification) `trivial_baselines(4096, generator)` is a non-empty dict of
  accuracies in [0, 1] by name, "constant" among them and within the baseline check's
  tolerance of the chance accuracy (1 - `baseline`); it draws only from the generator and the
  same seed gives the same dict; `best_trivial` is its largest entry.

Model checks, for each task (by default two small ones, one per input kind, see `DEFAULT_TASKS`):
- builds: the config (a frozen dataclass whose `params()` rebuild it) builds a `SeqModel` for
  the task's spec;
- deterministic: two builds under the same `torch.manual_seed` have identical parameters and
  give identical outputs;
- output-shape / finite-output: on a full-length test batch the output is (B, L, output_dim)
  (or (B, 1, output_dim) for a readout-'last' task: a model may predict only what is read)
  float32 and finite (in eval mode);
- shorter-input: on a task trained on variable lengths (`fixed_shapes` False), an input one
  position shorter than seq_len gives (B, L-1, output_dim);
- batch-independent: each example's output does not depend on the rest of the batch;
- pruned-output: after `prune_to_readout()` (as the engine trains it) the output is
  (B, L, output_dim), or for readout 'last' (B, 1, C) or (B, C), equal to the unpruned output at
  the positions read, and the task loss is unchanged;
- gradients: the task loss of the pruned model gives every trainable parameter a finite
  gradient, some of it nonzero;
- fits: Adam (lr 3e-3) full-batch on 64 fixed examples brings the training loss, or the
  training metric (the error rate, for classification), below half its initial value within
  300 steps. It stops as soon as it does: every registered model does so in 3 to 120 steps on
  the default tasks, for any of 6 seeds tried (well under a second each on one core). A model that cannot represent a
  task at all fails it, e.g. tf-preln with pool='mean' (one output for every position) on
  qstr's per-position targets: check such variants on a task they can fit (`task=`).

Check names of `check_model` carry the task, e.g. "fits[qstr]". Some registered models need
parameters for the checks (`CHECK_PARAMS`, `TOKEN_PARAMS`), merged under the caller's own.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any, Iterator

import torch
import torch.nn.functional as F

from .errors import ArchsepError
from .models import MODELS
from .models.base import ModelConfig, SeqModel
from .registry import from_params
from .tasks import TASKS
from .tasks.base import Batch, Task, TaskSpec

SEEDS = (0, 1)  # the two sampling seeds of the batch checks
BASELINE_N = 4096  # examples of the baseline check
TRIVIAL_N = 256  # examples of the trivial-baselines check's determinism and best_trivial parts
# the smallest tolerance of the baseline check: relative for regression, absolute for classification
BASELINE_FLOOR = {"regression": 0.02, "classification": 0.01}
FIT_N, FIT_STEPS, FIT_LR, FIT_RATIO = 64, 300, 3e-3, 0.5

# The default tasks of `check_model`: small and cheap, one per input kind, between them both
# task kinds and both readouts a model is trained on ('all' and 'last').
DEFAULT_TASKS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("qstr", {"N": 6, "d": 4}),  # vectors (B, 6, 20), regression at every position
    ("index-lookup", {"N": 6, "vocab": 6}),  # tokens (B, <= 7), classification at the last position
)
# Parameters the model checks use unless the caller sets them:
CHECK_PARAMS: dict[str, dict[str, Any]] = {
    "rnn-b": {"hidden": 32},  # the default bidirectional GRU-500 (paper B) takes ~80 ms a step on one core
}
# Configs that need an embedding width for token inputs: their `embed` defaults to None (the
# paper-B form on qSTR vectors), and `input_layer` refuses token ids without a width.
TOKEN_PARAMS: dict[str, dict[str, Any]] = {"ffn": {"embed": 16}, "tf-b": {"embed": 16}}


class _Failed(Exception):
    """A contract violation found by a check (turned into a one-line ArchsepError)."""


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise _Failed(message)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Checks:
    """Runs named checks; records the passed ones, turns the first failure into one line."""

    def __init__(self, what: str):
        self.what = what
        self.passed: list[str] = []

    @contextlib.contextmanager
    def check(self, name: str) -> Iterator[None]:
        try:
            yield
        except _Failed as e:
            raise ArchsepError(_one_line(f"{self.what}: check '{name}' failed: {e}")) from None
        except ArchsepError as e:
            raise ArchsepError(_one_line(f"{self.what}: check '{name}' failed: {e}")) from e
        except Exception as e:  # noqa: BLE001  (a crash inside the extension is a failed check)
            raise ArchsepError(_one_line(f"{self.what}: check '{name}' failed: {type(e).__name__}: {e}")) from e
        self.passed.append(name)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# --- tasks ------------------------------------------------------------------------------------
def _resolve_task(task: str | Task, params: dict[str, Any]) -> tuple[str, Task | None]:
    """(name, the instance or None to build it); an unknown name is the registry's one-line error."""
    if isinstance(task, Task):
        if params:
            raise ArchsepError(f"check_task: parameters ({', '.join(params)}) are for a task name, not an instance")
        return getattr(task, "registry_name", type(task).__name__), task
    if not isinstance(task, str):
        raise ArchsepError(f"check_task: expected a task name or a Task instance, got {task!r}")
    TASKS.get(task)
    return task, None


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


def check_task(task: str | Task, **params: Any) -> list[str]:
    """Check a registered task (by name, built with `params`) or a Task instance against the
    task contract (see the module docstring). Returns the names of the checks, all passed;
    raises ArchsepError with one line naming the task and the first failed check."""
    name, inst = _resolve_task(task, params)
    what = f"task '{name}'" + (f" ({', '.join(f'{k}={v}' for k, v in params.items())})" if params else "")
    c = _Checks(what)
    with torch.random.fork_rng(devices=[]):
        _task_checks(c, name, inst, params)
    return c.passed


def _task_checks(c: _Checks, name: str, inst: Task | None, params: dict[str, Any]) -> None:
    with c.check("builds"):
        task = inst if inst is not None else TASKS.build(name, **params)
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


# --- models -----------------------------------------------------------------------------------
def _resolve_model(model: str | ModelConfig, params: dict[str, Any], spec: TaskSpec) -> tuple[str, ModelConfig]:
    if isinstance(model, ModelConfig):
        if params:
            raise ArchsepError("check_model: parameters are for an architecture name, not a config instance")
        return getattr(model, "registry_name", type(model).__name__), model
    if not isinstance(model, str):
        raise ArchsepError(f"check_model: expected an architecture name or a ModelConfig, got {model!r}")
    MODELS.get(model)  # an unknown name: the registry's one-line error
    merged = {**CHECK_PARAMS.get(model, {}), **(TOKEN_PARAMS.get(model, {}) if spec.input == "tokens" else {}),
              **params}
    return model, MODELS.build(model, **merged)


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-4) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=tol, atol=tol))


def _build(cfg: ModelConfig, spec: TaskSpec, seed: int = 0) -> SeqModel:
    torch.manual_seed(seed)
    return cfg.build(spec)


def check_model(model: str | ModelConfig, task: str | Task | None = None, task_params: dict[str, Any] | None = None,
                **params: Any) -> list[str]:
    """Check a registered architecture (by name, built with `params` over `CHECK_PARAMS`) or a
    ModelConfig instance against the model contract (see the module docstring), on `task`
    (a name built with `task_params`, or a Task instance) or by default on each of
    `DEFAULT_TASKS`. Returns the names of the checks, all passed, as "check[task]"; raises
    ArchsepError with one line naming the model, the task and the first failed check."""
    if isinstance(model, str):
        MODELS.get(model)  # an unknown name: the registry's one-line error, not a failed check
    if task is None:
        if task_params:
            raise ArchsepError("check_model: task_params given without a task")
        tasks = [TASKS.build(n, **p) for n, p in DEFAULT_TASKS]
    elif isinstance(task, Task):
        if task_params:
            raise ArchsepError("check_model: task_params are for a task name, not an instance")
        tasks = [task]
    else:
        tasks = [TASKS.build(task, **(task_params or {}))]  # unknown names and keys: one-line errors
    passed: list[str] = []
    with torch.random.fork_rng(devices=[]):
        for t in tasks:
            passed += _model_checks(model, params, t)
    return passed


def _model_checks(model: str | ModelConfig, params: dict[str, Any], task: Task) -> list[str]:
    spec = task.spec
    tname = getattr(task, "registry_name", type(task).__name__)
    mname = model if isinstance(model, str) else getattr(model, "registry_name", type(model).__name__)
    shown = "" if not params else f" ({', '.join(f'{k}={v}' for k, v in params.items())})"
    c = _Checks(f"model '{mname}'{shown} on task '{tname}'")
    check = lambda n: c.check(f"{n}[{tname}]")  # noqa: E731
    with check("builds"):
        _, cfg = _resolve_model(model, params, spec)
        _require(dataclasses.is_dataclass(cfg) and type(cfg).__dataclass_params__.frozen,
                 "a model config must be a frozen dataclass (its fields are its identity)")
        again = from_params(type(cfg), cfg.params(), f"arch '{mname}'")
        _require(again == cfg, f"from_params(params()) gave {again!r}, not {cfg!r}")
        net = _build(cfg, spec)
        _require(isinstance(net, SeqModel), f"build returned a {type(net).__name__}, not a SeqModel")
    batch = task.sample_test(8, _gen(SEEDS[0]))
    x = batch.x
    B, L, C = x.shape[0], x.shape[1], spec.output_dim
    with check("output-shape"):
        net.eval()
        with torch.no_grad():
            out = net(x)
        _require(isinstance(out, torch.Tensor), f"forward returned {type(out).__name__}, not a tensor")
        # a model may predict only what a readout-'last' task reads: (B, 1, C)
        last_only = spec.readout == "last" and tuple(out.shape) == (B, 1, C)
        _require(tuple(out.shape) == (B, L, C) or last_only,
                 f"output {tuple(out.shape)}, expected (B, L, output_dim)={(B, L, C)}"
                 + (f" or {(B, 1, C)} (readout 'last')" if spec.readout == "last" else ""))
        _require(out.dtype == torch.float32, f"output dtype {out.dtype}, expected float32")
    with check("finite-output"):
        bad = int((~torch.isfinite(out)).sum())
        _require(bad == 0, f"{bad} of {out.numel()} outputs are NaN or inf")
    with check("deterministic"):
        twin = _build(cfg, spec)
        sa, sb = net.state_dict(), twin.state_dict()
        _require(sa.keys() == sb.keys(), "two builds have different parameter names")
        diff = [k for k in sa if not torch.equal(sa[k], sb[k])]
        _require(not diff, f"two builds under torch.manual_seed(0) differ in {', '.join(diff[:3])}")
        twin.eval()
        with torch.no_grad():
            _require(torch.equal(net(x), out), "two forward passes on the same input differ")
            _require(torch.equal(twin(x), out), "two builds under the same seed give different outputs")
    if L >= 2 and not task.fixed_shapes:  # only tasks with variable lengths feed shorter inputs
        with check("shorter-input"):
            with torch.no_grad():
                short = net(x[:, :-1])
            want = (B, 1, C) if last_only else (B, L - 1, C)
            _require(tuple(short.shape) == want,
                     f"input of length {L - 1} < seq_len gave output {tuple(short.shape)}, expected {want}")
            _require(bool(torch.isfinite(short).all()), "output on a shorter input is not finite")
    with check("batch-independent"):
        with torch.no_grad():
            part = net(x[:2])
        _require(_close(part, out[:2]), "the outputs of two examples change when the rest of the batch is removed")
    with check("pruned-output"):
        net.prune_to_readout()
        with torch.no_grad():
            pruned = net(x)
        shape = tuple(pruned.shape)
        if spec.readout == "last":
            _require(shape in ((B, L, C), (B, 1, C), (B, C)),
                     f"pruned output {shape}, expected {(B, L, C)}, {(B, 1, C)} or {(B, C)} for readout 'last'")
            last = pruned[:, -1] if pruned.dim() == 3 else pruned
            _require(_close(last, out[:, -1]), "the pruned output at the last position differs from the full output")
        else:
            _require(shape == (B, L, C), f"pruned output {shape}, expected {(B, L, C)} for readout '{spec.readout}'")
            _require(_close(pruned, out), "the pruned output differs from the full output")
        lp, lf = float(task.loss(pruned, batch)), float(task.loss(out, batch))
        _require(math.isclose(lp, lf, rel_tol=1e-4, abs_tol=1e-5), f"the loss of the pruned output {lp} != {lf}")
    with check("gradients"):
        net.train()
        net.zero_grad(set_to_none=True)
        task.loss(net(x), batch).backward()
        named = [(n, p) for n, p in net.named_parameters() if p.requires_grad]
        _require(bool(named), "the model has no trainable parameters")
        missing = [n for n, p in named if p.grad is None]
        _require(not missing, f"no gradient reaches {', '.join(missing[:3])}")
        grads = [(n, p.grad) for n, p in named if p.grad is not None]  # every one, checked above
        nonfinite = [n for n, g in grads if not bool(torch.isfinite(g).all())]
        _require(not nonfinite, f"non-finite gradient in {', '.join(nonfinite[:3])}")
        _require(any(bool(g.abs().sum() > 0) for _, g in grads), "every gradient is zero")
    with check("fits"):
        _fit(net, task)
    return c.passed


def _fit(net: SeqModel, task: Task) -> None:
    """Full-batch Adam on FIT_N fixed examples until the loss or the metric (the error rate, for
    classification) is below FIT_RATIO of its start; at most FIT_STEPS steps."""
    b = task.sample(FIT_N, _gen(SEEDS[0]))
    opt = torch.optim.Adam(net.parameters(), lr=FIT_LR)
    net.train()
    first, best = (math.nan, math.nan), [math.inf, math.inf]
    for step in range(FIT_STEPS + 1):
        pred = net(b.x)
        loss = task.loss(pred, b)
        v = (float(loss.detach()), float(task.metric(pred.detach(), b)))
        _require(math.isfinite(v[0]), f"the training loss became {v[0]} at step {step}")
        if step == 0:
            first = v
        best = [min(best[0], v[0]), min(best[1], v[1])]
        if any(bi < FIT_RATIO * fi for bi, fi in zip(best, first)) or step == FIT_STEPS:
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    _require(any(bi < FIT_RATIO * fi for bi, fi in zip(best, first)),
             f"training on {FIT_N} fixed examples (Adam, lr {FIT_LR}, {FIT_STEPS} steps) brought the loss from "
             f"{first[0]:.4g} only to {best[0]:.4g} and the metric from {first[1]:.4g} to {best[1]:.4g} "
             f"(needs one below {FIT_RATIO:g} of its start)")


# --- everything -------------------------------------------------------------------------------
def check_all() -> dict[str, dict[str, list[str] | str]]:
    """Every registered task and model with default parameters: {"tasks": {name: passed checks
    or the error line}, "models": {...}}. Never raises for a failed check; the caller decides."""
    out: dict[str, dict[str, list[str] | str]] = {"tasks": {}, "models": {}}
    for name in TASKS.names():
        try:
            out["tasks"][name] = check_task(name)
        except ArchsepError as e:
            out["tasks"][name] = str(e)
    for name in MODELS.names():
        try:
            out["models"][name] = check_model(name)
        except ArchsepError as e:
            out["models"][name] = str(e)
    return out
