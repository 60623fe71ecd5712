"""Mamba-style selective state-space model (Gu & Dao 2023, "Mamba-1" block) in pure PyTorch.

Each layer: h = h + out(SSM(SiLU(conv(in_x))) * SiLU(in_z)) on a pre-normed input, where the
SSM has a diagonal A = -exp(A_log) (S4D-real init) and input-dependent step Δ, B and C:
    s_t = exp(Δ_t A) * s_{t-1} + Δ_t B_t x_t,        y_t = C_t · s_t + D x_t
per channel of the expanded width E = expand * width, with d_state states per channel.

Scans, all computing the same thing:
- 'sequential': the step-by-step reference, differentiated by autograd;
- 'parallel': Hillis-Steele doubling over the length, log2(L) elementwise steps on
  (B, L, E, N) tensors; only products of decays <= 1 appear, so it is stable. For GPUs.
- 'fused': the sequential loop with a hand-written reverse-time backward, one (B, E, N) slice
  at a time; several times faster than the others on CPU.
- 'auto': the CUDA `mamba_ssm` kernel when it is installed and the input is on a GPU, else
  'parallel' on a GPU and 'fused' on CPU.

`step` runs the model one position at a time from an explicit state; its state is what
`state_size` counts: per layer the SSM state E*d_state plus the causal-conv buffer
E*(d_conv-1) (the last d_conv-1 conv inputs). `state_breakdown` reports the two separately
(papers often quote only the SSM part).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import check
from ..tasks.base import TaskSpec
from .base import ModelConfig, SeqModel, input_layer
from .registry import MODELS

try:  # optional fused CUDA kernel; never required
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn as _cuda_scan
except Exception:  # noqa: BLE001  (ImportError, or a broken CUDA build)
    _cuda_scan = None

_SCANS = ("auto", "fused", "parallel", "sequential")


def _under_vmap(t: torch.Tensor) -> bool:
    """The CUDA kernel has no vmap rule; stacked (vmapped) training falls back to 'parallel'."""
    try:
        return bool(torch._C._functorch.is_batchedtensor(t))
    except AttributeError:  # private API moved: assume the worst
        return True
_NORMS = ("rms", "layer")


def scan_sequential(dA: torch.Tensor, dBx: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """Reference: s_t = dA_t * s_{t-1} + dBx_t, y_t = <C_t, s_t>.
    dA, dBx: (B, L, E, N); C: (B, L, N) -> y (B, L, E)."""
    s = torch.zeros_like(dBx[:, 0])
    states = []
    # unbind, not dA[:, t]: one backward node instead of a full-size zero gradient per step
    for a_t, b_t in zip(dA.unbind(1), dBx.unbind(1)):
        s = a_t * s + b_t
        states.append(s)
    return torch.einsum("blen,bln->ble", torch.stack(states, 1), C)


def scan_parallel(dA: torch.Tensor, dBx: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """Same result by Hillis-Steele doubling. After the step with offset k, (a_t, b_t) is the
    composition of the affine maps s -> dA*s + dBx over positions (t-2k, t]; b_t is then s_t."""
    a, b = dA, dBx
    k, L = 1, dA.shape[1]
    while k < L:
        b = torch.cat([b[:, :k], a[:, k:] * b[:, :-k] + b[:, k:]], 1)
        a = torch.cat([a[:, :k], a[:, k:] * a[:, :-k]], 1)
        k *= 2
    return torch.einsum("blen,bln->ble", b, C)


class FusedScan(torch.autograd.Function):
    """The sequential scan with a hand-written backward (a reverse-time scan), working one
    (B, E, N) slice at a time: no per-step autograd nodes and no (B, L, E, N) temporaries
    besides the stored states (time-major, so each step's slice is contiguous). Decays are
    recomputed in the backward pass: cheaper than storing them. The fast path on CPU; checked
    against `scan_sequential`. Out-of-place ops only, so functorch can vmap it (stacked training).
    u, delta: (B, L, E); A: (E, N); B, C: (B, L, N) -> y (B, L, E) without the D skip."""

    generate_vmap_rule = True

    @staticmethod
    def forward(u, delta, A, B, C):  # type: ignore[override]
        du = delta * u
        s = torch.zeros_like(du[:, 0, :, None] * A)
        states, ys = [], []
        for t in range(u.shape[1]):
            decay = torch.exp(delta[:, t, :, None] * A)
            s = torch.addcmul(du[:, t, :, None] * B[:, t, None, :], decay, s)
            states.append(s)
            ys.append(torch.bmm(s, C[:, t, :, None])[..., 0])
        return torch.stack(ys, 1), torch.stack(states, 0)

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[override]
        ctx.save_for_backward(*inputs, output[1])
        ctx.mark_non_differentiable(output[1])
        ctx.set_materialize_grads(False)  # no full-size zero gradient for the states output

    @staticmethod
    def backward(ctx, gy, _g_states):  # type: ignore[override]
        if gy is None:  # only the (non-differentiable) states output was used
            return None, None, None, None, None
        u, delta, A, B, C, states = ctx.saved_tensors
        du = delta * u
        L = u.shape[1]
        g = torch.zeros_like(states[0])  # dLoss/ds_t, accumulated backwards in time
        gA = torch.zeros_like(g)  # summed over the batch at the end
        g_du, g_dt, gB, gC = [None] * L, [None] * L, [None] * L, [None] * L
        for t in range(L - 1, -1, -1):
            # s_t = exp(delta_t A) * s_{t-1} + du_t B_t;  y_t = <C_t, s_t>
            gC[t] = torch.bmm(gy[:, t, None, :], states[t])[:, 0]
            g = torch.addcmul(g, gy[:, t, :, None], C[:, t, None, :])
            g_du[t] = torch.bmm(g, B[:, t, :, None])[..., 0]
            gB[t] = torch.bmm(du[:, t, None, :], g)[:, 0]
            g = g * torch.exp(delta[:, t, :, None] * A)  # now dLoss/ds_{t-1} from this step
            if t:
                g_exp = g * states[t - 1]  # dLoss/d(delta_t A)
                g_dt[t] = (g_exp * A).sum(-1)
                gA = torch.addcmul(gA, g_exp, delta[:, t, :, None])
            else:
                g_dt[t] = torch.zeros_like(g_du[t])
        g_du_t = torch.stack(g_du, 1)
        return (g_du_t * delta, torch.stack(g_dt, 1) + g_du_t * u, gA.sum(0),
                torch.stack(gB, 1), torch.stack(gC, 1))


def fused_scan(u, delta, A, B, C) -> torch.Tensor:
    return FusedScan.apply(u, delta, A, B, C)[0]


class RMSNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class MambaMixer(nn.Module):
    def __init__(self, width: int, d_state: int, expand: int, d_conv: int, dt_rank: int,
                 dt_min: float, dt_max: float, scan: str):
        super().__init__()
        E = expand * width
        self.E, self.N, self.d_conv, self.dt_rank, self.scan = E, d_state, d_conv, dt_rank, scan
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

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        L = h.shape[1]
        u, z = self.in_proj(h).chunk(2, -1)  # (B, L, E) each
        u = F.silu(self.conv(u.transpose(1, 2))[..., :L].transpose(1, 2))
        delta, B, C = self._ssm_inputs(u)
        # outside autocast, in the weights' dtype: a recurrence over L positions drifts in bf16
        with torch.autocast(u.device.type, enabled=False):
            y = self._scan(*(t.to(self.A_log.dtype) for t in (u, delta, B, C, z)))
        return self.out_proj(y)

    def _scan(self, u, delta, B, C, z) -> torch.Tensor:  # (B, L, E) each but B, C: (B, L, N)
        A = -torch.exp(self.A_log)  # (E, N)
        if self.scan == "auto" and _cuda_scan is not None and u.is_cuda and not _under_vmap(u):
            y = _cuda_scan(u.transpose(1, 2).contiguous(), delta.transpose(1, 2).contiguous(), A.contiguous(),
                           B.transpose(1, 2).contiguous(), C.transpose(1, 2).contiguous(), self.D.float(),
                           z=z.transpose(1, 2).contiguous())
            return y.transpose(1, 2)
        scan = self.scan if self.scan != "auto" else ("parallel" if u.is_cuda else "fused")
        if scan == "fused":
            y = fused_scan(u, delta, A, B, C)
        else:
            dA = torch.exp(delta[..., None] * A)  # (B, L, E, N)
            dBx = (delta * u)[..., None] * B[:, :, None, :]
            y = (scan_sequential if scan == "sequential" else scan_parallel)(dA, dBx, C)
        return (y + self.D * u) * F.silu(z)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        return {"conv": torch.zeros(batch, self.E, self.d_conv - 1, device=device, dtype=dtype),
                "ssm": torch.zeros(batch, self.E, self.N, device=device, dtype=dtype)}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One position: h (B, width) and the layer's state -> output (B, width), new state."""
        u, z = self.in_proj(h).chunk(2, -1)
        window = torch.cat([state["conv"], u[..., None]], -1)  # (B, E, d_conv): the last d_conv inputs
        u = F.silu((window * self.conv.weight[:, 0]).sum(-1) + self.conv.bias)
        delta, B, C = self._ssm_inputs(u)
        A = -torch.exp(self.A_log)
        s = torch.exp(delta[..., None] * A) * state["ssm"] + (delta * u)[..., None] * B[:, None, :]
        y = (s * C[:, None, :]).sum(-1) + self.D * u
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for norm, mixer in zip(self.norms, self.mixers):
            h = h + mixer(norm(h))
        return self.head(self.norm_f(h))

    def init_state(self, batch: int, device=None, dtype=None) -> list[dict[str, torch.Tensor]]:
        return [m.init_state(batch, device, dtype) for m in self.mixers]

    def step(self, x_t: torch.Tensor, state: list[dict[str, torch.Tensor]]) -> tuple[torch.Tensor, list]:
        """One position of input (B,) tokens or (B, D) vectors -> (B, output_dim), new state."""
        h = self.embed(x_t)
        new = []
        for norm, mixer, s in zip(self.norms, self.mixers, state):
            out, s = mixer.step(norm(h), s)
            h = h + out
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
and on GPU, else parallel on GPU, fused on CPU) | fused | parallel | sequential."""

    layers: int = 2
    width: int = 64
    d_state: int = 16
    expand: int = 2
    d_conv: int = 4
    dt_rank: int | None = None
    dt_min: float = 0.001
    dt_max: float = 0.1
    norm: Literal["rms", "layer"] = "rms"
    scan: Literal["auto", "fused", "parallel", "sequential"] = "auto"

    def __post_init__(self) -> None:
        for name in ("layers", "width", "d_state", "expand", "d_conv"):
            v = getattr(self, name)
            check(v >= 1, name, f"must be >= 1, got {v}")
        check(self.dt_rank is None or self.dt_rank >= 1, "dt_rank", f"must be >= 1, got {self.dt_rank}")
        check(0 < self.dt_min <= self.dt_max, "dt_min", f"need 0 < dt_min <= dt_max, got {self.dt_min}, {self.dt_max}")
        check(self.norm in _NORMS, "norm", f"must be one of {', '.join(_NORMS)}, got {self.norm!r}")
        check(self.scan in _SCANS, "scan", f"must be one of {', '.join(_SCANS)}, got {self.scan!r}")

    def short_name(self) -> str:
        return f"Mamba-{self.width}"

    def build(self, spec: TaskSpec) -> Mamba:
        return Mamba(self, spec)
