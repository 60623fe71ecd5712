"""The SQLite results store: atomic runs, kill-and-resume, two writers, bad files, export."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import time

import pytest

from archsep.errors import ArchsepError
from archsep.store import DB_NAME, open_store, record
from archsep.engine.train import RunResult
from sweep_util import ARCHSEP, cli, env, tiny_toml, write
from extras import needs

REQUIRED = ("run_id", "config", "status", "curve", "train_curve", "eval_schedule", "wall_s", "archsep_version",
            "torch_version", "finished_at", "committed_at")


def _rows(db) -> dict[str, dict]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    con.row_factory = sqlite3.Row
    try:
        return {r["run_id"]: dict(r) for r in con.execute("SELECT * FROM runs")}
    finally:
        con.close()


def _count(db) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return con.execute("SELECT count(*) FROM runs").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:  # not created yet
        return 0


def _assert_whole(rows: dict[str, dict]) -> None:
    for r in rows.values():
        assert all(r[k] not in (None, "") for k in REQUIRED), r
        assert r["status"] in ("ok", "censored", "diverged", "error")
        json.loads(r["config"]), json.loads(r["curve"]), json.loads(r["train_curve"])


def _result(run_id="r1", status="ok", error=None) -> RunResult:
    return RunResult(run_id, {"task": "qstr", "arch": "tf-b", "seed": 0, "task_params": {"N": 2}}, status,
                     640 if status == "ok" else None, 64, 0.5, 0.4, [(640, 0.5)], [(640, 0.6)], {}, 1.0, 10,
                     None, error)


def test_kill_mid_sweep_then_resume_gives_every_run_exactly_once(tmp_path):
    f = write(tmp_path / "kill.toml", tiny_toml("kill", Ns=tuple(range(2, 10)), budget=1920, threshold=0.05))
    out = tmp_path / "out"
    db = out / DB_NAME
    total = 16
    p = subprocess.Popen([*ARCHSEP, "sweep", str(f), "--out", str(out), "--workers", "1", "--no-progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(), start_new_session=True)
    try:
        deadline = time.time() + 90
        while _count(db) < 3 and time.time() < deadline and p.poll() is None:
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGKILL)  # mid-sweep, mid-run (its own session: nothing else is hit)
    finally:
        p.wait(timeout=30)
    assert p.returncode == -signal.SIGKILL
    before = _rows(db)
    assert 3 <= len(before) < total, f"the kill should land mid-sweep, {len(before)} of {total} were done"
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()
    _assert_whole(before)

    r = cli("sweep", f, "--out", out, "--workers", "1", timeout=180)
    assert r.returncode == 0, r.stderr
    assert f"{total - len(before)} to run, {len(before)} already done" in r.stderr
    after = _rows(db)
    with open_store(out) as st:
        planned = {p["run_id"] for p in st.planned()}
        status = st.status()
    assert set(after) == planned and len(planned) == total  # every grid point, once (run_id is the key)
    assert status["pending"] == 0 and status["finished"] == total
    for rid, row in before.items():  # finished runs were not recomputed: same row, same commit time
        assert after[rid] == row
    new = set(after) - set(before)
    assert {after[i]["worker_pid"] for i in new}.isdisjoint({row["worker_pid"] for row in before.values()})
    _assert_whole(after)


def test_two_sweeps_write_one_store_at_once(tmp_path):
    a = write(tmp_path / "a.toml", tiny_toml("a", Ns=(2, 3)))
    b = write(tmp_path / "b.toml", tiny_toml("b", Ns=(3, 4)))
    out = tmp_path / "out"
    procs = [subprocess.Popen([*ARCHSEP, "sweep", str(s), "--out", str(out), "--workers", "1", "--no-progress"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
             for s in (a, b)]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (_, se) in zip(procs, outs):
        assert p.returncode == 0, se
    rows = _rows(out / DB_NAME)
    assert len(rows) == 6  # 2 arms x N in {2,3,4}; the overlap is stored once
    _assert_whole(rows)
    with open_store(out) as st:
        s = st.status()
    assert s["pending"] == 0 and sorted(x["name"] for x in s["sweeps"]) == ["a", "b"]
    assert all(x["done"] == x["total"] == 4 for x in s["sweeps"])
    r = cli("status", out)
    assert r.returncode == 0 and "6 finished, 0 pending" in r.stdout


def test_a_run_is_stored_once_and_an_error_can_be_replaced(tmp_path):
    with open_store(tmp_path) as st:
        assert st.add(record(_result("r1"))) is True
        assert st.add(record(_result("r1"))) is False  # a second sweep's copy is ignored
        assert st.add(record(_result("r2", "error", "boom"))) is True
        assert st.add(record(_result("r2", "ok"))) is True  # a retried error is replaced
        assert st.add(record(_result("r2", "error", "again"))) is False  # ... but never the other way
        rows = {r["run_id"]: r for r in st.rows()}
    assert rows["r2"]["status"] == "ok" and len(rows) == 2
    mode = sqlite3.connect(tmp_path / DB_NAME).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def _damaged_store(tmp_path) -> bytes:
    """A real store whose pages after the first were overwritten (a bad disk, a bad copy)."""
    with open_store(tmp_path) as st:
        for i in range(30):
            st.add(record(_result(f"r{i}")))
    con = sqlite3.connect(tmp_path / DB_NAME)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    for extra in ("-wal", "-shm"):
        (tmp_path / (DB_NAME + extra)).unlink(missing_ok=True)
    data = bytearray((tmp_path / DB_NAME).read_bytes())
    data[4096:] = b"\x5a" * (len(data) - 4096)
    return bytes(data)


@pytest.mark.parametrize("kind, message", [
    ("garbage", "not a SQLite file"),
    ("damaged", "not a readable archsep results database"),
])
def test_a_corrupted_store_is_an_error_and_is_left_untouched(tmp_path, kind, message):
    db = tmp_path / DB_NAME
    content = b"this is not a database at all" * 10 if kind == "garbage" else _damaged_store(tmp_path)
    db.write_bytes(content)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(ArchsepError, match=message):
        open_store(tmp_path)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == [DB_NAME]


def test_a_foreign_sqlite_database_is_refused_and_left_untouched(tmp_path):
    db = tmp_path / DB_NAME
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    con.execute("INSERT INTO customers VALUES (1, 'x')")
    con.commit()
    con.close()
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(ArchsepError, match="archsep did not create"):
        open_store(tmp_path)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


def test_export_csv_and_parquet_load_in_pandas(tmp_path):
    pd = pytest.importorskip("pandas")
    with open_store(tmp_path) as st:
        st.add(record(_result("r1")))
        st.add(record(_result("r2", "error", "boom\ntrace")))
    from archsep.cli import main

    for fmt in ("csv", "parquet"):
        if fmt == "parquet":
            needs("pyarrow")
        assert main(["export", str(tmp_path), "--format", fmt]) == 0
        df = getattr(pd, f"read_{fmt}")(tmp_path / f"runs.{fmt}")
        assert sorted(df["run_id"]) == ["r1", "r2"]
        assert {"task_params.N", "status", "samples", "wall_s", "torch_version", "finished_at"} <= set(df.columns)
        assert df.set_index("run_id").loc["r2", "error"] == "boom"
