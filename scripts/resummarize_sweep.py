"""A committed sweep folder's separations made again from its runs.csv by the current analysis
(`analysis.separation`); no run is trained, nothing but summary.txt is written.

    python scripts/resummarize_sweep.py FOLDER [--sweep TOML] [--check]

The runs are rebuilt from runs.csv (an `archsep export --format csv` table, or a runs table
with arch/N columns): label, N, seed, samples, status; in seed order (the k-th run at every N
forms the k-th per-seed slope of the exponent's interval). The pairs are the `[analysis]
separations` of FOLDER/sweep.toml (or --sweep). In summary.txt the block that starts with a line
"separations (" is replaced up to the next blank line (appended where there is none); the rest
is kept. --check prints the block and writes nothing.
"""
from __future__ import annotations

import argparse
import csv
import re
import sys
import tomllib
from pathlib import Path

from archsep.analysis.grid import analyze_runs
from archsep.fileio import OWNED, atomic_write
from archsep.results import RunResult

VERDICT = {True: "held", False: "did not hold", None: "no verdict"}


def runs_of(path: Path) -> list[RunResult]:
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            label = row.get("label") or row["arch"]
            N = int(float(row.get("task_params.N") or row["N"]))
            samples = int(float(row["samples"])) if row.get("samples") not in (None, "") else None
            config = {"label": label, "arch": label, "seed": int(row["seed"]), "task_params": {"N": N}}
            out.append(RunResult(row["run_id"], config, row["status"], samples, 0, None, None))
    return sorted(out, key=lambda r: (r.label, r.config["task_params"]["N"], r.config["seed"]))  # seed order


def block(folder: Path, sweep: Path) -> str:
    pairs = tomllib.loads(sweep.read_text(encoding="utf-8")).get("analysis", {}).get("separations", [])
    a = analyze_runs(runs_of(folder / "runs.csv"), separations=pairs)
    lines = ["separations (analysis.separation, made again from runs.csv by scripts/resummarize_sweep.py)"]
    lines += [f"  [{VERDICT[s['held']]}] {s['better']} vs {s['worse']}: {s['text']}" for s in a["separations"]]
    return "\n".join(lines) + "\n"


def replace_block(text: str, new: str) -> str:
    m = re.search(r"^[ \t]*separations \(.*?(?:\n[ \t]*\n|\Z)", text, flags=re.S | re.M)
    if not m:
        return text.rstrip("\n") + "\n\n" + new
    tail = "\n" if re.search(r"\n[ \t]*\n$", m.group(0)) else ""  # the blank line that ended the block
    return text[:m.start()] + new + tail + text[m.end():]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--sweep", type=Path, help="the sweep file (default FOLDER/sweep.toml)")
    ap.add_argument("--check", action="store_true", help="print the block, write nothing")
    a = ap.parse_args(argv)
    try:
        new = block(a.folder, a.sweep or a.folder / "sweep.toml")
    except (OSError, KeyError, ValueError) as e:
        print(f"{a.folder}: {e}", file=sys.stderr)
        return 1
    if a.check:
        print(new, end="")
        return 0
    target = a.folder / "summary.txt"
    atomic_write(target, replace_block(target.read_text(encoding="utf-8"), new), "out", allow=OWNED)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
