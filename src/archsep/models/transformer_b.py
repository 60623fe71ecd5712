"""Paper B's single-layer Transformer: H-head attention (no residual, no LayerNorm), then a
per-position two-layer ReLU MLP, in one of two forms:

- form="authors": what the authors' code trained (`SimpleTransformer`): torch's
  `nn.MultiheadAttention` over the input width D = d + (q+1) d_e, i.e. scaled dot-product
  attention (1/sqrt(D/H)) with input-projection biases and an output projection, PyTorch's
  default (Xavier) initialisation, then Linear(D, 100) -> ReLU -> Linear(100, 1).
- form="theory" (the default, kept for the theory and its stored runs): the form of Lemma 11
  and Figure 2: unscaled scores z_i^T W_Q W_K^T z_j (separate W_Q, W_K, or one W_QK per head),
  no biases and no output projection.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from ..errors import check
from ..tasks.base import TaskSpec
from .attention import attend
from .base import ModelConfig, SeqModel, input_layer
from .ops import under_vmap
from .registry import MODELS


class TransformerB(SeqModel):
    def __init__(self, cfg: TransformerBConfig, spec: TaskSpec):
        super().__init__()
        self.cfg = cfg
        heads, qk = cfg.heads, cfg.qk
        self.embed = input_layer(spec, cfg.embed)
        D = cfg.embed or spec.input_dim
        self.heads, self.qk, self.form = heads, qk, cfg.form
        self.dk = cfg.head_dim or D
        self.attention_impl = "fused"  # or "explicit": same math (see models.attention)
        if cfg.form == "authors":
            check(D % heads == 0, "heads", f"must divide the input width {D} in form 'authors', got {heads}")
            self.in_proj = nn.Linear(D, 3 * D)  # W_Q, W_K, W_V stacked, as nn.MultiheadAttention holds them
            self.out_proj = nn.Linear(D, D)
            nn.init.xavier_uniform_(self.in_proj.weight)
            nn.init.zeros_(self.in_proj.bias)
            nn.init.zeros_(self.out_proj.bias)
            self.mlp = nn.Sequential(nn.Linear(D, cfg.mlp_width), nn.ReLU(), nn.Linear(cfg.mlp_width, spec.output_dim))
            return
        if qk == "separate":
            self.wq = nn.Parameter(torch.randn(heads, D, self.dk) / D**0.5)
            self.wk = nn.Parameter(torch.randn(heads, D, self.dk) / D**0.5)
        else:  # one W_QK per head: score_ij = z_i^T W_QK z_j
            self.wqk = nn.Parameter(torch.randn(heads, D, D) / D)
        self.wv = nn.Parameter(torch.randn(heads, D, D) / D**0.5)
        self.mlp = nn.Sequential(nn.Linear(heads * D, cfg.mlp_width), nn.ReLU(),
                                 nn.Linear(cfg.mlp_width, spec.output_dim))

    def qk_matrix(self) -> torch.Tensor:
        """W_Q W_K^T per head, (H, D, D): the matrix the theory constructs (form 'authors':
        the bilinear form of the scaled scores, W_Q,h^T W_K,h / sqrt(D/H))."""
        if self.form == "authors":
            D = self.in_proj.in_features
            dh = D // self.heads
            wq, wk = self.in_proj.weight[:D].view(self.heads, dh, D), self.in_proj.weight[D:2 * D].view(self.heads, dh,
                                                                                                        D)
            return wq.transpose(1, 2) @ wk / dh**0.5
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
        fused = self.attention_impl == "fused" and not under_vmap(z)  # explicit under vmap: see models.attention
        if self.form == "authors":
            B, L, D = z.shape
            # (B, H, L, D/H)
            q, k, v = self.in_proj(z).view(B, L, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
            if fused:  # SDPA's default scale is 1/sqrt(D/H), as here
                o = attend(q, k, v, causal=False)
            else:
                a = torch.softmax(q @ k.transpose(-1, -2) / (D // self.heads) ** 0.5, dim=-1)  # (B, H, L, L)
                o = a @ v
            return self.mlp(self.out_proj(o.transpose(1, 2).flatten(2)))
        v = torch.einsum("bjd,hde->bhje", z, self.wv)  # (B, H, L, D)
        if fused:  # unscaled scores: scale 1
            if self.qk == "separate":
                q, k = torch.einsum("bid,hde->bhie", z, self.wq), torch.einsum("bjd,hde->bhje", z, self.wk)
            else:  # score_ij = (z_i W_QK) . z_j: every head's keys are the inputs themselves
                q, k = torch.einsum("bid,hde->bhie", z, self.wqk), z.unsqueeze(1).expand(-1, self.heads, -1, -1)
            o = attend(q, k, v, causal=False, scale=1.0)
        else:
            o = self.attention(z) @ v  # (B, H, L, D)
        return self.mlp(o.permute(0, 2, 1, 3).flatten(2))  # (B, L, H*D) into the MLP


@MODELS.register("tf-b", aliases=("tf",))  # paper B's attention layer; "tf" until renamed
@dataclass(frozen=True)
class TransformerBConfig(ModelConfig):
    """Paper-B Transformer. form='authors' (the authors' code: scaled, biases, output projection)
    or 'theory' (Lemma 11's form; there qk='separate' W_Q, W_K or 'joint' one W_QK per head,
    and head_dim sets the query/key width; both are unused in form 'authors')."""

    heads: int = 1
    mlp_width: int = 100
    qk: Literal["separate", "joint"] = "separate"
    head_dim: int | None = None  # query/key width per head; default: the input width
    embed: int | None = None  # project inputs to this width first (required for token tasks)
    form: Literal["theory", "authors"] = "theory"

    def params(self) -> dict:
        d = super().params()
        if d["form"] == "theory":  # the form every run stored before `form` existed: same identity
            del d["form"]
        return d

    def __post_init__(self) -> None:
        check(self.heads >= 1, "heads", f"must be >= 1, got {self.heads}")
        check(self.mlp_width >= 1, "mlp_width", f"must be >= 1, got {self.mlp_width}")
        check(self.form in ("theory", "authors"), "form", f"must be 'theory' or 'authors', got {self.form!r}")

    def short_name(self) -> str:
        return f"TF-{self.heads}h" + (" [authors' form]" if self.form == "authors" else "")

    def build(self, spec: TaskSpec) -> TransformerB:
        return TransformerB(self, spec)
