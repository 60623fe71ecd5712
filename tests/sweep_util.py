"""Shared helpers of the sweep/store/report tests: tiny sweep files and a CLI runner."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ARCHSEP = [sys.executable, "-m", "archsep.cli"]


def tiny_toml(name: str = "tiny", Ns=(2, 3), seeds: int | list = 1, budget: int = 1280, arms=("tf-b", "ffn"),
              threshold: float = 0.9, extra: str = "") -> str:
    arm_txt = {
        "tf-b": '[[arms]]\nlabel = "TF"\narch = "tf-b"\nmodel_params = { mlp_width = 16 }\n',
        "ffn": '[[arms]]\nlabel = "FFN"\narch = "ffn"\n',
    }
    seeds_txt = f"seeds = {list(seeds)}" if isinstance(seeds, (list, tuple)) else f"seeds = {seeds}"
    return (f'name = "{name}"\n{seeds_txt}\n[base]\ntask = "qstr"\ntask_params = {{ d = 4, q = 1 }}\n'
            f"train = {{ budget = {budget}, eval_size = 200, threshold = {threshold}, eval_every = 5 }}\n"
            + "".join(arm_txt[a] for a in arms)
            + f'[grid]\n"task_params.N" = {list(Ns)}\n' + extra
            + ('\n[analysis]\nseparations = [["TF", "FFN"]]\n' if {"tf-b", "ffn"} <= set(arms) else "\n"))


def lstm_toml(name: str, task: str, N: int, budget: int, threshold: float, lr: float = 1e-3, seeds: int = 2) -> str:
    """A sweep of one small LSTM (hidden 16) on `task` at length N: evaluated at every scheduled
    point (every 20 steps), its best checkpoint kept and tested."""
    return (f'name = "{name}"\nseeds = {seeds}\n[base]\ntask = "{task}"\ntask_params = {{ N = {N} }}\n'
            'arch = "lstm"\nmodel_params = { hidden = 16 }\n[base.train]\n'
            f"budget = {budget}\neval_every = 20\neval_size = 300\ntest_size = 300\n"
            f'eval_mode = "every"\nkeep_best = true\nthreshold = {threshold}\nweight_decay = 0.0\nlr = {lr}\n')


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def env() -> dict:
    e = dict(os.environ)
    e.setdefault("OMP_NUM_THREADS", "1")
    e.setdefault("ARCHSEP_THREADS", "1")  # tiny models: one torch thread per worker is fastest
    e["PYTHONUNBUFFERED"] = "1"
    return e


def cli(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([*ARCHSEP, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env(),
                          timeout=timeout)


def search_toml(name: str = "tiny-search", seeds: int = 2, steps=(40, 80, 160), trials: int = 4, keep: float = 0.5,
                extra: str = "") -> str:
    """A small search: index lookup at N = 6 and 8, an LSTM searched over lr x layers, a one-layer
    Transformer as declared (`sweeps.search`)."""
    return (f'name = "{name}"\nseeds = {seeds}\n[base]\ntask = "index-lookup"\n'
            'train = { eval_every = 20, eval_size = 300, test_size = 300, eval_mode = "every", keep_best = true, '
            'threshold = 0.01, weight_decay = 0.0 }\n'
            '[[arms]]\nlabel = "LSTM"\narch = "lstm"\nmodel_params = { hidden = 16 }\n'
            '[[arms]]\nlabel = "TF"\narch = "tf-preln"\n'
            'model_params = { layers = 1, width = 16, heads = 1, positions = "learned", causal = true }\n'
            '[grid]\n"task_params.N" = [6, 8]\n'
            f'[search]\nsteps = {list(steps)}\nkeep = {keep}\ntrials = {trials}\n'
            '[search.axes]\n"train.lr" = [1e-2, 3e-3, 1e-3]\n'
            '[search.arms.LSTM]\n"model_params.layers" = [1, 2]\n' + extra)
