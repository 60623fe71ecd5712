"""gla, mamba2, deltanet, swa, baseconv, rwkv, hyena, h3, based and linear-tf's taylor features:
the chunked kernels equal the recurrences written out as loops, Mamba-2's decay matrix is its
closed form, sliding-window attention, BaseConv, RWKV's wkv and Hyena's operator equal their sums
written out, H3's SSM kernel is the impulse response of its recurrence, the state sizes' values,
config errors, and a small learning test through the engine. The properties every mixer shares
(the parallel form equals the step form, causality, state carried, pruning, stacking, the
contract on every classification task) are in tests/models/test_model_properties.py, over the registry."""
import math

import pytest
import torch
from mixer_util import build, case_ids, inputs

from archsep.config import RunConfig, TrainConfig
from archsep.engine.train import train_many
from archsep.errors import ArchsepError
from archsep.models import make_model_config
from archsep.models.mixers.deltanet import delta_chunked
from archsep.models.mixers.gla import LOG_ALPHA_MIN, GatedLinearAttention, gla_chunked
from archsep.models.mixers.mamba2 import decay_last_row, decay_matrix, ssd_chunked
from archsep.tasks.base import TaskSpec

# seq_len 40: the chunked forms (chunks of 16; Mamba-2's of 32) are tested within one chunk, at its edge and across
TOKENS = TaskSpec(input="tokens", input_dim=11, seq_len=40, output_dim=4, readout="last")
VECTORS = TaskSpec(input="vector", input_dim=3, seq_len=40, output_dim=2, readout="all")

MODELS = [
    ("gla", {"layers": 1, "width": 8, "heads": 1}),
    ("gla", {"layers": 2, "width": 16, "heads": 4}),
    ("gla", {"layers": 1, "width": 12, "heads": 3, "tau": 1.0, "positions": "learned", "mlp_width": 8}),
    ("mamba2", {"layers": 1, "width": 8, "heads": 1, "d_state": 4}),
    ("mamba2", {"layers": 2, "width": 8, "heads": 4, "d_state": 3, "groups": 2}),
    ("mamba2", {"layers": 1, "width": 6, "heads": 3, "d_state": 5, "expand": 1, "d_conv": 1, "positions": "learned"}),
    ("deltanet", {"layers": 1, "width": 8, "heads": 1}),
    ("deltanet", {"layers": 2, "width": 16, "heads": 4}),
    ("deltanet", {"layers": 1, "width": 8, "heads": 2, "gated": True}),
    ("deltanet", {"layers": 2, "width": 12, "heads": 3, "gated": True, "positions": "sinusoidal"}),
    ("swa", {"layers": 1, "width": 8, "heads": 2, "window": 1}),
    ("swa", {"layers": 2, "width": 16, "heads": 4, "window": 5}),
    ("swa", {"layers": 1, "width": 12, "heads": 3, "window": 64, "rope": False, "positions": "learned"}),
    ("baseconv", {"layers": 1, "width": 8}),
    ("baseconv", {"layers": 2, "width": 6, "kernel": 4, "short": 1}),
    ("baseconv", {"layers": 1, "width": 4, "kernel": 7, "short": 2, "positions": "sinusoidal"}),
    ("rwkv", {"layers": 1, "width": 8}),
    ("rwkv", {"layers": 2, "width": 6, "positions": "learned", "mlp_width": 5}),
    ("hyena", {"layers": 1, "width": 8}),
    ("hyena", {"layers": 2, "width": 6, "kernel": 4, "short": 1, "filter_width": 5}),
    ("hyena", {"layers": 1, "width": 4, "kernel": 7, "short": 2, "positions": "sinusoidal"}),
    ("h3", {"layers": 1, "width": 8, "heads": 2, "d_state": 4}),
    ("h3", {"layers": 2, "width": 6, "heads": 6, "d_state": 3, "shift": 1}),
    ("h3", {"layers": 1, "width": 8, "heads": 1, "d_state": 2, "shift": 2, "positions": "learned"}),
    ("linear-tf", {"layers": 1, "width": 8, "heads": 2, "feature": "taylor", "feature_dim": 3, "positions": "none"}),
    ("based", {"layers": 2, "width": 8, "heads": 2, "feature_dim": 2, "window": 5}),  # [linear, swa]
    ("based", {"layers": 3, "width": 12, "heads": 3, "feature_dim": None, "window": 1, "rope": False,
               "positions": "learned", "mlp_width": 8}),  # [linear, swa, linear], features at the head width 4
    ("based", {"layers": 3, "width": 8, "heads": 1, "feature_dim": 4, "window": 64, "window_every": 3,
               "positions": "sinusoidal"}),  # [linear, linear, swa], a window longer than the sequence
]
IDS = case_ids(MODELS)


# --- the kernels against their recurrences written as loops ----------------------------------------
def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("L, chunk", [(1, 16), (16, 16), (37, 16), (37, 4), (9, 1)])
@pytest.mark.parametrize("strength", [0.05, 3.0])  # mild decays, and decays to ~e^-5 per step
def test_gla_chunked_is_the_gated_recurrence(L, chunk, strength):
    B, H, dk, dv = 2, 3, 4, 5
    q, k, v = _rand(B, H, L, dk, seed=1), _rand(B, H, L, dk, seed=2), _rand(B, H, L, dv, seed=3)
    log_a = -strength * _rand(B, H, L, dk, seed=4).abs()
    S, ref = torch.zeros(B, H, dk, dv, dtype=torch.float64), []
    for t in range(L):
        S = log_a[:, :, t, :, None].exp() * S + k[:, :, t, :, None] * v[:, :, t, None, :]
        ref.append(q[:, :, t, None, :] @ S)
    torch.testing.assert_close(gla_chunked(q, k, v, log_a, chunk), torch.cat(ref, 2), rtol=1e-10, atol=1e-10)


def test_gla_decay_is_floored_in_both_forms():
    """A gate logit of -1000 would give log alpha = -62.5 (tau 16); floored at -5 per step, the
    chunked form stays finite and equal to the recurrent one."""
    torch.manual_seed(0)
    gla = GatedLinearAttention(width=8, heads=2, tau=16.0)
    with torch.no_grad():
        gla.a_bias.fill_(-1000.0)
    h = torch.randn(2, 40, 8)
    assert (gla._kv_decay(h)[2] == LOG_ALPHA_MIN).all()
    par = gla(h)
    state, rec = gla.init_state(2), []
    for t in range(40):
        y, state = gla.step(h[:, t], state, t)
        rec.append(y)
    assert torch.isfinite(par).all()
    torch.testing.assert_close(torch.stack(rec, 1), par.detach(), rtol=0, atol=1e-5)


@pytest.mark.parametrize("L, chunk", [(1, 16), (16, 16), (37, 16), (37, 4), (9, 1)])
@pytest.mark.parametrize("gated", [False, True])
def test_delta_chunked_is_the_delta_rule(L, chunk, gated):
    B, H, d = 2, 3, 4
    q, k, v = _rand(B, H, L, d, seed=1), _rand(B, H, L, d, seed=2), _rand(B, H, L, d, seed=3)
    k = torch.nn.functional.normalize(k, dim=-1)
    beta = torch.sigmoid(_rand(B, H, L, seed=4))
    log_a = -_rand(B, H, L, seed=5).abs() if gated else torch.zeros(B, H, L, dtype=torch.float64)
    S, ref, eye = torch.zeros(B, H, d, d, dtype=torch.float64), [], torch.eye(d, dtype=torch.float64)
    for t in range(L):
        kt, b = k[:, :, t, :, None], beta[:, :, t, None, None]  # (B, H, d, 1), (B, H, 1, 1)
        S = log_a[:, :, t, None, None].exp() * S @ (eye - b * kt @ kt.transpose(-1, -2))
        S = S + b * v[:, :, t, :, None] @ kt.transpose(-1, -2)  # (B, H, d, d)
        ref.append((S @ q[:, :, t, :, None]).transpose(-1, -2))
    torch.testing.assert_close(delta_chunked(q, k, v, beta, log_a, chunk), torch.cat(ref, 2), rtol=1e-9, atol=1e-10)


def test_delta_rule_step_is_the_error_correcting_update():
    """Ungated, beta = 1 and unit k: after writing v under key k, reading key k returns v exactly."""
    B, H, d = 1, 1, 4
    k = torch.nn.functional.normalize(_rand(B, H, 2, d, seed=1), dim=-1)
    v = _rand(B, H, 2, d, seed=2)
    out = delta_chunked(k, k, v, torch.ones(B, H, 2, dtype=torch.float64), torch.zeros(B, H, 2, dtype=torch.float64))
    torch.testing.assert_close(out[:, :, 1], v[:, :, 1], rtol=0, atol=1e-12)  # o_1 = S_1 k_1 = v_1


@pytest.mark.parametrize("L, chunk", [(1, 32), (32, 32), (37, 32), (37, 4), (9, 1)])
def test_ssd_chunked_is_the_recurrence(L, chunk):
    b, H, P, N = 2, 3, 4, 5
    x, B, C = _rand(b, H, L, P, seed=1), _rand(b, H, L, N, seed=2), _rand(b, H, L, N, seed=3)
    dt = torch.nn.functional.softplus(_rand(b, H, L, seed=4))
    log_a = -3 * dt
    h, ref = torch.zeros(b, H, N, P, dtype=torch.float64), []
    for t in range(L):
        h = log_a[:, :, t, None, None].exp() * h + B[:, :, t, :, None] * (dt[:, :, t, None] * x[:, :, t])[:, :, None, :]
        ref.append(C[:, :, t, None, :] @ h)  # (b, H, 1, P)
    torch.testing.assert_close(ssd_chunked(x, dt, log_a, B, C, chunk), torch.cat(ref, 2), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("shape", [(1,), (7,), (2, 3, 40)])
def test_mamba2_decay_matrix_is_the_closed_form(shape):
    log_a = -torch.rand(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2
    a = log_a.exp()
    L = shape[-1]
    D = decay_matrix(log_a)
    assert D.shape == (*shape, L)
    expected = torch.zeros(*shape, L, dtype=torch.float64)
    for t in range(L):
        for s in range(t + 1):
            p = torch.ones(shape[:-1], dtype=torch.float64)
            for r in range(s + 1, t + 1):
                p = p * a[..., r]
            expected[..., t, s] = p
    torch.testing.assert_close(D, expected, rtol=1e-12, atol=0)
    assert D.triu(1).abs().max() == 0 and (D.diagonal(dim1=-2, dim2=-1) == 1).all()
    torch.testing.assert_close(decay_last_row(log_a), expected[..., -1:, :], rtol=1e-12, atol=0)
    # float32, as trained, and decays of e^-40 a step: finite, zeros where the product underflows
    D32 = decay_matrix((log_a * 20).float())
    assert torch.isfinite(D32).all() and (D32.diagonal(dim1=-2, dim2=-1) == 1).all()


# --- state --------------------------------------------------------------------------------------
def _taylor_state(W, H, f):
    """S (D x W/H) and z (D) per head, D = 1 + f + f^2 Taylor features of f-wide q and k."""
    return H * (1 + f + f * f) * (W // H + 1)


def _expected_state(arch, params):
    W, H, layers = params["width"], params.get("heads", 1), params["layers"]
    if arch == "linear-tf":
        return layers * _taylor_state(W, H, params.get("feature_dim") or W // H)
    if arch == "based":  # every window_every-th layer sliding-window (keys and values), the others Taylor
        f, every = params.get("feature_dim", 16) or W // H, params.get("window_every", 2)
        return sum(2 * params["window"] * W if (i + 1) % every == 0 else _taylor_state(W, H, f) for i in range(layers))
    if arch == "rwkv":  # a, b, p and the last input, per channel
        return layers * 4 * W
    if arch == "baseconv":  # the short conv's last inputs and the long filter's window of u
        return layers * (params.get("kernel", 40) + params.get("short", 3) - 1) * W
    if arch == "hyena":  # the short convs' last inputs (v, x1, x2) and the last K-1 values of v and z
        return layers * (3 * (params.get("short", 3) - 1) + 2 * (params.get("kernel", 40) - 1)) * W
    if arch == "h3":  # the shift conv's last keys and each head's d x d x d_state complex modes
        return layers * ((params.get("shift", 4) - 1) * W + 2 * W * (W // H) * params["d_state"])
    if arch == "swa":
        return layers * 2 * params["window"] * W  # the window's keys and values
    if arch != "mamba2":
        return layers * W * W // H  # S per head
    E, N, G = params.get("expand", 2) * W, params["d_state"], params.get("groups", 1)
    return layers * (E * N + (params.get("d_conv", 4) - 1) * (E + 2 * G * N))  # h per head + the conv buffer


@pytest.mark.parametrize("arch, params", MODELS, ids=IDS)
def test_state_size_is_the_state_each_mixer_carries(arch, params):
    """The count written out per mixer; that the step form carries this many floats is checked by
    `check_model` (tests/models/test_model_properties.py)."""
    model = build(arch, params, VECTORS)
    assert model.state_size(6) == model.state_size(10_000) == _expected_state(arch, params)


def test_without_learned_positions_the_length_is_unbounded():
    for arch in ("gla", "mamba2", "deltanet", "swa", "based"):
        assert build(arch, {"width": 8, "heads": 2}, TOKENS)(inputs(TOKENS, L=50)).shape == (3, 50, 4)
    with pytest.raises(ArchsepError, match="seq_len"):
        build("gla", {"width": 8, "heads": 2, "positions": "learned"}, TOKENS)(inputs(TOKENS, L=41))


def test_sliding_window_attention_is_softmax_over_the_window_with_rotary_positions():
    """Oracle, float64: every head's output written out position by position, its q and k rotated
    by RoPE's angles as 2x2 rotations, softmax over the keys t - window < s <= t; and with a
    window as long as the sequence and no rotation, plain causal softmax attention."""
    from archsep.models.attention import ROPE_BASE
    from archsep.models.mixers.swa import LocalAttention

    B, L, W, H, w = 2, 13, 8, 2, 4
    d = W // H
    torch.manual_seed(0)
    att = LocalAttention(W, H, w, rope=True).double()
    h = torch.randn(B, L, W, dtype=torch.float64)
    q, k, v = (x.unflatten(-1, (H, d)) for x in (att.q(h), *att.kv(h).chunk(2, -1)))  # (B, L, H, d)

    def rot(x, t):  # (B, H, d) at position t
        out = x.clone()
        for i in range(d // 2):
            a = t * ROPE_BASE ** (-2 * i / d)
            c, s = math.cos(a), math.sin(a)
            out[..., 2 * i], out[..., 2 * i + 1] = c * x[..., 2 * i] - s * x[..., 2 * i + 1], \
                s * x[..., 2 * i] + c * x[..., 2 * i + 1]
        return out

    want = torch.zeros(B, L, H, d, dtype=torch.float64)
    for t in range(L):
        keys = range(max(0, t - w + 1), t + 1)
        scores = torch.stack([(rot(q[:, t], t) * rot(k[:, s], s)).sum(-1) / math.sqrt(d) for s in keys], -1)
        p = scores.softmax(-1)  # (B, H, |keys|)
        want[:, t] = sum(p[..., j, None] * v[:, s] for j, s in enumerate(keys))
    torch.testing.assert_close(att(h), att.out(want.flatten(2)), rtol=0, atol=1e-10)
    full = LocalAttention(W, H, L, rope=False).double()
    q, k, v = (x.unflatten(-1, (H, d)).transpose(1, 2) for x in (full.q(h), *full.kv(h).chunk(2, -1)))
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    scores = (q @ k.transpose(-1, -2) / math.sqrt(d)).masked_fill(~causal, float("-inf"))
    torch.testing.assert_close(full(h), full.out((scores.softmax(-1) @ v).transpose(1, 2).flatten(2)),
                               rtol=0, atol=1e-10)
    assert make_model_config("swa", width=8, heads=2, window=4, layers=3).build(TOKENS).state_size(40) == 3 * 2 * 4 * 8


def test_based_is_its_two_mixers_in_sequence_written_out():
    """Oracle, float64: Based with layers=3, window_every=2 is [Taylor linear attention, sliding-window
    attention, Taylor linear attention]; its output is the pre-LN blocks run by hand, the linear layers'
    outputs written out as sum_{s<=t} K(q_t, k_s) v_s / (sum_{s<=t} K(q_t, k_s) + eps), K = 1 + q·k/sqrt(f)
    + (q·k)^2/(2f), and the window layer's as softmax over its last `window` keys, q and k rotated by RoPE."""
    from archsep.models.attention import rotate
    from archsep.models.mixers.linear_attention import EPS, LinearAttention
    from archsep.models.mixers.swa import LocalAttention

    B, L, W, H, f, w = 2, 11, 8, 2, 3, 4
    d = W // H
    spec = TaskSpec(input="tokens", input_dim=11, seq_len=L, output_dim=4, readout="all")
    model = build("based", {"layers": 3, "width": W, "heads": H, "feature_dim": f, "window": w}, spec).double()
    assert [type(b.mixer) for b in model.blocks] == [LinearAttention, LocalAttention, LinearAttention]
    x = inputs(spec, B=B, L=L)

    def linear(m, a):  # (B, L, W) -> (B, L, W)
        q = m.q(a).unflatten(-1, (H, f))
        k, v = m.kv(a).split([H * f, W], -1)
        k, v = k.unflatten(-1, (H, f)), v.unflatten(-1, (H, d))
        out = torch.zeros(B, L, H, d, dtype=torch.float64)
        for t in range(L):
            s = torch.stack([(q[:, t] * k[:, j]).sum(-1) / math.sqrt(f) for j in range(t + 1)], -1)
            K = 1 + s + s * s / 2  # (B, H, t+1)
            out[:, t] = sum(K[..., j, None] * v[:, j] for j in range(t + 1)) / (K.sum(-1)[..., None] + EPS)
        return m.proj(out.flatten(2))

    def window(m, a):
        pos = torch.arange(L)
        q = rotate(m.q(a).unflatten(-1, (H, d)).transpose(1, 2), pos)  # (B, H, L, d)
        k, v = (t.unflatten(-1, (H, d)).transpose(1, 2) for t in m.kv(a).chunk(2, -1))
        k = rotate(k, pos)
        out = torch.zeros(B, H, L, d, dtype=torch.float64)
        for t in range(L):
            keys = list(range(max(0, t - w + 1), t + 1))
            p = (q[:, :, t, None] * k[:, :, keys]).sum(-1).div(math.sqrt(d)).softmax(-1)  # (B, H, |keys|)
            out[:, :, t] = (p[..., None] * v[:, :, keys]).sum(2)
        return m.out(out.transpose(1, 2).flatten(2))

    h = model.embed(x)  # positions "none": no absolute positions
    for b, mix in zip(model.blocks, (linear, window, linear)):
        h = h + mix(b.mixer, b.ln1(h))
        h = h + b.mlp(b.ln2(h))
    torch.testing.assert_close(model(x), model.head(model.ln_f(h)), rtol=0, atol=1e-10)


def test_baseconv_is_a_gated_convolution_written_out():
    """Oracle, float64: y_t = g_t * sum_s f_s u'_{t-s}, u' the short convolution of u, both as loops."""
    from archsep.models.mixers.baseconv import GatedConv

    B, L, W, K, S = 2, 9, 3, 4, 2
    torch.manual_seed(0)
    m = GatedConv(W, K, S).double()
    h = torch.randn(B, L, W, dtype=torch.float64)
    u, g = m.u(h), m.g(h)
    us = torch.stack([sum(m.short_taps[:, s] * u[:, t - s] for s in range(min(S, t + 1))) for t in range(L)], 1)
    y = torch.stack([sum(m.taps[:, s] * us[:, t - s] for s in range(min(K, t + 1))) for t in range(L)], 1)
    torch.testing.assert_close(m(h), m.out(g * y), rtol=0, atol=1e-10)
    torch.testing.assert_close(m(h, last_only=True), m.out(g * y)[:, -1:], rtol=0, atol=1e-10)


def test_rwkv_wkv_is_its_sums_written_out_and_stable():
    """Oracle, float64: wkv_t = (sum_{i<t} e^{-(t-1-i)w+k_i} v_i + e^{u+k_t} v_t) / (the same
    without v), across chunk boundaries; and both forms stay finite where e^k alone would overflow."""
    from archsep.models.mixers.rwkv import CHUNK, TimeMix, wkv_parallel

    B, L, W = 2, 2 * CHUNK + 5, 3  # three chunks, the last one short
    g = torch.Generator().manual_seed(0)
    k, v = (torch.randn(B, L, W, generator=g, dtype=torch.float64) for _ in range(2))
    w, u = torch.rand(W, generator=g, dtype=torch.float64) + 0.1, torch.randn(W, generator=g, dtype=torch.float64)
    want = torch.zeros(B, L, W, dtype=torch.float64)
    for t in range(L):
        num = sum((-(t - 1 - i) * w + k[:, i]).exp() * v[:, i] for i in range(t)) + (u + k[:, t]).exp() * v[:, t]
        den = sum((-(t - 1 - i) * w + k[:, i]).exp() for i in range(t)) + (u + k[:, t]).exp()
        want[:, t] = num / den
    torch.testing.assert_close(wkv_parallel(k, v, w, u), want, rtol=0, atol=1e-10)
    torch.testing.assert_close(wkv_parallel(k, v, w, u, last_only=True), want[:, -1:], rtol=0, atol=1e-10)
    m = TimeMix(4)
    with torch.no_grad():
        m.k.weight.mul_(1000.0)  # keys of size ~1e3: e^k overflows float32
    h = torch.randn(2, 30, 4)
    par = m(h)
    state, rec = m.init_state(2), []
    for t in range(30):
        y, state = m.step(h[:, t], state, t)
        rec.append(y)
    assert torch.isfinite(par).all() and torch.isfinite(torch.stack(rec, 1)).all()
    torch.testing.assert_close(torch.stack(rec, 1), par, rtol=1e-4, atol=1e-4)


def test_hyena_is_its_convolutions_written_out():
    """Oracle, float64: the implicit filters are window(s) * MLP(pe(s)) tap by tap (a shorter
    sequence takes the first taps of the same filters), and with v, x1, x2 the short
    convolutions of the projections, z_t = x1_t * sum_s h1_s v_{t-s}, y_t = x2_t * sum_s h2_s z_{t-s}
    as loops over positions; the module's output is out(y), and its last position alone."""
    from archsep.models.mixers.hyena import BANDS, HyenaOperator

    B, L, W, K, S = 2, 11, 3, 6, 2
    torch.manual_seed(0)
    m = HyenaOperator(W, K, S, filter_width=5).double()
    f = m.filter
    taps = torch.zeros(2 * W, K, dtype=torch.float64)
    for s in range(K):
        r = s / K
        pe = torch.tensor([r] + [math.sin(2 * math.pi * b * r) for b in range(1, BANDS + 1)]
                          + [math.cos(2 * math.pi * b * r) for b in range(1, BANDS + 1)], dtype=torch.float64)
        mlp = f.l3(torch.sin(f.w2 * f.l2(torch.sin(f.w1 * f.l1(pe)))))  # (2W,)
        for c in range(2 * W):
            reach = 0.3 + 1.2 * (c % W) / (W - 1)  # the window falls to 1% at this fraction of K
            taps[c, s] = mlp[c] * 0.01 ** (r / reach)
    torch.testing.assert_close(f(K), taps, rtol=0, atol=1e-12)
    torch.testing.assert_close(f(4), taps[:, :4], rtol=0, atol=1e-12)
    h1, h2 = taps[:W], taps[W:]

    h = torch.randn(B, L, W, dtype=torch.float64)
    p = m.proj(h)
    u = torch.stack([sum(m.short_taps[:, s] * p[:, t - s] for s in range(min(S, t + 1))) for t in range(L)], 1)
    v, x1, x2 = u.chunk(3, -1)  # (B, L, W) each
    z = torch.stack([x1[:, t] * sum(h1[:, s] * v[:, t - s] for s in range(min(K, t + 1))) for t in range(L)], 1)
    y = torch.stack([x2[:, t] * sum(h2[:, s] * z[:, t - s] for s in range(min(K, t + 1))) for t in range(L)], 1)
    torch.testing.assert_close(m(h), m.out(y), rtol=0, atol=1e-10)
    torch.testing.assert_close(m(h, last_only=True), m.out(y)[:, -1:], rtol=0, atol=1e-10)
    torch.testing.assert_close(m(h[:, :4]), m.out(y)[:, :4], rtol=0, atol=1e-10)  # shorter than K


def test_h3_ssm_kernel_is_the_impulse_response_of_its_recurrence():
    """Oracle, float64: the diagonal SSM stepped from a unit impulse (s_0 = 1, s_l = exp(ΔA) s_{l-1},
    y_l = 2 Re sum_n C'_n s_l, plus D at l = 0) gives the kernel the parallel form convolves with."""
    from archsep.models.mixers.h3 import H3Mixer, ssm_kernel

    L = 30
    torch.manual_seed(0)
    m = H3Mixer(width=6, heads=2, d_state=3, shift=2, dt_min=0.01, dt_max=0.5).double()
    dtA, C = m.ssm.discrete()  # (W, N) complex each
    s, want = torch.ones_like(dtA), []
    for lag in range(L):
        want.append(2 * (C * s).sum(-1).real + (m.ssm.D if lag == 0 else 0))
        s = torch.exp(dtA) * s
    torch.testing.assert_close(ssm_kernel(m.ssm, L), torch.stack(want, 1), rtol=1e-10, atol=1e-12)


def test_h3_is_its_heads_written_out():
    """Oracle, float64: per head, o_t[j] = sum_i q_t[i] sum_{l<=t} K_i[l] k'_{t-l}[i] v_{t-l}[j], k'
    the shift convolution of k, as loops over positions and lags; the module's output is out(o),
    and its last position alone; with one channel per head, H3's elementwise q ⊙ SSM(k' ⊙ v)."""
    from archsep.models.mixers.h3 import H3Mixer, ssm_kernel

    B, L, W, H, S = 2, 9, 6, 2, 3
    d = W // H
    torch.manual_seed(0)
    for heads in (H, W):
        d = W // heads
        m = H3Mixer(W, heads, d_state=3, shift=S, dt_min=0.01, dt_max=0.5).double()
        h = torch.randn(B, L, W, dtype=torch.float64)
        q, (k, v) = m.q(h), m.kv(h).chunk(2, -1)
        k = torch.stack([sum(m.shift_taps[:, s] * k[:, t - s] for s in range(min(S, t + 1))) for t in range(L)], 1)
        kern = ssm_kernel(m.ssm, L)  # (W, L), checked against the recurrence above
        o = torch.zeros(B, L, W, dtype=torch.float64)
        for t in range(L):
            for head in range(heads):
                c = slice(head * d, (head + 1) * d)
                Y = sum(kern[c, lag, None] * k[:, t - lag, c, None] * v[:, t - lag, None, c]
                        for lag in range(t + 1))  # (B, d, d)
                o[:, t, c] = (q[:, t, c, None] * Y).sum(1)
        if heads == W:  # d = 1: the elementwise form
            ew = torch.stack([sum(kern[:, lag] * k[:, t - lag] * v[:, t - lag] for lag in range(t + 1))
                              for t in range(L)], 1)
            torch.testing.assert_close(o, q * ew, rtol=0, atol=1e-12)
        torch.testing.assert_close(m(h), m.out(o), rtol=0, atol=1e-10)
        torch.testing.assert_close(m(h, last_only=True), m.out(o)[:, -1:], rtol=0, atol=1e-10)


# --- configs -------------------------------------------------------------------------------------
def test_hyena_and_h3_defaults_names_and_lengths():
    y, h = make_model_config("hyena"), make_model_config("h3")
    assert (y.layers, y.width, y.kernel, y.short, y.filter_width, y.positions) == (2, 64, None, 3, 16, "none")
    assert (h.layers, h.width, h.heads, h.d_state, h.shift, h.positions) == (2, 64, 8, 16, 4, "none")
    assert y.short_name() == "Hyena-(2,64)" and h.short_name() == "H3-(2,64)"
    assert y.build(TOKENS).cfg is y and h.build(TOKENS).cfg is h
    assert y.build(TOKENS).state_size(40) == 2 * (3 * 2 + 2 * 39) * 64
    assert h.build(TOKENS).state_size(40) == 2 * (3 * 64 + 2 * 64 * 8 * 16)
    # without learned positions, longer inputs than the task's: Hyena's filters stop at K taps
    for arch, params in (("hyena", {"width": 8}), ("h3", {"width": 8, "heads": 2, "d_state": 4})):
        assert build(arch, params, TOKENS)(inputs(TOKENS, L=50)).shape == (3, 50, 4)


def test_defaults_and_names():
    g, m, d = (make_model_config(a) for a in ("gla", "mamba2", "deltanet"))
    assert (g.layers, g.width, g.heads, g.tau, g.positions) == (2, 64, 4, 16.0, "none")
    assert (m.heads, m.d_state, m.expand, m.d_conv, m.groups, m.positions) == (4, 16, 2, 4, 1, "none")
    assert (d.heads, d.gated, d.positions) == (4, False, "none")
    assert g.short_name() == "GLA-(2,64)" and m.short_name() == "Mamba2-(2,64)"
    assert d.short_name() == "DeltaNet-(2,64)"
    assert make_model_config("deltanet", gated=True, layers=1).short_name() == "GatedDeltaNet-(1,64)"
    b = make_model_config("based")
    assert (b.layers, b.width, b.heads, b.feature_dim, b.window, b.window_every, b.rope, b.positions) == \
        (2, 64, 4, 16, 64, 2, True, "none")
    assert b.short_name() == "Based-(2,64)"
    assert b.build(TOKENS).state_size(40) == 4 * (1 + 16 + 256) * (16 + 1) + 2 * 64 * 64
    cfg = make_model_config("mamba2", width=8, heads=2)
    assert cfg.build(TOKENS).cfg is cfg
    assert cfg.build(TOKENS).state_size(40) == 2 * (16 * 16 + 3 * (16 + 2 * 16))


@pytest.mark.parametrize("arch, params, field", [
    ("gla", {"widht": 8}, "widht"),
    ("gla", {"layers": 0}, "layers"),
    ("gla", {"width": 10, "heads": 3}, "heads"),
    ("gla", {"tau": 0.0}, "tau"),
    ("swa", {"window": 0}, "window"),
    ("baseconv", {"kernel": 0}, "kernel"),
    ("baseconv", {"short": 0}, "short"),
    ("rwkv", {"layers": 0}, "layers"),
    ("swa", {"width": 12, "heads": 4}, "rope"),
    ("gla", {"tau": -16.0}, "tau"),
    ("gla", {"positions": "rotary"}, "positions"),
    ("gla", {"mlp_width": 0}, "mlp_width"),
    ("mamba2", {"d_state": 0}, "d_state"),
    ("mamba2", {"expand": 0}, "expand"),
    ("mamba2", {"d_conv": 0}, "d_conv"),
    ("mamba2", {"width": 8, "heads": 3}, "heads"),  # 3 does not divide the inner width 16
    ("mamba2", {"heads": 4, "groups": 3}, "groups"),
    ("mamba2", {"groups": 0}, "groups"),
    ("mamba2", {"dt_min": 0.5, "dt_max": 0.1}, "dt_min"),
    ("mamba2", {"dt_min": 0.0}, "dt_min"),
    ("mamba2", {"scan": "chunked"}, "scan"),
    ("mamba2", {"positions": "alibi"}, "positions"),
    ("deltanet", {"heads": 0}, "heads"),
    ("deltanet", {"width": 8, "heads": 3}, "heads"),
    ("deltanet", {"gated": "yes"}, "gated"),
    ("deltanet", {"beta": 0.5}, "beta"),
    ("deltanet", {"positions": "rotary"}, "positions"),
    ("hyena", {"kernel": 0}, "kernel"),
    ("hyena", {"short": 0}, "short"),
    ("hyena", {"filter_width": 0}, "filter_width"),
    ("hyena", {"positions": "rotary"}, "positions"),
    ("h3", {"width": 8, "heads": 3}, "heads"),
    ("h3", {"d_state": 0}, "d_state"),
    ("h3", {"shift": 0}, "shift"),
    ("h3", {"dt_min": 0.5, "dt_max": 0.1}, "dt_min"),
    ("based", {"widht": 8}, "widht"),
    ("based", {"layers": 0}, "layers"),
    ("based", {"width": 8, "heads": 3}, "heads"),
    ("based", {"feature_dim": 0}, "feature_dim"),
    ("based", {"window": 0}, "window"),
    ("based", {"window_every": 1}, "window_every"),
    ("based", {"width": 12, "heads": 4}, "rope"),  # head width 3: not rotated in pairs
    ("based", {"positions": "rotary"}, "positions"),
    ("based", {"mlp_width": 0}, "mlp_width"),
])
def test_bad_parameters_name_the_field(arch, params, field):
    with pytest.raises(ArchsepError, match=field):
        make_model_config(arch, **params)


# --- with archsep's tasks and engine ---------------------------------------------------------------
@pytest.mark.parametrize("arch, params", [("gla", {}), ("mamba2", {"d_state": 8}), ("deltanet", {}),
                                          ("deltanet", {"gated": True})], ids=["gla", "mamba2", "deltanet", "gated"])
def test_each_learns_a_small_index_lookup_through_the_engine(arch, params):
    """Index lookup at N=8 over 8 symbols (chance 1/8): error < 0.5 within 300 steps, with
    learned positions (the query names a position; these mixers have no rotation to find it)."""
    train = TrainConfig(lr=3e-3, weight_decay=0.0, budget=300 * 64, threshold=0.5, eval_every=25, eval_size=500,
                        eval_mode="every")
    model = {"layers": 1, "width": 32, "heads": 2, "positions": "learned", **params}
    [r] = train_many([RunConfig("index-lookup", arch, {"N": 8, "vocab": 8}, model, train)])
    assert r.status == "ok", (arch, r.status, r.error, r.curve[-3:])
    assert r.state_size == build(arch, model, TOKENS).state_size(9)
