"""Fused attention (SDPA) against the explicit softmax(QK^T/sqrt(d))V it replaced, side by side:
the per-step time of paper A's TF-(1,64) and TF-(2,64) (tf-preln, width 64, as the presets build
them) on index lookup and bounded Dyck at N = 200 and 400, one training step = forward, backward
and a fused AdamW step on a batch of 64, as the engine trains (readout pruned, denormals flushed).

    python benchmarks/attention.py [--Ns 200 400] [--steps 10] [--warmup 2] [--threads 1]

Both implementations train the same model (same weights) on the same batches, drawn from the
task's training distribution (lookup trains on variable lengths). Their steps alternate, so a
machine shared with other work slows both alike; the table gives the median step of each and
the ratio explicit / fused (above 1: fused is faster).

Measured on the project's shared 2-core CPU (torch 2.13, 1 thread, median of 10 steps):

    task          model         N heads  explicit ms  fused ms  ratio
    index-lookup  TF-(1,64)   200     1         32.5      26.6  1.22x
    index-lookup  TF-(2,64)   200     4        314.4     195.8  1.61x
    index-lookup  TF-(1,64)   400     1         64.2      49.6  1.29x
    index-lookup  TF-(2,64)   400     4        709.4     326.5  2.17x
    dyck          TF-(1,64)   200     4         36.0      36.7  0.98x
    dyck          TF-(2,64)   200     4        574.4     260.4  2.21x
    dyck          TF-(1,64)   400     4         75.4      76.4  0.99x
    dyck          TF-(2,64)   400     4       2166.8     689.2  3.14x

Both tasks read the last position, so a one-layer model's only block is pruned to one query
(no (L, L) scores in either form: a wash with 4 heads of width 16); the win is in every block
that attends from all positions (lookup's lengths vary, U{10..N}: shorter batches on average).
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics

import torch

from archsep.engine.train import flush_denormals
from archsep.experiments import EXPERIMENTS
from archsep.models.attention import use_attention

from _steps import time_before_after  # benchmarks/_steps.py

PRESETS = {"index-lookup": "lookup-fig2", "dyck": "dyck-fig2"}


def cells(Ns: list[int]):
    """(task label, model label, RunConfig) for TF-(1,64) and TF-(2,64) at each N, from the
    presets' full scale. lookup-fig2 trains no TF-(2,64): it gets the TF-(2,64) of every other
    preset (4 heads) on lookup's task."""
    out = []
    for task, preset in PRESETS.items():
        plan = [c for c in EXPERIMENTS.get(preset)().plan("full")
                if c.arch == "tf-preln" and c.model_params["width"] == 64 and c.task_params["N"] in Ns]
        dyck_tf2 = next(c for c in EXPERIMENTS.get("dyck-fig2")().plan("full")
                        if c.arch == "tf-preln" and c.model_params["layers"] == 2)
        for N in Ns:
            for layers in (1, 2):
                c = next((c for c in plan if c.task_params["N"] == N and c.model_params["layers"] == layers), None)
                if c is None:
                    base = next(c for c in plan if c.task_params["N"] == N)
                    c = dataclasses.replace(base, model_params=dyck_tf2.model_params)
                out.append((task, f"TF-({layers},64)", c))
    return out


def measure(cfg, steps: int, warmup: int) -> tuple[float, float]:
    """Median seconds per training step: (explicit, fused)."""
    explicit, fused = time_before_after(cfg, lambda m: use_attention(m, "explicit"), steps, warmup)
    return statistics.median(explicit), statistics.median(fused)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--Ns", type=int, nargs="+", default=[200, 400])
    ap.add_argument("--steps", type=int, default=10, help="timed steps per model and cell")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (a worker trains on 1)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"per training step (batch 64, fwd+bwd+AdamW), {a.threads} thread(s), median of {a.steps}; "
          f"torch {torch.__version__}")
    print(f"{'task':<13} {'model':<10} {'N':>4} {'heads':>5} {'explicit ms':>12} {'fused ms':>9} {'ratio':>6}")
    with flush_denormals():
        for task, label, cfg in cells(a.Ns):
            e, f = measure(cfg, a.steps, a.warmup)
            print(f"{task:<13} {label:<10} {cfg.task_params['N']:>4} {cfg.model_params['heads']:>5} "
                  f"{1e3 * e:>12.1f} {1e3 * f:>9.1f} {e / f:>5.2f}x", flush=True)


if __name__ == "__main__":
    main()
