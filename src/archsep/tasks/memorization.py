"""Memorization (MAD: Poli et al. 2024; mad-lab's generator): a fixed key -> value map, drawn once
from the task seed, learned across training (nothing in an example tells the value).

    x = 2 7 0 7 2 7 1 7  ->  labels 6 3 6 4 at 1 3 5 7

(N = 8, vocab = 8, seed 0, whose map is 0 -> 3, 1 -> 4, 2 -> 6; the insert token is 7.)

Vocabulary `vocab` V as in mad-lab: the insert token is V-1; of the other n = V-1 ids, keys are
[0, n//2) and values [n//2, n) (127 keys and 128 values at the default V = 256). The map is a
random injection of the keys into the values (mad-lab zips shuffled keys with shuffled values),
drawn from `seed` alone (`value_of`), so every example of a task instance uses the same map and
a fresh seed is a fresh map. An example of length N (even) is N/2 keys, each uniform (with
replacement) and followed by the insert token: `k_1 INS k_2 INS ...`; the target at each insert
token is the value of the key before it (readout "mask"). Values never appear in the input.

The keys are uniform and the map injective, so the labels are uniform over n//2 values: chance
accuracy 1/(n//2) (1/127 at the defaults N = 32, V = 256). No input heuristic beats the constant
(a key says nothing about its value until the map is learnt), so `trivial_baselines` is the
constant alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from ..errors import check
from .base import Batch, ClassificationTask, Constant, TaskSpec
from .registry import TASKS


@TASKS.register("memorization")
@dataclass(frozen=True)
class Memorization(ClassificationTask):
    N: int = 32  # sequence length (even): N/2 keys, each followed by the insert token
    vocab: int = 256  # mad-lab's vocab_size: keys, values and the insert token
    seed: int = 0  # draws the key -> value map

    def __post_init__(self) -> None:
        check(self.N >= 2 and self.N % 2 == 0, "N", f"must be an even integer >= 2, got {self.N}")
        check(self.vocab >= 5, "vocab", f"must be >= 5 (2 keys, 2 values, the insert token), got {self.vocab}")

    @property
    def n_keys(self) -> int:
        return (self.vocab - 1) // 2

    @property
    def insert(self) -> int:
        return self.vocab - 1

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", self.vocab, self.N, self.vocab, "mask")

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / self.n_keys

    def value_of(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """(n_keys,) the value id of each key: a random injection drawn from `seed` alone."""
        g = torch.Generator().manual_seed(self.seed)
        n_values = self.vocab - 1 - self.n_keys
        return (self.n_keys + torch.randperm(n_values, generator=g)[:self.n_keys]).to(device)

    @cached_property
    def _values(self) -> Constant:  # drawn once, not at every batch; copied to a GPU once
        return Constant(self.value_of())

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        dev = generator.device
        keys = torch.randint(0, self.n_keys, (n, self.N // 2), generator=generator, device=dev)
        x = torch.full((n, self.N), self.insert, dtype=torch.long, device=dev)
        x[:, 0::2] = keys
        y = torch.zeros(n, self.N, dtype=torch.long, device=dev)
        y[:, 1::2] = self._values.on(dev)[keys]
        mask = torch.zeros(n, self.N, dtype=torch.bool, device=dev)
        mask[:, 1::2] = True
        return Batch(x, y, mask)
