"""The compiled selective scan (models/kernels/selective_scan.c, `NativeScan`) against the sequential
reference with its skip and gate, (y + D u) * silu(z): values and gradients of all seven inputs
over shapes (lengths 1.., channel counts that are not a multiple of the vector width), decays
that underflow, long sequences; 'auto' taking it for float32 on CPU and the chunked scan
otherwise (a whole model against the sequential scan: tests/models/test_scan.py); and the loader (off switch, no cache,
a planted file in the cache is never loaded)."""
import os
import shutil
import stat

import pytest
import torch
import torch.nn.functional as F

from archsep.errors import ArchsepError
from archsep.models import make_model_config
from archsep.models import kernels as mm
from archsep.models import mamba
from archsep.models.kernels import native, native_scan, scan_sequential
from archsep.models.mamba import use_scan
from archsep.tasks.base import TaskSpec

VECTORS = TaskSpec(input="vector", input_dim=3, seq_len=9, output_dim=1, readout="all")
HAS_CC = bool(shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc"))


def test_the_compiled_scan_is_there_where_a_compiler_is():
    """Not a skip in disguise: on a machine with a C compiler the kernel must build."""
    if os.environ.get("ARCHSEP_NATIVE") == "0":
        pytest.skip("ARCHSEP_NATIVE=0")
    assert HAS_CC, "no C compiler: archsep then runs the chunked scan (slower); CI has one"
    assert mm.native_available(), native.why_not()


needs_native = pytest.mark.skipif(not HAS_CC or os.environ.get("ARCHSEP_NATIVE") == "0",
                                  reason="no compiled scan here (checked by the test above)")


def inputs(B, L, E, N, seed=0, dt_scale=0.5, a_scale=1.0):
    g = torch.Generator().manual_seed(seed)
    kw = dict(dtype=torch.float64, generator=g)
    return (torch.randn(B, L, E, **kw), torch.rand(B, L, E, **kw) * dt_scale + 0.01,
            -torch.exp(torch.randn(E, N, **kw)) * a_scale, torch.randn(B, L, N, **kw),
            torch.randn(B, L, N, **kw), torch.randn(E, **kw), 3 * torch.randn(B, L, E, **kw))


def reference(u, delta, A, B, C, D, z):
    y = scan_sequential(torch.exp(delta[..., None] * A), (delta * u)[..., None] * B[:, :, None, :], C)
    return (y + D * u) * F.silu(z)


def compare(args64, rtol=2e-6):
    """The float32 kernel against the float64 reference: outputs and every input's gradient,
    each to `rtol` of that tensor's largest magnitude."""
    args64 = [t.requires_grad_() for t in args64]
    ref = reference(*args64)
    gout = torch.randn(ref.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    grads64 = torch.autograd.grad(ref, args64, gout)
    args32 = [t.detach().float().requires_grad_() for t in args64]
    out = native_scan(*args32)
    assert out.dtype == torch.float32 and out.shape == ref.shape
    grads32 = torch.autograd.grad(out, args32, gout.float())
    for name, a, b in zip(("out", "u", "delta", "A", "B", "C", "D", "z"), (out, *grads32), (ref, *grads64)):
        a, b = a.detach(), b.detach()
        scale = float(b.abs().max()) or 1.0
        err = float((a.double() - b).abs().max())
        assert err <= rtol * scale + 1e-30, f"{name}: {err:.3g} against a largest value of {scale:.3g}"


@needs_native
@pytest.mark.parametrize("B, L, E, N", [(2, 1, 7, 2), (2, 13, 5, 3), (3, 37, 16, 8), (4, 50, 33, 16), (1, 9, 1, 1),
                                        (2, 20, 64, 4)])
def test_native_equals_sequential_with_gradients(B, L, E, N):
    compare(inputs(B, L, E, N, seed=L * E + N))


@needs_native
def test_native_where_decays_underflow():
    """dt * A far below -87 (exp underflows float32): the decay is 0 there, as in the reference;
    nothing is NaN or infinite."""
    args = inputs(2, 17, 9, 4, seed=3, dt_scale=5.0, a_scale=40.0)
    assert float((args[1][..., None] * args[2]).min()) < -150
    compare(args)


@needs_native
def test_native_over_a_long_sequence_of_slow_decays():
    """3000 positions of decays near 1: the state carries across the whole length without drift."""
    compare(inputs(1, 3000, 6, 3, seed=5, dt_scale=1e-3), rtol=1e-5)


@needs_native
def test_native_refuses_what_it_cannot_take():
    args = [t.float() for t in inputs(1, 3, 2, 2)]
    with pytest.raises(ArchsepError, match="float32 CPU") as e:
        native_scan(*[t.double() for t in args])
    assert e.value.field == "scan"
    assert native_scan(*[t[:, :0] if t.dim() == 3 else t for t in args]).shape == (1, 0, 2)


def counting(monkeypatch):
    calls = {"native": 0, "chunked": 0}
    for name, fn in (("native", mm.NativeScan.apply), ("chunked", mm.ChunkedScan.apply)):
        cls = mm.NativeScan if name == "native" else mm.ChunkedScan
        monkeypatch.setattr(cls, "apply", lambda *a, _n=name, _f=fn: calls.__setitem__(_n, calls[_n] + 1) or _f(*a))
    return calls


@needs_native
def test_auto_takes_native_for_float32_on_cpu_and_chunked_otherwise(monkeypatch):
    calls = counting(monkeypatch)
    model = make_model_config("mamba", layers=2, width=8, d_state=4).build(VECTORS)
    model(torch.randn(3, 9, 3))
    assert calls == {"native": 2, "chunked": 0}
    model.double()(torch.randn(3, 9, 3, dtype=torch.float64))
    assert calls == {"native": 2, "chunked": 2}
    monkeypatch.setattr(mamba, "native_available", lambda: False)  # no compiler: the chunked scan
    model.float()(torch.randn(3, 9, 3))
    assert calls == {"native": 2, "chunked": 4}


@needs_native
def test_native_is_deterministic():
    torch.manual_seed(0)
    model = use_scan(make_model_config("mamba", layers=1, width=16, d_state=8).build(VECTORS), "native")
    x = torch.randn(4, 30, 3)
    runs = []
    for _ in range(2):
        model.zero_grad()
        y = model(x)
        y.sum().backward()
        runs.append([y.detach().clone()] + [p.grad.clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*runs))


@pytest.fixture
def fresh_library():
    """`native.library` loads once per process: clear it around a test that changes how it loads."""
    native.library.cache_clear()
    yield
    native.library.cache_clear()


def test_native_off_switch(monkeypatch, fresh_library):
    monkeypatch.setenv("ARCHSEP_NATIVE", "0")
    assert native.library() is None and "ARCHSEP_NATIVE=0" in native.why_not()
    assert not mm.native_available()
    with pytest.raises(ArchsepError, match="'native' needs the compiled scan") as e:
        native_scan(*[t.float() for t in inputs(1, 3, 2, 2)])
    assert e.value.field == "scan"


@needs_native
def test_no_cache_compiles_into_a_temporary_directory_and_leaves_nothing(monkeypatch, tmp_path, fresh_library):
    monkeypatch.setenv("ARCHSEP_CACHE_DIR", "")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert native.library() is not None
    assert list(tmp_path.iterdir()) == []


@needs_native
def test_a_planted_file_in_the_cache_is_never_loaded(monkeypatch, tmp_path, fresh_library):
    """A symlink or a file others can write, at the kept library's name, is replaced by a fresh
    build (the rename replaces the link itself: its target is untouched)."""
    monkeypatch.setenv("ARCHSEP_CACHE_DIR", str(tmp_path))
    assert native.library() is not None
    kept = next((tmp_path / "native").glob("selective_scan-*.so"))
    assert stat.S_IMODE(kept.stat().st_mode) == 0o644
    assert [p.name for p in (tmp_path / "native").iterdir()] == [kept.name]  # no temporary left
    target = tmp_path / "elsewhere.so"
    target.write_bytes(b"not a library")
    kept.unlink()
    kept.symlink_to(target)
    native.library.cache_clear()
    assert native.library() is not None
    assert not kept.is_symlink() and kept.stat().st_size > 1000 and target.read_bytes() == b"not a library"
    kept.chmod(0o666)  # writable by others: rebuilt, not loaded
    before = kept.stat().st_ino
    native.library.cache_clear()
    assert native.library() is not None
    assert kept.stat().st_ino != before and stat.S_IMODE(kept.stat().st_mode) == 0o644


@needs_native
@pytest.mark.parametrize("B, L, E, K", [(2, 1, 5, 4), (3, 11, 16, 4), (2, 7, 9, 2), (1, 3, 4, 6)])
def test_native_conv_silu_equals_torch_conv_with_gradients(B, L, E, K):
    """SiLU of the causal depthwise convolution, on a view with position stride 2E (the half of
    in_proj's output it is given), against nn.Conv1d cropped to causal, in float64."""
    g = torch.Generator().manual_seed(B * L + E * K)
    both = torch.randn(B, L, 2 * E, dtype=torch.float64, generator=g)
    conv = torch.nn.Conv1d(E, E, K, groups=E, padding=K - 1).double()
    x64 = both.requires_grad_()
    ref = F.silu(conv(x64[..., :E].transpose(1, 2))[..., :L].transpose(1, 2))
    gout = torch.randn(ref.shape, dtype=torch.float64, generator=g)
    want = torch.autograd.grad(ref, [x64, conv.weight, conv.bias], gout)
    x32 = both.detach().float().requires_grad_()
    w32, b32 = (p.detach().float().requires_grad_() for p in (conv.weight, conv.bias))
    out = mm.native_conv_silu(x32[..., :E], w32, b32)
    got = torch.autograd.grad(out, [x32, w32, b32], gout.float())
    torch.testing.assert_close(out.double(), ref.detach(), rtol=1e-5, atol=1e-6)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, rtol=1e-5, atol=1e-5)
    assert float(got[0][..., E:].abs().max()) == 0.0  # the other half took no gradient


def test_auto_on_the_meta_device_takes_a_pytorch_scan():
    """The planner's memory estimate runs models on the meta device, where a tensor has no
    memory for C to read: 'auto' must not take the compiled scan or conv there."""
    with torch.device("meta"):
        model = make_model_config("mamba", layers=2, width=8, d_state=4).build(VECTORS)
        y = model(torch.zeros(3, 9, 3))
    assert y.shape == (3, 9, 1) and y.device.type == "meta"
    with pytest.raises(ArchsepError, match="float32 CPU"):
        native_scan(*[t.float().to("meta") for t in inputs(1, 3, 2, 2)])


@needs_native
def test_a_cache_directory_that_cannot_be_written_builds_in_a_temporary_one(monkeypatch, tmp_path, fresh_library):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("ARCHSEP_CACHE_DIR", str(blocked))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert native.library() is not None
    assert list((tmp_path / "tmp").iterdir()) == [] and blocked.read_text().startswith("a file")
