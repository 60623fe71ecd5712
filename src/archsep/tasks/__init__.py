"""Tasks: data generators with their own loss, metric and trivial baseline.

A new task is one file with a `@TASKS.register("name")` frozen dataclass subclassing `Task`,
plus one import line below.
"""
from __future__ import annotations

from typing import Any

from ..registry import from_params
from .base import Batch, Task, TaskSpec
from .registry import TASKS
from . import qstr  # noqa: F401  (registers)
from . import dyck, equality, index_lookup, nearest_neighbour  # noqa: F401  (paper A, registers)
# formal languages (Deletang et al. 2023, the Chomsky-hierarchy benchmark; registers)
from . import duplicate_string, even_pairs, modular_arithmetic, parity  # noqa: F401
from . import reverse_string, stack_manipulation  # noqa: F401
from . import mqar  # noqa: F401  (Zoology's MQAR on tokens, registers)
from . import compression, fuzzy_recall, in_context_recall, memorization  # noqa: F401  (mad-lab, registers)
from . import noisy_recall, selective_copying  # noqa: F401  (mad-lab, registers)


def make_task(name: str, **params: Any) -> Task:
    """Build a registered task by name; unknown names and keys are one-line errors."""
    return TASKS.build(name, **params)


__all__ = ["Batch", "Task", "TaskSpec", "TASKS", "make_task", "from_params"]
