"""One launch: `archsep reproduce P --quick` builds its experiment once and checks its options
(executor, address, device, threads, tracker) once, in a frozen `Launch` passed down whole."""
from __future__ import annotations

import dataclasses

import pytest

from archsep.cli import main
from archsep.errors import ArchsepError
from archsep.experiments import PRESETS
from archsep.experiments.samples import Arch, SampleComplexityExperiment, Scale
from archsep.runs import executors
from archsep.runs.launch import Launch
from archsep.runs.runner import launch_runs

BUILT = []


class OneLaunch(SampleComplexityExperiment):
    description = "a tiny preset that counts how often it is built"
    tiny = Scale(Ns=(2,), seeds=1, archs=(Arch("FFN", "ffn", {}),),
                 train={"budget": 640, "eval_size": 100, "threshold": 0.9}, task_params={"q": 1, "d": 4})
    full = quick = tiny

    def __init__(self) -> None:
        BUILT.append(1)


@pytest.fixture
def one_launch_preset():
    """Registered for this test alone: a preset left in PRESETS would join every later test that
    loops over the registry (test_sweep's preset round trip, for one)."""
    with PRESETS.temporary("test-one-launch", OneLaunch):
        yield


def test_reproduce_builds_its_experiment_once_and_checks_its_options_once(tmp_path, monkeypatch, capsys,
                                                                          one_launch_preset):
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    checks, made = [], []
    real_check, real_make = executors.check_executor, Launch.check
    monkeypatch.setattr(executors, "check_executor", lambda *a: (checks.append(a), real_check(*a))[1])
    monkeypatch.setattr(Launch, "check", lambda self: (made.append(self.checked), real_make(self))[1])
    BUILT.clear()
    assert main(["reproduce", "test-one-launch", "--quick", "--out", str(tmp_path / "o"), "--workers", "1",
                 "--no-progress", "--device", "cpu"]) == 0
    assert "test-one-launch (quick): 1 runs" in capsys.readouterr().out
    assert len(BUILT) == 1, f"the experiment was built {len(BUILT)} times"
    assert checks == [("local", None)], f"the executor was checked {len(checks)} times"
    assert made.count(False) == 1  # one Launch was checked; below, it is taken as checked


def test_a_launch_is_checked_where_it_is_made_and_taken_as_it_is_below():
    with pytest.raises(ArchsepError) as e:
        Launch(executor="dask").check()
    assert e.value.field == "executor"
    with pytest.raises(ArchsepError) as e:
        Launch(address="127.0.0.1:6379").check()  # an address without Ray
    assert e.value.field == "address"
    with pytest.raises(ArchsepError) as e:
        Launch(log="mlflow").check()  # a tracker needs an output directory
    assert e.value.field == "log"
    with pytest.raises(AssertionError):
        launch_runs([], Launch())  # unchecked options are not taken
    ok = Launch(out="x").check()
    assert ok.checked and ok.out.__class__.__name__.endswith("Path") and ok.check() is ok
    with pytest.raises(dataclasses.FrozenInstanceError):
        ok.workers = 2  # type: ignore[misc]
