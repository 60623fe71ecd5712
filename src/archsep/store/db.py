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
import os
import socket
import sqlite3
import tempfile
import time
import typing
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import ArchsepError, shown
from ..results import RunResult
from .rows import RESULT_COLUMNS, STATUSES, Damaged, _dumps, check_row, check_sweep, now

DB_NAME = "archsep.db"  # = archsep.fileio.DB_NAME
APP_ID = 0x41525350  # 'ARSP': marks the file as an archsep store
SCHEMA_VERSION = 2  # 2: test_metric, best_samples, extra
BUSY_TIMEOUT_MS = 60_000

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


def disk_full(e: sqlite3.OperationalError) -> bool:
    """Whether SQLite failed for want of space (or on an I/O error, what a full disk gives some
    file systems): by its result code, or, for an error raised without one, SQLite's own text
    for those codes. The one place a full disk is recognised."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR)
    return str(e) in ("database or disk is full", "disk I/O error")


class Store:
    """The SQLite results store of one output directory."""

    def __init__(self, out_dir: str | Path, create: bool = True):
        self.dir = Path(out_dir)
        self.path = self.dir / DB_NAME
        self.writable = create
        # removes the private copy a reader may make (see _private_copy)
        self._cleanup: typing.Callable[[], Any] | None = None
        if not create and not self.path.exists():
            raise ArchsepError.at("store", f"no results store at '{self.path}' (run a sweep into {self.dir} first)")
        try:
            self._conn = self._open(create)
        except BaseException:
            if self._cleanup is not None:
                self._cleanup()
            raise

    # --- opening ---------------------------------------------------------------------------
    def _open(self, create: bool) -> sqlite3.Connection:
        existed = self.path.exists() and self.path.stat().st_size > 0
        if existed:
            self._check_header()
        if not create and not existed:
            raise ArchsepError.at("store", f"'{self.path}' is empty, not an archsep results store")
        try:
            # reading commands open the file read-only: they never write to it (nor adopt a foreign one).
            # Without a -wal file beside it (no writer, everything checkpointed) the file is complete
            # and read as immutable, so not even SQLite's -shm/-wal companions are created. A -wal with
            # its -shm (a live or killed writer) is read in place. A -wal without -shm (a copied
            # folder) or a hot -journal cannot be read in place without creating or changing files
            # beside it: it is read from a private copy, removed on close.
            wal = self.path.with_name(self.path.name + "-wal").exists()
            shm = self.path.with_name(self.path.name + "-shm").exists()
            journal = self.path.with_name(self.path.name + "-journal")
            hot = journal.exists() and journal.stat().st_size > 0
            if create:
                target = str(self.path)
            elif (wal and not shm) or hot:
                target = self._private_copy().as_uri()
            else:
                target = self.path.resolve().as_uri() + ("?mode=ro" if wal else "?immutable=1")
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
                # WAL + NORMAL: durable up to the last checkpointed commit, never corrupt
                conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as e:
            conn.close()
            raise self._corrupt(str(e)) from None
        return conn

    def _private_copy(self) -> Path:
        """The database and its -wal/-journal copied into a private temporary directory (which
        `close` removes), so that SQLite may recover them there."""
        import shutil
        import tempfile
        import weakref

        tmp = Path(tempfile.mkdtemp(prefix="archsep-read-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, str(tmp), True)
        try:
            for suffix in ("", "-wal", "-journal"):
                src = self.path.with_name(self.path.name + suffix)
                if suffix == "" or src.exists():
                    shutil.copyfile(src, tmp / (DB_NAME + suffix))
        except OSError as e:
            self._cleanup()
            raise ArchsepError(f"store: cannot read '{shown(self.path)}' without writing beside it (it has a "
                               f"-wal file but no -shm, or a -journal), and copying it to {tmp.parent} failed: "
                               f"{e.strerror or e}") from None
        return tmp / DB_NAME

    def _corrupt(self, why: str) -> ArchsepError:
        return ArchsepError(f"store: '{self.path}' is not a readable archsep results database ({why}); "
                            f"it was left untouched: move it away or use another output directory")

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
                               f"use another output directory")

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
                               f"(tables: {', '.join(sorted(tables)) or 'none'}); it was left untouched: use another "
                               f"output directory")
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = row[0] if row else None
        if isinstance(version, str) and version.isascii() and version.isdigit() and len(version) < 10:
            version = int(version)
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ArchsepError(f"store '{shown(self.path)}' is damaged: meta.schema_version: expected a positive "
                               f"integer, got {shown(repr(row[0]) if row else 'nothing', 60)}; it was left untouched",
                               field="meta.schema_version")
        if version > SCHEMA_VERSION:
            raise ArchsepError(f"store: '{self.path}' has schema version {version}, this archsep "
                               f"reads up to {SCHEMA_VERSION}; upgrade archsep or use another output directory")
        if version < SCHEMA_VERSION and self.writable:
            self._migrate(conn, version)
        self._check_columns(conn, tables, version)

    def _check_columns(self, conn: sqlite3.Connection, tables: set[str], version: int) -> None:
        """Every table and column the readers use is there (a store made by hand may lack one)."""
        later = {"test_metric", "best_samples", "extra"} if version < 2 and not self.writable else set()
        need = {"runs": set(RESULT_COLUMNS) - later, "sweeps": {"sweep_id", "name", "source", "preset", "quick",
                "analysis", "created_at"}, "planned": {"sweep_id", "run_id", "position", "config"}}
        for table, cols in need.items():
            if table not in tables:
                raise ArchsepError(f"store '{shown(self.path)}' is damaged: table '{table}' is missing; "
                                   "it was left untouched", field=table)
            have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            if cols - have:
                raise ArchsepError(f"store '{shown(self.path)}' is damaged: {table}: missing column(s) "
                                   f"{', '.join(sorted(cols - have))}; it was left untouched", field=table)

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
        if self._cleanup is not None:
            self._cleanup()  # the private copy of a store read from elsewhere

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

    def ok_runs(self) -> list[tuple[str, str, int | None]]:
        """(run id, config as stored, samples) of every run stored with status ok."""
        q = "SELECT run_id, config, samples FROM runs WHERE status = 'ok'"
        return [(r[0], r[1], r[2]) for r in self._conn.execute(q)]

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
        """The stored runs as RunResults; a damaged row is one ArchsepError naming this store,
        the run and the field."""
        return [self.check(r) for r in self.rows(run_ids)]

    def check(self, row: dict) -> RunResult:
        """`row`'s RunResult, or an ArchsepError naming this store, the run id and the field."""
        try:
            return check_row(row)
        except Damaged as e:
            raise self._damaged(e) from None

    def _damaged(self, e: Damaged) -> ArchsepError:
        return ArchsepError(f"store '{shown(self.path)}' is damaged: {e}", field=e.field)

    def sweeps(self) -> list[dict]:
        """The sweeps rows, each checked, with its `analysis` parsed (`analysis_data`)."""
        out = []
        for r in self._conn.execute("SELECT * FROM sweeps ORDER BY created_at"):
            try:
                out.append(check_sweep(dict(r)))
            except Damaged as e:
                raise self._damaged(e) from None
        return out

    def planned(self, sweep_id: str | None = None) -> list[dict]:
        q = "SELECT * FROM planned" + (" WHERE sweep_id = ?" if sweep_id else "") + " ORDER BY sweep_id, position"
        return [dict(r) for r in self._conn.execute(q, (sweep_id,) if sweep_id else ())]

    def status(self) -> dict:
        """Counts over the union of all planned and finished runs. Every row is checked: a
        damaged one is listed under `damaged` (run or sweep, field, why) and counted nowhere
        else; the rest of the store is reported as usual."""
        done: dict[str, str] = {}  # run_id -> status ("damaged" for a damaged row)
        damaged: list[dict] = []
        failed: list[dict] = []
        for row in self._conn.execute("SELECT * FROM runs ORDER BY committed_at"):
            row = dict(row)
            try:
                r = check_row(row)
            except Damaged as e:
                damaged.append({"where": e.where, "field": e.field, "error": str(e)})
                if isinstance(row.get("run_id"), str):
                    done[row["run_id"]] = "damaged"
                continue
            done[r.run_id] = r.status
            if r.status in ("error", "diverged"):
                failed.append({"run_id": r.run_id, "status": r.status, "error": r.error, "config": row["config"]})
        planned = {r[0] for r in self._conn.execute("SELECT DISTINCT run_id FROM planned")}
        counts = {s: 0 for s in STATUSES}
        for s in done.values():
            if s in counts:
                counts[s] += 1
        per_sweep = []
        for sw in self._conn.execute("SELECT * FROM sweeps ORDER BY created_at"):
            try:
                sw = check_sweep(dict(sw))
            except Damaged as e:
                damaged.append({"where": e.where, "field": e.field, "error": str(e)})
                continue
            ids = [r[0] for r in self._conn.execute("SELECT run_id FROM planned WHERE sweep_id=?", (sw["sweep_id"],))]
            st = [done.get(i) for i in ids]
            per_sweep.append({"sweep_id": sw["sweep_id"], "name": sw["name"], "total": len(ids),
                              "done": sum(s is not None for s in st), "pending": st.count(None),
                              "failed": sum(s in ("error", "diverged") for s in st)})
        return {"path": str(self.path), "finished": sum(s != "damaged" for s in done.values()),
                "pending": len(planned - set(done)), "by_status": counts, "sweeps": per_sweep, "failed": failed,
                "damaged": damaged}


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
            raise ArchsepError.at("store", f"'{out}' is not a directory")
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
        raise ArchsepError.at("out", f"cannot write to '{out}': {e.strerror or e}") from None
    return out

