"""Figures as experiments, by name (the CLI calls them presets). A new figure is one file
registering an `Experiment` subclass, plus an import line here."""
from .base import EXPERIMENTS, PRESETS, Experiment
from .paper_b import fig1, fig2, fig3, heads  # noqa: F401  (registers)
from .paper_a import dyck, equality, lookup, mamba_width, nearest  # noqa: F401  (registers)
from . import atlas  # noqa: F401  (registers: every mixer on every separation task)

__all__ = ["EXPERIMENTS", "PRESETS", "Experiment"]
