"""Models: one config dataclass per architecture, registered by name.

A new architecture is one file with a `@MODELS.register("name")` config whose `build(spec)`
returns a `SeqModel`, plus one import line below.
"""
from __future__ import annotations

from typing import Any

from .base import ModelConfig, SeqModel
from .registry import MODELS
from . import ffn, rnn, transformer_b  # noqa: F401  (registers)
from . import mamba, s4d, transformer  # noqa: F401  (paper A; registers)
from . import linear_attention, retnet  # noqa: F401  (paper A's index-lookup claim; registers)
from . import based, baseconv, deltanet, gla, mamba2, rwkv, swa  # noqa: F401  (the field's mixers; registers)
from . import h3, hyena  # noqa: F401  (the field's long convolutions and SSMs; registers)


def make_model_config(arch: str, **params: Any) -> ModelConfig:
    return MODELS.build(arch, **params)


__all__ = ["MODELS", "ModelConfig", "SeqModel", "make_model_config"]
