"""BaseConv (Arora et al. 2023, "Zoology"): a gated long convolution, the simplest of the
attention-free mixers that Zoology measures on associative recall, in the pre-LN block stack of
`retnet` (models/mixers/stack.py).

Per channel c of the width, with u = h W_u and g = h W_g (linear maps of the block's input):
    y_t = g_t * sum_{s=0}^{min(t, K-1)} f_s u_{t-s}            (then a linear projection)
with an explicit filter f (K taps per channel, K = `kernel`, default the task's whole length) and
a short causal convolution (`short`, 3 taps) on u first, as in Zoology's BaseConv.
- parallel (training) form: depthwise causal convolutions over the whole sequence;
- recurrent form: a buffer of the last K values of u (and of the short conv's inputs).
The state is that buffer: K * width floats per layer (with K = the task's length, a model whose
state grows with N, like attention's KV cache; with a short K, a fixed-size state).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass

import torch
from torch import nn

from ...errors import ArchsepError, check
from ...tasks.base import TaskSpec
from ..ops import causal_conv
from .stack import Mixer, MixerConfig, MixerStack
from ..registry import MODELS


class GatedConv(Mixer):
    def __init__(self, width: int, kernel: int, short: int):
        super().__init__()
        self.kernel, self.short = kernel, short
        self.state_floats = (kernel + short - 1) * width
        self.u, self.g = nn.Linear(width, width), nn.Linear(width, width)
        self.short_taps = nn.Parameter(torch.randn(width, short) / short**0.5)
        # a decaying start: early taps larger, as a long filter is usually initialised
        decay = torch.exp(-torch.arange(kernel, dtype=torch.float32) / max(1.0, kernel / 4))
        self.taps = nn.Parameter(torch.randn(width, kernel) * decay / kernel**0.5)
        self.out = nn.Linear(width, width)

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        K = min(self.kernel, h.shape[1])
        u = causal_conv(self.u(h), self.short_taps)  # (B, L, W)
        if last_only:  # the last position alone: its window of u against the taps, reversed
            y = (u[:, -K:].flip(1) * self.taps[:, :K].T).sum(1, keepdim=True)  # (B, 1, W)
            return self.out(self.g(h[:, -1:]) * y)
        y = causal_conv(u, self.taps[:, :K])  # (B, L, W)
        return self.out(self.g(h) * y)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        W = self.u.out_features
        return {"x": torch.zeros(batch, self.short - 1, W, device=device, dtype=dtype),
                "u": torch.zeros(batch, self.kernel, W, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t: h (B, W) -> output (B, W); the buffers keep the last short-1 inputs of the
        short conv and the last `kernel` values of u, the newest last."""
        xs = torch.cat([state["x"], self.u(h)[:, None]], 1)  # (B, short, W)
        u = (xs.flip(1) * self.short_taps.T).sum(1)  # (B, W)
        us = torch.cat([state["u"][:, 1:], u[:, None]], 1)  # (B, kernel, W)
        y = (us.flip(1) * self.taps.T).sum(1)  # (B, W): zeros before position 0 add nothing
        return self.out(self.g(h) * y), {"x": xs[:, 1:], "u": us}


@dataclass(frozen=True)
class LongConvConfig(MixerConfig):
    """A long-convolution stack's config (baseconv, hyena): MixerConfig's fields, a filter of
    `kernel` taps (None: the task's length, so `build` passes that length to `mixer`) and a
    short causal convolution of `short` taps."""

    kernel: int | None = None
    short: int = 3

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        check(self.kernel is None or self.kernel >= 1, "kernel", f"must be >= 1 (None: the task's length), "
                                                                 f"got {self.kernel}")
        check(self.short >= 1, "short", f"must be >= 1, got {self.short}")

    def taps(self, seq_len: int | None) -> int:
        """The filter's taps: `kernel`, or when it is None the task's length `seq_len`, which
        `build(spec)` passes and `mixer(layer)` alone does not know."""
        if self.kernel is not None:
            return self.kernel
        if seq_len is None:
            raise ArchsepError.at("kernel", "None (the task's length) needs the task: build(spec) passes its length; "
                                            "mixer(layer) alone needs kernel set")
        return seq_len

    @abc.abstractmethod
    def mixer(self, layer: int, seq_len: int | None = None) -> Mixer:
        """Layer `layer`'s mixer, its filters of `taps(seq_len)` taps."""

    def build(self, spec: TaskSpec) -> MixerStack:  # MixerConfig's, with the task's length for kernel None
        return MixerStack(self, spec, [self.mixer(i, spec.seq_len) for i in range(self.layers)])


@MODELS.register("baseconv")
@dataclass(frozen=True)
class BaseConvConfig(LongConvConfig):
    """BaseConv: a gated long convolution (an explicit filter of `kernel` taps per channel,
    default the task's whole length, after a short causal convolution of `short` taps) as the
    mixer of `layers` pre-LN blocks of width `width`, each with a GELU MLP of width `mlp_width`
    (default 4*width); positions: learned | sinusoidal | none added to the embedding (none: the
    convolution is position-aware)."""

    def short_name(self) -> str:
        return f"BaseConv-({self.layers},{self.width})"

    def mixer(self, layer: int, seq_len: int | None = None) -> GatedConv:
        """Layer `layer`'s mixer, its filter of `kernel` taps (None: `seq_len`, the task's length)."""
        return GatedConv(self.width, self.taps(seq_len), self.short)
