"""Small shapes at their floor: per-step time and FLOP/s of the search's mixers, side by side in
one run, against the machine's own matmul rate measured in the same run; the step ratios the
speed issue tracks; and the share of a run's time its evaluations take.

    python benchmarks/search_flops.py [--Ns 20 50 100] [--steps 8] [--warmup 2] [--ratios] [--clock thread]

- per mixer of lookup-fig2's search (LSTM, Mamba, DSS = s4d, RetNet, linear attention; before
  and after, taking turns: `Before`) and the
  Transformer, at width 64, 1 and 2 layers, index lookup at each N (fixed lengths), batch 64,
  one thread, denormals flushed (as the engine trains): the median ms per training step (the
  models taking turns on the same batches, `_steps.alternate_steps`), the step's FLOPs as the
  cost model counts them (`engine.planning.step_flops`: forward and backward; the LSTM's
  recurrence added, which the counter misses), their ratio (GFLOP/s) and that as a
  fraction of a 256x256 fp32 matmul's rate on this core (the floor a small step could reach);
- the ratios TF-(2,64) / LSTM-64 at N = 400, Mamba-64 / LSTM-64 at N = 200 and
  Mamba-(2,64) / LSTM-(2,64) at N = 20 (per step; `--ratios` prints only these), before and
  after in the same run: "before" is the same model (same weights, same batches, taking turns)
  as it ran before Mamba pruned its last layer to the read position, before causal attention
  ran in query chunks on the CPU (`models.attention.CHUNK`), before the compiled scan's sigmoid
  vectorised and before DSS's convolution became a matrix product up to 128 positions (`Before`);
- evaluation's share at N = 20: the time of one evaluation of 1000 held-out examples
  (forward only, the engine's chunks) against 250 training steps (the search's eval_every).
"""
from __future__ import annotations

import argparse
import copy
import statistics

import _steps
import torch
from _steps import alternate_steps

from torch import nn

from archsep.config import RunConfig, TrainConfig
from archsep.engine.planning import step_flops
from archsep.engine.train import flush_denormals
from archsep.models import attention
from native_sigmoid import Using, libraries, native_scan  # benchmarks/native_sigmoid.py

LIBS = libraries()  # (before, now): the compiled scan with its sigmoid as it was and as it is

FAMILIES = {"TF": ("tf-preln", {"heads": 1, "positions": "learned", "width": 64}),
            "LSTM": ("lstm", {"hidden": 64}), "Mamba": ("mamba", {"width": 64}),
            "DSS": ("s4d", {"width": 64}), "RetNet": ("retnet", {"width": 64}),
            "LinTF": ("linear-tf", {"width": 64})}


def matmul_gflops(n: int = 256, reps: int = 200) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(10):
        a @ b
    t = _steps.clock()
    for _ in range(reps):
        a @ b
    return 2 * n ** 3 * reps / (_steps.clock() - t) / 1e9


def configs(N: int, layers: tuple[int, ...]) -> dict[str, RunConfig]:
    return {f"{lab}-({L},64)": RunConfig("index-lookup", arch, {"N": N, "train_lengths": "fixed"},
                                         {**p, "layers": L}, TrainConfig(batch_size=64))
            for lab, (arch, p) in FAMILIES.items() for L in layers}


def flops(cfg: RunConfig) -> float:
    """The step's FLOPs: the cost model's count, plus the LSTM's recurrence, which torch's
    counter does not see on a CPU (aten's fused LSTM has no formula): per layer and token, four
    gates of (input + hidden) x hidden multiply-adds forward, about twice that backward."""
    fl = step_flops(cfg)
    if cfg.arch == "lstm":
        h, L = int(cfg.model_params.get("hidden", 64)), int(cfg.model_params.get("layers", 1))
        tokens = cfg.train.batch_size * int(cfg.task_params["N"])
        fl += 3 * L * tokens * 2 * 4 * h * (h + h)
    return fl


def time_steps(cfgs: dict[str, RunConfig], steps: int, warmup: int, before: bool = False) -> dict[str, float]:
    """Median seconds per training step of each config's model, taking turns on one task's batches;
    with `before`, also each model as it ran before (`Before`, key "<name> before")."""
    task = next(iter(cfgs.values())).build_task()
    models: dict[str, nn.Module] = {}
    for k, c in cfgs.items():
        torch.manual_seed(0)
        m = c.model_config().build(task.spec)
        if before:
            models[k + " before"] = Before(copy.deepcopy(m), c.arch)
        m.prune_to_readout()
        models[k] = Using(m, LIBS[1]) if before and c.arch == "mamba" else m
    g = torch.Generator().manual_seed(0)
    batches = [task.sample(64, g) for _ in range(warmup + steps)]
    return {k: statistics.median(v) for k, v in alternate_steps(models, task, batches, warmup).items()}


class Before(nn.Module):
    """A model (of registry name `arch`) as it ran before the speed issue's changes: causal
    attention in one call of the fused kernel; pruned to its readout unless it is a Mamba (which
    was not pruned before; the others were); Mamba's compiled scan with its scalar sigmoid
    (`native_sigmoid.libraries`); DSS's convolution by FFT at every length."""

    def __init__(self, model: nn.Module, arch: str):
        super().__init__()
        self.model = model
        if arch != "mamba":
            model.prune_to_readout()
        for m in model.modules():
            if hasattr(m, "conv_impl"):  # DSS's kernel
                m.conv_impl = "fft"
        self.lib = LIBS[0] if arch == "mamba" else None

    def forward(self, x):
        if self.lib is not None:
            native_scan._scan_library = lambda: self.lib  # left set for its backward
        chunk, attention.CHUNK = attention.CHUNK, 1 << 30
        try:
            return self.model(x)
        finally:
            attention.CHUNK = chunk


def ratio_steps(x: RunConfig, y: RunConfig, steps: int, warmup: int) -> dict[str, float]:
    """Median seconds per step of x before and after (`Before`) and of y, taking turns."""
    task = x.build_task()
    models = {}
    for k, c in (("x", x), ("y", y)):
        torch.manual_seed(0)
        models[k] = c.model_config().build(task.spec)
    torch.manual_seed(0)
    models["x before"] = Before(x.model_config().build(task.spec), x.arch)  # the same weights
    models["x"].prune_to_readout()
    models["y"].prune_to_readout()
    now = {"x": x.arch == "mamba", "y": y.arch == "mamba", "x before": False}
    models = {k: Using(m, LIBS[1]) if now[k] else m for k, m in models.items()}
    g = torch.Generator().manual_seed(0)
    batches = [task.sample(64, g) for _ in range(warmup + steps)]
    return {k: statistics.median(v) for k, v in alternate_steps(models, task, batches, warmup).items()}


def eval_share(cfg: RunConfig, size: int = 1000, every: int = 250) -> float:
    """One evaluation of `size` held-out examples (forward, no grad, in chunks of 500) over
    `every` training steps' time: the share evaluations add to a run."""
    task = cfg.build_task()
    torch.manual_seed(0)
    m = cfg.model_config().build(task.spec)
    m.prune_to_readout()
    g = torch.Generator().manual_seed(1)
    held = [task.sample(500, g) for _ in range(size // 500)]
    step = time_steps({"m": cfg}, 8, 2)["m"]
    with torch.no_grad():
        for b in held:
            m(b.x)
        t = _steps.clock()
        for b in held:
            task.loss(m(b.x), b)
        ev = _steps.clock() - t
    return ev / (ev + every * step)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--Ns", type=int, nargs="+", default=[20, 50, 100])
    _steps.add_timing_args(ap)  # --clock times the steps, the evaluations and the matmul rate alike
    ap.add_argument("--ratios", action="store_true", help="only the step ratios the speed issue tracks")
    ap.add_argument("--ratio-steps", type=int, default=8, help="timed steps per model for the ratios")
    a = ap.parse_args()
    _steps.start_timing(a)
    with flush_denormals():  # as the engine trains
        report(a)


def report(a: argparse.Namespace) -> None:
    peak = matmul_gflops()
    print(f"one thread, steps timed by {a.clock} time; a 256x256 fp32 matmul runs at {peak:.1f} GFLOP/s on this "
          "core (measured now)")
    print(f"{'N':>4} {'model':<14} {'before ms':>9} {'ms/step':>8} {'faster':>7} {'GFLOP/step':>11} {'GFLOP/s':>8} "
          f"{'of matmul':>10}")
    for N in [] if a.ratios else a.Ns:
        cfgs = configs(N, (1, 2))
        times = time_steps(cfgs, a.steps, a.warmup, before=True)
        for k, c in cfgs.items():
            fl = flops(c)
            rate = fl / times[k] / 1e9
            old = times[k + " before"]
            print(f"{N:>4} {k:<14} {old * 1e3:>9.1f} {times[k] * 1e3:>8.1f} {old / times[k]:>6.2f}x {fl / 1e9:>11.3f} "
                  f"{rate:>8.2f} {rate / peak:>10.2f}")
    for N, (x, y) in ((400, ("TF-(2,64)", "LSTM-(1,64)")), (200, ("Mamba-(1,64)", "LSTM-(1,64)")),
                      (20, ("Mamba-(2,64)", "LSTM-(2,64)"))):
        cf = configs(N, (1, 2))
        t = ratio_steps(cf[x], cf[y], a.ratio_steps, 1)
        print(f"step ratio at N = {N}: {x} / {y} = {t['x'] / t['y']:.2f} ({t['x'] * 1e3:.0f} / {t['y'] * 1e3:.0f} ms); "
              f"before: {t['x before'] / t['y']:.2f} ({t['x before'] * 1e3:.0f} ms; "
              f"{t['x before'] / t['x']:.2f}x faster now)")
    for k, c in [] if a.ratios else configs(20, (1,)).items():
        print(f"evaluation's share of a run at N = 20 (1000 examples every 250 steps), {k}: {eval_share(c):.1%}")


if __name__ == "__main__":
    main()
