"""Paper A, Theorem 7: nearest neighbour with a two-layer Transformer, on the project's
`nearest-neighbour` task (x_1, y_1, ..., x_m, y_m, then queries; a query's label is that of
its nearest labelled point, with margin gamma between the nearest and the second nearest).

Residual stream: [x (d), onehot(y) (2), c_t (k), c'_t (k), is_point, is_label, 1, layer-1 out
(k), layer-2 out (2)]; c_t are +-1/sqrt(k) position codes, c'_t = c_{t-1} on a label token
(the code of its point).
- Layer 1: score = eta1 <x_i, x_j> - B (1 - is_point_j): the query attends to the labelled
  point of largest inner product; W_V copies that point's position code.
  eta1 = (ln m + 5) / gamma_design keeps the off-target weight below e^-5 whenever the margin
  is at least gamma_design.
- Layer 2: score = eta2 <layer-1 out, c'_j> - B (1 - is_label_j): retrieves the label token of
  the copied code; W_V copies its one-hot label, which the readout argmaxes.
Only the query positions are computed (attention is per query, so this is exact for them).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import torch

from ..tasks.nearest_neighbour import NearestNeighbour
from .base import CONSTRUCTIONS, Construction, attend, max_coherence, rademacher_codes, sharp_scale


class NNTransformer:
    def __init__(self, m: int, d: int, gamma_design: float, k: int | None = None, seed: int = 0):
        self.m, self.d = m, d
        self.k = k or max(8, math.ceil(6 * math.log(m + 1)))
        self.codes = rademacher_codes(m, self.k, torch.Generator().manual_seed(seed))  # one per point
        self.coherence = max_coherence(self.codes)
        self.eta1 = (math.log(max(m, 2)) + 5) / gamma_design
        self.eta2 = 1.5 * sharp_scale(m, self.coherence)  # 1.5: room for the layer-1 leak
        self.width = d + 2 + 2 * self.k + 3 + self.k + 2

    @property
    def params(self) -> int:
        D = self.width
        return 4 * D * D  # two layers of dense W_QK and W_V; the readout is an argmax

    @torch.no_grad()
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, d+2) task inputs -> (B, Q, 2) label scores at the query positions."""
        d, m = self.d, self.m
        B, L, _ = x.shape
        t = torch.arange(L)
        is_point = ((t < 2 * m) & (t % 2 == 0)).float()
        is_label = ((t < 2 * m) & (t % 2 == 1)).float()
        pid = (t.clamp(max=2 * m - 1) // 2)  # the point a token at t < 2m belongs to
        code = self.codes[pid] * is_point.unsqueeze(-1)  # c_t on point tokens
        partner = self.codes[pid] * is_label.unsqueeze(-1)  # c'_t on label tokens
        big1, big2 = 4 * self.eta1, 4 * self.eta2
        queries = x[:, 2 * m:]
        # layer 1: keys are [x_j, 1 - is_point_j]; queries [eta1 x_i, -B]
        k1 = torch.cat([x[..., :d], (1 - is_point).expand(B, L).unsqueeze(-1)], -1)
        q1 = torch.cat([self.eta1 * queries[..., :d], torch.full((*queries.shape[:2], 1), -big1)], -1)
        c_hat = attend(q1, k1, code.expand(B, L, self.k))
        # layer 2: keys [c'_j, 1 - is_label_j]; queries [eta2 c_hat, -B]
        k2 = torch.cat([partner.expand(B, L, self.k), (1 - is_label).expand(B, L).unsqueeze(-1)], -1)
        q2 = torch.cat([self.eta2 * c_hat, torch.full((*c_hat.shape[:2], 1), -big2)], -1)
        return attend(q2, k2, x[..., d:d + 2])


@CONSTRUCTIONS.register("nearest-neighbour")
class NNConstruction(Construction):
    description = "paper A Thm 7: 2-layer Transformer, argmax inner product then label retrieval"
    default_Ns = (100, 1000, 10_000)

    def __init__(self, d: int = 32, gammas: Sequence[float] = (0.003, 0.01, 0.03, 0.1),
                 fixed_gamma: float = 1.0, noise: float = 1.0, queries: int = 4000):
        self.d, self.gammas, self.fixed_gamma = d, tuple(gammas), fixed_gamma
        self.noise, self.queries = noise, queries

    def memory(self, N: int) -> float:
        # n = ceil(queries / N) prompts of N positions: (n, N, d + width) inputs and one
        # (n, 1024, N) chunk of scores, float32, x4 slack
        n = math.ceil(self.queries / max(N // 2, 1))
        return 4 * 4.0 * n * N * (2 * self.d + 64 + 1024)

    def run(self, Ns: Sequence[int], seed: int = 0) -> list[dict]:
        rows = []
        gen = torch.Generator().manual_seed(seed + 1)
        for N in Ns:
            N = max(N, 4)
            for g in self.gammas:
                task = NearestNeighbour(N=N, d=self.d, gamma=g, noise=self.noise)
                n_ex = max(1, math.ceil(self.queries / (N - task.m)))
                b = task.sample(n_ex, gen)
                y = b.y[:, 2 * task.m:]
                xq = b.x[:, 2 * task.m:, :self.d]
                keys = b.x[:, 0:2 * task.m:2, :self.d]
                _, margin = NearestNeighbour.margins(xq, keys)
                row = {"N": N, "gamma": g, "queries": int(y.numel()), "min_margin": float(margin.min())}
                for name, gd in (("theorem", g), ("fixed", self.fixed_gamma)):
                    model = NNTransformer(task.m, self.d, gd, seed=seed)
                    acc = float((model.forward(b.x).argmax(-1) == y).float().mean())
                    row[f"acc_eta_{name}"] = acc
                    row[f"eta1_{name}"] = round(model.eta1, 1)
                row.update({"k": model.k, "width": model.width, "params": model.params,
                            "eta2": round(model.eta2, 1), "coherence": round(model.coherence, 3)})
                rows.append(row)
        return rows

    def plot(self, rows: list[dict], stem: Path) -> list[Path]:
        from ..reporting.plots import MARKERS, plt, save

        fig, ax = plt.subplots(figsize=(6, 3.8))
        for i, N in enumerate(dict.fromkeys(r["N"] for r in rows)):
            rs = [r for r in rows if r["N"] == N]
            ax.plot([r["gamma"] for r in rs], [r["acc_eta_theorem"] for r in rs], marker=MARKERS[i],
                    label=f"N={N}, eta1 = (ln m+5)/gamma")
            ax.plot([r["gamma"] for r in rs], [r["acc_eta_fixed"] for r in rs], marker=MARKERS[i], ls="--",
                    label=f"N={N}, eta1 = {rs[0]['eta1_fixed']} (margin-blind)")
        ax.set_xscale("log")
        ax.set_xlabel("margin gamma")
        ax.set_ylabel("accuracy")
        ax.set_ylim(0.4, 1.02)
        ax.set_title("Nearest neighbour, 2-layer TF")
        ax.legend(fontsize=7)
        return save(fig, stem)
