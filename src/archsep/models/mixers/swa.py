"""Sliding-window attention (local softmax attention, as in Longformer's local heads and
Mistral's layers) in the pre-LN block stack of `retnet` (models/mixers/stack.py).

Each position attends causally to the last `window` positions, itself included:
    o_t = softmax_{s in (t - window, t]}(q_t . k_s / sqrt(d)) v_s       per head (d = width/heads).
- parallel (training) form: the whole sequence with a band mask (fused attention);
- recurrent form: a cache of the last `window` keys and values, the oldest dropped at each step.
Both are the same computation; the state is fixed in size (2 * window * width floats per layer),
so with a window below N the model is a recurrent one in the sense of paper A's bounds.

Positions: rotary (`rope`, RoPE: q and k of each head rotated by angles t * base^(-2i/d), so a
score depends on the offset t - s alone, which the window keeps bounded) and/or an absolute
embedding (`positions`). A pruned last block computes the last query against its window only.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import check
from ..attention import attend, rotate
from .stack import Mixer, MixerConfig, check_heads
from ..registry import MODELS

def band_mask(Lq: int, L: int, window: int, device=None) -> torch.Tensor:
    """(Lq, L) bool: query i (the last Lq of L positions) sees key j iff 0 <= i - j < window."""
    i = torch.arange(L - Lq, L, device=device)[:, None]
    j = torch.arange(L, device=device)[None]
    return (i - j >= 0) & (i - j < window)


class LocalAttention(Mixer):
    def __init__(self, width: int, heads: int, window: int, rope: bool):
        super().__init__()
        check(width // heads % 2 == 0 or not rope, "rope", f"needs an even head width, got {width // heads}")
        self.heads, self.dh, self.window, self.rope = heads, width // heads, window, rope
        self.state_floats = 2 * window * width
        self.q = nn.Linear(width, width, bias=False)
        self.kv = nn.Linear(width, 2 * width, bias=False)
        self.out = nn.Linear(width, width, bias=False)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, L, W) -> (B, H, L, d)."""
        return x.unflatten(-1, (self.heads, self.dh)).transpose(1, 2)

    def _rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return rotate(x, positions) if self.rope else x

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        L = h.shape[1]
        if last_only:
            h = h[:, -min(L, self.window):]  # the last query sees only its window
        Lk = h.shape[1]
        hq = h[:, -1:] if last_only else h  # (B, Lq, W)
        pos = torch.arange(L - Lk, L, device=h.device)
        q = self._rotate(self._heads(self.q(hq)), pos[-hq.shape[1]:])  # (B, H, Lq, d)
        k, v = (self._heads(x) for x in self.kv(h).chunk(2, -1))  # (B, H, Lk, d) each
        k = self._rotate(k, pos)
        mask = band_mask(q.shape[2], Lk, self.window, h.device)  # (Lq, Lk)
        bias = torch.zeros(mask.shape, dtype=q.dtype, device=h.device).masked_fill(~mask, float("-inf"))
        y = attend(q, k, v, causal=False, bias=bias)  # (B, H, Lq, d); written out under vmap (stacked seeds)
        return self.out(y.transpose(1, 2).flatten(2))  # (B, Lq, W)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        z = torch.zeros(batch, self.heads, self.window, self.dh, device=device, dtype=dtype)
        return {"k": z, "v": z.clone()}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t: h (B, W) -> output (B, W); the cache keeps the last `window` keys and values
        (rotated at their own positions), the newest last."""
        pos = torch.tensor([t], device=h.device)
        q = self._rotate(self._heads(self.q(h[:, None])), pos)  # (B, H, 1, d)
        k, v = (self._heads(x) for x in self.kv(h[:, None]).chunk(2, -1))  # (B, H, 1, d) each
        k = self._rotate(k, pos)
        ks = torch.cat([state["k"][:, :, 1:], k], 2)  # (B, H, window, d)
        vs = torch.cat([state["v"][:, :, 1:], v], 2)
        seen = torch.arange(self.window, device=h.device) >= self.window - (t + 1)  # slots filled so far
        y = F.scaled_dot_product_attention(q, ks, vs, attn_mask=seen[None])  # (B, H, 1, d)
        return self.out(y[:, :, 0].flatten(1)), {"k": ks, "v": vs}


@MODELS.register("swa")
@dataclass(frozen=True)
class SlidingWindowConfig(MixerConfig):
    """Sliding-window attention: causal softmax attention over the last `window` positions in
    `heads` heads, as the mixer of `layers` pre-LN blocks of width `width`, each with a GELU MLP
    of width `mlp_width` (default 4*width); rotary positions on q and k (`rope`) and/or absolute
    ones added to the embedding (`positions`: learned | sinusoidal | none)."""

    heads: int = 4
    window: int = 16
    rope: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        check_heads(self)
        check(self.window >= 1, "window", f"must be >= 1, got {self.window}")
        check(not self.rope or (self.width // self.heads) % 2 == 0, "rope",
              f"needs an even head width (width / heads), got {self.width // self.heads}")

    def short_name(self) -> str:
        return f"SWA-({self.layers},{self.width},w{self.window})"

    def mixer(self, layer: int) -> LocalAttention:
        return LocalAttention(self.width, self.heads, self.window, self.rope)
