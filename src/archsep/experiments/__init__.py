"""Figure presets, by name. A new preset is one file registering a `Preset` plus an import here."""
from .base import PRESETS, Preset
from .paper_b import fig1  # noqa: F401  (registers)
from .paper_a import figures  # noqa: F401  (registers)
from .paper_b import theory  # noqa: F401  (registers)

__all__ = ["PRESETS", "Preset"]
