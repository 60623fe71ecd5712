"""Softmax attention, softmax(Q K^T * scale) V, in one of two implementations of the same math:

- "fused" (the default): `torch.nn.functional.scaled_dot_product_attention`, which never
  materialises the (B, H, L, L) scores (on a CPU, a blocked kernel with an online softmax);
- "explicit": the scores, their softmax and the product with V written out. It is what a model
  uses when it must report its weights (`attention_maps`, `attention`), and what runs under
  `vmap` (stacked training): torch has no batching rule for the fused CPU kernel and would
  replace it by a Python loop over the stacked models.

The two agree to float32 rounding (tests/models/test_attention.py); which one a model uses is an
implementation switch (`use_attention`), not a config field, so it never enters a run's id.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import check
from .ops import under_vmap

IMPLS = ("fused", "explicit")


def weights(q: torch.Tensor, k: torch.Tensor, *, causal: bool, scale: float | None = None,
            bias: torch.Tensor | None = None) -> torch.Tensor:
    """(..., Lq, Lk) softmax weights of queries q (..., Lq, E) on keys k (..., Lk, E); scale None
    divides the scores by sqrt(E); `bias` (broadcast to the scores) is added to them (ALiBi).
    causal masks key j > query i (positions aligned at the start)."""
    scores = q @ k.transpose(-1, -2)
    if scale is None:
        scores = scores / math.sqrt(q.shape[-1])
    elif scale != 1.0:
        scores = scores * scale
    if bias is not None:
        scores = scores + bias
    if causal:
        future = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return scores.softmax(-1)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
           scale: float | None = None, impl: str = "fused", bias: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(q k^T * scale + bias, causally masked when `causal`) v: (..., Lq, Ev). Fused unless
    impl is "explicit" or the call is inside vmap."""
    if impl == "fused" and not under_vmap(q):
        if bias is None and causal and q.device.type == "cpu" and q.shape[-2] == k.shape[-2] > CHUNK:
            return _causal_in_chunks(q, k, v, scale)
        if bias is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        if causal:
            future = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).triu(1)
            bias = bias.masked_fill(future, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), scale=scale)
    return weights(q, k, causal=causal, scale=scale, bias=bias) @ v


# above this length a causal self-attention on the CPU runs in query chunks (`_causal_in_chunks`)
CHUNK = 128


def _causal_in_chunks(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float | None) -> torch.Tensor:
    """Causal self-attention (..., L, E) as ceil(L / CHUNK) calls of the fused kernel, each a block
    of queries against the keys up to its last query (the future masked): the CPU kernel cuts the
    keys in blocks of up to 512 and so skips none below that length, and these calls leave out the
    upper triangle's blocks (measured: benchmarks/search_flops.py --ratios, before and after).
    The same numbers as one causal call, to float32 rounding (tests/models/test_attention.py)."""
    L = q.shape[-2]
    n = -(-L // CHUNK)
    size = -(-L // n)
    ys = []
    for start in range(0, L, size):
        end = min(L, start + size)
        seen = torch.ones(end - start, end, dtype=torch.bool, device=q.device).tril(start)  # key j <= query i
        ys.append(F.scaled_dot_product_attention(q[..., start:end, :], k[..., :end, :], v[..., :end, :],
                                                 attn_mask=seen, scale=scale))
    return torch.cat(ys, -2)


# --- positions inside attention: rotary (RoPE) and linear biases (ALiBi) ----------------------
ROPE_BASE = 10_000.0


def rope_angles(positions: torch.Tensor, dim: int, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (len(positions), dim/2) of RoPE's angles t * base^(-2i/dim), computed in
    float64 and given in `dtype`."""
    inv = ROPE_BASE ** (-torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim)
    ang = positions.double()[:, None] * inv[None]  # (L, dim/2)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """RoPE: x (..., L, d) rotated pairwise (x_2i, x_2i+1) by the angles of its positions (L,),
    so that q_t . k_s depends on t - s alone."""
    cos, sin = rope_angles(positions, x.shape[-1], x.dtype)  # (L, d/2)
    a, b = x[..., 0::2], x[..., 1::2]  # (..., L, d/2)
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)  # (..., L, d)


def alibi_slopes(heads: int) -> torch.Tensor:
    """ALiBi's head slopes: the geometric sequence 2^(-8/H), 2^(-16/H), ..., 2^(-8) (H heads)."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)])


def alibi_bias(heads: int, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """(H, Lq, Lk) ALiBi bias -slope_h * |i - j| for query positions i and key positions j (the
    causal mask, where there is one, removes j > i)."""
    dist = (q_pos[:, None] - k_pos[None]).abs().float()  # (Lq, Lk)
    return -alibi_slopes(heads).to(dist.device)[:, None, None] * dist  # (H, Lq, Lk)


def use_attention(model: nn.Module, impl: str) -> nn.Module:
    """Set the attention implementation of every attention layer in `model` ("fused" or
    "explicit"; the outputs are the same to rounding). Returns the model."""
    check(impl in IMPLS, "attention", f"must be one of {', '.join(IMPLS)}, got {impl!r}")
    for m in model.modules():
        if hasattr(m, "attention_impl"):
            m.attention_impl = impl  # type: ignore[assignment]  # a module attribute, typed Tensor | Module by torch
    return model
