"""Faults and hostile inputs (the fault-injection findings, each reproduced as described):
no stray processes, no foreign files written, no tracebacks, one answer per run."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from archsep.cli import main
from archsep.store import DB_NAME
from sweep_util import ARCHSEP, cli, env, tiny_toml, write


def _children(pid: int) -> set[int]:
    """Every live descendant of pid (from /proc)."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    out, todo = set(), [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.add(c)
            todo.append(c)
    return out


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for p in pids:
        try:
            state = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.add(p)
    return alive


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_exit_when_the_driver_is_killed(tmp_path, sig):
    """1. kill -9 / -TERM of the main process of `sweep --workers 2`: no worker, nor the
    resource tracker, survives 10 s."""
    f = write(tmp_path / "s.toml", tiny_toml("orphans", Ns=tuple(range(2, 10)), seeds=2, budget=64_000,
                                             threshold=0.001))
    p = subprocess.Popen([*ARCHSEP, "sweep", str(f), "--out", str(tmp_path / "out"), "--workers", "2",
                          "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    try:
        deadline = time.time() + 90
        kids: set[int] = set()
        while time.time() < deadline and len(kids) < 3:  # two workers and the resource tracker
            time.sleep(0.2)
            kids = _children(p.pid)
        assert len(kids) >= 3, kids
        time.sleep(1.0)  # the workers are training
        os.kill(p.pid, sig)  # the main process only, as the OOM killer does
        p.wait(timeout=30)
        deadline = time.time() + 10
        while _alive(kids) and time.time() < deadline:
            time.sleep(0.2)
        assert not _alive(kids), f"still running 10 s after the driver died: {_alive(kids)}"
    finally:
        for k in _alive(_children(p.pid)) | _alive(kids if "kids" in dir() else set()):
            os.kill(k, signal.SIGKILL)


def _foreign_sqlite(path: Path) -> bytes:
    con = sqlite3.connect(path)
    con.execute("PRAGMA user_version = 7")
    con.commit()
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("cmd", [["status", "D"], ["status", "D", "--json"], ["export", "D"], ["report", "D"]])
def test_reading_commands_never_write_a_foreign_file(tmp_path, cmd, capsys):
    """2. An empty SQLite file with user_version 7 named archsep.db is refused, byte for byte
    untouched, and nothing else is written beside it."""
    before = _foreign_sqlite(tmp_path / DB_NAME)
    code = main([tmp_path.as_posix() if a == "D" else a for a in cmd])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "archsep" in err[0], err
    assert (tmp_path / DB_NAME).read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [DB_NAME]


def test_reading_commands_open_an_archsep_store_read_only(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    f = write(tmp_path / "s.toml", tiny_toml("ro", Ns=(2,), budget=640))
    out = tmp_path / "out"
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--no-progress"]) == 0
    files = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    os.chmod(out, 0o555)  # a reader needs no write access at all
    try:
        assert main(["status", str(out)]) == 0
        assert main(["export", str(out), "-o", str(tmp_path / "runs.csv")]) == 0
    finally:
        os.chmod(out, 0o755)
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == files


def _mount_small_fs(path: Path, size: str) -> bool:
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


@pytest.mark.parametrize("size", ["300k", "64k"])
def test_a_full_disk_is_one_line_and_the_store_stays_consistent(tmp_path, size, monkeypatch):
    """3. A sweep on a tiny filesystem (a real tmpfs where the machine lets us mount one, else a
    simulated 'database or disk is full' at the same call) ends with one line."""
    fs = tmp_path / "small"
    real = _mount_small_fs(fs, size)
    if not real:
        fs.mkdir(exist_ok=True)
        import archsep.store as store_mod

        adds = {"n": 0}
        orig = store_mod.Store.add

        def add(self, row):
            adds["n"] += 1
            if adds["n"] > 2:
                raise sqlite3.OperationalError("database or disk is full")
            return orig(self, row)

        monkeypatch.setattr(store_mod.Store, "add", add)
    try:
        f = write(tmp_path / "s.toml", tiny_toml("full", Ns=tuple(range(2, 14)), seeds=3, budget=640))
        if real:
            r = cli("sweep", f, "--out", fs / "out", "--workers", "1", timeout=300)
            code, err = r.returncode, r.stderr
        else:
            import contextlib
            import io

            buf = io.StringIO()
            with contextlib.redirect_stderr(buf):
                code = main(["sweep", str(f), "--out", str(fs / "out"), "--workers", "1", "--no-progress"])
            err = buf.getvalue()
        lines = [line for line in err.splitlines() if line.startswith("archsep: error")]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, err[-2000:]
        assert "full" in lines[0] and "rerun" in lines[0]
        db = fs / "out" / DB_NAME
        if db.exists():  # what was committed is whole (checked on a copy: the full disk has no room to read a WAL)
            import shutil

            copy = tmp_path / "copy"
            copy.mkdir()
            for f in (fs / "out").glob(DB_NAME + "*"):
                shutil.copy(f, copy / f.name)
            con = sqlite3.connect(copy / DB_NAME)
            assert con.execute("PRAGMA quick_check").fetchone()[0] == "ok"
            con.execute("SELECT count(*) FROM runs").fetchone()
            con.close()
    finally:
        if real:
            subprocess.run(["umount", "-l", str(fs)], capture_output=True)


ABSURD = [
    ("N", '"task_params.N" = [1000000000]', "task_params.N"),
    ("d", '"task_params.d" = [1000000]', "batch_size or task_params.N"),
    ("mlp_width", '"model_params.mlp_width" = [100000000]', "task_params.N"),
    ("batch_size", '"train.batch_size" = [100000000]\n"train.budget" = [100000000]', "batch_size"),
]


@pytest.mark.parametrize("name, axis, field", ABSURD, ids=[a[0] for a in ABSURD])
def test_absurd_sizes_are_refused_before_anything_is_allocated(tmp_path, name, axis, field, capsys):
    """4. Sizes far beyond the machine: one line naming the field and the estimate, in seconds,
    with no archsep.db left behind."""
    text = ('name = "absurd"\n[base]\ntask = "qstr"\narch = "tf-b"\n'
            'train = { budget = 6400, eval_size = 100 }\n[grid]\n' + axis + "\n")
    f = write(tmp_path / "s.toml", text)
    t = time.time()
    code = main(["sweep", str(f), "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and field in err[0] and "GB" in err[0], err
    assert time.time() - t < 60
    assert not (tmp_path / "out").exists()


def test_an_absurd_construction_is_refused(capsys):
    assert main(["construct", "lookup", "--N", "10000000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "N=10000000" in err[0] and "GB" in err[0]


@pytest.mark.parametrize("edit, expected", [
    ("lr = inf", "train.lr: expected a finite number"),
    ("lr = nan", "train.lr: expected a finite number"),
    ("weight_decay = -inf", "train.weight_decay: expected a finite number"),
])
def test_non_finite_numbers_are_rejected(tmp_path, edit, expected, capsys):
    """5a. nan and +-inf in a float field (only screen_z takes inf, meaning 'never stop early')."""
    f = write(tmp_path / "s.toml", tiny_toml("nan", Ns=(2,), extra="").replace("budget = 1280",
                                                                               f"budget = 1280, {edit}"))
    assert main(["sweep", str(f), "--out", str(tmp_path / "out"), "--no-progress"]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_labels_and_separations_are_checked_up_front(tmp_path, capsys):
    """5b. Two arms of different architectures under one label; a separation naming no arm."""
    dup = tiny_toml("dup", Ns=(2,)).replace('label = "FFN"', 'label = "TF"').replace('[["TF", "FFN"]]', "[]")
    assert main(["sweep", str(write(tmp_path / "a.toml", dup)), "--dry-run"]) == 2
    assert "label: 'TF' already names" in capsys.readouterr().err
    bad = tiny_toml("sep", Ns=(2,)).replace('[["TF", "FFN"]]', '[["TF", "LSTM"]]')
    assert main(["sweep", str(write(tmp_path / "b.toml", bad)), "--dry-run"]) == 2
    assert "analysis.separations[0]: no arm is labelled 'LSTM'" in capsys.readouterr().err


def test_failing_checks_create_nothing(tmp_path, monkeypatch, capsys):
    """6. --executor ray without Ray, --device cuda without CUDA, export -o DIR, and reproduce
    into someone else's directory: an error before any file is made or overwritten."""
    import importlib.util

    import torch

    f = write(tmp_path / "s.toml", tiny_toml("fx", Ns=(2,)))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "ray" else real_find_spec(n, *a))
    assert main(["sweep", str(f), "--out", str(tmp_path / "o1"), "--executor", "ray", "--no-progress"]) == 2
    assert "Ray is not installed" in capsys.readouterr().err and not (tmp_path / "o1").exists()
    assert main(["reproduce", "qstr-fig1a", "--quick", "--out", str(tmp_path / "o2"), "--executor", "ray"]) == 2
    assert not (tmp_path / "o2").exists()
    monkeypatch.setattr(importlib.util, "find_spec", real_find_spec)
    if not torch.cuda.is_available():
        for args in (["sweep", str(f), "--out", str(tmp_path / "o3"), "--device", "cuda"],
                     ["reproduce", "qstr-fig1a", "--quick", "--out", str(tmp_path / "o3"), "--device", "cuda"]):
            assert main(args) == 2 and not (tmp_path / "o3").exists()
        capsys.readouterr()
    # export -o EXISTING_DIR: refused, no EXISTING_DIR.tmp left
    store = tmp_path / "store"
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    assert main(["sweep", str(write(tmp_path / "t.toml", tiny_toml("t", Ns=(2,), budget=640))), "--out", str(store),
                 "--workers", "1", "--no-progress"]) == 0
    (tmp_path / "dest").mkdir()
    assert main(["export", str(store), "-o", str(tmp_path / "dest")]) == 2
    assert "is a directory" in capsys.readouterr().err and not list(tmp_path.glob("dest*.tmp"))
    # reproduce into a directory of someone else's results: refused, untouched
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "runs.csv").write_text("my,own\n1,2\n")
    (theirs / "summary.json").write_text('{"mine": true}')
    assert main(["reproduce", "qstr-fig1a", "--quick", "--out", str(theirs), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "not empty and holds no archsep store" in err and "runs.csv" in err
    assert (theirs / "runs.csv").read_text() == "my,own\n1,2\n" and sorted(p.name for p in theirs.iterdir()) == [
        "runs.csv", "summary.json"]


def _stored(out: Path) -> dict[str, tuple]:
    con = sqlite3.connect(f"{(out / DB_NAME).resolve().as_uri()}?mode=ro", uri=True)
    rows = {r[0]: r[1:] for r in con.execute(
        "SELECT run_id, status, samples, final_metric, best_metric, curve, train_curve FROM runs")}
    con.close()
    return rows


def test_a_runs_numbers_do_not_depend_on_how_the_sweep_was_spread(tmp_path):
    """7. The same 4-seed sweep with --workers 1 and --workers 2: bit-identical stored numbers
    (the Ray executor is compared in tests/system/test_ray.py)."""
    f = write(tmp_path / "s.toml", tiny_toml("spread", Ns=(2, 3), seeds=4, budget=3200, threshold=0.3))
    e = {k: v for k, v in env().items() if k != "ARCHSEP_THREADS"}  # the default: one thread per run
    for w in (1, 2):
        r = subprocess.run([*ARCHSEP, "sweep", str(f), "--out", str(tmp_path / f"w{w}"), "--workers", str(w),
                            "--no-progress"], capture_output=True, text=True, env=e, timeout=300)
        assert r.returncode == 0, r.stderr
    a, b = _stored(tmp_path / "w1"), _stored(tmp_path / "w2")
    assert len(a) == 16 and a == b


def test_an_all_error_sweep_exits_non_zero_and_a_rerun_says_it_reused_errors(tmp_path, monkeypatch, capsys):
    """8. Every run fails (as a plugin model that cannot build would): exit 3 with the count and
    the first message, and a rerun that reuses the stored errors says so and how to retry."""
    import archsep.engine.train as tr

    def boom(cfgs, stacked, checkpoints=None):
        raise RuntimeError("the model cannot be built here")

    monkeypatch.setattr(tr, "_train_group", boom)
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    f = write(tmp_path / "s.toml", tiny_toml("allerr", Ns=(2, 3), seeds=2, budget=640))
    out = tmp_path / "out"
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert "8 of 8 run(s) ended in error" in err and "the model cannot be built here" in err
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1"]) == 3
    err = capsys.readouterr().err
    assert "8 run(s) stored with status error are reused" in err and "--retry-errors" in err
    monkeypatch.undo()
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    assert main(["sweep", str(f), "--out", str(out), "--workers", "1", "--retry-errors", "--no-progress"]) == 0
    assert {json.loads(json.dumps(s)) for s in [r[0] for r in _stored(out).values()]} <= {"ok", "censored"}
