"""Selective copying (MAD: Poli et al. 2024; mad-lab's generator; the task of Jing et al. 2019 and
the Mamba paper): copy the non-blank tokens of a sequence, in order, after a copy marker.

    x = 14 5 14 14 2 14 9 14 15 14 14 14  ->  labels 5 2 9 at 9 10 11

(N = 12, vocab = 16, tokens = 3: the data tokens 5 2 9 among blanks 14, the copy marker 15, three
answer slots.)

Vocabulary `vocab` V as in mad-lab: the copy marker is V-1, the blank V-2, the data ids
[0, V-2). An example of length N with T = `tokens` data tokens is
    region of R = N - T - 1 positions, MARK, BLANK x T
where T positions of the region, uniform without replacement, hold data tokens (uniform over
the data ids, with replacement) and the rest blanks. Answer slot j (the j-th position after the
marker) is labelled with the j-th data token of the region (readout "mask"); the answer slots
hold blanks, so no label is in the input. Requires R >= T + 1 (mad-lab: N > 2T + 1).

Where this differs from mad-lab: mad-lab inserts each blank before a uniformly chosen data
token, so its last data token always sits right before the marker; here the data positions are
a uniform T-subset of the region.

Labels are uniform over the V-2 data ids: chance accuracy 1/(V-2) (1/14 at the defaults N = 256,
V = 16, tokens = 16). Trivial baseline (`trivial_baselines`): besides the constant,
"token-mode" (the region's most frequent data id at every slot: 20% at the defaults, on 4096
test examples).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check
from .base import Batch, ClassificationTask, TaskSpec
from .registry import TASKS
from .token_heuristics import token_mode


@TASKS.register("selective-copying")
@dataclass(frozen=True)
class SelectiveCopying(ClassificationTask):
    N: int = 256  # sequence length
    vocab: int = 16  # mad-lab's vocab_size: data ids, the blank and the copy marker
    tokens: int = 16  # mad-lab's num_tokens_to_copy
    seed: int = 0  # unused: the task has no hidden randomness

    def __post_init__(self) -> None:
        check(self.vocab >= 4, "vocab", f"must be >= 4 (2 data ids, the blank, the marker), got {self.vocab}")
        check(self.tokens >= 1, "tokens", f"must be >= 1, got {self.tokens}")
        check(self.N >= 2 * self.tokens + 2, "N",
              f"must be >= 2 * tokens + 2 = {2 * self.tokens + 2} (a region with a blank, the marker, the slots), "
              f"got {self.N}")

    @property
    def blank(self) -> int:
        return self.vocab - 2

    @property
    def marker(self) -> int:
        return self.vocab - 1

    @property
    def region(self) -> int:
        return self.N - self.tokens - 1

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", self.vocab, self.N, self.vocab, "mask")

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / (self.vocab - 2)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        dev = generator.device
        T, R = self.tokens, self.region
        data = torch.randint(0, self.vocab - 2, (n, T), generator=generator, device=dev)
        where = torch.rand(n, R, generator=generator, device=dev).argsort(1)[:, :T].sort(1).values
        x = torch.full((n, self.N), self.blank, dtype=torch.long, device=dev)
        x[:, :R].scatter_(1, where, data)
        x[:, R] = self.marker
        y = torch.zeros(n, self.N, dtype=torch.long, device=dev)
        y[:, R + 1:] = data
        mask = torch.zeros(n, self.N, dtype=torch.bool, device=dev)
        mask[:, R + 1:] = True
        return Batch(x, y, mask, tuples=where)

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy on n test examples of "constant" (the most frequent label) and "token-mode"
        (the region's most frequent data id, at every slot)."""
        b = self.sample_test(n, generator)
        mode = token_mode(b.x, 0, self.vocab - 2)
        return {"constant": self.constant_accuracy(b),
                "token-mode": self.label_accuracy(mode.unsqueeze(1).expand_as(b.x), b)}
