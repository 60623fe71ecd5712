"""Nearest neighbour and MQAR (paper A, SPEC 1.5).

    x = (-0.02, 1.00) y=0, (1.00, 0.07) y=1, query (0.99, 0.16), query (-0.61, 0.79)  ->  labels 1, 0

N points in R^d: the first m = N//2 carry i.i.d. fair labels and are shown with them; each of
the N - m later points (queries) must be labelled with the label of its nearest labelled point
(argmax inner product). Sequence (vector inputs, width d + 2):
    x_1, y_1, ..., x_m, y_m, x_{m+1}, ..., x_N
with a point as [x, 0, 0] and a label as [0, onehot(y)]; the targets sit at the query positions
(readout 'mask'), so no query's label is ever in the input, even for bidirectional models.
Points are unit vectors (uniform on the sphere) or sign vectors in {+-1/sqrt d}^d.

Queries: a noisy copy of a uniform labelled point (unit: normalise(x + noise * g / sqrt d);
sign: each coordinate flipped with probability `noise`), redrawn (rejection) until the nearest
labelled point beats the second nearest by at least `gamma` in inner product.
MQAR (`mqar=True`): the queries are the labelled points themselves in a uniform random order
(N even); the margin is then enforced on the labelled points (1 - max off-diagonal inner
product >= gamma), redrawing examples that fail.
Labels are fair coins independent of the points, so the chance accuracy is 1/2 and the best
constant predictor's error is 0.5.

Trivial baselines (`trivial_baselines`): the constant (1/2), and "labelled-majority": label every
query with the majority label of the m labelled points shown in its prompt (a tie, possible for
even m, goes to label 0). A query's label is a labelled point's label, so this scores
1/2 + E|K - m/2| / m for K ~ Bin(m, 1/2): 62.3% at N = 20, 58.8% at N = 40, 56.3% at N = 80
(about 1/2 + 1/sqrt(2 pi m)), well above the 1/2 of a constant at small N.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from ..errors import ArchsepError, check
from .base import Batch, ClassificationTask, TaskSpec
from .registry import TASKS

MAX_ROUNDS = 200  # rejection rounds before the margin is declared infeasible


@TASKS.register("nearest-neighbour")
@dataclass(frozen=True)
class NearestNeighbour(ClassificationTask):
    N: int = 20  # points: N//2 labelled, the rest queries
    d: int = 16
    vectors: Literal["unit", "sign"] = "unit"
    gamma: float = 0.05  # margin between the nearest and second nearest labelled point
    noise: float = 0.3  # query perturbation (ignored for MQAR)
    mqar: bool = False
    seed: int = 0  # unused: the task has no hidden randomness

    def __post_init__(self) -> None:
        check(self.N >= 2, "N", f"must be >= 2, got {self.N}")
        check(not self.mqar or self.N % 2 == 0, "N", f"must be even for MQAR, got {self.N}")
        check(self.d >= 1, "d", f"must be >= 1, got {self.d}")
        check(self.vectors in ("unit", "sign"), "vectors", f"must be 'unit' or 'sign', got {self.vectors!r}")
        check(0 <= self.gamma < 2, "gamma", f"must be in [0, 2), got {self.gamma}")
        hi = 0.5 if self.vectors == "sign" else float("inf")
        check(0 <= self.noise < hi, "noise", f"must be in [0, {hi}), got {self.noise}")

    @property
    def m(self) -> int:
        return self.N // 2

    @property
    def length(self) -> int:
        return 2 * self.m + (self.N - self.m)

    @property
    def spec(self) -> TaskSpec:
        return TaskSpec("vector", self.d + 2, self.length, 2, "mask")

    @property
    def chance_accuracy(self) -> float:
        return 0.5

    # --- trivial baselines ---------------------------------------------------------------
    def labelled_majority(self, x: torch.Tensor) -> torch.Tensor:
        """(B, length, d+2) inputs -> (B, length) predictions: at every position the majority
        label of the m labelled points in the prompt (read off their one-hot label tokens),
        label 0 on a tie."""
        ones = x[:, 1:2 * self.m:2, self.d + 1].sum(1)  # how many labelled points carry label 1
        zeros = x[:, 1:2 * self.m:2, self.d].sum(1)
        return (ones > zeros).long().unsqueeze(1).expand(x.shape[0], x.shape[1])

    def trivial_baselines(self, n: int, generator: torch.Generator) -> dict[str, float]:
        """Accuracy over the queries of n `sample_test` examples of "constant" (the most frequent
        label) and "labelled-majority" (`labelled_majority`)."""
        b = self.sample_test(n, generator)
        return {"constant": self.constant_accuracy(b),
                "labelled-majority": self.label_accuracy(self.labelled_majority(b.x), b)}

    # --- sampling -----------------------------------------------------------------------
    def _points(self, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
        if self.vectors == "unit":
            v = torch.randn(*shape, self.d, generator=g, device=g.device)
            return v / v.norm(dim=-1, keepdim=True)
        return (torch.randint(0, 2, (*shape, self.d), generator=g, device=g.device) * 2 - 1).float() / self.d**0.5

    def _perturb(self, x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        if self.vectors == "unit":
            v = x + self.noise * torch.randn(x.shape, generator=g, device=g.device) / self.d**0.5
            return v / v.norm(dim=-1, keepdim=True)
        flip = torch.rand(x.shape, generator=g, device=g.device) < self.noise
        return torch.where(flip, -x, x)

    @staticmethod
    def margins(q: torch.Tensor, keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """For queries (n, Q, d) against keys (n, K, d): nearest key index and top1 - top2."""
        s = q @ keys.transpose(1, 2)
        if s.shape[-1] == 1:
            return s.argmax(-1), torch.full(s.shape[:-1], float("inf"), device=s.device)
        top = s.topk(2, dim=-1)
        return top.indices[..., 0], top.values[..., 0] - top.values[..., 1]

    def _fail(self) -> ArchsepError:
        return ArchsepError(f"gamma: margin {self.gamma} not reached after {MAX_ROUNDS} redraws "
                            f"(d={self.d}, N={self.N}); lower gamma or raise d")

    def _labelled(self, n: int, g: torch.Generator) -> torch.Tensor:
        keys = self._points((n, self.m), g)
        if not self.mqar:
            return keys
        for _ in range(MAX_ROUNDS):  # MQAR: every labelled point must be gamma-separated from the rest
            gram = keys @ keys.transpose(1, 2)
            gram.diagonal(dim1=1, dim2=2).fill_(-float("inf"))
            bad = (1 - gram.amax((1, 2)) < self.gamma).nonzero().squeeze(1)
            if len(bad) == 0:
                return keys
            keys[bad] = self._points((len(bad), self.m), g)
        raise self._fail()

    def sample(self, n: int, generator: torch.Generator) -> Batch:
        g, dev = generator, generator.device
        m, Q = self.m, self.N - self.m
        keys = self._labelled(n, g)
        labels = torch.randint(0, 2, (n, m), generator=g, device=dev)
        if self.mqar:
            src = torch.rand(n, m, generator=g, device=dev).argsort(1)  # a uniform permutation
            queries = keys.gather(1, src.unsqueeze(-1).expand(n, m, self.d))
            nn = src
        else:
            src = torch.randint(0, m, (n, Q), generator=g, device=dev)
            queries = self._perturb(keys.gather(1, src.unsqueeze(-1).expand(n, Q, self.d)), g)
            for _ in range(MAX_ROUNDS):
                nn, margin = self.margins(queries, keys)
                bad = margin < self.gamma
                if not bad.any():
                    break
                redo = torch.randint(0, m, (n, Q), generator=g, device=dev)
                fresh = self._perturb(keys.gather(1, redo.unsqueeze(-1).expand(n, Q, self.d)), g)
                queries = torch.where(bad.unsqueeze(-1), fresh, queries)
            else:
                raise self._fail()
        y_q = labels.gather(1, nn)
        x = torch.zeros(n, self.length, self.d + 2, device=dev)
        x[:, 0:2 * m:2, :self.d] = keys
        x[:, 1:2 * m:2, self.d:] = torch.nn.functional.one_hot(labels, 2).float()
        x[:, 2 * m:, :self.d] = queries
        y = torch.zeros(n, self.length, dtype=torch.long, device=dev)
        y[:, 2 * m:] = y_q
        mask = torch.zeros(n, self.length, dtype=torch.bool, device=dev)
        mask[:, 2 * m:] = True
        return Batch(x, y, mask, tuples=nn)
