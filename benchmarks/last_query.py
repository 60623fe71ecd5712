"""The factored last query against the projected one it replaced, side by side: the per-step time
of the one-layer Transformers the searches train (TF-(1,64) and TF-(1,256) with 4 heads on bounded
Dyck, TF-(1,64) with one head on index lookup), read at their last position, one training step =
forward, backward and a fused AdamW step on a batch of 64, as the engine trains (readout pruned,
denormals flushed).

    python benchmarks/last_query.py [--Ns 50 100 200] [--steps 10] [--warmup 2] [--clock wall|thread]

A model read at its last position attends from that one query. "projected" makes every position's
key and value, a (B, L, W) x (W, 2W) product; "factored" (`SelfAttention._last`) folds W_k into the
query and W_v after the weighted mean, two (B, H, L) x W products: the same math, to rounding
(tests/models/test_last_query.py). Both train the same weights on the same batches, their steps
alternating, so a shared machine's load falls on each alike; the table gives the median step of
each and the ratio projected / factored (above 1: factored is faster).

Measured on 2026-12-07 (an AMD EPYC, 2 cores, torch 2.13, 1 thread, median of 10 steps, wall clock,
two training jobs beside it at nice 19):

    task          model          N heads  projected ms  factored ms  ratio
    dyck          TF-(1,64)     50     4           6.7          3.8  1.76x
    dyck          TF-(1,256)    50     4          48.1         13.0  3.69x
    index-lookup  TF-(1,64)     50     1           3.6          2.6  1.38x
    dyck          TF-(1,64)    100     4          10.1          5.2  1.95x
    dyck          TF-(1,256)   100     4          90.9         21.5  4.23x
    index-lookup  TF-(1,64)    100     1           4.0          2.5  1.61x
    dyck          TF-(1,64)    200     4          21.6         11.0  1.97x
    dyck          TF-(1,256)   200     4         179.4         37.4  4.80x
    index-lookup  TF-(1,64)    200     1          14.3          6.8  2.09x

What is left of a step is the embedding, the first LayerNorm and their backward over every
position, (B, L, W) elementwise work that the keys needed as well. Models of two or more layers
gain only in their last block (its keys and values); their first blocks attend from every position.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from archsep.config import RunConfig, TrainConfig
from archsep.engine.train import flush_denormals
from archsep.models.transformer import use_last_query

from _steps import add_timing_args, start_timing, time_before_after  # benchmarks/_steps.py

# (task, label, model params): the searches' one-layer Transformers (dyck-fig2's and lookup-fig2's)
MODELS = [("dyck", "TF-(1,64)", {"layers": 1, "width": 64, "heads": 4, "positions": "learned", "causal": True}),
          ("dyck", "TF-(1,256)", {"layers": 1, "width": 256, "heads": 4, "positions": "learned", "causal": True}),
          ("index-lookup", "TF-(1,64)", {"layers": 1, "width": 64, "heads": 1, "positions": "learned",
                                         "causal": True})]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--Ns", type=int, nargs="+", default=[50, 100, 200])
    add_timing_args(ap, steps=10)
    a = ap.parse_args()
    start_timing(a)
    print(f"per training step (batch 64, fwd+bwd+AdamW), 1 thread, median of {a.steps}, {a.clock} clock; "
          f"torch {torch.__version__}")
    print(f"{'task':<13} {'model':<11} {'N':>4} {'heads':>5} {'projected ms':>13} {'factored ms':>12} {'ratio':>6}")
    with flush_denormals():
        for N in a.Ns:
            for task, label, params in MODELS:
                cfg = RunConfig(task, "tf-preln", {"N": N}, params, TrainConfig(batch_size=64))
                before, after = time_before_after(cfg, lambda m: use_last_query(m, "projected"), a.steps, a.warmup)
                p, f = statistics.median(before), statistics.median(after)
                print(f"{task:<13} {label:<11} {N:>4} {params['heads']:>5} {1e3 * p:>13.1f} {1e3 * f:>12.1f} "
                      f"{p / f:>5.2f}x", flush=True)


if __name__ == "__main__":
    main()
