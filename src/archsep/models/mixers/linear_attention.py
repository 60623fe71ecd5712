"""Causal linear attention (Katharopoulos et al. 2020, "Transformers are RNNs") in the pre-LN
block stack of `tf-preln`: softmax(q·k) is replaced by phi(q)·phi(k) for a feature map phi
(elu(x)+1 by default, relu, or Based's `taylor`, below), so that, per head,
    o_n = phi(q_n) S_n / (phi(q_n) · z_n + eps),   S_n = sum_{m<=n} phi(k_m)^T v_m,   z_n = sum_{m<=n} phi(k_m)
- parallel form: A = tril(phi(Q) phi(K)^T), O = (A V) / (A 1 + eps);
- recurrent form: S_n = S_{n-1} + phi(k_n)^T v_n, z_n = z_{n-1} + phi(k_n), as written above.
eps (1e-6) only guards an all-zero denominator (relu features), identically in both forms.

Feature maps, on each head's q and k of width d:
- elu1: elu(x) + 1 and relu: relu(x), elementwise (D = d features);
- taylor (Arora et al. 2024, "Based"): the 2nd-order Taylor expansion of exp(q·k/sqrt(d)),
  phi(x) = [1, x / d^(1/4), (x ⊗ x) / (sqrt(2) sqrt(d))] with the outer product flattened
  (D = 1 + d + d^2 features), so phi(q)·phi(k) = 1 + s + s^2/2, s = q·k/sqrt(d): always >= 1/2,
  so the denominator never vanishes. The parallel form computes that kernel from q·k directly
  (no D-wide features); the step form carries the D-wide features.
`feature_dim` (default None: d = the head width) projects each head's q and k to `feature_dim`
dimensions before the map (Based uses 16 with taylor: D = 273 rather than 1 + d + d^2 at the
head width); v keeps the head width.

Positions: absolute positions added to the embedding (`positions`, learned by default as in
`tf-preln`: linear attention alone only sees the set of the prefix's tokens, not their order).

State: per layer and head S (D x d_head) and z (D) = layers * heads * D * (width/heads + 1)
floats, D the feature count above: layers * (width^2/heads + width) for elu1 and relu without
`feature_dim`.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import check
from .stack import Mixer, MixerConfig, check_heads
from ..registry import MODELS



def elu1(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1


def taylor(x: torch.Tensor) -> torch.Tensor:
    """Based's feature map: x (..., d) -> [1, x / d^(1/4), vec(x ⊗ x) / (sqrt(2) sqrt(d))] (..., 1 + d + d^2),
    so that taylor(q) · taylor(k) = 1 + s + s^2 / 2 with s = q·k / sqrt(d)."""
    d = x.shape[-1]
    outer = (x[..., :, None] * x[..., None, :]).flatten(-2)  # (..., d^2)
    return torch.cat([torch.ones_like(x[..., :1]), x / d ** 0.25, outer / math.sqrt(2 * d)], -1)


def taylor_kernel(s: torch.Tensor, d: int) -> torch.Tensor:
    """taylor(q) · taylor(k) from the raw products s = q·k (any shape) of d-wide q and k."""
    s = s / math.sqrt(d)
    return 1 + s + 0.5 * s * s


# module-level functions, not lambdas: a built model pickles. Each maps (..., d) -> (..., D).
FEATURES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"elu1": elu1, "relu": F.relu, "taylor": taylor}
# phi(q)·phi(k) from q·k, for the maps that have a closed form: the parallel form's scores
KERNELS: dict[str, Callable[[torch.Tensor, int], torch.Tensor]] = {"taylor": taylor_kernel}
EPS = 1e-6


def feature_count(feature: str, d: int) -> int:
    """D: the features phi makes of a d-wide head's q or k."""
    return 1 + d + d * d if feature == "taylor" else d


class LinearAttention(Mixer):
    def __init__(self, width: int, heads: int, feature: str, feature_dim: int | None = None):
        super().__init__()
        self.heads, self.dh, self.phi, self.feature = heads, width // heads, FEATURES[feature], feature
        self.dk = feature_dim or self.dh  # q and k per head, before the feature map
        self.D = feature_count(feature, self.dk)  # features per head
        self.state_floats = heads * self.D * (self.dh + 1)
        self.q = nn.Linear(width, heads * self.dk)  # apart from k, v: a pruned layer needs one query
        self.kv = nn.Linear(width, heads * self.dk + width)  # k then v; (width, 2 width) at dk = dh
        self.proj = nn.Linear(width, width)

    def _qkv(self, hq: torch.Tensor, h: torch.Tensor, features: bool
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """h (B, L, W), hq (B, Lq, W) its last Lq positions -> q (B, H, Lq, E), k (B, H, L, E) and
        v (B, H, L, d_head): E = D with `features` (phi(q), phi(k)), else dk (the raw q, k)."""
        k, v = self.kv(h).split([self.heads * self.dk, self.dh * self.heads], -1)  # (B, L, H dk), (B, L, W)
        q, k = (t.unflatten(-1, (self.heads, self.dk)) for t in (self.q(hq), k))  # (B, L, H, dk)
        if features:
            q, k = self.phi(q), self.phi(k)  # on contiguous rows, before the transpose: (B, L, H, D)
        v = v.unflatten(-1, (self.heads, self.dh))
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        L = h.shape[1]
        hq = h[:, -1:] if last_only else h  # (B, Lq, W), Lq = 1 or L: the positions computed
        kernel = KERNELS.get(self.feature)
        q, k, v = self._qkv(hq, h, features=kernel is None)  # (B, H, Lq, E), k (B, H, L, E), v (B, H, L, dh)
        causal = torch.ones(L, L, dtype=q.dtype, device=q.device).tril()[L - q.shape[2]:]  # (Lq, L)
        scores = q @ k.transpose(-1, -2)  # (B, H, Lq, L): phi(q)·phi(k), or q·k for a closed-form kernel
        a = (scores if kernel is None else kernel(scores, self.dk)) * causal
        y = (a @ v) / (a.sum(-1, keepdim=True) + EPS)  # (B, H, Lq, dh)
        return self.proj(y.transpose(1, 2).flatten(2))  # (B, Lq, W)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        return {"S": torch.zeros(batch, self.heads, self.D, self.dh, device=device, dtype=dtype),
                "z": torch.zeros(batch, self.heads, self.D, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One position: h (B, W) -> output (B, W), with S and z updated by this position's key."""
        q, k, v = (x[:, :, 0] for x in self._qkv(h[:, None], h[:, None], features=True))  # (B, H, D), v (B, H, dh)
        S = state["S"] + k[..., :, None] * v[..., None, :]  # (B, H, D, dh)
        z = state["z"] + k  # (B, H, D)
        y = (q[..., None, :] @ S)[..., 0, :] / ((q * z).sum(-1, keepdim=True) + EPS)  # (B, H, dh)
        return self.proj(y.flatten(1)), {"S": S, "z": z}


def check_feature_dim(feature_dim: int | None) -> None:
    check(feature_dim is None or feature_dim >= 1, "feature_dim", f"must be >= 1, got {feature_dim}")


@MODELS.register("linear-tf")
@dataclass(frozen=True)
class LinearTransformerConfig(MixerConfig):
    """Causal linear-attention Transformer: linear attention in `heads` heads (feature map elu1 =
    elu(x)+1, relu, or taylor: Based's 2nd-order Taylor expansion of exp) as the mixer of
    `layers` pre-LN blocks of width `width`, each with a GELU MLP of width `mlp_width` (default
    4*width); q and k projected to `feature_dim` per head before the map (default None: the head
    width); positions: learned | sinusoidal | none, added to the embedding."""

    heads: int = 4
    feature: Literal["elu1", "relu", "taylor"] = "elu1"
    positions: Literal["learned", "sinusoidal", "none"] = "learned"  # MixerConfig's field, its own default
    feature_dim: int | None = None

    def params(self) -> dict:
        """The fields, less `feature_dim` at its default None (added after runs were stored: the
        stored run ids stay the same)."""
        d = super().params()
        if d["feature_dim"] is None:
            del d["feature_dim"]
        return d

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        check_heads(self)
        check(self.feature in FEATURES, "feature", f"must be one of {', '.join(FEATURES)}, got {self.feature!r}")
        check_feature_dim(self.feature_dim)

    def short_name(self) -> str:
        return f"LinTF-({self.layers},{self.width})"

    def mixer(self, layer: int) -> LinearAttention:
        return LinearAttention(self.width, self.heads, self.feature, self.feature_dim)
