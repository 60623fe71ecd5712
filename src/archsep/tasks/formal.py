"""What the formal-language tasks share (Delétang et al. 2023, "Neural Networks and the Chomsky
Hierarchy"): parity, even-pairs, modular-arithmetic (regular), reverse-string,
stack-manipulation (deterministic context-free), duplicate-string (context-sensitive).

Every one is a classification task on token ids with one length parameter N, the input length
(in tokens) a test example has:
- classification tasks (parity, even-pairs, modular-arithmetic) read the label at the last
  position (readout 'last'), the input being the string itself;
- sequence-to-sequence tasks (reverse-string, duplicate-string, stack-manipulation) append a
  delimiter SEP and then one BLANK token per output symbol, `input SEP BLANK ... BLANK`; the
  targets sit at the BLANK positions (readout 'mask', the mask true there only), so no target
  is ever in the input, even for a bidirectional model. The metric is the error per target
  symbol, pooled over the batch.

Lengths (as `index-lookup`): with `train_lengths="variable"` (the default) each *batch* (one
`sample` call) has one input length k drawn uniformly from the valid lengths in
[min(min_length, N), N] (the benchmark trains on lengths 1..40), so a batch is a plain tensor
with no padding; with `"fixed"` every batch has k = N. `sample_test` (held-out, validation and
test sets) always uses k = N.

Other lengths, for length generalisation: `sample_length(n, k, generator)` draws n examples
at any valid input length k, also above N (the benchmark tests on 41..500). Such a batch is
longer than `spec.seq_len`; `at_length(k)` is the task with N = k, whose `sample_test` draws
at k (what `train.eval_lengths` evaluates a trained run on). A model with learned positions
cannot read past N; rotary, ALiBi, sinusoidal or no positions, and recurrent models, can.
"""
from __future__ import annotations

import abc
from typing import ClassVar

import torch

from ..errors import check
from .base import Batch, ClassificationTask
from .index_lookup import draw_length


class FormalTask(ClassificationTask):
    """Base of the formal-language tasks. A subclass is a frozen dataclass with the fields
    `N`, `train_lengths`, `min_length` and `seed`, and gives `encode` (inputs -> batch) and
    `draw_inputs` (random inputs of one length)."""

    N: int
    train_lengths: str
    min_length: int
    seed: int

    length_step: ClassVar[int] = 1  # valid input lengths: 1, 1 + step, 1 + 2 step, ...
    min_N: ClassVar[int] = 1  # the shortest test length at which the labels vary

    def __post_init__(self) -> None:
        check(self.N >= self.min_N and self.valid_length(self.N), "N",
              f"must be {self.lengths_text()} >= {self.min_N}, got {self.N}")
        check(self.train_lengths in ("variable", "fixed"), "train_lengths",
              f"must be 'variable' or 'fixed', got {self.train_lengths!r}")
        check(self.min_length >= 1, "min_length", f"must be >= 1, got {self.min_length}")

    # --- lengths --------------------------------------------------------------------------
    def valid_length(self, k: int) -> bool:
        return k >= 1 and (k - 1) % self.length_step == 0

    def lengths_text(self) -> str:
        return "an odd integer" if self.length_step == 2 else "an integer"

    @property
    def shortest_train_length(self) -> int:
        """min(min_length, N), rounded up to a valid length."""
        lo = min(self.min_length, self.N)
        return lo + (-(lo - 1)) % self.length_step

    @property
    def fixed_shapes(self) -> bool:
        return self.train_lengths == "fixed"

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        if self.train_lengths == "fixed":
            return self.sample_length(n, self.N, generator)
        k = draw_length(self.shortest_train_length, self.N, generator, self.length_step)
        return self.sample_length(n, k, generator)

    def sample_test(self, n: int, generator: torch.Generator) -> Batch:
        return self.sample_length(n, self.N, generator)

    def sample_length(self, n: int, k: int, generator: torch.Generator) -> Batch:
        """n examples with input length k, any valid k (k > N included: see the module doc)."""
        check(isinstance(k, int) and self.valid_length(k), "k", f"must be {self.lengths_text()} >= 1, got {k}")
        return self.encode(self.draw_inputs(n, k, generator))

    # --- what a task gives ------------------------------------------------------------------
    @abc.abstractmethod
    def draw_inputs(self, n: int, k: int, generator: torch.Generator) -> torch.Tensor:
        """(n, k) random input token ids (the string before any delimiter), from `generator`."""

    @abc.abstractmethod
    def encode(self, inputs: torch.Tensor) -> Batch:
        """The batch of given (n, k) input strings: x, the labels (and mask) they determine."""


class BitStringTask(FormalTask):
    """A formal task on uniform i.i.d. bit strings (token ids 0 and 1) whose every target bit is
    a fair coin: parity, even pairs, reverse and duplicate string."""

    @property
    def chance_accuracy(self) -> float:
        return 0.5

    def draw_inputs(self, n: int, k: int, generator: torch.Generator) -> torch.Tensor:
        return torch.randint(0, 2, (n, k), generator=generator, device=generator.device)


def seq2seq_batch(inputs: torch.Tensor, targets: torch.Tensor, sep: int, blank: int,
                  target_mask: torch.Tensor | None = None) -> Batch:
    """x = inputs SEP BLANK*M for (n, k) inputs and (n, M) targets; y holds the targets at the M
    BLANK positions (0 elsewhere) and the mask is true exactly there (or where `target_mask`,
    (n, M) bool, says among them)."""
    n, k = inputs.shape
    M = targets.shape[1]
    dev = inputs.device
    x = torch.cat([inputs, torch.full((n, 1), sep, dtype=torch.long, device=dev),
                   torch.full((n, M), blank, dtype=torch.long, device=dev)], dim=1)
    y = torch.cat([torch.zeros(n, k + 1, dtype=torch.long, device=dev), targets.long()], dim=1)
    if target_mask is None:
        target_mask = torch.ones(n, M, dtype=torch.bool, device=dev)
    mask = torch.cat([torch.zeros(n, k + 1, dtype=torch.bool, device=dev), target_mask], dim=1)
    return Batch(x, y, mask)


def bit_majority(bits: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """(n, k) ids -> (n,) the more frequent of the bits 0 and 1 among the positions where
    `valid` (all by default; other ids never count), 0 on a tie."""
    valid = torch.ones_like(bits, dtype=torch.bool) if valid is None else valid
    ones = ((bits == 1) & valid).sum(1)
    zeros = ((bits == 0) & valid).sum(1)
    return (ones > zeros).long()
