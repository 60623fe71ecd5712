"""Softmax attention, softmax(Q K^T * scale) V, in one of two implementations of the same math:

- "fused" (the default): `torch.nn.functional.scaled_dot_product_attention`, which never
  materialises the (B, H, L, L) scores (on a CPU, a blocked kernel with an online softmax);
- "explicit": the scores, their softmax and the product with V written out. It is what a model
  uses when it must report its weights (`attention_maps`, `attention`), and what runs under
  `vmap` (stacked training): torch has no batching rule for the fused CPU kernel and would
  replace it by a Python loop over the stacked models.

The two agree to float32 rounding (tests/test_attention.py); which one a model uses is an
implementation switch (`use_attention`), not a config field, so it never enters a run's id.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import check

IMPLS = ("fused", "explicit")


def under_vmap(t: torch.Tensor) -> bool:
    """Whether `t` is a tensor seen inside `vmap` (the stacked path of the engine)."""
    try:
        return bool(torch._C._functorch.is_batchedtensor(t))
    except AttributeError:  # private API moved: take the path that vmaps natively
        return True


def weights(q: torch.Tensor, k: torch.Tensor, *, causal: bool, scale: float | None = None) -> torch.Tensor:
    """(..., Lq, Lk) softmax weights of queries q (..., Lq, E) on keys k (..., Lk, E); scale None
    divides the scores by sqrt(E). causal masks key j > query i (positions aligned at the start)."""
    scores = q @ k.transpose(-1, -2)
    if scale is None:
        scores = scores / math.sqrt(q.shape[-1])
    elif scale != 1.0:
        scores = scores * scale
    if causal:
        future = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return scores.softmax(-1)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
           scale: float | None = None, impl: str = "fused") -> torch.Tensor:
    """softmax(q k^T * scale, causally masked when `causal`) v: (..., Lq, Ev). Fused unless
    impl is "explicit" or the call is inside vmap."""
    if impl == "fused" and not under_vmap(q):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    return weights(q, k, causal=causal, scale=scale) @ v


def use_attention(model: nn.Module, impl: str) -> nn.Module:
    """Set the attention implementation of every attention layer in `model` ("fused" or
    "explicit"; the outputs are the same to rounding). Returns the model."""
    check(impl in IMPLS, "attention", f"must be one of {', '.join(IMPLS)}, got {impl!r}")
    for m in model.modules():
        if hasattr(m, "attention_impl"):
            m.attention_impl = impl  # type: ignore[assignment]  # a module attribute, typed Tensor | Module by torch
    return model
