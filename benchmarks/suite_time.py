"""The README's test command in one process (`-n 0`, the baseline) and as it runs (one test
process per core, pytest-xdist: `addopts` in pyproject.toml), timed in one call on this machine,
and the ratio of the two wall times. Both must pass with the same counts.

Run it on an idle machine (a training job beside it takes cores from both, unevenly):

    .venv/bin/python benchmarks/suite_time.py [--workers auto] [PYTEST ARGS ...]

Extra arguments go to pytest, e.g. `tests/models` to time one folder.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAST = re.compile(r"^=*\s*(?P<counts>\d+ passed.*?) in [\d.]+s")


def timed(workers: str, extra: list[str]) -> tuple[float, str, int]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", workers, *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    counts = next((m["counts"] for line in reversed(r.stdout.splitlines()) if (m := LAST.match(line))), "")
    return wall, counts, r.returncode


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", default="auto", help="-n of the parallel run (pyproject's is auto)")
    args, extra = ap.parse_known_args()
    one, one_counts, rc1 = timed("0", extra)
    print(f"one process:      {one:7.1f} s  ({one_counts or 'no closing line'}, exit {rc1})", flush=True)
    par, par_counts, rc2 = timed(args.workers, extra)
    print(f"-n {args.workers:<13} {par:7.1f} s  ({par_counts or 'no closing line'}, exit {rc2})")
    print(f"ratio (one process / parallel): {one / par:.2f}x")
    same = bool(one_counts) and one_counts == par_counts
    if rc1 or rc2 or not same:
        print("the two runs did not both pass with the same counts", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
