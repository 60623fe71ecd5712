"""Mamba-1's selective scan and its causal conv + SiLU in C (`selective_scan.c`, compiled on first
use by `native.library`), as autograd functions over ctypes: float32 on CPU, one thread, not under
vmap. tests/models/test_native_scan.py checks them against the PyTorch reference."""
from __future__ import annotations

import ctypes

import torch

from ...errors import check
from . import native


def _ptr(t: torch.Tensor) -> ctypes.c_void_p:
    """The address of `t`'s data for C. It does not keep `t` alive: the caller keeps every
    tensor it passes bound to a name until the call has returned."""
    return ctypes.c_void_p(t.data_ptr())


def _scan_library():
    return typed(native.library())


def typed(lib):
    """`lib` (a compiled selective_scan.c, or None) with its functions' C signatures set, once."""
    if lib is not None and not getattr(lib, "_typed", False):
        for fn, n_ptr, n_int in ((lib.scan_forward, 10, 4), (lib.scan_backward, 16, 4),
                                 (lib.conv_silu_forward, 4, 5), (lib.conv_silu_backward, 8, 5)):
            fn.argtypes = [ctypes.c_void_p] * n_ptr + [ctypes.c_int64] * n_int
            fn.restype = None
        lib._typed = True
    return lib


def backward_scratch(L: int, N: int, E: int) -> int:
    """Floats of scratch `scan_backward` needs for sequences of length L: one sequence's states
    (with s_{-1}) and decays, its outputs, g, a zero row and gy."""
    return (2 * L + 1) * N * E + L * E + 2 * N * E + E


def native_available() -> bool:
    """Whether the compiled selective scan (models/kernels/selective_scan.c) is there to use."""
    return _scan_library() is not None


class NativeScan(torch.autograd.Function):
    """`FusedScan`'s recurrence with the skip and the gate, (y + D u) * silu(z), in C
    (`models/kernels/selective_scan.c`, compiled on first use by `native.library`): per sequence, its
    whole (N, E) state stays in cache, each position is one vectorised pass over it, and exp is
    a branch-free polynomial. The backward pass recomputes one sequence's states, decays and
    outputs at a time (about 2 L * N * E floats of scratch), so its walk back in time evaluates no
    exp and copies no state. Nothing of size (B, L, E, N) is kept between the passes, only the inputs.
    float32 on CPU, one thread, not under vmap.
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
        work = u.new_empty(backward_scratch(L, N, E))
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

