"""Where index lookup's errors are: test accuracy of TF-(1,64) by query position, beside how
many training examples asked for each position (paper A's training lengths k ~ U{10..N}, one k
per batch, query p ~ U{1..k}: position p is asked only in batches with k >= p).

    python scripts/lookup_positions.py [--N 200] [--steps 12000] [--lr 1e-3] [--seed 0]
        [--train-lengths fixed] [--every 10000]

Trains as the cpu scale's cell does (AdamW without decay, batch 64, fresh batches, the same
model and seeds), on one thread, and prints a table by position decile.
"""
from __future__ import annotations

import argparse

import torch

from archsep.experiments.size import cell_runs, SizeScale, tf


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, default=200)
    ap.add_argument("--steps", type=int, default=12_000)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-lengths", choices=("variable", "fixed"), default="variable",
                    help="the task's training lengths: k ~ U{10..N} (the preset's) or k = N")
    ap.add_argument("--every", type=int, default=0, help="also print the test accuracy every this many steps")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    arch = tf(1, (64,), heads=1)
    s = SizeScale(Ns=(a.N,), archs=(arch,), lrs=(a.lr,), steps=a.steps)
    (cfg,) = cell_runs("index-lookup", arch, 64, a.N, a.seed, s, "TF-(1,64)", {"train_lengths": a.train_lengths})
    task = cfg.build_task()
    model = cfg.build_model(task)
    model.prune_to_readout()  # as the engine trains it: only the last query in the last block
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(cfg.derived_seed("train"))
    asked = torch.zeros(a.N, dtype=torch.long)  # training examples per query position
    test = task.sample_test(20_000, torch.Generator().manual_seed(cfg.derived_seed("test")))
    checkpoints = set(range(a.every, a.steps, a.every)) if a.every else set()
    for step in range(1, a.steps + 1):
        b = task.sample(64, g)
        asked += torch.bincount(b.tuples[:, 0], minlength=a.N)
        opt.zero_grad(set_to_none=True)
        task.loss(model(b.x), b).backward()
        opt.step()
        if step in checkpoints:
            right = _right(model, test)
            last = test.tuples[:, 0] >= a.N - a.N // 10
            print(f"step {step}: test accuracy {100 * right.mean():.1f}%, last tenth of positions "
                  f"{100 * right[last].mean():.1f}%", flush=True)
    right = _right(model, test)
    pos = test.tuples[:, 0]
    print(f"TF-(1,64), index lookup, N={a.N}, {a.train_lengths} training lengths, {a.steps} steps, "
          f"lr {a.lr}, seed {a.seed}: "
          f"test accuracy {100 * right.mean():.1f}% at length N")
    print(f"{'query positions':>18}{'test accuracy':>15}{'training examples per position':>32}")
    edges = torch.linspace(0, a.N, 11).long()
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (pos >= lo) & (pos < hi)
        print(f"{f'{lo + 1}-{hi}':>18}{100 * right[m].mean():>14.1f}%{asked[lo:hi].float().mean():>32.0f}")


def _right(model, test) -> torch.Tensor:
    """1.0 where the model's answer at the last position is right, per test example."""
    model.eval()
    with torch.no_grad():
        right = torch.cat([model(test.x[i:i + 1000])[:, -1].argmax(-1) == test.y[i:i + 1000]
                           for i in range(0, len(test), 1000)]).float()
    model.train()
    return right


if __name__ == "__main__":
    main()
