"""The committed results' index, `docs/results/README.md`, generated from the files beside it.

Every number on the page comes from a committed file: a folder's `summary.json` (its claims,
each with its verdict and the numbers in its text; a size preset's mean test accuracies; a
sample preset's exponents), its `runs.csv` (how many runs, their own wall times summed) and the
first line of its `PROVENANCE` (what made it). Nothing is typed by hand: `render` is a pure
function of those files, `scripts/results_page.py` writes the page, and a test fails when the
committed page and a fresh rendering disagree.

Reading the folder is reading data: JSON and CSV only, never a module.
"""
from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

PAGE = "README.md"
VERDICTS = ("held", "did not hold", "no verdict")
SCRIPT = "scripts/results_page.py"
MAX_LISTED = 12  # more claims than this fold under <details>; more fits are left to summary.txt


def verdict(claim: dict) -> str:
    """A claim's verdict: its own field, or (summaries written before the field) from `held`."""
    v = claim.get("verdict")
    if v in VERDICTS or v == "reversed":
        return str(v)
    held = claim.get("held")
    return "held" if held is True else "did not hold" if held is False else "no verdict"


def read_runs(folder: Path) -> list[dict]:
    path = folder / "runs.csv"
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def runs_csv(folder: Path) -> tuple[int, float | None]:
    """(rows of runs.csv, their `wall_s` summed, None where the file has no such column)."""
    rows = read_runs(folder)
    walls = [float(r["wall_s"]) for r in rows if r.get("wall_s") not in (None, "")]
    return len(rows), (sum(walls) if walls else None)


def time_by_arm(folder: Path) -> str:
    """The runs' own wall times summed per arm (runs.csv's label, else arch), where there are two
    arms or more."""
    by: dict[str, float] = defaultdict(float)
    for r in read_runs(folder):
        arm = r.get("label") or r.get("arch")
        if arm and r.get("wall_s") not in (None, ""):
            by[arm] += float(r["wall_s"])
    if len(by) < 2:
        return ""
    return "run time by arm: " + ", ".join(f"{arm} {hours(t)}" for arm, t in sorted(by.items()))


def standing(folder: Path) -> str:
    """'current', or what the folder's PROVENANCE says it is in its first word: 'superseded' or
    'former' (a design or claims the preset has since replaced)."""
    prov = folder / "PROVENANCE"
    first = prov.read_text(errors="replace").split("\n", 1)[0].strip().lower() if prov.is_file() else ""
    if folder.name == "former" or folder.parent.name == "former" or first.startswith(("superseded", "former")):
        return "former"
    return "current"


def first_line(folder: Path) -> str:
    prov = folder / "PROVENANCE"
    if not prov.is_file():
        return ""
    return prov.read_text(errors="replace").split("\n", 1)[0].strip()


def hours(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def pct(x: float | None) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def accuracy_table(d: dict) -> list[str]:
    """A size summary's mean test accuracy per model and N (over the cells that have one), with
    the best trivial baseline's row."""
    acc: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for c in d.get("cells") or []:
        if c.get("test_acc") is not None:
            acc[c["label"]][c["N"]].append(float(c["test_acc"]))
    Ns = sorted({n for by in acc.values() for n in by})
    if not Ns:
        return []
    out = ["| model | " + " | ".join(f"N = {n}" for n in Ns) + " |", "|---" * (len(Ns) + 1) + "|"]
    for lab in sorted(acc):
        out.append(f"| {lab} | " + " | ".join(pct(sum(v) / len(v)) if (v := acc[lab].get(n)) else "–"
                                               for n in Ns) + " |")
    best: dict[tuple[str, int], float] = {}
    for b in d.get("baselines") or []:
        if isinstance(b.get("N"), int) and b.get("best_acc") is not None:
            best[(b.get("variant") or "", b["N"])] = float(b["best_acc"])
    for variant in sorted({v for v, _ in best}):
        name = "best trivial baseline" + (f" [{variant}]" if variant else "")
        out.append(f"| {name} | " + " | ".join(pct(best.get((variant, n))) for n in Ns) + " |")
    return out


def exponent_table(d: dict) -> list[str]:
    fits = d.get("fits") or {}
    if not fits or len(fits) > MAX_LISTED:  # an atlas's many fits: its summary.txt has them
        return []
    out = ["| arm | exponent alpha (samples ~ x^alpha along the figure's axis) | 95% interval | seeds | censored runs "
           "in the fit |", "|---|---|---|---|---|"]
    for arm, f in sorted(fits.items()):
        if f.get("alpha") is None:
            continue
        ci = f.get("ci") or [None, None]
        interval = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if None not in ci else "–"
        out.append(f"| {arm} | {f['alpha']:.2f} | {interval} | {f.get('seeds', '–')} | "
                   f"{'yes' if f.get('censored_data') else 'no'} |")
    return out


def folders(root: Path) -> list[Path]:
    """Every folder under `root` with a summary.json, at any depth (no links followed), in order."""
    out = [p.parent for p in sorted(root.rglob("summary.json")) if not p.is_symlink() and not p.parent.is_symlink()]
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def other_folders(root: Path) -> list[Path]:
    """Top-level folders with runs.csv but no summary.json: calibrations and sweeps."""
    return [p for p in sorted(root.iterdir()) if p.is_dir() and not p.is_symlink()
            and (p / "runs.csv").is_file() and not (p / "summary.json").is_file()]


def load(folder: Path) -> dict:
    return json.loads((folder / "summary.json").read_text())


def render(root: Path) -> str:
    """The page, from the committed files under `root` (docs/results)."""
    rows, sections = [], []
    for folder in folders(root):
        rel = folder.relative_to(root).as_posix()
        d = load(folder)
        n_runs, wall = runs_csv(folder)
        counts = {v: 0 for v in VERDICTS}
        for c in d.get("claims") or []:
            counts[verdict(c) if verdict(c) in counts else "did not hold"] += 1
        stand = standing(folder)
        rows.append(f"| [{rel}]({rel}/) | `{d.get('preset', '?')}` | {d.get('scale', '?')} | {stand} | {n_runs} | "
                    f"{hours(wall)} | {counts['held']} | {counts['did not hold']} | {counts['no verdict']} |")
        sec = [f"### {rel}", ""]
        if stand == "former":
            sec += ["*Former: kept for the record; its PROVENANCE's first line says what replaced it.*", ""]
        if (line := first_line(folder)):
            sec += [f"PROVENANCE: `{line}`", ""]
        if (arms := time_by_arm(folder)):
            sec += [arms, ""]
        if d.get("pending"):
            sec += [f"runs pending when written: {d['pending']}", ""]
        for extra in (accuracy_table(d), exponent_table(d)):
            if extra:
                sec += extra + [""]
        claims = d.get("claims") or []
        listed = [f"- **{verdict(c)}**: {c.get('text', '').strip()}" for c in claims]
        if len(listed) > MAX_LISTED:
            listed = [f"<details><summary>{len(claims)} claims</summary>", "", *listed, "", "</details>"]
        if listed:
            sec += listed + [""]
        sections.append("\n".join(sec))
    head = [
        "# Committed results",
        "",
        f"Generated by `{SCRIPT}` from the `summary.json`, `runs.csv` and `PROVENANCE` files of each",
        "folder here; do not edit it by hand (`tests/results/test_results_page.py` fails when it and those files",
        "disagree). Each claim is quoted from its summary with its verdict: *held*, *did not hold*, or",
        "*no verdict* (a control failed or censored runs could have produced the result). *run time* is the",
        "runs' own wall times summed (runs.csv's `wall_s`; one core each, usually), not the span of the",
        "sessions that made them. A folder's PROVENANCE says how, when and on what machine.",
        "",
        "| folder | preset | scale | standing | runs | run time | held | did not hold | no verdict |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    others = other_folders(root)
    if others:
        head += ["Calibrations and sweeps (no preset summary; their claims, if any, are in their summary.txt):", "",
                 "| folder | runs | run time | what |", "|---|---|---|---|"]
        for folder in others:
            n_runs, wall = runs_csv(folder)
            rel = folder.relative_to(root).as_posix()
            head.append(f"| [{rel}]({rel}/) | {n_runs} | {hours(wall)} | `{first_line(folder)}` |")
        head.append("")
    return "\n".join(head + ["## Each folder's claims", ""] + sections).rstrip() + "\n"


def write(root: Path) -> Path:
    """Write the page beside the folders it indexes (a replace, never through a link)."""
    from ..fileio import atomic_write

    return atomic_write(root / PAGE, render(root), field="dest", example="docs/results/README.md")
