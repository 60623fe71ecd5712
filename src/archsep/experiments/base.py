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

from ..analysis.grid import run_rows
from ..config import RunConfig
from ..errors import unknown
from ..registry import Registry
from ..results import Claim, RunResult, Summary


class Experiment(abc.ABC):
    registry_name: ClassVar[str]
    description: ClassVar[str] = ""
    scales: ClassVar[tuple[str, ...]] = ("quick", "full")
    runtime: ClassVar[dict[str, str]] = {}  # scale -> measured wall time on this project's machine
    # scale -> why its verdicts are not (yet) a fair test: said by `archsep list`, `describe`,
    # `--dry-run`, `reproduce` and in the summary's notes
    caveats: ClassVar[dict[str, str]] = {}
    separations: ClassVar[tuple[tuple[str, str], ...]] = ()  # (better, worse) labels, for sweeps' reports
    # the task parameter the figure's points lie along (N, or q for paper B's Figure 3), which
    # `--at` chooses among; None: the figure has no single axis (a construction, a trained model)
    axis: ClassVar[str | None] = None

    def check_scale(self, scale: str) -> str:
        if scale not in self.scales:
            raise unknown("scale", scale, self.scales)
        return scale

    def scale(self, name: str):
        """The settings of scale `name`: the class attribute of that name (e.g. `quick`, `full`;
        `paper_n` for the scale named `paper-n`)."""
        return getattr(self, self.check_scale(name).replace("-", "_"))

    @abc.abstractmethod
    def plan(self, scale: str, device: str = "auto") -> list[RunConfig]:
        """Every run the figure needs at this scale."""

    # the --set overrides the analysed runs were planned with (see `summarize`); an analysis
    # that re-plans its runs to group them (a size experiment's cells) applies them too
    overrides: dict = {}

    @abc.abstractmethod
    def analyze(self, results: list[RunResult], scale: str) -> Summary:
        """The figure's numbers and the paper's claims, from the runs of `plan(scale)`."""

    def summarize(self, results: list[RunResult], scale: str, overrides: dict | None = None) -> Summary:
        """`analyze` of `results` with every run counted once: results that repeat a run id
        (two configs that are one run) are dropped, and the summary says so in its notes."""
        unique, dropped = dedupe(results)
        self.overrides = dict(overrides or {})
        summary = self.analyze(unique, scale)
        notes = list(summary.data.get("notes") or [])
        if dropped:
            notes.insert(0, f"{dropped} result(s) repeated the run id of another and were dropped: "
                            f"each of the {len(unique)} distinct run(s) is counted once")
        # the runs' own wall times summed (a resumed preset's last call may take seconds)
        # ... of the runs the analysis read (a search's: each trial's latest run, which counts the
        # rungs it went on from, and the winners'), else of every run given
        counted = summary.results or unique
        summary.data["runs_wall_s"] = round(sum(float(r.wall_s or 0.0) for r in counted), 1)
        summary.data["n_runs"] = len(counted)
        if scale in self.caveats:
            notes.insert(0, f"scale {scale}: {self.caveats[scale]}")
        summary.data["duplicates_dropped"] = dropped
        summary.data["notes"] = notes
        return summary

    def summary_text(self, summary: Summary) -> str:
        """`text`, then the notes of the summary (dropped duplicates, settings the runs disagree on)."""
        return "\n".join([self.text(summary)] + [f"  note: {n}" for n in summary.data.get("notes") or []])

    @abc.abstractmethod
    def figures(self, summary: Summary, out: Path) -> list[Path]:
        """Draw the figure(s) into `out`; returns the files written."""

    def text(self, summary: Summary) -> str:
        head = f"{summary.experiment} ({summary.scale}): {n_runs(summary)} runs ({time_text(summary)})"
        return "\n".join([head] + claim_lines(summary.claims))

    def table(self, summary: Summary) -> list[dict]:
        """runs.csv: one row per run, with the figure's axis (an experiment may give one per cell instead)."""
        return run_rows(summary.results, self.axis)

    def curves(self, summary: Summary) -> list[dict]:
        """curves.csv, where an experiment keeps its runs' validation curves beside runs.csv (a
        row per evaluation): what a later analysis replays without the store, e.g. successive
        halving (analysis/halving.py). None by default."""
        return []


EXPERIMENTS: Registry[Experiment] = Registry("preset", Experiment)
PRESETS = EXPERIMENTS  # the CLI calls a registered experiment a preset


def claim_lines(claims: list[Claim]) -> list[str]:
    tag = {True: "HELD", False: "DID NOT HOLD", None: "NO VERDICT"}
    return [f"  claim {tag[c.held]}: {c.text}" for c in claims]


def dedupe(results: list[RunResult]) -> tuple[list[RunResult], int]:
    """`results` with each run id once (its first result), and how many were dropped."""
    seen: set[str] = set()
    out = []
    for r in results:
        if r.run_id not in seen:
            seen.add(r.run_id)
            out.append(r)
    return out, len(results) - len(out)


def _get(cfg: dict, dotted: str):
    head, _, sub = dotted.partition(".")
    v = cfg.get(head)
    return (v or {}).get(sub) if sub else v


def run_settings(results: list[RunResult], fields: dict[str, str],
                 fallback: dict | None = None) -> tuple[dict, list[str]]:
    """The settings the runs were made with, read from their stored configs, never from the
    preset: `fields` maps a name to a config field ({"budget": "train.budget"}). A name gets
    its one value where every run agrees, else the sorted list of the values (and a note that
    says how many runs have each); `seeds` (always given) is the number of distinct seeds and
    `seed_list` the seeds. Without runs, `fallback` (the scale's settings) fills in."""
    out: dict = {}
    notes: list[str] = []
    fallback = fallback or {}
    for name, dotted in fields.items():
        counts: dict = {}
        for r in results:
            v = _get(r.config, dotted)
            if v is None:  # a config that does not say (a hand-made result): no evidence either way
                continue
            key = json.dumps(v, sort_keys=True)
            counts[key] = counts.get(key, 0) + 1
        if not counts:
            out[name] = fallback.get(name)
        elif len(counts) == 1:
            out[name] = json.loads(next(iter(counts)))
        else:
            vals = sorted((json.loads(k) for k in counts), key=lambda v: (not isinstance(v, (int, float)), str(v)
                                                                          if not isinstance(v, (int, float)) else v))
            out[name] = vals
            notes.append(f"the runs of this analysis disagree on {dotted}: "
                         + ", ".join(f"{json.loads(k)} ({n} run(s))" for k, n in sorted(counts.items(),
                                                                                        key=lambda kv: -kv[1])))
    seeds = sorted({s for r in results if isinstance(s := r.config.get("seed"), int)})
    out["seeds"] = len(seeds) if results else fallback.get("seeds")
    out["seed_list"] = seeds if results else list(range(fallback.get("seeds") or 0))
    return out, notes


def settings_text(settings: dict, names: dict[str, str]) -> str:
    """'budget 640, threshold 0.88, eval size 2000, seeds 3, 4' from `run_settings`'s dict."""
    parts = [f"{label} {_fmt_setting(settings.get(k))}" for k, label in names.items() if settings.get(k) is not None]
    seeds = settings.get("seed_list")
    if seeds:
        parts.append(f"seed{'s' if len(seeds) > 1 else ''} {_fmt_setting(seeds)}")
    return ", ".join(parts)


def _fmt_setting(v) -> str:
    if isinstance(v, list):
        return (", ".join(map(str, v[:8])) + (f", ... ({len(v)} values)" if len(v) > 8 else "")) if v else "none"
    return f"{v:g}" if isinstance(v, float) else str(v)


def write_json(path: Path, obj: dict) -> None:
    from ..fileio import OWNED, atomic_write

    # a reader never sees half a file
    atomic_write(path, json.dumps(obj, indent=2, allow_nan=False), "out", allow=OWNED)


def n_runs(summary: Summary) -> int:
    """The distinct runs a summary was made from (its data's count; its results where older)."""
    return int(summary.data.get("n_runs", len(summary.results)))


def time_text(summary: Summary) -> str:
    """What a summary's runs took: their own wall times summed (stored with each run, so a
    preset made over several calls or sessions counts every run), then this call's wall time."""
    runs = summary.data.get("runs_wall_s")
    parts = []
    if runs is not None:
        parts.append(f"runs' own wall times sum to {runs:.0f} s" + (f" = {runs / 3600:.1f} h" if runs >= 3600 else ""))
    if summary.wall_s is not None:
        parts.append(f"{summary.wall_s:.0f} s this call")
    return "; ".join(parts) or "time not recorded"
