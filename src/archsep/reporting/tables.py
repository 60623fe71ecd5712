"""Tables written as CSV: one row per dict, the union of their keys as columns, atomically."""
from __future__ import annotations

import csv
from pathlib import Path


def write_csv(rows: list[dict], path: Path) -> Path:
    cols = list(dict.fromkeys(k for r in rows for k in r))
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        w.writerows(rows)
    tmp.replace(path)  # a reader never sees half a file
    return path
