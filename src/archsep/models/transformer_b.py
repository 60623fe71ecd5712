"""Paper B's single-layer Transformer: H-head attention (no residual, no LayerNorm), then a
per-position two-layer ReLU MLP. This is the form the authors trained."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from ..errors import check
from ..tasks.base import TaskSpec
from .base import ModelConfig, SeqModel, input_layer
from .registry import MODELS


class TransformerB(SeqModel):
    def __init__(self, cfg: TransformerBConfig, spec: TaskSpec):
        super().__init__()
        self.cfg = cfg
        heads, qk = cfg.heads, cfg.qk
        self.embed = input_layer(spec, cfg.embed)
        D = cfg.embed or spec.input_dim
        self.heads, self.qk = heads, qk
        self.dk = cfg.head_dim or D
        if qk == "separate":
            self.wq = nn.Parameter(torch.randn(heads, D, self.dk) / D**0.5)
            self.wk = nn.Parameter(torch.randn(heads, D, self.dk) / D**0.5)
        else:  # one W_QK per head: score_ij = z_i^T W_QK z_j
            self.wqk = nn.Parameter(torch.randn(heads, D, D) / D)
        self.wv = nn.Parameter(torch.randn(heads, D, D) / D**0.5)
        self.mlp = nn.Sequential(nn.Linear(heads * D, cfg.mlp_width), nn.ReLU(),
                                 nn.Linear(cfg.mlp_width, spec.output_dim))

    def qk_matrix(self) -> torch.Tensor:
        """W_Q W_K^T per head, (H, D, D): the matrix the theory constructs."""
        if self.qk == "separate":
            return self.wq @ self.wk.transpose(1, 2)
        return self.wqk

    def probe(self) -> dict:
        """What the engine records at each curve point with train.probe: W_Q W_K^T per head."""
        return {"qk": [[[round(v, 6) for v in row] for row in h] for h in self.qk_matrix().detach().cpu().tolist()]}

    def attention(self, z: torch.Tensor) -> torch.Tensor:
        """(B, H, L, L) attention weights."""
        if self.qk == "separate":
            scores = torch.einsum("bid,hde->bhie", z, self.wq) @ torch.einsum("bjd,hde->bhej", z, self.wk)
        else:
            scores = torch.einsum("bid,hde->bhie", z, self.wqk) @ z.unsqueeze(1).transpose(-1, -2)
        return torch.softmax(scores, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.embed(x)  # (B, L, D)
        a = self.attention(z)  # (B, H, L, L)
        v = torch.einsum("bjd,hde->bhje", z, self.wv)  # (B, H, L, D)
        heads = (a @ v).permute(0, 2, 1, 3).flatten(2)  # (B, L, H*D)
        return self.mlp(heads)


@MODELS.register("tf")
@dataclass(frozen=True)
class TransformerBConfig(ModelConfig):
    """Paper-B Transformer. qk='separate' (W_Q, W_K, as the authors ran it) or 'joint' (one W_QK)."""

    heads: int = 1
    mlp_width: int = 100
    qk: Literal["separate", "joint"] = "separate"
    head_dim: int | None = None  # query/key width per head; default: the input width
    embed: int | None = None  # project inputs to this width first (required for token tasks)

    def __post_init__(self) -> None:
        check(self.heads >= 1, "heads", f"must be >= 1, got {self.heads}")
        check(self.mlp_width >= 1, "mlp_width", f"must be >= 1, got {self.mlp_width}")

    def build(self, spec: TaskSpec) -> TransformerB:
        return TransformerB(self, spec)
