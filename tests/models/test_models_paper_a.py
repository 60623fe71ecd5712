"""Paper-A models and the field's mixers: tf-preln, lstm, rnn, mamba, dss, retnet, linear-tf, gla,
mamba2, deltanet, swa, baseconv, rwkv, hyena, h3, based. Shapes on token and vector tasks,
causality, scan equivalence, state size by counting, readout pruning for every registered
model, a small learning test (stacking under vmap and the recurrent contract: tests/models/test_model_properties.py)."""
import copy

import pytest
import torch

from archsep.errors import ArchsepError
from archsep.models import MODELS, make_model_config
from archsep.models.base import SeqModel
from archsep.models.kernels import fused_scan, scan_parallel, scan_sequential
from archsep.tasks.base import TaskSpec

TOKENS = TaskSpec(input="tokens", input_dim=11, seq_len=9, output_dim=4, readout="last")
VECTORS = TaskSpec(input="vector", input_dim=3, seq_len=9, output_dim=1, readout="all")

SMALL = [
    ("tf-preln", {"layers": 2, "width": 16, "heads": 2}),
    ("tf-preln", {"layers": 1, "width": 12, "heads": 3, "positions": "sinusoidal", "causal": False}),
    ("tf-preln", {"layers": 1, "width": 8, "heads": 1, "positions": "none", "pool": "mean"}),
    ("lstm", {"hidden": 8, "layers": 2}),
    ("rnn-b", {"cell": "lstm", "hidden": 8, "bidirectional": False}),
    ("mamba", {"layers": 2, "width": 8, "d_state": 4}),
    ("mamba", {"layers": 1, "width": 8, "d_state": 4, "scan": "parallel", "norm": "layer"}),
    ("s4d", {"layers": 2, "width": 8, "d_state": 4}),
    ("retnet", {"layers": 2, "width": 8, "heads": 2}),
    ("linear-tf", {"layers": 2, "width": 8, "heads": 2, "feature": "relu"}),
    ("gla", {"layers": 2, "width": 8, "heads": 2}),
    ("mamba2", {"layers": 2, "width": 8, "heads": 2, "d_state": 4}),
    ("deltanet", {"layers": 2, "width": 8, "heads": 2}),
    ("deltanet", {"layers": 1, "width": 8, "heads": 2, "gated": True}),
    ("swa", {"layers": 2, "width": 8, "heads": 2, "window": 5}),
    ("baseconv", {"layers": 2, "width": 8, "kernel": 6}),
    ("rwkv", {"layers": 2, "width": 8}),
    ("hyena", {"layers": 2, "width": 8, "kernel": 6, "filter_width": 8}),
    ("h3", {"layers": 2, "width": 8, "heads": 2, "d_state": 4}),
    ("linear-tf", {"layers": 1, "width": 8, "heads": 2, "feature": "taylor", "feature_dim": 3}),
    ("based", {"layers": 2, "width": 8, "heads": 2, "feature_dim": 4, "window": 5}),
]


def inputs(spec, B=3, L=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    L = L or spec.seq_len
    if spec.input == "tokens":
        return torch.randint(0, spec.input_dim, (B, L), generator=g)
    return torch.randn(B, L, spec.input_dim, generator=g)


@pytest.mark.parametrize("spec", [TOKENS, VECTORS], ids=["tokens", "vectors"])
@pytest.mark.parametrize("arch, params", SMALL)
def test_shapes_params_and_gradients(arch, params, spec):
    torch.manual_seed(0)
    model = make_model_config(arch, **params).build(spec)
    x = inputs(spec)
    out = model(x)
    assert out.shape == (3, spec.seq_len, spec.output_dim)
    assert model.n_params() == sum(p.numel() for p in model.parameters()) > 0
    assert model(inputs(spec, L=5)).shape == (3, 5, spec.output_dim)  # shorter inputs work too
    out.square().mean().backward()
    assert all(p.grad is not None for p in model.parameters())


def _changes_when_later_tokens_change(model, i):
    x = inputs(TOKENS, seed=1)
    y = x.clone()
    y[:, i + 1:] = (y[:, i + 1:] + 1) % TOKENS.input_dim
    with torch.no_grad():
        return (model(x)[:, : i + 1] - model(y)[:, : i + 1]).abs().max().item()


@pytest.mark.parametrize("arch, params", [a for a in SMALL if a[1].get("causal", True)])
def test_causal_models_ignore_the_future(arch, params):
    torch.manual_seed(0)
    model = make_model_config(arch, **params).build(TOKENS)
    for i in (0, 4, 7):
        assert _changes_when_later_tokens_change(model, i) < 1e-6


@pytest.mark.parametrize("pool", ["none", "mean"])
def test_bidirectional_transformer_sees_the_future(pool):
    torch.manual_seed(0)
    model = make_model_config("tf-preln", layers=1, width=8, heads=2, causal=False, pool=pool).build(TOKENS)
    assert _changes_when_later_tokens_change(model, 4) > 1e-4


def test_attention_maps_are_row_stochastic_and_causal():
    torch.manual_seed(0)
    model = make_model_config("tf-preln", layers=2, width=16, heads=4).build(TOKENS)
    maps = model.attention_maps(inputs(TOKENS))
    assert len(maps) == 2 and maps[0].shape == (3, 4, 9, 9)
    for a in maps:
        torch.testing.assert_close(a.sum(-1), torch.ones(3, 4, 9))
        assert a.triu(1).abs().max() == 0
    assert model.state_size(9) is None
    assert model.cache_size(100) == 2 * 2 * 16 * 100


def test_transformer_rejects_inputs_longer_than_its_positions():
    model = make_model_config("tf-preln", layers=1, width=8, heads=2).build(TOKENS)
    with pytest.raises(ArchsepError, match="seq_len"):
        model(inputs(TOKENS, L=10))


def _scan_inputs(B=2, L=13, E=5, N=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    f64 = dict(dtype=torch.float64, generator=g)
    u = torch.randn(B, L, E, **f64)
    delta = torch.rand(B, L, E, **f64) * 0.5 + 0.01
    A = -torch.rand(E, N, **f64) * 4 - 0.1
    return u, delta, A, torch.randn(B, L, N, **f64), torch.randn(B, L, N, **f64)


@pytest.mark.parametrize("L", [1, 2, 13, 32])
def test_parallel_and_fused_scans_match_the_sequential_reference(L):
    u, delta, A, B, C = _scan_inputs(L=L)
    dA, dBx = torch.exp(delta[..., None] * A), (delta * u)[..., None] * B[:, :, None, :]
    ref = scan_sequential(dA, dBx, C)
    torch.testing.assert_close(scan_parallel(dA, dBx, C), ref, rtol=0, atol=1e-5)
    torch.testing.assert_close(fused_scan(u, delta, A, B, C), ref, rtol=0, atol=1e-5)
    # and in float32, as trained
    f32 = [t.float() for t in (dA, dBx, C)]
    torch.testing.assert_close(scan_parallel(*f32), scan_sequential(*f32), rtol=0, atol=1e-5)


def test_fused_scan_gradient_is_exact():
    args = tuple(t.requires_grad_() for t in _scan_inputs(L=6, E=3, N=2))
    assert torch.autograd.gradcheck(fused_scan, args)


@pytest.mark.parametrize("scan", ["parallel", "fused", "auto"])
def test_mamba_scans_agree_end_to_end_with_gradients(scan):
    torch.manual_seed(0)
    ref = make_model_config("mamba", layers=2, width=8, d_state=4, scan="sequential").build(VECTORS).double()
    other = make_model_config("mamba", layers=2, width=8, d_state=4, scan=scan).build(VECTORS).double()
    other.load_state_dict(ref.state_dict())
    x = inputs(VECTORS).double()
    outs = []
    for m in (ref, other):
        y = m(x)
        y.square().sum().backward()
        outs.append((y, [p.grad for p in m.parameters()]))
    torch.testing.assert_close(outs[1][0], outs[0][0], rtol=0, atol=1e-5)
    for g1, g0 in zip(outs[1][1], outs[0][1]):
        torch.testing.assert_close(g1, g0, rtol=1e-6, atol=1e-8)


def _count_carried(model, spec, L=6, B=2):
    """Run the model one position at a time and count the floats of every tensor it carries."""
    x = inputs(spec, B=B, L=L).double() if spec.input == "vector" else inputs(spec, B=B, L=L)
    state, outs, sizes = model.init_state(B, dtype=torch.float64), [], set()
    with torch.no_grad():
        for t in range(L):
            y, state = model.step(x[:, t], state, t)
            outs.append(y)
            leaves = [v for s in state for v in (s.values() if isinstance(s, dict) else [s])]
            # complex numbers are two floats
            sizes.add(sum(v.numel() * (2 if v.is_complex() else 1) for v in leaves) // B)
        full = model(x)
    return torch.stack(outs, 1), full, sizes


@pytest.mark.parametrize("params", [
    {"layers": 1, "width": 8, "d_state": 4},
    {"layers": 3, "width": 6, "d_state": 5, "expand": 3, "d_conv": 2},
])
def test_mamba_state_size_by_counting_the_recurrent_step(params):
    torch.manual_seed(0)
    model = make_model_config("mamba", **params).build(VECTORS).double()
    stepped, full, sizes = _count_carried(model, VECTORS)
    torch.testing.assert_close(stepped, full, rtol=0, atol=1e-10)  # the step is the model
    E = params.get("expand", 2) * params["width"]
    ssm = params["layers"] * E * params["d_state"]
    conv = params["layers"] * E * (params.get("d_conv", 4) - 1)
    assert model.state_breakdown() == {"ssm": ssm, "conv": conv}
    assert sizes == {model.state_size(100)} == {ssm + conv}


def test_dss_fft_sequential_and_step_agree_and_state_size_by_counting():
    torch.manual_seed(0)
    model = make_model_config("s4d", layers=2, width=6, d_state=5).build(VECTORS).double()
    stepped, full, sizes = _count_carried(model, VECTORS, L=9)
    torch.testing.assert_close(stepped, full, rtol=0, atol=1e-10)
    assert sizes == {model.state_size(9)} == {2 * 6 * 2 * 5}
    x = inputs(VECTORS).double()
    fft = model(x)
    for k in model.ssms:
        k.conv_impl = "fft"  # every length by FFT, where L = 9 goes through the Toeplitz product
    torch.testing.assert_close(model(x), fft, rtol=0, atol=1e-10)
    for k in model.ssms:
        k.mode = "sequential"
    torch.testing.assert_close(model(x), fft, rtol=0, atol=1e-10)


@pytest.mark.parametrize("direct_max", [0, 4, 128])
def test_long_conv_is_the_causal_convolution_by_its_definition_on_both_sides_of_the_switch(monkeypatch, direct_max):
    from archsep.models import ops
    monkeypatch.setattr(ops, "DIRECT_MAX", direct_max)  # L = 9: FFT, FFT, Toeplitz product
    g = torch.Generator().manual_seed(0)
    u, k = torch.randn(3, 9, 4, generator=g, dtype=torch.float64), torch.randn(4, 9, generator=g, dtype=torch.float64)
    want = torch.stack([sum(k[:, s] * u[:, t - s] for s in range(t + 1)) for t in range(9)], 1)  # (B, L, C)
    torch.testing.assert_close(ops.long_conv(u, k), want, rtol=0, atol=1e-12)


def test_lstm_state_size_counts_h_and_c_per_layer():
    m = make_model_config("lstm", hidden=8, layers=3).build(TOKENS)
    assert m.state_size(9) == 3 * 2 * 8
    assert m.rnn.input_size == 8  # token embedding defaults to the hidden width
    assert make_model_config("rnn-b", cell="lstm", hidden=8, bidirectional=False).build(TOKENS).state_size(9) == 16
    assert make_model_config("lstm", hidden=8, embed=5).build(TOKENS).rnn.input_size == 5


def test_lstm_config_is_a_fixed_rnn_with_only_its_own_fields():
    cfg = make_model_config("lstm", hidden=8)
    assert cfg.params() == {"hidden": 8, "layers": 1, "embed": None}  # cell/direction are not fields
    m = cfg.build(TOKENS)
    assert m.cfg is cfg and m.cell == "lstm" and m.dirs == 1
    with pytest.raises(ArchsepError, match="cell"):
        make_model_config("lstm", cell="gru")


@pytest.mark.parametrize("arch, params", SMALL)
def test_models_keep_their_config(arch, params):
    cfg = make_model_config(arch, **params)
    assert cfg.build(TOKENS).cfg is cfg


def test_one_layer_transformer_learns_to_copy_the_first_token():
    """Classification at the last position: the target is the first token (8 classes)."""
    torch.manual_seed(0)
    spec = TaskSpec(input="tokens", input_dim=8, seq_len=8, output_dim=8, readout="last")
    model = make_model_config("tf-preln", layers=1, width=32, heads=2).build(spec)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for _ in range(150):
        x = torch.randint(0, 8, (64, 8), generator=g)
        loss = torch.nn.functional.cross_entropy(model(x)[:, -1], x[:, 0])
        opt.zero_grad()
        loss.backward()
        opt.step()
    x = torch.randint(0, 8, (500, 8), generator=g)
    with torch.no_grad():
        acc = (model(x)[:, -1].argmax(-1) == x[:, 0]).float().mean().item()
    assert acc > 0.95


@pytest.mark.parametrize("arch, params, field", [
    ("tf-preln", {"layers": 0}, "layers"),
    ("tf-preln", {"width": 10, "heads": 3}, "heads"),
    ("tf-preln", {"positions": "rotary"}, "positions"),
    ("tf-preln", {"mlp_width": 0}, "mlp_width"),
    ("tf-preln", {"pool": "max"}, "pool"),
    ("mamba", {"d_state": 0}, "d_state"),
    ("mamba", {"expand": 0}, "expand"),
    ("mamba", {"d_conv": 0}, "d_conv"),
    ("mamba", {"dt_rank": 0}, "dt_rank"),
    ("mamba", {"dt_min": 0.5, "dt_max": 0.1}, "dt_min"),
    ("mamba", {"scan": "blelloch"}, "scan"),
    ("mamba", {"norm": "batch"}, "norm"),
    ("mamba", {"widht": 8}, "widht"),
    ("s4d", {"d_state": 0}, "d_state"),
    ("s4d", {"mode": "conv"}, "mode"),
    ("lstm", {"hidden": 0}, "hidden"),
    ("lstm", {"layers": 0}, "layers"),
])
def test_bad_parameters_name_the_field(arch, params, field):
    with pytest.raises(ArchsepError, match=field):
        make_model_config(arch, **params)


def test_cuda_kernel_is_never_used_under_vmap():
    from archsep.models.ops import under_vmap
    x = torch.randn(3, 4)
    assert not under_vmap(x)
    assert torch.vmap(lambda t: t.sum() * 0 + float(under_vmap(t)))(x).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("arch", MODELS.names())
def test_readout_pruning_is_exact_for_every_model(arch):
    """A model told to compute only what a last-position task reads gives that position's
    output and gradients as the full model does (to rounding); models that cannot prune
    return the full output unchanged."""
    from archsep.tasks import TASKS

    task = TASKS.build("index-lookup", N=24)
    current = MODELS.aliases()  # SMALL and this dict may use a model's earlier name
    small = {current.get(a, a): p for a, p in [*reversed(SMALL), ("ffn", {"embed": 4, "hidden": [16]}),
                                               ("tf", {"embed": 8})]}
    assert arch in small, f"add small parameters for the new model '{arch}' to this test"
    params = small[arch]
    torch.manual_seed(0)
    full = make_model_config(arch, **params).build(task.spec)
    pruned = copy.deepcopy(full)
    pruned.prune_to_readout()
    b = task.sample_test(16, torch.Generator().manual_seed(0))
    a, p = full(b.x), pruned(b.x)
    assert p.shape[1] in (1, a.shape[1])
    assert (a[:, -1] - p[:, -1]).abs().max().item() < 1e-6
    task.loss(a, b).backward()
    task.loss(p, b).backward()
    for (n, pa), (_, pp) in zip(full.named_parameters(), pruned.named_parameters()):
        if pa.grad is not None:
            torch.testing.assert_close(pp.grad, pa.grad, rtol=1e-4, atol=1e-6, msg=n)
    if type(full).prune_to_readout is not SeqModel.prune_to_readout:
        assert p.shape[1] == 1  # a model that prunes really did (the Transformers, the stacks, Mamba)
