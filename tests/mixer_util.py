"""Checks every recurrent mixer's tests share (test_retnet_linear, test_mixers_zoo): its
parallel (training) form and its step-by-step recurrent form are one model, it is causal, its
state is what `state_size` counts, and its pruned readout is exact."""
from __future__ import annotations

import torch

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


def assert_causal(model, spec, cuts) -> None:
    """Changing the inputs after position i changes no output up to i (to 1e-6), and does change
    a later one (by > 1e-4), for each i in `cuts`."""
    x = inputs(spec, seed=1)
    with torch.no_grad():
        base = model(x)
        for i in cuts:
            y = x.clone()
            y[:, i + 1:] = (y[:, i + 1:] + 1) % spec.input_dim
            out = model(y)
            assert (out[:, : i + 1] - base[:, : i + 1]).abs().max() < 1e-6
            assert (out[:, i + 1:] - base[:, i + 1:]).abs().max() > 1e-4  # and later ones do change


def assert_state_size(model, spec, expected: int) -> None:
    """The floats the step form carries per sequence, at every position, are `state_size` (at any
    length) and `expected`."""
    x, B = inputs(spec, B=2, L=6), 2
    state, sizes = model.init_state(B), set()
    with torch.no_grad():
        for t in range(6):
            _, state = model.step(x[:, t], state, t)
            sizes.add(sum(v.numel() for s in state for v in s.values()) // B)
    assert sizes == {model.state_size(6)} == {model.state_size(10_000)} == {expected}


def assert_pruned_exact(arch, params, last_spec, all_spec) -> None:
    """Pruned to a last-position readout (`last_spec`), the model gives the full model's last
    position; the step form ignores pruning; with readout 'all' (`all_spec`) nothing is pruned."""
    model = build(arch, params, last_spec)
    x = inputs(last_spec)
    full = model(x)
    model.prune_to_readout()
    last = model(x)
    assert last.shape == (3, 1, last_spec.output_dim)
    torch.testing.assert_close(last[:, 0], full[:, -1], rtol=0, atol=1e-6)
    torch.testing.assert_close(model.recurrent(x), full, rtol=0, atol=1e-5)  # the step ignores pruning
    pruned_vectors = build(arch, params, all_spec)  # readout 'all': nothing to prune
    pruned_vectors.prune_to_readout()
    assert pruned_vectors(inputs(all_spec)).shape == (3, all_spec.seq_len, all_spec.output_dim)


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
