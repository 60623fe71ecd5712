"""Mamba-1's selective scan in PyTorch: s_t = exp(Δ_t A) * s_{t-1} + Δ_t B_t u_t, y_t = <C_t, s_t>
per channel of the inner width E, with N states per channel (models/mamba.py is the model).

Four implementations of the same recurrence (tests/models/test_scan.py and tests/models/test_models_paper_a.py
check them against `scan_sequential`; `kernels.native_scan` is the fifth, in C):
- `scan_sequential`: the step-by-step reference, differentiated by autograd;
- `scan_parallel`: Hillis-Steele doubling over the length, log2(L) elementwise steps on
  (B, L, E, N) tensors; only products of decays <= 1 appear, so it is stable. For GPUs.
- `fused_scan` (`FusedScan`): the sequential loop with a hand-written reverse-time backward, one
  (B, E, N) slice at a time; out-of-place, so it runs under vmap.
- `chunked_scan` (`ChunkedScan`): the same recurrence `chunk` positions at a time, nothing of
  size (B, L, E, N) allocated; the fast PyTorch path on CPU (not under vmap).
"""
from __future__ import annotations

import torch

from ...errors import check


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

