"""Redraw committed figures from their committed summary.json (and runs.csv where a figure
reads the runs), with the current drawing code; no run is trained, nothing but figures is
written.

    python scripts/redraw_figures.py [--text] [FOLDER ...]

--text also writes each folder's summary.txt and summary.json again from the same summary, with
the runs' own wall times summed from runs.csv (`runs_wall_s`: what a summary's header states
now, instead of the last call's seconds), the number of runs where runs.csv has one row per run
(`n_runs`), and the figures list naming the files drawn; nothing else in them changes (a first
line starting with "# ", a note marking the folder, is kept).

Default: every docs/results/*/ whose summary.json names a preset, except atlas-cpu. Each
folder's summary.json becomes an `archsep.results.Summary` (the figures read its data only);
the preset's `figures()` draws into the folder (atomic writes beside the target, never through a
link), and the figures it no longer draws there (e.g. heatmaps.* of a one-width preset) are
removed. summary.json, summary.txt, runs.csv and PROVENANCE are left as they are (summary.json's
"figures" list may then name a removed figure until the preset is rerun).

qstr-fig3 reads its runs (per run: arm, q, samples, censored), rebuilt from runs.csv;
qstr-heads draws every run's validation curve, which runs.csv does not hold: it is skipped.

--claims (with --text) makes claims again with the current code: a size preset's from its
committed cells and baselines (`SizeExperiment.claims_of`); the atlas's by analysing its runs
again, rebuilt from runs.csv (label, N, seed, samples, status) with each task's budget and
threshold from summary.json (`atlas_runs`), and the count of changed verdicts recorded in its
summary.json (`recomputed`). Name the atlas's folder to include it.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from archsep.experiments import PRESETS
from archsep.experiments.base import write_json
from archsep.experiments.reproduce import remove_stale_figures
from archsep.experiments.size import SizeExperiment
from archsep.fileio import OWNED, atomic_write
from archsep.reporting.results_page import read_runs, run_time
from archsep.results import Claim, RunResult, Summary

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
EXCLUDED = {"atlas-cpu": "another issue's figure"}
# presets whose figures need what runs.csv lacks: preset -> why
UNDRAWABLE = {"qstr-heads": "its figure draws every run's held-out curve, which runs.csv does not hold"}
# what `Summary.to_dict` (and reproduce) add around the data
NOT_DATA = ("preset", "scale", "quick", "claims", "wall_s", "figures")


@dataclass
class CsvRun:
    """The fields of a run that Figure 3's drawing reads, from one row of runs.csv."""

    config: dict
    samples: int | None
    status: str
    extra: dict = field(default_factory=dict)

    @property
    def censored(self) -> bool:
        return self.status == "censored"


def csv_runs(path: Path) -> list[CsvRun]:
    """Figure 3's runs from its runs.csv (columns arch, N, q, seed, samples, censored, status,
    run_id)."""
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            status = row["status"] or ("censored" if row.get("censored") == "True" else "ok")
            samples = int(float(row["samples"])) if row.get("samples") not in (None, "") else None
            out.append(CsvRun({"label": row["arch"], "arch": row["arch"], "seed": int(row["seed"]),
                               "task_params": {"q": int(row["q"]), "N": int(row["N"])}}, samples, status,
                              {"run_id": row.get("run_id", "")}))
    return out


def atlas_runs(folder: Path, data: dict) -> list[RunResult]:
    """The atlas's runs from its runs.csv, as the analysis reads them: the label (task/mixer),
    N, seed, samples and status, with the task's budget and threshold from its summary."""
    out = []
    with open(folder / "runs.csv", newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            task = data["tasks"][row["arch"].split("/")[0]]
            config = {"label": row["arch"], "arch": row["arch"].split("/")[-1], "seed": int(row["seed"]),
                      "task_params": {"N": int(row["N"])},
                      "train": {"budget": task["budget"], "threshold": task["threshold"]}}
            samples = int(float(row["samples"])) if row.get("samples") not in (None, "") else None
            out.append(RunResult(row["run_id"], config, row["status"], samples, int(row["resolution"] or 0),
                                 None, float(row["best_metric"]) if row.get("best_metric") else None,
                                 wall_s=float(row["wall_s"] or 0), params=int(row["params"] or 0)))
    return out


def fig3_runs(folder: Path, data: dict) -> list[RunResult]:
    """Figure 3's runs from its runs.csv, as the analysis reads them (label, q in the N slot of
    the points, seed, samples, status), with the budget, threshold and test size of its summary."""
    train = {k: data[k] for k in ("budget", "threshold", "eval_size") if data.get(k) is not None}
    return [RunResult(r.extra["run_id"], {**r.config, "train": train}, r.status, r.samples, 0,  # type: ignore[arg-type]
                      None, None) for r in csv_runs(folder / "runs.csv")]


RUNS_OF = {"atlas": atlas_runs, "qstr-fig3": fig3_runs}  # presets whose claims --claims makes again from runs.csv


def reanalysed(folder: Path, summary: Summary) -> list[tuple[str, str, str]]:
    """The claims (and the atlas's table) made again from the runs of runs.csv (`RUNS_OF`) by
    the current analysis, in place in `summary`; returns the claims whose verdict changed or that
    are new (was, now, text; `earlier_verdicts` matches them), also recorded under the summary's
    `recomputed`."""
    exp = PRESETS.get(summary.experiment)()
    new = exp.analyze(RUNS_OF[summary.experiment](folder, summary.data), summary.scale)
    old_claims = summary.claims
    changed = [(w, c.verdict, c.text) for w, c in zip(earlier_verdicts(old_claims, new.claims), new.claims)
               if w != c.verdict]
    keep = {k: summary.data[k] for k in ("runs_wall_s", "n_runs", "pending") if k in summary.data}
    summary.data = {**summary.data, **new.data, **keep, "recomputed": {
        "by": "scripts/redraw_figures.py --text --claims (the analysis made again from runs.csv)",
        "verdicts_changed": len(changed), "claims": len(old_claims),
        "changes": [{"was": w, "now": n, "claim": ":".join(t.split(":")[:2])} for w, n, t in changed]}}
    summary.claims = new.claims
    return changed


def earlier_verdicts(old: list[Claim], new: list[Claim]) -> list[str]:
    """For each claim of `new`, the verdict of the same claim in `old` ("-" where `old` lacks
    it). A claim is matched by its kind and its place among that kind's claims: their texts carry
    numbers that change, and a preset makes its claims in a fixed order."""
    def keys(claims: list[Claim]) -> Iterator[tuple[str, int]]:
        seen: dict[str, int] = {}
        for c in claims:
            seen[c.kind] = seen.get(c.kind, -1) + 1
            yield c.kind, seen[c.kind]

    before = dict(zip(keys(old), (c.verdict for c in old)))
    return [before.get(k, "-") for k in keys(new)]


def load(folder: Path) -> Summary:
    d = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    summary = Summary(experiment=d["preset"], scale=d["scale"], data={k: v for k, v in d.items() if k not in NOT_DATA},
                      claims=[Claim.from_dict(c) for c in d.get("claims") or []], wall_s=d.get("wall_s"))
    if d["preset"] == "qstr-fig3":
        summary.results = csv_runs(folder / "runs.csv")
    return summary


def preset_of(folder: Path) -> str | None:
    try:
        return json.loads((folder / "summary.json").read_text(encoding="utf-8")).get("preset")
    except (OSError, ValueError):
        return None


def redraw(folder: Path) -> tuple[list[Path], list[Path]]:
    """Draw `folder`'s figures again; returns (written, removed)."""
    if folder.is_symlink() or not folder.is_dir():
        raise ValueError(f"{folder} is not a directory (or is a link): not written")
    summary = load(folder)
    if summary.experiment in UNDRAWABLE:
        raise ValueError(f"{summary.experiment}: {UNDRAWABLE[summary.experiment]}")
    exp = PRESETS.get(summary.experiment)()
    drawn = exp.figures(summary, folder)
    return drawn, remove_stale_figures(folder, drawn)


def rewrite_text(folder: Path, drawn: list[Path], claims: bool = False) -> list[tuple[str, str, str]]:
    """summary.txt and summary.json from the committed summary, with the runs' total time; with
    `claims`, a size preset's claims made again from its committed cells and baselines by the
    current code (`SizeExperiment.claims_of`). Returns the claims whose text or verdict changed,
    as (old verdict, new verdict, new text)."""
    summary = load(folder)
    rows = read_runs(folder)
    cost = summary.data.get("search_cost")
    if cost:  # a search: runs.csv holds its winners' cells, the search's runs are every trial's too
        summary.data["runs_wall_s"] = round(cost["trials_wall_s"] + cost["winners_wall_s"], 1)
    elif (wall := run_time(rows)) is not None:
        summary.data["runs_wall_s"] = round(wall, 1)
    if rows and "run_id" in rows[0]:  # one row per run (a size preset's rows are cells)
        summary.data["n_runs"] = len(rows)
    exp = PRESETS.get(summary.experiment)()
    changed = []
    if claims and summary.experiment in RUNS_OF:
        changed = reanalysed(folder, summary)
    elif claims and isinstance(exp, SizeExperiment):
        old = summary.claims
        summary.claims = exp.claims_of(summary.data, summary.scale)
        texts = {(c.text, c.verdict) for c in old}
        changed = [(w, c.verdict, c.text) for w, c in zip(earlier_verdicts(old, summary.claims), summary.claims)
                   if (c.text, c.verdict) not in texts]
    old_txt = (folder / "summary.txt").read_text(encoding="utf-8")
    mark = old_txt.split("\n", 1)[0] + "\n" if old_txt.startswith("# ") else ""
    d = summary.to_dict()
    d["figures"] = [p.name for p in drawn] if drawn else json.loads(
        (folder / "summary.json").read_text(encoding="utf-8")).get("figures", [])
    write_json(folder / "summary.json", d)
    atomic_write(folder / "summary.txt", mark + exp.summary_text(summary) + "\n", "out", allow=OWNED)
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", action="store_true", help="also write summary.txt and summary.json again")
    ap.add_argument("--claims", action="store_true",
                    help="with --text: a size preset's claims made again from its committed cells")
    ap.add_argument("folders", nargs="*", type=Path)
    a = ap.parse_args(argv)
    folders = a.folders or [p for p in sorted(RESULTS.iterdir())
                            if p.is_dir() and p.name not in EXCLUDED and preset_of(p)]
    failed = 0
    for folder in folders:
        drawn: list[Path] = []
        try:
            atlas = a.claims and a.text and preset_of(folder) in RUNS_OF
            if atlas:  # its claims and table first: its figure is drawn from them
                for was, now, text in rewrite_text(folder, [], claims=True):
                    print(f"{folder}: claim {was} -> {now}: {text}")
            if not a.text or atlas or (preset_of(folder) not in UNDRAWABLE and folder.name not in EXCLUDED):
                drawn, removed = redraw(folder)
                print(f"{folder}: wrote {', '.join(p.name for p in drawn)}"
                      + (f"; removed {', '.join(p.name for p in removed)}" if removed else ""))
            if a.text:
                for was, now, text in rewrite_text(folder, drawn, a.claims and not atlas):
                    print(f"{folder}: claim {was} -> {now}: {text}")
                print(f"{folder}: wrote summary.txt, summary.json")
        except Exception as e:  # noqa: BLE001 - one folder's failure is reported, the others still drawn
            print(f"{folder}: not redrawn: {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
