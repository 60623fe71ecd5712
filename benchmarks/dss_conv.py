"""DSS (S4D) with its long convolution by FFT at every length (before) against `ops.long_conv`
(now: a Toeplitz matrix product up to `ops.DIRECT_MAX` positions, FFT above), side by side in one
run: a training step of the same model (same weights) on the same batches, the two forms taking
turns, one thread, batch 64, on index lookup with fixed lengths, readout pruned and denormals
flushed as the engine trains.

    python benchmarks/dss_conv.py [--Ns 20 50 100 200] [--steps 8] [--warmup 2] [--clock thread]

Shapes: DSS-(1,64) and DSS-(2,64) (the speed issue's search mixers) and DSS-(4,128) (the winner
of lookup-fig2's search at N = 20, the arm whose seeds at 250k steps are the search's costliest).
"""
from __future__ import annotations

import argparse
import statistics


import _steps  # benchmarks/_steps.py
from archsep.config import RunConfig, TrainConfig
from archsep.engine.train import flush_denormals


def fft_everywhere(model):
    for m in model.modules():
        if hasattr(m, "conv_impl"):
            m.conv_impl = "fft"
    return model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--Ns", type=int, nargs="+", default=[20, 50, 100, 200])
    _steps.add_timing_args(ap)
    a = ap.parse_args()
    _steps.start_timing(a)
    print(f"one thread, {a.clock} time; ms per training step (median of {a.steps}), the same batches")
    print(f"{'model':<12} {'N':>4} {'fft':>8} {'now':>8} {'faster':>7}")
    with flush_denormals():
        for N in a.Ns:
            for layers, width in ((1, 64), (2, 64), (4, 128)):
                cfg = RunConfig("index-lookup", "dss", {"N": N, "train_lengths": "fixed"},
                                {"layers": layers, "width": width, "positions": "learned"}, TrainConfig(batch_size=64))
                t = _steps.time_variants(cfg, {"fft": fft_everywhere, "now": None}, a.steps, a.warmup)
                b, n = statistics.median(t["fft"]), statistics.median(t["now"])
                print(f"DSS-({layers},{width}){'':<{4 - len(str(width))}} {N:>4} {b * 1e3:>8.1f} {n * 1e3:>8.1f} "
                      f"{sum(t['fft']) / sum(t['now']):>6.2f}x")


if __name__ == "__main__":
    main()
