"""RetNet (Sun et al. 2023, "Retentive Network"): multi-scale retention in a pre-LN block stack.

Per head h (of H) a fixed decay gamma_h = 1 - 2^(-5-h) (the paper's choice). With
q_n, k_n, v_n the head's projections of position n (q scaled by 1/sqrt(d_head)):
- parallel form: Y = (Q K^T ⊙ D) V with D[n, m] = gamma^(n-m) for n >= m, else 0;
- recurrent form: S_n = gamma S_{n-1} + k_n^T v_n, o_n = q_n S_n (S: d_head x d_head).
The heads' outputs are concatenated, normalised by a GroupNorm with one group per head, gated by
swish(X W_G) and projected: MSR(X) = (swish(X W_G) ⊙ GroupNorm(Y)) W_O, as in the paper.

Rotation (`rotation=True`, the default): the paper's xPos-style relative position, q_n and k_m
multiplied by e^{i n θ} and e^{i m θ} (θ_j = 10000^(-2j/d_head)), written in the real RoPE form
(channel pairs (j, j + d_head/2) of each head rotated by nθ_j), so that q_n·k_m depends on n-m; it needs an even d_head.
The xPos length-extrapolation scale is left out (the decay does its job). Not in the paper's
block: absolute positions, which `positions` can add (default none, as in the paper).

Simplifications, stated: v has the model width (the paper widens it to 2 x width), and the
paper's retention-score normalisations (for numerical stability) are left out: GroupNorm makes
the output invariant to the scale of each head's output row anyway (up to its eps).

State: per layer, one d_head x d_head matrix per head = layers * width^2 / heads floats.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...errors import check
from ..ops import gated_output
from .stack import Mixer, MixerConfig, check_heads
from ..registry import MODELS


def decay_gammas(heads: int) -> torch.Tensor:
    """(heads,) the paper's per-head decays, gamma_h = 1 - 2^(-5-h)."""
    return 1 - 2.0 ** (-5 - torch.arange(heads, dtype=torch.float64))


def rotate(x: torch.Tensor, pos: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """Rotate channel pairs (j, j + d/2) of each head of x (B, L, H, d) by angle pos * theta_j;
    pos (L,). (RoPE's half-split layout: the same map as rotating adjacent pairs, up to a fixed
    permutation of the channels, which the learned projections absorb; contiguous, so faster.)"""
    angle = pos[:, None] * theta  # (L, d/2)
    cos, sin = (f(angle)[:, None].to(x.dtype) for f in (torch.cos, torch.sin))  # (L, 1, d/2)
    x1, x2 = x.chunk(2, -1)  # (B, L, H, d/2) each
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)  # (B, L, H, d)


class Retention(Mixer):
    gamma: torch.Tensor  # (H,) buffers
    theta: torch.Tensor  # (d_head / 2,)

    def __init__(self, width: int, heads: int, rotation: bool):
        super().__init__()
        self.heads, self.dh, self.rotation = heads, width // heads, rotation
        self.state_floats = heads * self.dh * self.dh
        self.q = nn.Linear(width, width, bias=False)  # apart from k, v: a pruned layer needs one query
        self.kv = nn.Linear(width, 2 * width, bias=False)
        self.gate = nn.Linear(width, width, bias=False)
        self.out = nn.Linear(width, width, bias=False)
        self.norm = nn.GroupNorm(heads, width)
        # 1 - 2^(-5-h) is exact in float32 (and so in any dtype the model is cast to) up to h = 18
        self.register_buffer("gamma", decay_gammas(heads).float(), persistent=False)
        self.register_buffer("theta", 10000.0 ** (-torch.arange(0, self.dh, 2) / self.dh), persistent=False)

    def decay(self, L: int, last_only: bool = False) -> torch.Tensor:
        """(H, L, L) D[h, n, m] = gamma_h^(n-m) for n >= m, else 0; only the last row n = L-1,
        (H, 1, L), when last_only."""
        m = torch.arange(L, device=self.gamma.device)
        diff = m[-1:, None] - m if last_only else m[:, None] - m  # (L, L) or (1, L)
        return self.gamma[:, None, None] ** diff.clamp(min=0) * (diff >= 0)  # (H, L, L) or (H, 1, L)

    def _qkv(self, hq: torch.Tensor, h: torch.Tensor, pos: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h (B, L, W) at positions pos (L,), hq (B, Lq, W) its last Lq positions -> q (B, H, Lq,
        d_head) scaled by 1/sqrt(d_head), k and v (B, H, L, d_head); q and k rotated."""
        B, L, Lq = h.shape[0], h.shape[1], hq.shape[1]
        q = self.q(hq).view(B, Lq, self.heads, self.dh)
        k, v = self.kv(h).view(B, L, 2, self.heads, self.dh).unbind(2)
        if self.rotation:
            q, k = rotate(q, pos[L - Lq:], self.theta), rotate(k, pos, self.theta)
        return (q * self.dh**-0.5).transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def _output(self, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:  # h, y (..., W) -> (..., W)
        return gated_output(self.gate, self.norm, self.out, h, y)

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        L = h.shape[1]
        hq = h[:, -1:] if last_only else h  # (B, Lq, W), Lq = 1 or L: the positions computed
        q, k, v = self._qkv(hq, h, torch.arange(L, device=h.device))  # (B, H, Lq, dh), k, v (B, H, L, dh)
        scores = (q @ k.transpose(-1, -2)) * self.decay(L, last_only).to(q.dtype)  # (B, H, Lq, L)
        y = (scores @ v).transpose(1, 2).flatten(2)  # (B, Lq, W)
        return self._output(hq, y)  # (B, Lq, W)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        return {"S": torch.zeros(batch, self.heads, self.dh, self.dh, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t: h (B, W) -> output (B, W); S_t = gamma S_{t-1} + k_t^T v_t, o_t = q_t S_t."""
        pos = torch.tensor([t], device=h.device)
        q, k, v = (x[:, :, 0] for x in self._qkv(h[:, None], h[:, None], pos))  # (B, H, dh) each
        S = self.gamma[:, None, None] * state["S"] + k[..., :, None] * v[..., None, :]  # (B, H, dh, dh)
        y = (q[..., None, :] @ S)[..., 0, :]  # (B, H, dh)
        return self._output(h, y.flatten(1)), {"S": S}


@MODELS.register("retnet")
@dataclass(frozen=True)
class RetNetConfig(MixerConfig):
    """RetNet: multi-scale retention (`heads` heads with decays 1 - 2^(-5-h)) as the mixer of
    `layers` pre-LN blocks of model width `width`, each with a GELU MLP of width `mlp_width`
    (default 4*width).
    rotation: the paper's relative rotation of q and k (needs an even width/heads);
    positions: absolute positions added to the embedding (learned | sinusoidal | none)."""

    heads: int = 4
    rotation: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        check_heads(self)
        check(not self.rotation or (self.width // self.heads) % 2 == 0, "rotation",
              f"needs an even head width, got width/heads = {self.width // self.heads} (or set rotation = false)")

    def short_name(self) -> str:
        return f"RetNet-({self.layers},{self.width})"

    def mixer(self, layer: int) -> Retention:
        return Retention(self.width, self.heads, self.rotation)
