"""Noisy in-context recall (MAD: Poli et al. 2024; mad-lab's generator with noise), in mad-lab's
evaluation format.

    x = 2 9 20 17 5 11 2 9 28 15 31 5  ->  label 11

(N = 12, vocab = 32, noise_vocab = 16: the pairs 2:9, noise 20 17, 5:11, 2:9, noise 28 15, the
query marker 31, the probe key 5.)

In-context recall (`in-context-recall`, which states the layout and the probe) with noise: each
of the m = N/2 - 1 pair slots but one (uniform, so at least one pair is shown) is, with
probability `frac_noise`, two noise tokens instead of a pair, each uniform over `noise_vocab`
noise ids (with replacement). As in mad-lab the noise ids are taken out of `vocab`: the marker is
V-1, the noise ids the `noise_vocab` ids below it, and the n = V-1-noise_vocab ids below those
are the keys [0, n//2) and values [n//2, n) (mad-lab's defaults, used here: V = 32, 16 noise ids,
7 keys, 8 values, frac_noise = 0.2). The probe is uniform over the distinct keys of the pairs
shown (never from noise). mad-lab picks its guaranteed pair among N/2 slots, one more than it
fills, so it is sometimes none; here it is always one of the m slots.

Chance accuracy 1/(n - n//2) (1/8 at the defaults). Trivial baselines as for in-context recall:
"value-mode" (31% at the defaults, on 4096 test examples) and "last-value" (the latest value id:
the last pair shown, 25%); the noise ids are never values, so neither heuristic is misled by it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import check
from .in_context_recall import InContextRecall
from .registry import TASKS


@TASKS.register("noisy-recall")
@dataclass(frozen=True)
class NoisyRecall(InContextRecall):
    N: int = 128
    vocab: int = 32  # keys, values, noise ids and the marker
    seed: int = 0  # unused: the task has no hidden randomness
    noise_vocab: int = 16
    frac_noise: float = 0.2  # probability that a pair slot holds two noise tokens

    def __post_init__(self) -> None:
        check(self.noise_vocab >= 1, "noise_vocab", f"must be >= 1, got {self.noise_vocab}")
        check(math.isfinite(self.frac_noise) and 0 <= self.frac_noise < 1, "frac_noise",
              f"must be in [0, 1), got {self.frac_noise}")
        super().__post_init__()

    def noise(self) -> tuple[int, float]:
        return self.noise_vocab, self.frac_noise
