"""Figure presets, by name. A new preset is one file registering a `Preset` plus an import here."""
from .base import PRESETS, Preset
from . import qstr  # noqa: F401  (registers)
from . import paper_a  # noqa: F401  (registers)
from . import theory  # noqa: F401  (registers)

__all__ = ["PRESETS", "Preset"]
