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
  at a time; several times faster than 'sequential' and 'parallel' on CPU.
- 'chunked': the same recurrence taken `chunk` positions at a time (`ChunkedScan`): the decays,
  inputs and gradient terms of a chunk are a few whole-chunk ops, only one multiply-add per
  position stays in the Python loop, nothing of size (B, L, E, N) is ever allocated (only the
  state at each chunk's start is kept; the backward recomputes a chunk's decays and states),
  and the contractions with B and C run state-major so that they are matrix products. Every
  decay is exp(Δ_t A) <= 1 of one position, as in the reference: no cumulative sums are
  exponentiated, so it is as stable as the sequential form. The fast path on CPU.
- 'native': the same recurrence in C (`selective_scan.c`, `NativeScan`), compiled on first use
  with the machine's C compiler (`native.library`): one sequence's (N, E) state stays in cache
  and each position is one vectorised pass over it. float32 on CPU; where no compiler is found,
  'auto' takes 'chunked' instead.
- 'auto': the CUDA `mamba_ssm` kernel when it is installed and the input is on a GPU, else
  'parallel' on a GPU; on CPU 'native' for float32 where it compiled, else 'chunked' ('fused'
  inside vmap, which neither 'native' nor 'chunked' can enter).

Which scan runs is the config's `scan` unless `use_scan(model, impl)` overrides it: an
implementation switch, not a config field, so run ids stay the same (they all compute the
same thing; tests/test_scan.py checks them against 'sequential').

`step` runs the model one position at a time from an explicit state; its state is what
`state_size` counts: per layer the SSM state E*d_state plus the causal-conv buffer
E*(d_conv-1) (the last d_conv-1 conv inputs). `state_breakdown` reports the two separately
(papers often quote only the SSM part).
"""
from __future__ import annotations

import ctypes
import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import check
from ..tasks.base import TaskSpec
from . import native
from .base import ModelConfig, SeqModel, input_layer
from .registry import MODELS

try:  # optional fused CUDA kernel; never required
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn as _cuda_scan
except Exception:  # noqa: BLE001  (ImportError, or a broken CUDA build)
    _cuda_scan = None

_SCANS = ("auto", "native", "chunked", "fused", "parallel", "sequential")


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
    def forward(u, delta, A, B, C):
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
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs, output[1])
        ctx.mark_non_differentiable(output[1])
        ctx.set_materialize_grads(False)  # no full-size zero gradient for the states output

    @staticmethod
    def backward(ctx, gy, _g_states):
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


# positions per chunk: the most that keeps a chunk's (chunk, B, N, E) buffers at <= 2^20
# elements (4 MB in float32: the ~20 passes over a chunk stay in cache), at most 4.
# Measured (Mamba-64, lookup, N = 400, batch 64, 1 thread, whole step): chunks of 2-4 0.83-0.96 s,
# 8 1.0 s, 16 1.13 s, 1 1.15 s; the fused loop 1.28 s.
MAX_CHUNK, CHUNK_ELEMS = 4, 1 << 20


def default_chunk(batch: int, E: int, N: int) -> int:
    return max(1, min(MAX_CHUNK, CHUNK_ELEMS // max(1, batch * E * N)))


class ChunkedScan(torch.autograd.Function):
    """`FusedScan`'s recurrence, `chunk` positions at a time, time-major and state-major: a
    chunk's states are a (n, B, N, E) buffer. Per chunk, the forward pass computes all decays
    exp(Δ_t A) and inputs Δ_t u_t B_t in two ops, runs s_t = decay_t * s_{t-1} + input_t as one
    in-place multiply-add per position, and reads y_t = <C_t, s_t> for the whole chunk as one
    batched matrix product. Only each chunk's starting state is saved. The backward pass walks
    the chunks in reverse: it recomputes the chunk's decays and states from its starting state,
    accumulates dLoss/ds_t backwards (one add and one multiply per position, the carry into the
    previous chunk being decay * dLoss/ds at the chunk's first position), and forms the
    gradients of u, Δ, A, B and C for the whole chunk with a few ops. Buffers are reused from
    chunk to chunk. u, delta: (B, L, E); A: (E, N); B, C: (B, L, N) -> y (B, L, E) without the
    D skip. Uses in-place ops and out= arguments, so it cannot run under vmap ('fused' does)."""

    @staticmethod
    def forward(u, delta, A, B, C, chunk):
        Bt, L, E = u.shape
        N, n0 = A.shape[1], min(chunk, L)
        AT = A.t().contiguous()  # (N, E); a transposed view would take a slow broadcast path
        dt, du = (t.transpose(0, 1).contiguous() for t in (delta, delta * u))  # (L, B, E)
        Bm, Cm = (t.transpose(0, 1).contiguous() for t in (B, C))  # (L, B, N)
        y = u.new_empty(L, Bt, E)
        D, S = (u.new_empty(n0, Bt, N, E) for _ in range(2))  # decays, states of one chunk
        starts = u.new_empty((L + chunk - 1) // chunk, Bt, N, E)  # the state before each chunk
        starts[0].zero_()
        for c, c0 in enumerate(range(0, L, chunk)):
            n = min(chunk, L - c0)
            dA = torch.mul(dt[c0:c0 + n, :, None, :], AT, out=D[:n]).exp_()
            Sc = torch.mul(du[c0:c0 + n, :, None, :], Bm[c0:c0 + n, :, :, None], out=S[:n])
            s = starts[c]
            for a_t, s_t in zip(dA.unbind(0), Sc.unbind(0)):  # unbind: one op for all the views
                s = s_t.addcmul_(a_t, s)
            if c + 1 < len(starts):
                starts[c + 1].copy_(s)  # S is overwritten by the next chunk
            torch.bmm(Cm[c0:c0 + n].view(n * Bt, 1, N), Sc.view(n * Bt, N, E), out=y[c0:c0 + n].view(n * Bt, 1, E))
        return y.transpose(0, 1), starts

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.chunk = inputs[5]
        ctx.save_for_backward(*inputs[:5], output[1])
        ctx.mark_non_differentiable(output[1])
        ctx.set_materialize_grads(False)

    @staticmethod
    def backward(ctx, gy, _g_starts):
        if gy is None:
            return None, None, None, None, None, None
        u, delta, A, B, C, starts = ctx.saved_tensors
        chunk = ctx.chunk
        Bt, L, E = u.shape
        N, n0 = A.shape[1], min(chunk, L)
        AT = A.t().contiguous()
        dt, du, gyt = (t.transpose(0, 1).contiguous() for t in (delta, delta * u, gy))
        Bm, Cm = (t.transpose(0, 1).contiguous() for t in (B, C))
        g_du, g_dt = u.new_empty(L, Bt, E), u.new_empty(L, Bt, E)
        gB, gC = u.new_empty(L, Bt, N), u.new_empty(L, Bt, N)
        gAT = torch.zeros_like(AT)
        D, S, G, K, W = (u.new_empty(n0, Bt, N, E) for _ in range(5))
        carry = None  # dLoss/ds at the last position of the chunk, through later positions
        for c in range(starts.shape[0] - 1, -1, -1):
            c0 = c * chunk
            n = min(chunk, L - c0)
            c1, nb = c0 + n, n * Bt
            dA = torch.mul(dt[c0:c1, :, None, :], AT, out=D[:n]).exp_()
            Sc = torch.mul(du[c0:c1, :, None, :], Bm[c0:c1, :, :, None], out=S[:n])
            s = starts[c]
            for a_t, s_t in zip(dA.unbind(0), Sc.unbind(0)):
                s = s_t.addcmul_(a_t, s)
            Gc = torch.mul(gyt[c0:c1, :, None, :], Cm[c0:c1, :, :, None], out=G[:n])  # then dLoss/ds_t
            Kc, Wc = K[:n], W[:n]
            for a_t, g_t, k_t in zip(*(x.unbind(0)[::-1] for x in (dA, Gc, Kc))):
                if carry is not None:
                    g_t += carry
                carry = torch.mul(a_t, g_t, out=k_t)  # decay_t * dLoss/ds_t: the part reaching s_{t-1}
            carry = carry.clone()  # Kc[0]: K is reused by the next chunk
            torch.sum(torch.mul(Sc, gyt[c0:c1, :, None, :], out=Wc), -1, out=gC[c0:c1])
            torch.bmm(Bm[c0:c1].view(nb, 1, N), Gc.view(nb, N, E), out=g_du[c0:c1].view(nb, 1, E))
            torch.sum(torch.mul(Gc, du[c0:c1, :, None, :], out=Wc), -1, out=gB[c0:c1])
            Kc[1:].mul_(Sc[:-1])
            Kc[0].mul_(starts[c])  # now dLoss/d(Δ_t A) = dLoss/ds_t * decay_t * s_{t-1}
            torch.sum(torch.mul(Kc, AT, out=Wc), -2, out=g_dt[c0:c1])
            gAT += Kc.mul_(dt[c0:c1, :, None, :]).sum((0, 1))
        g_u = g_du * dt  # time-major, as the rest: no strided elementwise ops on (B, L, E)
        g_dt.addcmul_(g_du, u.transpose(0, 1))
        return g_u.transpose(0, 1), g_dt.transpose(0, 1), gAT.t(), gB.transpose(0, 1), gC.transpose(0, 1), None


def chunked_scan(u, delta, A, B, C, chunk: int | None = None) -> torch.Tensor:
    """`ChunkedScan` with `chunk` positions per chunk (default: `default_chunk`)."""
    if chunk is None:
        chunk = default_chunk(u.shape[0], u.shape[2], A.shape[1])
    check(isinstance(chunk, int) and chunk >= 1, "chunk", f"must be an integer >= 1, got {chunk!r}")
    if u.shape[1] == 0:  # no positions: no chunks
        return u * 0
    return ChunkedScan.apply(u, delta, A, B, C, chunk)[0]


def _ptr(t: torch.Tensor) -> ctypes.c_void_p:
    """The address of `t`'s data for C. It does not keep `t` alive: the caller keeps every
    tensor it passes bound to a name until the call has returned."""
    return ctypes.c_void_p(t.data_ptr())


def _scan_library():
    lib = native.library()
    if lib is not None and not getattr(lib, "_typed", False):
        for fn, n_ptr, n_int in ((lib.scan_forward, 10, 4), (lib.scan_backward, 16, 4),
                                 (lib.conv_silu_forward, 4, 5), (lib.conv_silu_backward, 8, 5)):
            fn.argtypes = [ctypes.c_void_p] * n_ptr + [ctypes.c_int64] * n_int
            fn.restype = None
        lib._typed = True
    return lib


def native_available() -> bool:
    """Whether the compiled selective scan (models/selective_scan.c) is there to use."""
    return _scan_library() is not None


class NativeScan(torch.autograd.Function):
    """`FusedScan`'s recurrence with the skip and the gate, (y + D u) * silu(z), in C
    (`models/selective_scan.c`, compiled on first use by `native.library`): per sequence, its
    whole (N, E) state stays in cache, each position is one vectorised pass over it, and exp is
    a branch-free polynomial. The backward pass recomputes one sequence's states and outputs at a
    time (about L * N * E floats of scratch) and walks back in time. Nothing of size (B, L, E, N)
    is kept between the passes, only the inputs. float32 on CPU, one thread, not under vmap.
    u, delta, z: (B, L, E); A: (E, N); B, C: (B, L, N); D: (E) -> (B, L, E), every one but A
    contiguous (`native_scan` makes them so, once for both passes)."""

    @staticmethod
    def forward(u, delta, A, B, C, D, z):
        Bt, L, E = u.shape
        N = A.shape[1]
        AT = A.t().contiguous()
        out, s, y = u.new_empty(Bt, L, E), u.new_empty(N, E), u.new_empty(E)
        _scan_library().scan_forward(*map(_ptr, (u, delta, AT, B, C, D, z, out, s, y)), Bt, L, E, N)
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, gout):
        u, delta, A, B, C, D, z = ctx.saved_tensors
        Bt, L, E = u.shape
        N = A.shape[1]
        AT, gout = A.t().contiguous(), gout.contiguous()
        gu, gdt, gz = (u.new_empty(Bt, L, E) for _ in range(3))
        gB, gC = u.new_empty(Bt, L, N), u.new_empty(Bt, L, N)
        gAT, gD = u.new_zeros(N, E), u.new_zeros(E)
        work = u.new_empty((L + 1) * N * E + L * E + 2 * N * E + E)
        _scan_library().scan_backward(*map(_ptr, (u, delta, AT, B, C, D, z, gout, gu, gdt, gAT, gB, gC, gD, gz, work)),
                                      Bt, L, E, N)
        return gu, gdt, gAT.t(), gB, gC, gD, gz


class NativeConvSiLU(torch.autograd.Function):
    """SiLU of Mamba's causal depthwise convolution, in C (`conv_silu_*` in selective_scan.c), on
    the (B, L, E) layout the projections give: no transposes, no cropping, one pass each way (the
    backward recomputes the convolution). x: (B, L, E) with contiguous channels and positions
    evenly spaced (a view of in_proj's output is fine: `native_conv_silu` settles it once);
    weight: (E, 1, K); bias: (E) -> (B, L, E)."""

    @staticmethod
    def forward(x, weight, bias):
        Bt, L, E = x.shape
        K = weight.shape[-1]
        wT, bias = weight.reshape(E, K).t().contiguous(), bias.contiguous()
        out = x.new_empty(Bt, L, E)
        _scan_library().conv_silu_forward(*map(_ptr, (x, wT, bias, out)), Bt, L, E, K, x.stride(1))
        return out

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, gout):
        x, weight, bias = ctx.saved_tensors
        Bt, L, E = x.shape
        K = weight.shape[-1]
        # every tensor the C code reads or writes is bound to a name until the call returns
        wT, bias, gout = weight.reshape(E, K).t().contiguous(), bias.contiguous(), gout.contiguous()
        gx, gwT, gbias, scratch = x.new_empty(Bt, L, E), x.new_zeros(K, E), x.new_zeros(E), x.new_empty(L * E)
        _scan_library().conv_silu_backward(*map(_ptr, (x, wT, bias, gout, gx, gwT, gbias, scratch)),
                                           Bt, L, E, K, x.stride(1))
        return gx, gwT.t().reshape(E, 1, K), gbias


def native_conv_silu(x, weight, bias) -> torch.Tensor:
    """`NativeConvSiLU` on x as it is where the C code can read it (channels contiguous, one
    stride between positions and L of them between sequences), else on a contiguous copy."""
    if x.stride(2) != 1 or x.stride(0) != x.shape[1] * x.stride(1):
        x = x.contiguous()
    return NativeConvSiLU.apply(x, weight, bias)


def native_scan(u, delta, A, B, C, D, z) -> torch.Tensor:
    """`NativeScan`, the gated output (y + D u) * silu(z): float32 CPU tensors only, and only
    where `native_available()`."""
    check(native_available(), "scan", f"'native' needs the compiled scan, which is not available here "
                                      f"({native.why_not()}); use 'chunked'")
    check(all(t.dtype == torch.float32 and t.device.type == "cpu" for t in (u, delta, A, B, C, D, z)), "scan",
          f"'native' takes float32 CPU tensors, got {u.dtype} on {u.device}")
    if u.shape[1] == 0:
        return u * 0
    u, delta, B, C, D, z = (t.contiguous() for t in (u, delta, B, C, D, z))  # copied once, saved as copied
    return NativeScan.apply(u, delta, A, B, C, D, z)


def use_scan(model: nn.Module, impl: str | None) -> nn.Module:
    """Run every Mamba layer of `model` with scan `impl` (one of auto, chunked, fused, parallel,
    sequential) whatever its config says; None goes back to the config's. An implementation
    switch: the config, and so the run id, stays the same. Returns the model."""
    check(impl is None or impl in _SCANS, "scan", f"must be one of {', '.join(_SCANS)}, got {impl!r}")
    for m in model.modules():
        if isinstance(m, MambaMixer):
            m.scan_impl = impl
    return model


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

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        L = h.shape[1]
        u, z = self.in_proj(h).chunk(2, -1)  # (B, L, E) each
        if self._which(u) == "native" and u.dtype == torch.float32 and u.device.type == "cpu" and L:  # compiled conv
            u = native_conv_silu(u, self.conv.weight, self.conv.bias)
        else:
            u = F.silu(self.conv(u.transpose(1, 2))[..., :L].transpose(1, 2))
        delta, B, C = self._ssm_inputs(u)
        # outside autocast, in the weights' dtype: a recurrence over L positions drifts in bf16
        off = torch.autocast(u.device.type, enabled=False) if u.device.type in ("cpu", "cuda") else nullcontext()
        with off:  # (the meta device, on which the planner sizes a step's memory, has no autocast)
            y = self._scan(*(t.to(self.A_log.dtype) for t in (u, delta, B, C, z)))
        return self.out_proj(y)

    def _which(self, u: torch.Tensor) -> str:
        """The scan that runs on `u` (the CUDA kernel aside): the config's or `use_scan`'s, 'auto'
        resolved (native for float32 on CPU where it compiled, else chunked; parallel on a GPU),
        and 'fused' under vmap in place of the in-place scans."""
        want = self.scan_impl or self.scan
        if want == "auto":
            cpu32 = u.device.type == "cpu" and u.dtype == torch.float32  # not meta: C needs real memory
            want = "parallel" if u.is_cuda else "native" if cpu32 and native_available() else "chunked"
        if want in ("chunked", "native") and _under_vmap(u):
            return "fused"  # same recurrence, written out-of-place for functorch
        return want

    def _scan(self, u, delta, B, C, z) -> torch.Tensor:  # (B, L, E) each but B, C: (B, L, N)
        A = -torch.exp(self.A_log)  # (E, N)
        want = self.scan_impl or self.scan
        if want == "auto" and _cuda_scan is not None and u.is_cuda and not _under_vmap(u):
            y = _cuda_scan(u.transpose(1, 2).contiguous(), delta.transpose(1, 2).contiguous(), A.contiguous(),
                           B.transpose(1, 2).contiguous(), C.transpose(1, 2).contiguous(), self.D.float(),
                           z=z.transpose(1, 2).contiguous())
            return y.transpose(1, 2)
        scan = self._which(u)
        if scan == "native":
            return native_scan(u, delta, A, B, C, self.D, z)
        if scan == "chunked":
            y = chunked_scan(u, delta, A, B, C)
        elif scan == "fused":
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
        u = F.silu((window * self.conv.weight[:, 0]).sum(-1) + self.conv.bias)  # type: ignore[operator]  # bias=True
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
        return [m.init_state(batch, device, dtype) for m in self.mixers]  # type: ignore[operator]

    def step(self, x_t: torch.Tensor, state: list[dict[str, torch.Tensor]]) -> tuple[torch.Tensor, list]:
        """One position of input (B,) tokens or (B, D) vectors -> (B, output_dim), new state."""
        h = self.embed(x_t)
        new = []
        for norm, mixer, s in zip(self.norms, self.mixers, state):
            out, s = mixer.step(norm(h), s)  # type: ignore[operator]
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
