"""Compression (MAD: Poli et al. 2024; mad-lab's generator), simplified: reproduce a random
sequence after a compression token, one position query at a time.

    x = 7 3 7 12 15 16 17 18 19  ->  labels 7 3 7 12 at 5 6 7 8

(N = 5, vocab = 16: the data 7 3 7 12, the compression token 15, the position queries 16..19.)

mad-lab's instance is N-1 random tokens and a compression token; a decoder (a two-layer MLP fed
the model's output at the compression token and a positional code) must rebuild every token,
so the whole sequence has to pass through that one position. A task here cannot change the
model's head, so the decoder's queries become input tokens:
    t_1 .. t_T  C  Q_1 .. Q_T          (T = N - 1)
with t_i uniform over the data ids [0, V-1) (with replacement), C = V-1 the compression token
(V = `vocab`, as in mad-lab) and Q_j = V + j - 1 a token that names position j (the decoder's
positional code). The target at Q_j is t_j (readout "mask"); no label is in the input after C.
The sequence is 2N - 1 tokens; the vocabulary V + N - 1 ids.

What is kept and what is not: a recurrent model (an RNN, an SSM, a linear-attention model read
as a recurrence) must carry all T tokens in its state past C, the single summary position, as in
mad-lab. An attention layer can instead look back at t_j from Q_j, so for Transformers this is
multi-query index lookup rather than compression through one position.

Labels are uniform over the V-1 data ids: chance accuracy 1/(V-1) (1/15 at the defaults N = 32,
V = 16). Trivial baseline (`trivial_baselines`): besides the constant, "token-mode" (the most
frequent data id of t at every query: 16% at the defaults, on 4096 test examples).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..errors import check
from .base import Batch, ClassificationTask, TaskSpec
from .registry import TASKS
from .token_heuristics import token_mode


@TASKS.register("compression")
@dataclass(frozen=True)
class Compression(ClassificationTask):
    N: int = 32  # mad-lab's seq_len: N-1 data tokens and the compression token
    vocab: int = 16  # mad-lab's vocab_size: data ids and the compression token (position queries come on top)
    seed: int = 0  # unused: the task has no hidden randomness

    def __post_init__(self) -> None:
        check(self.N >= 2, "N", f"must be >= 2, got {self.N}")
        check(self.vocab >= 3, "vocab", f"must be >= 3 (2 data ids and the compression token), got {self.vocab}")

    @property
    def n_tokens(self) -> int:
        return self.N - 1

    @property
    def compress(self) -> int:
        return self.vocab - 1

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("tokens", self.vocab + self.n_tokens, 2 * self.N - 1, self.vocab, "mask")

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / (self.vocab - 1)

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        dev = generator.device
        T = self.n_tokens
        data = torch.randint(0, self.vocab - 1, (n, T), generator=generator, device=dev)
        queries = (self.vocab + torch.arange(T, device=dev)).expand(n, T)
        x = torch.cat([data, torch.full((n, 1), self.compress, dtype=torch.long, device=dev), queries], 1)
        y = torch.cat([torch.zeros(n, T + 1, dtype=torch.long, device=dev), data], 1)
        mask = torch.zeros(n, 2 * T + 1, dtype=torch.bool, device=dev)
        mask[:, T + 1:] = True
        return Batch(x, y, mask)

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy on n test examples of "constant" (the most frequent label) and "token-mode"
        (the most frequent data id, at every query)."""
        b = self.sample_test(n, generator)
        mode = token_mode(b.x, 0, self.vocab - 1)
        return {"constant": self.constant_accuracy(b),
                "token-mode": self.label_accuracy(mode.unsqueeze(1).expand_as(b.x), b)}
