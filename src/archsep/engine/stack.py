"""K independent models trained as one batched computation.

Parameters of K models with the same architecture are stacked along a leading axis and the
forward pass is `vmap`ped over it. AdamW is elementwise, so one AdamW over the stacked tensors
is exactly K independent AdamWs; the summed loss gives each slice its own model's gradient.
A model that finishes leaves the stack (parameters and optimizer state are sliced).
"""
from __future__ import annotations

import copy
import types
from typing import Sequence

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from ..models.recurrence import plain_forward


def _vmappable(module: nn.Module) -> nn.Module:
    """A parameter-less template whose recurrent layers use plain ops (fused kernels can't be vmapped)."""
    base = copy.deepcopy(module).to("meta")
    for m in base.modules():
        if isinstance(m, nn.RNNBase):
            m.forward = types.MethodType(plain_forward, m)  # type: ignore[method-assign]
    return base


def make_optimizer(params: Sequence[torch.Tensor], lr: float, weight_decay: float) -> torch.optim.Optimizer:
    # fused AdamW: one kernel for every tensor; falls back to the default where unsupported
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


class Single:
    """One model, called directly: the plain path, with the library's fused kernels."""

    def __init__(self, model: nn.Module, lr: float, weight_decay: float):
        self.model = model
        self.opt = make_optimizer(list(model.parameters()), lr, weight_decay)

    def __len__(self) -> int:
        return 1

    def forward(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [self.model(xs[0])]

    def call(self, k: int, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def keep(self, idx: list[int]) -> None:
        assert idx == [0]

    def train(self, on: bool) -> None:
        self.model.train(on)


class Stacked:
    """K models of one architecture; `forward` takes one input per model."""

    def __init__(self, models: list[nn.Module], lr: float, weight_decay: float):
        self.lr, self.wd = lr, weight_decay
        self.base = _vmappable(models[0])
        params, self.buffers = stack_module_state(models)
        self.params = {n: p.detach().requires_grad_() for n, p in params.items()}
        self.opt = make_optimizer(list(self.params.values()), lr, weight_decay)

        def one(p, b, x):
            return functional_call(self.base, (p, b), (x,))

        self._vf = vmap(one)
        self._one = copy.deepcopy(models[0])

    def __len__(self) -> int:
        return next(iter(self.params.values())).shape[0]

    def forward(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        return list(self._vf(self.params, self.buffers, torch.stack(xs)).unbind(0))

    def call(self, k: int, x: torch.Tensor) -> torch.Tensor:
        p = {n: v[k] for n, v in self.params.items()}
        b = {n: v[k] for n, v in self.buffers.items()}
        return functional_call(self._one, (p, b), (x,))

    def keep(self, idx: list[int]) -> None:
        """Drop every model not in `idx`, with its optimizer state."""
        if idx == list(range(len(self))):
            return
        sel = torch.tensor(idx, device=next(iter(self.params.values())).device)
        old = list(self.params.values())
        self.params = {n: p.detach()[sel].clone().requires_grad_() for n, p in self.params.items()}
        self.buffers = {n: b[sel].clone() for n, b in self.buffers.items()}
        new = list(self.params.values())
        opt = make_optimizer(new, self.lr, self.wd)
        for po, pn in zip(old, new):
            st = self.opt.state.get(po)
            if st:
                opt.state[pn] = {k: (v[sel].clone() if v.dim() and v.shape[:1] == po.shape[:1] and k != "step" else v.clone())
                                 for k, v in st.items()}
        self.opt = opt

    def train(self, on: bool) -> None:
        self.base.train(on)
        self._one.train(on)
