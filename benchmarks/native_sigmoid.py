"""The compiled scan's SiLU before and after its sigmoid became a select that GCC vectorises, side
by side in one run: `selective_scan.c` as it is against the same file with the sigmoid as it was
(a multiply by (float)(z >= 0), which kept four loops scalar: the conv's SiLU both ways and the
gate both ways), both compiled here with the same flags. Both give the same numbers, bit for bit
(the benchmark checks it on the first batch).

    python benchmarks/native_sigmoid.py [--steps 8] [--warmup 2] [--clock thread]

Times a training step of Mamba-(1,64) at N = 100 and 200 and Mamba-(2,64) at N = 20 on index
lookup (fixed lengths, batch 64, one thread, readout pruned, denormals flushed, as the engine
trains), the two libraries taking turns on the same model's copies and the same batches.
"""
from __future__ import annotations

import argparse
import copy
import importlib
import statistics
import tempfile
from pathlib import Path

import torch
from torch import nn

import _steps  # benchmarks/_steps.py
from archsep.config import RunConfig, TrainConfig
from archsep.engine.train import flush_denormals
from archsep.models.kernels import native

# the module (the package exports a function of the same name)
native_scan = importlib.import_module("archsep.models.kernels.native_scan")

NOW = """    float q = exp_neg(-__builtin_fabsf(z));
    float num = z >= 0.0f ? 1.0f : q;  /* a select: GCC vectorises it (a multiply by (float)(z >= 0) it did not) */
    return num / (1.0f + q);"""
BEFORE = """    float q = exp_neg(z < 0.0f ? z : -z);
    float pos = (float)(z >= 0.0f);
    return (pos + (1.0f - pos) * q) / (1.0f + q);"""


class Using(nn.Module):
    """`model` run with compiled library `lib`: set in forward, and left set for the backward and
    the optimiser step that follow it (the models take turns one whole step at a time)."""

    def __init__(self, model: nn.Module, lib) -> None:
        super().__init__()
        self.model, self.lib = model, lib

    def forward(self, x):
        native_scan._scan_library = lambda: self.lib
        return self.model(x)


def libraries():
    """(before, now): `selective_scan.c` compiled with its sigmoid as it was, and as it is."""
    src = native.SCAN_SOURCE.read_text()
    assert NOW in src, "selective_scan.c's sigmoid is not the one this benchmark knows"
    now = native_scan.typed(native.library())
    with tempfile.TemporaryDirectory(prefix="archsep-bench-") as d:
        old_src = Path(d) / "selective_scan_before.c"
        old_src.write_text(src.replace(NOW, BEFORE))
        before = native_scan.typed(native.library(old_src))
    assert now is not None and before is not None, native.why_not()
    return before, now


def mamba(N: int, layers: int) -> RunConfig:
    return RunConfig("index-lookup", "mamba", {"N": N, "train_lengths": "fixed"}, {"layers": layers, "width": 64},
                     TrainConfig(batch_size=64))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _steps.add_timing_args(ap)
    a = ap.parse_args()
    _steps.start_timing(a)
    before, now = libraries()
    print(f"one thread, {a.clock} time; ms per training step (median of {a.steps}), the same batches")
    print(f"{'model':<14} {'N':>4} {'before':>8} {'now':>8} {'faster':>7}")
    with flush_denormals():
        for layers, N in ((1, 100), (1, 200), (2, 20)):
            name, cfg = f"Mamba-({layers},64)", mamba(N, layers)
            task = cfg.build_task()
            torch.manual_seed(0)
            m = cfg.model_config().build(task.spec)
            m.prune_to_readout()
            g = torch.Generator().manual_seed(0)
            batches = [task.sample(64, g) for _ in range(a.warmup + a.steps)]
            with torch.no_grad():  # the same numbers from both
                outs = [Using(m, lib)(batches[0].x) for lib in (before, now)]
            assert torch.equal(*outs), "the two libraries disagree"
            pair = {"before": Using(copy.deepcopy(m), before), "now": Using(m, now)}
            t = _steps.alternate_steps(pair, task, batches, a.warmup)
            b, n = statistics.median(t["before"]), statistics.median(t["now"])
            print(f"{name:<14} {N:>4} {b * 1e3:>8.1f} {n * 1e3:>8.1f} {sum(t['before']) / sum(t['now']):>6.2f}x")
    native_scan._scan_library = lambda: native_scan.typed(native.library())


if __name__ == "__main__":
    main()
