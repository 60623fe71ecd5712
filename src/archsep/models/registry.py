from __future__ import annotations

from ..registry import Registry
from .base import ModelConfig

MODELS: Registry[ModelConfig] = Registry("arch", ModelConfig, plugins=True)
