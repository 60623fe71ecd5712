"""The compiled selective scan (models/kernels/selective_scan.c, 'native') against the chunked PyTorch
scan it replaced as the CPU default, side by side: the per-step time of paper A's Mamba-64 and
Mamba-256 (one layer, as the presets build them) on index lookup at N = 200 and 400, plus
LSTM-64 at N = 400 as a control that nothing here touches. One training step = forward,
backward and a fused AdamW step on a batch of 64, as the engine trains (readout pruned,
denormals flushed). (`benchmarks/speed.py` also has the fused sequential loop of before both.)

    python benchmarks/scan.py [--Ns 200 400] [--steps 5] [--warmup 2] [--threads 1]

Both variants train the same model (same weights) on the same batches, drawn from the task's
training distribution (lengths U{10..N}); their steps alternate, so a machine shared with other
work slows both alike. The table gives the median step of each and the ratio of their summed
times over the same batches (above 1: the new scan is faster). For the LSTM both columns are
the same model: its ratio shows the noise of the method.

Measured in benchmarks/speed.py's run on the idle 2-core Intel Xeon (torch 2.13, 1 thread):
Mamba-64 158 -> 58 ms at N = 200 and 323 -> 119 ms at N = 400 (2.7x), Mamba-256 809 -> 331 and
1721 -> 669 ms (2.4-2.6x). The chunked scan was bound by ~20 elementwise passes over its
(B, L, E, N) volume per step; the compiled one makes one pass each way (the backward recomputes
the states of one sequence at a time) with the state in cache, and fuses the convolution, skip
and gate, whose (B, L, E) passes and transposes were most of the rest of a step.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from archsep.engine.train import flush_denormals
from archsep.experiments import EXPERIMENTS
from archsep.models.mamba import use_scan

from _steps import time_before_after  # benchmarks/_steps.py


def cells(Ns: list[int]):
    """RunConfigs from lookup-fig2's full scale: Mamba-64 and Mamba-256 at each N, LSTM-64 at the
    largest."""
    plan = EXPERIMENTS.get("lookup-fig2")().plan("full")
    out = []
    for width in (64, 256):
        for N in Ns:
            out.append(next(c for c in plan if c.arch == "mamba" and c.model_params["width"] == width
                            and c.task_params["N"] == N))
    out.append(next(c for c in plan if c.arch == "lstm" and c.model_params["hidden"] == 64
                    and c.task_params["N"] == max(Ns)))
    return out


def measure(cfg, steps: int, warmup: int) -> tuple[list[float], list[float]]:
    """Seconds per training step of the timed steps: (before, after)."""
    # the CPU default before the compiled scan: the chunked one
    return time_before_after(cfg, lambda m: use_scan(m, "chunked") if cfg.arch == "mamba" else m, steps, warmup)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--Ns", type=int, nargs="+", default=[200, 400])
    ap.add_argument("--steps", type=int, default=5, help="timed steps per model and cell")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (a worker trains on 1)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"per training step (batch 64, fwd+bwd+AdamW), {a.threads} thread(s), median of {a.steps}; "
          f"torch {torch.__version__}")
    print(f"{'model':<10} {'N':>4} {'scan before':>12} {'ms':>8} {'scan after':>11} {'ms':>8} {'ratio':>6}")
    with flush_denormals():
        for cfg in cells(a.Ns):
            b, f = measure(cfg, a.steps, a.warmup)
            mamba = cfg.arch == "mamba"
            label = cfg.model_config().short_name()
            print(f"{label:<10} {cfg.task_params['N']:>4} {'chunked' if mamba else '-':>12} "
                  f"{1e3 * statistics.median(b):>8.1f} {'native' if mamba else '-':>11} "
                  f"{1e3 * statistics.median(f):>8.1f} {sum(b) / sum(f):>5.2f}x", flush=True)


if __name__ == "__main__":
    main()
