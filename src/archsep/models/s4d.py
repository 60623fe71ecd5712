"""Diagonal linear time-invariant SSM (S4D, Gu et al. 2022): the linear-recurrence baseline.

Per channel c of the model width and per complex mode n (d_state modes):
    s_t = exp(Δ_c A_n) s_{t-1} + x_t,       y_t = 2 Re(sum_n C'_n s_t) + D_c x_t
with A_n = -exp(A_re_log) + i A_im (S4D-Lin init: -1/2 + i π n) and the ZOH input gain
(exp(ΔA)-1)/A folded into C'. Being LTI, the whole sequence is one causal convolution with
the kernel K_l = 2 Re(sum_n C'_n exp(ΔA_n l)) ('fft': up to 128 positions as a Toeplitz matrix
product, by FFT above, `ops.long_conv`), or stepped ('sequential').
A layer is pre-LayerNorm -> SSM -> GELU -> Linear -> residual.

State: d_state complex numbers per channel and layer = layers * width * 2 * d_state floats.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import check
from ..tasks.base import TaskSpec
from .base import ModelConfig, SeqModel, input_layer
from .ops import check_positions, long_conv, position_rows, set_positions
from .registry import MODELS

_MODES = ("fft", "sequential")


class S4DKernel(nn.Module):
    def __init__(self, width: int, d_state: int, dt_min: float, dt_max: float, mode: str):
        super().__init__()
        self.mode = mode
        # "fft" makes every length go by FFT (the form before `long_conv`, for benchmarks); None:
        # `long_conv` picks. An implementation switch, not a config field: the run id stays
        self.conv_impl: str | None = None
        log_dt = torch.rand(width) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        self.log_dt = nn.Parameter(log_dt)
        self.A_re_log = nn.Parameter(torch.full((width, d_state), math.log(0.5)))
        self.A_im = nn.Parameter(math.pi * torch.arange(d_state, dtype=torch.float32).repeat(width, 1))
        self.C = nn.Parameter(torch.randn(width, d_state, 2) * 0.5**0.5)  # (re, im)
        self.D = nn.Parameter(torch.randn(width))

    def discrete(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per (channel, mode), complex: ΔA (the decay is exp(ΔA)) and C' = C (exp(ΔA)-1)/A."""
        A = torch.complex(-torch.exp(self.A_re_log), self.A_im)
        dtA = A * torch.exp(self.log_dt)[:, None]
        return dtA, torch.view_as_complex(self.C.contiguous()) * torch.expm1(dtA) / A

    def kernel(self, L: int) -> torch.Tensor:
        """(width, L) real convolution kernel."""
        dtA, C = self.discrete()
        powers = dtA[..., None] * torch.arange(L, device=dtA.device)  # (width, N, L): exp(ΔA l)
        return 2 * torch.einsum("cn,cnl->cl", C, torch.exp(powers)).real

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """u (B, L, width) -> y (B, L, width)."""
        L = u.shape[1]
        if self.mode == "sequential":
            dtA, C = self.discrete()
            decay = torch.exp(dtA)
            s = torch.zeros(u.shape[0], *decay.shape, dtype=decay.dtype, device=u.device)
            ys = []
            for t in range(L):
                s = decay * s + u[:, t, :, None]
                ys.append(2 * (C * s).sum(-1).real)
            return torch.stack(ys, 1) + self.D * u
        k = self.kernel(L)
        # (B, L, width), made contiguous once: the elementwise ops after it (GELU's backward
        # above all) run many times slower on the strided view the convolution leaves
        return long_conv(u, k, fft=self.conv_impl == "fft").contiguous() + self.D * u

    def step(self, u_t: torch.Tensor, s: torch.Tensor, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Position t (unused: LTI): u_t (B, width), s (B, width, N) complex -> y_t (B, width), new s."""
        dtA, C = self.discrete()  # (width, N) complex each
        s = torch.exp(dtA) * s + u_t[..., None]  # (B, width, N)
        return 2 * (C * s).sum(-1).real + self.D * u_t, s


class S4D(SeqModel):
    def __init__(self, cfg: S4DConfig, spec: TaskSpec):
        super().__init__()
        self.cfg = cfg
        layers, width, d_state = cfg.layers, cfg.width, cfg.d_state
        self.embed = input_layer(spec, width)
        self.norms = nn.ModuleList(nn.LayerNorm(width) for _ in range(layers))
        self.ssms = nn.ModuleList(S4DKernel(width, d_state, cfg.dt_min, cfg.dt_max, cfg.mode) for _ in range(layers))
        self.outs = nn.ModuleList(nn.Linear(width, width) for _ in range(layers))
        self.norm_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, spec.output_dim)
        self.layers, self.width, self.d_state = layers, width, d_state
        # (L, W) learned absolute positions (made last: no other parameter moves)
        set_positions(self, cfg.positions, spec.seq_len, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)  # (B, L, W)
        pos = position_rows(self, h.shape[1], h.shape[2])
        if pos is not None:
            h = h + pos  # (B, L, W)
        for norm, ssm, out in zip(self.norms, self.ssms, self.outs):
            h = h + out(F.gelu(ssm(norm(h))))  # (B, L, W)
        return self.head(self.norm_f(h))  # (B, L, C)

    def init_state(self, batch: int, device=None, dtype=None) -> list[torch.Tensor]:
        """Per layer (B, W, d_state) complex zeros: complex128 for float64, else complex64."""
        cdtype = torch.complex128 if dtype == torch.float64 else torch.complex64
        return [torch.zeros(batch, self.width, self.d_state, dtype=cdtype, device=device)
                for _ in range(self.layers)]

    def step(self, x_t: torch.Tensor, state: list[torch.Tensor], t: int) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Position t: input (B,) tokens or (B, D) vectors -> (B, output_dim), the new state."""
        h, new = self.embed(x_t), []  # (B, W)
        pos = position_rows(self, t + 1, h.shape[-1])
        if pos is not None:
            h = h + pos[t]
        for norm, ssm, out, s in zip(self.norms, self.ssms, self.outs, state):
            y, s = ssm.step(norm(h), s, t)  # type: ignore[operator]
            h = h + out(F.gelu(y))  # (B, W)
            new.append(s)
        return self.head(self.norm_f(h)), new

    def state_size(self, seq_len: int) -> int:
        return self.layers * self.width * 2 * self.d_state  # complex = 2 floats


@MODELS.register("s4d", aliases=("dss",))  # "dss" until it was named for what it is
@dataclass(frozen=True)
class S4DConfig(ModelConfig):
    """Diagonal LTI SSM (S4D-Lin): `layers` blocks of width `width`, d_state complex modes per
    channel, steps Δ initialised log-uniform in [dt_min, dt_max]. mode: fft | sequential."""

    layers: int = 2
    width: int = 64
    d_state: int = 16
    dt_min: float = 0.001
    dt_max: float = 0.1
    mode: Literal["fft", "sequential"] = "fft"
    # learned absolute positions added to the embedding (issue 52's diagnostic); "none" as in the paper
    positions: Literal["none", "learned", "sinusoidal"] = "none"
    added: ClassVar[dict] = {"positions": "none"}

    def __post_init__(self) -> None:
        for name in ("layers", "width", "d_state"):
            v = getattr(self, name)
            check(v >= 1, name, f"must be >= 1, got {v}")
        check(0 < self.dt_min <= self.dt_max, "dt_min", f"need 0 < dt_min <= dt_max, got {self.dt_min}, {self.dt_max}")
        check(self.mode in _MODES, "mode", f"must be one of {', '.join(_MODES)}, got {self.mode!r}")
        check_positions(self)

    def short_name(self) -> str:
        return f"DSS-{self.width}"

    def build(self, spec: TaskSpec) -> S4D:
        return S4D(self, spec)
