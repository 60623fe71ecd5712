"""Gated linear attention (Yang et al. 2023, "Gated Linear Attention Transformers with
Hardware-Efficient Training") in the pre-LN block stack of `retnet` (models/mixers/stack.py).

Per head (of H, d = width/H), with q_t (scaled by 1/sqrt(d)), k_t, v_t the head's projections of
position t and a data-dependent decay per key dimension
    alpha_t = sigmoid(x_t W_a + b_a)^(1/tau)    (tau = 16, the paper's normaliser),
- recurrent form: S_t = diag(alpha_t) S_{t-1} + k_t^T v_t, o_t = q_t S_t (S: d x d);
- chunked (training) form, the paper's chunkwise form: positions in chunks of CHUNK; with
  b_t = sum of log alpha over the chunk up to t, within a chunk
  o_t = (q_t ⊙ e^{b_t}) S_start + sum_{s<=t} ((q_t ⊙ e^{b_t}) · (k_s ⊙ e^{-b_s})) v_s, and the
  state passes from chunk to chunk as S_end = diag(e^{b_last}) S_start + (K ⊙ e^{b_last - b})^T V
  (a loop over L/CHUNK chunks; everything inside a chunk is a matrix product).
The heads' outputs are normalised by a GroupNorm with one group per head, gated by swish(x W_G)
and projected, as in the paper (and `retnet`).

Stability: e^{-b_s} grows along a chunk. log alpha_t is floored at LOG_ALPHA_MIN = -5 (alpha >=
0.0067, reached only for a gate logit below -80: never at any ordinary scale), in both forms, so
every exponent inside a 16-position chunk stays within +-80 and float32 cannot overflow.
A pruned last block needs only the final state S_L = (K ⊙ e^{b_L - b})^T V (b summed over the
whole sequence; exponents <= 0) and one query.

Simplifications, stated: the decay's projection is full rank (the paper's is low rank, 16, plus a
bias); keys and values both have the head width (the paper halves the keys' width); no absolute
positions by default (`positions` can add them).

State: per layer, one d x d matrix per head = layers * width^2 / heads floats.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import check
from ..ops import gated_output
from .stack import Mixer, MixerConfig, check_heads
from ..registry import MODELS

CHUNK = 16
LOG_ALPHA_MIN = -5.0


def gla_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_a: torch.Tensor,
                chunk: int = CHUNK) -> torch.Tensor:
    """q, k, log_a (B, H, L, dk), v (B, H, L, dv) -> o (B, H, L, dv), o_t = q_t S_t with
    S_t = diag(e^{log_a_t}) S_{t-1} + k_t^T v_t, S_0 = 0, computed chunk by chunk."""
    L = q.shape[2]
    pad = -L % chunk  # zero-padding at the end: keys 0, decays 1; sliced off below
    q, k, v, log_a = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v, log_a))
    q, k, v, log_a = (x.unflatten(2, (-1, chunk)) for x in (q, k, v, log_a))  # (B, H, n, C, d)
    b = log_a.cumsum(3)  # (B, H, n, C, dk) decay from the chunk start, inclusive
    qd = q * b.exp()  # (B, H, n, C, dk)
    intra = (qd @ (k * (-b).exp()).transpose(-1, -2)).tril()  # (B, H, n, C, C)
    b_last = b[..., -1:, :]  # (B, H, n, 1, dk)
    kv = (k * (b_last - b).exp()).transpose(-1, -2) @ v  # (B, H, n, dk, dv): a chunk's keys at its end
    S = q.new_zeros(q.shape[:2] + (q.shape[-1], v.shape[-1]))  # (B, H, dk, dv)
    starts = []
    for decay, kv_c in zip(b_last[..., 0, :, None].exp().unbind(2), kv.unbind(2)):  # unbind: no per-chunk
        starts.append(S)  # gradient buffers of the whole (B, H, n, ...) as indexing would give
        S = decay * S + kv_c  # (B, H, dk, dv)
    o = intra @ v + qd @ torch.stack(starts, 2)  # (B, H, n, C, dv)
    return o.flatten(2, 3)[:, :, :L]  # (B, H, L, dv)


class GatedLinearAttention(Mixer):
    def __init__(self, width: int, heads: int, tau: float):
        super().__init__()
        self.heads, self.dh, self.tau = heads, width // heads, tau
        self.state_floats = heads * self.dh * self.dh
        self.q = nn.Linear(width, width, bias=False)  # apart from the rest: a pruned layer needs one query
        self.kva = nn.Linear(width, 3 * width, bias=False)  # keys, values, decay logits
        self.a_bias = nn.Parameter(torch.zeros(width))
        self.gate = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, width, bias=False)
        self.norm = nn.GroupNorm(heads, width)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, W) -> (B, H, L, d)."""
        return x.unflatten(-1, (self.heads, self.dh)).transpose(1, 2)

    def _kv_decay(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h (B, L, W) -> k, v, log alpha (B, H, L, d), log alpha = logsigmoid(.)/tau >= LOG_ALPHA_MIN."""
        k, v, a = self.kva(h).chunk(3, -1)  # (B, L, W) each
        log_a = (F.logsigmoid(a + self.a_bias) / self.tau).clamp(min=LOG_ALPHA_MIN)
        return self._heads(k), self._heads(v), self._heads(log_a)

    def _output(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # h, y (..., W) -> (..., W)
        return gated_output(self.gate, self.norm, self.out, h, y)

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        hq = h[:, -1:] if last_only else h  # (B, Lq, W), Lq = 1 or L: the positions computed
        q = self._heads(self.q(hq)) * self.dh**-0.5  # (B, H, Lq, d)
        k, v, log_a = self._kv_decay(h)  # (B, H, L, d) each
        if last_only:  # the final state alone: S_L = (K ⊙ e^{b_L - b})^T V, exponents <= 0
            b = log_a.cumsum(2)  # (B, H, L, d)
            S = (k * (b[:, :, -1:] - b).exp()).transpose(-1, -2) @ v  # (B, H, d, d)
            y = q @ S  # (B, H, 1, d)
        else:
            y = gla_chunked(q, k, v, log_a)  # (B, H, L, d)
        return self._output(hq, y.transpose(1, 2).flatten(2))  # (B, Lq, W)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        return {"S": torch.zeros(batch, self.heads, self.dh, self.dh, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t: h (B, W) -> output (B, W); S_t = diag(alpha_t) S_{t-1} + k_t^T v_t, o_t = q_t S_t."""
        q = self._heads(self.q(h[:, None]))[:, :, 0] * self.dh**-0.5  # (B, H, d)
        k, v, log_a = (x[:, :, 0] for x in self._kv_decay(h[:, None]))  # (B, H, d) each
        S = log_a.exp()[..., None] * state["S"] + k[..., :, None] * v[..., None, :]  # (B, H, d, d)
        y = (q[..., None, :] @ S)[..., 0, :]  # (B, H, d)
        return self._output(h, y.flatten(1)), {"S": S}


@MODELS.register("gla")
@dataclass(frozen=True)
class GLAConfig(MixerConfig):
    """Gated linear attention (GLA): linear attention in `heads` heads whose state decays per key
    dimension by sigmoid(x W_a + b)^(1/tau), as the mixer of `layers` pre-LN blocks of width
    `width`, each with a GELU MLP of width `mlp_width` (default 4*width); positions: learned |
    sinusoidal | none, added to the embedding (none, as in the paper)."""

    heads: int = 4
    tau: float = 16.0

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        check_heads(self)
        check(self.tau > 0, "tau", f"must be > 0 (the decay is sigmoid(.)^(1/tau)), got {self.tau}")

    def short_name(self) -> str:
        return f"GLA-({self.layers},{self.width})"

    def mixer(self, layer: int) -> GatedLinearAttention:
        return GatedLinearAttention(self.width, self.heads, self.tau)
