"""Mamba-style selective state-space model (Gu & Dao 2023, "Mamba-1" block) in pure PyTorch.

Each layer: h = h + out(SSM(SiLU(conv(in_x))) * SiLU(in_z)) on a pre-normed input, where the
SSM has a diagonal A = -exp(A_log) (S4D-real init) and input-dependent step Δ, B and C:
    s_t = exp(Δ_t A) * s_{t-1} + Δ_t B_t x_t,        y_t = C_t · s_t + D x_t
per channel of the expanded width E = expand * width, with d_state states per channel.

Scans, all computing the same thing (models/kernels/: the PyTorch ones in `selective_scan`, the
compiled one in `native_scan`):
- 'sequential': the step-by-step reference, differentiated by autograd;
- 'parallel': Hillis-Steele doubling over the length; stable (only decays <= 1). For GPUs.
- 'fused': the sequential loop with a hand-written reverse-time backward; runs under vmap.
- 'chunked': the recurrence `chunk` positions at a time (`ChunkedScan`), nothing of size
  (B, L, E, N) allocated, as stable as the sequential form. The fast PyTorch path on CPU.
- 'native': the same recurrence in C (`selective_scan.c`, `NativeScan`), compiled on first use
  with the machine's C compiler (`kernels.native.library`). float32 on CPU; where no compiler
  is found, 'auto' takes 'chunked' instead.
- 'auto': the CUDA `mamba_ssm` kernel when it is installed and the input is on a GPU, else
  'parallel' on a GPU; on CPU 'native' for float32 where it compiled, else 'chunked' ('fused'
  inside vmap, which neither 'native' nor 'chunked' can enter).

Which scan runs is the config's `scan` unless `use_scan(model, impl)` overrides it: an
implementation switch, not a config field, so run ids stay the same (they all compute the
same thing; tests/models/test_scan.py checks them against 'sequential').

`step(x_t, state, t)` runs the model one position at a time from an explicit state (the
`SeqModel` recurrent contract); its state is what `state_size` counts: per layer the SSM state
E*d_state plus the causal-conv buffer E*(d_conv-1) (the last d_conv-1 conv inputs).
`state_breakdown` reports the two separately (papers often quote only the SSM part).
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import check
from ..tasks.base import TaskSpec
from .base import ModelConfig, SeqModel, input_layer
from .kernels import chunked_scan, fused_scan, native_available, native_conv_silu, native_scan, scan_parallel
from .kernels import scan_sequential
from .ops import RMSNorm, check_positions, position_rows, set_positions, under_vmap
from .registry import MODELS

try:  # optional fused CUDA kernel; never required
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn as _cuda_scan
except Exception:  # noqa: BLE001  (ImportError, or a broken CUDA build)
    _cuda_scan = None

_SCANS = ("auto", "native", "chunked", "fused", "parallel", "sequential")
_NORMS = ("rms", "layer")


def use_scan(model: nn.Module, impl: str | None) -> nn.Module:
    """Run every Mamba layer of `model` with scan `impl` (one of auto, chunked, fused, parallel,
    sequential) whatever its config says; None goes back to the config's. An implementation
    switch: the config, and so the run id, stays the same. Returns the model."""
    check(impl is None or impl in _SCANS, "scan", f"must be one of {', '.join(_SCANS)}, got {impl!r}")
    for m in model.modules():
        if isinstance(m, MambaMixer):
            m.scan_impl = impl
    return model


class MambaMixer(nn.Module):
    def __init__(self, width: int, d_state: int, expand: int, d_conv: int, dt_rank: int,
                 dt_min: float, dt_max: float, scan: str):
        super().__init__()
        E = expand * width
        self.E, self.N, self.d_conv, self.dt_rank, self.scan = E, d_state, d_conv, dt_rank, scan
        self.scan_impl: str | None = None  # set by use_scan: overrides `scan`
        self.in_proj = nn.Linear(width, 2 * E, bias=False)
        self.conv = nn.Conv1d(E, E, d_conv, groups=E, padding=d_conv - 1)  # depthwise, made causal by cropping
        self.x_proj = nn.Linear(E, dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(dt_rank, E)
        # Δ starts log-uniform in [dt_min, dt_max]: bias = softplus^{-1}(dt)
        nn.init.uniform_(self.dt_proj.weight, -dt_rank**-0.5, dt_rank**-0.5)
        dt = torch.exp(torch.rand(E) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min))
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(E, 1))
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, width, bias=False)

    def _ssm_inputs(self, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """u (..., E) -> Δ (..., E), B (..., N), C (..., N)."""
        dt, B, C = self.x_proj(u).split([self.dt_rank, self.N, self.N], -1)
        return F.softplus(self.dt_proj(dt)), B, C

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """h (B, L, W) -> (B, L, W); with `last_only`, (B, 1, W): the last position alone (the
        scan still runs over every position; the gate and the output projection do not)."""
        L = h.shape[1]
        if last_only:
            w_u, w_z = self.in_proj.weight.chunk(2, 0)
            u, z = F.linear(h, w_u), F.linear(h[:, -1:], w_z)  # (B, L, E), (B, 1, E)
        else:
            u, z = self.in_proj(h).chunk(2, -1)  # (B, L, E) each
        if self._which(u) == "native" and u.dtype == torch.float32 and u.device.type == "cpu" and L:  # compiled conv
            u = native_conv_silu(u, self.conv.weight, self.conv.bias)
        else:
            u = F.silu(self.conv(u.transpose(1, 2))[..., :L].transpose(1, 2))
        delta, B, C = self._ssm_inputs(u)
        # outside autocast, in the weights' dtype: a recurrence over L positions drifts in bf16
        off = torch.autocast(u.device.type, enabled=False) if u.device.type in ("cpu", "cuda") else nullcontext()
        with off:  # (the meta device, on which the planner sizes a step's memory, has no autocast)
            y = self._scan(*(t.to(self.A_log.dtype) for t in (u, delta, B, C, z)))  # (B, L or 1, E)
        return self.out_proj(y)

    def _which(self, u: torch.Tensor) -> str:
        """The scan that runs on `u` (the CUDA kernel aside): the config's or `use_scan`'s, 'auto'
        resolved (native for float32 on CPU where it compiled, else chunked; parallel on a GPU),
        and 'fused' under vmap in place of the in-place scans."""
        want = self.scan_impl or self.scan
        if want == "auto":
            cpu32 = u.device.type == "cpu" and u.dtype == torch.float32  # not meta: C needs real memory
            want = "parallel" if u.is_cuda else "native" if cpu32 and native_available() else "chunked"
        if want in ("chunked", "native") and under_vmap(u):
            return "fused"  # same recurrence, written out-of-place for functorch
        return want

    def _scan(self, u, delta, B, C, z) -> torch.Tensor:
        """u, delta (B, L, E); B, C (B, L, N); z (B, L, E), or (B, 1, E) for the last position
        alone -> the gated output (y + D u) * silu(z) at z's positions."""
        A = -torch.exp(self.A_log)  # (E, N)
        want = self.scan_impl or self.scan
        last_only = z.shape[1] < u.shape[1]
        if last_only:  # the fused kernels gate every position: the others get any z (their outputs are dropped)
            z = z.expand_as(u)
        if want == "auto" and _cuda_scan is not None and u.is_cuda and not under_vmap(u):
            y = _cuda_scan(u.transpose(1, 2).contiguous(), delta.transpose(1, 2).contiguous(), A.contiguous(),
                           B.transpose(1, 2).contiguous(), C.transpose(1, 2).contiguous(), self.D.float(),
                           z=z.transpose(1, 2).contiguous()).transpose(1, 2)
            return y[:, -1:] if last_only else y
        scan = self._which(u)
        if scan == "native":
            y = native_scan(u, delta, A, B, C, self.D, z)
            return y[:, -1:] if last_only else y
        if scan == "chunked":
            y = chunked_scan(u, delta, A, B, C)
        elif scan == "fused":
            y = fused_scan(u, delta, A, B, C)
        else:
            dA = torch.exp(delta[..., None] * A)  # (B, L, E, N)
            dBx = (delta * u)[..., None] * B[:, :, None, :]
            y = (scan_sequential if scan == "sequential" else scan_parallel)(dA, dBx, C)
        if last_only:  # the skip and the gate at the last position
            y, u, z = y[:, -1:], u[:, -1:], z[:, -1:]
        return (y + self.D * u) * F.silu(z)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        return {"conv": torch.zeros(batch, self.E, self.d_conv - 1, device=device, dtype=dtype),
                "ssm": torch.zeros(batch, self.E, self.N, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t (unused: the state is all it needs): h (B, width) and the layer's state ->
        output (B, width) and the new state."""
        u, z = self.in_proj(h).chunk(2, -1)  # (B, E) each
        window = torch.cat([state["conv"], u[..., None]], -1)  # (B, E, d_conv): the last d_conv inputs
        u = F.silu((window * self.conv.weight[:, 0]).sum(-1) + self.conv.bias)  # type: ignore[operator]  # bias=True
        delta, B, C = self._ssm_inputs(u)  # (B, E), (B, N), (B, N)
        A = -torch.exp(self.A_log)  # (E, N)
        s = torch.exp(delta[..., None] * A) * state["ssm"] + (delta * u)[..., None] * B[:, None, :]  # (B, E, N)
        y = (s * C[:, None, :]).sum(-1) + self.D * u  # (B, E)
        return self.out_proj(y * F.silu(z)), {"conv": window[..., 1:], "ssm": s}


class Mamba(SeqModel):
    stackable = False  # fused kernels win over a vmapped loop (see SeqModel.stackable)
    def __init__(self, cfg: MambaConfig, spec: TaskSpec):
        super().__init__()
        self.cfg = cfg
        layers, width = cfg.layers, cfg.width
        dt_rank = cfg.dt_rank or math.ceil(width / 16)
        Norm = RMSNorm if cfg.norm == "rms" else nn.LayerNorm
        self.embed = input_layer(spec, width)
        self.norms = nn.ModuleList(Norm(width) for _ in range(layers))
        self.mixers = nn.ModuleList(MambaMixer(width, cfg.d_state, cfg.expand, cfg.d_conv, dt_rank, cfg.dt_min,
                                               cfg.dt_max, cfg.scan) for _ in range(layers))
        self.norm_f = Norm(width)
        self.head = nn.Linear(width, spec.output_dim)
        self.layers, self.E, self.N, self.d_conv = layers, cfg.expand * width, cfg.d_state, cfg.d_conv
        self.readout_last = spec.readout == "last"
        self.readout_only = False  # set by `prune_to_readout`
        # (L, W) learned absolute positions (made last: no other parameter moves)
        set_positions(self, cfg.positions, spec.seq_len, width)

    def prune_to_readout(self) -> None:
        """For a task read at the last position, the last layer gates and projects that position
        alone (its scan still runs over every position): the output is (B, 1, C), the same
        numbers as the last position of the full output, to rounding."""
        self.readout_only = self.readout_last

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)  # (B, L, W)
        pos = position_rows(self, h.shape[1], h.shape[2])
        if pos is not None:
            h = h + pos  # (B, L, W)
        for i, (norm, mixer) in enumerate(zip(self.norms, self.mixers)):
            last = self.readout_only and i == self.layers - 1
            h = (h[:, -1:] if last else h) + mixer(norm(h), last_only=last)  # (B, L, W); (B, 1, W) if pruned
        return self.head(self.norm_f(h))  # (B, L, C)

    def init_state(self, batch: int, device=None, dtype=None) -> list[dict[str, torch.Tensor]]:
        """Per layer {"conv": (B, E, d_conv-1), "ssm": (B, E, N)}, zeros."""
        return [m.init_state(batch, device, dtype) for m in self.mixers]  # type: ignore[operator]

    def step(self, x_t: torch.Tensor, state: list[dict[str, torch.Tensor]], t: int
             ) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
        """Position t: input (B,) tokens or (B, D) vectors -> (B, output_dim), the new state."""
        h = self.embed(x_t)  # (B, W)
        pos = position_rows(self, t + 1, h.shape[-1])
        if pos is not None:
            h = h + pos[t]
        new = []
        for norm, mixer, s in zip(self.norms, self.mixers, state):
            out, s = mixer.step(norm(h), s, t)  # type: ignore[operator]
            h = h + out  # (B, W)
            new.append(s)
        return self.head(self.norm_f(h)), new

    def state_breakdown(self) -> dict[str, int]:
        return {"ssm": self.layers * self.E * self.N, "conv": self.layers * self.E * (self.d_conv - 1)}

    def state_size(self, seq_len: int) -> int:
        """Floats per sequence carried between positions: SSM states plus conv buffers (see module doc)."""
        return sum(self.state_breakdown().values())


@MODELS.register("mamba")
@dataclass(frozen=True)
class MambaConfig(ModelConfig):
    """Mamba-style selective SSM: `layers` pre-norm residual blocks of model width `width`,
    inner width expand*width, d_state states per inner channel, a causal depthwise conv of
    width d_conv, Δ through a rank-dt_rank projection (default ceil(width/16)) initialised
    log-uniform in [dt_min, dt_max]. norm: rms | layer. scan: auto (CUDA kernel if installed
and on GPU, else parallel on GPU; on CPU native for float32 where it compiled, else chunked) |
native | chunked | fused | parallel | sequential."""

    layers: int = 2
    width: int = 64
    d_state: int = 16
    expand: int = 2
    d_conv: int = 4
    dt_rank: int | None = None
    dt_min: float = 0.001
    dt_max: float = 0.1
    norm: Literal["rms", "layer"] = "rms"
    scan: Literal["auto", "native", "chunked", "fused", "parallel", "sequential"] = "auto"
    # learned absolute positions added to the embedding (issue 52's diagnostic); "none" as in the paper
    positions: Literal["none", "learned", "sinusoidal"] = "none"
    added: ClassVar[dict] = {"positions": "none"}

    def __post_init__(self) -> None:
        for name in ("layers", "width", "d_state", "expand", "d_conv"):
            v = getattr(self, name)
            check(v >= 1, name, f"must be >= 1, got {v}")
        check(self.dt_rank is None or self.dt_rank >= 1, "dt_rank", f"must be >= 1, got {self.dt_rank}")
        check(0 < self.dt_min <= self.dt_max, "dt_min", f"need 0 < dt_min <= dt_max, got {self.dt_min}, {self.dt_max}")
        check(self.norm in _NORMS, "norm", f"must be one of {', '.join(_NORMS)}, got {self.norm!r}")
        check(self.scan in _SCANS, "scan", f"must be one of {', '.join(_SCANS)}, got {self.scan!r}")
        check_positions(self)

    def short_name(self) -> str:
        return f"Mamba-{self.width}"

    def build(self, spec: TaskSpec) -> Mamba:
        return Mamba(self, spec)
