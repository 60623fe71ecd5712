"""Multi-query associative recall on tokens (Zoology: Arora et al. 2023, "Zoology: Measuring and
Improving Recall in Efficient Language Models").

    x = 3 12 0 9 6 15 1 10 0 5 6 2 1 11 3 7  ->  labels 9 15 10 12 at 8 10 12 14

(N = 16, vocab = 16, pairs = 4: keys 3 0 6 1 with values 12 9 15 10, then the queries 0 6 1 3 at
positions 8 10 12 14 between the fillers 5 2 11 7.)

Vocabulary `vocab` V: keys are the ids [0, V//2), values [V//2, V). An example of length N holds
P = `pairs` pairs (default N // 4) and is laid out as Zoology's generator lays it out:
- positions 0 .. 2P-1, the prompt `k_1 v_1 ... k_P v_P`: P distinct keys and P distinct values,
  each set uniform without replacement;
- positions 2P .. N-1, the query region of S = (N - 2P) // 2 slots at positions 2P + 2s
  (s = 0..S-1): P distinct slots are drawn without replacement with weights proportional to
  (s+1)^(power_a - 1) (Zoology's power law, `power_a` in (0, 1], 0.01 by default: nearby slots
  are far more likely; power_a = 1 is uniform), and the i-th slot drawn holds the query k_i (as
  Zoology matches its keys, in prompt order, to its slots, in the order drawn). Every key
  is queried exactly once, in a random order.
- every other position (the odd positions of the query region, unused slots, and the last
  position when N - 2P is odd) holds a filler uniform over the whole vocabulary (Zoology's
  `random_non_queries`), so a filler may look like a key or a value; it carries no target.
Targets (readout "mask"): at each query position the value paired with its key; the value is
never in the input at or after the query (a filler may equal it by chance), so a bidirectional
model cannot copy it. Requires N >= 4P (S >= P slots) and P <= V//2 (distinct keys).

Labels are uniform over the V - V//2 value ids: chance accuracy 1/(V - V//2) (1/32 at the
defaults N = 64, vocab = 64, pairs = 16).

At the default pairs = N/4 every slot holds a query (S = P), so the power law only orders them:
the first key of the prompt is the likeliest to be asked first, right after the prompt. With
fewer pairs it also leaves most far slots to fillers (Zoology's setting of long sequences).

Trivial baselines (`trivial_baselines`): besides the constant, "last-pair-value" (answer every
query with v_P, the prompt's last value: each key is queried once, so exactly 1/P, 6.25% at the
defaults, 25% at pairs = 4) and "most-recent-value" (answer each query with the latest value id
before it, a filler or v_P: 7.0% at N = 64, vocab = 64, pairs = 4, where the power law puts
many queries right after the prompt, but 2.7%, below the constant's 3.1%, at the defaults,
where the query right after the prompt mostly asks for k_1, not k_P). Measured on 4096 test
examples.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..errors import check
from .base import Batch, ClassificationTask, TaskSpec
from .registry import TASKS
from .token_heuristics import most_recent


@TASKS.register("mqar")
@dataclass(frozen=True)
class MQAR(ClassificationTask):
    N: int = 64  # sequence length
    vocab: int = 64  # keys [0, vocab//2), values [vocab//2, vocab)
    pairs: int | None = None  # key-value pairs (and queries); None: N // 4
    power_a: float = 0.01  # Zoology's power law over query slots
    seed: int = 0  # unused: the task has no hidden randomness

    def __post_init__(self) -> None:
        check(self.N >= 4, "N", f"must be >= 4, got {self.N}")
        check(self.vocab >= 4, "vocab", f"must be >= 4, got {self.vocab}")
        if self.pairs is not None:
            check(self.pairs >= 1, "pairs", f"must be >= 1 (or None for N // 4), got {self.pairs}")
            check(4 * self.pairs <= self.N, "pairs",
                  f"must be <= N/4 = {self.N / 4:g} (the prompt takes 2 positions a pair, each query a slot of 2), "
                  f"got {self.pairs}")
        check(self.n_pairs <= self.vocab // 2, "pairs",
              f"{self.n_pairs} distinct keys need vocab >= {2 * self.n_pairs}, got vocab {self.vocab}")
        check(math.isfinite(self.power_a) and 0 < self.power_a <= 1, "power_a",
              f"must be in (0, 1] (1: uniform slots), got {self.power_a}")

    @property
    def n_pairs(self) -> int:
        return self.pairs if self.pairs is not None else self.N // 4

    @property
    def n_keys(self) -> int:
        return self.vocab // 2

    @property
    def slots(self) -> int:
        return (self.N - 2 * self.n_pairs) // 2

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", self.vocab, self.N, self.vocab, "mask")

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / (self.vocab - self.n_keys)

    def slot_weights(self, device: torch.device | str = "cpu") -> torch.Tensor:
        """(S,) the unnormalised probability of each query slot, (s+1)^(power_a - 1)."""
        s = torch.arange(1, self.slots + 1, dtype=torch.float64, device=device)
        return (s ** (self.power_a - 1)).float()

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        dev = generator.device
        P, N, V, K = self.n_pairs, self.N, self.vocab, self.n_keys
        keys = torch.rand(n, K, generator=generator, device=dev).argsort(1)[:, :P]
        values = K + torch.rand(n, V - K, generator=generator, device=dev).argsort(1)[:, :P]
        x = torch.randint(0, V, (n, N), generator=generator, device=dev)  # fillers
        x[:, 0:2 * P:2] = keys
        x[:, 1:2 * P:2] = values
        w = self.slot_weights(dev).expand(n, self.slots)
        slot = torch.multinomial(w, P, replacement=False, generator=generator)  # (n, P): the slot of query i
        pos = 2 * P + 2 * slot
        x.scatter_(1, pos, keys)
        y = torch.zeros(n, N, dtype=torch.long, device=dev).scatter_(1, pos, values)
        mask = torch.zeros(n, N, dtype=torch.bool, device=dev).scatter_(1, pos, True)
        return Batch(x, y, mask, tuples=pos)

    def last_pair_value(self, x: torch.Tensor) -> torch.Tensor:
        """(B, N) inputs -> (B, N): the prompt's last value v_P at every position."""
        return x[:, 2 * self.n_pairs - 1:2 * self.n_pairs].expand_as(x)

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy on n test examples of "constant" (the most frequent label), "last-pair-value"
        (`last_pair_value`) and "most-recent-value" (the latest value id before each query)."""
        b = self.sample_test(n, generator)
        return {"constant": self.constant_accuracy(b),
                "last-pair-value": self.label_accuracy(self.last_pair_value(b.x), b),
                "most-recent-value": self.label_accuracy(most_recent(b.x, self.n_keys, self.vocab), b)}
