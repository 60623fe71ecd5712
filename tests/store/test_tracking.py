"""Experiment tracking (`archsep.store.tracking`): real runs of a tiny sweep, mirrored from the
results store into MLflow and TensorBoard, then read back with each tool's own reader."""
from __future__ import annotations

import importlib
import json
import os
import sys

import pytest

from archsep import run_configs
from archsep.config import RunConfig, TrainConfig
from archsep.errors import ArchsepError
from archsep.store import open_store
from archsep.store import tracking
from archsep.store.tracking import Tracker, check_tracker, make_tracker
from extras import needs

# as `check_tracker` does before MLflow is imported: no usage telemetry (the tests import it first)
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def _train(**kw) -> TrainConfig:
    # 10 held-out evaluations on a threshold no run reaches: a full curve, censored
    return TrainConfig(budget=640, batch_size=32, eval_every=2, eval_mode="every", eval_size=64, threshold=0.01,
                       device="cpu", **kw)


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Two real runs committed to a store; returns (out dir, store rows, results by run_id)."""
    out = tmp_path_factory.mktemp("sweep")
    configs = [RunConfig("qstr", "ffn", {"N": 2, "d": 4}, {}, _train(), label="FFN"),
               RunConfig("qstr", "ffn", {"N": 3, "d": 4}, {"hidden": [16]}, _train(keep_best=True, test_size=64),
                         seed=1, label="FFN")]
    results = run_configs(configs, out, workers=1, progress=False)
    with open_store(out, create=False) as store:
        rows = store.rows()
    assert len(rows) == 2 and all(len(r.curve) >= 5 for r in results)
    return out, rows, {r.run_id: r for r in results}


def _error_row(row: dict) -> dict:
    return {**row, "status": "error", "error": "Traceback ...\nRuntimeError: boom", "samples": None,
            "final_metric": None, "best_metric": None, "test_metric": None, "curve": "[]", "train_curve": "[]"}


# --- the checks that need no tracking package -----------------------------------------------------
def test_unknown_kind_is_one_line_naming_log():
    for bad in ("mlfow", "wandb", ""):
        with pytest.raises(ArchsepError) as e:
            check_tracker(bad)
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith("log: unknown value") and "allowed: mlflow, tensorboard" in msg
    assert "did you mean 'mlflow'" in str(pytest.raises(ArchsepError, make_tracker, "mlfow", "unused").value)


@pytest.mark.parametrize("kind,module", [("mlflow", "mlflow"), ("mlflow", "sqlalchemy"),
                                         ("tensorboard", "tensorboard")])
def test_missing_package_says_what_to_install(kind, module, monkeypatch, tmp_path):
    first_missing = module
    for m in tracking._NEEDS[kind]:  # the packages checked before it are imported for real first, so
        if m == module:              # that none of them is imported with `module` faked missing
            break
        try:
            importlib.import_module(m)
        except ImportError:
            first_missing = m
            break
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail as if not installed
    with pytest.raises(ArchsepError) as e:
        check_tracker(kind)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("log: ") and f"pip install 'archsep[{kind}]'" in msg
    assert f"'{first_missing}' package" in msg
    with pytest.raises(ArchsepError):
        make_tracker(kind, tmp_path)
    assert not any(tmp_path.iterdir())  # nothing made


def test_a_failing_tracker_warns_once_and_never_raises(sweep, capsys):
    _, rows, _ = sweep

    class Broken(Tracker):
        kind = "broken"

        def _log(self, run):
            raise OSError(28, "No space left on device")

    t = Broken(sweep[0], "x")
    assert [t.log(r) for r in rows] == [False, False]
    assert t.log({"no": "run_id"}) is False  # a malformed row is a failure too, not an exception
    t.close()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "results store is unaffected" in err[0]
    assert (t.failed, t.logged, t.skipped) == (3, 0, 0)


# --- MLflow ------------------------------------------------------------------------------------------
def _mlflow():
    for m in ("mlflow", "sqlalchemy", "alembic"):
        needs(m)
    from mlflow.tracking import MlflowClient

    return MlflowClient


@pytest.mark.slow  # creating an MLflow SQLite store runs its migrations: ~5 s
def test_mlflow_mirrors_the_store_and_reads_back(sweep, capsys):
    MlflowClient = _mlflow()
    out, rows, results = sweep
    with make_tracker("mlflow", out) as t:
        assert [t.log(r) for r in rows] == [True, True]
        assert [t.log(r) for r in rows] == [False, False]  # logging twice does not duplicate
    with make_tracker("mlflow", out) as t:  # nor does a later process (the check is by tag, in the store)
        assert [t.log(r) for r in rows] == [False, False] and t.skipped == 2

    # the error row of a run a later attempt replaced, and a run interrupted while being logged
    with make_tracker("mlflow", out, name="replaced") as t:
        assert t.log(_error_row(rows[0])) is True
        assert t.log(_error_row(rows[0])) is False
        partial = t.client.create_run(t.experiment_id, tags={tracking.RUN_ID_TAG: rows[1]["run_id"]}).info.run_id
    with make_tracker("mlflow", out, name="replaced") as t:
        assert [t.log(r) for r in rows] == [True, True]
    assert "Traceback" not in capsys.readouterr().err

    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name(out.name)
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 2 and {r.data.tags[tracking.RUN_ID_TAG] for r in runs} == set(results)
    for run in runs:
        rid = run.data.tags[tracking.RUN_ID_TAG]
        res, row = results[rid], next(r for r in rows if r["run_id"] == rid)
        assert run.info.run_name == f"FFN-{rid}" and run.info.status == "FINISHED"
        tags = run.data.tags
        assert (tags["archsep.status"], tags["archsep.label"], tags["archsep.task"], tags["archsep.arch"]) == \
               (res.status, "FFN", "qstr", "ffn")
        p = run.data.params
        assert p["task"] == "qstr" and p["arch"] == "ffn" and p["label"] == "FFN"
        assert p["seed"] == str(res.config["seed"])
        assert p["task_params.N"] == str(res.config["task_params"]["N"]) and p["train.budget"] == "640"
        assert p["train.lr"] == str(res.config["train"]["lr"]) and p["train.eval_mode"] == "every"
        flat = tracking._flatten(json.loads(row["config"]))
        assert set(p) == set(flat)
        m = run.data.metrics
        assert m["samples"] == res.samples and m["final_metric"] == res.final_metric
        assert m["best_metric"] == res.best_metric and m["n_params"] == res.params
        assert ("test_metric" in m) == (res.test_metric is not None)
        if res.test_metric is not None:
            assert m["test_metric"] == res.test_metric
        for key, curve in ((tracking.HELDOUT, res.curve), (tracking.TRAIN, res.train_curve)):
            hist = sorted(client.get_metric_history(run.info.run_id, key), key=lambda x: x.step)
            assert [(h.step, h.value) for h in hist] == [(s, v) for s, v in curve]
    assert any(results[r.data.tags[tracking.RUN_ID_TAG]].test_metric is not None for r in runs)

    exp2 = client.get_experiment_by_name("replaced")
    runs2 = client.search_runs([exp2.experiment_id])
    assert len(runs2) == 2 and {r.data.tags["archsep.status"] for r in runs2} == {"censored"}
    assert partial not in {r.info.run_id for r in runs2}
    assert all(r.data.tags.get(tracking.DONE_TAG) == "1" for r in runs2)


# --- TensorBoard -------------------------------------------------------------------------------------
def test_tensorboard_mirrors_the_store_and_reads_back(sweep, tmp_path):
    needs("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, rows, results = sweep
    with make_tracker("tensorboard", out) as t:
        assert [t.log(r) for r in rows] == [True, True]
        assert [t.log(r) for r in rows] == [False, False]
    logdir = out / "tensorboard"
    files = sorted(p.relative_to(logdir) for p in logdir.rglob("*"))
    with make_tracker("tensorboard", out) as t:
        assert [t.log(r) for r in rows] == [False, False]
    assert sorted(p.relative_to(logdir) for p in logdir.rglob("*")) == files  # nothing added
    assert sorted(p.name for p in logdir.iterdir()) == sorted(results)
    assert not (out / ".archsep-tensorboard-tmp").exists()

    for rid, res in results.items():
        ea = EventAccumulator(str(logdir / rid), size_guidance={"scalars": 0, "tensors": 0})
        ea.Reload()
        for key, curve in ((tracking.HELDOUT, res.curve), (tracking.TRAIN, res.train_curve)):
            got = [(e.step, e.value) for e in ea.Scalars(key)]
            assert [s for s, _ in got] == [s for s, _ in curve]
            assert [v for _, v in got] == pytest.approx([v for _, v in curve], rel=1e-6)  # stored as float32
        assert ea.Scalars("result/final_metric")[0].value == pytest.approx(res.final_metric, rel=1e-6)
        assert ea.Scalars("result/samples")[0].value == res.samples
        assert ("result/test_metric" in ea.Tags()["scalars"]) == (res.test_metric is not None)
        assert {"_hparams_/experiment", "_hparams_/session_start_info"} <= set(ea.PluginTagToContent("hparams"))
        config = ea.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
        assert json.loads(config.strip("`\njson")) == res.config

    # a stored error that a later attempt replaced is replaced in TensorBoard too
    other = tmp_path / "out"
    with make_tracker("tensorboard", other) as t:
        assert t.log(_error_row(rows[0])) is True and t.log(_error_row(rows[0])) is False
        assert t.log(rows[0]) is True and t.log(rows[0]) is False
    status = json.loads((other / "tensorboard" / rows[0]["run_id"] / tracking.MARKER).read_text())["status"]
    assert status == results[rows[0]["run_id"]].status and len(list((other / "tensorboard").iterdir())) == 1

