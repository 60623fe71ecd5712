"""The experiment contract every figure implements.

An `Experiment` is a named figure with named scales (`quick` for a laptop CPU, `full` for the
paper's settings, sometimes more). It says which runs it needs (`plan`), what they show
(`analyze`, which checks the paper's claims), how to draw it (`figures`) and how to say it
(`text`). Runs go through the one engine into the store like any sweep's, so `archsep
reproduce P` is: plan -> executor -> store -> analyze -> figures -> text.
"""
from __future__ import annotations

import abc
import json
from pathlib import Path
from typing import ClassVar

from ..config import RunConfig
from ..errors import unknown
from ..registry import Registry
from ..results import Claim, RunResult, Summary


class Experiment(abc.ABC):
    registry_name: ClassVar[str]
    description: ClassVar[str] = ""
    scales: ClassVar[tuple[str, ...]] = ("quick", "full")
    runtime: ClassVar[dict[str, str]] = {}  # scale -> measured wall time on this project's machine
    separations: ClassVar[tuple[tuple[str, str], ...]] = ()  # (better, worse) labels, for sweeps' reports

    def check_scale(self, scale: str) -> str:
        if scale not in self.scales:
            raise unknown("scale", scale, self.scales)
        return scale

    def scale(self, name: str):
        """The settings of scale `name`: the class attribute of that name (e.g. `quick`, `full`)."""
        return getattr(self, self.check_scale(name))

    @abc.abstractmethod
    def plan(self, scale: str, device: str = "auto") -> list[RunConfig]:
        """Every run the figure needs at this scale."""

    @abc.abstractmethod
    def analyze(self, results: list[RunResult], scale: str) -> Summary:
        """The figure's numbers and the paper's claims, from the runs of `plan(scale)`."""

    @abc.abstractmethod
    def figures(self, summary: Summary, out: Path) -> list[Path]:
        """Draw the figure(s) into `out`; returns the files written."""

    def text(self, summary: Summary) -> str:
        return "\n".join([f"{summary.experiment} ({summary.scale}): {len(summary.results)} runs"
                          + (f" in {summary.wall_s:.0f}s" if summary.wall_s else "")] + claim_lines(summary.claims))

    def table(self, summary: Summary) -> list[dict]:
        """runs.csv: one row per run (an experiment may give one per cell instead)."""
        from .samples import run_rows

        return run_rows(summary.results)


EXPERIMENTS: Registry[Experiment] = Registry("preset", Experiment)
PRESETS = EXPERIMENTS  # the CLI calls a registered experiment a preset


def claim_lines(claims: list[Claim]) -> list[str]:
    tag = {True: "HELD", False: "DID NOT HOLD", None: "NO VERDICT"}
    return [f"  claim {tag[c.held]}: {c.text}" for c in claims]


def write_json(path: Path, obj: dict) -> None:
    from ..fileio import OWNED, atomic_write

    atomic_write(path, json.dumps(obj, indent=2, allow_nan=False), "out", allow=OWNED)  # a reader never sees half a file
