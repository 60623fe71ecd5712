"""Typed run configuration. A run's identity is the hash of its canonical config."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import math
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from .errors import ArchsepError, check
from .models import MODELS, ModelConfig, SeqModel
from .registry import from_params
from .tasks import TASKS, Task

FORMAT_VERSION = 1  # bump when the meaning of a stored result changes
# TrainConfig fields added after format 1: part of a run's identity only when not at their
# default, so every run stored before they existed keeps its id
BAND = 0.5  # TrainConfig.progressive_band's default
_LATER_TRAIN_FIELDS = {"keep_best": False, "test_size": 0, "train_set_size": 0, "probe": False,
                       "heldout": "training", "precision": "fp32",
                       "progressive_band": BAND, "eval_early": False,
                       "patience": 0, "halving_lrs": (), "halving_rungs": (), "eval_lengths": (),
                       "curriculum": ()}
# seed roles of the sets a run draws: with a test set, the held-out set is its validation set
HELD_OUT_ROLE, VALIDATION_ROLE, TEST_ROLE = "test", "validation", "size-test"
EXTRA_TEST_ROLE = "extra-test"  # a task's extra test sets (Task.extra_tests), e.g. Dyck's type swaps
LENGTH_ROLE = "length-test"  # the sets of train.eval_lengths: role "length-test:<n>", one seed per length


@dataclass(frozen=True)
class TrainConfig:
    """Online training: a fresh batch every step; thresholds are on the task metric
    (MSE for regression, error = 1 - accuracy for classification)."""

    lr: float = 1e-3
    weight_decay: float = 0.1
    batch_size: int = 64
    budget: int = 200_000  # samples; a run that has not reached the threshold by then is censored
    threshold: float = 0.7
    eval_every: int = 10  # steps between held-out evaluations: the resolution is eval_every*batch_size
    eval_size: int = 5000  # held-out examples, drawn once from the test seed, same distribution
    # 'every': held-out evaluation every eval_every steps. 'progressive': the same schedule, but a
    # scheduled evaluation is skipped while the mean pre-update loss on the last eval_every fresh
    # training batches (an unbiased risk estimate) is above the threshold by more than
    # progressive_z standard errors (of that mean and of the held-out mean) plus its latest drop.
    eval_mode: Literal["every", "progressive"] = "progressive"
    progressive_z: float = 3.0
    # ... and skips only above threshold * (1 + progressive_band): the held-out metric of the model
    # at one step strays from the window's risk by more than any standard error says (measured on
    # Figure 1b's hovering FFN: docs/sweeps.md, "The first crossing")
    progressive_band: float = BAND
    # 'progressive' only: an evaluation that is not a curve point stops after 500, 1000 or 2000
    # examples once the control-variate estimate of its mean (heldout.screen) is more than
    # screen_z standard errors above the threshold; inf always evaluates the whole set
    screen_z: float = 6.0
    curve_every: int = 10  # while skipping, still evaluate every curve_every-th scheduled point
    diverge_factor: float = 100.0  # held-out metric above factor*baseline (or NaN) = diverged
    stop_at_threshold: bool = True
    # keep the parameters of the best held-out point; with test_size, the result's test_metric is
    # that checkpoint's metric on test_size examples drawn once from the run's own test seed
    keep_best: bool = False
    test_size: int = 0
    # 0: a fresh batch every step (online). n > 0: n examples drawn once, replayed in epochs
    # (reshuffled from the training stream), as in paper B's Figure 2
    train_set_size: int = 0
    probe: bool = False  # record the model's `probe()` (e.g. its W_Q W_K^T) at each curve point
    # also evaluate at the steps 1, 2, 5, 10, 20, 50, ... below eval_every ('every' mode only): a
    # curve drawn on a log axis then starts at the first step, not at eval_every (Figure 2)
    eval_early: bool = False
    # the held-out set: "training" (the training distribution, or length N for tasks trained on
    # variable lengths), or "as-published" (the authors' protocol where it differs: qSTR
    # held-out prompts drawn as simple-qSTR, see tasks/qstr.py)
    heldout: Literal["training", "as-published"] = "training"
    # arithmetic of the training forward pass (held-out and test evaluation stay fp32):
    # "tf32" lets CUDA matmuls use TensorFloat-32 (no effect on CPU); "bf16" runs the forward
    # under bfloat16 autocast (CUDA or CPU), with fp32 weights and optimiser
    precision: Literal["fp32", "tf32", "bf16"] = "fp32"
    # stop on a plateau: after this many full held-out evaluations in a row without a new best
    # (0: never). The run is censored where it stopped (its samples say where)
    patience: int = 0
    # successive halving over a learning-rate grid (empty: off). The runs of one config that
    # differ only in their lr, one per lr of halving_lrs, train side by side; at each rung (a
    # fraction of the step budget) the worse half of the runs still in the race, ranked by best
    # held-out metric (then the samples it took, then grid order: analysis.size.select's rule),
    # stop there, censored ("halved"). The grid is part of the config: a run's result depends on it
    halving_lrs: tuple[float, ...] = ()
    halving_rungs: tuple[float, ...] = ()
    # length generalisation (empty: off): after training, the checkpoint the test metric uses
    # (the best one with keep_best, else the last) is evaluated at each of these lengths, values
    # of the task's length parameter N (`Task.at_length`), on test_size examples (eval_size
    # without a test set) drawn at exactly that length from a seed of its own per length
    # (role "length-test:<n>"); the metric per length is the result's extra["by_length"]. The
    # model is the one trained, built for the task's own N: lengths past its learned positions
    # are refused (RunConfig). Increasing lengths >= 1
    eval_lengths: tuple[int, ...] = ()
    # a length curriculum (empty: off): ((n_1, steps_1), (n_2, steps_2), ...) trains the first
    # steps_1 steps on the task at length n_1 (`Task.at_length`: its training distribution there),
    # the next steps_2 at n_2, and so on, and the rest of the budget at the task's own N. The
    # held-out and test sets stay at N, and the budget counts every step. Lengths the trained
    # model cannot read are refused (RunConfig), as for eval_lengths
    curriculum: tuple[tuple[int, int], ...] = ()
    device: str = "auto"

    def __post_init__(self) -> None:
        from .registry import INF_OK, _coerce

        hints = _train_hints()
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float) and not math.isfinite(v) and not (v > 0 and f.name in INF_OK):
                raise ArchsepError(f"{f.name}: expected a finite number, got {v!r}")
            if typing.get_origin(hints[f.name]) is Literal:  # as a config file's values are checked
                _coerce(f.name, v, hints[f.name])
        check(self.lr > 0, "lr", f"must be > 0, got {self.lr}")
        check(self.weight_decay >= 0, "weight_decay", f"must be >= 0, got {self.weight_decay}")
        check(self.batch_size >= 1, "batch_size", f"must be >= 1, got {self.batch_size}")
        check(self.budget >= self.batch_size, "budget", f"must be >= batch_size={self.batch_size}, got {self.budget}")
        check(self.threshold > 0, "threshold", f"must be > 0, got {self.threshold}")
        check(self.eval_every >= 1, "eval_every", f"must be >= 1, got {self.eval_every}")
        check(self.eval_size >= 1, "eval_size", f"must be >= 1, got {self.eval_size}")
        check(self.progressive_band >= 0, "progressive_band", f"must be >= 0, got {self.progressive_band}")
        check(self.progressive_z >= 0, "progressive_z", f"must be >= 0, got {self.progressive_z}")
        check(self.screen_z >= 0, "screen_z", f"must be >= 0 (inf: never stop early), got {self.screen_z}")
        check(self.curve_every >= 1, "curve_every", f"must be >= 1, got {self.curve_every}")
        check(not self.eval_early or self.eval_mode == "every", "eval_early",
              f"needs eval_mode = 'every', got eval_mode = '{self.eval_mode}'")
        check(self.diverge_factor > 1, "diverge_factor", f"must be > 1, got {self.diverge_factor}")
        check(self.test_size >= 0, "test_size", f"must be >= 0 (0: no test set), got {self.test_size}")
        check(self.train_set_size >= 0, "train_set_size",
              f"must be >= 0 (0: a fresh batch every step), got {self.train_set_size}")
        check(self.train_set_size == 0 or self.train_set_size >= self.batch_size, "train_set_size",
              f"must be >= batch_size={self.batch_size}, got {self.train_set_size}")
        check(self.patience >= 0, "patience", f"must be >= 0 (0: never stop on a plateau), got {self.patience}")
        if self.halving_lrs or self.halving_rungs:
            grid = list(self.halving_lrs)
            check(len(grid) >= 2 and len(set(grid)) == len(grid)
                  and all(isinstance(x, (int, float)) and math.isfinite(x) and x > 0 for x in grid), "halving_lrs",
                  f"must be two or more distinct learning rates > 0, got {grid}")
            check(self.lr in grid, "halving_lrs", f"must contain lr={self.lr}, got {grid}")
            r = list(self.halving_rungs)
            check(bool(r) and all(0 < a < 1 for a in r) and r == sorted(set(r)), "halving_rungs",
                  f"must be increasing fractions of the budget in (0, 1), got {r}")
        lengths = self.eval_lengths
        check(isinstance(lengths, (list, tuple)), "eval_lengths", f"expected a list of lengths, got {lengths!r}")
        object.__setattr__(self, "eval_lengths", tuple(lengths))  # a list and a tuple: one run id
        check(all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in lengths)
              and list(lengths) == sorted(set(lengths)), "eval_lengths",
              f"must be increasing integer lengths >= 1, got {list(lengths)}")
        stages = self.curriculum
        ok = isinstance(stages, (list, tuple)) and all(
            isinstance(st, (list, tuple)) and len(st) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in st) for st in stages)
        check(ok, "curriculum", f"must be a list of [length, steps] pairs of integers >= 1, got {stages!r}")
        object.__setattr__(self, "curriculum", tuple(tuple(st) for st in stages))  # lists and tuples: one run id
        check(not self.curriculum or self.train_set_size == 0, "curriculum",
              f"draws fresh batches at each stage's length; it cannot replay a fixed training set "
              f"(train_set_size = {self.train_set_size})")
        check_device_name(self.device)  # not whether it is here: a run made on a GPU is read anywhere

    def stage_ends(self) -> tuple[int, ...]:
        """The step after which each curriculum stage ends (its steps summed)."""
        return tuple(itertools.accumulate(steps for _, steps in self.curriculum))

    def rung_steps(self) -> tuple[int, ...]:
        """The steps of the halving rungs: each fraction of the step budget, rounded down to an
        evaluation step (a rung reads the held-out metric there), at least the first one."""
        steps = self.budget // self.batch_size
        return tuple(max(self.eval_every, int(f * steps) // self.eval_every * self.eval_every)
                     for f in self.halving_rungs)

    @property
    def resolution(self) -> int:
        return self.eval_every * self.batch_size

    def early_steps(self) -> tuple[int, ...]:
        """The extra evaluation steps of `eval_early`: 1, 2, 5, 10, 20, 50, ... below eval_every."""
        if not self.eval_early:
            return ()
        out, decade = [], 1
        while decade < self.eval_every:
            out += [m * decade for m in (1, 2, 5) if m * decade < self.eval_every]
            decade *= 10
        return tuple(out)


@functools.cache
def _train_hints() -> dict:
    return typing.get_type_hints(TrainConfig)


def check_device_name(name: str) -> None:
    check(isinstance(name, str) and (name in ("auto", "cpu", "cuda") or name.startswith("cuda:")), "device",
          f"unknown value {name!r}; allowed: auto, cpu, cuda")


def resolve_device(name: str) -> torch.device:
    """The device a run trains on here. A config only checks its name (`check_device_name`): a
    store or a jsonl of runs trained on a GPU is read, imported and reported on a machine without
    one; asking to train on "cuda" where there is none is refused here, before anything runs."""
    check_device_name(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ArchsepError(f"device: '{name}' asked for but no CUDA device is available; use --device cpu or auto")
    return torch.device(name)


# the label suffix of an arm measured under the authors' held-out protocol: "TF [as published]"
PROTOCOL_SUFFIX = {"training": "", "as-published": " [as published]"}


def arm_of(label: str, protocol: str) -> str:
    """The arm a curve belongs to: its label without its protocol's suffix. Only the suffix of
    the run's own protocol (`train.heldout`) is removed; a user's "TF [v2]" keeps its brackets."""
    suffix = PROTOCOL_SUFFIX.get(protocol, "")
    return label[: -len(suffix)] if suffix and label.endswith(suffix) else label


@dataclass(frozen=True)
class RunConfig:
    """One training run: a task, a model, training settings and one seed.
    `seed` derives independent seeds for the task instance, the training stream, the model
    initialisation and the test set."""

    task: str
    arch: str
    task_params: dict = field(default_factory=dict)
    model_params: dict = field(default_factory=dict)
    train: TrainConfig = field(default_factory=TrainConfig)
    seed: int = 0
    label: str = ""  # the name plots and tables use for the architecture, e.g. "TF"

    def __post_init__(self) -> None:
        task = self.build_task()  # validate eagerly: a bad config fails before anything runs
        self.model_config()
        check(self.train.heldout == "training" or hasattr(task, "sample_as_published"), "train.heldout",
              f"'as-published' is defined for tasks whose authors' protocol differs (qstr), not for '{self.task}'")
        check(self.train.train_set_size == 0 or task.fixed_shapes, "train.train_set_size",
              f"needs a task whose training examples share one shape; task '{self.task}' draws "
              "variable lengths (set task_params.train_lengths = 'fixed')")
        if self.train.eval_lengths:
            self.length_tasks(task)
        if self.train.curriculum:
            self.curriculum_tasks(task)

    def length_tasks(self, task: Task | None = None) -> dict[int, Task]:
        """{n: the task at length n} for each of `train.eval_lengths`, each checked against the
        model the run trains (built for the task's own N): the task can be drawn at n
        (`Task.at_length`), its inputs there are ids the model embeds (or vectors of its
        width) with the same targets, and the model reads that many positions
        (`ModelConfig.max_length`). Anything else is an ArchsepError naming the field."""
        return self._at_lengths(task or self.build_task(), self.train.eval_lengths, "train.eval_lengths")

    def curriculum_tasks(self, task: Task | None = None) -> list[tuple[int, Task]]:
        """[(the step after which the stage ends, the task at its length)] for each stage of
        `train.curriculum`, each length checked as `length_tasks` checks its lengths."""
        at = self._at_lengths(task or self.build_task(), [n for n, _ in self.train.curriculum], "train.curriculum")
        return [(end, at[n]) for end, (n, _) in zip(self.train.stage_ends(), self.train.curriculum)]

    def _at_lengths(self, task: Task, lengths, where: str) -> dict[int, Task]:
        spec, model = task.spec, self.model_config()
        limit = model.max_length(spec)
        out = {}
        for n in lengths:
            try:
                at = task.at_length(n)
            except ArchsepError as e:
                raise ArchsepError.at(where, f"task '{self.task}' cannot be drawn at length {n}: {e}") from None
            s = at.spec
            check((s.input, s.output_dim, s.readout) == (spec.input, spec.output_dim, spec.readout), where,
                  f"task '{self.task}' at length {n} has other inputs or targets than the trained model reads "
                  f"({s.input}, {s.output_dim} outputs, readout {s.readout}; not {spec.input}, "
                  f"{spec.output_dim}, {spec.readout})")
            if s.input == "tokens":
                check(s.input_dim <= spec.input_dim, where,
                      f"task '{self.task}' at length {n} uses {s.input_dim} token ids, but the model is built for "
                      f"its N with {spec.input_dim} (the extra ids, e.g. index-lookup's query tokens past N, have "
                      "no embedding); use lengths whose inputs the trained model can embed")
            else:
                check(s.input_dim == spec.input_dim, where,
                      f"task '{self.task}' at length {n} has inputs of width {s.input_dim}, the model reads "
                      f"{spec.input_dim}")
            if limit is not None and s.seq_len > limit:
                learned = getattr(model, "positions", None) == "learned"
                why = (" (its learned positions end there; model_params.positions = 'rope', 'sinusoidal' or 'none' "
                       "have no such bound)" if learned else "")
                raise ArchsepError.at(where, f"length {n} gives {s.seq_len} positions, but model '{self.arch}' "
                                             f"built for the task's N = {getattr(task, 'N', '?')} reads at most "
                                             f"{limit}{why}")
            out[n] = at
        return out

    @property
    def arm(self) -> str:
        """The architecture label without its protocol suffix ("TF [as published]" -> "TF")."""
        return arm_of(self.label or self.arch, self.train.heldout)

    # --- seeds -----------------------------------------------------------------------------
    def derived_seed(self, role: str) -> int:
        return derive_seed(self.seed, role)

    # --- builders ------------------------------------------------------------------------
    def build_task(self) -> Task:
        params = {"seed": self.derived_seed("task"), **self.task_params}
        return TASKS.build(self.task, **params)

    def model_config(self) -> ModelConfig:
        return MODELS.build(self.arch, **self.model_params)

    def build_model(self, task: Task) -> SeqModel:
        """The run's model at initialisation, on the CPU: built for `task` from the run's init
        seed (torch's global generator, seeded here), as the engine trains it from step 0."""
        torch.manual_seed(self.derived_seed("init"))
        return self.model_config().build(task.spec)

    # --- identity ------------------------------------------------------------------------
    def canonical(self) -> dict:
        return {
            "format": FORMAT_VERSION,
            "task": TASKS.identity(self.task),
            "task_params": self.build_task().params(),
            "arch": MODELS.identity(self.arch),
            "model_params": self.model_config().params(),
            "train": {k: v for k, v in ((f.name, getattr(self.train, f.name)) for f in dataclasses.fields(self.train))
                      if k != "device" and _LATER_TRAIN_FIELDS.get(k, object()) != v},  # scalars: no deep copy
            "seed": self.seed,
        }

    @functools.cached_property
    def run_id(self) -> str:
        """The run's identity: a hash of its canonical config (computed once per config: a
        config is immutable, and a large sweep asks for every run's id several times)."""
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunConfig":
        d = dict(d)
        train = from_params(TrainConfig, d.pop("train", {}) or {}, "train")
        for key in ("task_params", "model_params"):
            if not isinstance(d.get(key, {}), dict):
                raise ArchsepError(f"{key}: expected a table of parameters, got {d[key]!r}")
        run = from_params(_RunFields, d, "run")
        return cls(train=train, **dataclasses.asdict(run))


@dataclass(frozen=True)
class _RunFields:
    task: str
    arch: str
    task_params: dict = field(default_factory=dict)
    model_params: dict = field(default_factory=dict)
    seed: int = 0
    label: str = ""


def derive_seed(seed: int, role: str) -> int:
    """A 63-bit seed for one role, independent across roles and run seeds."""
    return int.from_bytes(hashlib.sha256(f"archsep:{seed}:{role}".encode()).digest()[:8], "big") >> 1
