"""Mamba-2 (Dao & Gu 2024, "Transformers are SSMs"): the SSD layer in the pre-LN block stack of
`retnet` (models/mixers/stack.py).

Each layer, on the normed input h (width w, inner width E = expand * w, H heads of P = E/H
channels, G groups of B and C with d_state = N entries each):
    z, xBC, dt = h W_in                          (z: E, xBC: E + 2GN, dt: H)
    x, B, C = silu(causal depthwise conv(xBC))   (a conv of width d_conv over positions)
    dt = softplus(dt + dt_bias), a_t = exp(-dt_t * exp(A_log))   (one scalar decay per head)
    h_t = a_t h_{t-1} + B_t^T (dt_t x_t),   y_t = C_t h_t + D x_t     (h: N x P per head)
    out = W_out RMSNorm(y ⊙ silu(z))
B and C are shared by the H/G heads of a group (G = 1: one B and C for all heads, as in the
paper's multi-value form). Forms, both computing the same outputs:
- parallel (training) form, SSD's chunked form (`ssd_chunked`, chunks of CHUNK = 32 positions):
  within a chunk the quadratic form per head, Y = (L ⊙ C B^T) (dt ⊙ X), with
  L[t, s] = prod_{s<r<=t} a_r for s <= t, else 0; between chunks the state h passes at each
  chunk's end, h_end = e^{g_last} h_start + (B ⊙ e^{g_last - g})^T (dt ⊙ X), and reaches a
  chunk's outputs as (C ⊙ e^{g}) h_start (g: the sums of log a from the chunk's start; a loop
  over L/CHUNK chunks). `decay_matrix` computes log L as a masked cumulative sum over positions
  (the sums of log a_r over each segment, never a difference of two long cumulative sums), then
  exponentiates; every exponent anywhere is <= 0. On one chunk (L <= CHUNK) this is the
  quadratic form Y = (L ⊙ C B^T)(dt ⊙ X) + D X of the whole sequence.
- recurrent form: `step`, from the state h and the conv buffer (the last d_conv - 1 conv inputs).
A pruned last block needs one row of L: the sums of log a over each suffix.

Simplifications, stated: the stack's GELU MLP follows each Mamba-2 mixer (Mamba-2 language models
stack mixers alone); the gated norm is one RMSNorm over E (the paper's grouped norm with G groups
is the same for G = 1); no initial states. Init as in the paper: A = exp(A_log) uniform in
[1, 16] per head, softplus(dt_bias) log-uniform in [dt_min, dt_max], D = 1. No absolute
positions by default (`positions` can add them).

State: per layer H * N * P = E * N floats of h plus the conv buffer (d_conv - 1) * (E + 2GN).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import check
from ..ops import RMSNorm
from .stack import Mixer, MixerConfig
from ..registry import MODELS

CHUNK = 32


def decay_matrix(log_a: torch.Tensor) -> torch.Tensor:
    """log_a (..., L) -> (..., L, L) L[t, s] = exp(sum_{s<r<=t} log_a[r]) for s <= t, else 0."""
    n = log_a.shape[-1]
    lower = torch.ones(n, n, dtype=torch.bool, device=log_a.device).tril()  # (L, L) s <= t
    strict = lower.tril(-1)  # s < t
    terms = torch.where(strict, log_a[..., :, None], 0.0)  # (..., L, L) [t, s] = log_a[t] for s < t
    seg = terms.cumsum(-2)  # (..., L, L) [t, s] = sum_{s<r<=t} log_a[r]
    return torch.where(lower, seg, -math.inf).exp()  # (..., L, L)


def decay_last_row(log_a: torch.Tensor) -> torch.Tensor:
    """log_a (..., L) -> (..., 1, L), the last row of `decay_matrix`: exp(sum_{s<r<L} log_a[r])."""
    suffix = log_a.flip(-1).cumsum(-1).flip(-1)  # (..., L) sum_{r>=s}
    return F.pad(suffix[..., 1:], (0, 1)).exp()[..., None, :]  # (..., 1, L) sum_{r>s}


def ssd_chunked(x: torch.Tensor, dt: torch.Tensor, log_a: torch.Tensor, B: torch.Tensor, C: torch.Tensor,
                chunk: int = CHUNK) -> torch.Tensor:
    """x (b, H, L, P), dt and log_a (b, H, L), B and C (b, H, L, N) -> y (b, H, L, P) without D x:
    y_t = C_t h_t, h_t = e^{log_a_t} h_{t-1} + B_t^T (dt_t x_t), h_0 = 0, chunk by chunk (module doc)."""
    L = x.shape[2]
    pad = -L % chunk  # padded positions at the end: dt = 0, decay 1; sliced off
    x, B, C = (F.pad(m, (0, 0, 0, pad)).unflatten(2, (-1, chunk)) for m in (x, B, C))  # (b, H, n, c, .)
    dt, log_a = (F.pad(m, (0, pad)).unflatten(2, (-1, chunk)) for m in (dt, log_a))  # (b, H, n, c)
    xdt = dt[..., None] * x  # (b, H, n, c, P)
    g = log_a.cumsum(-1)  # (b, H, n, c) log decay from the chunk's start, inclusive
    y = ((C @ B.transpose(-1, -2)) * decay_matrix(log_a)) @ xdt  # (b, H, n, c, P): SSD's quadratic form per chunk
    ends = ((g[..., -1:] - g).exp()[..., None] * B).transpose(-1, -2) @ xdt  # (b, H, n, N, P) a chunk's h at its end
    h = x.new_zeros(x.shape[:2] + (B.shape[-1], x.shape[-1]))  # (b, H, N, P)
    starts = []
    for decay, end in zip(g[..., -1, None, None].exp().unbind(2), ends.unbind(2)):  # unbind: see gla_chunked
        starts.append(h)
        h = decay * h + end  # (b, H, N, P)
    y = y + (g.exp()[..., None] * C) @ torch.stack(starts, 2)  # (b, H, n, c, P)
    return y.flatten(2, 3)[:, :, :L]  # (b, H, L, P)


class SSD(Mixer):
    def __init__(self, width: int, heads: int, d_state: int, expand: int, d_conv: int, groups: int,
                 dt_min: float, dt_max: float):
        super().__init__()
        E = expand * width
        self.E, self.H, self.P, self.N, self.G, self.d_conv = E, heads, E // heads, d_state, groups, d_conv
        self.conv_dim = E + 2 * groups * d_state
        self.state_floats = E * d_state + (d_conv - 1) * self.conv_dim
        self.in_proj = nn.Linear(width, E + self.conv_dim + heads, bias=False)  # z, xBC, dt
        self.conv = nn.Conv1d(self.conv_dim, self.conv_dim, d_conv, groups=self.conv_dim, padding=d_conv - 1)
        dt = torch.exp(torch.rand(heads) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^{-1}(dt)
        self.A_log = nn.Parameter(torch.log(1 + 15 * torch.rand(heads)))  # A uniform in [1, 16]
        self.D = nn.Parameter(torch.ones(heads))
        self.norm = RMSNorm(E)
        self.out = nn.Linear(E, width, bias=False)

    def _split(self, xBC: torch.Tensor, dt: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The conv's output (..., conv_dim) and the dt projection (..., H) -> x (..., H, P),
        B and C (..., H, N) (each head its group's), dt and log a (..., H)."""
        x, B, C = xBC.split([self.E, self.G * self.N, self.G * self.N], -1)
        B, C = (m.unflatten(-1, (self.G, self.N)).repeat_interleave(self.H // self.G, -2) for m in (B, C))
        dt = F.softplus(dt + self.dt_bias)
        return x.unflatten(-1, (self.H, self.P)), B, C, dt, -dt * self.A_log.exp()

    def _output(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.out(self.norm(y * F.silu(z)))

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        L = h.shape[1]
        z, xBC, dt = self.in_proj(h).split([self.E, self.conv_dim, self.H], -1)  # (B, L, E / conv_dim / H)
        xBC = F.silu(self.conv(xBC.transpose(1, 2))[..., :L].transpose(1, 2))  # (B, L, conv_dim)
        x, B, C, dt, log_a = self._split(xBC, dt)  # x (B, L, H, P), B, C (B, L, H, N), dt (B, L, H)
        x, B, C = (m.transpose(1, 2) for m in (x, B, C))  # (B, H, L, P), (B, H, L, N), (B, H, L, N)
        log_a, dt = log_a.transpose(1, 2), dt.transpose(1, 2)  # (B, H, L)
        if last_only:  # the last row of the quadratic form: C_L h_L
            y = (C[:, :, -1:] @ B.transpose(-1, -2)) * decay_last_row(log_a) @ (dt[..., None] * x)  # (B, H, 1, P)
            x, z = x[:, :, -1:], z[:, -1:]  # the last position's: (B, H, 1, P), (B, 1, E)
        else:
            y = ssd_chunked(x, dt, log_a, B, C)  # (B, H, L, P)
        y = y + self.D[:, None, None] * x  # (B, H, Lq, P)
        return self._output(y.transpose(1, 2).flatten(2), z)  # (B, Lq, W)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        return {"conv": torch.zeros(batch, self.conv_dim, self.d_conv - 1, device=device, dtype=dtype),
                "h": torch.zeros(batch, self.H, self.N, self.P, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t: h (B, W) -> output (B, W); h_t = a_t h_{t-1} + B_t^T (dt_t x_t), y_t = C_t h_t + D x_t."""
        z, xBC, dt = self.in_proj(h).split([self.E, self.conv_dim, self.H], -1)  # (B, E), (B, conv_dim), (B, H)
        window = torch.cat([state["conv"], xBC[..., None]], -1)  # (B, conv_dim, d_conv)
        xBC = F.silu((window * self.conv.weight[:, 0]).sum(-1) + self.conv.bias)  # type: ignore[operator]  # bias=True
        x, B, C, dt, log_a = self._split(xBC, dt)  # x (B, H, P), B, C (B, H, N), dt (B, H)
        dtx = dt[..., None] * x  # (B, H, P)
        S = log_a.exp()[..., None, None] * state["h"] + B[..., :, None] * dtx[..., None, :]  # (B, H, N, P)
        y = (C[..., None, :] @ S)[..., 0, :] + self.D[:, None] * x  # (B, H, P)
        return self._output(y.flatten(1), z), {"conv": window[..., 1:], "h": S}


@MODELS.register("mamba2")
@dataclass(frozen=True)
class Mamba2Config(MixerConfig):
    """Mamba-2 (SSD): a selective SSM with one scalar decay per head (inner width expand*width in
    `heads` heads, B and C of d_state entries shared by the heads of each of `groups` groups, a
    causal depthwise conv of width d_conv, dt initialised log-uniform in [dt_min, dt_max]) as the
    mixer of `layers` pre-LN blocks of model width `width`, each with a GELU MLP of width
    `mlp_width` (default 4*width); positions: learned | sinusoidal | none, added to the
    embedding."""

    heads: int = 4
    d_state: int = 16
    expand: int = 2
    d_conv: int = 4
    groups: int = 1
    dt_min: float = 0.001
    dt_max: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        for name in ("heads", "d_state", "expand", "d_conv", "groups"):
            v = getattr(self, name)
            check(v >= 1, name, f"must be >= 1, got {v}")
        E = self.expand * self.width
        check(E % self.heads == 0, "heads", f"must divide the inner width expand*width = {E}, got {self.heads}")
        check(self.heads % self.groups == 0, "groups", f"must divide heads {self.heads}, got {self.groups}")
        check(0 < self.dt_min <= self.dt_max, "dt_min", f"need 0 < dt_min <= dt_max, got {self.dt_min}, {self.dt_max}")

    def short_name(self) -> str:
        return f"Mamba2-({self.layers},{self.width})"

    def mixer(self, layer: int) -> SSD:
        return SSD(self.width, self.heads, self.d_state, self.expand, self.d_conv, self.groups, self.dt_min,
                   self.dt_max)
