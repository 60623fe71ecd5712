"""The command line: a tiny end-to-end preset and one-line errors for user mistakes."""
import json
import subprocess
import sys

import pandas as pd
import pytest

from archsep.cli import main
from archsep.experiments import PRESETS
from archsep.experiments.samples import Arch, SampleComplexityExperiment, Scale


def run_cli(*args):
    p = subprocess.run([sys.executable, "-m", "archsep.cli", *args], capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("args, field", [
    (["reproduce", "qstr-fig9"], "preset"),
    (["reproduce", "qstr-fig1a", "--workers", "0"], "--workers"),
    (["reproduce", "qstr-fig1a", "--device", "tpu"], "device"),
    (["reproduce", "qstr-fig1a", "--out", "/proc/archsep-no"], "--out"),
    (["frobnicate"], "invalid choice"),
])
def test_user_mistakes_get_one_line_and_exit_2(args, field):
    code, out, err = run_cli(*args)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and field in lines[0], err
    assert "Traceback" not in err


class Tiny(SampleComplexityExperiment):
    description = "tiny test preset"
    registry_name = "tiny"
    _s = Scale(Ns=(2, 3), seeds=2, archs=(Arch("TF", "tf-b", {"mlp_width": 16}), Arch("FFN", "ffn", {"hidden": [32]})),
               train={"threshold": 0.8, "budget": 6400, "eval_size": 300})
    full = quick = _s


def test_a_tiny_preset_end_to_end_writes_every_output(tmp_path, monkeypatch, capsys, registered):
    registered(PRESETS, "tiny", Tiny)
    assert main(["reproduce", "tiny", "--quick", "--out", str(tmp_path), "--workers", "1", "--no-progress"]) == 0
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 8 and set(runs.arch) == {"TF", "FFN"}
    for col in ["arch", "N", "seed", "samples", "censored", "diverged", "resolution", "wall_s", "params"]:
        assert col in runs.columns
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["preset"] == "tiny" and s["threshold"] == 0.8
    assert set(s["fits"]) == {"TF", "FFN"} and all("alpha" in f and len(f["ci"]) == 2 for f in s["fits"].values())
    assert {"arch", "N", "mean", "median", "ci", "n_censored"} <= set(s["points"][0])
    assert all(isinstance(c["held"], bool) and c["text"] and c["kind"] for c in s["claims"])
    assert s["scale"] == "quick"
    for f in ("figure.png", "figure.svg", "summary.txt"):
        assert (tmp_path / f).stat().st_size > 0
    assert "alpha[TF]" in capsys.readouterr().out


def test_at_runs_some_points_and_the_whole_preset_reuses_them(tmp_path, monkeypatch, capsys, registered):
    """`--at 2` trains the runs at N = 2 only (those of the whole preset, same ids); the whole
    preset into the same --out then trains only the rest and keeps the first ones' numbers."""
    registered(PRESETS, "tiny", Tiny)
    args = ["reproduce", "tiny", "--quick", "--out", str(tmp_path), "--workers", "1", "--no-progress"]
    assert main(args + ["--at", "2"]) == 0
    part = pd.read_csv(tmp_path / "runs.csv")
    assert len(part) == 4 and set(part.N) == {2}
    assert main(args) == 0
    whole = pd.read_csv(tmp_path / "runs.csv")
    assert len(whole) == 8 and set(whole.N) == {2, 3}
    cols = ["run_id", "samples", "censored", "best_metric", "wall_s"]  # wall_s: reused, not trained again
    pd.testing.assert_frame_equal(whole[whole.N == 2][cols].sort_values("run_id").reset_index(drop=True),
                                  part[cols].sort_values("run_id").reset_index(drop=True))


def test_finished_only_writes_the_outputs_of_the_runs_so_far_and_trains_nothing(tmp_path, capsys, registered):
    """A long run's results so far: --finished-only analyses the planned runs the store holds,
    trains none of the others (the store keeps its rows), and the summary says how many are
    pending; with no store at --out it is one line naming --out."""
    from archsep.store import open_store

    registered(PRESETS, "tiny", Tiny)
    args = ["reproduce", "tiny", "--quick", "--out", str(tmp_path), "--workers", "1", "--no-progress"]
    assert main(args + ["--at", "2"]) == 0
    with open_store(tmp_path, create=False) as store:
        before = store.rows()
    capsys.readouterr()
    assert main(args + ["--finished-only"]) == 0
    with open_store(tmp_path, create=False) as store:
        assert store.rows() == before  # nothing trained, nothing written to the store
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 4 and set(runs.N) == {2}
    s = json.loads((tmp_path / "summary.json").read_text())
    assert s["pending"] == 4 and any("4 of the 8 planned runs are not finished" in n for n in s["notes"])
    assert "4 of the 8 planned runs are not finished" in capsys.readouterr().out
    assert main(["reproduce", "tiny", "--quick", "--out", str(tmp_path / "new"), "--finished-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("archsep: error: --out: ") and "no archsep store" in err
    assert not (tmp_path / "new").exists()  # nothing created


def test_at_plans_each_presets_own_runs_at_those_points():
    """For every registered preset with an axis, `at` keeps exactly the whole plan's runs at that
    point (same ids); a point not planned, or a preset without an axis, is one error naming --at."""
    from archsep.errors import ArchsepError
    from archsep.experiments import EXPERIMENTS, plan
    from archsep.experiments.reproduce import _outputs_of, outputs_name

    for name in EXPERIMENTS.names():
        exp = EXPERIMENTS.get(name)()
        whole = plan.from_experiment(name, "quick").configs
        if exp.axis is None:
            with pytest.raises(ArchsepError) as e:
                plan.from_experiment(name, "quick", at=[2])
            assert e.value.field == "at" and "no single axis" in str(e.value), name
            continue
        points = sorted({c.task_params[exp.axis] for c in whole})
        part = plan.from_experiment(name, "quick", at=[points[0]])
        assert [c.run_id for c in part.configs] == [c.run_id for c in whole
                                                    if c.task_params[exp.axis] == points[0]], name
        assert 0 < len(part.configs) < len(whole) or len(points) == 1, name
        assert part.name.split("-only=")[0] == plan.from_experiment(name, "quick").name
        # the store tells whose outputs a part's runs are from what its plan recorded, not its name
        seeded = plan.from_experiment(name, "quick", None, {"seed": 3}, at=[points[0]])
        for sw, overrides in ((part, None), (seeded, {"seed": 3})):
            row = {"name": sw.name, "preset": sw.preset, "analysis_data": sw.analysis}
            assert _outputs_of(row) == outputs_name(name, "quick", overrides) != outputs_name(name, "full"), name
        with pytest.raises(ArchsepError) as e:
            plan.from_experiment(name, "quick", at=[max(points) + 1000])
        assert e.value.field == "at" and ", ".join(map(str, points)) in str(e.value), name


def test_list_names_the_registered_things(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "qstr-fig1a" in out and "relu-teacher" in out and "rnn-b" in out


def test_list_gives_every_registered_name_a_summary_and_models_their_state(capsys):
    from archsep.cli.describe import _registries

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ")}
    for _, reg in _registries():
        for name in reg.names():
            assert name in lines and len(lines[name].split(None, 1)) == 2, name  # a summary beside it
    assert "state 128 floats" in lines["lstm"] and "not recurrent" in lines["tf-preln"]
    assert "was rnn" in lines["rnn-b"]


@pytest.mark.parametrize("name, field", [("dyck", "N: int = 100"), ("retnet", "heads: int = 4"),
                                         ("qstr-fig1a", "scales: ")])
def test_describe_prints_parameters_and_documentation(capsys, name, field):
    assert main(["describe", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith(name + " (") and field in out


def test_describe_an_unknown_name_is_one_line_and_imports_nothing(capsys):
    assert main(["describe", "this:Zen"]) == 2  # an import string is a name to look up, not code to run
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "NAME: 'this:Zen' is not a registered" in err
    import sys

    assert "this" not in sys.modules


def test_only_keeps_a_comma_inside_a_label_and_plans_the_presets_own_runs():
    """`--only "TF-(1,64),LSTM-64"` names two arms (a comma inside brackets is part of the
    label), and plans exactly the preset's runs of those arms, with their ids."""
    from archsep.cli import split_labels
    from archsep.experiments import plan

    assert split_labels("TF-(1,64), LSTM-64,") == ["TF-(1,64)", "LSTM-64"]
    assert split_labels("TF,FFN") == ["TF", "FFN"] and split_labels("TF-(2,64) [eq-one]") == ["TF-(2,64) [eq-one]"]
    whole = plan.from_experiment("dyck-fig2", "paper-n").configs
    part = plan.from_experiment("dyck-fig2", "paper-n", None, None, split_labels("TF-(1,64),LSTM-64")).configs
    assert {c.label for c in part} == {"TF-(1,64)", "LSTM-64"}
    assert [c.run_id for c in part] == [c.run_id for c in whole if c.label in ("TF-(1,64)", "LSTM-64")]
