"""A preset is a named figure: the grid of runs it needs, how to summarise them, which of the
paper's claims to check, and how to draw it. Presets register by name."""
from __future__ import annotations

import abc
import json
from pathlib import Path
from typing import ClassVar

from ..config import RunConfig
from ..registry import Registry
from ..results import RunResult


class Preset(abc.ABC):
    registry_name: ClassVar[str]
    description: ClassVar[str] = ""
    runtime: ClassVar[dict[str, str]] = {}  # {"quick": "...", "full": "..."} on this machine kind

    @abc.abstractmethod
    def configs(self, quick: bool, device: str = "auto") -> list[RunConfig]: ...

    @abc.abstractmethod
    def summarize(self, results: list[RunResult], quick: bool) -> dict:
        """The summary.json content, with at least 'preset' and 'claims'."""

    @abc.abstractmethod
    def plot(self, results: list[RunResult], summary: dict, out: Path) -> list[Path]: ...

    def text(self, summary: dict) -> str:
        lines = [f"{summary['preset']}: {len(summary.get('claims', []))} claim(s) checked"]
        for c in summary.get("claims", []):
            lines.append(f"  [{'held' if c['held'] else 'did NOT hold'}] {c['text']}")
        return "\n".join(lines)


PRESETS: Registry[Preset] = Registry("preset")


def write_json(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, allow_nan=False))
    tmp.replace(path)  # atomic: a reader never sees half a file
