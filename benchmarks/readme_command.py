"""The bar for the README's main command: `archsep reproduce qstr-fig1a --quick`, run as a
newcomer runs it (a fresh output folder, the default workers), timed, and its claims read.

It fails (exit 1) when a claim about the paper's separations (the TF's exponent smaller than
the FFN's and the RNN's, and the orderings at the largest N) reads 'did not hold' or gives no
verdict, or when the wall time exceeds the README's stated bound. It also prints the progress
bar's first ETA against the wall time. Run it on an idle machine: the README's time is a
measurement on one.

    .venv/bin/python benchmarks/readme_command.py [--bound 120] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _secs(t: str) -> float:
    parts = [int(x) for x in t.split(":")]
    return float(sum(v * 60**i for i, v in enumerate(reversed(parts))))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bound", type=float, default=120.0, help="seconds the README promises (under two minutes)")
    ap.add_argument("--keep", default="", help="write the output here instead of a temporary folder")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="archsep-readme-")
    out = Path(args.keep) if args.keep else Path(tmp) / "out"
    archsep = Path(sys.executable).with_name("archsep")
    try:
        t0 = time.perf_counter()
        proc = subprocess.run([str(archsep), "reproduce", "qstr-fig1a", "--quick", "--out", str(out)],
                              cwd=tmp, capture_output=True, text=True, env={**os.environ})
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr)
            print(f"FAIL: exit {proc.returncode}")
            return 1
        summary = json.loads((out / "summary.json").read_text())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # the progress bar's first ETA (its first "[elapsed<remaining]" with a number), against the wall time
    etas = [(_secs(a), _secs(b)) for a, b in re.findall(r"\[(\d+:\d+(?::\d+)?)<(\d+:\d+(?::\d+)?)\]", proc.stderr)]
    first = next(((a, b) for a, b in etas if a > 0 or b > 0), None)
    if first:
        print(f"first ETA: {first[0] + first[1]:.0f} s in all (at {first[0]:.0f} s elapsed); "
              f"wall {wall:.0f} s: ratio {(first[0] + first[1]) / wall:.2f}")
        later = sorted({a: a + b for a, b in etas}.items())
        print("ETA (elapsed -> total): " + ", ".join(f"{a:.0f}->{t:.0f}" for a, t in later))
    paper = [c for c in summary["claims"] if c["kind"] in ("separation", "ordering")]
    bad = [c for c in paper if c["held"] is not True]
    for c in summary["claims"]:
        print(f"  {c['verdict'] if 'verdict' in c else c['held']}: {c['text']}")
    print(f"wall {wall:.0f} s (bound {args.bound:.0f} s); {len(paper)} separation claims, {len(bad)} not held")
    ok = not bad and paper and wall <= args.bound
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
