"""Hyena (Poli et al. 2023, "Hyena Hierarchy"): the order-2 Hyena operator, a long convolution
gated by the data, in the pre-LN block stack of `retnet` (models/mixers/stack.py).

With v, x1, x2 the three linear projections of the block's input h, each followed by a short
depthwise causal convolution (`short` taps, default 3), per channel c of the width:
    z_t = x1_t * sum_{s<K} h1_s v_{t-s},      y_t = x2_t * sum_{s<K} h2_s z_{t-s}
that is y = x2 ⊙ (h2 ⊛ (x1 ⊙ (h1 ⊛ v))), then a linear projection. The long filters h1, h2
(K taps per channel, K = `kernel`, default the task's whole length) are implicit, as in the paper:
    h_s = exp(-a_c s/K) * MLP(pe(s))          for s = 0..K-1,
- pe(s) = (s/K, sin(2π f s/K), cos(2π f s/K) for f = 1..BANDS): a positional encoding of the tap;
- MLP: Linear(1 + 2 BANDS, F) -> sin(ω ⊙ .) -> Linear(F, F) -> sin(ω' ⊙ .) -> Linear(F, 2 width),
  F = `filter_width` (default 16), sine activations with learned frequencies ω, ω' (init 1);
- the window exp(-a_c s/K) is fixed: channel c's falls to 1% at a fraction p_c of the filter,
  p_c spread evenly from 0.3 (fast) to 1.5 (slow) over the channels, as the paper's
  exponential modulation (the same window for h1 and h2).
- parallel (training) form: the two long convolutions by FFT (zero-padded to 2L: causal, exact to
  float rounding), the short ones by conv1d; `last_only` computes the outer convolution at the
  last position alone (the inner one is needed over the last K positions);
- recurrent form: buffers of the last short-1 inputs of the short convolutions and the last K-1
  values of v and of z; the filters are recomputed from the MLP at each step.
Simplifications, stated: no bias ("D") term beside the long convolutions (tap 0 of the filter
plays its part), no filter normalisation, one head (the paper's order-2 operator as written).

State: per layer (3 (short - 1) + 2 (K - 1)) * width floats (with K = the task's length, a model
whose state grows with N, like baseconv's; with a short K, a fixed-size state).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from ...errors import check
from ..ops import causal_conv, fft_conv
from .baseconv import LongConvConfig
from .stack import Mixer
from ..registry import MODELS

BANDS = 4  # frequencies of the filters' positional encoding
WINDOW_TARGET, WINDOW_FAST, WINDOW_SLOW = 0.01, 0.3, 1.5  # windows fall to 1% at 0.3 .. 1.5 of the filter


class ImplicitFilter(nn.Module):
    """`channels` long filters of up to `kernel` taps: window(s) * MLP(pe(s)) (module docstring)."""

    def __init__(self, channels: int, kernel: int, width: int):
        super().__init__()
        self.channels, self.kernel = channels, kernel
        self.l1, self.l2 = nn.Linear(1 + 2 * BANDS, width), nn.Linear(width, width)
        self.l3 = nn.Linear(width, channels)
        self.w1, self.w2 = nn.Parameter(torch.ones(width)), nn.Parameter(torch.ones(width))

    def forward(self, K: int) -> torch.Tensor:
        """-> (channels, K): the first K <= kernel taps (the same numbers whatever K)."""
        w = self.l1.weight
        s = torch.arange(K, device=w.device, dtype=w.dtype)[:, None] / self.kernel  # (K, 1)
        f = 2 * math.pi * torch.arange(1, BANDS + 1, device=w.device, dtype=w.dtype) * s  # (K, BANDS)
        pe = torch.cat([s, f.sin(), f.cos()], -1)  # (K, 1 + 2 BANDS)
        a = torch.sin(self.w2 * self.l2(torch.sin(self.w1 * self.l1(pe))))  # (K, width)
        # the window's decay a_c over s/K (fixed; made here in the parameters' dtype, exact in each)
        reach = torch.linspace(WINDOW_FAST, WINDOW_SLOW, self.channels // 2, device=w.device, dtype=w.dtype)
        rate = math.log(1 / WINDOW_TARGET) / reach.repeat(2)  # (channels,): h1's channels, then h2's
        return (self.l3(a) * torch.exp(-rate * s)).T  # (channels, K)


class HyenaOperator(Mixer):
    def __init__(self, width: int, kernel: int, short: int, filter_width: int):
        super().__init__()
        self.width, self.kernel, self.short = width, kernel, short
        self.state_floats = (3 * (short - 1) + 2 * (kernel - 1)) * width
        self.proj = nn.Linear(width, 3 * width)  # v, x1, x2
        self.short_taps = nn.Parameter(torch.randn(3 * width, short) / short**0.5)
        self.filter = ImplicitFilter(2 * width, kernel, filter_width)
        self.out = nn.Linear(width, width)

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        K = min(self.kernel, h.shape[1])
        v, x1, x2 = causal_conv(self.proj(h), self.short_taps).transpose(1, 2).chunk(3, 1)  # (B, W, L) each
        h1, h2 = self.filter(K).chunk(2)  # (W, K) each
        z = x1 * fft_conv(v, h1)  # (B, W, L)
        if last_only:  # the outer convolution at the last position alone
            y = x2[..., -1] * (z[..., -K:].flip(-1) * h2).sum(-1)  # (B, W)
            return self.out(y[:, None])  # (B, 1, W)
        y = x2 * fft_conv(z, h2)  # (B, W, L)
        return self.out(y.transpose(1, 2))  # (B, L, W)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        W = self.width
        return {"x": torch.zeros(batch, self.short - 1, 3 * W, device=device, dtype=dtype),
                "v": torch.zeros(batch, self.kernel - 1, W, device=device, dtype=dtype),
                "z": torch.zeros(batch, self.kernel - 1, W, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t: h (B, W) -> output (B, W); the buffers keep the last short-1 inputs of the
        short convolutions and the last K-1 values of v and z, the newest last (zeros before
        position 0 add nothing)."""
        xs = torch.cat([state["x"], self.proj(h)[:, None]], 1)  # (B, short, 3W)
        v, x1, x2 = (xs.flip(1) * self.short_taps.T).sum(1).chunk(3, -1)  # (B, W) each
        h1, h2 = self.filter(self.kernel).chunk(2)  # (W, K) each
        vs = torch.cat([state["v"], v[:, None]], 1)  # (B, K, W)
        z = x1 * (vs.flip(1) * h1.T).sum(1)  # (B, W)
        zs = torch.cat([state["z"], z[:, None]], 1)  # (B, K, W)
        y = x2 * (zs.flip(1) * h2.T).sum(1)  # (B, W)
        return self.out(y), {"x": xs[:, 1:], "v": vs[:, 1:], "z": zs[:, 1:]}


@MODELS.register("hyena")
@dataclass(frozen=True)
class HyenaConfig(LongConvConfig):
    """Hyena: the order-2 Hyena operator y = x2 ⊙ (h2 ⊛ (x1 ⊙ (h1 ⊛ v))) (v, x1, x2 projections
    after a short causal convolution of `short` taps, implicit long filters h1, h2 of `kernel`
    taps, default the task's length, made by a sine MLP of width `filter_width` over the tap's
    position, times an exponential window) as the mixer of `layers` pre-LN blocks of width
    `width`, each with a GELU MLP of width `mlp_width` (default 4*width); positions: learned |
    sinusoidal | none added to the embedding (none: the convolutions are position-aware)."""

    filter_width: int = 16

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions, kernel, short
        check(self.filter_width >= 1, "filter_width", f"must be >= 1, got {self.filter_width}")

    def short_name(self) -> str:
        return f"Hyena-({self.layers},{self.width})"

    def mixer(self, layer: int, seq_len: int | None = None) -> HyenaOperator:
        """Layer `layer`'s mixer, its filters of `kernel` taps (None: `seq_len`, the task's length)."""
        return HyenaOperator(self.width, self.taps(seq_len), self.short, self.filter_width)
