"""Every preset on the same machinery: its runs are rows of archsep.db, `archsep sweep P` plans
the same runs as `reproduce`, status/export/report read any preset's store, and a kill -9 of a
paper-A reproduction loses and duplicates nothing."""
from __future__ import annotations

import re

import os
import signal
import sqlite3
import subprocess
import time

import pandas as pd
import pytest

from archsep.cli import main
from archsep.experiments import EXPERIMENTS
from archsep.experiments.samples import SampleComplexityExperiment
from archsep.experiments.size import SizeExperiment, SizeScale, lstm, tf
from archsep.results import RunResult
from archsep.experiments import plan
from archsep.store import DB_NAME, open_store
from sweep_util import ARCHSEP, cli, env


@pytest.mark.parametrize("name", EXPERIMENTS.names())
def test_every_experiment_plans_runs_with_unique_ids_at_every_scale(name):
    exp = EXPERIMENTS.get(name)()
    assert "quick" in exp.scales and "full" in exp.scales
    for scale in exp.scales:
        cfgs = exp.plan(scale)
        ids = [c.run_id for c in cfgs]
        assert cfgs and len(set(ids)) == len(ids)
        assert ids == [c.run_id for c in plan.from_experiment(name, scale).configs]  # sweep P = reproduce P


class TinyLookup(SizeExperiment):
    task = "index-lookup"
    quick = full = SizeScale(Ns=(6, 8), archs=(tf(1, (16,), heads=1), lstm((8,))), lrs=(3e-3, 1e-3), steps=40,
                             eval_every=20, val_size=100, test_size=200)


def test_a_size_preset_reads_through_status_export_and_report(tmp_path, monkeypatch, capsys, registered):
    registered(EXPERIMENTS, "tiny-lookup", TinyLookup)
    TinyLookup.registry_name = "tiny-lookup"
    out = tmp_path / "r"
    assert main(["reproduce", "tiny-lookup", "--quick", "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    assert main(["status", str(out)]) == 0
    assert "8 finished, 0 pending" in capsys.readouterr().out
    assert main(["export", str(out), "--format", "csv", "-o", str(tmp_path / "runs.csv")]) == 0
    df = pd.read_csv(tmp_path / "runs.csv")
    assert len(df) == 8 and df["test_metric"].notna().all() and set(df["train.lr"]) == {3e-3, 1e-3}
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text()
    assert "tiny-lookup" in html and "test metric" in html
    # the preset's own figures; no heat map, as each family has one width (issue 50)
    assert "tiny-lookup (quick): accuracy" in html and "tiny-lookup (quick): val_curves" in html
    assert "heatmaps" not in html
    # `archsep sweep` of the preset into a fresh directory plans the same run ids
    capsys.readouterr()
    assert main(["sweep", "tiny-lookup", "--quick", "--dry-run"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]
              if re.fullmatch(r"[0-9a-f]{16}", line.split()[0] if line.split() else "")}  # then the cost table
    with open_store(out, create=False) as st:
        assert listed == {r["run_id"] for r in st.rows()}


def _rows(db) -> dict[str, tuple]:
    if not db.exists():
        return {}
    con = sqlite3.connect(db)
    try:
        return {r[0]: r for r in con.execute("SELECT run_id, test_metric, committed_at, curve FROM runs")}
    except sqlite3.Error:
        return {}
    finally:
        con.close()


@pytest.mark.slow
def test_kill_9_during_a_paper_a_reproduction_then_rerun_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "lookup"
    db = out / DB_NAME
    # a quarter of the quick scale's 4000 steps: the kill and the resume are what is tested, and
    # the same --set on both invocations gives the same run ids
    short = ("--set", "train.budget=64000")
    p = subprocess.Popen([*ARCHSEP, "reproduce", "lookup-fig2", "--quick", *short, "--out", str(out), "--workers",
                          "2", "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(),
                         start_new_session=True)
    try:
        deadline = time.time() + 240
        while len(_rows(db)) < 1 and time.time() < deadline and p.poll() is None:
            time.sleep(0.1)
        os.killpg(p.pid, signal.SIGKILL)  # the driver and its workers, mid-reproduction
    finally:
        p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    before = _rows(db)
    assert 1 <= len(before) < 6, f"the kill should land mid-run, {len(before)} of 6 were done"
    r = cli("reproduce", "lookup-fig2", "--quick", *short, "--out", out, "--workers", "2", timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"{6 - len(before)} to run, {len(before)} already done" in r.stderr
    after = _rows(db)
    with open_store(out, create=False) as st:
        planned = {q["run_id"] for q in st.planned()}
        assert st.status()["pending"] == 0
    assert set(after) == planned and len(after) == 6  # every run once: run_id is the key
    for rid, row in before.items():  # finished runs were kept, not recomputed
        assert after[rid] == row
    cells = pd.read_csv(out / "runs.csv")
    assert len(cells) == 6 and cells["test_acc"].notna().all()


SAMPLE_PRESETS = [n for n in EXPERIMENTS.names() if issubclass(EXPERIMENTS.get(n), SampleComplexityExperiment)]


@pytest.mark.parametrize("name", SAMPLE_PRESETS)
def test_a_sample_preset_runs_csv_names_each_run_at_its_point_of_the_axis(name):
    """runs.csv gives each run its value of the figure's axis: qstr-fig3's rows said N = 7 for
    every run and nothing of q, so its runs at q = 1..5 could be told apart only by their ids."""
    exp = EXPERIMENTS.get(name)()
    cfgs = exp.plan("quick", "cpu")
    rs = [RunResult(c.run_id, c.to_dict(), "ok", 1000 * (1 + i), 640, 0.1, 0.1) for i, c in enumerate(cfgs)]
    rows = exp.table(exp.analyze(rs, "quick"))
    by_id = {c.run_id: c for c in cfgs}
    assert len(rows) == len(cfgs)
    for row in rows:
        planned = by_id[row["run_id"]].task_params
        assert row[exp.axis] == planned[exp.axis] and row["N"] == planned["N"]
    assert {row[exp.axis] for row in rows} == {c.task_params[exp.axis] for c in cfgs}
    if exp.axis != "N":  # q gets a column of its own beside N (fixed at 7)
        assert list(rows[0])[:4] == ["arch", "N", exp.axis, "seed"]
