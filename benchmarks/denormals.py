"""Flushing denormal floats while training (`engine.train.flush_denormals`), side by side with
torch's default, on the same model, batches and thread (1), alternating so that both see the
same machine load.

    python benchmarks/denormals.py [--tasks dyck index-lookup] [--Ns 100 200] [--steps 10]

Prints the time per training step of each, and their ratio, for an LSTM-64 (paper A's cell).
"""
from __future__ import annotations

import argparse
import copy
import time

import torch

from archsep.config import RunConfig, TrainConfig
from archsep.experiments.size import lstm


def per_step(model, task, batches, flush: bool) -> float:
    torch.set_flush_denormal(flush)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    t = time.perf_counter()
    for b in batches:
        opt.zero_grad(set_to_none=True)
        task.loss(model(b.x), b).backward()
        opt.step()
    torch.set_flush_denormal(False)
    return (time.perf_counter() - t) / len(batches)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", nargs="+", default=["dyck", "index-lookup"])
    ap.add_argument("--Ns", nargs="+", type=int, default=[100, 200])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"{'task':<14}{'N':>5}{'default ms/step':>17}{'flushed ms/step':>17}{'speed-up':>10}")
    for name in a.tasks:
        for N in a.Ns:
            arch = lstm()
            cfg = RunConfig(name, "lstm", {"N": N}, arch.model_params(64), TrainConfig(), 0, "LSTM-64")
            task = cfg.build_task()
            torch.manual_seed(0)
            base = cfg.model_config().build(task.spec)
            g = torch.Generator().manual_seed(0)
            batches = [task.sample(64, g) for _ in range(a.steps)]
            per_step(copy.deepcopy(base), task, batches[:2], False)  # warm up
            plain, flushed = [], []
            for _ in range(a.rounds):  # alternate: both see the same load
                plain.append(per_step(copy.deepcopy(base), task, batches, False))
                flushed.append(per_step(copy.deepcopy(base), task, batches, True))
            p, f = min(plain), min(flushed)
            print(f"{name:<14}{N:>5}{1e3 * p:>17.1f}{1e3 * f:>17.1f}{p / f:>9.1f}x")


if __name__ == "__main__":
    main()
