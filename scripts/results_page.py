"""Write docs/results/README.md, the index of the committed results, and the generated blocks of
the README and docs/paper_a.md (paper A's claims by protocol), from their summary.json, runs.csv
and PROVENANCE files (`archsep.reporting.results_page`); `--check` writes nothing and
exits 1 when the committed page differs from a fresh rendering.

    .venv/bin/python scripts/results_page.py [--check] [--root docs/results]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archsep.reporting.results_page import PAGE, render, stale_docs, write

ROOT = Path(__file__).resolve().parents[1] / "docs" / "results"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare, write nothing; exit 1 on a difference")
    ap.add_argument("--root", type=Path, default=ROOT, help="the results folder (default: docs/results)")
    a = ap.parse_args()
    if a.check:
        page = a.root / PAGE
        same = page.is_file() and page.read_text() == render(a.root)
        print(f"{page}: {'up to date' if same else 'differs from its files: run scripts/results_page.py'}")
        stale = stale_docs(a.root)
        for doc in stale:
            print(f"{doc}: its generated block differs from {a.root}'s files: run scripts/results_page.py")
        return 0 if same and not stale else 1
    print(f"wrote {write(a.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
