"""Sweep files: expansion, validation, presets as sweeps, the local executor and resuming."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from archsep.experiments import plan
from archsep.sweeps import file as sw
from archsep.errors import ArchsepError
from archsep.runs.executors import plan_batches
from archsep.runs.runner import run_configs
from archsep.experiments import PRESETS
from archsep.store import open_store
from sweep_util import tiny_toml, write


def test_grid_is_arms_times_axes_times_seeds_with_distinct_identities():
    s = sw.parse(tiny_toml(Ns=(2, 3, 4), seeds=2, extra='train.lr = [1e-3, 3e-4]'))
    assert len(s.configs) == 2 * 3 * 2 * 2
    assert len({c.run_id for c in s.configs}) == len(s.configs)
    assert {c.label for c in s.configs} == {"TF", "FFN"}
    assert {c.train.lr for c in s.configs} == {1e-3, 3e-4}  # the unquoted dotted key is an axis too
    assert {c.task_params["N"] for c in s.configs} == {2, 3, 4}
    assert all(c.model_params == {"mlp_width": 16} for c in s.configs if c.arch == "tf-b")
    assert s.analysis["separations"] == [["TF", "FFN"]] and s.analysis["x"] == "task_params.N"


def test_seed_lists_and_a_seed_axis():
    a = sw.parse(tiny_toml(seeds=[3, 7]))
    assert sorted({c.seed for c in a.configs}) == [3, 7]
    text = tiny_toml(extra="seed = [0, 1, 2]").replace("seeds = 1\n", "")
    assert sorted({c.seed for c in sw.parse(text).configs}) == [0, 1, 2]


@pytest.mark.parametrize("name, scale", [(n, s) for n in PRESETS.names() for s in PRESETS.get(n).scales])
def test_a_preset_is_a_sweep_and_its_toml_gives_the_same_runs(name, scale):
    s = plan.load(name, scale)
    assert s.preset == name and s.configs
    assert [c.run_id for c in s.configs] == [c.run_id for c in PRESETS.get(name)().plan(scale)]
    assert s.analysis["separations"] or not name.startswith("qstr-fig1")
    again = sw.parse(s.source)
    assert sorted(c.run_id for c in again.configs) == sorted(c.run_id for c in s.configs)
    assert again.sweep_id == s.sweep_id


def test_validation_names_the_key_and_the_closest_valid_one():
    with pytest.raises(ArchsepError, match=r"grid.task_params.NN\[0\]: unknown key 'NN' \(did you mean 'N'\?\)"):
        sw.parse(tiny_toml(extra='"task_params.NN" = [2]'))
    with pytest.raises(ArchsepError, match=r"unknown key 'grdi' \(did you mean 'grid'\?\)"):
        sw.parse("grdi = 1\n" + tiny_toml())
    with pytest.raises(ArchsepError, match=r"grid.train.lr: empty axis"):
        sw.parse(tiny_toml(extra='"train.lr" = []'))
    with pytest.raises(ArchsepError, match=r"base.train.budget: expected an integer"):
        sw.parse(tiny_toml().replace("budget = 1280", 'budget = "lots"'))
    with pytest.raises(ArchsepError, match=r"q: must be <= N"):
        sw.parse(tiny_toml().replace("q = 1", "q = 3"))


def test_runs_that_differ_only_in_label_are_rejected():
    text = tiny_toml(arms=("ffn",)).replace("[grid]", '[[arms]]\nlabel = "FFN2"\narch = "ffn"\n[grid]')
    with pytest.raises(ArchsepError, match="same run"):
        sw.parse(text)


def test_plan_batches_groups_seeds_whatever_the_number_of_workers():
    """Which runs are stacked together is a function of the configs alone, so a run's numbers
    cannot depend on --workers (a stacked computation's rounding depends on its partners)."""
    s = sw.parse(tiny_toml(Ns=(2, 3), seeds=4, arms=("tf-b",)))
    plans = [[[c.run_id for c in b] for b in plan_batches(s.configs, w)] for w in (1, 2, 8)]
    assert plans[0] == plans[1] == plans[2]
    assert sorted(len(b) for b in plans[0]) == [4, 4]


def test_batches_start_slowest_first_by_modelled_time_not_by_flops(tmp_path, monkeypatch):
    """A run's modelled time (what a dry run measured) orders the batches: the run that is cheap
    in FLOPs but slow on the clock starts first. The batches themselves (which runs stack) are the
    same whatever the order."""
    from archsep.runs import runner

    s = sw.parse(tiny_toml(Ns=(2, 3), seeds=1, arms=("tf-b", "ffn")))
    by_flops = [[c.run_id for c in b] for b in plan_batches(s.configs)]
    firsts = [b[0] for b in plan_batches(s.configs)]  # the most FLOPs first
    slow_first = {c.run_id: float(i + 1) for i, c in enumerate(firsts)}  # ... the least time first
    by_time = [[c.run_id for c in b] for b in plan_batches(s.configs, seconds=lambda c: slow_first[c.run_id])]
    assert len(by_flops) > 1 and sorted(map(sorted, by_time)) == sorted(map(sorted, by_flops))
    assert by_time == by_flops[::-1] and [slow_first[b[0]] for b in by_time] == sorted(slow_first.values())[::-1]
    monkeypatch.setattr(runner, "progress_weights", lambda cfgs, _: {c.run_id: slow_first[c.run_id] for c in cfgs})
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    seen: list = []
    run_configs(s.configs, tmp_path, workers=1, progress=False, on_result=lambda r: seen.append(r.run_id))
    assert seen == [b[0] for b in by_time]


def test_a_run_that_goes_on_from_its_checkpoint_starts_before_new_ones(tmp_path, monkeypatch):
    """A rerun finishes what it began: the batch with a checkpoint of its own starts first, the
    rest most expensive first as before. Another config's checkpoint at that name (a foreign
    file) reorders nothing."""
    from archsep.engine import checkpoint
    from archsep.engine.checkpoint import Checkpoints
    from archsep.runs import runner

    s = sw.parse(tiny_toml(Ns=(2, 3), seeds=1, arms=("tf-b", "ffn")))
    order = [b[0] for b in plan_batches(s.configs)]  # the most expensive first
    assert len(order) == 4
    given: list = []  # the steps saved, as the progress bar's weights are given them

    def weights(cfgs, started):
        given.append(dict(started))
        return {c.run_id: 4.0 - order.index(c) for c in cfgs}

    monkeypatch.setattr(runner, "progress_weights", weights)
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    last, other = order[-1], order[0]
    # the planner's order given the resumed run ids (a dry run's schedule uses it too)
    assert [b[0] for b in plan_batches(s.configs, resumed={last.run_id})] == [last, *order[:-1]]
    for out, own in ((tmp_path / "foreign", other), (tmp_path / "own", last)):
        ck = Checkpoints.beside(out)
        # a state with only a step: the run it names starts afresh (it does not fit), but it is a checkpoint
        assert checkpoint.save(ck, [own], {"step": 7})
        ck.path(own.run_id).rename(ck.path(last.run_id))
        seen: list = []
        run_configs(s.configs, out, workers=1, progress=False, on_result=seen.append)
        first = [last] if own is last else []
        assert [r.run_id for r in seen] == [c.run_id for c in first + [c for c in order if c not in first]]
        assert not (out / "checkpoints").exists()  # served (or foreign at a finished run's name): removed
        assert given.pop() == ({last.run_id: 7} if own is last else {})  # a foreign file saved no step of this run


def test_local_sweep_runs_once_and_resumes_without_recomputing(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    s = sw.parse(tiny_toml(Ns=(2,), seeds=2))
    first = run_configs(s.configs, tmp_path, workers=1, progress=False, sweep=s)
    assert {r.status for r in first} <= {"ok", "censored"}
    with open_store(tmp_path) as st:
        stamps = {r["run_id"]: r["committed_at"] for r in st.rows()}
        status = st.status()
    assert status["finished"] == 4 and status["pending"] == 0 and status["sweeps"][0]["done"] == 4
    seen = []
    again = run_configs(s.configs, tmp_path, workers=1, progress=False, on_result=seen.append, sweep=s)
    assert seen == [] and [r.to_dict() for r in again] == [r.to_dict() for r in first]
    with open_store(tmp_path) as st:
        assert {r["run_id"]: r["committed_at"] for r in st.rows()} == stamps


def test_cli_dry_run_and_print_toml(tmp_path, capsys, monkeypatch):
    from archsep.cli import main

    monkeypatch.chdir(tmp_path)
    f = write(tmp_path / "s.toml", tiny_toml(Ns=(2, 3), seeds=2))
    assert main(["sweep", str(f), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("tiny: 8 run(s)")
    assert len([line for line in out.splitlines() if line.startswith("  ") and len(line.split()[0]) == 16]) == 8
    assert "GFLOP/step" in out and "on this machine about" in out  # and what they cost
    assert main(["sweep", "qstr-fig1a", "--quick", "--print-toml"]) == 0
    assert sw.parse(capsys.readouterr().out).sweep_id == plan.load("qstr-fig1a", "quick").sweep_id
    assert not (tmp_path / "results").exists()


def test_separation_statement_says_whether_the_ci_excludes_zero():
    from archsep.analysis.separation import separation

    rng = np.random.default_rng(0)
    flat = {n: 1000 * np.exp(rng.normal(0, 0.05, 4)) for n in (2, 4, 8)}
    linear = {n: 500 * n * np.exp(rng.normal(0, 0.05, 4)) for n in (2, 4, 8)}
    s = separation("TF", flat, "FFN", linear)
    assert s.excludes_zero and s.held and 0.8 < s.difference < 1.2
    assert "lies above 0" in s.text()
    same = separation("A", flat, "B", {n: v * 1.1 for n, v in flat.items()})
    assert not same.excludes_zero and "includes 0" in same.text()
    # a censored run of the better architecture leaves its exponent unidentified: the statement
    # is made in samples (FFN needs about 4x TF's samples at N = 8)
    cens = {n: np.array([n == 8, False, False, False]) for n in flat}
    blocked = separation("TF", flat, "FFN", linear, censored_a=cens)
    assert blocked.excludes_zero and blocked.basis == "samples" and blocked.held
    assert "exponents not compared: TF has censored runs" in blocked.text()
    # censored runs of the worse one above its smallest N only make the statement conservative
    ok = separation("TF", flat, "FFN", linear, censored_b=cens)
    assert ok.held and "conservative" in ok.text()
    # one run at some N gives no per-seed slopes: the statement says there is no interval
    one = {**linear, 8: linear[8][:1]}
    lone = separation("TF", flat, "FFN", one)
    assert not lone.held and "no interval: fewer than two runs at some N" in lone.text()
    assert "nan" not in lone.text() and "includes 0" not in lone.text()


def test_analysis_reports_censored_points_as_above_the_budget():
    from archsep.analysis.analyze import analyze
    from archsep.engine.train import RunResult

    def run(label, N, seed, samples, status):
        cfg = {"task": "qstr", "arch": "tf-b", "label": label, "seed": seed, "task_params": {"N": N},
               "model_params": {}, "train": {"budget": 1000}}
        return RunResult(f"{label}{N}{seed}", cfg, status, samples, 64, 0.5, 0.5)

    rs = [run("TF", N, s, 1000 if N == 4 else 100 * N, "censored" if N == 4 else "ok") for N in (2, 3, 4)
          for s in range(3)]
    a = analyze(rs)
    p4 = [p for p in a["points"] if p["x"] == 4][0]
    assert p4["median_text"] == "> 1000" and p4["n_censored"] == 3
    assert a["fits"]["TF"]["censored_data"] is True
    json.dumps(a)  # JSON-safe


def test_every_example_sweep_file_is_valid():
    root = Path(__file__).resolve().parents[2] / "examples" / "sweeps"
    files = sorted(root.glob("*.toml"))
    assert files
    for f in files:
        s = plan.load(f)
        assert s.configs and len({c.run_id for c in s.configs}) == len(s.configs), f
