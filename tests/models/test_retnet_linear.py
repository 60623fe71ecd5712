"""retnet and linear-tf: retention's decays and decay matrix are their closed forms, its parallel
form is the masked product, linear attention's Taylor features, the state sizes' values, the
length bound of learned positions, config errors, and a small learning test through the engine.
The properties every mixer shares (the parallel form equals the step form, causality, state
carried, pruning, stacking, the contract on every classification task) are in
tests/models/test_model_properties.py, over the registry."""
import pytest
import torch
from mixer_util import build, case_ids, inputs

from archsep.config import RunConfig, TrainConfig
from archsep.engine.train import train_many
from archsep.errors import ArchsepError
from archsep.models import make_model_config
from archsep.models.mixers.retnet import Retention, decay_gammas
from archsep.tasks.base import TaskSpec

TOKENS = TaskSpec(input="tokens", input_dim=11, seq_len=13, output_dim=4, readout="last")
VECTORS = TaskSpec(input="vector", input_dim=3, seq_len=13, output_dim=2, readout="all")

MODELS = [
    ("retnet", {"layers": 1, "width": 8, "heads": 1}),
    ("retnet", {"layers": 2, "width": 16, "heads": 4}),
    ("retnet", {"layers": 2, "width": 12, "heads": 3, "rotation": False, "positions": "learned"}),
    ("retnet", {"layers": 1, "width": 12, "heads": 2, "positions": "sinusoidal", "mlp_width": 8}),
    ("linear-tf", {"layers": 1, "width": 8, "heads": 1}),
    ("linear-tf", {"layers": 2, "width": 16, "heads": 4}),
    ("linear-tf", {"layers": 2, "width": 12, "heads": 3, "feature": "relu"}),
    ("linear-tf", {"layers": 1, "width": 12, "heads": 2, "feature": "relu", "positions": "none"}),
    ("linear-tf", {"layers": 2, "width": 8, "heads": 2, "feature": "taylor"}),
    ("linear-tf", {"layers": 1, "width": 12, "heads": 3, "feature": "taylor", "feature_dim": 2, "positions": "none"}),
]
IDS = case_ids(MODELS)


# --- retention ----------------------------------------------------------------------------------
def test_decays_are_the_papers():
    assert decay_gammas(4).tolist() == [1 - 1 / 32, 1 - 1 / 64, 1 - 1 / 128, 1 - 1 / 256]


@pytest.mark.parametrize("heads, L", [(1, 1), (3, 7), (8, 40)])
def test_decay_matrix_is_the_closed_form(heads, L):
    D = Retention(width=2 * heads, heads=heads, rotation=True).decay(L)
    assert D.shape == (heads, L, L)
    expected = torch.zeros(heads, L, L, dtype=torch.float64)
    for h in range(heads):
        gamma = 1 - 2.0 ** (-5 - h)
        for n in range(L):
            for m in range(n + 1):
                expected[h, n, m] = gamma ** (n - m)
    torch.testing.assert_close(D.double(), expected, rtol=1e-6, atol=0)
    assert D.triu(1).abs().max() == 0 and (D.diagonal(dim1=1, dim2=2) == 1).all()


def test_retention_parallel_form_is_the_masked_product():
    """One retention layer against (Q K^T ⊙ D) V written out head by head, before its norm and gate."""
    torch.manual_seed(0)
    ret = Retention(width=8, heads=2, rotation=False).double()
    h = torch.randn(2, 6, 8, dtype=torch.float64)
    q = ret.q(h).view(2, 6, 2, 4)  # (B, L, H, dh)
    k, v = ret.kv(h).view(2, 6, 2, 2, 4).unbind(2)
    ys = []
    for head in range(2):
        gamma = 1 - 2.0 ** (-5 - head)
        n = torch.arange(6, dtype=torch.float64)
        D = torch.where(n[:, None] >= n[None, :], gamma ** (n[:, None] - n[None, :]), torch.zeros(()))
        ys.append((q[:, :, head] / 2 @ k[:, :, head].transpose(1, 2) * D) @ v[:, :, head])  # q / sqrt(dh)
    torch.testing.assert_close(ret(h), ret._output(h, torch.cat(ys, -1)), rtol=0, atol=1e-12)


# --- linear attention's Taylor features (Based) ---------------------------------------------------
@pytest.mark.parametrize("d", [1, 2, 5, 16])
def test_taylor_features_give_the_second_order_expansion_of_exp(d):
    """float64: phi(q)·phi(k) = 1 + s + s^2/2 with s = q·k/sqrt(d), for D = 1 + d + d^2 features,
    and the parallel form's closed-form kernel of q·k is the same number."""
    from archsep.models.mixers.linear_attention import feature_count, taylor, taylor_kernel

    g = torch.Generator().manual_seed(d)
    q, k = (torch.randn(3, 7, d, generator=g, dtype=torch.float64) * 2 for _ in range(2))
    fq, fk = taylor(q), taylor(k)
    assert fq.shape == (3, 7, 1 + d + d * d) and feature_count("taylor", d) == 1 + d + d * d
    s = (q * k).sum(-1) / d ** 0.5
    torch.testing.assert_close((fq * fk).sum(-1), 1 + s + s * s / 2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(taylor_kernel(q @ k.transpose(-1, -2), d), fq @ fk.transpose(-1, -2),
                               rtol=1e-12, atol=1e-12)
    assert ((fq * fk).sum(-1) >= 0.5 - 1e-12).all()  # (1 + s)^2/2 + 1/2: the denominator never vanishes


def test_taylor_linear_attention_is_normalised_kernel_attention_written_out():
    """Oracle, float64: with q, k projected to feature_dim f per head, each position's output is
    sum_{s<=t} K(q_t, k_s) v_s / (sum_{s<=t} K(q_t, k_s) + eps), K = 1 + q·k/sqrt(f) + (q·k)^2/(2f), as a loop."""
    from archsep.models.mixers.linear_attention import EPS, LinearAttention

    B, L, W, H, f = 2, 7, 8, 2, 3
    torch.manual_seed(0)
    att = LinearAttention(W, H, "taylor", feature_dim=f).double()
    assert att.state_floats == H * (1 + f + f * f) * (W // H + 1)
    h = torch.randn(B, L, W, dtype=torch.float64)
    q = att.q(h).unflatten(-1, (H, f))  # (B, L, H, f)
    k, v = att.kv(h).split([H * f, W], -1)
    k, v = k.unflatten(-1, (H, f)), v.unflatten(-1, (H, W // H))
    want = torch.zeros(B, L, H, W // H, dtype=torch.float64)
    for t in range(L):
        s = torch.stack([(q[:, t] * k[:, j]).sum(-1) / f ** 0.5 for j in range(t + 1)], -1)  # (B, H, t+1)
        a = 1 + s + s * s / 2
        want[:, t] = sum(a[..., j, None] * v[:, j] for j in range(t + 1)) / (a.sum(-1)[..., None] + EPS)
    torch.testing.assert_close(att(h), att.proj(want.flatten(2)), rtol=0, atol=1e-10)
    torch.testing.assert_close(att(h, last_only=True), att.proj(want.flatten(2))[:, -1:], rtol=0, atol=1e-10)


# --- state and length -----------------------------------------------------------------------------
@pytest.mark.parametrize("arch, params", MODELS, ids=IDS)
def test_state_size_is_the_state_each_mixer_carries(arch, params):
    """The count written out; that the step form carries this many floats is checked by `check_model`."""
    W, H, layers = params["width"], params["heads"], params["layers"]
    if params.get("feature") == "taylor":  # S (D x W/H) and z (D) per head, D = 1 + f + f^2 Taylor features
        f = params.get("feature_dim", W // H)
        per_layer = H * (1 + f + f * f) * (W // H + 1)
    else:
        per_layer = W * W // H + (W if arch == "linear-tf" else 0)  # S per head (and z for linear-tf)
    model = build(arch, params, VECTORS)
    assert model.state_size(6) == model.state_size(10_000) == layers * per_layer


def test_learned_positions_bound_the_length_others_do_not():
    with pytest.raises(ArchsepError, match="seq_len"):
        build("linear-tf", {"width": 8, "heads": 2}, TOKENS)(inputs(TOKENS, L=14))
    assert build("retnet", {"width": 8, "heads": 2}, TOKENS)(inputs(TOKENS, L=20)).shape == (3, 20, 4)


# --- configs -------------------------------------------------------------------------------------
def test_defaults_and_names():
    r, lin = make_model_config("retnet"), make_model_config("linear-tf")
    assert (r.layers, r.width, r.heads, r.rotation, r.positions) == (2, 64, 4, True, "none")
    assert (lin.feature, lin.positions) == ("elu1", "learned")
    assert r.short_name() == "RetNet-(2,64)" and lin.short_name() == "LinTF-(2,64)"
    cfg = make_model_config("linear-tf", width=8, heads=2, feature="relu")
    assert cfg.build(TOKENS).cfg is cfg
    # feature_dim came later: at its default it is left out of the params (stored run ids stay the same)
    assert "feature_dim" not in lin.params()
    assert make_model_config("linear-tf", feature="taylor", feature_dim=16).params()["feature_dim"] == 16


@pytest.mark.parametrize("arch, params, field", [
    ("retnet", {"widht": 8}, "widht"),
    ("retnet", {"layers": 0}, "layers"),
    ("retnet", {"width": 10, "heads": 3}, "heads"),
    ("retnet", {"width": 6, "heads": 2}, "rotation"),  # odd head width cannot be rotated in pairs
    ("retnet", {"positions": "rotary"}, "positions"),
    ("retnet", {"mlp_width": 0}, "mlp_width"),
    ("retnet", {"gamma": 0.9}, "gamma"),
    ("linear-tf", {"feature": "softmax"}, "feature"),
    ("linear-tf", {"feature_map": "relu"}, "feature_map"),
    ("linear-tf", {"heads": 0}, "heads"),
    ("linear-tf", {"width": 8, "heads": 3}, "heads"),
    ("linear-tf", {"positions": "alibi"}, "positions"),
    ("linear-tf", {"feature": "taylor", "feature_dim": 0}, "feature_dim"),
])
def test_bad_parameters_name_the_field(arch, params, field):
    with pytest.raises(ArchsepError, match=field):
        make_model_config(arch, **params)


def test_rotation_off_allows_an_odd_head_width():
    assert make_model_config("retnet", width=6, heads=2, rotation=False).build(TOKENS)(inputs(TOKENS)).shape[1] == 13


# --- with archsep's tasks and engine ---------------------------------------------------------------
def test_both_learn_a_small_index_lookup_through_the_engine():
    """Index lookup at N=8 over 8 symbols (chance 1/8): each reaches error < 0.5 within 300 steps
    (~3 s each on one thread; linear-tf has learned positions, retnet only its decay and rotation)."""
    train = TrainConfig(lr=3e-3, weight_decay=0.0, budget=300 * 64, threshold=0.5, eval_every=25, eval_size=500,
                        eval_mode="every")
    cfgs = [RunConfig("index-lookup", arch, {"N": 8, "vocab": 8}, {"layers": 1, "width": 32, "heads": 2}, train)
            for arch in ("retnet", "linear-tf")]
    for r in train_many(cfgs):
        assert r.status == "ok", (r.config["arch"], r.status, r.error, r.curve[-3:])
        assert r.state_size == (32 * 32 // 2 + (32 if r.config["arch"] == "linear-tf" else 0))
