"""Models: one config dataclass per architecture, registered by name.

A new architecture is one file with a `@MODELS.register("name")` config whose `build(spec)`
returns a `SeqModel`, plus one import line below. The layout:
- here: the full-size models (`transformer`, `transformer_b`, `rnn`, `ffn`, `mamba`, `s4d`), the
  contract (`base`), the registry, shared pieces (`ops`: positions, convolutions, norms, the gated
  output; `attention`: softmax attention and rotary/ALiBi positions), `recurrence` (vmappable RNN
  cells) and `matching` (width matching);
- `mixers/`: the token mixers of the pre-LN block stack (`mixers/stack.py`), one file each;
- `kernels/`: Mamba's selective scans, in PyTorch and in C (compiled on first use).
"""
from __future__ import annotations

from typing import Any

from .base import ModelConfig, SeqModel
from .registry import MODELS
from . import ffn, rnn, transformer_b  # noqa: F401  (registers)
from . import mamba, s4d, transformer  # noqa: F401  (paper A; registers)
from .mixers import linear_attention, retnet  # noqa: F401  (paper A's index-lookup claim; registers)
from .mixers import based, baseconv, deltanet, gla, mamba2, rwkv, swa  # noqa: F401  (the field's mixers; registers)
from .mixers import h3, hyena  # noqa: F401  (the field's long convolutions and SSMs; registers)


def make_model_config(arch: str, **params: Any) -> ModelConfig:
    return MODELS.build(arch, **params)


__all__ = ["MODELS", "ModelConfig", "SeqModel", "make_model_config"]
