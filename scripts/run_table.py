"""One line per run of a store (a calibration's summary.txt): label, N, the task and model
parameters and budgets the runs differ in, lr, status, the step of the best checkpoint, best validation accuracy,
test accuracy (of that checkpoint), wall time; with `--curve K`, each run's validation accuracy at
K evenly spaced evaluations under it (the learning curve a calibration is read from); with
`--lengths K`, for a run with `train.eval_lengths`, its checkpoint's mean test accuracy over those
lengths and K of them (the accuracy at each length). For a
regression task (MSE): the samples to the threshold (or the budget, censored), the best held-out
MSE and, with `--curve K`, the held-out MSE against samples.

    .venv/bin/python scripts/run_table.py OUT [--curve 8] [--lengths 8]
"""
from __future__ import annotations

import argparse
import json
import sys

from archsep import load
from archsep.tasks import TASKS


def regression_line(r, curve_points: int, extra: str) -> None:
    """A regression run: samples to the threshold (MSE below it) or to the budget, the best MSE."""
    print(f"{r['label']:<22}{extra} lr={r['train.lr']:<7g} {r['status']:<9} threshold={r['train.threshold']:g} "
          f"samples={int(r['samples'] or 0)} best_mse={r['best_metric']:.3f} wall={r['wall_s']:.0f}s")
    if curve_points and isinstance(r.get("curve"), str):
        curve = json.loads(r["curve"])  # [[samples, held-out MSE], ...]
        picks = sorted({round(i * (len(curve) - 1) / max(1, curve_points - 1)) for i in range(curve_points)})
        print("    " + "  ".join(f"{curve[i][0]}: {curve[i][1]:.3f}" for i in picks))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--curve", type=int, default=0, help="this many points of each run's validation curve")
    ap.add_argument("--lengths", type=int, default=0,
                    help="the mean test accuracy over a run's train.eval_lengths, and this many of them")
    a = ap.parse_args()
    df = load(a.out)
    varied = [c for c in df.columns if c.startswith(("task_params.", "model_params.")) and c != "task_params.N"
              and df[c].astype(str).nunique() > 1]
    budgets = df["train.budget"].nunique() > 1
    df = df.sort_values(["label", "task_params.N", *varied, "train.lr", "train.budget"])
    for _, r in df.iterrows():
        extra = "".join(f" {c.split('.', 1)[1]}={r[c]}" for c in varied)
        if TASKS.get(r["task"]).kind == "regression":
            regression_line(r, a.curve, extra)
            continue
        bs = int(r["train.batch_size"])
        best = int(r["best_samples"] or 0) // bs  # the step of the best checkpoint
        extra += f" steps={int(r['train.budget']) // bs}" if budgets else ""
        print(f"{r['label']:<12} N={int(r['task_params.N']):<4}{extra} lr={r['train.lr']:<7g} {r['status']:<9} "
              f"best_step={best:>6} best_val_acc={1 - r['best_metric']:.3f} test_acc={1 - r['test_metric']:.3f} "
              f"wall={r['wall_s']:.0f}s")
        if a.curve and isinstance(r.get("curve"), str):
            curve = json.loads(r["curve"])  # [[samples, validation error], ...]
            picks = sorted({round(i * (len(curve) - 1) / max(1, a.curve - 1)) for i in range(a.curve)})
            print("    " + "  ".join(f"{curve[i][0] // bs}: {1 - curve[i][1]:.3f}" for i in picks))
        if a.lengths:
            lengths_line(r, a.lengths)
    return 0


def lengths_line(r, points: int) -> None:
    """The checkpoint's test accuracy at each of the run's train.eval_lengths (`by_length.<n>`,
    an error): their mean, and `points` of them evenly spaced."""
    at = sorted((int(c.split(".", 1)[1]), 1 - float(r[c])) for c in r.index
                if c.startswith("by_length.") and r[c] == r[c])  # NaN: a length this run was not tested at
    if not at:
        return
    picks = sorted({round(i * (len(at) - 1) / max(1, points - 1)) for i in range(points)})
    mean = sum(v for _, v in at) / len(at)
    print(f"    over k = {at[0][0]}..{at[-1][0]} ({len(at)} lengths): mean test_acc={mean:.3f}; "
          + "  ".join(f"k={at[i][0]}: {at[i][1]:.3f}" for i in picks))


if __name__ == "__main__":
    sys.exit(main())
