"""A Transformer read at its last position computes that position's attention without projecting
the keys and values ("factored", `SelfAttention._last`): the same outputs and gradients as the
projected form in every position scheme, head count and length, the keys really never made, and
RoPE (which rotates each key) left projected."""
from __future__ import annotations

import copy
import itertools

import pytest
import torch

from archsep.errors import ArchsepError
from archsep.models import make_model_config
from archsep.models.transformer import use_last_query
from archsep.tasks.base import TaskSpec

from mixer_util import Ops, assert_same

L, W = 13, 16
LAST = TaskSpec(input="tokens", input_dim=11, seq_len=L, output_dim=7, readout="last")


def forms(**params):
    """The same pruned model (same weights) twice: factored (the default) and projected."""
    torch.manual_seed(0)
    factored = make_model_config("tf-preln", width=W, **params).build(LAST)
    factored.prune_to_readout()
    return factored, use_last_query(copy.deepcopy(factored), "projected")


def x_for(B: int = 6, length: int = L, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, LAST.input_dim, (B, L), generator=torch.Generator().manual_seed(seed))[:, :length]


CASES = [dict(layers=layers, heads=heads, causal=causal, positions=positions)
         for layers, heads, causal, positions in itertools.product(
             (1, 2), (1, 2, 4), (True, False), ("learned", "sinusoidal", "none", "alibi"))]


@pytest.mark.parametrize("length", [L, 7], ids=["full", "shorter"])
@pytest.mark.parametrize("params", CASES, ids=lambda p: ",".join(f"{k}={v}" for k, v in p.items()))
def test_factored_equals_projected(params, length):
    factored, projected = forms(**params)
    x = x_for(length=length)
    assert factored(x).shape == (6, 1, LAST.output_dim)  # the pruned path is the one compared
    assert_same(factored, projected, x)


@pytest.mark.parametrize("heads", [1, 4])
def test_the_factored_form_never_makes_the_keys_and_values(heads):
    """(B, L, 2W) keys and values, or (B, H, L, W/H) per head, are made by the projected form only."""
    x = x_for()
    made = {}
    for name, model in zip(("factored", "projected"), forms(layers=1, heads=heads)):
        with Ops() as ops:
            model(x).square().sum().backward()
        made[name] = set(ops.shapes)
    kv = {(6, L, 2 * W), (6, heads, L, W // heads)}
    assert not kv & made["factored"]
    assert kv & made["projected"]


def test_rope_stays_projected():
    factored, projected = forms(layers=1, heads=2, positions="rope")
    x = x_for()
    with Ops() as ops:
        out = factored(x)
    assert (6, L, 2 * W) in ops.shapes
    torch.testing.assert_close(out, projected(x), rtol=0, atol=0)


@pytest.mark.parametrize("bad", ["Factored", "", None, "fused"])
def test_use_last_query_rejects_unknown_forms(bad):
    model, _ = forms(layers=1, heads=2)
    with pytest.raises(ArchsepError, match="last_form"):
        use_last_query(model, bad)
