"""RWKV's time mixing (Peng et al. 2023, "RWKV: Reinventing RNNs for the Transformer Era",
RWKV-4) in the pre-LN block stack of `retnet` (models/mixers/stack.py).

Per channel, with token shift x'_t = mu * x_t + (1 - mu) * x_{t-1} (its own mu for k, v, r),
k = x'_k W_k, v = x'_v W_v, r = sigmoid(x'_r W_r), a decay w = exp(w_log) > 0 and a bonus u:
    wkv_t = (sum_{i<t} e^{-(t-1-i) w + k_i} v_i + e^{u + k_t} v_t)
            / (sum_{i<t} e^{-(t-1-i) w + k_i} + e^{u + k_t}),         out_t = (r_t * wkv_t) W_o.
wkv_t is a softmax over i <= t of the logits -(t-1-i) w + k_i (u + k_t at i = t), per channel.
- parallel (training) form: that softmax within chunks of CHUNK positions, the positions before
  a chunk carried as one rescaled (numerator, denominator) term (work and memory B * L * CHUNK * W);
- recurrent form: RWKV's numerator, denominator and running maximum exponent (a, b, p), rescaled
  at every step so that no exponential overflows, plus the previous input for the token shift.
State: 4 * width floats per layer (a, b, p and x_{t-1}). The channel mixing of RWKV's block is
replaced by the stack's GELU MLP (a simplification, stated).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .stack import Mixer, MixerConfig
from ..registry import MODELS

CHUNK = 16


def wkv_parallel(k: torch.Tensor, v: torch.Tensor, w: torch.Tensor, u: torch.Tensor,
                 last_only: bool = False) -> torch.Tensor:
    """k, v (B, L, W), w > 0 and u (W,) -> wkv (B, L, W) (or (B, 1, W), the last position alone).

    Chunked: within a chunk of CHUNK positions the softmax over i <= t is taken whole (B, C, C, W);
    the positions before the chunk enter as one carried term, RWKV's (numerator, denominator)
    scaled by e^-m with m their largest logit, which decays by e^-w a position. Work and memory
    B * L * CHUNK * W, not B * L * L * W."""
    B, L, W = k.shape
    if last_only:  # one query: its logits over every i <= L-1 at once, (B, L, W)
        lag = (L - 2 - torch.arange(L, device=k.device)).to(k.dtype)  # (L,): t - 1 - i at t = L-1
        logits = torch.cat([k[:, :-1] - lag[:-1, None] * w, k[:, -1:] + u], 1)  # (B, L, W)
        return (logits.softmax(1) * v).sum(1, keepdim=True)  # (B, 1, W)
    j = torch.arange(CHUNK, device=k.device)
    lag = (j[:, None] - 1 - j[None]).to(k.dtype)  # (C, C): t - 1 - i within a chunk
    inf = torch.tensor(float("-inf"), dtype=k.dtype, device=k.device)
    bias = torch.where((j[None] < j[:, None])[..., None], -lag[..., None] * w,
                       torch.where((j[None] == j[:, None])[..., None], u, inf))  # (C, C, W): i<t, i=t, i>t
    m = torch.full((B, W), -1e30, dtype=k.dtype, device=k.device)  # carried: largest logit (none yet)
    num, den = torch.zeros_like(m), torch.zeros_like(m)  # carried sums, scaled by e^-m
    out = []
    for s in range(0, L, CHUNK):
        kc, vc = k[:, s:s + CHUNK], v[:, s:s + CHUNK]  # (B, n, W)
        n = kc.shape[1]
        lg = kc[:, None] + bias[:n, :n]  # (B, n, n, W): query t, key i
        carry = m[:, None] - j[:n, None] * w  # (B, n, W): the carried term's logit at t = s + j
        top = torch.maximum(lg.amax(2), carry)  # (B, n, W)
        e, ec = (lg - top[:, :, None]).exp(), (carry - top).exp()  # (B, n, n, W), (B, n, W)
        out.append(((e * vc[:, None]).sum(2) + ec * num[:, None]) / (e.sum(2) + ec * den[:, None]))
        tail = kc - (n - 1 - j[:n, None]) * w  # (B, n, W): the chunk's logits at t = s + n
        old = m - n * w  # (B, W)
        m2 = torch.maximum(tail.amax(1), old)
        et, eo = (tail - m2[:, None]).exp(), (old - m2).exp()
        num, den, m = eo * num + (et * vc).sum(1), eo * den + et.sum(1), m2
    return torch.cat(out, 1)  # (B, L, W)


class TimeMix(Mixer):
    def __init__(self, width: int):
        super().__init__()
        self.state_floats = 4 * width
        self.mu = nn.Parameter(torch.rand(3, width))  # token-shift mixes for k, v, r
        self.k, self.v, self.r = (nn.Linear(width, width, bias=False) for _ in range(3))
        self.w_log = nn.Parameter(torch.linspace(-3.0, 1.0, width))  # decays e^-w from near 1 to fast
        self.u = nn.Parameter(torch.zeros(width))
        self.out = nn.Linear(width, width, bias=False)

    def _kvr(self, x: torch.Tensor, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x and its token-shifted predecessor (..., W) -> k, v, sigmoid(r) (..., W)."""
        mk, mv, mr = self.mu
        return (self.k(mk * x + (1 - mk) * prev), self.v(mv * x + (1 - mv) * prev),
                torch.sigmoid(self.r(mr * x + (1 - mr) * prev)))

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        prev = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)  # (B, L, W): x_{t-1}, zero at 0
        k, v, r = self._kvr(h, prev)  # (B, L, W) each
        y = wkv_parallel(k, v, self.w_log.exp(), self.u, last_only)  # (B, Lq, W)
        return self.out((r[:, -1:] if last_only else r) * y)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        W = self.u.shape[0]
        z = torch.zeros(batch, W, device=device, dtype=dtype)
        return {"a": z, "b": z.clone(), "p": torch.full_like(z, -1e30), "x": z.clone()}

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t: h (B, W) -> output (B, W), with RWKV's rescaled recurrence."""
        k, v, r = self._kvr(h, state["x"])  # (B, W) each
        a, b, p = state["a"], state["b"], state["p"]
        ww = self.u + k
        q = torch.maximum(p, ww)
        e1, e2 = (p - q).exp(), (ww - q).exp()
        y = (e1 * a + e2 * v) / (e1 * b + e2)  # (B, W)
        ww = p - self.w_log.exp()
        q = torch.maximum(ww, k)
        e1, e2 = (ww - q).exp(), (k - q).exp()
        state = {"a": e1 * a + e2 * v, "b": e1 * b + e2, "p": q, "x": h}
        return self.out(r * y), state


@MODELS.register("rwkv")
@dataclass(frozen=True)
class RWKVConfig(MixerConfig):
    """RWKV-4's time mixing: the WKV recurrence (per-channel decay and bonus, token shift,
    receptance gate) as the mixer of `layers` pre-LN blocks of width `width`, each with a GELU
    MLP of width `mlp_width` (default 4*width) in place of RWKV's channel mixing; positions:
    learned | sinusoidal | none added to the embedding (none, as in RWKV)."""

    def short_name(self) -> str:
        return f"RWKV-({self.layers},{self.width})"

    def mixer(self, layer: int) -> TimeMix:
        return TimeMix(self.width)
