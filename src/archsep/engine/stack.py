"""K independent models trained as one batched computation.

Parameters of K models with the same architecture are stacked along a leading axis and the
forward pass is `vmap`ped over it. AdamW is elementwise, so one AdamW over the stacked tensors
is exactly K independent AdamWs (with one learning rate per slice when the models' differ:
`StackAdamW`); the summed loss gives each slice its own model's gradient. A model that
finishes leaves the stack (parameters and optimizer state are sliced).
"""
from __future__ import annotations

import copy
import math
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
            m.forward = types.MethodType(plain_forward, m)
    return base


def make_optimizer(params: Sequence[torch.Tensor], lr: float, weight_decay: float) -> torch.optim.Optimizer:
    # fused AdamW: one kernel for every tensor; falls back to the default where unsupported
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


class StackAdamW:
    """AdamW over stacked parameters (K, ...) with one learning rate per slice: torch's AdamW
    update (decoupled decay, bias-corrected moments) written out elementwise."""

    def __init__(self, params: list[torch.Tensor], lrs: Sequence[float], weight_decay: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params, self.wd, self.betas, self.eps = params, weight_decay, betas, eps
        self.lrs = torch.tensor(list(lrs), dtype=params[0].dtype, device=params[0].device)
        self.step_count = 0
        self.m = [torch.zeros_like(p) for p in params]
        self.v = [torch.zeros_like(p) for p in params]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.step_count += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.step_count, math.sqrt(1 - b2**self.step_count)
        for p, m, v in zip(self.params, self.m, self.v):
            if p.grad is None:
                continue
            lr = self.lrs.view(-1, *([1] * (p.dim() - 1)))  # (K, 1, ...)
            p.mul_(1 - lr * self.wd)
            m.lerp_(p.grad, 1 - b1)
            v.mul_(b2).addcmul_(p.grad, p.grad, value=1 - b2)
            p.sub_((lr / c1) * m / (v.sqrt() / c2 + self.eps))

    def state_dict(self) -> dict:
        return {"step_count": self.step_count, "m": self.m, "v": self.v}

    def load_state_dict(self, s: dict) -> None:
        assert len(s["m"]) == len(self.m) == len(s["v"]), "a state of as many tensors"
        self.step_count = int(s["step_count"])
        self.m = [x.to(p.device).clone() for x, p in zip(s["m"], self.params)]
        self.v = [x.to(p.device).clone() for x, p in zip(s["v"], self.params)]
        for a, b in zip(self.m + self.v, self.params + self.params):
            assert a.shape == b.shape, "each moment the shape of its parameter"

    def keep(self, sel: torch.Tensor, new_params: list[torch.Tensor]) -> "StackAdamW":
        out = StackAdamW(new_params, self.lrs[sel].tolist(), self.wd, self.betas, self.eps)
        out.step_count = self.step_count
        out.m = [m[sel].clone() for m in self.m]
        out.v = [v[sel].clone() for v in self.v]
        return out


class Single:
    """One model, called directly: the plain path, with the library's fused kernels."""

    def __init__(self, model: nn.Module, lr: float, weight_decay: float):
        self.model = model
        self.opt = make_optimizer(list(model.parameters()), lr, weight_decay)

    def snapshot(self, k: int) -> dict[str, torch.Tensor]:
        return {n: p.detach().clone() for n, p in self.model.state_dict().items()}

    def module(self, k: int, state: dict[str, torch.Tensor] | None = None) -> nn.Module:
        """The model (with `state` loaded into a copy when given)."""
        if state is None:
            return self.model
        m = copy.deepcopy(self.model)
        m.load_state_dict(state)
        return m

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

    def state(self) -> dict:
        """What it carries from step to step (a checkpoint: engine/checkpoint.py)."""
        return {"model": self.model.state_dict(), "opt": self.opt.state_dict()}

    def load(self, s: dict) -> None:
        self.model.load_state_dict(s["model"])
        self.opt.load_state_dict(s["opt"])


class _Opts:
    """Several models' own optimizers, stepped together."""

    def __init__(self, opts: list[torch.optim.Optimizer]):
        self.opts = opts

    def zero_grad(self, set_to_none: bool = True) -> None:
        for o in self.opts:
            o.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for o in self.opts:
            o.step()


class Lockstep:
    """K models trained side by side, each called directly with its own optimizer: the plain
    path of each (a run's numbers are those it has alone), in one loop, so that runs can be
    compared while they train (successive halving across a learning-rate grid)."""

    def __init__(self, models: Sequence[nn.Module], lrs: Sequence[float], weight_decay: float):
        self.singles = [Single(m, lr, weight_decay) for m, lr in zip(models, lrs)]
        self.opt = _Opts([s.opt for s in self.singles])

    def snapshot(self, k: int) -> dict[str, torch.Tensor]:
        return self.singles[k].snapshot(0)

    def module(self, k: int, state: dict[str, torch.Tensor] | None = None) -> nn.Module:
        return self.singles[k].module(0, state)

    def __len__(self) -> int:
        return len(self.singles)

    def forward(self, xs: list[torch.Tensor]) -> list[torch.Tensor]:
        return [s.model(x) for s, x in zip(self.singles, xs)]

    def call(self, k: int, x: torch.Tensor) -> torch.Tensor:
        return self.singles[k].model(x)

    def keep(self, idx: list[int]) -> None:
        self.singles = [self.singles[k] for k in idx]
        self.opt = _Opts([s.opt for s in self.singles])

    def train(self, on: bool) -> None:
        for s in self.singles:
            s.train(on)

    def state(self) -> dict:
        return {"singles": [s.state() for s in self.singles]}

    def load(self, s: dict) -> None:
        assert len(s["singles"]) == len(self.singles), "a state of as many models"
        for single, st in zip(self.singles, s["singles"]):
            single.load(st)


class Stacked:
    """K models of one architecture; `forward` takes one input per model. `lr`: one for all, or
    one learning rate per model (one shared torch AdamW when they are all equal)."""

    def __init__(self, models: Sequence[nn.Module], lr: float | Sequence[float], weight_decay: float):
        self.lrs = [float(lr)] * len(models) if isinstance(lr, (int, float)) else [float(x) for x in lr]
        self.wd = weight_decay
        self.base = _vmappable(models[0])
        params, self.buffers = stack_module_state(models)
        self.params = {n: p.detach().requires_grad_() for n, p in params.items()}
        self.opt = self._optimizer(list(self.params.values()))

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

    def _optimizer(self, params: list[torch.Tensor]):
        if len(set(self.lrs)) == 1:
            return make_optimizer(params, self.lrs[0], self.wd)
        return StackAdamW(params, self.lrs, self.wd)

    def snapshot(self, k: int) -> dict[str, torch.Tensor]:
        """Model k's parameters and buffers (a copy)."""
        return {**{n: v[k].detach().clone() for n, v in self.params.items()},
                **{n: v[k].clone() for n, v in self.buffers.items()}}

    def module(self, k: int, state: dict[str, torch.Tensor] | None = None) -> nn.Module:
        """Model k (or `state`) as an ordinary module, for what a forward pass does not give
        (e.g. a model's `probe()`)."""
        m = copy.deepcopy(self._one)
        m.load_state_dict(state if state is not None else self.snapshot(k))
        return m

    def keep(self, idx: list[int]) -> None:
        """Drop every model not in `idx`, with its optimizer state."""
        if idx == list(range(len(self))):
            return
        sel = torch.tensor(idx, device=next(iter(self.params.values())).device)
        old = list(self.params.values())
        self.params = {n: p.detach()[sel].clone().requires_grad_() for n, p in self.params.items()}
        self.buffers = {n: b[sel].clone() for n, b in self.buffers.items()}
        new = list(self.params.values())
        self.lrs = [self.lrs[i] for i in idx]
        if isinstance(self.opt, StackAdamW):
            self.opt = self.opt.keep(sel, new)
            return
        opt = make_optimizer(new, self.lrs[0], self.wd)
        for po, pn in zip(old, new):
            st = self.opt.state.get(po)
            if st:
                opt.state[pn] = {k: (v[sel].clone() if v.dim() and v.shape[:1] == po.shape[:1] and k != "step"
                                     else v.clone())
                                 for k, v in st.items()}
        self.opt = opt

    def train(self, on: bool) -> None:
        self.base.train(on)
        self._one.train(on)

    def state(self) -> dict:
        return {"params": {n: p.detach() for n, p in self.params.items()}, "buffers": self.buffers,
                "opt": self.opt.state_dict()}

    def load(self, s: dict) -> None:
        """The state of a stack of the same models (after the same `keep`s)."""
        assert s["params"].keys() == self.params.keys() and s["buffers"].keys() == self.buffers.keys()
        with torch.no_grad():
            for mine, saved in ((self.params, s["params"]), (self.buffers, s["buffers"])):
                for n, t in mine.items():
                    assert t.shape == saved[n].shape, "the same models, the same keeps"
                    t.copy_(saved[n])  # into the same tensors: the optimizer's state stays keyed to them
        self.opt.load_state_dict(s["opt"])
