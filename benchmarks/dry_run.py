"""How long `--dry-run` takes, and how far its extrapolated step times are from real ones.

For each preset: the estimate's own wall time with an empty step-cost cache (what a first dry
run costs), again with the cache it left (a second dry run), and its CPU and modelled GPU totals.
With --check, every family of shapes that the estimate extrapolated (lengths beyond its three
shortest) is then timed for real at its longest length, alone, and the ratio estimate / measured
is printed (the issue's bar: within 2x). Both are a step on the longest sequences; a task
trained on variable lengths scales that to its mean length in the same way for both. The
estimate times its shapes two at a time (--workers 2), as two workers train: on this VM a step
timed beside another is slower than alone, so ratios above 1 are partly that.

    .venv/bin/python benchmarks/dry_run.py [--scale full] [--presets lookup-fig2,dyck-fig2] [--check]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from archsep.runs import cost, timing
from archsep.engine.planning import longest_step_flops
from archsep.experiments import EXPERIMENTS

PAPER_A = ("lookup-fig2", "dyck-fig2", "equality-fig4", "mamba-width", "nn-fig")


def fresh() -> None:
    """As a new process: nothing measured or counted yet (the cache file aside)."""
    from archsep.engine import planning

    timing._STEPS.clear()
    timing._TRAIN.clear()
    timing._RATIOS.clear()
    timing._HOW.clear()
    timing._FLOPS_EST.clear()
    planning._FLOPS.clear()
    planning._OPS.clear()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", default="full")
    ap.add_argument("--presets", default=",".join(PAPER_A))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--check", action="store_true", help="time the longest length of each extrapolated family")
    args = ap.parse_args()
    os.environ["ARCHSEP_CACHE_DIR"] = tempfile.mkdtemp(prefix="archsep-dry-run-")
    print(f"{'preset':<16}{'runs':>6}{'first':>9}{'second':>9}{'timed':>7}{'extrap.':>9}"
          f"{'CPU wall':>11}{'core-time':>11}{'GPU':>9}")
    for name in args.presets.split(","):
        exp = EXPERIMENTS.get(name)()
        if args.scale not in exp.scales:
            print(f"{name:<16} (no {args.scale} scale)")
            continue
        configs = exp.plan(args.scale, "cpu")
        fresh()
        t0 = time.perf_counter()
        est = cost.estimate(configs, args.workers)
        first = time.perf_counter() - t0
        fresh()
        t0 = time.perf_counter()
        cost.estimate(configs, args.workers)
        second = time.perf_counter() - t0
        print(f"{name:<16}{len(configs):>6}{first:>8.1f}s{second:>8.1f}s{est['shapes']['timed']:>7}"
              f"{est['shapes']['extrapolated']:>9}{cost.hms(est['cpu_wall_s']):>11}{cost.hms(est['cpu_core_s']):>11}"
              f"{cost.hms(est['gpu_s']):>9}", flush=True)
        if not args.check:
            continue
        fams: dict[str, dict] = {}
        for c in configs:
            fam, N = cost._family(c)
            fams.setdefault(fam, {})[N] = c
        for by_N in fams.values():
            if len(by_N) < 3:
                continue
            longest = by_N[max(by_N)]
            key = cost.cost_key(longest)
            guess, guess_flops = timing._STEPS[key].cpu_s, timing._STEPS[key].flops  # both at the longest sequence
            del timing._STEPS[key]
            real = cost.step_cost(longest).cpu_s
            flops = longest_step_flops(longest)
            print(f"    {longest.model_config().short_name():<28} N={max(by_N):<5g} step: "
                  f"estimated {guess * 1e3:8.1f} ms, measured {real * 1e3:8.1f} ms, ratio {guess / real:5.2f}; "
                  f"FLOPs ratio {guess_flops / flops:5.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
