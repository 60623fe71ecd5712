"""DeltaNet (Schlag et al. 2021, "Linear Transformers Are Secretly Fast Weight Programmers";
Yang et al. 2024, "Parallelizing Linear Transformers with the Delta Rule over Sequence Length")
and Gated DeltaNet (Yang et al. 2024, "Gated Delta Networks") in the pre-LN block stack of
`retnet` (models/mixers/stack.py).

Per head (of H, d = width/H), with k_t and q_t L2-normalised, v_t, a writing strength
beta_t = sigmoid(x_t w_beta) and (gated form) a decay alpha_t = exp(-softplus(x_t w_alpha + b)
* exp(A_log)) in (0, 1), one scalar per head each:
    delta rule:  S_t = S_{t-1} - beta_t (S_{t-1} k_t - v_t) k_t^T = S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
    gated:       S_t = alpha_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T
    output:      o_t = S_t q_t      (S: d x d, values x keys)
`gated = false` is the delta rule (alpha = 1).

Forms, both computing the same outputs:
- recurrent form: `step`, the update above one position at a time;
- chunked (training) form, Yang et al.'s WY form in chunks of CHUNK positions: within a chunk,
  with gamma_t the product of alpha over the chunk up to t and G[t, i] = gamma_t / gamma_i
  (i <= t, from sums of log alpha: <= 1), T = (I + diag(beta) (G ⊙ strict-tril(K K^T)))^{-1} diag(beta)
  (a unit lower-triangular solve), U = T V and W = T (gamma ⊙ K), then from the chunk's start
  state S0:  U' = U - W S0^T,  O = (gamma ⊙ Q) S0^T + (G ⊙ tril(Q K^T)) U',
  S_end = gamma_last S0 + U'^T ((gamma_last / gamma) ⊙ K).
  Only a loop over L/CHUNK chunks stays in Python. (Derived from the recurrence: unrolled over a
  chunk, S_t = gamma_t S0 + sum_{i<=t} (gamma_t/gamma_i) u'_i k_i^T, with u'_t the rows of U'.)

Simplifications, stated: q and k are L2-normalised after a SiLU, as Yang et al. (2024); no short
convolutions on q, k, v (their layers have them); the output is normalised by a GroupNorm with one
group per head, gated by swish(x W_G) and projected (as `retnet` and `gla`) for both forms; alpha
uses Mamba-2's parameterisation as Gated DeltaNet does, initialised with exp(A_log) uniform in
[1, 16] and softplus(b) log-uniform in [0.001, 0.1]. No absolute positions by default
(`positions` can add them).

State: per layer, one d x d matrix per head = layers * width^2 / heads floats.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import check
from ..ops import gated_output
from .stack import Mixer, MixerConfig, check_heads
from ..registry import MODELS

CHUNK = 16


def delta_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, log_a: torch.Tensor,
                  chunk: int = CHUNK) -> torch.Tensor:
    """q, k, v (B, H, L, d), beta and log_a (B, H, L) -> o (B, H, L, d), o_t = S_t q_t with
    S_t = e^{log_a_t} S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T, S_0 = 0 (see the module doc)."""
    L = q.shape[2]
    pad = -L % chunk  # padded positions at the end: beta 0, decay 1, q = k = v = 0; sliced off
    q, k, v = (F.pad(x, (0, 0, 0, pad)).unflatten(2, (-1, chunk)) for x in (q, k, v))  # (B, H, n, C, d)
    beta, log_a = (F.pad(x, (0, pad)).unflatten(2, (-1, chunk)) for x in (beta, log_a))  # (B, H, n, C)
    g = log_a.cumsum(-1)  # (B, H, n, C) log gamma from the chunk start
    lower = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()  # (C, C) i <= t
    G = torch.where(lower, g[..., :, None] - g[..., None, :], -math.inf).exp()  # (B, H, n, C, C)
    A = (k @ k.transpose(-1, -2)) * G * beta[..., None]  # (B, H, n, C, C), used strictly below the diagonal
    eye = torch.eye(chunk, dtype=q.dtype, device=q.device)
    system = eye + A.tril(-1)  # (B, H, n, C, C) unit lower triangular
    rhs = beta[..., None] * torch.cat([v, g.exp()[..., None] * k], -1)  # (B, H, n, C, 2d)
    U, W = torch.linalg.solve_triangular(system, rhs, upper=False, unitriangular=True).chunk(2, -1)  # (B, H, n, C, d)
    QK = (q @ k.transpose(-1, -2)) * G  # (B, H, n, C, C), zero above the diagonal
    qg = g.exp()[..., None] * q  # (B, H, n, C, d)
    kg = (g[..., -1:] - g).exp()[..., None] * k  # (B, H, n, C, d) keys decayed to the chunk's end
    S = q.new_zeros(q.shape[:2] + (v.shape[-1], k.shape[-1]))  # (B, H, d_v, d_k)
    starts, news = [], []
    decays = g[..., -1, None, None].exp()  # (B, H, n, 1, 1)
    for U_c, W_c, kg_c, decay in zip(U.unbind(2), W.unbind(2), kg.unbind(2), decays.unbind(2)):  # see gla_chunked
        starts.append(S)
        news.append(U_c - W_c @ S.transpose(-1, -2))  # (B, H, C, d_v) U' = U - W S0^T
        S = decay * S + news[-1].transpose(-1, -2) @ kg_c  # (B, H, d_v, d_k)
    o = qg @ torch.stack(starts, 2).transpose(-1, -2) + QK @ torch.stack(news, 2)  # (B, H, n, C, d_v)
    return o.flatten(2, 3)[:, :, :L]  # (B, H, L, d_v)


class DeltaRule(Mixer):
    def __init__(self, width: int, heads: int, gated: bool):
        super().__init__()
        self.heads, self.dh, self.gated = heads, width // heads, gated
        self.state_floats = heads * self.dh * self.dh
        self.q = nn.Linear(width, width, bias=False)
        self.kv = nn.Linear(width, 2 * width, bias=False)
        self.beta = nn.Linear(width, heads)  # writing strengths (and, gated, decay logits below)
        if gated:
            self.alpha = nn.Linear(width, heads, bias=False)
            dt = torch.exp(torch.rand(heads) * (math.log(0.1) - math.log(0.001)) + math.log(0.001))
            self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^{-1}(dt)
            self.A_log = nn.Parameter(torch.log(1 + 15 * torch.rand(heads)))
        self.gate = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, width, bias=False)
        self.norm = nn.GroupNorm(heads, width)

    def _project(self, h: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """h (B, L, W) -> q, k (L2-normalised), v (B, H, L, d), beta and log alpha (B, H, L)."""
        heads = lambda x: x.unflatten(-1, (self.heads, self.dh)).transpose(1, 2)  # (B, L, W) -> (B, H, L, d)
        k, v = self.kv(h).chunk(2, -1)  # (B, L, W) each
        q, k = (F.normalize(heads(F.silu(x)), dim=-1, eps=1e-6) for x in (self.q(h), k))
        beta = torch.sigmoid(self.beta(h)).transpose(1, 2)  # (B, H, L)
        if self.gated:
            log_a = -F.softplus(self.alpha(h) + self.dt_bias) * self.A_log.exp()  # (B, L, H)
        else:
            log_a = h.new_zeros(h.shape[:2] + (self.heads,))
        return q, k, heads(v), beta, log_a.transpose(1, 2)

    def _output(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # h, y (..., W) -> (..., W)
        return gated_output(self.gate, self.norm, self.out, h, y)

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        q, k, v, beta, log_a = self._project(h)  # (B, H, L, d) x3, (B, H, L) x2
        y = delta_chunked(q, k, v, beta, log_a)  # (B, H, L, d): the scan passes every position anyway
        if last_only:
            h, y = h[:, -1:], y[:, :, -1:]  # (B, 1, W), (B, H, 1, d)
        return self._output(h, y.transpose(1, 2).flatten(2))  # (B, Lq, W)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        return {"S": torch.zeros(batch, self.heads, self.dh, self.dh, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t: h (B, W) -> output (B, W); S_t = alpha_t (S_{t-1} - beta_t (S_{t-1} k_t) k_t^T)
        + beta_t v_t k_t^T, o_t = S_t q_t."""
        q, k, v, beta, log_a = (x[:, :, 0] for x in self._project(h[:, None]))  # (B, H, d) x3, (B, H) x2
        S = state["S"]  # (B, H, d_v, d_k)
        Sk = (S @ k[..., None])[..., 0]  # (B, H, d_v)
        b = beta[..., None, None]  # (B, H, 1, 1)
        S = log_a.exp()[..., None, None] * (S - b * Sk[..., :, None] * k[..., None, :])  # (B, H, d_v, d_k)
        S = S + b * v[..., :, None] * k[..., None, :]  # (B, H, d_v, d_k)
        y = (S @ q[..., None])[..., 0]  # (B, H, d_v)
        return self._output(h, y.flatten(1)), {"S": S}


@MODELS.register("deltanet")
@dataclass(frozen=True)
class DeltaNetConfig(MixerConfig):
    """DeltaNet: delta-rule linear attention in `heads` heads (gated: Gated DeltaNet's decayed
    delta rule) as the mixer of `layers` pre-LN blocks of width `width`, each with a GELU MLP of
    width `mlp_width` (default 4*width); positions: learned | sinusoidal | none, added to the
    embedding."""

    heads: int = 4
    gated: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        check_heads(self)
        check(isinstance(self.gated, bool), "gated", f"must be true or false, got {self.gated!r}")

    def short_name(self) -> str:
        return f"{'GatedDeltaNet' if self.gated else 'DeltaNet'}-({self.layers},{self.width})"

    def mixer(self, layer: int) -> DeltaRule:
        return DeltaRule(self.width, self.heads, self.gated)
