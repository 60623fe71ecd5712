from __future__ import annotations

from ..registry import Registry
from .base import Task

TASKS: Registry[Task] = Registry("task", Task, plugins=True)
