"""Standard pre-LN Transformer (paper A's TF-(L, w)): token/vector embedding plus absolute
positions, L blocks of `h + attn(LN(h))`, `h + mlp(LN(h))`, a final LayerNorm and a linear
readout at every position (the task picks the query position). Causal or bidirectional.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from ..errors import ArchsepError, check
from ..tasks.base import TaskSpec
from .attention import alibi_bias, attend, rotate
from .attention import weights as attention_weights
from .base import ModelConfig, SeqModel, input_layer
from .ops import sinusoidal_positions
from .registry import MODELS

_POSITIONS = ("learned", "sinusoidal", "none", "rope", "alibi")
_POOLS = ("none", "mean")
_MLPS = ("gelu", "swiglu")
_LATER = {"mlp": "gelu"}  # fields added after runs were stored: in a run's identity only when set


class SelfAttention(nn.Module):
    """Multi-head softmax attention; `positions` "rope" rotates q and k by their positions,
    "alibi" adds ALiBi's linear distance bias to the scores (other values: nothing here)."""

    def __init__(self, width: int, heads: int, causal: bool, positions: str = "learned"):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.rope, self.alibi = positions == "rope", positions == "alibi"
        self.attention_impl = "fused"  # or "explicit": same math (see models.attention)
        self.last_form = "factored"  # or "projected": same math (see `_last`); an implementation switch
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def _qkv(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        B, L, W = h.shape
        q, k, v = self.qkv(h).view(B, L, 3, self.heads, W // self.heads).permute(2, 0, 3, 1, 4)
        return q, k, v  # each (B, H, L, W/H)

    def _positioned(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """q (B, H, Lq, d) for the last Lq of the L positions of k (B, H, L, d): rotated (RoPE),
        and the scores' bias (ALiBi, (H, Lq, L)) or None."""
        L, Lq = k.shape[2], q.shape[2]
        pos = torch.arange(L, device=k.device)
        if self.rope:
            q, k = rotate(q, pos[L - Lq:]), rotate(k, pos)
        return q, k, alibi_bias(self.heads, pos[L - Lq:], pos).to(q.dtype) if self.alibi else None

    def weights(self, h: torch.Tensor) -> torch.Tensor:
        """(B, H, L, L) softmax attention weights (always the explicit form: it has them)."""
        q, k, _ = self._qkv(h)
        q, k, bias = self._positioned(q, k)
        return attention_weights(q, k, causal=self.causal, bias=bias)

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        # fused SDPA by default; the explicit form under vmap (stacked training), see `attend`
        if last_only:
            return self._last(h)
        q, k, v = self._qkv(h)  # (B, H, L, d) each
        q, k, bias = self._positioned(q, k)
        y = attend(q, k, v, causal=self.causal, impl=self.attention_impl, bias=bias)  # (B, H, L, d)
        return self.proj(y.transpose(1, 2).flatten(2))  # (B, L, W)

    def _last(self, h: torch.Tensor) -> torch.Tensor:
        """The output at the last position only: its query against every key (B, 1, W).

        "factored" (without RoPE) never projects the L keys and values: per head, the score of
        position j is q . (W_k x_j + b_k) = (W_k^T q) . x_j + q . b_k, and the output
        sum_j a_j (W_v x_j + b_v) = W_v (sum_j a_j x_j) + b_v (the weights sum to one), so the
        (B, L, W) x (W, 2W) projection becomes two (B, H, L) x W products: for TF-(1,256) with
        4 heads at N = 100, 64 times fewer multiply-adds in that part (benchmarks/last_query.py).
        "projected" is the same math with the keys and values made; RoPE rotates each key by its
        position, so it is always projected. The two agree to float32 rounding
        (tests/models/test_last_query.py)."""
        B, L, W = h.shape
        H, dh = self.heads, W // self.heads
        wq, wk, wv = self.qkv.weight.split(W)  # (W, W) each: rows head-major, as `_qkv` splits them
        bq, bk, bv = self.qkv.bias.split(W)
        if self.last_form == "projected" or self.rope:
            q = nn.functional.linear(h[:, -1:], wq, bq).view(B, 1, H, dh).transpose(1, 2)  # (B, H, 1, dh)
            k, v = nn.functional.linear(h, self.qkv.weight[W:], self.qkv.bias[W:]).view(
                B, L, 2, H, dh).permute(2, 0, 3, 1, 4)  # (B, H, L, dh) each
            q, k, bias = self._positioned(q, k)
            # the last position sees every key: no mask (a causal flag would align the one query
            # with the first key and hide the rest)
            y = attend(q, k, v, causal=False, impl=self.attention_impl, bias=bias)  # (B, H, 1, dh)
            return self.proj(y.transpose(1, 2).flatten(2))
        q = nn.functional.linear(h[:, -1], wq, bq).view(B, H, dh).transpose(0, 1)  # (H, B, dh)
        u = (q @ wk.view(H, dh, W)).transpose(0, 1)  # (B, H, W): W_k^T q per head
        s = u @ h.transpose(1, 2) + (q @ bk.view(H, dh, 1)).transpose(0, 1)  # (B, H, L)
        s = s / math.sqrt(dh)
        if self.alibi:
            pos = torch.arange(L, device=h.device)
            s = s + alibi_bias(H, pos[L - 1:], pos)[:, 0].to(s.dtype)  # (H, L)
        z = (s.softmax(-1) @ h).transpose(0, 1)  # (H, B, W): per head, the weighted mean of the inputs
        y = (z @ wv.view(H, dh, W).transpose(1, 2)).transpose(0, 1) + bv.view(H, dh)  # (B, H, dh)
        return self.proj(y.reshape(B, 1, W))  # (B, 1, W)


LAST_FORMS = ("factored", "projected")


def use_last_query(model: nn.Module, form: str) -> nn.Module:
    """Set how every attention layer in `model` computes a pruned last query ("factored" or
    "projected", `SelfAttention._last`; the outputs are the same to rounding). Returns the model."""
    check(form in LAST_FORMS, "last_form", f"must be one of {', '.join(LAST_FORMS)}, got {form!r}")
    for m in model.modules():
        if isinstance(m, SelfAttention):
            m.last_form = form
    return model


class SwiGLU(nn.Module):
    """The gated MLP of LLaMA-style blocks: W2 (SiLU(x W1) * x W3)."""

    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.w1, self.w3 = nn.Linear(width, hidden), nn.Linear(width, hidden)
        self.w2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, width: int, heads: int, mlp_width: int, causal: bool, positions: str = "learned",
                 mlp: str = "gelu"):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = SelfAttention(width, heads, causal, positions)
        self.mlp = (SwiGLU(width, mlp_width) if mlp == "swiglu"
                    else nn.Sequential(nn.Linear(width, mlp_width), nn.GELU(), nn.Linear(mlp_width, width)))

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        a = self.ln1(h)
        h = h[:, -1:] + self.attn(a, last_only=True) if last_only else h + self.attn(a)
        return h + self.mlp(self.ln2(h))


class PreLNTransformer(SeqModel):
    def __init__(self, cfg: PreLNTransformerConfig, spec: TaskSpec):
        super().__init__()
        self.cfg = cfg
        width, L = cfg.width, spec.seq_len
        mlp_width = cfg.mlp_width or 4 * width
        self.max_len, self.width, self.layers = L, width, cfg.layers
        self.causal, self.pool, self.positions = cfg.causal, cfg.pool, cfg.positions
        self.embed = input_layer(spec, width)
        if cfg.positions == "learned":
            self.pos = nn.Parameter(torch.randn(L, width) * 0.02)
        elif cfg.positions == "sinusoidal":
            self.register_buffer("pos", sinusoidal_positions(L, width), persistent=False)
        else:
            self.pos = None  # type: ignore[assignment]  # none added to the embedding (none, rope, alibi)
        self.blocks = nn.ModuleList(Block(width, cfg.heads, mlp_width, cfg.causal, cfg.positions, cfg.mlp)
                                    for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, spec.output_dim)
        self.readout_last = spec.readout == "last" and cfg.pool == "none"
        self.readout_only = False  # set by `prune_to_readout`

    def prune_to_readout(self) -> None:
        """Compute only what the task reads: for a task read at the last position, the last
        block needs that position's query alone (the keys and values of every position still),
        and the output is (B, 1, C). Exact: the same numbers as the last position of the full
        output, to rounding."""
        self.readout_only = self.readout_last

    def is_causal(self) -> bool:
        return self.causal  # a causal mask (and a running mean for pool 'mean'); no step form (KV cache)

    def _embed(self, x: torch.Tensor) -> torch.Tensor:
        """Embeddings plus absolute positions. Learned positions end at the task's seq_len;
        sinusoidal codes are a fixed function of the position, computed beyond it when needed
        (length generalisation); rope, alibi and none have no absolute positions to run out of."""
        L = x.shape[1]
        if L > self.max_len and self.positions == "learned":
            raise ArchsepError(f"seq_len: input length {L} exceeds the model's maximum {self.max_len}")
        h = self.embed(x)
        if self.pos is None:
            return h
        return h + (self.pos[:L] if L <= self.max_len else sinusoidal_positions(L, self.width).to(self.pos))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self._embed(x)  # (B, L, W)
        for i, block in enumerate(self.blocks):
            h = block(h, last_only=self.readout_only and i == len(self.blocks) - 1)  # (B, 1, W) if pruned
        h = self.ln_f(h)
        if self.pool == "mean":  # mean over the positions each output may see
            if self.causal:
                h = h.cumsum(1) / torch.arange(1, h.shape[1] + 1, device=h.device)[:, None]
            else:
                h = h.mean(1, keepdim=True).expand_as(h)
        return self.head(h)

    @torch.no_grad()
    def attention_maps(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Per layer, the (B, H, L, L) attention weights on input x (for diagnostics)."""
        maps, h = [], self._embed(x)
        for block in self.blocks:
            maps.append(block.attn.weights(block.ln1(h)))  # type: ignore[operator,union-attr]
            h = block(h)
        return maps

    def cache_size(self, seq_len: int) -> int:
        """Floats of the KV cache after seq_len positions: keys and values of width w per layer."""
        return self.layers * 2 * self.width * seq_len


@MODELS.register("tf-preln")
@dataclass(frozen=True)
class PreLNTransformerConfig(ModelConfig):
    """Pre-LN Transformer with `layers` blocks of width `width`, `heads` heads and an MLP of width
    `mlp_width` (default 4*width): GELU, or `mlp = "swiglu"` (W2 (SiLU(x W1) * x W3)). positions:
    learned (sized to the task's seq_len) or sinusoidal, added to the embedding; rope (rotary q and
    k) or alibi (ALiBi's per-head linear distance bias on the scores), inside attention; or none.
    Causal or bidirectional attention; pool='mean' reads out the mean of the final states (over
    the visible prefix when causal) instead of each position's own."""

    layers: int = 2
    width: int = 64
    heads: int = 4
    mlp_width: int | None = None
    positions: Literal["learned", "sinusoidal", "none", "rope", "alibi"] = "learned"
    causal: bool = True
    pool: Literal["none", "mean"] = "none"
    mlp: Literal["gelu", "swiglu"] = "gelu"

    def params(self) -> dict:
        """The fields, less those added later at their defaults: stored run ids stay the same."""
        return {k: v for k, v in super().params().items() if _LATER.get(k, object()) != v}

    def __post_init__(self) -> None:
        check(self.layers >= 1, "layers", f"must be >= 1, got {self.layers}")
        check(self.width >= 1, "width", f"must be >= 1, got {self.width}")
        check(self.heads >= 1, "heads", f"must be >= 1, got {self.heads}")
        check(self.width % self.heads == 0, "heads", f"must divide width {self.width}, got {self.heads}")
        check(self.mlp_width is None or self.mlp_width >= 1, "mlp_width", f"must be >= 1, got {self.mlp_width}")
        check(self.positions in _POSITIONS, "positions",
              f"must be one of {', '.join(_POSITIONS)}, got {self.positions!r}")
        check(self.pool in _POOLS, "pool", f"must be one of {', '.join(_POOLS)}, got {self.pool!r}")
        check(self.mlp in _MLPS, "mlp", f"must be one of {', '.join(_MLPS)}, got {self.mlp!r}")
        check(self.positions != "rope" or (self.width // self.heads) % 2 == 0, "positions",
              f"rope needs an even head width (width / heads), got {self.width // self.heads}")

    def short_name(self) -> str:
        return f"TF-({self.layers},{self.width})"  # paper A's name: (layers, width)

    def build(self, spec: TaskSpec) -> PreLNTransformer:
        return PreLNTransformer(self, spec)
