"""The chunked selective scan against the fused sequential loop it replaced as the CPU default,
side by side: the per-step time of paper A's Mamba-64 and Mamba-256 (one layer, as the presets
build them) on index lookup at N = 200 and 400, plus LSTM-64 at N = 400 as a control that
nothing here touches. One training step = forward, backward and a fused AdamW step on a batch
of 64, as the engine trains (readout pruned, denormals flushed).

    python benchmarks/scan.py [--Ns 200 400] [--steps 5] [--warmup 2] [--threads 1]

Both variants train the same model (same weights) on the same batches, drawn from the task's
training distribution (lengths U{10..N}); their steps alternate, so a machine shared with other
work slows both alike. The table gives the median step of each and the ratio of their summed
times over the same batches (above 1: the new scan is faster). For the LSTM both columns are
the same model: its ratio shows the noise of the method.

Measured on the project's shared 2-core CPU (torch 2.13, 1 thread, load average ~3 from other
work, median of 5 steps; ratio of summed times over the same batches):

    model         N  scan before       ms  scan after       ms  ratio
    Mamba-64    200        fused    224.5     chunked    202.1  1.40x
    Mamba-64    400        fused    493.5     chunked    234.4  1.47x
    Mamba-256   200        fused   1340.1     chunked   1097.0  1.50x
    Mamba-256   400        fused   1989.0     chunked   1575.3  1.43x
    LSTM-64     400            -     49.1           -     46.8  1.07x

The issue's 3x is not reached: the scan is bound by its (B, L, E, N) volume (about 20 passes of
elementwise work over it per step, forward and backward), not by the number of ops, and a
Mamba-64 step at L = 375 spends about 0.35 s outside the scan (projections, conv, gating on
(B, L, E) tensors). Chunks of 2-4 positions beat 8-16 (cache); see MAX_CHUNK in models/mamba.py.
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
    # the CPU default before the chunked scan: the fused sequential loop
    return time_before_after(cfg, lambda m: use_scan(m, "fused") if cfg.arch == "mamba" else m, steps, warmup)


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
            print(f"{label:<10} {cfg.task_params['N']:>4} {'fused' if mamba else '-':>12} "
                  f"{1e3 * statistics.median(b):>8.1f} {'chunked' if mamba else '-':>11} "
                  f"{1e3 * statistics.median(f):>8.1f} {sum(b) / sum(f):>5.2f}x", flush=True)


if __name__ == "__main__":
    main()
