"""Parity (Delétang et al. 2023, regular): the parity of the number of 1s in a binary string.

    x = 1 0 1 1 0   (ids 1 0 1 1 0, N = 5)  ->  label 1 (three 1s: odd)

Input: k uniform i.i.d. bits (token ids 0 and 1), k = N at test time. Target: (number of 1s)
mod 2, classified at the last position. The label is a fair coin for every k >= 1 (the last
bit alone flips it), so the chance accuracy is 1/2; no input-independent or simple
input-dependent predictor does better (any function of fewer than all k bits is right half
the time), so the only trivial baseline is the constant.

Lengths: `train_lengths`, `min_length`, `sample_length(n, k, generator)` for other lengths:
see `archsep.tasks.formal`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from .base import Batch, TaskSpec
from .formal import BitStringTask
from .registry import TASKS


@TASKS.register("parity")
@dataclass(frozen=True)
class Parity(BitStringTask):
    N: int = 40  # test length (bits); the longest training length
    train_lengths: Literal["variable", "fixed"] = "variable"
    min_length: int = 1  # shortest training length when variable (clipped to N)
    seed: int = 0  # unused: the task has no hidden randomness

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", 2, self.N, 2, "last")

    def encode(self, inputs: torch.Tensor) -> Batch:
        return Batch(inputs, inputs.sum(1) % 2)
