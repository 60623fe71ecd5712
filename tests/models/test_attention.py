"""Fused attention (SDPA) against the explicit form it replaces: the same outputs and gradients
in every attention model and option, the fused kernel really used (and no (L, L) scores made),
the explicit form under vmap, FLOP counts unchanged, and the switch's bad values."""
from __future__ import annotations

import copy
import itertools

import pytest
import torch

from archsep.config import RunConfig, TrainConfig
from archsep.engine.planning import _count_step, estimate_memory
from archsep.engine.stack import Stacked
from archsep.errors import ArchsepError
from archsep.models import make_model_config
from archsep.models import attention
from archsep.models.attention import use_attention
from archsep.tasks.base import TaskSpec

from mixer_util import Ops, assert_same

L = 13
LAST = TaskSpec(input="tokens", input_dim=11, seq_len=L, output_dim=7, readout="last")
ALL = TaskSpec(input="vector", input_dim=9, seq_len=L, output_dim=3, readout="all")
QSTR = TaskSpec(input="vector", input_dim=20, seq_len=6, output_dim=1, readout="all")


def x_for(spec: TaskSpec, B: int = 6, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if spec.input == "tokens":
        return torch.randint(0, spec.input_dim, (B, spec.seq_len), generator=g)
    return torch.randn(B, spec.seq_len, spec.input_dim, generator=g) * 2


def pair(arch: str, spec: TaskSpec, prune: bool = False, **params):
    """The same model (same weights) twice: fused (the default) and explicit."""
    torch.manual_seed(0)
    fused = make_model_config(arch, **params).build(spec)
    explicit = use_attention(copy.deepcopy(fused), "explicit")
    if prune:
        fused.prune_to_readout()
        explicit.prune_to_readout()
    return fused, explicit


PRELN = [dict(layers=layers, heads=heads, causal=causal, **extra)
         for layers, heads, causal, extra in itertools.product(
             (1, 2), (1, 2, 4), (True, False), ({}, {"pool": "mean"}, {"positions": "sinusoidal"}))]


@pytest.mark.parametrize("spec", [LAST, ALL], ids=["last", "all"])
@pytest.mark.parametrize("prune", [False, True], ids=["full", "pruned"])
@pytest.mark.parametrize("params", PRELN, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_preln_fused_equals_explicit(params, prune, spec):
    fused, explicit = pair("tf-preln", spec, prune, width=16, **params)
    x = x_for(spec)
    assert_same(fused, explicit, x)
    if prune and spec.readout == "last" and params.get("pool") is None:
        out = fused(x)
        assert out.shape[1] == 1  # the pruned path was the one compared ...
        whole, _ = pair("tf-preln", spec, False, width=16, **params)
        # ... and it is the last position of the whole output: the one query sees every key
        torch.testing.assert_close(out[:, -1], whole(x)[:, -1], rtol=1e-5, atol=1e-5)


def test_preln_fused_equals_explicit_on_shorter_inputs():
    """Tasks trained on variable lengths feed inputs shorter than seq_len."""
    fused, explicit = pair("tf-preln", LAST, True, width=16, layers=2, heads=4)
    assert_same(fused, explicit, x_for(LAST)[:, :7])


@pytest.mark.parametrize("impl", attention.IMPLS)
def test_causal_outputs_never_see_later_positions(impl):
    """Both paths mask the future: changing the last token moves only the last output (and a
    bidirectional model's every output)."""
    for causal in (True, False):
        torch.manual_seed(0)
        model = use_attention(make_model_config("tf-preln", layers=2, width=16, heads=2, causal=causal).build(LAST),
                              impl)
        x = x_for(LAST)
        y = x.clone()
        y[:, -1] = (y[:, -1] + 1) % LAST.input_dim
        moved = (model(x) - model(y)).abs().amax(dim=(0, 2))
        assert moved[-1] > 1e-4
        assert (moved[:-1].max() < 1e-6) if causal else (moved[:-1].min() > 1e-4)


B_PARAMS = [{}, {"heads": 3}, {"qk": "joint"}, {"qk": "joint", "heads": 3}, {"heads": 2, "head_dim": 4},
            {"heads": 2, "head_dim": 4, "embed": 16}, {"form": "authors"}, {"form": "authors", "heads": 2, "embed": 16}]


@pytest.mark.parametrize("params", B_PARAMS, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()) or "default")
def test_paper_b_fused_equals_explicit(params):
    fused, explicit = pair("tf-b", QSTR, **params)
    assert_same(fused, explicit, x_for(QSTR, B=8))


def test_paper_b_theory_form_is_unscaled():
    """Large unscaled scores (a near one-hot softmax): the fused path must not rescale them.
    Gradients through such a softmax carry float32 rounding of ~1e-5 of their size in either
    form, so both are held to a float64 reference: the fused one no less accurate."""
    fused, explicit = pair("tf-b", QSTR, heads=2)
    with torch.no_grad():
        fused.wq.mul_(4)
        explicit.wq.mul_(4)
    exact = copy.deepcopy(explicit).double()
    x = x_for(QSTR, B=8)
    torch.testing.assert_close(fused(x), explicit(x), rtol=1e-5, atol=1e-5)
    for m in (fused, explicit, exact):
        m(x.to(next(m.parameters()).dtype)).square().sum().backward()
    for (n, pf), (_, pe), (_, px) in zip(fused.named_parameters(), explicit.named_parameters(),
                                         exact.named_parameters()):
        err_f, err_e = ((p.grad.double() - px.grad).abs().max().item() for p in (pf, pe))
        assert err_f <= 3 * err_e + 1e-6 * px.grad.abs().max().item(), (n, err_f, err_e)


@pytest.mark.parametrize("arch, spec, prune, params", [
    ("tf-preln", LAST, False, {"layers": 2, "width": 16, "heads": 2}),
    ("tf-preln", LAST, True, {"layers": 2, "width": 16, "heads": 2}),
    ("tf-b", QSTR, False, {"heads": 2}),
    ("tf-b", QSTR, False, {"form": "authors", "heads": 2, "embed": 16}),
], ids=["preln", "preln-pruned", "b-theory", "b-authors"])
def test_fused_path_runs_the_kernel_and_never_makes_the_scores(arch, spec, prune, params):
    fused, explicit = pair(arch, spec, prune, **params)
    x = x_for(spec)
    Lx = spec.seq_len
    runs = {}
    for name, m in (("fused", fused), ("explicit", explicit)):
        with Ops() as ops:
            m(x).square().sum().backward()
        runs[name] = ops
    sdpa = [n for n in runs["fused"].names if "scaled_dot_product" in n]
    assert sdpa and any("backward" in n for n in sdpa)
    assert not any("scaled_dot_product" in n for n in runs["explicit"].names)
    assert not any(s[-2:] == (Lx, Lx) for s in runs["fused"].shapes if len(s) >= 2)
    assert any(s[-2:] == (Lx, Lx) for s in runs["explicit"].shapes if len(s) >= 2)


def test_attention_maps_use_the_explicit_weights_of_a_fused_model():
    fused, _ = pair("tf-preln", LAST, width=16, layers=2, heads=2)
    maps = fused.attention_maps(x_for(LAST))
    assert [tuple(m.shape) for m in maps] == [(6, 2, L, L)] * 2
    torch.testing.assert_close(maps[0].sum(-1), torch.ones(6, 2, L))
    assert fused.blocks[0].attn.attention_impl == "fused"


@pytest.mark.parametrize("arch, spec, params", [
    ("tf-preln", LAST, {"layers": 2, "width": 16, "heads": 2}),
    ("tf-b", QSTR, {"heads": 2}),
    ("tf-b", QSTR, {"form": "authors", "heads": 2, "embed": 16}),
], ids=["preln", "b-theory", "b-authors"])
def test_stacked_training_takes_the_explicit_path_and_matches_the_fused_models(arch, spec, params, monkeypatch):
    """Under vmap torch has no batching rule for the fused CPU kernel (it would loop over the
    stack): the explicit form runs there, and gives what each fused model gives alone."""
    models = []
    for seed in (0, 1, 2):
        torch.manual_seed(seed)
        m = make_model_config(arch, **params).build(spec)
        m.prune_to_readout()
        models.append(m)
    xs = [x_for(spec, seed=s) for s in (0, 1, 2)]
    stack = Stacked(models, lr=1e-3, weight_decay=0.0)
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    outs = stack.forward(xs)
    assert calls == []  # nothing fused under vmap
    sum(o.square().sum() for o in outs).backward()
    for k, (m, x, o) in enumerate(zip(models, xs, outs)):
        y = m(x)  # the plain, fused model
        torch.testing.assert_close(o, y, rtol=1e-5, atol=1e-5)
        y.square().sum().backward()
        for name, p in m.named_parameters():
            torch.testing.assert_close(stack.params[name].grad[k], p.grad, rtol=1e-4, atol=1e-5, msg=name)
    assert calls  # ... and the plain models did run fused


def test_step_flops_count_the_attention_as_before():
    """torch's FLOP counter has no formula for the fused CPU kernel; the planner's count (which
    orders and stacks runs) must still include the attention, as it did before."""
    from torch.utils.flop_counter import FlopCounterMode

    # two layers: a pruned one-layer model's only attention is the factored last query, no kernel
    cfg = RunConfig("index-lookup", "tf-preln", {"N": 30}, {"layers": 2, "width": 16, "heads": 2},
                    TrainConfig(batch_size=8))
    task = cfg.build_task()
    counts = {}
    for impl in ("fused", "explicit"):
        torch.manual_seed(0)
        model = use_attention(cfg.model_config().build(task.spec), impl)
        model.prune_to_readout()
        batch = task.sample(8, torch.Generator().manual_seed(0))
        with FlopCounterMode(display=False) as fc:
            task.loss(model(batch.x), batch).backward()
        counts[impl] = fc.get_total_flops()
    assert counts["fused"] < counts["explicit"]  # the counter misses the fused kernel
    assert _count_step(cfg)[0] == counts["explicit"]
    dyck = RunConfig("dyck", "tf-preln", {"N": 30}, {"layers": 2, "width": 16, "heads": 2}, TrainConfig(batch_size=8))
    assert estimate_memory(dyck)[0] > 0


@pytest.mark.parametrize("bad", ["flash", "", None, "Fused"])
def test_use_attention_rejects_unknown_implementations(bad):
    torch.manual_seed(0)
    model = make_model_config("tf-preln", layers=1, width=8, heads=2).build(LAST)
    with pytest.raises(ArchsepError, match=r"^attention: must be one of fused, explicit, got"):
        use_attention(model, bad)
    assert model.blocks[0].attn.attention_impl == "fused"


def test_the_switch_is_not_part_of_a_runs_identity():
    """The implementation is not a config field: run ids stay as they were."""
    cfg = make_model_config("tf-preln", layers=1, width=8, heads=2)
    assert "attention" not in str(cfg.params()) and "impl" not in str(cfg.params())
    assert attention.IMPLS == ("fused", "explicit")


@pytest.mark.parametrize("L", [attention.CHUNK + 1, 2 * attention.CHUNK, 3 * attention.CHUNK - 5])
def test_long_causal_attention_in_chunks_equals_one_causal_call_and_the_explicit_form(L, monkeypatch):
    """Above CHUNK positions a causal self-attention on the CPU runs in query chunks: the same
    outputs and gradients as one causal kernel call and as the explicit softmax, chunks of
    unequal length included (e.g. 379 = 127 + 127 + 125)."""
    g = torch.Generator().manual_seed(0)
    base = [torch.randn(2, 3, L, 8, generator=g) for _ in range(3)]
    calls = []
    real = attention.F.scaled_dot_product_attention
    monkeypatch.setattr(attention.F, "scaled_dot_product_attention", lambda *a, **k: calls.append(1) or real(*a, **k))

    def run(f):
        q, k, v = (t.clone().requires_grad_() for t in base)
        y = f(q, k, v)
        (y * torch.linspace(-1, 1, L)[:, None]).sum().backward()
        return y, q.grad, k.grad, v.grad

    chunked = run(lambda q, k, v: attention.attend(q, k, v, causal=True))
    assert len(calls) == -(-L // attention.CHUNK)  # the chunks ran, one kernel call each
    one = run(lambda q, k, v: real(q, k, v, is_causal=True))
    explicit = run(lambda q, k, v: attention.attend(q, k, v, causal=True, impl="explicit"))
    for a, b, c in zip(chunked, one, explicit):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-6)
