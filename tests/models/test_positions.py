"""tf-preln's positions inside attention (RoPE, ALiBi) and its SwiGLU MLP: each against the
formula written out, fused = explicit attention, the pruned readout = the full model's last
position, stacked training, and the run ids of the models stored before they existed."""
from __future__ import annotations

import math

import pytest
import torch

from archsep.config import RunConfig, TrainConfig
from archsep.engine.train import train_many, train_run
from archsep.errors import ArchsepError
from archsep.models import make_model_config
from archsep.models.attention import ROPE_BASE, alibi_slopes, use_attention
from archsep.models.transformer import SelfAttention
from archsep.tasks.base import TaskSpec

TOKENS = TaskSpec(input="tokens", input_dim=11, seq_len=20, output_dim=4, readout="last")


def _rot(x: torch.Tensor, t: int) -> torch.Tensor:
    """x (..., d) at position t rotated pair by pair, each pair by its own 2x2 rotation."""
    d, out = x.shape[-1], x.clone()
    for i in range(d // 2):
        a = t * ROPE_BASE ** (-2 * i / d)
        c, s = math.cos(a), math.sin(a)
        out[..., 2 * i] = c * x[..., 2 * i] - s * x[..., 2 * i + 1]
        out[..., 2 * i + 1] = s * x[..., 2 * i] + c * x[..., 2 * i + 1]
    return out


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("positions", ["rope", "alibi"])
def test_attention_positions_are_the_formula_written_out(positions, causal):
    """float64: score(t, s) = (R_t q_t) . (R_s k_s) / sqrt(d) for RoPE, q_t . k_s / sqrt(d) -
    slope_h |t - s| for ALiBi; softmax over s <= t (or every s)."""
    B, L, W, H = 2, 9, 8, 2
    d = W // H
    torch.manual_seed(0)
    att = SelfAttention(W, H, causal, positions).double()
    h = torch.randn(B, L, W, dtype=torch.float64)
    q, k, v = att.qkv(h).view(B, L, 3, H, d).unbind(2)  # (B, L, H, d) each
    slopes = alibi_slopes(H).double()
    want = torch.zeros(B, L, H, d, dtype=torch.float64)
    for t in range(L):
        keys = range(t + 1) if causal else range(L)
        if positions == "rope":
            scores = torch.stack([(_rot(q[:, t], t) * _rot(k[:, s], s)).sum(-1) / math.sqrt(d) for s in keys], -1)
        else:
            scores = torch.stack([(q[:, t] * k[:, s]).sum(-1) / math.sqrt(d) - slopes * abs(t - s) for s in keys], -1)
        p = scores.softmax(-1)  # (B, H, |keys|)
        want[:, t] = sum(p[..., j, None] * v[:, s] for j, s in enumerate(keys))
    want = att.proj(want.flatten(2))
    for impl in ("fused", "explicit"):
        att.attention_impl = impl
        torch.testing.assert_close(att(h), want, rtol=0, atol=1e-10)
    if causal:
        torch.testing.assert_close(att(h, last_only=True), want[:, -1:], rtol=0, atol=1e-10)
    assert torch.allclose(att.weights(h).sum(-1), torch.ones(B, H, L, dtype=torch.float64))


def test_rope_scores_depend_on_the_offset_alone():
    torch.manual_seed(1)
    q, k = torch.randn(2, 1, 1, 8, dtype=torch.float64), torch.randn(2, 1, 1, 8, dtype=torch.float64)
    from archsep.models.attention import rotate

    def score(t, s):
        return (rotate(q, torch.tensor([t])) * rotate(k, torch.tensor([s]))).sum()

    assert abs(score(3, 1) - score(10, 8)) < 1e-10 and abs(score(3, 1) - score(3, 2)) > 1e-6


def test_swiglu_is_its_formula_and_keeps_the_widths():
    torch.manual_seed(0)
    cfg = make_model_config("tf-preln", layers=1, width=8, heads=2, mlp="swiglu", mlp_width=12)
    model = cfg.build(TOKENS)
    mlp = model.blocks[0].mlp
    x = torch.randn(3, 8)
    want = mlp.w2(torch.nn.functional.silu(mlp.w1(x)) * mlp.w3(x))
    torch.testing.assert_close(mlp(x), want)
    gelu = make_model_config("tf-preln", layers=1, width=8, heads=2, mlp_width=12).build(TOKENS)
    assert model.n_params() - gelu.n_params() == 8 * 12 + 12  # the gate's weights and bias


@pytest.mark.parametrize("params", [{"positions": "rope"}, {"positions": "alibi"}, {"mlp": "swiglu"},
                                    {"positions": "alibi", "causal": False, "mlp": "swiglu"}])
def test_the_variants_prune_fuse_and_stack_like_the_plain_model(params):
    torch.manual_seed(0)
    model = make_model_config("tf-preln", layers=2, width=8, heads=2, **params).build(TOKENS)
    x = torch.randint(0, 11, (3, 20), generator=torch.Generator().manual_seed(0))
    full = model(x)
    explicit = use_attention(make_model_config("tf-preln", layers=2, width=8, heads=2, **params).build(TOKENS),
                             "explicit")
    explicit.load_state_dict(model.state_dict())
    torch.testing.assert_close(explicit(x), full, rtol=0, atol=1e-5)
    model.prune_to_readout()
    if params.get("causal", True):
        torch.testing.assert_close(model(x)[:, 0], full[:, -1], rtol=0, atol=1e-5)
    # two learning rates of one seed train stacked (vmap) and alone to the same curves
    def cfg(lr):
        return RunConfig("dyck", "tf-preln", {"N": 12}, {"layers": 1, "width": 8, "heads": 2, **params},
                         TrainConfig(lr=lr, batch_size=16, budget=16 * 30, eval_every=10, eval_size=64,
                                     eval_mode="every", threshold=1e-6), 0)
    stacked = train_many([cfg(1e-2), cfg(1e-3)])
    alone = [train_run(cfg(lr)) for lr in (1e-2, 1e-3)]
    for s, a in zip(stacked, alone):
        assert s.status == a.status != "error"
        assert [m for _, m in s.curve] == pytest.approx([m for _, m in a.curve], abs=1e-4)


def test_stored_ids_survive_and_the_new_settings_are_part_of_the_identity():
    base = RunConfig("dyck", "tf-preln", {"N": 12}, {"layers": 1, "width": 64}, TrainConfig(), 0)
    assert "mlp" not in base.model_config().params()
    ids = {RunConfig("dyck", "tf-preln", {"N": 12}, {"layers": 1, "width": 64, **p}, TrainConfig(), 0).run_id
           for p in ({}, {"mlp": "gelu"}, {"mlp": "swiglu"}, {"positions": "rope"}, {"positions": "alibi"})}
    assert len(ids) == 4 and base.run_id in ids


@pytest.mark.parametrize("params, field", [({"positions": "rope", "width": 12, "heads": 4}, "positions"),
                                           ({"positions": "xpos"}, "positions"), ({"mlp": "relu"}, "mlp")])
def test_bad_variant_settings_name_their_field(params, field):
    with pytest.raises(ArchsepError) as e:
        make_model_config("tf-preln", **params)
    assert e.value.field.rsplit(".", 1)[-1] == field


@pytest.mark.parametrize("arch, params", [("lstm", {"hidden": 8}), ("mamba", {"layers": 1, "width": 8}),
                                          ("s4d", {"layers": 1, "width": 8})])
def test_an_option_added_later_keeps_the_stored_runs_ids_and_learned_positions_are_read(arch, params):
    """LSTM, Mamba and DSS took `positions` after runs were stored: at "none" (the paper's) a run's
    id is the one it had before the option (`ModelConfig.added`), "learned" is another run, and
    its model reads the position table (moving one row changes that position's output only)."""
    from archsep import RunConfig, TrainConfig

    def cfg(**extra):
        return RunConfig("index-lookup", arch, {"N": 6}, {**params, **extra}, TrainConfig(), seed=0)

    assert "positions" not in cfg().model_config().params()
    assert cfg(positions="none").run_id == cfg().run_id != cfg(positions="learned").run_id
    torch.manual_seed(0)
    model = cfg(positions="learned").model_config().build(cfg().build_task().spec).double().eval()
    x = cfg().build_task().sample_test(3, torch.Generator().manual_seed(1)).x
    before = model(x)
    with torch.no_grad():
        model.pos[4] += torch.linspace(-1.0, 1.0, model.pos.shape[1], dtype=model.pos.dtype)  # LayerNorm
        # would take a constant shift away
    after = model(x)
    # earlier positions unchanged (to round-off: DSS convolves by FFT, which mixes every position's rounding)
    assert torch.allclose(before[:, :4], after[:, :4], rtol=0, atol=1e-12)
    assert not torch.allclose(before[:, 4], after[:, 4])
