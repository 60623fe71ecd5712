"""String equality (paper A, SPEC 1.4): `a [SEP] b`, label 1 iff a == b.

    x = 0 1 1 SEP 0 1 1   (ids 0 1 1 2 0 1 1, N = 6, eq-random)  ->  label 1 (a == b)

N is the combined length |a| + |b| (even); the input has N + 1 tokens (symbols 0..vocab-1,
SEP = vocab), classified at the last position. Labels are i.i.d. fair coins: chance accuracy
1/2, best constant error 0.5.
- `eq-random`: alphabet {0,1}; a negative's b is uniform over the strings other than a
  (b drawn independently, redrawn when it happens to equal a, so every label is exact).
- `eq-one`: alphabet 1024; a negative's b differs from a in exactly one uniform position,
  which gets a uniform different symbol.

Lengths: with `train_lengths="variable"` each batch has one length drawn uniformly over the
even lengths in [N/10, N] (N/10 rounded up to even, at least 2); `sample_test` (held-out,
validation and test sets) always uses length N.

Trivial baselines (`trivial_baselines`): the constant (1/2), and "symbol-counts": predict equal
iff a and b hold every symbol equally often (order ignored; what a bag-of-tokens model can
compute). It accepts every positive. On eq-random it rejects a negative unless b happens to
have a's number of 1s (probability about 1/sqrt(pi N/2)), so it scores about 94% at N = 50,
96% at N = 100 and 97% at N = 200. On eq-one a negative changes one symbol into another, so
the counts always differ and it is exact (100%): eq-one does not tell order-aware models from
counting ones. `extra_tests` adds "same-counts", negatives whose b holds a's symbols in another
order (`sample_same_counts`): counting scores 0% there, so "equality above its baselines" is
read on them too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch

from ..errors import check
from .base import Batch, ClassificationTask, TaskSpec
from .index_lookup import draw_length
from .registry import TASKS

ALPHABETS = {"eq-random": 2, "eq-one": 1024}


@TASKS.register("equality")
@dataclass(frozen=True)
class Equality(ClassificationTask):
    N: int = 100  # |a| + |b| at evaluation, even
    variant: Literal["eq-random", "eq-one"] = "eq-random"
    train_lengths: Literal["variable", "fixed"] = "variable"
    seed: int = 0  # unused: the task has no hidden randomness

    def __post_init__(self) -> None:
        check(self.N >= 2 and self.N % 2 == 0, "N", f"must be an even integer >= 2, got {self.N}")
        check(self.variant in ALPHABETS, "variant", f"must be one of {sorted(ALPHABETS)}, got {self.variant!r}")
        check(self.train_lengths in ("variable", "fixed"), "train_lengths",
              f"must be 'variable' or 'fixed', got {self.train_lengths!r}")

    @property
    def vocab(self) -> int:
        return ALPHABETS[self.variant]

    @property
    def sep(self) -> int:
        return self.vocab

    @property
    def min_length(self) -> int:
        lo = max(2, math.ceil(self.N / 10))
        return lo + lo % 2

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", self.vocab + 1, self.N + 1, 2, "last")

    @property
    def chance_accuracy(self) -> float:
        return 0.5

    @property
    def fixed_shapes(self) -> bool:
        return self.train_lengths == "fixed"

    def symbol_counts_equal(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 2m+1) inputs `a SEP b` -> (B,) bool: a and b hold every symbol equally often."""
        m = (x.shape[1] - 1) // 2
        a, b = x[:, :m], x[:, m + 1:]
        counts = torch.zeros(x.shape[0], self.vocab, dtype=torch.long, device=x.device)
        counts.scatter_add_(1, a, torch.ones_like(a))
        counts.scatter_add_(1, b, -torch.ones_like(b))
        return (counts == 0).all(1)

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy on n `sample_test` examples (length N) of "constant" (the most frequent
        label) and "symbol-counts" (`symbol_counts_equal`)."""
        b = self.sample_test(n, generator)
        return {"constant": self.constant_accuracy(b),
                "symbol-counts": self.label_accuracy(self.symbol_counts_equal(b.x).long(), b)}

    def extra_tests(self, n: int, generator: torch.Generator) -> dict[str, Batch]:
        """"same-counts": accuracy on them says whether a model reads the order at all (counting
        symbols scores 0% there, and 96-97% on the ordinary test set of eq-random at N = 100-200)."""
        return {"same-counts": self.sample_same_counts(n, generator)} if self.N >= 4 else {}

    def sample_same_counts(self, n: int, generator: torch.Generator) -> Batch:
        """n negatives (label 0) at length N whose b holds every symbol as often as a does, so
        `symbol_counts_equal` accepts each one: on eq-random b is a uniform shuffle of a, on
        eq-one a with two positions of different symbols swapped (the least change that keeps
        the counts). A drawn `a` with no such b (one symbol throughout) and a shuffle that gives
        a back are drawn again. A separate test set, not part of `sample`'s stream. Needs N >= 4
        (at N = 2, a and b are one symbol each: no other order exists)."""
        check(self.N >= 4, "N", f"same-counts negatives need N >= 4 (two symbols to reorder), got {self.N}")
        dev = generator.device
        m = self.N // 2
        a = torch.randint(0, self.vocab, (n, m), generator=generator, device=dev)
        b = torch.empty_like(a)
        todo = torch.arange(n, device=dev)
        while len(todo):
            k = len(todo)
            aa = a[todo]
            if self.variant == "eq-one":  # swap positions i and j, j drawn among those with another symbol
                i = torch.randint(0, m, (k, 1), generator=generator, device=dev)
                other = aa != aa.gather(1, i)  # (k, m)
                pick = torch.rand(k, m, generator=generator, device=dev).masked_fill(~other, -1.0)
                j = pick.argmax(1, keepdim=True)
                bb = aa.scatter(1, i, aa.gather(1, j)).scatter(1, j, aa.gather(1, i))
            else:
                perm = torch.rand(k, m, generator=generator, device=dev).argsort(1)
                bb = aa.gather(1, perm)
            b[todo] = bb
            again = (bb == aa).all(1)  # no other symbol to move (eq-one), or the shuffle gave a back
            redraw = todo[again & (aa == aa[:, :1]).all(1)]  # a single symbol throughout: a new a
            if len(redraw):
                a[redraw] = torch.randint(0, self.vocab, (len(redraw), m), generator=generator, device=dev)
            todo = todo[again]
        sep = torch.full((n, 1), self.sep, dtype=torch.long, device=dev)
        return Batch(torch.cat([a, sep, b], 1), torch.zeros(n, dtype=torch.long, device=dev))

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        if self.train_lengths == "fixed":
            return self.sample_length(n, self.N, generator)
        return self.sample_length(n, draw_length(self.min_length, self.N, generator, step=2), generator)

    def sample_test(self, n: int, generator: torch.Generator) -> Batch:
        return self.sample_length(n, self.N, generator)

    def sample_length(self, n: int, L: int, generator: torch.Generator) -> Batch:
        check(L >= 2 and L % 2 == 0 and L <= self.N, "L", f"must be even in [2, N={self.N}], got {L}")
        dev = generator.device
        m = L // 2
        a = torch.randint(0, self.vocab, (n, m), generator=generator, device=dev)
        y = torch.randint(0, 2, (n,), generator=generator, device=dev)
        b = a.clone()
        neg = (y == 0).nonzero().squeeze(1)
        if len(neg):
            b[neg] = self.negative(a[neg], generator)
        sep = torch.full((n, 1), self.sep, dtype=torch.long, device=dev)
        x = torch.cat([a, sep, b], dim=1)
        return Batch(x, (a == b).all(1).long())

    def negative(self, a: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        dev = generator.device
        n, m = a.shape
        if self.variant == "eq-one":
            pos = torch.randint(0, m, (n, 1), generator=generator, device=dev)
            shift = torch.randint(1, self.vocab, (n, 1), generator=generator, device=dev)
            new = (a.gather(1, pos) + shift) % self.vocab  # uniform over the other symbols
            return a.scatter(1, pos, new)
        b = torch.randint(0, self.vocab, (n, m), generator=generator, device=dev)
        same = (a == b).all(1).nonzero().squeeze(1)
        if len(same):
            b[same] = self.negative(a[same], generator)
        return b
