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

Public (exported by `archsep`, docs/extending.md "A mixer only"): `Mixer`, the contract of a token
mixer; `MixerStack`, the stack around a list of them; `MixerConfig`, a frozen config base with the
stack's fields (`layers`, `width`, `mlp_width`, `positions`) whose `build` stacks one
`mixer(layer)` per layer, so a plugin mixer gets the built-ins' embedding, norms, MLP, positions and
readout by defining `mixer` alone. The built-in mixers' configs are MixerConfigs too (a run id
hashes a config's fields by name, not by their order); `baseconv` and `hyena` share a
`LongConvConfig`, whose `build` passes the task's length to `mixer` (their default `kernel`,
None, is that length).
"""
from __future__ import annotations

import abc
import typing
from dataclasses import dataclass
from typing import Literal, Protocol

import torch
from torch import nn

from ...errors import check
from ...tasks.base import TaskSpec
from ..base import ModelConfig, SeqModel, input_layer
from ..ops import check_positions, position_rows, set_positions


def check_heads(cfg: typing.Any) -> None:
    """heads >= 1 and dividing the width: what a MixerConfig with heads checks after
    `MixerConfig.__post_init__` (layers, width, mlp_width, positions), before its own fields."""
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
    """What a block needs from its token mixer, a causal map of (B, L, W) to (B, L, W) in two forms
    that give the same numbers. A subclass implements:
    - `forward(h, last_only=False)`: the parallel form, (B, L, W) -> (B, L, W); with `last_only`,
      (B, 1, W), the last position's output alone (slicing the full output is enough);
    - `init_state(batch, device, dtype)`: the state before position 0, a dict of tensors with the
      batch first, in `dtype` (the check runs in float64);
    - `step(h, state, t)`: the step form, position t's (B, W) and the state after t positions ->
      (its (B, W) output, the state after t+1 positions);
    - `state_floats`: the floats per sequence that state holds (set in `__init__`)."""

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
        self.cfg = cfg  # every model keeps its config (a MixerConfig's stack too)
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


@dataclass(frozen=True)
class MixerConfig(ModelConfig):
    """The config of `layers` pre-LN blocks of width `width`, each a token mixer (`mixer(layer)`)
    and a GELU MLP of width `mlp_width` (default 4*width), with absolute positions (`positions`:
    learned | sinusoidal | none) added to the embedding, a final LayerNorm and a linear readout:
    the stack of the built-in mixers. A subclass is a frozen dataclass that adds its mixer's
    fields (with defaults) and defines `mixer`; a `__post_init__` of its own calls this one."""

    layers: int = 2
    width: int = 64
    mlp_width: int | None = None
    positions: Literal["learned", "sinusoidal", "none"] = "none"

    def __post_init__(self) -> None:
        check_widths(self)
        check_positions(self)

    @abc.abstractmethod
    def mixer(self, layer: int) -> Mixer:
        """Layer `layer`'s token mixer (from 0), of width `self.width`."""

    def build(self, spec: TaskSpec) -> MixerStack:
        return MixerStack(self, spec, [self.mixer(i) for i in range(self.layers)])

    def short_name(self) -> str:
        return f"{getattr(self, 'registry_name', type(self).__name__)}-({self.layers},{self.width})"
