"""Recurrent networks (uni- or bidirectional): vanilla ReLU/tanh, GRU, LSTM, with a linear
readout at every position. `lstm` is paper A's setting: a unidirectional LSTM."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import torch
from torch import nn

from ..errors import check
from ..tasks.base import TaskSpec
from .base import ModelConfig, SeqModel, input_layer
from .ops import check_positions, position_rows, set_positions, under_vmap
from .registry import MODELS

_CELLS = {"gru": nn.GRU, "lstm": nn.LSTM, "relu": nn.RNN, "tanh": nn.RNN}
_IMPLS = ("auto", "library", "elman", "gru")


class _ElmanScan(torch.autograd.Function):
    """h_t = act(a_t + h_{t-1} W^T) with h_{-1} = 0 over time-major a (L, B, H): the recurrence of
    nn.RNN's tanh / relu cell, its input projection (and both biases) already in a. The backward
    walks back in time for dh and forms dW once, as one (H, (L-1)·B) @ ((L-1)·B, H) product,
    where the library's backward adds L products of inner size B (a third of the step for
    paper B's RNN of hidden 500q at batch 64: `benchmarks/rnn.py`)."""

    @staticmethod
    def forward(a: torch.Tensor, w: torch.Tensor, relu: bool) -> torch.Tensor:
        act_ = torch.relu_ if relu else torch.tanh_
        h = torch.empty_like(a)                           # (L, B, H)
        act_(h[0].copy_(a[0]))
        for t in range(1, a.shape[0]):
            act_(torch.addmm(a[t], h[t - 1], w.t(), out=h[t]))
        return h

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.relu = inputs[2]
        ctx.save_for_backward(output, inputs[1])

    @staticmethod
    def backward(ctx, gh: torch.Tensor):
        h, w = ctx.saved_tensors                          # (L, B, H), (H, H)
        gh = gh.contiguous()
        dz = torch.empty_like(h)                          # dL/da_t = dL/dz_t
        slope = (h > 0).to(h.dtype) if ctx.relu else 1 - h * h  # act'(z_t), read off h_t
        carry = None                                      # dL/dh_t through h_{t+1}
        for t in range(h.shape[0] - 1, -1, -1):
            g = gh[t] if carry is None else gh[t] + carry
            torch.mul(g, slope[t], out=dz[t])
            if t:
                carry = dz[t] @ w                          # (B, H)
        H = h.shape[-1]
        dw = dz[1:].reshape(-1, H).t() @ h[:-1].reshape(-1, H)  # sum_t dz_t^T h_{t-1}
        return dz, dw, None


class _GRUScan(torch.autograd.Function):
    """nn.GRU's recurrence over time-major a = x W_ih^T + b_ih (L, B, 3H), gates (r, z, n) in the
    library's order, with h_{-1} = 0:
        gh_t = h_{t-1} W_hh^T + b_hh,  r = σ(a_r + gh_r),  z = σ(a_z + gh_z),
        n = tanh(a_n + r ⊙ gh_n),     h_t = (1 - z) ⊙ n + z ⊙ h_{t-1}.
    The backward walks back in time for dh and forms dW_hh once, as one (3H, (L-1)·B) @
    ((L-1)·B, H) product, where the library's backward adds one product of inner size B per
    position (and a full-size gradient to the sum each time)."""

    @staticmethod
    def forward(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor):
        L, B, H3 = a.shape
        H = H3 // 3
        h = a.new_empty(L, B, H)
        r, z, n, ghn = (a.new_empty(L, B, H) for _ in range(4))  # kept for the backward
        prev = a.new_zeros(B, H)
        for t in range(L):
            gh = torch.addmm(b, prev, w.t())                # (B, 3H)
            ar, az, an = a[t].split(H, -1)
            hr, hz, hn = gh.split(H, -1)
            torch.sigmoid(ar + hr, out=r[t])
            torch.sigmoid(az + hz, out=z[t])
            ghn[t] = hn
            torch.tanh(torch.addcmul(an, r[t], hn), out=n[t])
            torch.addcmul(n[t], z[t], prev - n[t], out=h[t])  # (1 - z) n + z h_{t-1}
            prev = h[t]
        return h, r, z, n, ghn

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[1], *output)
        ctx.mark_non_differentiable(*output[1:])

    @staticmethod
    def backward(ctx, gout: torch.Tensor, *_):
        w, h, r, z, n, ghn = ctx.saved_tensors              # (3H, H), then (L, B, H) each
        L, B, H = h.shape
        gout = gout.contiguous()
        da = h.new_empty(L, B, 3 * H)                        # dL/da_t
        dgh = h.new_empty(L, B, 3 * H)                       # dL/dgh_t
        carry = None                                         # dL/dh_t through h_{t+1}
        for t in range(L - 1, -1, -1):
            dh = gout[t] if carry is None else gout[t] + carry
            prev = h[t - 1] if t else torch.zeros_like(dh)
            dn = dh * (1 - z[t]) * (1 - n[t] * n[t])         # through tanh
            dz = dh * (prev - n[t]) * z[t] * (1 - z[t])
            dr = dn * ghn[t] * r[t] * (1 - r[t])
            da[t] = torch.cat((dr, dz, dn), -1)
            dgh[t] = torch.cat((dr, dz, dn * r[t]), -1)
            if t:
                carry = torch.addmm(dh * z[t], dgh[t], w)    # (B, H)
        dw = dgh[1:].reshape(-1, 3 * H).t() @ h[:-1].reshape(-1, H)  # sum_t dgh_t^T h_{t-1}
        return da, dw, dgh.sum((0, 1))


class RNN(SeqModel):
    """`impl` picks how a one-layer tanh / relu network or GRU runs on the CPU: 'auto' (the default)
    takes `_ElmanScan` / `_GRUScan` there (outside bf16 autocast) and the library (cuDNN) elsewhere;
    'library' is nn.RNN / nn.GRU always. The same parameters either way; an implementation switch, not
    part of a run's identity."""

    stackable = False  # fused kernels win over a vmapped loop (see SeqModel.stackable)
    impl = "auto"

    def __init__(self, cfg: RNNConfig | LSTMConfig, spec: TaskSpec):
        super().__init__()
        self.cfg = cfg
        cell, hidden, layers = cfg.cell, cfg.hidden, cfg.layers
        embed = _embed_width(cfg.embed, hidden, spec)
        self.embed = input_layer(spec, embed)
        kw = {"nonlinearity": cell} if cell in ("relu", "tanh") else {}
        self.cell, self.hidden, self.layers, self.dirs = cell, hidden, layers, 2 if cfg.bidirectional else 1
        self.rnn = _CELLS[cell](embed or spec.input_dim, hidden, num_layers=layers, batch_first=True,
                                bidirectional=cfg.bidirectional, **kw)
        self.readout = nn.Linear(self.dirs * hidden, spec.output_dim)
        # (L, D) learned absolute positions (an LSTM's option; made last: no other parameter moves)
        set_positions(self, getattr(cfg, "positions", "none"), spec.seq_len, embed or spec.input_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = self.embed(x)                                 # (B, L, D)
        pos = position_rows(self, e.shape[1], e.shape[2])
        if pos is not None:
            e = e + pos
        which = self._which(e)
        h = self.rnn(e)[0] if which == "library" else self._own(e, which)  # (B, L, dirs*H)
        return self.readout(h)

    def _which(self, e: torch.Tensor) -> str:
        check(self.impl in _IMPLS, "impl", f"must be one of {', '.join(_IMPLS)}, got {self.impl!r}")
        own = "elman" if self.cell in ("tanh", "relu") else "gru" if self.cell == "gru" else None
        fits = own is not None and self.layers == 1 and e.shape[1] > 0
        if self.impl in ("elman", "gru"):
            check(fits and own == self.impl, "impl",
                  f"'{self.impl}' runs a one-layer {'tanh or relu' if self.impl == 'elman' else 'GRU'} network "
                  "on a non-empty sequence")
            return self.impl
        # bf16 autocast: the library's casts; under vmap (stacked training): the library's batching rules
        cpu = e.device.type == "cpu" and not torch.is_autocast_enabled("cpu") and not under_vmap(e)
        return own if self.impl == "auto" and fits and cpu and own else "library"

    def _own(self, e: torch.Tensor, which: str) -> torch.Tensor:
        """The library's forward for one tanh / relu layer (`_ElmanScan`) or one GRU layer
        (`_GRUScan`), with its own parameters."""
        e = e.transpose(0, 1)                             # (L, B, D)
        outs = []
        for d in range(self.dirs):
            sfx = "_reverse" if d else ""
            w_ih, w_hh = getattr(self.rnn, "weight_ih_l0" + sfx), getattr(self.rnn, "weight_hh_l0" + sfx)
            b_ih, b_hh = getattr(self.rnn, "bias_ih_l0" + sfx), getattr(self.rnn, "bias_hh_l0" + sfx)
            x = e.flip(0) if d else e                     # reversed in time for d = 1
            if which == "gru":
                a = torch.nn.functional.linear(x, w_ih, b_ih)  # (L, B, 3H)
                h = _GRUScan.apply(a.contiguous(), w_hh, b_hh)[0]  # (L, B, H)
            else:
                a = torch.nn.functional.linear(x, w_ih, b_ih + b_hh)  # (L, B, H)
                h = _ElmanScan.apply(a.contiguous(), w_hh, self.cell == "relu")  # (L, B, H)
            outs.append(h.flip(0) if d else h)
        return torch.cat(outs, -1).transpose(0, 1)        # (B, L, dirs*H)

    def is_causal(self) -> bool:
        return self.dirs == 1  # a bidirectional network reads the future

    def state_size(self, seq_len: int) -> int:
        # per direction and layer: h (and c for the LSTM)
        return self.layers * self.dirs * self.hidden * (2 if self.cell == "lstm" else 1)


@MODELS.register("rnn-b", aliases=("rnn",))  # paper B's RNN; "rnn" until renamed
@dataclass(frozen=True)
class RNNConfig(ModelConfig):
    """Default: bidirectional GRU of hidden size 500, as the authors ran paper B (which states 500*q)."""

    cell: Literal["gru", "lstm", "relu", "tanh"] = "gru"
    hidden: int = 500
    layers: int = 1
    bidirectional: bool = True
    embed: int | None = None

    def __post_init__(self) -> None:
        check(self.hidden >= 1, "hidden", f"must be >= 1, got {self.hidden}")
        check(self.layers >= 1, "layers", f"must be >= 1, got {self.layers}")

    def short_name(self) -> str:
        return f"{self.cell.upper()}-{self.hidden}" + ("" if self.bidirectional else " (one direction)")

    def build(self, spec: TaskSpec) -> RNN:
        return RNN(self, spec)


def _embed_width(embed: int | None, hidden: int, spec: TaskSpec) -> int | None:
    """Token tasks need an embedding; its width defaults to the hidden size."""
    return hidden if embed is None and spec.input == "tokens" else embed


@MODELS.register("lstm")
@dataclass(frozen=True)
class LSTMConfig(ModelConfig):
    """Paper A's LSTM: unidirectional, so the last position has read the whole input and the
    state carried between positions is layers * 2 * hidden floats (h and c)."""

    cell: ClassVar[str] = "lstm"  # fixed, not fields: what RNN reads from an RNNConfig
    bidirectional: ClassVar[bool] = False

    hidden: int = 64
    layers: int = 1
    embed: int | None = None
    # learned absolute positions added to the input's embedding (a diagnostic of issue 52: the
    # query names an absolute index, a recurrent state sees only lags); "none" as in the paper
    positions: Literal["none", "learned", "sinusoidal"] = "none"
    added: ClassVar[dict] = {"positions": "none"}

    def __post_init__(self) -> None:
        check(self.hidden >= 1, "hidden", f"must be >= 1, got {self.hidden}")
        check(self.layers >= 1, "layers", f"must be >= 1, got {self.layers}")
        check(self.embed is None or self.embed >= 1, "embed", f"must be >= 1, got {self.embed}")
        check_positions(self)

    def short_name(self) -> str:
        return f"LSTM-{self.hidden}"

    def build(self, spec: TaskSpec) -> RNN:
        return RNN(self, spec)
