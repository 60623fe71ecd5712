"""The results store: one SQLite database per output directory (`DIR/archsep.db`, WAL mode).

- Every finished run is one row, written in one transaction: a kill can lose the run in
  progress, never half of a run.
- Several processes may write to one store at once (WAL + busy timeout); a run that two
  sweeps both computed keeps the first committed result (`INSERT ... ON CONFLICT`), except
  that an `error` row may be replaced by a later attempt (`--retry-errors`).
- The database is marked with an application id and a schema version. A file that is not
  SQLite, is corrupted, or belongs to something else is reported and left untouched.
"""
from __future__ import annotations

import getpass
import json
import math
import os
import socket
import sqlite3
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import ArchsepError
from ..results import RunResult, json_safe

DB_NAME = "archsep.db"  # = archsep.fileio.DB_NAME
APP_ID = 0x41525350  # 'ARSP': marks the file as an archsep store
SCHEMA_VERSION = 2  # 2: test_metric, best_samples, extra
BUSY_TIMEOUT_MS = 60_000
STATUSES = ("ok", "censored", "diverged", "error")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'censored', 'diverged', 'error')),
    error TEXT,
    samples INTEGER,
    resolution INTEGER,
    final_metric REAL,
    best_metric REAL,
    curve TEXT NOT NULL,
    train_curve TEXT NOT NULL,
    eval_schedule TEXT NOT NULL,
    params INTEGER,
    state_size INTEGER,
    wall_s REAL NOT NULL,
    test_metric REAL,
    best_samples INTEGER,
    extra TEXT NOT NULL DEFAULT '{}',
    archsep_version TEXT NOT NULL,
    torch_version TEXT NOT NULL,
    device TEXT,
    host TEXT,
    worker_pid INTEGER,
    started_at TEXT,
    finished_at TEXT NOT NULL,
    committed_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sweeps (
    sweep_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    source TEXT NOT NULL,
    preset TEXT,
    quick INTEGER NOT NULL DEFAULT 0,
    analysis TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS planned (
    sweep_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    config TEXT NOT NULL,
    PRIMARY KEY (sweep_id, run_id)
);
CREATE INDEX IF NOT EXISTS planned_run ON planned(run_id);
"""

RESULT_COLUMNS = ("run_id", "config", "status", "error", "samples", "resolution", "final_metric",
                  "best_metric", "curve", "train_curve", "eval_schedule", "params", "state_size", "wall_s",
                  "test_metric", "best_samples", "extra", "archsep_version", "torch_version", "device", "host", "worker_pid", "started_at",
                  "finished_at", "committed_at")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def versions() -> dict[str, str]:
    import torch
    from importlib.metadata import PackageNotFoundError, version

    try:
        v = version("archsep")
    except PackageNotFoundError:  # running from a source tree
        v = "0+unknown"
    return {"archsep": v, "torch": torch.__version__}


def _dumps(x: Any) -> str:
    return json.dumps(json_safe(x), sort_keys=True, allow_nan=False)


@dataclass
class StoredRun:
    """A row of `runs`, with the RunResult it holds."""

    result: RunResult
    row: dict

    @property
    def run_id(self) -> str:
        return self.result.run_id


def record(result: RunResult, started_at: str | None = None, device: str | None = None) -> dict:
    """The row for one finished run; made where the run ran (host, pid, versions)."""
    r = result
    v = versions()
    return {
        "run_id": r.run_id, "config": _dumps(r.config), "status": r.status, "error": r.error,
        "samples": r.samples, "resolution": r.resolution,
        "final_metric": json_safe(r.final_metric), "best_metric": json_safe(r.best_metric),
        "curve": _dumps(r.curve), "train_curve": _dumps(r.train_curve),
        "eval_schedule": _dumps(r.eval_schedule), "params": r.params, "state_size": r.state_size,
        "wall_s": float(r.wall_s), "test_metric": json_safe(r.test_metric), "best_samples": r.best_samples,
        "extra": _dumps(r.extra), "archsep_version": v["archsep"], "torch_version": v["torch"],
        "device": device, "host": socket.gethostname(), "worker_pid": os.getpid(),
        "started_at": started_at, "finished_at": now(), "committed_at": "",
    }


def result_from_row(row: dict) -> RunResult:
    return RunResult(
        run_id=row["run_id"], config=json.loads(row["config"]), status=row["status"],
        samples=row["samples"], resolution=row["resolution"],
        final_metric=row["final_metric"], best_metric=row["best_metric"],
        curve=[tuple(p) for p in json.loads(row["curve"])],
        train_curve=[tuple(p) for p in json.loads(row["train_curve"])],
        eval_schedule=json.loads(row["eval_schedule"]), wall_s=row["wall_s"], params=row["params"] or 0,
        state_size=row["state_size"], error=row["error"],
        test_metric=row.get("test_metric"), best_samples=row.get("best_samples"),
        extra=json.loads(row.get("extra") or "{}"),
    )


class Store:
    """The SQLite results store of one output directory."""

    def __init__(self, out_dir: str | Path, create: bool = True):
        self.dir = Path(out_dir)
        self.path = self.dir / DB_NAME
        self.writable = create
        if not create and not self.path.exists():
            raise ArchsepError(f"DIR: no results store at '{self.path}' (run a sweep into {self.dir} first)")
        self._conn = self._open(create)

    # --- opening ---------------------------------------------------------------------------
    def _open(self, create: bool) -> sqlite3.Connection:
        existed = self.path.exists() and self.path.stat().st_size > 0
        if existed:
            self._check_header()
        if not create and not existed:
            raise ArchsepError(f"DIR: '{self.path}' is empty, not an archsep results store")
        try:
            # reading commands open the file read-only: they never write to it (nor adopt a foreign one).
            # Without a -wal file beside it (no writer, everything checkpointed) the file is complete
            # and read as immutable, so not even SQLite's -shm/-wal companions are created.
            wal = self.path.with_name(self.path.name + "-wal").exists()
            target = (self.path.resolve().as_uri() + ("?mode=ro" if wal else "?immutable=1")) if not create \
                else str(self.path)
            conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                                   check_same_thread=False, uri=not create)
        except sqlite3.Error as e:
            raise ArchsepError(f"store: cannot open '{self.path}': {e}") from None
        try:
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            if existed:
                self._check_identity(conn)
            else:
                self._initialise(conn)
            if create:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable up to the last checkpointed commit, never corrupt
        except sqlite3.DatabaseError as e:
            conn.close()
            raise self._corrupt(str(e)) from None
        return conn

    def _corrupt(self, why: str) -> ArchsepError:
        return ArchsepError(f"store: '{self.path}' is not a readable archsep results database ({why}); "
                            f"it was left untouched: move it away or use another --out")

    def _check_header(self) -> None:
        try:
            with self.path.open("rb") as f:
                head = f.read(100)
        except OSError as e:
            raise ArchsepError(f"store: cannot read '{self.path}': {e.strerror or e}") from None
        if not head.startswith(b"SQLite format 3\x00"):
            raise self._corrupt("not a SQLite file")
        if len(head) == 100 and int.from_bytes(head[68:72], "big") not in (0, APP_ID):
            raise ArchsepError(f"store: '{self.path}' is a SQLite database of another application "
                               f"(application_id {int.from_bytes(head[68:72], 'big'):#x}); it was left untouched: "
                               f"use another --out")

    def _check_identity(self, conn: sqlite3.Connection) -> None:
        ok = conn.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            raise self._corrupt(f"integrity check: {ok}")
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if app == 0 and not tables and self.writable and conn.execute("PRAGMA user_version").fetchone()[0] == 0:
            self._initialise(conn)  # an empty file another sweep just created
            return
        if app != APP_ID or "meta" not in tables:
            raise ArchsepError(f"store: '{self.path}' is a SQLite database that archsep did not create "
                               f"(tables: {', '.join(sorted(tables)) or 'none'}); it was left untouched: use another --out")
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None or int(row[0]) > SCHEMA_VERSION:
            raise ArchsepError(f"store: '{self.path}' has schema version {row[0] if row else '?'}, this archsep "
                               f"reads up to {SCHEMA_VERSION}; upgrade archsep or use another --out")
        if int(row[0]) < SCHEMA_VERSION and self.writable:
            self._migrate(conn, int(row[0]))

    def _migrate(self, conn: sqlite3.Connection, version: int) -> None:
        """Schema 1 -> 2: three columns added; every stored run stays as it was."""
        with _tx(conn):
            have = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
            for col, decl in (("test_metric", "REAL"), ("best_samples", "INTEGER"),
                              ("extra", "TEXT NOT NULL DEFAULT '{}'")):
                if col not in have:
                    conn.execute(f"ALTER TABLE runs ADD COLUMN {col} {decl}")
            conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))

    def _initialise(self, conn: sqlite3.Connection) -> None:
        with _tx(conn):
            app = conn.execute("PRAGMA application_id").fetchone()[0]
            if app not in (0, APP_ID):  # someone else won a race to create it
                raise ArchsepError(f"store: '{self.path}' belongs to another application; it was left untouched")
            conn.execute(f"PRAGMA application_id = {APP_ID}")
            for stmt in _SCHEMA.split(";"):  # not executescript: it would commit mid-transaction
                if stmt.strip():
                    conn.execute(stmt)
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('created_at', ?)", (now(),))
            conn.execute("INSERT OR IGNORE INTO meta VALUES ('created_by', ?)", (_who(),))

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- writing ---------------------------------------------------------------------------
    def add(self, row: dict) -> bool:
        """Commit one finished run atomically. Returns False when the run was already stored
        (another sweep finished it first); an `error` row is replaced by a new attempt."""
        row = {**row, "committed_at": now()}
        if not self.writable:
            raise ArchsepError(f"store: '{self.path}' was opened read-only")
        cols = ", ".join(RESULT_COLUMNS)
        marks = ", ".join("?" for _ in RESULT_COLUMNS)
        updates = ", ".join(f"{c}=excluded.{c}" for c in RESULT_COLUMNS if c != "run_id")
        with _tx(self._conn):
            cur = self._conn.execute(
                f"INSERT INTO runs ({cols}) VALUES ({marks}) ON CONFLICT(run_id) DO UPDATE SET {updates} "
                f"WHERE runs.status = 'error' AND excluded.status != 'error'",
                [row[c] for c in RESULT_COLUMNS])
            return cur.rowcount > 0

    def add_result(self, result: RunResult) -> bool:
        return self.add(record(result))

    def register_sweep(self, sweep_id: str, name: str, source: str, configs: Iterable[tuple[str, dict]],
                       preset: str | None = None, quick: bool = False, analysis: dict | None = None) -> None:
        """Record the sweep and the runs it plans, so `status` can tell what is pending."""
        with _tx(self._conn):
            self._conn.execute("INSERT OR IGNORE INTO sweeps VALUES (?, ?, ?, ?, ?, ?, ?)",
                               (sweep_id, name, source, preset, int(quick), _dumps(analysis or {}), now()))
            self._conn.executemany("INSERT OR IGNORE INTO planned VALUES (?, ?, ?, ?)",
                                   [(sweep_id, rid, i, _dumps(cfg)) for i, (rid, cfg) in enumerate(configs)])

    # --- reading ---------------------------------------------------------------------------
    def finished_ids(self, include_errors: bool = True) -> set[str]:
        q = "SELECT run_id FROM runs" + ("" if include_errors else " WHERE status != 'error'")
        return {r[0] for r in self._conn.execute(q)}

    def rows(self, run_ids: Iterable[str] | None = None) -> list[dict]:
        if run_ids is None:
            return [dict(r) for r in self._conn.execute("SELECT * FROM runs ORDER BY committed_at")]
        ids = list(run_ids)
        out: dict[str, dict] = {}
        for i in range(0, len(ids), 500):  # SQLite caps the number of parameters
            chunk = ids[i:i + 500]
            q = f"SELECT * FROM runs WHERE run_id IN ({', '.join('?' for _ in chunk)})"
            out.update({r["run_id"]: dict(r) for r in self._conn.execute(q, chunk)})
        return [out[i] for i in ids if i in out]

    def results(self, run_ids: Iterable[str] | None = None) -> list[RunResult]:
        return [result_from_row(r) for r in self.rows(run_ids)]

    def sweeps(self) -> list[dict]:
        return [dict(r) for r in self._conn.execute("SELECT * FROM sweeps ORDER BY created_at")]

    def planned(self, sweep_id: str | None = None) -> list[dict]:
        q = "SELECT * FROM planned" + (" WHERE sweep_id = ?" if sweep_id else "") + " ORDER BY sweep_id, position"
        return [dict(r) for r in self._conn.execute(q, (sweep_id,) if sweep_id else ())]

    def status(self) -> dict:
        """Counts over the union of all planned and finished runs."""
        done = {r[0]: r[1] for r in self._conn.execute("SELECT run_id, status FROM runs")}
        planned = {r[0] for r in self._conn.execute("SELECT DISTINCT run_id FROM planned")}
        counts = {s: 0 for s in STATUSES}
        for s in done.values():
            counts[s] += 1
        per_sweep = []
        for sw in self.sweeps():
            ids = [r[0] for r in self._conn.execute("SELECT run_id FROM planned WHERE sweep_id=?", (sw["sweep_id"],))]
            st = [done.get(i) for i in ids]
            per_sweep.append({"sweep_id": sw["sweep_id"], "name": sw["name"], "total": len(ids),
                              "done": sum(s is not None for s in st), "pending": st.count(None),
                              "failed": sum(s in ("error", "diverged") for s in st)})
        failed = [dict(r) for r in self._conn.execute(
            "SELECT run_id, status, error, config FROM runs WHERE status IN ('error', 'diverged') ORDER BY committed_at")]
        return {"path": str(self.path), "finished": len(done), "pending": len(planned - set(done)),
                "by_status": counts, "sweeps": per_sweep, "failed": failed}


@contextmanager
def _tx(conn: sqlite3.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE takes the write lock up front, so a busy store waits (busy_timeout)
    instead of failing half-way through a transaction."""
    for attempt in range(50):
        try:
            conn.execute("BEGIN IMMEDIATE")
            break
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            time.sleep(0.05 * (attempt + 1))
    else:
        raise ArchsepError("store: the database stayed locked by another process for too long")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def _who() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user name in some containers
        user = "?"
    return f"{user}@{socket.gethostname()}"


def open_store(out_dir: str | Path, create: bool = True) -> Store:
    """Open (or create) the store of `out_dir`, turning OS errors into one-line messages."""
    out = Path(out_dir)
    if not create:
        if not out.is_dir():
            raise ArchsepError(f"DIR: '{out}' is not a directory")
        return Store(out, create=False)
    return Store(prepare_out(out), create=True)


def prepare_out(out_dir: str | Path) -> Path:
    """Create OUT and check that it is writable (one-line error otherwise); no store is made."""
    from ..fileio import make_dirs, remove_dirs

    out = Path(out_dir)
    created = make_dirs(out, "out")  # on failure, the parents it made are removed again
    try:  # an unpredictable name, O_EXCL: a planted file or symlink is never opened
        fd, probe = tempfile.mkstemp(prefix=".archsep-write-test-", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        remove_dirs(created)
        raise ArchsepError(f"out: cannot write to '{out}': {e.strerror or e}") from None
    return out

