"""Pieces more than one model uses: absolute positions, causal convolutions (direct and by FFT),
RMSNorm, the gated, normalised output of the recurrent-attention mixers, and the vmap test.

Shared, not owned: a mixer imports these from here, never from another mixer's module.
"""
from __future__ import annotations

import math
import typing

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ArchsepError, check


def under_vmap(t: torch.Tensor) -> bool:
    """Whether `t` is a tensor seen inside `vmap` (the stacked path of the engine): fused library
    kernels (torch's attention, the CUDA selective scan) have no vmap rule and are skipped there."""
    try:
        return bool(torch._C._functorch.is_batchedtensor(t))
    except AttributeError:  # private API moved: take the path that vmaps natively
        return True


def sinusoidal_positions(length: int, width: int) -> torch.Tensor:
    """The fixed sin/cos codes of Vaswani et al., (length, width); odd widths drop the last cos."""
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(10000.0) / width))
    pe = torch.zeros(length, width)
    pe[:, 0::2] = torch.sin(pos * freq)
    pe[:, 1::2] = torch.cos(pos * freq)[:, : width // 2]
    return pe


def causal_conv(x: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
    """x (B, L, W), taps (W, K) -> (B, L, W): y_t = sum_{s<K} taps[:, s] * x_{t-s} (zero before 0)."""
    K = taps.shape[1]
    y = F.conv1d(F.pad(x.transpose(1, 2), (K - 1, 0)), taps.flip(-1)[:, None], groups=x.shape[-1])  # (B, W, L)
    return y.transpose(1, 2)


# up to this length a long convolution runs as a (L, L) Toeplitz matrix product per channel, above
# it by FFT: on one CPU thread at width 64-128 and batch 64 the product ran the convolution
# (forward and backward) 1.5-2.7x faster at L = 21-101 and was about even at 151; DSS's training
# steps 1.5-1.7x at N = 20 and 100, the same at 200 (benchmarks/dss_conv.py)
DIRECT_MAX = 128


def long_conv(u: torch.Tensor, k: torch.Tensor, fft: bool = False) -> torch.Tensor:
    """u (B, L, C), k (C, L) -> (B, L, C): y_t = sum_{s<=t} k[:, s] u_{t-s}, the causal convolution
    with a kernel as long as the input. Direct (`toeplitz_conv`) up to `DIRECT_MAX` positions, by
    FFT above (at every length with `fft`, the form before the direct one); the two agree to
    rounding."""
    if u.shape[1] <= DIRECT_MAX and not fft:
        return toeplitz_conv(u, k)
    return fft_conv(u.transpose(1, 2), k).transpose(1, 2)


def toeplitz_conv(u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """`long_conv` as one batched product with each channel's lower-triangular Toeplitz matrix
    T[c, t, s] = k[c, t - s] (0 where s > t): L^2 multiply-adds per channel and sequence."""
    L = u.shape[1]
    i = torch.arange(L, device=u.device)
    lag = i[:, None] - i[None, :]  # (t, s)
    T = k[:, lag.clamp(min=0)] * (lag >= 0)  # (C, L, L)
    # (C, B, L) @ (C, L, L) -> (B, L, C). The CPU's bmm copies every matrix of a strided batch
    # one by one, in both passes: its inputs are made contiguous, and so is the gradient that
    # reaches it through the permute
    y = torch.bmm(u.permute(2, 0, 1).contiguous(), T.transpose(1, 2).contiguous())  # (C, B, L)
    return _ContiguousGrad.apply(y).permute(1, 2, 0)


class _ContiguousGrad(torch.autograd.Function):
    """The identity, whose backward hands on a contiguous gradient."""

    generate_vmap_rule = True  # the engine's stacked path vmaps the model

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x.view_as(x)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        pass

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        return g.contiguous()


def fft_conv(u: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """u (..., L), k (..., K) broadcastable against it, K <= L -> (..., L):
    y_t = sum_{s<K} k_s u_{t-s} (zero before 0). Zero-padding to 2L makes the FFT's circular
    convolution the causal linear one."""
    L = u.shape[-1]
    n = 2 * L
    return torch.fft.irfft(torch.fft.rfft(u, n) * torch.fft.rfft(k, n), n)[..., :L]


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (..., width) -> (..., width)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def gated_output(gate: nn.Module, norm: nn.Module, out: nn.Module, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(swish(h W_G) ⊙ norm(y)) W_O for h, y (..., W) -> (..., W), `norm` a GroupNorm with one group
    per head (it takes (N, W) rows: the norm is per position). The output of retention, GLA and
    DeltaNet, in their parallel and recurrent forms alike."""
    y = norm(y.reshape(-1, y.shape[-1])).view_as(y)
    return out(F.silu(gate(h)) * y)


# --- absolute positions added to an input embedding (the block stack, LSTM and Mamba) -----------
POSITIONS = ("learned", "sinusoidal", "none")


def check_positions(cfg: typing.Any) -> None:
    check(cfg.positions in POSITIONS, "positions", f"must be one of {', '.join(POSITIONS)}, got {cfg.positions!r}")


def learned_positions(length: int, width: int) -> nn.Parameter:
    """(length, width) learned absolute position embeddings, N(0, 0.02^2) at initialisation."""
    return nn.Parameter(torch.randn(length, width) * 0.02)


def set_positions(module: nn.Module, kind: str, length: int, width: int) -> None:
    """`module.pos`: a learned (length, width) table, sinusoidal codes for `length` positions (a
    buffer, not saved), or None (kind "none")."""
    if kind == "learned":
        module.pos = learned_positions(length, width)
    elif kind == "sinusoidal":
        module.register_buffer("pos", sinusoidal_positions(length, width), persistent=False)
    else:
        module.pos = None  # type: ignore[assignment]  # no absolute positions


def position_rows(module: nn.Module, length: int, width: int) -> torch.Tensor | None:
    """The absolute positions of `length` positions from the `pos` that `set_positions` gave
    `module`: a learned table ends at its own length (longer is one ArchsepError); sinusoidal
    codes are computed beyond it when needed (length generalisation)."""
    pos = typing.cast("torch.Tensor | None", module.pos)
    if pos is None:
        return None
    if length <= pos.shape[0]:
        return pos[:length]
    if isinstance(pos, nn.Parameter):
        raise ArchsepError(f"seq_len: input length {length} exceeds the model's maximum {pos.shape[0]}")
    return sinusoidal_positions(length, width).to(pos)
