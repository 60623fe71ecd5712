"""The chunked selective scan (models/kernels/selective_scan.py, `ChunkedScan`) against the sequential reference:
values and gradients for many chunk sizes, lengths, shapes and dtypes; stability where decays
underflow; what it keeps for the backward pass; the `use_scan` switch; the models that use it."""
import copy

import pytest
import torch
from mixer_util import assert_stack_matches

from archsep.errors import ArchsepError
from archsep.models import make_model_config
from archsep.models import kernels, mamba
from archsep.models.kernels import MAX_CHUNK, ChunkedScan, chunked_scan, default_chunk, scan_sequential
from archsep.models.mamba import use_scan
from archsep.tasks.base import TaskSpec

TOKENS = TaskSpec(input="tokens", input_dim=11, seq_len=9, output_dim=4, readout="last")
VECTORS = TaskSpec(input="vector", input_dim=3, seq_len=9, output_dim=1, readout="all")


def scan_inputs(B=2, L=13, E=5, N=3, seed=0, dtype=torch.float64, dt_scale=0.5):
    g = torch.Generator().manual_seed(seed)
    kw = dict(dtype=dtype, generator=g)
    return (torch.randn(B, L, E, **kw), torch.rand(B, L, E, **kw) * dt_scale + 0.01,
            -torch.rand(E, N, **kw) * 4 - 0.1, torch.randn(B, L, N, **kw), torch.randn(B, L, N, **kw))


def reference(u, delta, A, B, C):
    dA = torch.exp(delta[..., None] * A)
    return scan_sequential(dA, (delta * u)[..., None] * B[:, :, None, :], C)


@pytest.mark.parametrize("L, chunk", [(1, 1), (1, 4), (7, 1), (7, 3), (13, 4), (13, 5), (16, 4), (32, 7), (9, 64)])
@pytest.mark.parametrize("B, E, N", [(2, 5, 3), (1, 1, 1), (3, 8, 16)])
def test_chunked_equals_sequential_with_gradients(L, chunk, B, E, N):
    args = [t.requires_grad_() for t in scan_inputs(B, L, E, N, seed=L * chunk)]
    w = torch.randn(B, L, E, dtype=torch.float64)  # a loss that weights every output differently
    y_ref = reference(*args)
    g_ref = torch.autograd.grad((y_ref * w).sum(), args)
    y = chunked_scan(*args, chunk=chunk)
    g = torch.autograd.grad((y * w).sum(), args)
    assert y.dtype == torch.float64 and y.shape == (B, L, E)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=1e-10)
    for name, a, b in zip("u delta A B C".split(), g, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10, msg=name)


@pytest.mark.parametrize("chunk", [1, 3, 4, 16])
def test_chunked_in_float32_matches_to_1e5_and_stays_float32(chunk):
    args = [t.float().requires_grad_() for t in scan_inputs(4, 37, 16, 8, seed=chunk)]
    y_ref = reference(*args)
    g_ref = torch.autograd.grad(y_ref.square().sum(), args)
    y = chunked_scan(*args, chunk=chunk)
    g = torch.autograd.grad(y.square().sum(), args)
    assert y.dtype == torch.float32 and all(t.dtype == torch.float32 for t in g)
    torch.testing.assert_close(y, y_ref, rtol=0, atol=1e-5)
    for a, b in zip(g, g_ref):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_chunked_of_no_positions_is_empty():
    u, delta, A, B, C = scan_inputs(L=0)
    assert chunked_scan(u, delta, A, B, C, chunk=4).shape == (2, 0, 5)


def test_chunked_gradient_passes_gradcheck():
    args = tuple(t.requires_grad_() for t in scan_inputs(2, 7, 3, 2))
    assert torch.autograd.gradcheck(lambda *a: chunked_scan(*a, chunk=3), args)


def test_chunked_is_stable_where_decays_underflow_and_over_long_sequences():
    """Steps of exp(-1500) (zero in float32 and float64) and 3000 positions of decays near 1:
    finite, and the same as the reference, in float32."""
    u, delta, A, B, C = (t.float() for t in scan_inputs(2, 3000, 4, 3, dt_scale=1e-3))
    delta[:, ::50] = 300.0  # delta * A down to -1500 at every 50th position: a reset
    u[:, ::50] = 0.0  # (with no input there, so the states stay of order 1)
    A[0] = -5.0
    args = [t.requires_grad_() for t in (u, delta, A, B, C)]
    y = chunked_scan(*args, chunk=4)
    y_ref = reference(*args)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    g = torch.autograd.grad(y.sum(), args)
    g_ref = torch.autograd.grad(y_ref.sum(), args)
    for a, b in zip(g, g_ref):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-3)


def test_chunked_keeps_no_full_size_tensor_for_backward():
    """What the autograd graph keeps for the scan: the inputs and one state per chunk, far less
    than the (B, L, E, N) states the fused and sequential scans keep."""
    B, L, E, N = 2, 64, 8, 4
    saved = []

    def pack(t):
        saved.append(t.numel())
        return t

    args = [t.requires_grad_() for t in scan_inputs(B, L, E, N)]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        chunked_scan(*args, chunk=4)
    assert max(saved) <= B * L * E * N / 4  # the chunk starts: one state in 4
    assert sum(saved) <= 3 * B * L * E + 2 * B * L * N + E * N + (L // 4) * B * E * N


def test_chunk_sizes_and_bad_chunks():
    assert default_chunk(64, 128, 16) == MAX_CHUNK  # Mamba-64, batch 64
    assert default_chunk(64, 1024, 16) == 1  # Mamba-512: one position per chunk keeps 2^20
    assert 1 <= default_chunk(1, 1, 1) <= MAX_CHUNK
    args = scan_inputs()
    for bad in (0, -3, 2.5, "4"):
        with pytest.raises(ArchsepError, match="chunk") as e:
            chunked_scan(*args, chunk=bad)
        assert e.value.field == "chunk"


def test_auto_runs_the_chunked_scan_on_cpu_without_the_compiled_one(monkeypatch):
    monkeypatch.setattr(mamba, "native_available", lambda: False)  # no C compiler (tests/models/test_native_scan.py)
    calls = []
    real = ChunkedScan.apply
    monkeypatch.setattr(ChunkedScan, "apply", lambda *a: calls.append(a[0].shape) or real(*a))
    model = make_model_config("mamba", layers=2, width=8, d_state=4).build(TOKENS)
    model(torch.randint(0, 11, (3, 9)))
    assert calls == [(3, 9, 16), (3, 9, 16)]  # both layers, inner width expand * width
    calls.clear()
    use_scan(model, "fused")(torch.randint(0, 11, (3, 9)))
    assert calls == []


@pytest.mark.parametrize("scan, dtype, atol", [
    ("chunked", torch.float64, 1e-10), ("chunked", torch.float32, 1e-5),
    # the compiled scan (tests/models/test_native_scan.py fails where a compiler is but it did not build)
    pytest.param("native", torch.float32, 1e-5,
                 marks=pytest.mark.skipif(not kernels.native_available(), reason="no compiled scan here"))])
def test_mamba_model_equals_sequential_end_to_end(scan, dtype, atol):
    torch.manual_seed(0)
    ref = make_model_config("mamba", layers=2, width=8, d_state=4).build(VECTORS).to(dtype)
    use_scan(ref, "sequential")
    new = use_scan(copy.deepcopy(ref), scan)
    x = torch.randn(3, 23, 3, dtype=dtype)
    outs = []
    for m in (ref, new):
        y = m(x)
        y.square().sum().backward()
        outs.append((y, [p.grad for p in m.parameters()]))
    assert outs[1][0].dtype == dtype
    torch.testing.assert_close(outs[1][0], outs[0][0], rtol=0, atol=atol)
    for g1, g0 in zip(outs[1][1], outs[0][1]):
        torch.testing.assert_close(g1, g0, rtol=1e-4, atol=atol)


def test_use_scan_is_not_part_of_the_config_and_rejects_unknown_scans():
    cfg = make_model_config("mamba", layers=1, width=8, d_state=4)
    model = cfg.build(TOKENS)
    before = cfg.params()
    use_scan(model, "sequential")
    assert model.cfg is cfg and cfg.params() == before
    assert all(m.scan_impl == "sequential" for m in model.mixers)
    use_scan(model, None)
    assert all(m.scan_impl is None for m in model.mixers)
    with pytest.raises(ArchsepError, match="scan: must be one of auto, native, chunked, fused") as e:
        use_scan(model, "blelloch")
    assert e.value.field == "scan"
    assert make_model_config("mamba", scan="chunked").scan == "chunked"


def test_chunked_config_trains_stacked_under_vmap():
    """Under vmap (the engine's stacked path) a 'chunked' model takes the fused scan: the same
    outputs and gradients as each model alone, which runs chunked."""
    models = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        models.append(make_model_config("mamba", layers=1, width=4, d_state=2, scan="chunked").build(TOKENS))
    xs = [torch.randint(0, 11, (3, 9), generator=torch.Generator().manual_seed(s)) for s in (0, 1)]
    assert_stack_matches(models, xs)


@pytest.mark.parametrize("scan", ["native", "chunked", "fused", "parallel", "sequential"])
@pytest.mark.parametrize("layers", [1, 2])
def test_a_pruned_mamba_gives_the_last_position_and_its_gradients_under_every_scan(scan, layers):
    """Pruned for a last-position readout, the last layer gates and projects one position (its
    scan still runs over all): (B, 1, C), the full model's last position, and the same gradients
    for a loss on it."""
    if scan == "native" and not kernels.native_available():
        pytest.skip("no compiled scan here")
    spec = TaskSpec(input="tokens", input_dim=11, seq_len=13, output_dim=4, readout="last")
    torch.manual_seed(0)
    full = use_scan(make_model_config("mamba", layers=layers, width=8, d_state=4).build(spec), scan)
    pruned = copy.deepcopy(full)
    pruned.prune_to_readout()
    x = torch.randint(0, 11, (3, 13), generator=torch.Generator().manual_seed(0))
    a, p = full(x), pruned(x)
    assert p.shape == (3, 1, 4)
    torch.testing.assert_close(p[:, 0], a[:, -1], rtol=0, atol=1e-6)
    a[:, -1].square().sum().backward()
    p[:, 0].square().sum().backward()
    for (n, ga), (_, gp) in zip(full.named_parameters(), pruned.named_parameters()):
        torch.testing.assert_close(gp.grad, ga.grad, rtol=1e-4, atol=1e-6, msg=n)
    pruned.readout_last = False  # a task read at every position: pruning leaves the model whole
    pruned.prune_to_readout()
    assert pruned(x).shape == (3, 13, 4)
