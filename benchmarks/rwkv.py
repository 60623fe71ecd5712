"""RWKV's chunked wkv (models/mixers/rwkv.py) against the query-block softmax it replaced, side by side:
the per-step time of RWKV-(2,64) on index lookup (fixed length N), batch 64, as the engine trains
it (readout pruned), with tf-preln-(2,64) timed in the same run as the yardstick the mixer table
(benchmarks/mixers.py, docs/atlas.md) uses.

    python benchmarks/rwkv.py [--Ns 20 200] [--steps 5] [--warmup 2]

The old form is kept here only as the baseline: every query block of 16 positions took the
softmax over all L keys, (B, 16, L, W) per block, so work grew as L^2 * W; the chunked form takes
the softmax within a chunk of 16 and carries the positions before it as one rescaled term (work
L * 16 * W). Both variants train the same weights on the same batches, taking turns, one thread.
"""
from __future__ import annotations

import argparse
import statistics
import types

import torch
from _steps import alternate_steps, time_before_after

from archsep.config import RunConfig
from archsep.models.mixers import rwkv

QUERY_BLOCK = 16


def wkv_query_blocks(k, v, w, u, last_only=False):
    """The pre-chunk parallel form: per block of 16 queries, a softmax over every key i <= t."""
    L = k.shape[1]
    i = torch.arange(L)
    out = []
    for s in ([L - 1] if last_only else range(0, L, QUERY_BLOCK)):
        t = i[s:s + (1 if last_only else QUERY_BLOCK)]  # (Q,)
        lag = (t[:, None] - 1 - i[None]).to(k.dtype)  # (Q, L)
        logits = k[:, None] - lag[None, :, :, None] * w  # (B, Q, L, W)
        logits = torch.where((t[:, None] == i[None])[None, :, :, None], k[:, None] + u, logits)
        logits = logits.masked_fill((i[None] > t[:, None])[None, :, :, None], float("-inf"))
        out.append((logits.softmax(2) * v[:, None]).sum(2))  # (B, Q, W)
    return torch.cat(out, 1)


def _old_forward(self, h, last_only=False):
    prev = torch.cat([torch.zeros_like(h[:, :1]), h[:, :-1]], 1)
    k, v, r = self._kvr(h, prev)
    y = wkv_query_blocks(k, v, self.w_log.exp(), self.u, last_only)
    return self.out((r[:, -1:] if last_only else r) * y)


def before(model):
    for m in model.modules():
        if isinstance(m, rwkv.TimeMix):
            m.forward = types.MethodType(_old_forward, m)
    return model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--Ns", type=int, nargs="+", default=[20, 200])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"{'N':>4} {'RWKV before ms':>15} {'RWKV after ms':>14} {'speed-up':>9} {'tf-preln ms':>12} "
          f"{'after / tf':>11}")
    for N in args.Ns:
        task = {"N": N, "train_lengths": "fixed"}
        cfg = RunConfig("index-lookup", "rwkv", task, {"layers": 2, "width": 64})
        old, new = time_before_after(cfg, before, args.steps, args.warmup)
        tcfg = RunConfig("index-lookup", "tf-preln", task, {"layers": 2, "width": 64})
        t = tcfg.build_task()
        torch.manual_seed(0)
        tf = tcfg.model_config().build(t.spec)
        tf.prune_to_readout()
        g = torch.Generator().manual_seed(0)
        tft = alternate_steps({"tf": tf}, t, [t.sample(64, g) for _ in range(args.warmup + args.steps)],
                              args.warmup)["tf"]
        o, n, f = (1000 * statistics.median(x) for x in (old, new, tft))
        print(f"{N:>4} {o:>15.1f} {n:>14.1f} {sum(old) / sum(new):>8.2f}x {f:>12.1f} {n / f:>10.2f}x", flush=True)


if __name__ == "__main__":
    main()
