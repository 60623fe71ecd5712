"""Paper A, Theorem 6: string equality `a [SEP] b` with a two-layer Transformer of width
O(log N), on the project's `equality` task (both variants).

Residual stream (width 2 nb + 2 k + 2): [bits(token) (nb = ceil log2 vocab), c_i, c_{m(i)},
retrieved bits, mismatch count, average]. c_i are +-1/sqrt(k) position codes, m(i) = i +- (n+1)
the mirror of i (SEP is its own mirror).
- Layer 1: W_QK = eta * I from the mirror-code slot to the position-code slot, so position i
  attends to m(i); W_V copies the bits. FFN 1: mismatch = sum_b |bit_b - retrieved_b| =
  sum_b ReLU(bit - r) + ReLU(r - bit) (an XOR per bit).
- Layer 2: W_QK = 0 (uniform attention), W_V copies the mismatch count, so the last position
  holds the average 2 * (#differing bits) / (N + 1): 0 when a == b, >= 2/(N+1) otherwise.
  FFN 2 thresholds it at 1/N.
eta is set from the codes' measured coherence (`sharp_scale`) so that the softmax leak moves
the average by far less than the 1/N margin.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import torch

from ..tasks.equality import Equality
from .base import CONSTRUCTIONS, Construction, attend, max_coherence, rademacher_codes, sharp_scale


class EqualityTransformer:
    def __init__(self, N: int, vocab: int, k: int | None = None, seed: int = 0):
        self.N, self.n = N, N // 2
        self.nb = max(1, math.ceil(math.log2(vocab)))
        self.k = k or max(8, math.ceil(6 * math.log(N + 1)))
        L = N + 1
        self.codes = rademacher_codes(L, self.k, torch.Generator().manual_seed(seed))
        self.coherence = max_coherence(self.codes)
        self.eta = sharp_scale(L, self.coherence)
        i = torch.arange(L)
        self.mirror = torch.where(i < self.n, i + self.n + 1, torch.where(i > self.n, i - self.n - 1, i))
        self.width = 2 * self.nb + 2 * self.k + 2

    @property
    def params(self) -> int:
        """Dense count: two layers of W_QK and W_V (width^2 each), FFN 1 (width -> 2 nb -> 1),
        FFN 2 (1 -> 2 logits)."""
        D = self.width
        return 4 * D * D + (D * 2 * self.nb + 2 * self.nb) + (2 * self.nb + 1) + 4

    def bits(self, x: torch.Tensor, sep: int) -> torch.Tensor:
        """(B, L) symbols -> (B, L, nb) binary digits; SEP -> zeros."""
        b = (x.unsqueeze(-1) >> torch.arange(self.nb)) & 1
        return (b * (x != sep).unsqueeze(-1)).float()

    @torch.no_grad()
    def forward(self, x: torch.Tensor, sep: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, 2) (class 1 = equal) and the layer-2 average (B,)."""
        B, L = x.shape
        bits = self.bits(x, sep)
        q = self.eta * self.codes[self.mirror].expand(B, L, self.k)  # query slot: c_{m(i)}
        k = self.codes.expand(B, L, self.k)  # key slot: c_j
        ret = attend(q, k, bits)  # layer 1: the mirror's bits
        mismatch = (torch.relu(bits - ret) + torch.relu(ret - bits)).sum(-1, keepdim=True)  # FFN 1
        avg = mismatch.mean(1)[:, 0]  # layer 2: uniform attention, read at the last position
        logits = torch.stack([self.N * avg - 1, torch.zeros_like(avg)], -1)  # FFN 2: equal iff avg < 1/N
        return logits, avg


@CONSTRUCTIONS.register("equality")
class EqualityConstruction(Construction):
    description = "paper A Thm 6: 2-layer Transformer, mirror attention + XOR, average, threshold 1/N"
    default_Ns = (10, 100, 1000, 10_000)

    def __init__(self, examples: int = 2000, variants: Sequence[str] = ("eq-random", "eq-one")):
        self.examples, self.variants = examples, tuple(variants)

    def memory(self, N: int) -> float:
        # batches of 8 sequences of ~2N positions: one (8, 1024, 2N) chunk of scores and
        # (8, 2N, width) activations with width ~ 8 ln N + 16, float32, x2 slack
        L = 2 * N + 2
        return 2 * 4.0 * 8 * L * (1024 + 8 * math.log(max(N, 2)) + 16)

    def run(self, Ns: Sequence[int], seed: int = 0) -> list[dict]:
        rows = []
        gen = torch.Generator().manual_seed(seed + 1)
        for N in Ns:
            N = N + N % 2
            n_ex = max(8, min(self.examples, 100_000 // N))  # cost ~ N^2 per example
            for variant in self.variants:
                task = Equality(N=N, variant=variant)  # type: ignore[arg-type]  # checked by Equality itself
                model = EqualityTransformer(N, task.vocab, seed=seed)
                correct, eq_max, neq_min = 0, 0.0, math.inf
                for s in range(0, n_ex, 8):
                    b = task.sample_test(min(8, n_ex - s), gen)
                    logits, avg = model.forward(b.x, task.sep)
                    correct += int((logits.argmax(-1) == b.y).sum())
                    if (b.y == 1).any():
                        eq_max = max(eq_max, float(avg[b.y == 1].max()))
                    if (b.y == 0).any():
                        neq_min = min(neq_min, float(avg[b.y == 0].min()))
                rows.append({"N": N, "variant": variant, "examples": n_ex, "accuracy": correct / n_ex,
                             "k": model.k, "width": model.width, "params": model.params,
                             "eta": round(model.eta, 2), "coherence": round(model.coherence, 3),
                             "max_avg_equal": eq_max, "threshold": 1 / N,
                             "min_avg_unequal": neq_min if neq_min < math.inf else None})
        return rows

    def plot(self, rows: list[dict], stem: Path) -> list[Path]:
        from ..reporting.plots import plt, save

        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for v in dict.fromkeys(r["variant"] for r in rows):
            rs = [r for r in rows if r["variant"] == v]
            axes[0].plot([r["N"] for r in rs], [r["accuracy"] for r in rs], "o-", label=v)
            axes[1].plot([r["N"] for r in rs], [r["min_avg_unequal"] or float("nan") for r in rs], "o-",
                         label=f"{v}: min avg, a != b")
            axes[1].plot([r["N"] for r in rs], [max(r["max_avg_equal"], 1e-12) for r in rs], "x--",
                         label=f"{v}: max avg, a == b")
        rs = [r for r in rows if r["variant"] == rows[0]["variant"]]
        axes[1].plot([r["N"] for r in rs], [r["threshold"] for r in rs], "k:", label="threshold 1/N")
        axes[0].set_ylim(0, 1.05)
        axes[0].set_ylabel("accuracy")
        axes[1].set_yscale("log")
        axes[1].set_ylabel("layer-2 average")
        for ax in axes:
            ax.set_xscale("log")
            ax.set_xlabel("N = |a| + |b|")
            ax.legend(fontsize=7)
        axes[0].set_title("String equality, 2-layer TF")
        return save(fig, stem)
