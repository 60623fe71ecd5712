"""H3 (Fu et al. 2023, "Hungry Hungry Hippos"): a shift SSM on the keys and a diagonal SSM on
their products with the values, read by the queries, in the pre-LN block stack of `retnet`
(models/mixers/stack.py); the paper's multi-head form.

With q, k, v linear maps of the block's input, split into H = `heads` heads of d = width/H
channels, per head (i, j < d index its channels):
    k'_t = sum_{s<S} a_s k_{t-s}                              the shift SSM (S = `shift` taps)
    X_t[i, j] = k'_t[i] v_t[j]                                 a d x d outer product
    s_t[i, j, n] = exp(Δ_i A_{i,n}) s_{t-1}[i, j, n] + X_t[i, j]       the diagonal SSM
    Y_t[i, j] = 2 Re sum_n C'_{i,n} s_t[i, j, n] + D_i X_t[i, j]
    o_t[j] = sum_i q_t[i] Y_t[i, j]                            (the heads' o concatenated, projected)
- the shift SSM (a state that shifts its inputs along, A the shift matrix) is a causal
  convolution of S learned taps per channel (the current input and S-1 past ones);
- the diagonal SSM is S4D's (models/s4d.py: S4D-Lin init A_n = -1/2 + iπn, Δ log-uniform in
  [dt_min, dt_max], ZOH input gain folded into C'), `d_state` complex modes, its parameters per
  key channel i (each head's row i of X shares them over j);
- parallel (training) form: being LTI, Y_t[i, j] = sum_l K_i[l] X_{t-l}[i, j] with the kernel
  K_i[l] = 2 Re sum_n C'_{i,n} exp(Δ_i A_{i,n} l) + D_i [l = 0], by FFT over the d x d products
  (zero-padded to 2L); `last_only`: the last position's sum over l alone;
- recurrent form: the shift conv's last S-1 keys and the complex s per head (carried as pairs
  of floats).
Simplification, stated: no normalisation of q (the paper has none either) and no output gate.

State: per layer (S - 1) * width + 2 * width * d * d_state floats (d = width/heads: each head's
d x d x d_state complex modes).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ...errors import check
from ..ops import causal_conv, fft_conv
from .stack import Mixer, MixerConfig, check_heads
from ..registry import MODELS
from ..s4d import S4DKernel


def ssm_kernel(ssm: S4DKernel, L: int) -> torch.Tensor:
    """(channels, L) real: the diagonal SSM's response at lags 0..L-1, its D added at lag 0."""
    k = ssm.kernel(L)
    return torch.cat([k[:, :1] + ssm.D[:, None], k[:, 1:]], 1)


class H3Mixer(Mixer):
    def __init__(self, width: int, heads: int, d_state: int, shift: int, dt_min: float, dt_max: float):
        super().__init__()
        self.width, self.heads, self.dh, self.d_state, self.shift = width, heads, width // heads, d_state, shift
        self.state_floats = (shift - 1) * width + 2 * width * self.dh * d_state
        self.q = nn.Linear(width, width)  # apart from k, v: a pruned layer needs one query
        self.kv = nn.Linear(width, 2 * width)
        self.shift_taps = nn.Parameter(torch.randn(width, shift) / shift**0.5)
        self.ssm = S4DKernel(width, d_state, dt_min, dt_max, "fft")  # per key channel
        self.out = nn.Linear(width, width)

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        B, L, W = h.shape
        H, d = self.heads, self.dh
        k, v = self.kv(h).chunk(2, -1)  # (B, L, W) each
        k = causal_conv(k, self.shift_taps).view(B, L, H, d)  # the shift SSM
        v = v.view(B, L, H, d)
        kern = ssm_kernel(self.ssm, L).view(H, d, L)  # (H, d, L): lag l
        if last_only:  # Y at the last position: sum over s of K[L-1-s] X_s
            Y = torch.einsum("hil,blhi,blhj->bhij", kern.flip(-1), k, v)  # (B, H, d, d)
            q = self.q(h[:, -1]).view(B, H, d)
            return self.out(torch.einsum("bhi,bhij->bhj", q, Y).reshape(B, 1, W))  # (B, 1, W)
        X = (k[..., :, None] * v[..., None, :]).permute(0, 2, 3, 4, 1)  # (B, H, d, d, L)
        Y = fft_conv(X, kern[:, :, None])  # (B, H, d, d, L)
        q = self.q(h).view(B, L, H, d)
        return self.out(torch.einsum("blhi,bhijl->blhj", q, Y).reshape(B, L, W))  # (B, L, W)

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        H, d = self.heads, self.dh
        return {"k": torch.zeros(batch, self.shift - 1, self.width, device=device, dtype=dtype),
                "s": torch.zeros(batch, H, d, d, self.d_state, 2, device=device, dtype=dtype)}  # (re, im)

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Position t: h (B, W) -> output (B, W); s_t = exp(ΔA) s_{t-1} + k'_t v_t^T per head."""
        B, H, d, N = h.shape[0], self.heads, self.dh, self.d_state
        k, v = self.kv(h).chunk(2, -1)  # (B, W) each
        ks = torch.cat([state["k"], k[:, None]], 1)  # (B, shift, W)
        k = (ks.flip(1) * self.shift_taps.T).sum(1)  # (B, W): the shift SSM
        X = k.view(B, H, d, 1) * v.view(B, H, 1, d)  # (B, H, d, d)
        dtA, C = self.ssm.discrete()  # (W, N) complex each
        s = torch.exp(dtA).view(H, d, 1, N) * torch.view_as_complex(state["s"]) + X[..., None]  # (B, H, d, d, N)
        Y = 2 * (C.view(H, d, 1, N) * s).sum(-1).real + self.ssm.D.view(H, d, 1) * X  # (B, H, d, d)
        o = torch.einsum("bhi,bhij->bhj", self.q(h).view(B, H, d), Y)  # (B, H, d)
        return self.out(o.reshape(B, -1)), {"k": ks[:, 1:], "s": torch.view_as_real(s)}


@MODELS.register("h3")
@dataclass(frozen=True)
class H3Config(MixerConfig):
    """H3: q ⊙ SSM_diag(SSM_shift(k) v^T) in `heads` heads (a shift SSM of `shift` taps on k, a
    diagonal S4D SSM of `d_state` complex modes per key channel, steps Δ log-uniform in [dt_min,
    dt_max]) as the mixer of `layers` pre-LN blocks of width `width`, each with a GELU MLP of
    width `mlp_width` (default 4*width); positions: learned | sinusoidal | none added to the
    embedding (none: the SSMs are position-aware)."""

    heads: int = 8
    d_state: int = 16
    shift: int = 4
    dt_min: float = 0.001
    dt_max: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()  # layers, width, mlp_width, positions
        check_heads(self)
        check(self.d_state >= 1, "d_state", f"must be >= 1, got {self.d_state}")
        check(self.shift >= 1, "shift", f"must be >= 1, got {self.shift}")
        check(0 < self.dt_min <= self.dt_max, "dt_min", f"need 0 < dt_min <= dt_max, got {self.dt_min}, {self.dt_max}")

    def short_name(self) -> str:
        return f"H3-({self.layers},{self.width})"

    def mixer(self, layer: int) -> H3Mixer:
        return H3Mixer(self.width, self.heads, self.d_state, self.shift, self.dt_min, self.dt_max)
