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
- causal / recurrent / state-size: the recurrent contract (`archsep.models.base.SeqModel`), in
  float64 before pruning (see `archsep.testing.recurrent`): for a causal model (every model with a
  step form, and those whose `is_causal()` says so) later inputs do not change earlier outputs;
  for a model with a step form, `recurrent(x)` (the step form over the sequence, ignoring
  pruning) equals `forward(x)`, values and parameter gradients, and carries `state_size` floats;
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

Check names of `check_model` carry the task, e.g. "fits[qstr]". `check_step_form` runs only
'builds' and the recurrent contract's checks (cheap: no training), e.g. on a longer task. Some registered models need
parameters for the checks (`CHECK_PARAMS`, `TOKEN_PARAMS`), merged under the caller's own.
"""

from __future__ import annotations

from typing import Any

import torch

from ..errors import ArchsepError
from ..models import MODELS
from ..models.base import ModelConfig
from ..tasks import TASKS
from ..tasks.base import Task, TaskSpec
from .common import SEEDS, _Checks
from .models import FIT_LR, FIT_N, FIT_RATIO, FIT_STEPS, model_checks
from .tasks import BASELINE_FLOOR, BASELINE_N, TRIVIAL_N, task_checks

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

__all__ = ["BASELINE_FLOOR", "BASELINE_N", "CHECK_PARAMS", "DEFAULT_TASKS", "FIT_LR", "FIT_N", "FIT_RATIO",
           "FIT_STEPS", "SEEDS", "TOKEN_PARAMS", "TRIVIAL_N", "check_all", "check_model", "check_step_form",
           "check_task"]


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


def check_task(task: str | Task, **params: Any) -> list[str]:
    """Check a registered task (by name, built with `params`) or a Task instance against the
    task contract (see the module docstring). Returns the names of the checks, all passed;
    raises ArchsepError with one line naming the task and the first failed check."""
    name, inst = _resolve_task(task, params)
    what = f"task '{name}'" + (f" ({', '.join(f'{k}={v}' for k, v in params.items())})" if params else "")
    c = _Checks(what)
    with torch.random.fork_rng(devices=[]):
        task_checks(c, name, lambda: inst if inst is not None else TASKS.build(name, **params))
    return c.passed


# --- models -----------------------------------------------------------------------------------
def _resolve_model(model: str | ModelConfig, params: dict[str, Any], spec: TaskSpec) -> ModelConfig:
    if isinstance(model, ModelConfig):
        if params:
            raise ArchsepError("check_model: parameters are for an architecture name, not a config instance")
        return model
    if not isinstance(model, str):
        raise ArchsepError(f"check_model: expected an architecture name or a ModelConfig, got {model!r}")
    MODELS.get(model)  # an unknown name: the registry's one-line error
    merged = {**CHECK_PARAMS.get(model, {}), **(TOKEN_PARAMS.get(model, {}) if spec.input == "tokens" else {}),
              **params}
    return MODELS.build(model, **merged)


def _tasks(task: str | Task | None, task_params: dict[str, Any] | None, who: str) -> list[Task]:
    if task is None:
        if task_params:
            raise ArchsepError(f"{who}: task_params given without a task")
        return [TASKS.build(n, **p) for n, p in DEFAULT_TASKS]
    if isinstance(task, Task):
        if task_params:
            raise ArchsepError(f"{who}: task_params are for a task name, not an instance")
        return [task]
    return [TASKS.build(task, **(task_params or {}))]  # unknown names and keys: one-line errors


def _run_model_checks(model: str | ModelConfig, task: str | Task | None, task_params: dict[str, Any] | None,
                      params: dict[str, Any], who: str, only_recurrent: bool) -> list[str]:
    if isinstance(model, str):
        MODELS.get(model)  # an unknown name: the registry's one-line error, not a failed check
    tasks = _tasks(task, task_params, who)
    mname = model if isinstance(model, str) else getattr(model, "registry_name", type(model).__name__)
    shown = "" if not params else f" ({', '.join(f'{k}={v}' for k, v in params.items())})"
    passed: list[str] = []
    with torch.random.fork_rng(devices=[]):
        for t in tasks:
            tname = getattr(t, "registry_name", type(t).__name__)
            c = _Checks(f"model '{mname}'{shown} on task '{tname}'")
            model_checks(c, tname, mname, lambda spec: _resolve_model(model, params, spec), t, only_recurrent)
            passed += c.passed
    return passed


def check_model(model: str | ModelConfig, task: str | Task | None = None, task_params: dict[str, Any] | None = None,
                **params: Any) -> list[str]:
    """Check a registered architecture (by name, built with `params` over `CHECK_PARAMS`) or a
    ModelConfig instance against the model contract (see the module docstring), on `task`
    (a name built with `task_params`, or a Task instance) or by default on each of
    `DEFAULT_TASKS`. Returns the names of the checks, all passed, as "check[task]"; raises
    ArchsepError with one line naming the model, the task and the first failed check."""
    return _run_model_checks(model, task, task_params, params, "check_model", only_recurrent=False)


def check_step_form(model: str | ModelConfig, task: str | Task | None = None,
                    task_params: dict[str, Any] | None = None, **params: Any) -> list[str]:
    """`check_model`'s 'builds' and recurrent-contract checks alone (causal, recurrent,
    state-size; none for a model without a step form that is not causal), with the same
    arguments and errors: cheap enough to run on longer tasks and many configurations."""
    return _run_model_checks(model, task, task_params, params, "check_step_form", only_recurrent=True)


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
