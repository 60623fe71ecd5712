"""Paper A's per-step speed before and after the speed issue, side by side in one run: the
explicit attention and the fused sequential scan (the CPU defaults before it) against fused
attention (SDPA) and the compiled scan (the defaults now; Mamba also shows the chunked PyTorch
scan between the two), on the cells the issue names:
TF-(1,64) and TF-(2,64) on bounded Dyck, Mamba-64 and Mamba-256 on index lookup, at N = 200
and 400, and LSTM-64 on index lookup at N = 400 (nothing touches it: its ratio is the noise).

    python benchmarks/speed.py [--Ns 200 400] [--steps 4] [--warmup 1] [--threads 1]

One training step = forward, backward and a fused AdamW step on a batch of 64, as the engine
trains (readout pruned, denormals flushed), from the presets' full-scale configs. Both variants
are the same model (same weights) on the same batches (lookup: its training lengths U{10..N});
their steps alternate, so a machine's load falls on both alike. The ratio is before / after of
the summed times over the same batches (above 1: faster now).
"""
from __future__ import annotations

import argparse
import statistics

import torch

from archsep.engine.train import flush_denormals
from archsep.experiments import EXPERIMENTS
from archsep.models.attention import use_attention
from archsep.models.mamba import use_scan

from _steps import time_variants  # benchmarks/_steps.py


def pick(preset: str, arch: str, width: int, N: int, layers: int = 1):
    key = "hidden" if arch == "lstm" else "width"
    return next(c for c in EXPERIMENTS.get(preset)().plan("full")
                if c.arch == arch and c.model_params[key] == width and c.task_params["N"] == N
                and c.model_params.get("layers", 1) == layers)


def cells(Ns: list[int]) -> list:
    out = [pick("dyck-fig2", "tf-preln", 64, N, layers) for layers in (1, 2) for N in Ns]
    out += [pick("lookup-fig2", "mamba", w, N) for w in (64, 256) for N in Ns]
    return out + [pick("lookup-fig2", "lstm", 64, max(Ns))]


# the forms timed per family, before the issue first: {column: (name, switch)}; the last column
# is the model as the engine now builds it (no switch)
FORMS = {"tf-preln": {"before": ("explicit attn", lambda m: use_attention(m, "explicit")),
                      "after": ("fused attn", None)},
         "mamba": {"before": ("fused scan", lambda m: use_scan(m, "fused")),
                   "chunked": ("chunked scan", lambda m: use_scan(m, "chunked")),
                   "after": ("native scan", None)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--Ns", type=int, nargs="+", default=[200, 400])
    ap.add_argument("--steps", type=int, default=4, help="timed steps per variant and cell")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (a worker trains on 1)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"per training step (batch 64, fwd+bwd+AdamW), {a.threads} thread(s), median of {a.steps}; "
          f"torch {torch.__version__}")
    print(f"{'task':<13} {'model':<10} {'N':>4} {'before':>13} {'ms':>8} {'chunked':>8} {'after':>12} {'ms':>8} "
          f"{'ratio':>6}")
    with flush_denormals():
        for cfg in cells(a.Ns):
            forms = FORMS.get(cfg.arch, {"before": ("-", lambda m: m), "after": ("-", None)})
            t = time_variants(cfg, {k: f for k, (_, f) in forms.items()}, a.steps, a.warmup)
            mid = f"{1e3 * statistics.median(t['chunked']):>8.1f}" if "chunked" in t else f"{'':>8}"
            print(f"{cfg.task:<13} {cfg.model_config().short_name():<10} {cfg.task_params['N']:>4} "
                  f"{forms['before'][0]:>13} {1e3 * statistics.median(t['before']):>8.1f} {mid} "
                  f"{forms['after'][0]:>12} {1e3 * statistics.median(t['after']):>8.1f} "
                  f"{sum(t['before']) / sum(t['after']):>5.2f}x", flush=True)


if __name__ == "__main__":
    main()
