"""Index lookup (paper A, SPEC 1.2).

    x = 55 32 31 13 37 [p=2]   (ids 55 32 31 13 37 65, vocab 64)  ->  label 32 (s_2)

Input: symbols s_1..s_k (token ids 0..vocab-1), then one query token `vocab + p - 1` naming a
position p in [k] (a separate block of N index tokens). Target: s_p, classified at the last
position. Chance accuracy 1/vocab (symbols are uniform, so no constant does better).

Lengths (`train_lengths`):
- "variable" (the default): each *batch* (one `sample` call) has one k drawn uniformly from
  {min_length..N}, so a batch is a plain tensor with no padding; examples are i.i.d. given that k.
- "fixed": k = N in every example.
- "per-example": each *example* has its own k drawn uniformly from {min(min_length, N)..N}; the
  batch is padded on the LEFT to N symbols with one pad token, id `vocab + N` (the vocabulary
  grows by one for this value only), so the query stays last, where the label is read:

    x = [pad] [pad] 55 32 31 [p=2]   (N = 5, k = 3: ids 69 69 55 32 31 65, vocab 64)  ->  32

  No attention mask: a model sees the pads as tokens, and s_p sits at position N - k + p - 1
  (0-based), not p - 1: finding it by position needs k, a count of the pads (with learned
  positions every arm tried lost the task this way: docs/results/lookup-diagnostics/).
- "per-example-right": each example its own k as above, but padded on the RIGHT, after the
  query, to N + 1 positions with the same pad token, and the label read at the query (readout
  "mask", the query's position only), so s_p sits at position p - 1 and at lag k + 1 - p from
  the query, as under one k per batch, and a causal model never sees a pad:

    x = 55 32 31 [p=2] [pad] [pad]   (N = 5, k = 3: ids 55 32 31 65 69 69)  ->  32 at position 3

  Examples drawn as "variable" draws them, only the ks of one batch independent (a diagnostic
  of issue 52; a Transformer is not pruned to its last position under it, so its steps cost more).
`sample_test` (held-out, validation and test sets) always uses k = N (no pads; under
"per-example-right" in its masked form, the query last).

Trivial baselines (`trivial_baselines`): the constant (1/vocab), and "sequence-mode": ignore the
query and predict the most frequent symbol of s_1..s_k (the smallest id among equally frequent
ones; pads are not symbols and are not counted). The queried position is uniform and independent
of the symbols, so it scores E[count of the predicted symbol] / k: above 1/vocab = 1.6% (vocab 64:
about 7% at N = 50, 5% at N = 100, 4% at N = 200), falling towards 1/vocab as N grows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import torch

from ..errors import check
from .base import Batch, ClassificationTask, TaskSpec
from .registry import TASKS


def draw_length(lo: int, hi: int, generator: torch.Generator, step: int = 1) -> int:
    """One length uniform over {lo, lo+step, ..., hi} (lo and hi on the grid)."""
    choices = (hi - lo) // step + 1
    return lo + step * int(torch.randint(0, choices, (1,), generator=generator, device=generator.device))


Lengths = Literal["variable", "fixed", "per-example", "per-example-right"]
_LENGTHS = get_args(Lengths)


@TASKS.register("index-lookup")
@dataclass(frozen=True)
class IndexLookup(ClassificationTask):
    N: int = 100  # evaluation length (symbols); the longest training length
    vocab: int = 64  # symbol alphabet
    train_lengths: Lengths = "variable"
    min_length: int = 10  # shortest training length when variable or per-example (clipped to N)
    seed: int = 0  # unused: the task has no hidden randomness

    def __post_init__(self) -> None:
        check(self.N >= 1, "N", f"must be >= 1, got {self.N}")
        check(self.vocab >= 2, "vocab", f"must be >= 2, got {self.vocab}")
        check(self.train_lengths in _LENGTHS, "train_lengths",
              f"must be one of {', '.join(repr(v) for v in _LENGTHS)}, got {self.train_lengths!r}")
        check(self.min_length >= 1, "min_length", f"must be >= 1, got {self.min_length}")

    @property
    def pad(self) -> int:
        """The pad token of per-example lengths: the id after the N index tokens."""
        return self.vocab + self.N

    @property
    def spec(self) -> TaskSpec:
        padded = self.train_lengths.startswith("per-example")
        extra = 1 if padded else 0  # the pad token, only where used
        readout: Literal["mask", "last"] = "mask" if self.train_lengths == "per-example-right" else "last"
        return TaskSpec("tokens", self.vocab + self.N + extra, self.N + 1, self.vocab, readout)

    @property
    def chance_accuracy(self) -> float:
        return 1.0 / self.vocab

    @property
    def fixed_shapes(self) -> bool:
        # per-example batches are all (n, N+1) too, but their examples differ in length: they are
        # planned and costed as variable lengths are (and no replayed training set)
        return self.train_lengths == "fixed"

    @staticmethod
    def sequence_mode(x: torch.Tensor, vocab: int) -> torch.Tensor:
        """(B, L) inputs (any left pads, the symbols, then the query) -> (B,) the most frequent
        symbol of each example's s_1..s_k, the smallest id on a tie. Only ids < vocab (symbols)
        are counted: pads are not."""
        s = x[:, :-1]
        s = torch.where(s < vocab, s, vocab)  # every non-symbol into one extra bin, dropped below
        counts = torch.zeros(x.shape[0], vocab + 1, dtype=torch.long, device=x.device)
        counts.scatter_add_(1, s, torch.ones_like(s))
        counts = counts[:, :vocab]
        top = counts.amax(1, keepdim=True)
        ids = torch.arange(vocab, device=x.device).expand_as(counts)
        return torch.where(counts == top, ids, vocab).amin(1)

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy on n `sample_test` examples (k = N) of "constant" (the most frequent label)
        and "sequence-mode" (`sequence_mode`)."""
        b = self.sample_test(n, generator)
        mode = self.sequence_mode(b.x, self.vocab)  # (B,): the label of the last position
        if b.mask is not None:  # "per-example-right": (B, L), read at the mask (the last position)
            mode = mode.unsqueeze(1).expand_as(b.y)
        return {"constant": self.constant_accuracy(b), "sequence-mode": self.label_accuracy(mode, b)}

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        if self.train_lengths == "fixed":
            return self.sample_length(n, self.N, generator)
        if self.train_lengths == "per-example":
            return self.sample_per_example(n, generator)
        if self.train_lengths == "per-example-right":
            return self.sample_per_example_right(n, generator)
        return self.sample_length(n, draw_length(min(self.min_length, self.N), self.N, generator), generator)

    def sample_test(self, n: int, generator: torch.Generator) -> Batch:
        b = self.sample_length(n, self.N, generator)
        return _masked_at_last(b) if self.train_lengths == "per-example-right" else b

    def sample_length(self, n: int, k: int, generator: torch.Generator) -> Batch:
        check(1 <= k <= self.N, "k", f"must be in [1, N={self.N}], got {k}")
        dev = generator.device
        s = torch.randint(0, self.vocab, (n, k), generator=generator, device=dev)
        p = torch.randint(0, k, (n,), generator=generator, device=dev)  # 0-based position
        x = torch.cat([s, (self.vocab + p).unsqueeze(1)], dim=1)
        y = s.gather(1, p.unsqueeze(1)).squeeze(1)
        return Batch(x, y, tuples=p.unsqueeze(1))

    def _draw_per_example(self, n: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
        """Both per-example forms' draws, in this order: k (n,) uniform over {min(min_length, N)..N},
        the symbols s (n, N) (an example uses its first k), the 0-based p (n,) uniform below k."""
        dev, N = generator.device, self.N
        k = torch.randint(min(self.min_length, N), N + 1, (n,), generator=generator, device=dev)
        s = torch.randint(0, self.vocab, (n, N), generator=generator, device=dev)
        u = torch.rand(n, generator=generator, device=dev, dtype=torch.float64)  # as the committed runs drew it
        return k, s, (u * k).long().clamp_(max=k - 1)

    def sample_per_example(self, n: int, generator: torch.Generator) -> Batch:
        """n examples, each with its own k uniform over {min(min_length, N)..N}, left-padded with
        `pad` to N symbols: x (n, N+1), the query last; tuples the 0-based p within the symbols."""
        dev, N = generator.device, self.N
        k, s, p = self._draw_per_example(n, generator)
        first = N - k  # slot of s_1
        slots = torch.arange(N, device=dev).expand(n, N)
        s = torch.where(slots < first.unsqueeze(1), self.pad, s)
        x = torch.cat([s, (self.vocab + p).unsqueeze(1)], dim=1)
        y = s.gather(1, (first + p).unsqueeze(1)).squeeze(1)
        return Batch(x, y, tuples=p.unsqueeze(1))

    def sample_per_example_right(self, n: int, generator: torch.Generator) -> Batch:
        """n examples, each with its own k uniform over {min(min_length, N)..N}: s_1..s_k, the
        query at position k, then `pad` to N + 1 positions. x (n, N+1); y (n, N+1) holding s_p at
        the query's position, where `mask` alone is True; tuples the 0-based p."""
        dev, N = generator.device, self.N
        k, s, p = self._draw_per_example(n, generator)
        slots = torch.arange(N + 1, device=dev).expand(n, N + 1)
        q = k.unsqueeze(1)                                 # (n, 1): the query's position
        x = torch.cat([s, s[:, :1]], dim=1)                # (n, N+1), the last column overwritten below
        x = torch.where(slots < q, x, torch.where(slots == q, self.vocab + p.unsqueeze(1), self.pad))
        mask = slots == q
        y = torch.where(mask, s.gather(1, p.unsqueeze(1)), 0)
        return Batch(x, y, mask=mask, tuples=p.unsqueeze(1))


def _masked_at_last(b: Batch) -> Batch:
    """A last-position batch (y (n,)) in the masked form: y (n, L) with the label at the last
    position, where the mask alone is True."""
    n, L = b.x.shape
    mask = torch.zeros(n, L, dtype=torch.bool, device=b.x.device)
    mask[:, -1] = True
    y = torch.zeros(n, L, dtype=b.y.dtype, device=b.x.device)
    y[:, -1] = b.y
    return Batch(b.x, y, mask=mask, tuples=b.tuples)
