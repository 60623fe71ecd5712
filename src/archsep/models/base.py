"""The shared model interface: every model maps a batch (B, L, D) float or (B, L) long to
per-position outputs (B, L, output_dim), so every task runs on every model.

A model is declared by a frozen config dataclass (typed, rejects unknown keys) whose `build`
makes the `nn.Module` for a task's `TaskSpec`.
"""
from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar

from torch import nn

from ..tasks.base import TaskSpec


class ModelConfig(abc.ABC):
    registry_name: ClassVar[str]

    @abc.abstractmethod
    def build(self, spec: TaskSpec) -> "SeqModel": ...

    def params(self) -> dict:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    def max_length(self, spec: TaskSpec) -> int | None:
        """The most positions a model built for `spec` reads (None: any number). By default
        `spec.seq_len` for a model with learned absolute positions (a config whose `positions`
        is "learned": its table ends there), else unbounded; a model with another bound says
        so by overriding this. `RunConfig` checks `train.eval_lengths` against it."""
        return spec.seq_len if getattr(self, "positions", None) == "learned" else None

    def short_name(self) -> str:
        """What a legend calls the model, e.g. "GRU-500", "TF-(1,64)"; by default its registered
        name with its width, if it has one."""
        width = next((getattr(self, f) for f in ("width", "hidden") if isinstance(getattr(self, f, None), int)), None)
        return f"{self.registry_name}-{width}" if width else self.registry_name


class SeqModel(nn.Module):
    # whether K copies trained as one vmapped computation beat K separate ones on a CPU: not for
    # models whose library kernels (fused LSTM/GRU, the fused selective scan) vmap can only
    # replace by a Python loop of small ops (measured: an LSTM-64 lr grid 5x slower stacked)
    stackable: bool = True
    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def prune_to_readout(self) -> None:
        """Let the model compute only the positions its task reads (the engine calls this; a
        pruned model may return fewer positions, e.g. (B, 1, C) for readout 'last'). A model
        that cannot prune ignores it."""

    def state_size(self, seq_len: int) -> int | None:
        """Floats a recurrent model carries from one position to the next (None: not recurrent).
        For an attention model this is a KV cache that grows with the length, reported by
        `cache_size` instead."""
        return None


def input_layer(spec: TaskSpec, width: int | None) -> nn.Module:
    """Token ids -> embeddings; vectors -> a linear map to `width`, or unchanged when None."""
    if spec.input == "tokens":
        if width is None:
            from ..errors import ArchsepError

            raise ArchsepError("model_params.embed: a token task needs a model width (e.g. embed = 64)")
        return nn.Embedding(spec.input_dim, width)
    return nn.Identity() if width is None else nn.Linear(spec.input_dim, width)
