"""Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs") in the pre-LN
block stack of `tf-preln`: softmax(q·k) is replaced by phi(q)·phi(k) for a positive feature map
phi (elu(x)+1 by default, or relu), so that, per head,
    o_n = phi(q_n) S_n / (phi(q_n) · z_n + eps),   S_n = sum_{m<=n} phi(k_m)^T v_m,   z_n = sum_{m<=n} phi(k_m)
- parallel form: A = tril(phi(Q) phi(K)^T), O = (A V) / (A 1 + eps);
- recurrent form: S_n = S_{n-1} + phi(k_n)^T v_n, z_n = z_{n-1} + phi(k_n), as written above.
eps (1e-6) only guards an all-zero denominator (relu features), identically in both forms.

Positions: absolute positions added to the embedding (`positions`, learned by default as in
`tf-preln`: linear attention alone only sees the set of the prefix's tokens, not their order).

State: per layer and head S (d_head x d_head) and z (d_head) = layers * (width^2/heads + width)
floats.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import check
from ..tasks.base import TaskSpec
from .base import ModelConfig
from .mixer_stack import Mixer, MixerStack, check_positions, check_stack
from .registry import MODELS



def elu1(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1


# module-level functions, not lambdas: a built model pickles
FEATURES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"elu1": elu1, "relu": F.relu}
EPS = 1e-6


class LinearAttention(Mixer):
    def __init__(self, width: int, heads: int, feature: str):
        super().__init__()
        self.heads, self.dh, self.phi = heads, width // heads, FEATURES[feature]
        self.state_floats = heads * self.dh * (self.dh + 1)
        self.q = nn.Linear(width, width)  # apart from k, v: a pruned layer needs one query
        self.kv = nn.Linear(width, 2 * width)
        self.proj = nn.Linear(width, width)

    def _qkv(self, hq: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h (B, L, W), hq (B, Lq, W) its last Lq positions -> phi(q) (B, H, Lq, d_head), phi(k)
        and v (B, H, L, d_head)."""
        k, v = self.kv(h).chunk(2, -1)  # (B, L, W) each
        q, k = self.phi(self.q(hq)), self.phi(k)  # features on contiguous rows, before the head split
        q, k, v = (t.unflatten(-1, (self.heads, self.dh)).transpose(1, 2) for t in (q, k, v))
        return q, k, v

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        L = h.shape[1]
        hq = h[:, -1:] if last_only else h  # (B, Lq, W), Lq = 1 or L: the positions computed
        q, k, v = self._qkv(hq, h)  # (B, H, Lq, dh), k, v (B, H, L, dh)
        causal = torch.ones(L, L, dtype=q.dtype, device=q.device).tril()[L - q.shape[2]:]  # (Lq, L)
        a = (q @ k.transpose(-1, -2)) * causal  # (B, H, Lq, L)
        y = (a @ v) / (a.sum(-1, keepdim=True) + EPS)  # (B, H, Lq, dh)
        return self.proj(y.transpose(1, 2).flatten(2))  # (B, Lq, W)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        return {"S": torch.zeros(batch, self.heads, self.dh, self.dh, device=device, dtype=dtype),
                "z": torch.zeros(batch, self.heads, self.dh, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One position: h (B, W) -> output (B, W), with S and z updated by this position's key."""
        q, k, v = (x[:, :, 0] for x in self._qkv(h[:, None], h[:, None]))  # (B, H, dh) each
        S = state["S"] + k[..., :, None] * v[..., None, :]  # (B, H, dh, dh)
        z = state["z"] + k  # (B, H, dh)
        y = (q[..., None, :] @ S)[..., 0, :] / ((q * z).sum(-1, keepdim=True) + EPS)  # (B, H, dh)
        return self.proj(y.flatten(1)), {"S": S, "z": z}


class LinearTransformer(MixerStack):
    def __init__(self, cfg: LinearTransformerConfig, spec: TaskSpec):
        mixers: list[Mixer] = [LinearAttention(cfg.width, cfg.heads, cfg.feature) for _ in range(cfg.layers)]
        super().__init__(cfg, spec, mixers)
        self.cfg = cfg


@MODELS.register("linear-tf")
@dataclass(frozen=True)
class LinearTransformerConfig(ModelConfig):
    """Causal linear-attention Transformer: `layers` pre-LN blocks of width `width` with `heads`
    heads of linear attention (feature map elu1 = elu(x)+1 or relu) and a GELU MLP of width
    `mlp_width` (default 4*width); positions: learned | sinusoidal | none, added to the embedding."""

    layers: int = 2
    width: int = 64
    heads: int = 4
    mlp_width: int | None = None
    feature: Literal["elu1", "relu"] = "elu1"
    positions: Literal["learned", "sinusoidal", "none"] = "learned"

    def __post_init__(self) -> None:
        check_stack(self)
        check(self.feature in FEATURES, "feature", f"must be one of {', '.join(FEATURES)}, got {self.feature!r}")
        check_positions(self)

    def short_name(self) -> str:
        return f"LinTF-({self.layers},{self.width})"

    def build(self, spec: TaskSpec) -> LinearTransformer:
        return LinearTransformer(self, spec)
