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
from .ops import check_positions, position_rows, set_positions
from .registry import MODELS

_CELLS = {"gru": nn.GRU, "lstm": nn.LSTM, "relu": nn.RNN, "tanh": nn.RNN}
_IMPLS = ("auto", "library", "elman")


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


class RNN(SeqModel):
    """`impl` picks how a one-layer tanh / relu network runs on the CPU: 'auto' (the default)
    takes `_ElmanScan` there (outside bf16 autocast) and the library (cuDNN) elsewhere;
    'library' is nn.RNN always. The same parameters either way; an implementation switch, not
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
        h = self._elman(e) if self._which(e) == "elman" else self.rnn(e)[0]  # (B, L, dirs*H)
        return self.readout(h)

    def _which(self, e: torch.Tensor) -> str:
        check(self.impl in _IMPLS, "impl", f"must be one of {', '.join(_IMPLS)}, got {self.impl!r}")
        fits = self.cell in ("tanh", "relu") and self.layers == 1 and e.shape[1] > 0
        if self.impl == "elman":
            check(fits, "impl", "'elman' runs a one-layer tanh or relu network on a non-empty sequence")
            return "elman"
        cpu = e.device.type == "cpu" and not torch.is_autocast_enabled("cpu")  # bf16 autocast: the library's casts
        return "elman" if self.impl == "auto" and fits and cpu else "library"

    def _elman(self, e: torch.Tensor) -> torch.Tensor:
        """nn.RNN's forward for one tanh / relu layer, with its own parameters, by `_ElmanScan`."""
        e = e.transpose(0, 1)                             # (L, B, D)
        outs = []
        for d in range(self.dirs):
            sfx = "_reverse" if d else ""
            w_ih, w_hh = getattr(self.rnn, "weight_ih_l0" + sfx), getattr(self.rnn, "weight_hh_l0" + sfx)
            b = getattr(self.rnn, "bias_ih_l0" + sfx) + getattr(self.rnn, "bias_hh_l0" + sfx)
            a = torch.nn.functional.linear(e.flip(0) if d else e, w_ih, b)  # (L, B, H), reversed in time for d = 1
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
