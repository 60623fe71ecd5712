"""Even pairs (Delétang et al. 2023, regular): is the number of "ab" and "ba" pairs even?

    x = a b b a b   (ids 0 1 1 0 1, N = 5)  ->  label 0 (pairs ab, ba, ab: three, odd)

Input: k uniform i.i.d. symbols over {a, b} (token ids 0 and 1), k = N >= 2 at test time.
Target: 1 iff the number of adjacent unequal pairs ("ab" or "ba") is even, classified at the
last position. Each such pair is a change of symbol, so the count is even iff the first symbol
equals the last: the task is regular and needs only those two symbols. For k >= 2 the label is
a fair coin (the last symbol is independent of the first), so the chance accuracy is 1/2 and no
simple heuristic beats the constant (any predictor that ignores the first or the last symbol is
right half the time): the only trivial baseline is the constant. A training batch of length 1
(possible with `min_length=1`) has every label 1.

Lengths: `train_lengths`, `min_length`, `sample_length(n, k, generator)` for other lengths:
see `archsep.tasks.formal`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from .base import Batch, TaskSpec
from .formal import BitStringTask
from .registry import TASKS

SYMBOLS = "ab"


@TASKS.register("even-pairs")
@dataclass(frozen=True)
class EvenPairs(BitStringTask):
    N: int = 40  # test length (symbols), >= 2; the longest training length
    train_lengths: Literal["variable", "fixed"] = "variable"
    min_length: int = 1  # shortest training length when variable (clipped to N)
    seed: int = 0  # unused: the task has no hidden randomness

    min_N: ClassVar[int] = 2

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", 2, self.N, 2, "last")

    def encode(self, inputs: torch.Tensor) -> Batch:
        changes = (inputs[:, 1:] != inputs[:, :-1]).sum(1)
        return Batch(inputs, (changes % 2 == 0).long())
