"""retnet and linear-tf: the parallel (training) form equals the step-by-step recurrent form,
retention's decay matrix is its closed form, causality, state size by counting the carried
state, pruning to the readout, config errors, every paper-A classification task, stacking under vmap, and a small
learning test through the engine."""
import pytest
import torch
from mixer_util import (assert_causal, assert_forms_agree, assert_forms_agree_in_float64, assert_pruned_exact,
                        assert_stack_matches, assert_state_size, build, case_ids, inputs)

from archsep.config import RunConfig, TrainConfig
from archsep.engine.train import train_many
from archsep.errors import ArchsepError
from archsep.models import make_model_config
from archsep.models.retnet import Retention, decay_gammas
from archsep.tasks import TASKS
from archsep.tasks.base import TaskSpec
from archsep.testing import check_model

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
]
IDS = case_ids(MODELS)


# --- the two forms are one model -----------------------------------------------------------------
@pytest.mark.parametrize("spec", [TOKENS, VECTORS], ids=["tokens", "vectors"])
@pytest.mark.parametrize("L, B", [(1, 2), (5, 1), (13, 3)])
@pytest.mark.parametrize("arch, params", MODELS, ids=IDS)
def test_parallel_form_equals_recurrent_form(arch, params, L, B, spec):
    assert_forms_agree(build(arch, params, spec), inputs(spec, B=B, L=L, seed=L), spec.output_dim)


@pytest.mark.parametrize("arch, params", MODELS, ids=IDS)
def test_both_forms_agree_in_float64_with_gradients(arch, params):
    """Tighter, in float64: outputs to 1e-10 and the recurrent form's gradients equal the parallel's."""
    assert_forms_agree_in_float64(build(arch, params, VECTORS).double(), inputs(VECTORS, L=9, dtype=torch.float64))


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


# --- causality and state --------------------------------------------------------------------------
@pytest.mark.parametrize("arch, params", MODELS, ids=IDS)
def test_later_inputs_do_not_change_earlier_outputs(arch, params):
    assert_causal(build(arch, params, TOKENS), TOKENS, (0, 4, 11))


@pytest.mark.parametrize("arch, params", MODELS, ids=IDS)
def test_state_size_counts_the_floats_the_step_carries(arch, params):
    W, H, layers = params["width"], params["heads"], params["layers"]
    per_layer = W * W // H + (W if arch == "linear-tf" else 0)  # S per head (and z for linear-tf)
    assert_state_size(build(arch, params, VECTORS), VECTORS, layers * per_layer)


@pytest.mark.parametrize("arch, params", MODELS, ids=IDS)
def test_pruned_to_the_readout_the_last_block_computes_the_last_position_alone(arch, params):
    assert_pruned_exact(arch, params, TOKENS, VECTORS)


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
])
def test_bad_parameters_name_the_field(arch, params, field):
    with pytest.raises(ArchsepError, match=field):
        make_model_config(arch, **params)


def test_rotation_off_allows_an_odd_head_width():
    assert make_model_config("retnet", width=6, heads=2, rotation=False).build(TOKENS)(inputs(TOKENS)).shape[1] == 13


# --- with archsep's tasks and engine ---------------------------------------------------------------
PAPER_A_CLASSIFICATION = [n for n in TASKS.names() if TASKS.get(n).kind == "classification"]
TASK_PARAMS = {"dyck": {"N": 8}, "equality": {"N": 8}, "index-lookup": {"N": 6, "vocab": 6},
               "nearest-neighbour": {"N": 8, "d": 4},
               # the field's token tasks (docs/token_tasks.md), at their docstring examples' sizes
               "mqar": {"N": 16, "vocab": 16, "pairs": 4}, "in-context-recall": {"N": 12, "vocab": 16},
               "noisy-recall": {"N": 12, "vocab": 32, "noise_vocab": 16},
               "fuzzy-recall": {"N": 17, "vocab": 16, "key_len": 2, "value_len": 2},
               "selective-copying": {"N": 12, "vocab": 16, "tokens": 3}, "compression": {"N": 5, "vocab": 16},
               "memorization": {"N": 8, "vocab": 16}}
TASK_PARAMS.update({  # the formal-language tasks (Deletang et al. 2023)
    "parity": {"N": 6}, "even-pairs": {"N": 6}, "modular-arithmetic": {"N": 5}, "reverse-string": {"N": 4},
    "duplicate-string": {"N": 4}, "stack-manipulation": {"N": 4}})


@pytest.mark.parametrize("task", PAPER_A_CLASSIFICATION)
@pytest.mark.parametrize("arch", ["retnet", "linear-tf"])
def test_contract_on_every_paper_a_classification_task(arch, task):
    assert task in TASK_PARAMS, f"add small parameters for the new task '{task}' to this test"
    passed = check_model(arch, task, TASK_PARAMS[task], layers=1, width=16, heads=2)
    assert f"fits[{task}]" in passed and f"gradients[{task}]" in passed


@pytest.mark.parametrize("arch, params", [("retnet", {"layers": 1, "width": 8, "heads": 2}),
                                          ("linear-tf", {"layers": 1, "width": 8, "heads": 2})])
def test_models_train_stacked_under_vmap(arch, params):
    """The engine trains seeds of small models as one vmapped computation: same outputs and gradients."""
    models = [build(arch, params, TOKENS, seed=s) for s in (0, 1)]
    xs = [inputs(TOKENS, seed=s) for s in (0, 1)]
    assert_stack_matches(models, xs)


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
