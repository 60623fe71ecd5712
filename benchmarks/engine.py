"""Plain path vs engine, side by side on the same settings and seeds (issue 3).

plain : one model at a time, held-out evaluation on 5000 examples every 10 steps.
engine: the seeds stacked into one vmapped computation where that pays, progressive
        validation deciding when to run the held-out evaluation, screened evaluations near the
        threshold (same schedule, same answer; see tests/engine/test_train.py).

Both run to the threshold or the step cap, so the ratio is end to end. Prints the wall-time
ratio, model-steps/s and the achieved fraction of fp32 peak (peak measured here, same run)
end to end and of the engine's training step alone (against a peak measured right after it),
and the held-out evaluations each made
(full ones; in brackets the engine's screened-out ones, see heldout.screen).

    .venv/bin/python benchmarks/engine.py [--steps 300] [--seeds 5] [--threads 2] [--cases tf:4,gru:12]
"""
from __future__ import annotations

import argparse
import time

import torch

from archsep.config import RunConfig, TrainConfig
from archsep.engine.stack import Single, Stacked
from archsep.engine.planning import step_flops, worth_stacking
from archsep.engine.train import train_many, train_run

ARCHS = {"tf": ("tf", {"heads": 1, "mlp_width": 100}), "ffn": ("ffn", {}),
         "gru": ("rnn", {"cell": "gru", "hidden": 500})}


def peak_gflops(n: int = 2048, reps: int = 10) -> float:
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - t) / 1e9


def configs(arch: str, N: int, seeds: int, steps: int, mode: str) -> list[RunConfig]:
    name, params = ARCHS[arch]
    train = TrainConfig(threshold=0.7, budget=steps * 64, eval_size=5000, eval_every=10, eval_mode=mode)
    return [RunConfig("qstr", name, {"N": N, "q": 1, "d": 10}, params, train, seed=s) for s in range(seeds)]


def train_step_gflops(arch: str, N: int, seeds: int, steps: int = 20) -> float:
    """GFLOP/s of the engine's training step alone (sampling excluded), stacked as the engine
    would stack these seeds: the '% of peak' of the training step itself."""
    cs = configs(arch, N, seeds, steps, "progressive")
    task = cs[0].build_task()
    models = [c.model_config().build(task.spec) for c in cs]
    stacked = len(cs) > 1 and worth_stacking(cs[0])
    engine = Stacked(models, 1e-3, 0.1) if stacked else Single(models[0], 1e-3, 0.1)
    gen = torch.Generator().manual_seed(0)
    batches = [[task.sample(64, gen) for _ in range(len(engine))] for _ in range(3)]

    def step(bs):
        preds = engine.forward([b.x for b in bs])
        engine.opt.zero_grad(set_to_none=True)
        torch.stack([task.loss(p, b) for p, b in zip(preds, bs)]).sum().backward()
        engine.opt.step()

    step(batches[0])
    t = time.perf_counter()
    for i in range(steps):
        step(batches[i % 3])
    return len(engine) * steps * step_flops(cs[0]) / (time.perf_counter() - t) / 1e9


def model_steps(results) -> int:
    return sum(r.train_curve[-1][0] // 64 if r.train_curve else 0 for r in results)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300, help="step cap per run")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default="tf:4,tf:12,ffn:4,ffn:12,gru:4,gru:12")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    peak = peak_gflops()
    print(f"fp32 peak (2048^3 matmul, {a.threads} threads): {peak:.1f} GFLOP/s")
    print(f"{'case':<8}{'plain s':>9}{'engine s':>10}{'ratio':>7}{'plain st/s':>12}{'engine st/s':>12}"
          f"{'plain %pk':>10}{'engine %pk':>11}{'step %pk':>9}  evals plain | engine (screened out)  "
          "samples plain | engine")
    for case in a.cases.split(","):
        arch, N = case.split(":")
        N = int(N)
        flops = step_flops(configs(arch, N, 1, a.steps, "every")[0])
        t = time.perf_counter()
        plain = [train_run(c) for c in configs(arch, N, a.seeds, a.steps, "every")]
        tp = time.perf_counter() - t
        t = time.perf_counter()
        fast = train_many(configs(arch, N, a.seeds, a.steps, "progressive"))
        te = time.perf_counter() - t
        sp, se = model_steps(plain) / tp, model_steps(fast) / te
        step_gflops, near_peak = train_step_gflops(arch, N, a.seeds), peak_gflops()
        step_pk = 100 * step_gflops / near_peak  # a shared VM's speed drifts: compare with a peak taken just now
        evals = (sum(len(r.curve) for r in plain), sum(len(r.curve) for r in fast),
                 sum(r.eval_schedule["screened_out"] for r in fast))
        print(f"{case:<8}{tp:>9.1f}{te:>10.1f}{tp / te:>6.1f}x{sp:>12.1f}{se:>12.1f}"
              f"{100 * sp * flops / 1e9 / peak:>9.1f}%{100 * se * flops / 1e9 / peak:>10.1f}%{step_pk:>8.1f}%  "
              f"{evals[0]} | {evals[1]} ({evals[2]})  "
              f"{[r.samples for r in plain]} | {[r.samples for r in fast]}", flush=True)


if __name__ == "__main__":
    main()
