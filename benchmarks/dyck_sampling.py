"""Bounded Dyck's training batches, drawn all positions at once (`Dyck.positives`, the
vectorised `dyck_accepts`) against the step-by-step walk and DFA they replace (the same
numbers from the same seed: tests/tasks/test_tasks_paper_a.py), side by side in one run, the two
alternating batch by batch so a machine's load falls on both alike. The engine draws a fresh
batch every training step, so at N = 400 the old draw (about 49 ms) outweighed TF-(1,64)'s
whole step (about 40 ms).

    python benchmarks/dyck_sampling.py [--Ns 100 200 400] [--batches 10] [--threads 1]

The ratio is step-by-step / all-at-once of the summed times (above 1: faster now).
"""
from __future__ import annotations

import argparse
import time

import torch

import archsep.tasks.dyck as dyck
from archsep.tasks.dyck import Dyck


def step_by_step(task: Dyck, n: int, g: torch.Generator):
    """`task.sample` through the step-by-step walk and the DFA."""
    positives, accepts = Dyck.positives, dyck.dyck_accepts
    Dyck.positives, dyck.dyck_accepts = Dyck.positives_by_step, dyck.dfa_accepts  # type: ignore[method-assign]
    try:
        return task.sample(n, g)
    finally:
        Dyck.positives, dyck.dyck_accepts = positives, accepts  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--Ns", type=int, nargs="+", default=[100, 200, 400])
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"one training batch of {a.batch_size}, {a.threads} thread(s), mean of {a.batches}; "
          f"torch {torch.__version__}")
    print(f"{'N':>4} {'step by step ms':>16} {'all at once ms':>15} {'ratio':>6}")
    for N in a.Ns:
        task = Dyck(N=N)
        forms = {"old": lambda g, t=task: step_by_step(t, a.batch_size, g),
                 "new": lambda g, t=task: t.sample(a.batch_size, g)}
        times: dict[str, float] = {k: 0.0 for k in forms}
        for i in range(a.batches + 1):  # the first batch of each warms up
            for k, f in forms.items():
                g = torch.Generator().manual_seed(i)
                t = time.perf_counter()
                b = f(g)
                if i:
                    times[k] += time.perf_counter() - t
            assert b.x.shape == (a.batch_size, N)
        print(f"{N:>4} {1e3 * times['old'] / a.batches:>16.1f} {1e3 * times['new'] / a.batches:>15.1f} "
              f"{times['old'] / times['new']:>5.1f}x", flush=True)


if __name__ == "__main__":
    main()
