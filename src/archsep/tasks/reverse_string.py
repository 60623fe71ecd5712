"""Reverse string (Delétang et al. 2023, deterministic context-free): output the input reversed.

    x = 1 1 0 SEP _ _ _   (ids 1 1 0 2 3 3 3, N = 3)  ->  targets 0 1 1 (at the three _ positions)

Input: k uniform i.i.d. bits w (token ids 0 and 1; k = N at test time), then SEP (id 2) and k
BLANK tokens (id 3): length 2k + 1. Targets: w reversed, one bit at each BLANK position
(readout 'mask'; the mask is false on w and SEP), scored per bit. Every target bit is a fair
coin, so the chance accuracy is 1/2.

Trivial baselines (`trivial_baselines`, on `sample_test` at length N): the constant (1/2);
"copy-input", output position j copies input position j (w_j where w_{k+1-j} is due): right
where the two bits agree, so 1/2 for even N and 1/2 + 1/(2N) for odd N (the middle bit is its
own mirror); and "input-majority", the more frequent bit of w at every position (0 on a tie),
which a bag-of-tokens model computes: 1/2 + E|K - N/2| / N for K ~ Bin(N, 1/2), about
1/2 + 1/sqrt(2 pi N): 56.3% at N = 40, 54.0% at N = 100.

Lengths: `train_lengths`, `min_length`, `sample_length(n, k, generator)` for other lengths:
see `archsep.tasks.formal`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from .base import Batch, TaskSpec
from .formal import BitStringTask, bit_majority, seq2seq_batch
from .registry import TASKS

SEP, BLANK = 2, 3


@TASKS.register("reverse-string")
@dataclass(frozen=True)
class ReverseString(BitStringTask):
    N: int = 40  # test length of the input string; the longest training length
    train_lengths: Literal["variable", "fixed"] = "variable"
    min_length: int = 1  # shortest training length when variable (clipped to N)
    seed: int = 0  # unused: the task has no hidden randomness

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", 4, 2 * self.N + 1, 2, "mask")

    def encode(self, inputs: torch.Tensor) -> Batch:
        return seq2seq_batch(inputs, inputs.flip(1), SEP, BLANK)

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy per target bit on n `sample_test` examples of "constant" (the most frequent
        target), "copy-input" and "input-majority" (see the module doc)."""
        b = self.sample_test(n, generator)
        k = self.N
        w = b.x[:, :k]
        pad = torch.zeros(n, k + 1, dtype=torch.long, device=w.device)
        copy = torch.cat([pad, w], dim=1)
        majority = torch.cat([pad, bit_majority(w).unsqueeze(1).expand(n, k)], dim=1)
        return {"constant": self.constant_accuracy(b),
                "copy-input": self.label_accuracy(copy, b),
                "input-majority": self.label_accuracy(majority, b)}
