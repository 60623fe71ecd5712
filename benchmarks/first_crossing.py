"""What exactness on hovering curves costs: one run trained three ways, side by side.

every       : a full held-out evaluation at every scheduled point (the reference answer)
band 0      : 'progressive' as it was before the band (skip while the window's lower bound
              is above the threshold itself)
band 0.5    : 'progressive' with the default band (skip only above 1.5x the threshold)

Evaluation never touches the training stream, so the three share one training trajectory and
differ only in which held-out evaluations they run; the samples must agree with 'every'.
Prints, per case, the samples, the wall time, the full and screened-out evaluations, and the
wall-time ratio to 'every'.

    .venv/bin/python benchmarks/first_crossing.py [--threads 1] [--cases fig1a-tf,fig1b-ffn]
"""
from __future__ import annotations

import argparse
import dataclasses
import time

import torch

from archsep.config import RunConfig
from archsep.engine.train import train_run
from archsep.experiments import EXPERIMENTS

# (preset, label, N, seed): a curve that falls sharply through its threshold (Figure 1a's TF)
# and one that hovers near it and crosses by a dip (Figure 1b's FFN, the case)
CASES = {"fig1a-tf": ("qstr-fig1a", "TF", 8, 0), "fig1b-ffn": ("qstr-fig1b", "FFN", 25, 1)}


def config(preset: str, label: str, N: int, seed: int) -> RunConfig:
    exp = EXPERIMENTS.get(preset)()
    return next(c for c in exp.plan("full", "cpu") if c.label == label and c.task_params["N"] == N and c.seed == seed)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--eval-every", type=int, default=10, help="steps between scheduled evaluations")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"{'case':10} {'mode':9} {'samples':>8} {'wall s':>7} {'full':>5} {'screened':>8} {'x every':>8}")
    for name in a.cases.split(","):
        base = config(*CASES[name])
        t = base.train
        ways = {"every": dataclasses.replace(t, eval_mode="every", eval_every=a.eval_every),
                "band 0": dataclasses.replace(t, eval_mode="progressive", progressive_band=0.0,
                                              eval_every=a.eval_every),
                "band 0.5": dataclasses.replace(t, eval_mode="progressive", progressive_band=0.5,
                                                eval_every=a.eval_every)}
        ref = None
        for mode, train in ways.items():
            t0 = time.perf_counter()
            r = train_run(dataclasses.replace(base, train=train))
            wall = time.perf_counter() - t0
            ref = ref or wall
            s = r.eval_schedule
            print(f"{name:10} {mode:9} {r.samples:>8} {wall:>7.1f} {s['full_evals']:>5} {s['screened_out']:>8} "
                  f"{ref / wall:>7.2f}x", flush=True)


if __name__ == "__main__":
    main()
