"""A size cell's learning-rate grid stacked into one computation against one run at a time,
side by side (same configs, 1 thread, a shortened budget).

    python benchmarks/lr_grid.py [--steps 300]

Cells from the full scale of the paper-A experiments; prints the wall time of both paths, the
ratio, and whether each run reached the same best validation metric (to 0.02).
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from archsep.engine.train import train_many, train_run
from archsep.experiments import EXPERIMENTS

CELLS = [("dyck-fig2", "LSTM-64", 100), ("lookup-fig2", "TF-(1,64)", 20), ("lookup-fig2", "TF-(1,64)", 100),
         ("dyck-fig2", "TF-(1,64)", 20), ("lookup-fig2", "LSTM-64", 100),
         ("equality-fig4", "TF-(2,64) [eq-random]", 100)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args()
    torch.set_num_threads(1)
    total = {"plain": 0.0, "stacked": 0.0}
    for name, label, N in CELLS:
        cell = next(c for c in EXPERIMENTS.get(name)().cells("full", "cpu") if c.label == label and c.N == N)
        cfgs = [dataclasses.replace(c, train=dataclasses.replace(c.train, budget=a.steps * c.train.batch_size,
                                                                 eval_every=100, eval_size=500, test_size=500))
                for c in cell.runs]
        t = time.perf_counter()
        plain = [train_run(c) for c in cfgs]
        t_plain = time.perf_counter() - t
        t = time.perf_counter()
        stacked = train_many(cfgs)
        t_stacked = time.perf_counter() - t
        total["plain"] += t_plain
        total["stacked"] += t_stacked
        same = all(abs((p.best_metric or 0) - (s.best_metric or 0)) <= 0.02 for p, s in zip(plain, stacked))
        print(f"{name} {label} N={N}, lrs {[c.train.lr for c in cfgs]}: plain {t_plain:6.1f}s, stacked "
              f"{t_stacked:6.1f}s "
              f"({t_plain / t_stacked:4.2f}x); same best metric to 0.02: {same}", flush=True)
    print(f"all: {total['plain'] / total['stacked']:.2f}x")


if __name__ == "__main__":
    main()
