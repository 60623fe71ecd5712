"""Paper A's quick presets, before and after the one-engine change, side by side in one run.

    python benchmarks/paper_a_quick.py --before /path/to/worktree-of-old-commit [--presets lookup-fig2 ...]

Runs `archsep reproduce P --quick` with the old source tree (its src/ on PYTHONPATH, same
Python and packages) and with this tree, one after the other on an otherwise idle machine,
each into a fresh directory with 2 workers, and prints wall times, their ratio and each cell's
test accuracy in both. Make an old tree with `git worktree add /tmp/before <commit>` and put an
empty src/archsep/__init__.py in it if it has none (so it is not merged with this tree's
package as a namespace package).
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
PRESETS = ("lookup-fig2", "dyck-fig2", "mamba-width", "equality-fig4")


def run(src: Path, preset: str, out: Path, workers: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = ("import sys; from archsep.cli import main; "
            f"sys.exit(main(['reproduce', '{preset}', '--quick', '--out', '{out}', '--workers', '{workers}', "
            "'--no-progress']))")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return time.perf_counter() - t


def cells(out: Path) -> dict[tuple, float]:
    with (out / "runs.csv").open() as f:
        return {(r["label"], int(r["N"]), int(r["seed"])): float(r["test_acc"]) for r in csv.DictReader(f)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, type=Path, help="a checkout of the old commit")
    ap.add_argument("--presets", nargs="+", default=list(PRESETS))
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="archsep-bench-"))
    total = {"before": 0.0, "after": 0.0}
    for p in a.presets:
        t = {}
        for side, src in (("before", a.before / "src"), ("after", HERE / "src")):
            t[side] = run(src, p, tmp / f"{p}-{side}", a.workers)
            total[side] += t[side]
        print(f"{p}: before {t['before']:.1f}s, after {t['after']:.1f}s, speedup {t['before'] / t['after']:.2f}x",
              flush=True)
        old, new = cells(tmp / f"{p}-before"), cells(tmp / f"{p}-after")
        for k in sorted(old):
            print(f"    {k[0]:<22} N={k[1]:<4} test acc before {100 * old[k]:6.2f}%  after "
                  f"{100 * new.get(k, float('nan')):6.2f}%  diff {100 * (new.get(k, float('nan')) - old[k]):+6.2f}",
                  flush=True)
    print(f"all: before {total['before']:.1f}s, after {total['after']:.1f}s, "
          f"speedup {total['before'] / total['after']:.2f}x")


if __name__ == "__main__":
    main()
