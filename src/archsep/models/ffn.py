"""Feedforward network whose first layer is fully connected over the flattened sequence."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import check
from ..tasks.base import TaskSpec
from .base import ModelConfig, SeqModel, input_layer
from .registry import MODELS


class FFN(SeqModel):
    def __init__(self, cfg: FFNConfig, spec: TaskSpec):
        super().__init__()
        self.cfg = cfg
        self.embed = input_layer(spec, cfg.embed)
        self.L, self.out = spec.seq_len, spec.output_dim
        flat = spec.seq_len * (cfg.embed or spec.input_dim)  # the flattened input sequence
        hidden = cfg.hidden if cfg.hidden is not None else [spec.paper_ffn_width or flat, 1000]
        sizes = [flat, *hidden]
        layers: list[nn.Module] = []
        for a, b in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(sizes[-1], spec.seq_len * spec.output_dim))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.embed(x)
        if z.shape[1] < self.L:  # shorter sequences are zero-padded on the right
            z = nn.functional.pad(z, (0, 0, 0, self.L - z.shape[1]))
        return self.net(z.flatten(1)).view(x.shape[0], self.L, self.out)[:, : x.shape[1]]


@MODELS.register("ffn")
@dataclass(frozen=True)
class FFNConfig(ModelConfig):
    """hidden=None uses the paper's sizes [N*d*q, 1000] (for qSTR; [N*D, 1000] otherwise)."""

    hidden: list[int] | None = None
    embed: int | None = None

    def __post_init__(self) -> None:
        check(self.hidden is None or all(h >= 1 for h in self.hidden), "hidden",
              f"sizes must be >= 1, got {self.hidden}")

    def max_length(self, spec: TaskSpec) -> int | None:
        """Its first layer reads the flattened sequence of seq_len positions (shorter inputs
        are zero-padded): no more."""
        return spec.seq_len

    def short_name(self) -> str:
        return "FFN" + (f"-{'x'.join(map(str, self.hidden))}" if self.hidden else " [N·d·q, 1000]")

    def build(self, spec: TaskSpec) -> FFN:
        return FFN(self, spec)
