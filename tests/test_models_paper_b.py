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
    ("tf", {}), ("tf", {"qk": "joint", "heads": 3}), ("tf", {"heads": 2, "head_dim": 4, "embed": 16}),
    ("ffn", {}), ("ffn", {"hidden": [32, 16, 8]}),
    ("rnn", {"cell": "gru", "hidden": 16}), ("rnn", {"cell": "lstm", "hidden": 16, "layers": 2}),
    ("rnn", {"cell": "relu", "hidden": 16}), ("rnn", {"cell": "tanh", "hidden": 16, "bidirectional": False}),
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
    assert make_model_config("rnn", hidden=8).build(task.spec).state_size(6) == 16
    assert make_model_config("rnn", cell="lstm", hidden=8, layers=2).build(task.spec).state_size(6) == 64
    assert make_model_config("tf").build(task.spec).state_size(6) is None


def test_joint_attention_is_a_bilinear_form_in_the_inputs():
    task, b = batch()
    tf = make_model_config("tf", qk="joint", heads=2).build(task.spec)
    a = tf.attention(b.x)
    scores = torch.einsum("bid,hde,bje->bhij", b.x, tf.wqk, b.x)
    assert torch.allclose(a, torch.softmax(scores, -1), atol=1e-6)
    sep = make_model_config("tf", heads=2).build(task.spec)
    assert sep.qk_matrix().shape == (2, task.spec.input_dim, task.spec.input_dim)


def test_transformer_b_knows_positions_only_through_the_codes_in_its_input():
    """No positional embedding of its own: swapping two other positions (tokens and codes
    together) leaves the prediction at position 0 unchanged."""
    task, b = batch()
    tf = make_model_config("tf").build(task.spec)
    x = b.x.clone()
    perm = torch.tensor([0, 2, 1, 3, 4, 5])
    assert torch.allclose(tf(x[:, perm])[:, 0], tf(x)[:, 0], atol=1e-5)


@pytest.mark.parametrize("arch, params, field", [
    ("tf", {"heads": 0}, "heads"), ("tf", {"qk": "both"}, "qk"), ("rnn", {"cell": "elman"}, "cell"),
    ("rnn", {"hidden": -1}, "hidden"), ("ffn", {"hidden": [0]}, "hidden"), ("ffn", {"width": 3}, "width"),
    ("transformer", {}, "arch"),
])
def test_bad_model_parameters_name_the_field(arch, params, field):
    with pytest.raises(ArchsepError, match=field):
        make_model_config(arch, **params)
