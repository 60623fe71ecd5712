"""The shared model interface: every model maps a batch (B, L, D) float or (B, L) long to
per-position outputs (B, L, output_dim), so every task runs on every model.

A model is declared by a frozen config dataclass (typed, rejects unknown keys) whose `build`
makes the `nn.Module` for a task's `TaskSpec`.

A model that can also run one position at a time (a recurrent model: an SSM, a linear-attention
or other stack mixer) says so by implementing the recurrent contract of `SeqModel`:
`init_state(batch)`, `step(x_t, state, t)`, and gets `recurrent(x)`, the step form run over a
whole sequence, which must equal `forward(x)` (`archsep.testing.check_model` checks it, with
gradients, and that the model is causal).
"""
from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar

import torch

from torch import nn

from ..tasks.base import TaskSpec


class ModelConfig(abc.ABC):
    registry_name: ClassVar[str]

    @abc.abstractmethod
    def build(self, spec: TaskSpec) -> "SeqModel": ...

    # fields added after runs were stored, with the value that reproduces those runs: left out of
    # `params()` (a run's identity) at that value, so the stored runs keep their ids
    added: ClassVar[dict[str, Any]] = {}

    def params(self) -> dict:
        d = dataclasses.asdict(self)  # type: ignore[call-overload]
        return {k: v for k, v in d.items() if not (k in self.added and v == self.added[k])}

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

    # --- the recurrent contract: implemented by models with a step form ---------------------------
    def has_step(self) -> bool:
        """Whether the model has a step form: its class implements `step` (and `init_state`)."""
        return type(self).step is not SeqModel.step

    def is_causal(self) -> bool:
        """Whether output t depends on inputs 0..t alone. A model with a step form is causal (its
        output at t is computed from the state after t positions); a causal model without one may
        say so by overriding this, and `check_model` then checks it too."""
        return self.has_step()

    def init_state(self, batch: int, device: torch.device | str | None = None,
                   dtype: torch.dtype | None = None) -> Any:
        """The state before position 0 for `batch` sequences: any structure of tensors (e.g. a
        list of per-layer dicts), each with the batch first. `dtype` is the parameters' float
        dtype (None: the default), so that float64 checks run in float64 throughout."""
        raise NotImplementedError(f"{type(self).__name__} has no step form")

    def step(self, x_t: torch.Tensor, state: Any, t: int) -> tuple[torch.Tensor, Any]:
        """Position t: input x_t, (B,) token ids or (B, D) vectors, and the state after t positions
        -> (the output at t, (B, output_dim); the state after t+1 positions). t is passed in (for
        positions and rotations), never carried as floats in the state."""
        raise NotImplementedError(f"{type(self).__name__} has no step form")

    def recurrent(self, x: torch.Tensor) -> torch.Tensor:
        """The step form over a whole sequence: x (B, L) or (B, L, D) -> (B, L, output_dim), the same
        numbers as the unpruned `forward(x)` to rounding."""
        p = next((p for p in self.parameters() if p.is_floating_point()), None)
        dtype = p.dtype if p is not None else torch.get_default_dtype()
        state = self.init_state(x.shape[0], x.device, dtype)
        outs = []
        for t in range(x.shape[1]):
            y, state = self.step(x[:, t], state, t)  # (B, C)
            outs.append(y)
        return torch.stack(outs, 1)  # (B, L, C)


def input_layer(spec: TaskSpec, width: int | None) -> nn.Module:
    """Token ids -> embeddings; vectors -> a linear map to `width`, or unchanged when None."""
    if spec.input == "tokens":
        if width is None:
            from ..errors import ArchsepError

            raise ArchsepError("model_params.embed: a token task needs a model width (e.g. embed = 64)")
        return nn.Embedding(spec.input_dim, width)
    return nn.Identity() if width is None else nn.Linear(spec.input_dim, width)
