"""What a run's checkpoint costs (engine/checkpoint.py), against the training it protects: for
the longest run of each long preset, the time of one save and one load of its whole state
(parameters, AdamW moments, a best-checkpoint copy), and of one training step, taken in turns
on the same machine in one run. The overhead at the default interval is save / 600 s.

    python benchmarks/checkpoint.py [--steps 5]

Ratio: training steps one save costs (save / step), and the share of training time at the
default interval (ARCHSEP_CHECKPOINT_S = 600).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from archsep.engine import checkpoint
from archsep.engine.checkpoint import Checkpoints
from archsep.engine.stack import make_optimizer
from archsep.experiments import EXPERIMENTS
from archsep.runs.executors import CHECKPOINT_S

LONGEST = [("qstr-fig3", "full", "RNN", 5), ("dyck-fig2", "paper-n", "TF-(2,64)", 400),
           ("lookup-fig2", "paper-n", "Mamba-64", 400)]


def pick(preset: str, scale: str, label: str, x: int):
    exp = EXPERIMENTS.get(preset)()
    axis = exp.axis or "N"
    return next(c for c in exp.plan(scale) if c.label == label and c.task_params[axis] == x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)  # as a worker trains
    print(f"{'run':<34}{'params':>10}{'MB':>8}{'step s':>9}{'save s':>9}{'load s':>9}{'save/step':>11}"
          f"{'at 600 s':>10}")
    for preset, scale, label, x in LONGEST:
        cfg = pick(preset, scale, label, x)
        task = cfg.build_task()
        torch.manual_seed(0)
        model = cfg.model_config().build(task.spec)
        model.prune_to_readout()
        opt = make_optimizer(list(model.parameters()), cfg.train.lr, cfg.train.weight_decay)
        g = torch.Generator().manual_seed(0)
        steps, saves, loads = [], [], []
        with tempfile.TemporaryDirectory() as d:
            ck = Checkpoints(d, 0.0)
            for i in range(a.steps + 1):  # the first step allocates: untimed
                b = task.sample(cfg.train.batch_size, g)
                t = time.perf_counter()
                opt.zero_grad(set_to_none=True)
                task.loss(model(b.x), b).backward()
                opt.step()
                if i:
                    steps.append(time.perf_counter() - t)
                state = {"step": i + 1, "model": model.state_dict(), "opt": opt.state_dict(),
                         "best_state": {k: v.clone() for k, v in model.state_dict().items()}}
                t = time.perf_counter()
                checkpoint.save(ck, cfg, state)
                saves.append(time.perf_counter() - t)
                t = time.perf_counter()
                assert checkpoint.load(ck, cfg) is not None
                loads.append(time.perf_counter() - t)
            mb = ck.path(cfg.run_id).stat().st_size / 2**20
        step, save, load = (statistics.median(v) for v in (steps, saves, loads))
        name = f"{preset} {scale} {label} {'q' if preset == 'qstr-fig3' else 'N'}={x}"
        print(f"{name:<34}{sum(p.numel() for p in model.parameters()):>10}{mb:>8.1f}{step:>9.3f}{save:>9.3f}"
              f"{load:>9.3f}{save / step:>11.1f}{100 * save / CHECKPOINT_S:>9.3f}%")


if __name__ == "__main__":
    main()
