"""Shapes, parameter counts and structure of the paper-B models."""
import pytest
import torch

from archsep.errors import ArchsepError
from archsep.models import make_model_config
from archsep.tasks import make_task


def batch(N=6):
    task = make_task("qstr", N=N, q=2, seed=0)
    return task, task.sample(5, torch.Generator().manual_seed(0))


@pytest.mark.parametrize("arch, params", [
    ("tf-b", {}), ("tf-b", {"qk": "joint", "heads": 3}), ("tf-b", {"heads": 2, "head_dim": 4, "embed": 16}),
    ("ffn", {}), ("ffn", {"hidden": [32, 16, 8]}),
    ("rnn-b", {"cell": "gru", "hidden": 16}), ("rnn-b", {"cell": "lstm", "hidden": 16, "layers": 2}),
    ("rnn-b", {"cell": "relu", "hidden": 16}), ("rnn-b", {"cell": "tanh", "hidden": 16, "bidirectional": False}),
])
def test_every_model_maps_a_batch_to_per_position_outputs(arch, params):
    task, b = batch()
    torch.manual_seed(0)
    model = make_model_config(arch, **params).build(task.spec)
    out = model(b.x)
    assert out.shape == (5, task.N, 1)
    assert model.n_params() == sum(p.numel() for p in model.parameters()) > 0
    task.loss(out, b).backward()  # differentiable end to end


def test_ffn_default_is_the_paper_size():
    task, _ = batch(N=6)
    ffn = make_model_config("ffn").build(task.spec)
    widths = [m.out_features for m in ffn.net if isinstance(m, torch.nn.Linear)]
    assert widths == [6 * 10 * 2, 1000, 6]


def test_rnn_state_size_counts_both_directions_and_lstm_cell():
    task, _ = batch()
    assert make_model_config("rnn-b", hidden=8).build(task.spec).state_size(6) == 16
    assert make_model_config("rnn-b", cell="lstm", hidden=8, layers=2).build(task.spec).state_size(6) == 64
    assert make_model_config("tf-b").build(task.spec).state_size(6) is None


def test_joint_attention_is_a_bilinear_form_in_the_inputs():
    task, b = batch()
    tf = make_model_config("tf-b", qk="joint", heads=2).build(task.spec)
    a = tf.attention(b.x)
    scores = torch.einsum("bid,hde,bje->bhij", b.x, tf.wqk, b.x)
    assert torch.allclose(a, torch.softmax(scores, -1), atol=1e-6)
    sep = make_model_config("tf-b", heads=2).build(task.spec)
    assert sep.qk_matrix().shape == (2, task.spec.input_dim, task.spec.input_dim)


def test_transformer_b_knows_positions_only_through_the_codes_in_its_input():
    """No positional embedding of its own: swapping two other positions (tokens and codes
    together) leaves the prediction at position 0 unchanged."""
    task, b = batch()
    tf = make_model_config("tf-b").build(task.spec)
    x = b.x.clone()
    perm = torch.tensor([0, 2, 1, 3, 4, 5])
    assert torch.allclose(tf(x[:, perm])[:, 0], tf(x)[:, 0], atol=1e-5)


@pytest.mark.parametrize("arch, params, field", [
    ("tf-b", {"heads": 0}, "heads"), ("tf-b", {"qk": "both"}, "qk"), ("rnn-b", {"cell": "elman"}, "cell"),
    ("rnn-b", {"hidden": -1}, "hidden"), ("ffn", {"hidden": [0]}, "hidden"), ("ffn", {"width": 3}, "width"),
    ("transformer", {}, "arch"),
])
def test_bad_model_parameters_name_the_field(arch, params, field):
    with pytest.raises(ArchsepError, match=field):
        make_model_config(arch, **params)


def test_the_authors_form_is_torchs_multihead_attention_then_the_mlp():
    """form='authors' computes what the authors' nn.MultiheadAttention(D, 1) + MLP computed, with
    torch's initialisation (Xavier in-projection, zero biases): small initial scores."""
    import torch

    from archsep.models import MODELS
    from archsep.tasks import TASKS

    task = TASKS.build("qstr", N=12, seed=0)
    torch.manual_seed(0)
    m = MODELS.build("tf-b", form="authors").build(task.spec)
    x = task.sample(32, torch.Generator().manual_seed(0)).x
    D = task.spec.input_dim
    mha = torch.nn.MultiheadAttention(D, 1, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(m.in_proj.weight)
        mha.in_proj_bias.copy_(m.in_proj.bias)
        mha.out_proj.weight.copy_(m.out_proj.weight)
        mha.out_proj.bias.copy_(m.out_proj.bias)
        ref = m.mlp(mha(x, x, x, need_weights=False)[0])
        torch.testing.assert_close(m(x), ref, rtol=1e-5, atol=1e-6)
        assert float(m.in_proj.bias.abs().max()) == 0.0
        q, k, _ = m.in_proj(x).chunk(3, -1)
        scores_authors = (q @ k.transpose(1, 2) / D**0.5).std()
        theory = MODELS.build("tf-b").build(task.spec)
        scores_theory = (torch.einsum("bid,hde->bhie", x, theory.wq) @ torch.einsum("bjd,hde->bhej", x,
                                                                                    theory.wk)).std()
    assert scores_authors < 0.5 < 1.5 < scores_theory  # the audit's 0.2-0.3 against 2.1-2.8


def test_the_form_is_part_of_a_runs_identity_but_old_theory_runs_keep_theirs():
    from archsep.config import RunConfig

    theory = RunConfig("qstr", "tf-b", {"N": 4}, {})
    assert "form" not in theory.canonical()["model_params"]  # runs stored before the option: same id
    assert RunConfig("qstr", "tf-b", {"N": 4}, {"form": "theory"}).run_id == theory.run_id
    assert RunConfig("qstr", "tf-b", {"N": 4}, {"form": "authors"}).run_id != theory.run_id


@pytest.mark.parametrize("cell, own", [("tanh", "elman"), ("relu", "elman"), ("gru", "gru")])
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_the_own_recurrence_is_the_library_rnn_in_outputs_and_every_gradient(cell, own, bidirectional, dtype, tol):
    """The CPU path of a one-layer tanh / relu network (`_ElmanScan`) or GRU (`_GRUScan`), dW
    formed once, against nn.RNN / nn.GRU on the same parameters and batch: outputs and every
    parameter's gradient agree."""
    task, b = batch(N=7)
    torch.manual_seed(0)
    model = make_model_config("rnn-b", cell=cell, hidden=24, bidirectional=bidirectional).build(task.spec).to(dtype)
    x = b.x.to(dtype)
    got = {}
    for impl in ("library", own):
        model.impl = impl
        model.zero_grad()
        out = model(x)
        (out.square().sum() + out[:, 0].sum()).backward()
        got[impl] = (out.detach().clone(), {n: p.grad.clone() for n, p in model.named_parameters()})
    model.impl = "auto"
    assert model._which(x) == own  # the default on a CPU
    (lo, lg), (eo, eg) = got["library"], got[own]
    scale = lo.abs().max()
    assert (eo - lo).abs().max() <= tol * scale
    assert lg.keys() == eg.keys() and len(lg) >= 5
    for n in lg:
        assert (eg[n] - lg[n]).abs().max() <= tol * lg[n].abs().max().clamp_min(1), n


def test_the_own_paths_are_taken_only_where_they_fit():
    task, b = batch()
    lstm = make_model_config("rnn-b", cell="lstm", hidden=8).build(task.spec)
    deep = make_model_config("rnn-b", cell="tanh", hidden=8, layers=2).build(task.spec)
    deep_gru = make_model_config("rnn-b", cell="gru", hidden=8, layers=2).build(task.spec)
    assert lstm._which(b.x) == deep._which(b.x) == deep_gru._which(b.x) == "library"
    gru = make_model_config("rnn-b", cell="gru", hidden=8).build(task.spec)
    gru.impl = "elman"  # the other cell's recurrence: refused
    with pytest.raises(ArchsepError, match="impl"):
        gru(b.x)
    with torch.device("meta"):
        meta = make_model_config("rnn-b", cell="tanh", hidden=8).build(task.spec)
    assert meta._which(torch.empty(2, 3, task.spec.input_dim, device="meta")) == "library"
    deep.impl = "elman"
    with pytest.raises(ArchsepError, match="impl"):
        deep(b.x)
    tanh = make_model_config("rnn-b", cell="tanh", hidden=8).build(task.spec)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # train.precision = "bf16": the library's casts
        assert tanh._which(b.x) == "library" and tanh(b.x).dtype == torch.bfloat16
