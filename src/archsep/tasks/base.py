"""The one abstract task interface every generator implements.

A task is a frozen dataclass of its parameters plus a *task seed* that fixes its hidden
randomness (link directions, positional codes, ...). `sample` draws i.i.d. examples from an
explicit `torch.Generator`, so a seed decides every number.
"""
from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F

from ..errors import ArchsepError


@dataclass(frozen=True)
class TaskSpec:
    """What a model must know to be built for a task."""

    input: Literal["vector", "tokens"]  # float features (B, L, D) or token ids (B, L)
    input_dim: int  # features per position, or vocabulary size
    seq_len: int  # the longest sequence the task produces (N, plus any extra tokens)
    output_dim: int  # 1 for scalar regression, the number of classes otherwise
    readout: Literal["all", "last", "mask"]  # which positions carry targets
    paper_ffn_width: int | None = None  # the first FFN layer's width in the paper (N*d*q for qSTR)


@dataclass
class Batch:
    """x: (B, L, D) float or (B, L) long.  y: (B, L) float for readout 'all',
    (B,) long for 'last', (B, L) long with `mask` (B, L) bool for 'mask'."""

    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor | None = None
    tuples: torch.Tensor | None = None  # what each label was computed from (for tests, diagnostics)

    def to(self, device: torch.device | str) -> "Batch":
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Batch(self.x.to(device), self.y.to(device), move(self.mask), move(self.tuples))

    def __len__(self) -> int:
        return self.x.shape[0]


class Constant:
    """A task's fixed tensor (positional codes, a link's directions, a DFA's table), kept on the
    CPU and copied to each other device once. A copy from host memory at every batch makes a
    GPU's training loop wait for the host at every step (torch's sync debug mode flagged two
    such copies a step in qSTR on a lent H200); the copies are not pickled."""

    def __init__(self, value: torch.Tensor):
        self.value = value
        self._copies: dict[torch.device, torch.Tensor] = {}

    def on(self, device: torch.device) -> torch.Tensor:
        if device == self.value.device:
            return self.value
        if device not in self._copies:
            self._copies[device] = self.value.to(device)
        return self._copies[device]

    def __getstate__(self) -> dict:
        return {"value": self.value, "_copies": {}}


class Task(abc.ABC):
    """Base class. Subclasses are frozen dataclasses whose fields are the task parameters."""

    registry_name: ClassVar[str]
    kind: ClassVar[Literal["regression", "classification"]]

    # --- what a subclass provides -------------------------------------------------------
    @property
    @abc.abstractmethod
    def spec(self) -> TaskSpec: ...

    @abc.abstractmethod
    def sample(self, n: int, generator: torch.Generator) -> Batch:
        """n i.i.d. examples on `generator.device`; every random draw comes from `generator`."""

    def sample_test(self, n: int, generator: torch.Generator) -> Batch:
        """Held-out examples. By default the training distribution; tasks trained on variable
        lengths (paper A) override it to evaluate at exactly length N."""
        return self.sample(n, generator)

    def at_length(self, n: int) -> "Task":
        """This task at length n, for length generalisation (`TrainConfig.eval_lengths`): the
        same task (its parameters and seed) with its length parameter `N` set to n, so that its
        `sample_test` draws every example at exactly that length, as it draws at N: the input
        length of a formal-language task, index lookup's number of symbols, the sequence length
        of a recall task (`spec.seq_len` says the positions). Reuses the task's own check of
        N (an odd length for modular arithmetic, an even one for Dyck: an ArchsepError naming
        N). A task without a field `N`, or whose examples at another N are not the same task
        (hidden randomness drawn for its N, as qSTR's positional codes), raises an
        ArchsepError saying so."""
        name = getattr(self, "registry_name", type(self).__name__)
        if "N" not in {f.name for f in dataclasses.fields(self)}:  # type: ignore[arg-type]
            raise ArchsepError(f"task '{name}' has no length parameter N")
        return dataclasses.replace(self, N=n)  # type: ignore[type-var]

    @property
    def fixed_shapes(self) -> bool:
        """Whether every training batch has the same shape (runs of different seeds can then be
        stacked, and a fixed training set replayed)."""
        return True

    @property
    def metric_name(self) -> str:
        """What `metric` measures, for axis labels: "MSE" or "error" (1 - accuracy)."""
        return "MSE" if self.kind == "regression" else "error"

    @property
    @abc.abstractmethod
    def baseline(self) -> float:
        """The metric of the best input-independent predictor (MSE 1, or 1 - chance accuracy)."""

    # --- loss and metric: one definition per task kind ---------------------------------
    def loss(self, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Training loss: MSE over positions for regression, cross-entropy for classification."""
        p, y = self._select(pred, batch)
        if self.kind == "regression":
            return F.mse_loss(p.squeeze(-1), y)
        return F.cross_entropy(p, y)

    def metric(self, pred: torch.Tensor, batch: Batch) -> torch.Tensor:
        """The error that thresholds are stated in: MSE for regression, 1 - accuracy otherwise."""
        p, y = self._select(pred, batch)
        if self.kind == "regression":
            return F.mse_loss(p.squeeze(-1), y)
        return (p.argmax(-1) != y).float().mean()

    def _select(self, pred: torch.Tensor, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        readout = self.spec.readout
        if readout == "all":
            return pred, batch.y
        if readout == "last":
            return (pred[:, -1] if pred.dim() == 3 else pred), batch.y
        assert batch.mask is not None
        return pred[batch.mask], batch.y[batch.mask]

    # --- trivial baselines (classification) ----------------------------------------------
    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy of each trivial predictor by name, on `n` test examples drawn from
        `generator` (classification tasks only). Always holds "constant", the best constant
        predictor; a task adds the simple input-dependent heuristics that beat it (e.g. Dyck's
        type-blind "depth-counter"). This default, for tasks that define none, is the constant
        alone, taken from `chance_accuracy` (1 - `baseline`) and drawing nothing."""
        if self.kind != "classification":
            name = getattr(self, "registry_name", type(self).__name__)
            raise ArchsepError(f"{name}: trivial_baselines are accuracies, for classification "
                               f"tasks; a regression task's trivial baseline is `baseline` (MSE)")
        return {"constant": 1.0 - float(self.baseline)}

    def extra_tests(self, n: int, generator: torch.Generator) -> dict[str, Batch]:
        """Test sets besides `sample_test`, by name, each of `n` examples from `generator`: a run
        with a test set reports its model's metric on each (`RunResult.extra["tests"]`). E.g.
        Dyck's depth-preserving type swaps, the negatives a type-blind depth counter accepts.
        Default: none."""
        return {}

    def best_trivial(self, n: int, generator: torch.Generator) -> tuple[str, float]:
        """The best of `trivial_baselines(n, generator)`: (name, accuracy); a tie goes to the
        first listed ("constant" before any heuristic)."""
        found = self.trivial_baselines(n, generator)
        name = max(found, key=lambda k: found[k])  # max keeps the first of equal values
        return name, found[name]

    def label_accuracy(self, labels: torch.Tensor, batch: Batch) -> float:
        """Accuracy of hard label predictions, scored by `metric` as a model's are: `labels` is
        (B,) for readout 'last', (B, L) for 'all' and 'mask' (only the targets read count)."""
        logits = F.one_hot(labels.long(), self.spec.output_dim).float()
        return 1.0 - float(self.metric(logits, batch))

    def constant_accuracy(self, batch: Batch) -> float:
        """Accuracy on `batch` of the best constant prediction, its most frequent target label
        (chosen on `batch` itself: optimistic by at most a few standard errors, ~sqrt(2 ln K)
        for K classes)."""
        _, y = self._select(torch.zeros(*batch.y.shape, self.spec.output_dim), batch)
        counts = torch.bincount(y.flatten(), minlength=self.spec.output_dim)
        return float(counts.max()) / max(1, y.numel())

    def params(self) -> dict:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    def describe(self) -> str:
        args = ", ".join(f"{k}={v}" for k, v in self.params().items())
        return f"{self.registry_name}({args})"


class ClassificationTask(Task):
    """A task whose metric is the error rate; its baseline is the best constant guess."""

    kind = "classification"

    @property
    @abc.abstractmethod
    def chance_accuracy(self) -> float:
        """Accuracy of the best input-independent prediction."""

    @property
    def baseline(self) -> float:
        return 1.0 - self.chance_accuracy
