"""A run killed while it trains goes on from its checkpoint and gives the same numbers as a run
never interrupted (engine/checkpoint.py); a checkpoint that is not this run's, or not data, is
never used; a finished run leaves no checkpoint behind."""
from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

import archsep.engine.checkpoint as checkpoint
from archsep.cli import main
from archsep.config import RunConfig, TrainConfig
from archsep.engine.checkpoint import Checkpoints
from archsep.engine.train import train_run
from archsep.store import open_store
from sweep_util import ARCHSEP, env, tiny_toml, write

SAME = ("status", "samples", "final_metric", "best_metric", "curve", "train_curve", "test_metric", "best_samples",
        "eval_schedule", "params", "state_size", "error")

CONFIGS = {
    # regression, progressive schedule (screening reference), best checkpoint and a test set
    "qstr-tf": RunConfig("qstr", "tf-b", {"N": 3}, {"mlp_width": 16},
                         TrainConfig(budget=12_800, eval_size=400, threshold=0.6, keep_best=True, test_size=300),
                         seed=1),
    # a fixed training set replayed in reshuffled epochs (the stream's order and position)
    "qstr-ffn-replay": RunConfig("qstr", "ffn", {"N": 3}, {},
                                 TrainConfig(budget=9_600, eval_size=300, threshold=0.05, train_set_size=500,
                                             eval_mode="every")),
    # classification with a recurrent model, a length curriculum and a plateau stop
    "dyck-lstm": RunConfig("dyck", "lstm", {"N": 12}, {"hidden": 16},
                           TrainConfig(budget=9_600, eval_size=300, threshold=1e-6, eval_mode="every", patience=40,
                                       curriculum=[[6, 30]], test_size=300)),
}


def _same(a, b) -> None:
    for f in SAME:
        assert getattr(a, f) == getattr(b, f), f
    assert {k: v for k, v in a.extra.items() if k != "resumed_at"} == \
           {k: v for k, v in b.extra.items() if k != "resumed_at"}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_run_stopped_after_a_save_goes_on_to_the_same_numbers(name, tmp_path, monkeypatch):
    cfg = CONFIGS[name]
    plain = train_run(cfg)
    assert len(plain.train_curve) > 6, "the run must be long enough to be stopped in the middle"
    ck = Checkpoints(str(tmp_path / "ck"), 0.0)  # a save at every scheduled evaluation
    real, saves = checkpoint.save, []

    def stop_after_the_fourth(c, run_cfg, state):
        saves.append(state["step"])
        real(c, run_cfg, state)
        if len(saves) == 4:
            raise KeyboardInterrupt  # killed right after its fourth save
    monkeypatch.setattr(checkpoint, "save", stop_after_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        train_run(cfg, ck)
    monkeypatch.setattr(checkpoint, "save", real)
    assert ck.path(cfg.run_id).is_file()
    resumed = train_run(cfg, ck)
    _same(resumed, plain)
    assert resumed.extra["resumed_at"] == [saves[-1]] and 0 < saves[-1] * cfg.train.batch_size < plain.samples
    again = train_run(cfg, ck)  # its last save, near the end: the same numbers once more
    _same(again, plain)
    assert again.extra["resumed_at"][-1] > saves[-1]


def test_without_checkpoints_nothing_is_written_and_with_them_nothing_changes(tmp_path):
    cfg = CONFIGS["qstr-tf"]
    a = train_run(cfg, Checkpoints(str(tmp_path / "ck"), 0.0))
    b = train_run(cfg)
    _same(a, b)
    assert "resumed_at" not in a.extra and not b.extra.get("resumed_at")


class _Planted:
    """A pickle that would write a file if it were ever unpickled as an object."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "pwned"))


def test_a_checkpoint_that_is_not_this_runs_data_is_never_used(tmp_path):
    cfg = CONFIGS["qstr-tf"]
    plain = train_run(cfg)
    ck = Checkpoints(str(tmp_path / "ck"), 1e9)  # never saves: only reads
    p = ck.path(cfg.run_id)
    p.parent.mkdir()
    other = RunConfig("qstr", "tf-b", {"N": 3}, {"mlp_width": 16}, cfg.train, seed=2)
    ck_other = Checkpoints(str(tmp_path / "other"), 0.0)
    train_run(other, ck_other)
    marker = tmp_path / "pwned"
    cases = {
        "garbage": b"\x00not a checkpoint" * 10,
        "empty": b"",
        "code": pickle.dumps({"state": _Planted(marker)}),
        # a real checkpoint of another run (another seed) saved under this run's name
        "another run's": ck_other.path(other.run_id).read_bytes(),
    }
    for what, data in cases.items():
        p.write_bytes(data)
        r = train_run(cfg, ck)
        _same(r, plain)
        assert "resumed_at" not in r.extra, what
        assert not marker.exists(), what
    saved = checkpoint.load(ck_other, [other])
    assert saved is not None and saved["step"] > 0  # the other run's own file is its to use


def test_a_link_at_the_checkpoint_folder_is_never_written_through(tmp_path):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "ck").symlink_to(target)
    r = train_run(CONFIGS["qstr-tf"], Checkpoints(str(tmp_path / "ck"), 0.0))
    assert r.status in ("ok", "censored") and not list(target.iterdir())


@pytest.mark.slow
def test_a_sweep_killed_mid_run_resumes_from_its_checkpoint_with_the_same_row(tmp_path):
    """kill -9 of a whole `archsep sweep` while its run trains, then the same command: the run
    goes on from its checkpoint; its stored row equals that of a run never killed; the
    checkpoint folder is gone and no temporary file is left."""
    f = write(tmp_path / "s.toml", tiny_toml("ck", Ns=(3,), arms=("tf-b",), budget=160_000, threshold=1e-6))
    plain_out, out = tmp_path / "plain", tmp_path / "killed"
    e = {**env(), "ARCHSEP_CHECKPOINT_S": "0"}
    cmd = [*ARCHSEP, "sweep", str(f), "--workers", "1", "--no-progress", "--out"]
    assert subprocess.run([*cmd, str(plain_out)], env=e, capture_output=True, timeout=300).returncode == 0
    p = subprocess.Popen([*cmd, str(out)], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        deadline = time.time() + 120
        saved = []
        while time.time() < deadline and not saved:
            time.sleep(0.2)
            saved = list((out / "checkpoints").glob("*.pt")) if (out / "checkpoints").is_dir() else []
        assert saved, "no checkpoint written"
        time.sleep(0.3)  # a few more saves: killed early in the run, well before its end
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    with open_store(out, create=False) as st:
        assert st.rows() == []  # nothing finished before the kill
    before = sorted((q.name, q.stat().st_mtime_ns) for q in (out / "checkpoints").rglob("*"))
    shown = subprocess.run([*ARCHSEP, "status", str(out), "--json"], env=e, capture_output=True, text=True,
                           timeout=120)
    (c,) = json.loads(shown.stdout)["checkpoints"]  # where the rerun goes on from
    assert c["label"] == "TF" and 0 < c["step"] < c["steps"] == 160_000 // 64
    text = subprocess.run([*ARCHSEP, "status", str(out)], env=e, capture_output=True, text=True, timeout=120).stdout
    assert f"step {c['step']} of {c['steps']}" in text
    # which trial it is: two trials of one family differ only in these
    assert f"{json.dumps(c['model_params'], sort_keys=True)} lr={c['lr']:g} seed=" in text and c["lr"] > 0
    assert c["best"] is not None and f"its best held-out metric so far {c['best']:.4g} at step {c['best_step']}" in text
    per_min = 60 * c["step"] / c["elapsed"]  # its pace so far, and what is left at that pace
    assert f", {per_min:.3g} steps a minute over its " in text and " to go at that pace" in text
    dry = subprocess.run([*cmd, str(out), "--dry-run"], env=e, capture_output=True, text=True, timeout=120).stdout
    assert "1 go on from a checkpoint" in dry
    assert sorted((q.name, q.stat().st_mtime_ns) for q in (out / "checkpoints").rglob("*")) == before
    done = subprocess.run([*cmd, str(out)], env=e, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open_store(plain_out, create=False) as st:
        (a,) = st.rows()
    with open_store(out, create=False) as st:
        (b,) = st.rows()
    extra_b = json.loads(b["extra"])
    (at,) = extra_b.pop("resumed_at")
    assert 0 < at < 160_000 // 64 // 2  # it went on from early in the run
    assert json.loads(a["extra"]) == extra_b
    for k in ("run_id", "status", "samples", "final_metric", "best_metric", "curve", "train_curve", "test_metric",
              "eval_schedule", "params"):
        assert a[k] == b[k], k
    assert not (out / "checkpoints").exists()
    assert not [q for q in out.rglob("*") if q.name.endswith(".tmp")]


@pytest.mark.parametrize("value", ["-1", "soon", "inf", "nan"])
def test_a_bad_checkpoint_interval_is_one_line(tmp_path, value, capsys, monkeypatch):
    monkeypatch.setenv("ARCHSEP_CHECKPOINT_S", value)
    f = write(tmp_path / "s.toml", tiny_toml("bad", Ns=(2,), arms=("ffn",)))
    code = main(["sweep", str(f), "--out", str(tmp_path / "out"), "--workers", "1", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "ARCHSEP_CHECKPOINT_S" in err[0] and "off" in err[0]
    assert not (tmp_path / "out").exists()


def test_a_save_cut_short_leaves_nothing_and_other_files_are_kept(tmp_path):
    """A kill in the middle of a save leaves atomic_write's temporary file: the next sweep into
    the same --out removes it when it ends; a file of someone else's there is kept (and so is
    the folder)."""
    f = write(tmp_path / "s.toml", tiny_toml("cut", Ns=(2,), arms=("ffn",)))
    out = tmp_path / "out"
    ck = out / "checkpoints"
    ck.mkdir(parents=True)
    (ck / ".0123456789abcdef.pt.k3j_x9.tmp").write_bytes(b"half a checkpoint")
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    assert not ck.exists()
    ck.mkdir()
    (ck / ".0123456789abcdef.pt.k3j_x9.tmp").write_bytes(b"half a checkpoint")
    (ck / "notes.txt").write_text("mine")
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    assert [p.name for p in ck.iterdir()] == ["notes.txt"]


def test_a_checkpoint_naming_this_run_whose_state_does_not_fit_starts_the_run_afresh(tmp_path):
    cfg = CONFIGS["qstr-tf"]
    plain = train_run(cfg)
    ck = Checkpoints(str(tmp_path / "ck"), 1e9)
    for state in ({"step": 3}, {"step": "x", "model": {}}, {"model": {"w": checkpoint.torch.zeros(2)}}):
        assert checkpoint.save(ck, [cfg], state)
        r = train_run(cfg, ck)
        _same(r, plain)
        assert "resumed_at" not in r.extra and r.status == plain.status


def test_status_reads_the_step_of_this_runs_checkpoint_only(tmp_path):
    cfg = CONFIGS["qstr-tf"]
    other = RunConfig("qstr", "tf-b", {"N": 3}, {"mlp_width": 16}, cfg.train, seed=2)
    ck = Checkpoints(str(tmp_path / "ck"), 1e9)
    p = ck.path(cfg.run_id)
    assert checkpoint.save(ck, [cfg], {"step": 7})
    assert checkpoint.group_steps(ck, [(cfg.run_id, cfg.to_dict())]) == {cfg.run_id: 7}
    assert checkpoint.group_steps(ck, [(cfg.run_id, other.to_dict())]) == {}  # names another config
    assert checkpoint.group_steps(ck, [("../" + cfg.run_id, cfg.to_dict())]) == {}  # never made a path
    for data in (b"", b"junk", pickle.dumps({"state": {"step": 7}})):
        p.write_bytes(data)
        assert checkpoint.group_steps(ck, [(cfg.run_id, cfg.to_dict())]) == {}


def test_the_steps_saved_count_for_every_run_of_a_stacked_groups_checkpoint(tmp_path):
    a, b, c, d = (_tf_qstr(s) for s in range(4))
    ck = Checkpoints(str(tmp_path / "ck"), 1e9)
    assert checkpoint.save(ck, [a, b, c], {"step": 11})  # one file, named by the first run
    assert checkpoint.saved_steps(ck, [b, d, c, a]) == {a.run_id: 11, b.run_id: 11, c.run_id: 11}
    assert checkpoint.saved_steps(ck, [b, c]) == {}  # without its first run the group is not this one
    assert checkpoint.group_steps(ck, [(b.run_id, b.to_dict())]) == {}  # no file of b's own
    # `archsep status` reads the same from the store's plan: all three go on from step 11
    from archsep.cli.sweep import _checkpointed
    from archsep.store import open_store

    out = tmp_path / "out"
    store = open_store(out)
    store.register_sweep("s", "s", "test", [(x.run_id, x.to_dict()) for x in (a, b, c, d)])
    ck2 = Checkpoints.beside(out)
    assert checkpoint.save(ck2, [a, b, c], {"step": 11})
    assert {r["run_id"]: r["step"] for r in _checkpointed(out, store)} == {x.run_id: 11 for x in (a, b, c)}
    store.close()


def test_status_reads_each_runs_best_evaluation_so_far_from_its_groups_checkpoint(tmp_path, monkeypatch):
    """Killed after its fourth save, three stacked seeds' checkpoint holds, for each run, the best
    held-out metric its uninterrupted curve reached by the saved step (and where): what `archsep
    status` prints beside the step. A damaged best reads as none, the step still counts."""
    from archsep.engine.train import train_many

    cfgs = [_tf_qstr(s) for s in range(3)]
    plain = train_many(cfgs)
    ck = Checkpoints(str(tmp_path / "ck"), 0.0)
    real, saves = checkpoint.save, []

    def stop_after_the_fourth(c, group, state):
        saves.append(state["step"])
        real(c, group, state)
        if len(saves) == 4:
            raise KeyboardInterrupt
    monkeypatch.setattr(checkpoint, "save", stop_after_the_fourth)
    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        train_many(cfgs, checkpoints=ck)
    monkeypatch.undo()
    got = checkpoint.group_progress(ck, [(c.run_id, c.to_dict()) for c in cfgs])
    elapsed = torch.load(ck.path(cfgs[0].run_id), weights_only=True)["state"]["elapsed"]
    assert 0 < elapsed < time.perf_counter() - started  # the group's training time, as saved
    upto = saves[-1] * cfgs[0].train.batch_size
    for c, r in zip(cfgs, plain):
        seen = [(m, n) for n, m in r.curve if n <= upto]
        best = min(m for m, _ in seen)
        assert got[c.run_id] == {"step": saves[-1], "best": best,
                                 "best_samples": min(n for m, n in seen if m == best), "elapsed": elapsed}
    assert len({g["best"] for g in got.values()}) > 1  # each seed its own, not the group's first
    saved = torch.load(ck.path(cfgs[0].run_id), weights_only=True)
    saved["state"]["tracks"][1]["best"] = ["junk", 3]
    saved["state"]["elapsed"] = float("nan")
    torch.save(saved, ck.path(cfgs[0].run_id))
    again = checkpoint.group_progress(ck, [(c.run_id, c.to_dict()) for c in cfgs])
    assert again[cfgs[1].run_id]["best"] is None and again[cfgs[1].run_id]["step"] == saves[-1]
    assert again[cfgs[0].run_id] == {**got[cfgs[0].run_id], "elapsed": None}  # no pace from a damaged time
    # the CLI's status prints it
    from archsep.cli.sweep import _checkpointed

    out = tmp_path / "out"
    store = open_store(out)
    store.register_sweep("s", "s", "test", [(x.run_id, x.to_dict()) for x in cfgs])
    (out / "checkpoints").mkdir()
    ck.path(cfgs[0].run_id).rename(out / "checkpoints" / ck.path(cfgs[0].run_id).name)
    rows = {r["run_id"]: r for r in _checkpointed(out, store)}
    store.close()
    assert rows[cfgs[0].run_id]["best"] == got[cfgs[0].run_id]["best"]
    assert rows[cfgs[0].run_id]["best_step"] * cfgs[0].train.batch_size == got[cfgs[0].run_id]["best_samples"]


# --- groups: seeds stacked into one computation, learning-rate races stacked or side by side ----
def _tf_qstr(seed: int) -> RunConfig:
    return RunConfig("qstr", "tf-b", {"N": 3}, {"mlp_width": 16},
                     TrainConfig(budget=19_200, eval_size=300, threshold=0.55, eval_mode="every"), seed=seed)


def _race(arch: str, params: dict) -> list[RunConfig]:
    grid = (1e-2, 3e-3, 1e-4)
    return [RunConfig("dyck", arch, {"N": 12}, params,
                      TrainConfig(lr=lr, weight_decay=0.0, batch_size=16, budget=16 * 80, threshold=1e-3,
                                  eval_every=10, eval_size=200, eval_mode="every", keep_best=True, test_size=100,
                                  halving_lrs=grid, halving_rungs=(0.25, 0.5)), 0) for lr in grid]


GROUPS = {
    "stacked seeds": [_tf_qstr(s) for s in range(3)],
    "stacked race": _race("tf-preln", {"width": 16, "heads": 2, "layers": 1, "positions": "learned",
                                       "causal": True}),
    "side-by-side race": _race("lstm", {"hidden": 16, "layers": 1}),
}


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_a_group_stopped_after_some_runs_left_it_goes_on_to_the_same_numbers(name, tmp_path, monkeypatch):
    """Killed after a save at which some of the group's runs had finished (reached the threshold,
    or lost a rung of the race) and others still trained: resumed, every run's numbers are those
    of the group never interrupted, the finished ones' included."""
    from archsep.engine.train import train_many

    cfgs = GROUPS[name]
    plain = train_many(cfgs)
    ck = Checkpoints(str(tmp_path / "ck"), 0.0)
    real, cut = checkpoint.save, []

    def stop_once_some_have_left(c, group, state):
        real(c, group, state)
        if 0 < len(state["active"]) < len(state["tracks"]) and not cut:
            cut.append(state["step"])
            raise KeyboardInterrupt
    monkeypatch.setattr(checkpoint, "save", stop_once_some_have_left)
    with pytest.raises(KeyboardInterrupt):
        train_many(cfgs, checkpoints=ck)
    monkeypatch.setattr(checkpoint, "save", real)
    assert cut, "no save with some runs finished and some training: the group must be stopped in between"
    resumed = train_many(cfgs, checkpoints=ck)
    for r, p in zip(resumed, plain):
        _same(r, p)
        assert r.extra["resumed_at"] == cut
