"""The pre-LN block stack shared by the recurrent-attention models (`retnet`, `linear-tf`, `gla`,
`mamba2`, `deltanet`, `swa`, `baseconv`, `rwkv`, `based`): an embedding (plus optional absolute
positions), `layers` blocks of `h + mixer(LN(h))`, `h + mlp(LN(h))` as in `tf-preln`, a final
LayerNorm and a linear readout at every position.

The token mixer is causal and has two forms that compute the same outputs:
- the parallel (training) form, `mixer(h)` on a whole (B, L, W) sequence;
- the recurrent form, `mixer.step(h_t, state, t)` on one position from a fixed-size state.

`MixerStack.step` runs the whole model one position at a time (`SeqModel.recurrent` loops it
over a sequence); its state is a list of per-layer dicts of tensors, whose floats per sequence are
`state_size` (the position index t is an integer, passed in, not carried as floats).
`prune_to_readout` (as for `tf-preln`): for a task read at the last position, the last block
computes the last query alone.
"""
from __future__ import annotations

import typing
from typing import Protocol

import torch
from torch import nn

from ...errors import check
from ...tasks.base import TaskSpec
from ..base import SeqModel, input_layer
from ..ops import check_positions, position_rows, set_positions  # noqa: F401  (check_positions: the mixers')


def check_stack(cfg: typing.Any) -> None:
    """The checks every mixer stack's config shares: layers, width and heads >= 1, heads dividing
    the width, mlp_width >= 1 when set. A config runs its own after it, then `check_positions`."""
    check_widths(cfg)
    check(cfg.heads >= 1, "heads", f"must be >= 1, got {cfg.heads}")
    check(cfg.width % cfg.heads == 0, "heads", f"must divide width {cfg.width}, got {cfg.heads}")


def check_widths(cfg: typing.Any) -> None:
    """layers and width >= 1, mlp_width >= 1 when set: the checks of a stack without heads."""
    check(cfg.layers >= 1, "layers", f"must be >= 1, got {cfg.layers}")
    check(cfg.width >= 1, "width", f"must be >= 1, got {cfg.width}")
    check(cfg.mlp_width is None or cfg.mlp_width >= 1, "mlp_width", f"must be >= 1, got {cfg.mlp_width}")


class StackConfig(Protocol):
    """The fields of a model's config that the stack reads (frozen: read-only)."""

    @property
    def layers(self) -> int: ...
    @property
    def width(self) -> int: ...
    @property
    def mlp_width(self) -> int | None: ...
    @property
    def positions(self) -> str: ...


class Mixer(nn.Module):
    """What a block needs from its token mixer (subclasses implement these and
    `forward(h, last_only=False)`: (B, L, W) -> (B, L, W), or (B, 1, W), the last position's
    output alone, when last_only)."""

    state_floats: int  # floats per sequence carried from one position to the next

    def init_state(self, batch: int, device=None, dtype=None) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        raise NotImplementedError


class Block(nn.Module):
    def __init__(self, mixer: Mixer, width: int, mlp_width: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.mixer = mixer
        self.mlp = nn.Sequential(nn.Linear(width, mlp_width), nn.GELU(), nn.Linear(mlp_width, width))

    def forward(self, h: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        a = self.ln1(h)
        h = h[:, -1:] + self.mixer(a, last_only=True) if last_only else h + self.mixer(a)
        return h + self.mlp(self.ln2(h))

    def step(self, h: torch.Tensor, state: dict[str, torch.Tensor], t: int
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        out, state = self.mixer.step(self.ln1(h), state, t)
        h = h + out
        return h + self.mlp(self.ln2(h)), state


class MixerStack(SeqModel):
    def __init__(self, cfg: StackConfig, spec: TaskSpec, mixers: list[Mixer]):
        super().__init__()
        width = cfg.width
        self.max_len, self.width, self.layers = spec.seq_len, width, cfg.layers
        self.embed = input_layer(spec, width)
        set_positions(self, cfg.positions, spec.seq_len, width)
        self.blocks = nn.ModuleList(Block(m, width, cfg.mlp_width or 4 * width) for m in mixers)
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, spec.output_dim)
        self.readout_last = spec.readout == "last"
        self.readout_only = False  # set by `prune_to_readout`

    def prune_to_readout(self) -> None:
        """For a task read at the last position, the last block computes that position alone
        (its query against every key; the MLP on one position): the output is (B, 1, C), the same
        numbers as the last position of the full output, to rounding."""
        self.readout_only = self.readout_last

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)  # (B, L, W)
        pos = position_rows(self, h.shape[1], self.width)
        if pos is not None:
            h = h + pos  # (B, L, W)
        for i, block in enumerate(self.blocks):
            h = block(h, last_only=self.readout_only and i == len(self.blocks) - 1)  # (B, 1, W) if pruned
        return self.head(self.ln_f(h))  # (B, L, C)

    def init_state(self, batch: int, device=None, dtype=None) -> list[dict[str, torch.Tensor]]:
        return [b.mixer.init_state(batch, device, dtype) for b in self.blocks]  # type: ignore[union-attr,operator]

    def step(self, x_t: torch.Tensor, state: list[dict[str, torch.Tensor]], t: int
             ) -> tuple[torch.Tensor, list[dict[str, torch.Tensor]]]:
        """Position t: input (B,) tokens or (B, D) vectors and the state after t positions ->
        (B, output_dim) and the state after t+1 positions."""
        h = self.embed(x_t)  # (B, W)
        pos = position_rows(self, t + 1, self.width)
        if pos is not None:
            h = h + pos[t]
        new = []
        for block, s in zip(self.blocks, state):
            h, s = block.step(h, s, t)  # type: ignore[operator]
            new.append(s)
        return self.head(self.ln_f(h)), new

    def state_size(self, seq_len: int) -> int:
        """Floats per sequence carried between positions: every layer's mixer state."""
        return sum(b.mixer.state_floats for b in self.blocks)  # type: ignore[union-attr,misc]
