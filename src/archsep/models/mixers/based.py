"""Based (Arora et al. 2024, "Simple linear attention language models balance the
recall-throughput tradeoff"): a hybrid of global linear attention with Based's Taylor feature
map and local sliding-window softmax attention, in the pre-LN block stack of `retnet`
(models/mixers/stack.py), each mixer the one of another model:
- linear-attention layers: `linear-tf`'s mixer (models/linear_attention.py) with feature map
  `taylor`, phi(x) = [1, x / d^(1/4), vec(x ⊗ x) / (sqrt(2) sqrt(d))], so phi(q)·phi(k) =
  1 + s + s^2/2 with s = q·k/sqrt(d), the 2nd-order Taylor expansion of exp(s); q and k are
  projected to `feature_dim` (default 16) per head before the map, v keeps the head width;
  normalised by the running sum of phi(q)·phi(k) (never below 1/2 per key);
- sliding-window layers: `swa`'s mixer (models/swa.py), causal softmax attention over the last
  `window` positions (default 64), rotary positions (`rope`) on q and k.

Layout: layer i (from 0) is sliding-window attention when (i + 1) is a multiple of
`window_every` (default 2), linear attention otherwise: layers=2 gives [linear, swa], layers=4
[linear, swa, linear, swa], window_every=3 [linear, linear, swa, ...]. With layers <
window_every every layer is linear attention.

Simplifications: Based's full models also interleave gated-convolution (BaseConv) layers and put
a short causal convolution before the linear attention's projections; both are left out here
(order reaches the linear layers only through the sliding-window layers' rotary positions or an
absolute embedding, `positions`, none by default). The parallel form computes the Taylor kernel
from q·k (a (L, L) score matrix, as `linear-tf`), not Based's chunked IO-aware kernels.

State per sequence: per linear layer heads * D * (width/heads + 1) floats, D = 1 + f + f^2 with
f = feature_dim (S: D x head width and z: D, per head); per sliding-window layer 2 * window *
width (the window's keys and values).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import check
from .linear_attention import LinearAttention, check_feature_dim
from .stack import Mixer, MixerConfig, check_heads
from ..registry import MODELS
from .swa import LocalAttention


def is_window_layer(i: int, window_every: int) -> bool:
    """Whether layer i (from 0) is a sliding-window layer: every `window_every`-th layer."""
    return (i + 1) % window_every == 0


@MODELS.register("based")
@dataclass(frozen=True)
class BasedConfig(MixerConfig):
    """Based: Taylor linear attention (q, k projected to `feature_dim` per head; None: the head
    width) alternating with sliding-window softmax attention over the last `window` positions
    (every `window_every`-th layer; rotary q and k when `rope`), `heads` heads, in `layers` pre-LN
    blocks of width `width`, each followed by a GELU MLP of width `mlp_width` (default 4*width);
    absolute positions (`positions`: learned | sinusoidal | none) added to the embedding."""

    heads: int = 4
    feature_dim: int | None = 16
    window: int = 64
    window_every: int = 2
    rope: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        check_heads(self)
        check_feature_dim(self.feature_dim)
        check(self.window >= 1, "window", f"must be >= 1, got {self.window}")
        check(self.window_every >= 2, "window_every",
              f"must be >= 2 (every layer a sliding-window one is `swa`), got {self.window_every}")
        has_window = self.layers >= self.window_every
        check(not (self.rope and has_window) or (self.width // self.heads) % 2 == 0, "rope",
              f"needs an even head width (width / heads), got {self.width // self.heads}")

    def short_name(self) -> str:
        return f"Based-({self.layers},{self.width})"

    def mixer(self, layer: int) -> Mixer:
        if is_window_layer(layer, self.window_every):
            return LocalAttention(self.width, self.heads, self.window, self.rope)
        return LinearAttention(self.width, self.heads, "taylor", self.feature_dim)
