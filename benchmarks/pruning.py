"""Readout pruning: a Transformer read at the last position, with and without computing only
that position's query in its last block, side by side (same model, same batches, 1 thread).

    python benchmarks/pruning.py [--Ns 100 200 400] [--steps 20] [--layers 1]

Prints, per N, the training-step FLOPs (torch's counter) and the measured time per step of
both, and their ratios.
"""
from __future__ import annotations

import argparse
import copy
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from archsep.models import MODELS
from archsep.tasks import TASKS


def step_time(model, task, batches, steps: int) -> float:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    for b in batches[:3]:  # warm up
        task.loss(model(b.x), b).backward()
    t = time.perf_counter()
    for b in batches[:steps]:
        loss = task.loss(model(b.x), b)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return (time.perf_counter() - t) / steps


def flops(model, task, batch) -> float:
    with FlopCounterMode(display=False) as fc:
        task.loss(model(batch.x), batch).backward()
    return float(fc.get_total_flops())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--Ns", type=int, nargs="+", default=[100, 200, 400])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--layers", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(f"TF-({a.layers},64) on index lookup, batch 64, 1 thread")
    for N in a.Ns:
        task = TASKS.build("index-lookup", N=N, train_lengths="fixed")
        g = torch.Generator().manual_seed(0)
        batches = [task.sample(64, g) for _ in range(a.steps + 3)]
        torch.manual_seed(0)
        full = MODELS.build("tf-preln", layers=a.layers, width=64, heads=1).build(task.spec)
        pruned = copy.deepcopy(full)
        pruned.prune_to_readout()
        f_full, f_pruned = flops(full, task, batches[0]), flops(pruned, task, batches[0])
        t_full, t_pruned = step_time(full, task, batches, a.steps), step_time(pruned, task, batches, a.steps)
        print(f"N={N:4d}: FLOPs/step {f_full / 1e9:7.2f}G -> {f_pruned / 1e9:6.2f}G ({f_full / f_pruned:4.1f}x fewer); "
              f"time/step {1e3 * t_full:7.1f} ms -> {1e3 * t_pruned:6.1f} ms ({t_full / t_pruned:4.1f}x faster)",
              flush=True)


if __name__ == "__main__":
    main()
