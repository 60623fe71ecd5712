"""Modular arithmetic without brackets (Delétang et al. 2023, regular), over Z_5 by default.

    x = 1 + 2 * 3 - 4   (ids 1 5 2 7 3 6 4, N = 7)  ->  label 3 (1 + 6 - 4 = 3 mod 5)

Input: an expression of odd length k (k = N at test time): (k+1)/2 operands uniform over
{0..modulus-1} (token ids 0..modulus-1) alternating with (k-1)/2 operators uniform over
+ - * (ids modulus, modulus+1, modulus+2). Target: its value mod `modulus`, classified at the
last position. Evaluation uses the **standard precedence**, as the benchmark does: products
first, then the sums and differences from left to right (`1 - 2 * 3` is 1 - 6; `a - b - c` is
(a - b) - c). Reading left to right, the state (sum of the finished terms, current signed
product term) has modulus^2 values, so the language of each label is regular.

Labels are not uniform: a product with a 0 factor is 0, so 0 is the most frequent value (at
N = 3, `a + b` and `a - b` are uniform and `a * b` is 0 with probability 9/25, so
P(0) = 19/75 = 0.253). `chance_accuracy` is the exact probability of the most frequent value at
length N, computed by propagating the distribution of that state over the operators and
operands (`value_distribution`); it falls to 1/modulus as N grows: for modulus 5, 0.217 at
N = 7, 0.204 at N = 11, 0.2000 (to four digits) from N = 23 on, so at the default N = 39.
No simple heuristic is known to beat it (the value of any part of the expression is mixed by
the uniform operands around it), so the only trivial baseline is the constant.

Lengths: `train_lengths`, `min_length` (rounded up to odd), `sample_length(n, k, generator)`
for other (odd) lengths: see `archsep.tasks.formal`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch

from ..errors import check
from .base import Batch, TaskSpec
from .formal import FormalTask
from .registry import TASKS

OPERATORS = "+-*"  # token id = modulus + index


@functools.lru_cache(maxsize=None)
def value_distribution(modulus: int, k: int) -> tuple[float, ...]:
    """P(value = v) for v in 0..modulus-1, for a uniform expression of odd length k: the exact
    distribution, propagated over the state (finished sum, signed current term)."""
    m = modulus
    p = [[0.0] * m for _ in range(m)]  # p[a][t]: the finished terms sum to a, the current term is t
    for x in range(m):
        p[0][x] += 1.0 / m
    w = 1.0 / (3 * m)  # each operator with each operand
    for _ in range((k - 1) // 2):
        q = [[0.0] * m for _ in range(m)]
        for a in range(m):
            for t in range(m):
                if p[a][t] == 0.0:
                    continue
                for x in range(m):
                    q[(a + t) % m][x] += p[a][t] * w  # + x
                    q[(a + t) % m][(-x) % m] += p[a][t] * w  # - x
                    q[a][(t * x) % m] += p[a][t] * w  # * x
        p = q
    out = [0.0] * m
    for a in range(m):
        for t in range(m):
            out[(a + t) % m] += p[a][t]
    return tuple(out)


@TASKS.register("modular-arithmetic")
@dataclass(frozen=True)
class ModularArithmetic(FormalTask):
    N: int = 39  # test length (tokens), odd; the longest training length
    modulus: int = 5
    train_lengths: Literal["variable", "fixed"] = "variable"
    min_length: int = 1  # shortest training length when variable (clipped to N, rounded up to odd)
    seed: int = 0  # unused: the task has no hidden randomness

    length_step: ClassVar[int] = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.modulus >= 2, "modulus", f"must be >= 2, got {self.modulus}")

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", self.modulus + len(OPERATORS), self.N, self.modulus, "last")

    @property
    def chance_accuracy(self) -> float:
        return max(value_distribution(self.modulus, self.N))

    def draw_inputs(self, n: int, k: int, generator: torch.Generator) -> torch.Tensor:
        dev = generator.device
        x = torch.empty(n, k, dtype=torch.long, device=dev)
        x[:, 0::2] = torch.randint(0, self.modulus, (n, (k + 1) // 2), generator=generator, device=dev)
        x[:, 1::2] = self.modulus + torch.randint(0, len(OPERATORS), (n, k // 2), generator=generator, device=dev)
        return x

    def evaluate(self, inputs: torch.Tensor) -> torch.Tensor:
        """(n, k) expressions -> (n,) their values, standard precedence, mod `modulus`."""
        m = self.modulus
        total = torch.zeros(inputs.shape[0], dtype=torch.long, device=inputs.device)
        term = inputs[:, 0].clone()  # the current product term, with its sign
        for i in range(1, inputs.shape[1], 2):
            op, x = inputs[:, i] - m, inputs[:, i + 1]
            starts = op != OPERATORS.index("*")  # + or - closes the term and starts a new one
            total = torch.where(starts, (total + term) % m, total)
            term = torch.where(op == OPERATORS.index("+"), x,
                               torch.where(op == OPERATORS.index("-"), (-x) % m, (term * x) % m))
        return (total + term) % m

    def encode(self, inputs: torch.Tensor) -> Batch:
        return Batch(inputs, self.evaluate(inputs))


def decode(x: torch.Tensor, modulus: int = 5) -> str:
    """Token ids -> the expression as text, e.g. '1 + 2 * 3'."""
    return " ".join(str(int(t)) if int(t) < modulus else OPERATORS[int(t) - modulus] for t in x)
