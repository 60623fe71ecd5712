"""What a summary says is what ran (issue 26): a structural --set keeps runs distinct (or is
refused), the analysis counts each run id once, summaries read their settings from the stored
runs, one output directory holds one preset's outputs, an output name taken by a directory is
one line, and a huge sweep is refused in a moment."""
from __future__ import annotations

import dataclasses
import json
import shutil
import time

import pandas as pd
import pytest

from archsep.cli import main
from archsep.errors import ArchsepError
from archsep.experiments import PRESETS
from archsep.experiments.samples import Arch, SampleComplexityExperiment, Scale
from archsep.experiments.size import SizeExperiment
from archsep.experiments import plan
from archsep.sweeps import file as sw
from archsep.store import open_store
from archsep.sweeps.toml import flatten_config
from sweep_util import write


class Tiny26(SampleComplexityExperiment):
    """Two seeds, two lengths, one small arm: 4 runs; a threshold nothing reaches in 640 samples."""
    description = "tiny preset of issue 26"
    _s = Scale(Ns=(2, 3), seeds=2, archs=(Arch("TF", "tf-b", {"mlp_width": 8}),),
               train={"threshold": 0.001, "budget": 6400, "eval_size": 100, "eval_every": 5})
    full = quick = _s
    separations = ()


class Other26(Tiny26):
    description = "another tiny preset"


SET = ["--set", "seed=3", "--set", "train.budget=640"]


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    """One reproduction of tiny26 with seed=3 and budget 640 (the runs train 10 steps each)."""
    with PRESETS.temporary("tiny26", Tiny26), PRESETS.temporary("other26", Other26):
        out = tmp_path_factory.mktemp("t26") / "D"
        code = main(["reproduce", "tiny26", "--quick", *SET, "--out", str(out), "--workers", "1", "--no-progress"])
        assert code == 0
        yield out


def _files(d):
    return {f.name: f.read_bytes() for f in sorted(d.iterdir()) if f.is_file() and f.name != "archsep.db"}


# --- --set seed= shifts the seed list: distinct runs, each counted once ------------------------------
def test_set_seed_on_a_two_seed_preset_shifts_the_seeds_and_keeps_every_run_distinct(done):
    runs = pd.read_csv(done / "runs.csv")
    assert len(runs) == 4 and runs.run_id.nunique() == 4  # before: every pair of seeds was one run, counted twice
    assert sorted(set(runs.seed)) == [3, 4]
    s = json.loads((done / "summary.json").read_text())
    assert s["seed_list"] == [3, 4] and s["seeds"] == 2
    assert all(p["n_runs"] == 2 for p in s["points"])  # two distinct seeds per N, not one run twice
    assert s["duplicates_dropped"] == 0


def test_the_analysis_counts_a_repeated_run_id_once_and_says_so(done):
    with open_store(done, create=False) as st:
        results = st.results()
    exp = Tiny26()
    summary = exp.summarize(results + results[:3], "quick")  # three results repeated
    assert len(summary.results) == 4
    assert sum(p["n_runs"] for p in summary.data["points"]) == 4
    assert summary.data["duplicates_dropped"] == 3
    text = exp.summary_text(summary)
    assert "3 result(s) repeated the run id" in text and "counted once" in text


# --- settings from the runs, not the preset ---------------------------------------------------------
def test_summary_text_and_figure_report_the_budget_the_runs_had(done):
    s = json.loads((done / "summary.json").read_text())
    assert s["budget"] == 640 and s["threshold"] == 0.001 and s["eval_size"] == 100  # not the preset's 6400
    assert all(p["n_censored"] == p["n_runs"] for p in s["points"])
    txt = (done / "summary.txt").read_text()
    assert "budget 640" in txt and "seeds 3, 4" in txt
    assert "6400" not in txt
    svg = (done / "figure.svg").read_text()
    assert "budget 640" in svg and "6400" not in svg
    assert not [n for n in s["notes"] if "disagree" in n]  # these runs agree


def test_runs_that_disagree_on_a_setting_are_said_to(done):
    with open_store(done, create=False) as st:
        results = st.results()
    bigger = [dataclasses.replace(r, config={**r.config, "train": {**r.config["train"], "budget": 1280}},
                                  run_id=r.run_id + "x") for r in results[:1]]
    summary = Tiny26().summarize(results + bigger, "quick")
    assert summary.data["budget"] == [640, 1280]
    notes = [n for n in summary.data["notes"] if "disagree on train.budget" in n]
    assert notes and "640 (4 run(s))" in notes[0] and "1280 (1 run(s))" in notes[0]


# --- one preset per output directory ----------------------------------------------------------------
def test_a_second_preset_into_the_same_out_is_refused_and_overwrites_nothing(done, capsys):
    before = _files(done)
    capsys.readouterr()
    code = main(["reproduce", "other26", "--quick", "--out", str(done), "--workers", "1", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "tiny26-quick-seed=3-budget=640" in err[0] and "--out" in err[0] and "one preset" in err[0]
    assert _files(done) == before
    with open_store(done, create=False) as st:
        assert {s["name"] for s in st.sweeps()} == {"tiny26-quick-seed=3-budget=640"}  # nothing registered
    # the same preset and settings again: its runs are reused and its outputs rewritten
    assert main(["reproduce", "tiny26", "--quick", *SET, "--out", str(done), "--workers", "1", "--no-progress"]) == 0


def test_runs_csv_being_a_directory_is_one_line_and_leaves_nothing_behind(done, tmp_path, capsys):
    out = tmp_path / "E"
    shutil.copytree(done, out)
    (out / "runs.csv").unlink()
    (out / "runs.csv").mkdir()
    capsys.readouterr()
    code = main(["reproduce", "tiny26", "--quick", *SET, "--out", str(out), "--workers", "1", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "runs.csv" in err[0] and "directory" in err[0]
    assert "Traceback" not in "\n".join(err)
    assert (out / "runs.csv").is_dir() and not list((out / "runs.csv").iterdir())
    assert not list(out.glob("*.tmp"))


# --- every preset, every scale, every structural --set: distinct runs or a refusal -------------------
def _structural(configs) -> dict:
    """seed, label, and every field the plan varies (its grid axes), each set to one value."""
    flats = [flatten_config(c) for c in configs]
    keys = dict.fromkeys(k for f in flats for k in f)
    out = {"seed": 3, "label": "X"}
    for k in keys:
        vals = {json.dumps(f.get(k), sort_keys=True) for f in flats}
        if len(vals) > 1 and k not in ("seed", "label") and "." in k:
            out[k] = next(f[k] for f in flats if k in f)
    return out


@pytest.mark.parametrize("name", PRESETS.names())
def test_every_structural_set_keeps_planned_runs_distinct_or_is_refused(name):
    exp = PRESETS.get(name)()
    for scale in exp.scales:
        plain = plan.from_experiment(name, scale).configs
        for key, value in _structural(plain).items():
            try:
                s = plan.from_experiment(name, scale, None, {key: value})
            except ArchsepError as e:
                assert str(e).startswith("set: "), e  # refused in one line (a key that makes two runs one: named)
                assert key in str(e) or "unknown key" in str(e) or "must be" in str(e), e
                continue
            ids = [c.run_id for c in s.configs]
            assert len(set(ids)) == len(ids) == len(plain), (name, scale, key)
            if isinstance(exp, SizeExperiment):  # the analysis groups the runs that ran
                exp.overrides = {key: value}
                assert [c.run_id for cell in exp.planned_cells(scale) for c in cell.runs] == ids


def test_set_seed_starts_the_seed_list_and_label_and_axes_say_what_to_use():
    s = plan.from_experiment("qstr-fig1a", "quick", None, {"seed": 3})
    assert sorted({c.seed for c in s.configs}) == [3, 4, 5]  # the quick scale has 3 seeds
    with pytest.raises(ArchsepError, match="--only"):
        plan.from_experiment("qstr-fig1a", "quick", None, {"label": "X"})
    with pytest.raises(ArchsepError, match=r"task_params.N.*values 2, 4, 6, 8.*--print-toml"):
        plan.from_experiment("qstr-fig1a", "quick", None, {"task_params.N": 4})


# --- sweep planning scales --------------------------------------------------------------------------
BASE = '[base]\ntask = "qstr"\narch = "ffn"\ntask_params = { d = 4, q = 1 }\n[grid]\n'


def test_an_axis_of_a_million_values_is_refused_in_a_moment(tmp_path, capsys):
    f = write(tmp_path / "huge.toml", BASE + '"task_params.N" = [' + ", ".join(map(str, range(2, 1_000_002))) + "]\n")
    t = time.perf_counter()
    assert main(["sweep", str(f), "--dry-run"]) == 2
    assert time.perf_counter() - t < 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "MB" in err[0] and "limit" in err[0]


def test_a_million_run_grid_in_a_small_file_is_refused_with_its_size_and_the_limit(tmp_path, capsys):
    axis = "[" + ", ".join(map(str, range(2, 1002))) + "]"
    f = write(tmp_path / "grid.toml",
              BASE + f'"task_params.N" = {axis}\n"train.lr" = [{", ".join(f"{i + 1}e-4" for i in range(1000))}]\n')
    t = time.perf_counter()
    assert main(["sweep", str(f), "--dry-run"]) == 2
    assert time.perf_counter() - t < 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "1000000 runs" in err[0] and str(sw.MAX_RUNS) in err[0]


def test_a_large_plan_shows_a_progress_line_and_dry_run_says_the_count_first(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sw, "PROGRESS_FROM", 10)
    f = write(tmp_path / "mid.toml", BASE + '"task_params.N" = [' + ", ".join(map(str, range(2, 22))) + "]\n")
    assert main(["sweep", str(f), "--dry-run"]) == 0
    cap = capsys.readouterr()
    assert "planning 20 runs" in cap.err
    assert cap.out.splitlines()[0].startswith("mid: 20 run(s)")


def test_reproduce_dry_run_says_the_count_first(capsys):
    assert main(["reproduce", "qstr-fig3", "--quick", "--dry-run", "--workers", "1"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("qstr-fig3-quick: 27 run(s)")
