"""What the model tests share: small builds, seeded inputs, pytest ids, and the check that the
engine's stacked (vmapped) computation gives each model's own outputs and gradients. The
properties of the recurrent contract are `archsep.testing`'s (tests/models/test_model_properties.py)."""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from archsep.models import make_model_config


def case_ids(models) -> list[str]:
    """pytest ids for [(arch, params), ...]."""
    return [f"{a}-{'-'.join(f'{k}={v}' for k, v in p.items())}" for a, p in models]


def inputs(spec, B=3, L=None, seed=0, dtype=torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    L = L or spec.seq_len
    if spec.input == "tokens":
        return torch.randint(0, spec.input_dim, (B, L), generator=g)
    return torch.randn(B, L, spec.input_dim, generator=g).to(dtype)


def build(arch, params, spec, seed=0):
    torch.manual_seed(seed)
    return make_model_config(arch, **params).build(spec)


def assert_stack_matches(models, xs) -> None:
    """The engine's stacked (vmapped) computation of `models` on inputs `xs`, one each, gives
    each model's own outputs (1e-5) and gradients (1e-4 relative, 1e-5 absolute)."""
    from archsep.engine.stack import Stacked

    stack = Stacked(models, lr=1e-3, weight_decay=0.0)
    outs = stack.forward(xs)
    sum(o.square().sum() for o in outs).backward()
    for k, (m, x, o) in enumerate(zip(models, xs, outs)):
        y = m(x)
        torch.testing.assert_close(o, y, rtol=1e-5, atol=1e-5)
        y.square().sum().backward()
        for name, p in m.named_parameters():
            torch.testing.assert_close(stack.params[name].grad[k], p.grad, rtol=1e-4, atol=1e-5)


class Ops(TorchDispatchMode):
    """The aten ops a computation runs, and the shapes of the tensors they make."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        self.names.append(str(func))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.shapes.append(tuple(t.shape))
        return out


def assert_same(a_model, b_model, x) -> None:
    """Two forms of the same weights give the same outputs and gradients on x (float32 rounding)."""
    a, b = a_model(x), b_model(x)
    assert a.shape == b.shape
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    a.square().sum().backward()
    b.square().sum().backward()
    for (n, pa), (_, pb) in zip(a_model.named_parameters(), b_model.named_parameters()):
        assert pa.grad is not None, n
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-4, atol=1e-5, msg=n)
