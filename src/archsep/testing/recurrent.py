"""The recurrent contract's checks (`SeqModel.init_state`, `step`, `recurrent`), run by
`check_model` before pruning, on a float64 copy of the model (so that rounding is far below
any real disagreement):

- causal: (models whose `is_causal()`: every model with a step form, and causal models that say
  so) changing the inputs after position i changes no output at or before i, for i in
  {0, L//2, L-2};
- recurrent: (models with a step form) `recurrent(x)`, the step form run over the sequence, of a
  copy pruned to the readout (the step form ignores pruning) equals the unpruned `forward(x)`
  at every position, and `forward` of the first position alone; and the gradients of a fixed
  random projection of the outputs with respect to every parameter agree;
- state-size: (models with a step form whose `state_size` is not None) the floats the step form
  carries per sequence (complex numbers count two) are `state_size(L)` at every position.
"""
from __future__ import annotations

import copy
import math
from contextlib import AbstractContextManager
from typing import Any, Callable

import torch

from ..models.base import SeqModel
from ..tasks.base import TaskSpec
from .common import _gen, _require

CUTS_TOL = 1e-9  # causal: largest change at or before a cut, relative to the outputs' scale
VALUE_TOL = 1e-7  # recurrent: outputs, relative to their scale (float64)
GRAD_TOL = 1e-6  # recurrent: each parameter's gradient, relative to its scale (float64)


def _float64(net: SeqModel) -> SeqModel:
    twin = copy.deepcopy(net).double()
    twin.eval()
    return twin


def _as64(x: torch.Tensor) -> torch.Tensor:
    return x.double() if x.is_floating_point() else x


def _changed_after(x: torch.Tensor, i: int, spec: TaskSpec) -> torch.Tensor:
    """x with every input after position i changed: token ids shifted by one, vectors moved by noise."""
    y = x.clone()
    if spec.input == "tokens":
        y[:, i + 1:] = (y[:, i + 1:] + 1) % spec.input_dim
    else:
        y[:, i + 1:] += torch.randn(y[:, i + 1:].shape, generator=_gen(i), dtype=torch.float64)
    return y


def _scale(t: torch.Tensor) -> float:
    return 1.0 + float(t.abs().max()) if t.numel() else 1.0


def check_causal(net: SeqModel, x: torch.Tensor, spec: TaskSpec) -> None:
    m, x = _float64(net), _as64(x)
    L = x.shape[1]
    with torch.no_grad():
        base = m(x)  # (B, L, C)
        for i in sorted({0, L // 2, L - 2}):
            out = m(_changed_after(x, i, spec))
            diff = float((out[:, : i + 1] - base[:, : i + 1]).abs().max())
            _require(diff <= CUTS_TOL * _scale(base),
                     f"changing the inputs after position {i} changed the outputs at positions <= {i} by {diff:.3g}: "
                     "a later input changes an earlier output (not causal)")


def _grads(out: torch.Tensor, w: torch.Tensor, params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    gs = torch.autograd.grad((out * w).sum(), params, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, gs)]


def check_recurrent(net: SeqModel, x: torch.Tensor) -> None:
    m, x = _float64(net), _as64(x)
    pruned = copy.deepcopy(m)
    pruned.prune_to_readout()  # the step form must ignore it
    B, L = x.shape[:2]
    par = m(x)  # (B, L, C), unpruned (or (B, 1, C): a model may give only the last position)
    rec = pruned.recurrent(x)  # (B, L, C)
    _require(rec.dim() == 3 and tuple(rec.shape[:2]) == (B, L),
             f"recurrent(x) gave {tuple(rec.shape)}: the step form must give (B, output_dim) at each position")
    rec = rec if par.shape[1] == L else rec[:, -1:]  # (B, L or 1, C), as par
    _require(rec.shape == par.shape, f"recurrent(x) gave {tuple(rec.shape)}, forward(x) {tuple(par.shape)}")
    err, scale = (rec - par).detach().abs(), _scale(par.detach())  # (B, L, C)
    _require(float(err.max()) <= VALUE_TOL * scale,
             f"the step form run over the sequence differs from the parallel forward by {float(err.max()):.3g} "
             f"(float64; outputs up to {scale - 1:.3g}), most at position {int(err.amax((0, 2)).argmax())}")
    if par.shape[1] == L:
        with torch.no_grad():
            first = m(x[:, :1])  # (B, 1, C)
        diff = float((rec[:, :1].detach() - first).abs().max()) if first.shape == (B, 1, par.shape[2]) else math.inf
        _require(diff <= VALUE_TOL * scale, f"forward of the first position alone differs from the step form's "
                                            f"output there by {diff:.3g}")
    w = torch.randn(par.shape, generator=_gen(3), dtype=par.dtype)  # a fixed projection of the outputs
    names = [n for n, p in m.named_parameters() if p.requires_grad]
    g_par = _grads(par, w, [p for p in m.parameters() if p.requires_grad])
    g_rec = _grads(rec, w, [p for p in pruned.parameters() if p.requires_grad])
    for name, a, b in zip(names, g_rec, g_par):
        d = float((a - b).abs().max()) if a.numel() else 0.0
        _require(d <= GRAD_TOL * _scale(b), f"the gradient of {name} through the step form differs from the parallel "
                                            f"form's by {d:.3g} (of up to {_scale(b) - 1:.3g})")


def _floats(state: Any) -> int:
    """Floats in a state: every floating or complex tensor in it (nested lists, tuples, dicts)."""
    if isinstance(state, torch.Tensor):
        return state.numel() * (2 if state.is_complex() else 1 if state.is_floating_point() else 0)
    if isinstance(state, dict):
        return sum(_floats(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(_floats(v) for v in state)
    return 0


def check_state_size(net: SeqModel, x: torch.Tensor, size: int) -> None:
    m, x = _float64(net), _as64(x)
    B, L = x.shape[:2]
    state, seen = m.init_state(B, x.device, torch.float64), set()
    with torch.no_grad():
        for t in range(L):
            _, state = m.step(x[:, t], state, t)
            seen.add(_floats(state) // B)
    _require(seen == {size}, f"the step form carries {sorted(seen)} floats per sequence, state_size({L}) says {size}")


def recurrent_checks(check: Callable[[str], AbstractContextManager[None]], net: SeqModel, x: torch.Tensor,
                     spec: TaskSpec) -> None:
    """The checks above that apply to `net` on input x (B, L[, D]), each named by `check`."""
    B, L = x.shape[:2]
    if not (net.is_causal() or net.has_step()):
        return
    try:
        with torch.no_grad():
            per_position = net.eval()(x[:1]).shape[1] == L  # a model may give only the last position, (B, 1, C)
    except Exception:  # noqa: BLE001  (the check below runs it again and reports it in one line)
        per_position = True
    if net.is_causal() and per_position and L >= 2:
        with check("causal"):
            check_causal(net, x, spec)
    if not net.has_step():
        return
    with check("recurrent"):
        check_recurrent(net, x)
    size = net.state_size(L)
    if size is not None:
        with check("state-size"):
            check_state_size(net, x, size)
