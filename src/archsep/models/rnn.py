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
from .registry import MODELS

_CELLS = {"gru": nn.GRU, "lstm": nn.LSTM, "relu": nn.RNN, "tanh": nn.RNN}


class RNN(SeqModel):
    stackable = False  # fused kernels win over a vmapped loop (see SeqModel.stackable)
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.embed(x))
        return self.readout(h)

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

    def __post_init__(self) -> None:
        check(self.hidden >= 1, "hidden", f"must be >= 1, got {self.hidden}")
        check(self.layers >= 1, "layers", f"must be >= 1, got {self.layers}")
        check(self.embed is None or self.embed >= 1, "embed", f"must be >= 1, got {self.embed}")

    def short_name(self) -> str:
        return f"LSTM-{self.hidden}"

    def build(self, spec: TaskSpec) -> RNN:
        return RNN(self, spec)
