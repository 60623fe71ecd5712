"""One line per run of a store (a calibration's summary.txt): label, N, the task parameters the
runs differ in, lr, status, the step of the best checkpoint, best validation accuracy, test accuracy
(of that checkpoint), wall time.

    .venv/bin/python scripts/run_table.py OUT
"""
from __future__ import annotations

import sys

from archsep import load


def main(out: str) -> int:
    df = load(out)
    varied = [c for c in df.columns if c.startswith("task_params.") and c != "task_params.N"
              and df[c].astype(str).nunique() > 1]
    df = df.sort_values(["label", "task_params.N", *varied, "train.lr"])
    for _, r in df.iterrows():
        best = int(r["best_samples"] or 0) // int(r["train.batch_size"])  # the step of the best checkpoint
        extra = "".join(f" {c.split('.', 1)[1]}={r[c]}" for c in varied)
        print(f"{r['label']:<12} N={int(r['task_params.N']):<4}{extra} lr={r['train.lr']:<7g} {r['status']:<9} "
              f"best_step={best:>6} best_val_acc={1 - r['best_metric']:.3f} test_acc={1 - r['test_metric']:.3f} "
              f"wall={r['wall_s']:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
