"""Paper B's RNNs per training step (Figure 3, batch 64, N = 7): the simple RNN of the full
scale (bidirectional tanh, hidden 500q) and the GRU of the retrieval scale (bidirectional, hidden
500q): the library's nn.RNN / nn.GRU against archsep's own recurrences that form dW_hh in one
product (`models/rnn.py`, `_ElmanScan` and `_GRUScan`; the CPU default), side by side in one run
on the same weights and batches, their steps alternating so a machine's load falls on both alike.

    python benchmarks/rnn.py [--qs 1 3 5] [--steps 4] [--warmup 1] [--threads 1]

One training step = forward, backward and a fused AdamW step, as the engine trains (readout
pruned, denormals flushed), from the qstr-fig3 preset's configs. The ratio is library / own of
the summed times (above 1: archsep's path is faster).
"""
from __future__ import annotations

import argparse
import statistics

import torch

from archsep.engine.train import flush_denormals
from archsep.experiments import EXPERIMENTS

from _steps import time_variants  # benchmarks/_steps.py


def library(m):
    m.impl = "library"
    return m


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qs", type=int, nargs="+", default=[1, 3, 5])
    ap.add_argument("--steps", type=int, default=4, help="timed steps per variant and q")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (a worker trains on 1)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    exp = EXPERIMENTS.get("qstr-fig3")()
    plans = [exp.plan("full"), exp.plan("retrieval")]  # the tanh RNN, the GRU
    print(f"per training step (batch 64, fwd+bwd+AdamW), {a.threads} thread(s), median of {a.steps}; "
          f"torch {torch.__version__}")
    print(f"{'q':>2} {'model':<10} {'library ms':>11} {'own ms':>9} {'ratio':>6}")
    with flush_denormals():
        for plan in plans:
            for q in a.qs:
                cfg = next(c for c in plan if c.arch == "rnn-b" and c.task_params["q"] == q)
                t = time_variants(cfg, {"library": library, "own": None}, a.steps, a.warmup)
                print(f"{q:>2} {cfg.model_config().short_name():<10} {1e3 * statistics.median(t['library']):>11.1f} "
                      f"{1e3 * statistics.median(t['own']):>9.1f} {sum(t['library']) / sum(t['own']):>5.2f}x",
                      flush=True)


if __name__ == "__main__":
    main()
