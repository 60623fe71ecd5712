"""The cost model behind --dry-run: what it counts, and that a dry run runs and creates nothing."""
from __future__ import annotations

import subprocess
import sys

from archsep.engine import cost
from archsep.engine.planning import step_flops
from archsep.experiments import EXPERIMENTS


def test_estimate_counts_every_run_and_skips_finished_ones():
    configs = EXPERIMENTS.get("lookup-fig2")().plan("quick")
    est = cost.estimate(configs, workers=2)
    assert sum(a.runs for a in est["archs"]) == len(configs) == est["to_run"]
    want = sum(c.train.budget // c.train.batch_size * step_flops(c) for c in configs)
    assert abs(est["train_flops"] - want) <= 1e-9 * want
    assert est["cpu_core_s"] / 2 <= est["cpu_wall_s"] + 1e-9 <= est["cpu_core_s"] + 1e-9
    assert est["gpu_s"] > 0
    done = {c.run_id for c in configs[:2]}
    part = cost.estimate(configs, workers=2, finished=done)
    assert part["to_run"] == len(configs) - 2 and part["cpu_core_s"] < est["cpu_core_s"]
    assert part["train_flops"] < est["train_flops"]


def test_evaluations_follow_the_schedule():
    (c,) = [c for c in EXPERIMENTS.get("lookup-fig2")().plan("quick")][:1]
    n, examples = cost.evaluations(c, 4000)
    assert n == 4000 // c.train.eval_every
    assert examples == n * c.train.eval_size  # size presets evaluate in full ("every")


def test_dry_run_prints_costs_and_creates_nothing(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "archsep", "reproduce", "qstr-fig1a", "--quick", "--dry-run",
                        "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "GFLOP/step" in p.stdout and "on this machine about" in p.stdout and "H100" in p.stdout
    for label in ("TF", "RNN", "FFN"):
        assert f"\n  {label} " in p.stdout
    assert not out.exists()
