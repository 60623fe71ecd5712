"""On a GPU: where the training loop synchronises with the host, and the time a step of
qstr-fig3's RNN takes at q = 1, 2, 5 in one process (eval included). Run from the repo root with
PYTHONPATH=src."""
import dataclasses
import sys
import time
import traceback
import warnings

import torch

from archsep import RunConfig, TrainConfig
from archsep.engine.train import train_run
from archsep.experiments.plan import from_experiment

dev = "cuda" if torch.cuda.is_available() else "cpu"
c = RunConfig("qstr", "tf", {"N": 4, "d": 4}, {"mlp_width": 32},
              TrainConfig(threshold=0.7, budget=64 * 50, eval_size=500, device=dev, eval_every=10_000,
                          stop_at_threshold=False), 0)
train_run(c)
seen: dict[str, int] = {}


def show(message, category, filename, lineno, file=None, line=None):
    if "synchroniz" in str(message):
        st = "".join(traceback.format_stack(limit=7)[:-1])
        seen[st] = seen.get(st, 0) + 1


if dev == "cuda":
    torch.cuda.set_sync_debug_mode("warn")
with warnings.catch_warnings():
    warnings.simplefilter("always")
    warnings.showwarning = show
    train_run(c)
if dev == "cuda":
    torch.cuda.set_sync_debug_mode(0)
print(f"sync sites in 50 steps: {len(seen)}", flush=True)
for st, n in sorted(seen.items(), key=lambda x: -x[1]):
    print(f"--- {n} times\n{st}", flush=True)

runs = {(r.task_params["q"], r.seed): r for r in from_experiment("qstr-fig3", "full", dev, only=["RNN"]).configs}
for q, steps in ((1, 1500), (2, 1500), (5, 400)):
    r = runs[(q, 0)]
    r = dataclasses.replace(r, train=dataclasses.replace(r.train, budget=64 * steps))
    t = time.perf_counter()
    res = train_run(r)
    dt = time.perf_counter() - t
    print(f"RNN q={q} hidden={500 * q}: {steps} steps in {dt:.1f} s ({dt / steps * 1e3:.2f} ms/step, eval "
          f"included), status {res.status}, samples {res.samples}", flush=True)
sys.exit(0)
