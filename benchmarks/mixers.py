"""Per-step CPU time of every registered sequence mixer relative to `tf-preln`, side by side in
one run: each model at width 64 (its other parameters at their defaults, 2 layers) on index lookup
at N = 200, batch 64, readout pruned as the engine trains it, the models taking turns on the same
batches (benchmarks/_steps.alternate_steps), one thread.

    python benchmarks/mixers.py [--N 200] [--steps 6] [--warmup 2]

Prints ms per step (median) and the ratio to tf-preln. Loops over the model registry, so a new
mixer is timed without being added here; paper B's `tf-b`, `rnn-b` and `ffn` are left out (not
token mixers of a causal stack)."""
from __future__ import annotations

import argparse
import dataclasses
import statistics

import torch
from _steps import alternate_steps

from archsep.config import RunConfig
from archsep.models import MODELS

NOT_MIXERS = {"tf-b", "rnn-b", "ffn"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, default=200)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--width", type=int, default=64)
    args = ap.parse_args()
    torch.set_num_threads(1)
    task = RunConfig("index-lookup", "tf-preln", {"N": args.N, "train_lengths": "fixed"}).build_task()
    models = {}
    for name in sorted(MODELS.names()):
        if name in NOT_MIXERS:
            continue
        fields = {f.name for f in dataclasses.fields(MODELS.get(name))}  # type: ignore[arg-type]
        params = {k: v for k, v in (("layers", 2), ("width", args.width), ("hidden", args.width)) if k in fields}
        torch.manual_seed(0)
        m = MODELS.build(name, **params).build(task.spec)
        m.prune_to_readout()
        models[name] = m
    g = torch.Generator().manual_seed(0)
    batches = [task.sample(64, g) for _ in range(args.warmup + args.steps)]
    times = alternate_steps(models, task, batches, args.warmup)
    base = statistics.median(times["tf-preln"])
    print(f"index lookup N = {args.N}, width {args.width}, 2 layers, batch 64, 1 thread; "
          f"median of {args.steps} steps after {args.warmup} warm-up")
    print(f"{'model':<10} {'ms/step':>9} {'x tf-preln':>10}")
    for name, ts in sorted(times.items(), key=lambda kv: statistics.median(kv[1])):
        med = statistics.median(ts)
        print(f"{name:<10} {med * 1e3:>9.1f} {med / base:>10.2f}")


if __name__ == "__main__":
    main()
