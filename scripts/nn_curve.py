"""The validation curve of one nearest-neighbour cell, as the nn-fig preset trains it (AdamW
without decay, batch 64, fresh batches, validation every 500 steps, early stop at 99%).

    python scripts/nn_curve.py --N 40 --steps 10000 [--lr 1e-3] [--arch tf2|tf1|lstm|mamba]

Prints the wall time, the best validation error and the curve (step, validation accuracy).
"""
from __future__ import annotations

import argparse
import time

import torch

from archsep.engine.train import train_run
from archsep.experiments.size import SizeScale, cell_runs, lstm, mamba, tf


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, default=40)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--arch", choices=("tf2", "tf1", "lstm", "mamba"), default="tf2")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    arch = {"tf2": tf(2, (64,)), "tf1": tf(1, (64,)), "lstm": lstm((64,)), "mamba": mamba((64,))}[a.arch]
    s = SizeScale(Ns=(a.N,), archs=(arch,), lrs=(a.lr,), steps=a.steps, eval_every=500, val_size=1000, test_size=2000)
    (cfg,) = cell_runs("nearest-neighbour", arch, 64, a.N, a.seed, s, arch.name(64), {})
    t = time.perf_counter()
    r = train_run(cfg)
    print(f"{arch.name(64)}, nearest neighbour, N={a.N}, lr {a.lr}, seed {a.seed}: {time.perf_counter() - t:.0f} s, "
          f"best validation accuracy {1 - r.best_metric:.3f}")
    print("curve (step, validation accuracy):", [(n // 64, round(1 - m, 3)) for n, m in r.curve])


if __name__ == "__main__":
    main()
