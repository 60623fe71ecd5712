"""Checks every recurrent mixer's tests share (test_retnet_linear, test_mixers_zoo): its
parallel (training) form and its step-by-step recurrent form are one model."""
from __future__ import annotations

import torch


def assert_forms_agree(model, x: torch.Tensor, out_dim: int) -> None:
    """float32: the recurrent form equals the parallel form to 1e-5, and the parallel form trains
    (every parameter gets a finite gradient, not all zero)."""
    B, L = x.shape[:2]
    par = model(x)  # (B, L, C)
    assert par.shape == (B, L, out_dim)
    with torch.no_grad():
        rec = model.recurrent(x)
    torch.testing.assert_close(rec, par.detach(), rtol=0, atol=1e-5)
    par.square().mean().backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert all(g is not None and torch.isfinite(g).all() for g in grads.values()), [n for n, g in grads.items()
                                                                                   if g is None]
    assert sum(g.abs().sum().item() for g in grads.values()) > 0


def assert_forms_agree_in_float64(model, x: torch.Tensor) -> None:
    """float64 (model and x): outputs to 1e-10, and the recurrent form's gradients equal the parallel's."""
    out = []
    for form in (model.forward, model.recurrent):
        model.zero_grad()
        y = form(x)
        y.square().sum().backward()
        out.append((y.detach(), [p.grad.clone() for p in model.parameters()]))
    torch.testing.assert_close(out[1][0], out[0][0], rtol=0, atol=1e-10)
    for g_rec, g_par in zip(out[1][1], out[0][1]):
        torch.testing.assert_close(g_rec, g_par, rtol=1e-7, atol=1e-10)
