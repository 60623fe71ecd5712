"""Paper A, Theorem 1: a one-layer Transformer of width O(log N) doing index lookup exactly.

Input layout (width V + 2k + 1) for the `index-lookup` task's tokens:
  symbol s at position i:  [onehot(s), c_i, 0, 0]      (c_i: position code, {+-1/sqrt k}^k)
  index token p (query):   [0, 0, c_p, 1]              (the query position's own code is 0)
W_QK = eta * I from the query's index slot to the key's position slot, plus -eta on the flag,
so the query scores key j by eta <c_p, c_j> (eta for j = p, at most eta * coherence otherwise)
and itself by -eta. W_V copies the one-hot symbol; the FFN thresholds ReLU(2 v - 1), so the
prediction is right whenever the attention on position p exceeds 1/2 -- whatever the other
symbols are. That is checked for every p (a certificate, independent of the symbols) and on
random strings through the full forward pass.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..tasks.index_lookup import IndexLookup
from .base import CONSTRUCTIONS, Construction, max_coherence


class LookupTransformer:
    """The hand-set one-layer Transformer for sequences of up to N symbols, code width k."""

    def __init__(self, N: int, k: int, vocab: int = 64, eta: float | None = None, seed: int = 0,
                 base_codes: torch.Tensor | None = None):
        self.N, self.k, self.V = N, k, vocab
        self.eta = eta if eta is not None else default_eta(N)
        if base_codes is None:
            base_codes = code_matrix(N, seed, max(k, KMAX))
        self.codes = base_codes[:, :k] / math.sqrt(k)  # nested widths share their first columns
        V = vocab
        self.D = V + 2 * k + 1
        # slots
        self.sym, self.pos, self.idx, self.flag = slice(0, V), slice(V, V + k), slice(V + k, V + 2 * k), V + 2 * k
        W = torch.zeros(self.D, self.D)
        W[self.idx, self.pos] = self.eta * torch.eye(k)
        W[self.flag, self.flag] = -self.eta
        self.wqk = W
        self.wv = torch.zeros(self.D, V)
        self.wv[self.sym, :] = torch.eye(V)

    @property
    def params(self) -> int:
        """Embedding (V + N token rows, N + 1 positions) + W_QK + W_V + FFN (V -> V with bias)."""
        return ((self.V + self.N) * self.D + (self.N + 1) * self.D + self.D * self.D + self.D * self.V
                + self.V * self.V + self.V)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L) token ids of the index-lookup task -> (B, L, D)."""
        B, L = x.shape
        z = torch.zeros(B, L, self.D)
        is_sym = x < self.V
        z[..., self.sym] = torch.nn.functional.one_hot(x.clamp(max=self.V - 1), self.V).float() * is_sym.unsqueeze(-1)
        pos = torch.arange(L).clamp(max=self.N - 1)
        z[:, :, self.pos] = self.codes[pos].unsqueeze(0) * is_sym.unsqueeze(-1)
        p = (x - self.V).clamp(min=0, max=self.N - 1)
        z[:, :, self.idx] = self.codes[p] * (~is_sym).unsqueeze(-1)
        z[:, :, self.flag] = (~is_sym).float()
        return z

    def ffn(self, v: torch.Tensor) -> torch.Tensor:
        return torch.relu(2 * v - 1)  # 1 on the retrieved symbol when its weight is 1, 0 below 1/2

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, V) at the last (query) position."""
        z = self.embed(x)
        s = (z[:, -1:] @ self.wqk) @ z.transpose(1, 2)  # (B, 1, L)
        v = torch.softmax(s, -1) @ (z @ self.wv)
        return self.ffn(v[:, 0])

    @torch.no_grad()
    def all_queries(self, symbols: torch.Tensor, chunk: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """For one string of N symbols, the answer to every query p (one forward pass per p,
        batched: queries share the keys) and the attention weight on the target."""
        N = len(symbols)
        chunk = chunk or _chunk(N)
        keys = self.embed(torch.cat([symbols, torch.tensor([self.V])]).unsqueeze(0))[0]  # (N+1, D)
        vals = keys @ self.wv
        preds, mass = [], []
        for s in range(0, N, chunk):
            p = torch.arange(s, min(s + chunk, N))
            q = torch.zeros(len(p), self.D)  # what `embed` gives the index token p
            q[:, self.idx] = self.codes[p]
            q[:, self.flag] = 1.0
            sc = (q @ self.wqk) @ keys.T  # (c, N+1); the last key is the query itself
            sc[:, -1] = (q @ self.wqk @ q.T).diagonal()  # each query scores its own token
            a = torch.softmax(sc, -1)
            preds.append(self.ffn(a @ vals).argmax(-1))
            mass.append(a[torch.arange(len(p)), p])
        return torch.cat(preds), torch.cat(mass)


def default_eta(N: int) -> float:
    """Query scale 4 ln N (precision O(log N)): with coherence delta the off-target weight is
    at most N^{1 - 4(1 - delta)}, below 1/2 once delta < ~0.7."""
    return 4 * math.log(max(N, 2))


def _chunk(N: int) -> int:
    """Query rows per chunk: about 2^25 scores (128 MB) at a time."""
    return max(64, min(1024, 2**25 // max(N, 1)))


def certified(model: LookupTransformer, chunk: int | None = None) -> tuple[bool, float]:
    """Every p gets attention > 1/2 on its target, whatever the symbols (self-key included)."""
    C = model.codes
    chunk = chunk or _chunk(model.N)
    worst = math.inf
    for s in range(0, model.N, chunk):
        sc = model.eta * (C[s:s + chunk] @ C.T)
        self_score = torch.full((sc.shape[0], 1), -model.eta)
        a = torch.softmax(torch.cat([sc, self_score], 1), -1)
        idx = torch.arange(s, s + sc.shape[0])
        worst = min(worst, float(a[idx - s, idx].min()))
    return worst > 0.5, worst


KMAX = 256  # widest code tried; k_min is 27 at N = 10^4


def code_matrix(N: int, seed: int, kmax: int = KMAX) -> torch.Tensor:
    """One N x kmax Rademacher matrix; width k uses its first k columns (nested codes)."""
    return torch.randint(0, 2, (N, kmax), generator=torch.Generator().manual_seed(seed)).float() * 2 - 1


def min_width(N: int, seed: int = 0, eta: float | None = None, kmax: int = KMAX) -> int:
    """Smallest k whose nested Rademacher codes certify every position (galloping, then binary
    search: wider nested codes lower the coherence, so success is monotone up to sampling noise;
    the reported k_min is the certified one, and k_min - 1 is checked to fail)."""
    base = code_matrix(N, seed, kmax)
    ok = lambda k: certified(LookupTransformer(N, k, eta=eta, base_codes=base))[0]  # noqa: E731
    lo = max(1, math.ceil(math.log2(max(N, 2)))) - 1  # k <= lo fails: the codes are not distinct
    hi = lo + 1
    while not ok(hi):  # gallop up (cheap: cost grows with k), then bisect
        if hi >= kmax:
            return -1
        lo, hi = hi, min(kmax, 2 * hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


@CONSTRUCTIONS.register("lookup")
class LookupConstruction(Construction):
    description = "paper A Thm 1: 1-layer Transformer, +-1/sqrt(k) codes, index lookup at every position"
    default_Ns = (10, 30, 100, 300, 1000, 3000, 10_000)

    def __init__(self, vocab: int = 64, strings: int = 2):
        self.vocab, self.strings = vocab, strings

    def memory(self, N: int) -> float:
        # the N x KMAX code matrix, the codes of the widths tried and the model's (N, k) tables
        return 6.0 * N * KMAX * 4

    def run(self, Ns: Sequence[int], seed: int = 0) -> list[dict]:
        rows: list[dict[str, Any]] = []
        for N in Ns:
            k = min_width(N, seed)
            base = code_matrix(N, seed)
            m = LookupTransformer(N, k, self.vocab, base_codes=base)
            ok, worst = certified(m)
            task = IndexLookup(N=N, vocab=self.vocab)
            gen = torch.Generator().manual_seed(seed + 1)
            correct = total = 0
            for _ in range(self.strings):  # every query position of a few random strings
                s = task.sample_test(1, gen).x[0, :N]
                pred, _ = m.all_queries(s)
                correct += int((pred == s).sum())
                total += N
            below = LookupTransformer(N, k - 1, self.vocab, base_codes=base) if k > 1 else None
            acc_below = None
            if below is not None:
                s = task.sample_test(1, gen).x[0, :N]
                acc_below = float((below.all_queries(s)[0] == s).float().mean())
            # the task's own batches, through the full forward
            batch = task.sample_test(max(1, min(16, 100_000 // N)), gen)
            acc_task = float((m.forward(batch.x).argmax(-1) == batch.y).float().mean())
            rows.append({"N": N, "eta": round(m.eta, 3), "k_min": k, "width": m.D, "params": m.params,
                         "coherence": round(max_coherence(m.codes), 4), "min_target_mass": worst,
                         "certified": ok, "accuracy_all_positions": correct / total,
                         "accuracy_task_batch": acc_task, "accuracy_at_k_min-1": acc_below})
        if len(rows) >= 2:  # k_min = a ln N + b
            a, b = np.polyfit([math.log(r["N"]) for r in rows], [r["k_min"] for r in rows], 1)
            for r in rows:
                r["fit_k"] = round(float(a * math.log(r["N"]) + b), 1)
                r["fit"] = f"k = {a:.2f} ln N + {b:.1f}"
        return rows

    def plot(self, rows: list[dict], stem: Path) -> list[Path]:
        from ..reporting.plots import plt, save

        fig, ax = plt.subplots(figsize=(5.2, 3.8))
        N = [r["N"] for r in rows]
        ax.plot(N, [r["k_min"] for r in rows], "o", label="smallest k, 100% on every position")
        if "fit_k" in rows[0]:
            ax.plot(N, [r["fit_k"] for r in rows], "-", label=rows[0]["fit"])
        ax.set_xscale("log")
        ax.set_xlabel("N")
        ax.set_ylabel("code width k")
        ax.set_title("Index lookup, 1-layer TF (eta = 4 ln N)")
        ax.legend()
        return save(fig, stem)
