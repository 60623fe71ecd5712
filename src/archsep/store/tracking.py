"""Optional experiment tracking: mirror finished runs into MLflow or TensorBoard.

The results store (`OUT/archsep.db`) stays the source of truth. A tracker is handed each run's
store row *after* the row was committed, and copies it into a local tracking store inside the
output directory; nothing is sent over the network.

- `mlflow`: `OUT/mlruns/mlflow.db` (SQLite backend; see it with
  `mlflow ui --backend-store-uri sqlite:///OUT/mlruns/mlflow.db`). One experiment per sweep
  (`name`, default: the output directory's name), one MLflow run per archsep run, named
  `LABEL-RUN_ID` and tagged `archsep.run_id`.
- `tensorboard`: `OUT/tensorboard/RUN_ID/` (see it with `tensorboard --logdir OUT/tensorboard`):
  the held-out and training curves as scalars over samples, the final numbers, the config as
  hparams and text.

Logging is idempotent: a run already logged is skipped (a stored `error` that a later attempt
replaced is replaced there too), so logging every row of a store again only fills in what is
missing. A tracker never fails the sweep: `Tracker.log` catches every error, warns once on
stderr, and counts the failures (`Tracker.failed`).

    check_tracker("mlflow")                   # before any run: one-line ArchsepError if unusable
    tracker = make_tracker("mlflow", out_dir)  # opens (creates) the local tracking store
    tracker.log(row)                           # after store.add(row); True when written
    tracker.close()
"""
from __future__ import annotations

import json
import math
import os
import shutil
import sys
import uuid
import warnings
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from ..errors import ArchsepError, unknown

TRACKERS = ("mlflow", "tensorboard")

# what each tracker imports, and the extra that installs it
_NEEDS = {
    "mlflow": ("mlflow", "sqlalchemy", "alembic"),
    "tensorboard": ("tensorboard", "torch.utils.tensorboard"),
}

RUN_ID_TAG = "archsep.run_id"
DONE_TAG = "archsep.logged"  # set last: a run without it was interrupted while being logged
STATUS_TAG = "archsep.status"
HELDOUT = "heldout_metric"  # the held-out curve: (samples, metric) points, step = samples
TRAIN = "train_metric"  # the progressive (training-stream) curve
MARKER = "archsep-run.json"  # in a TensorBoard run directory: which run, which status


def check_tracker(kind: str) -> None:
    """Raise a one-line ArchsepError naming `log` if `kind` is not a tracker or its packages
    are missing; called before any run starts."""
    if kind not in TRACKERS:
        raise unknown("log", kind, TRACKERS)
    _quiet_env(kind)
    import importlib

    for mod in _NEEDS[kind]:
        try:
            with _quiet_warnings():
                importlib.import_module(mod)
        except ImportError as e:
            missing = getattr(e, "name", None) or mod
            raise ArchsepError.at("log", f"{kind} tracking needs the '{missing.split('.')[0]}' package, which is not "
                               f"installed: pip install 'archsep[{kind}]'") from None
        except Exception as e:  # an installed but broken package (e.g. a protobuf mismatch)
            raise ArchsepError.at("log", f"{kind} tracking cannot import '{mod}' ({type(e).__name__}: "
                               f"{_first_line(e)}); reinstall it: pip install --force-reinstall "
                               f"'archsep[{kind}]'") from None


def make_tracker(kind: str, out_dir: str | Path, name: str | None = None) -> "Tracker":
    """A tracker writing under `out_dir` (the sweep's output directory). `name` names the
    MLflow experiment (default: the directory's name); TensorBoard does not use it.
    Opening problems are one-line ArchsepErrors, raised here, before any run."""
    check_tracker(kind)
    out = Path(out_dir)
    cls = {"mlflow": MlflowTracker, "tensorboard": TensorBoardTracker}[kind]
    try:
        out.mkdir(parents=True, exist_ok=True)
        return cls(out, name or out.resolve().name or "archsep")
    except ArchsepError:
        raise
    except Exception as e:
        raise ArchsepError.at("log", f"cannot open the {kind} tracking store in '{out}' "
                           f"({type(e).__name__}: {_first_line(e)})") from None


class Tracker:
    """Mirrors store rows into a tracking backend. Subclasses implement `_log` and `_close`."""

    kind = ""

    def __init__(self, out_dir: Path, name: str):
        self.out = out_dir
        self.name = name
        self.logged = 0  # runs written by this tracker
        self.skipped = 0  # runs that were already there
        self.failed = 0  # runs that could not be logged (the store has them all the same)
        self._warned = False

    def log(self, row: dict) -> bool:
        """Log one store row (as `store.record` makes it, or as `Store.rows` returns it).
        True when it was written, False when it was already there or logging failed; never raises
        (but KeyboardInterrupt and the like)."""
        try:
            run = _Run(row)
            wrote = self._log(run)
        except Exception as e:
            self.failed += 1
            self._warn(f"could not log run {row.get('run_id', '?') if isinstance(row, dict) else '?'}", e)
            return False
        if wrote:
            self.logged += 1
        else:
            self.skipped += 1
        return wrote

    def close(self) -> None:
        try:
            self._close()
        except Exception as e:
            self._warn("could not close its store", e)

    def __enter__(self) -> "Tracker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _warn(self, what: str, e: BaseException) -> None:
        if self._warned:
            return
        self._warned = True
        print(f"archsep: log {self.kind}: {what} ({type(e).__name__}: {_first_line(e)}); the results store "
              f"is unaffected; further {self.kind} errors are not shown (logging the store's rows again "
              "fills in what is missing)", file=sys.stderr, flush=True)

    def _log(self, run: "_Run") -> bool:
        raise NotImplementedError

    def _close(self) -> None:
        pass


# --- what a row says -----------------------------------------------------------------------------
class _Run:
    """A store row, decoded: JSON columns parsed, the config flattened."""

    def __init__(self, row: dict):
        self.row = row
        self.run_id = str(row["run_id"])
        self.config = _json(row.get("config"), {})
        self.status = str(row["status"])
        self.curve = [(int(s), _num(m)) for s, m in _json(row.get("curve"), [])]
        self.train_curve = [(int(s), _num(m)) for s, m in _json(row.get("train_curve"), [])]
        self.task = str(self.config.get("task", ""))
        self.arch = str(self.config.get("arch", ""))
        self.label = str(self.config.get("label") or self.arch)
        self.params = _flatten(self.config)
        self.error = row.get("error")

    @property
    def title(self) -> str:
        return f"{self.label}-{self.run_id}"

    def numbers(self) -> dict[str, float]:
        """The run's final numbers that are present (None: not measured)."""
        out = {}
        for key, col in (("samples", "samples"), ("final_metric", "final_metric"), ("best_metric", "best_metric"),
                         ("test_metric", "test_metric"), ("best_samples", "best_samples"),
                         ("resolution", "resolution"), ("n_params", "params"), ("state_size", "state_size"),
                         ("wall_s", "wall_s")):
            v = self.row.get(col)
            if v is not None:
                out[key] = float(v)
        return out

    def tags(self) -> dict[str, str]:
        t = {RUN_ID_TAG: self.run_id, STATUS_TAG: self.status, "archsep.label": self.label,
             "archsep.task": self.task, "archsep.arch": self.arch}
        for col in ("archsep_version", "torch_version", "device", "host"):
            if self.row.get(col):
                t[f"archsep.{col}"] = str(self.row[col])
        if self.error:
            t["archsep.error"] = str(self.error)[-4000:]
        return t

    def time_ms(self, col: str) -> int | None:
        v = self.row.get(col)
        if not v:
            return None
        try:
            return int(datetime.fromisoformat(str(v)).timestamp() * 1000)
        except ValueError:
            return None


def _json(v: Any, default: Any) -> Any:
    if v is None:
        return default
    if isinstance(v, (str, bytes)):
        return json.loads(v)
    return v


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    """{'train': {'lr': 0.001}} -> {'train.lr': 0.001}; lists become JSON text."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(_flatten(v, key + "."))
        elif isinstance(v, (dict, list, tuple)):
            out[key] = json.dumps(v, sort_keys=True)
        else:
            out[key] = v
    return out


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s.splitlines()[0][:300] if s else "no message"


def _quiet_env(kind: str) -> None:
    if kind == "mlflow":
        # local files only: MLflow's usage telemetry would otherwise try to reach the network
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


@contextmanager
def _quiet_warnings() -> Iterator[None]:
    """The tracking packages' own deprecation warnings (e.g. MLflow's SQLAlchemy 2.1 'noload')
    are theirs, not the user's: kept out of the sweep's output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock between the processes that log into one directory (several sweeps may
    share an output directory), so a run is not logged twice by two of them."""
    try:
        import fcntl
    except ImportError:  # not on POSIX: a single writer is assumed
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _replaces(old_status: str | None, new_status: str) -> bool:
    """The store's rule: a stored error is replaced by a later attempt that did not fail."""
    return old_status == "error" and new_status != "error"


# --- MLflow ----------------------------------------------------------------------------------------
class MlflowTracker(Tracker):
    kind = "mlflow"

    def __init__(self, out_dir: Path, name: str):
        super().__init__(out_dir, name)
        import logging

        from mlflow.tracking import MlflowClient

        self.dir = out_dir / "mlruns"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.db = self.dir / "mlflow.db"
        self.uri = f"sqlite:///{self.db.resolve()}"
        self._lockfile = self.dir / ".archsep.lock"
        quiet = [logging.getLogger(n) for n in ("mlflow", "alembic")]
        levels = [lg.level for lg in quiet]
        try:
            for lg in quiet:  # "Creating initial MLflow database tables..." and alembic's steps
                lg.setLevel(logging.WARNING)
            with _quiet_warnings(), _locked(self._lockfile):  # one process creates the tables
                artifacts = (self.dir / "artifacts").resolve().as_uri()
                if not self.db.exists():
                    try:  # made here, MLflow's 'Default' experiment keeps its artifacts in OUT, not in the cwd
                        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

                        SqlAlchemyStore(self.uri, artifacts)
                    except Exception:
                        pass  # the client below creates the tables all the same
                self.client = MlflowClient(tracking_uri=self.uri)
                exp = self.client.get_experiment_by_name(name)
                if exp is None:
                    self.experiment_id = self.client.create_experiment(name, artifact_location=artifacts)
                elif exp.lifecycle_stage == "deleted":
                    self.client.restore_experiment(exp.experiment_id)
                    self.experiment_id = exp.experiment_id
                else:
                    self.experiment_id = exp.experiment_id
                # archsep run_id -> (MLflow run id, status) of the runs logged completely
                self._known = {rid: (mid, st) for mid, rid, st, done in self._search() if done}
        finally:
            for lg, lv in zip(quiet, levels):
                lg.setLevel(lv)

    def _search(self, run_id: str | None = None) -> list[tuple[str, str, str | None, bool]]:
        """The archsep runs of this experiment (or those of one run_id), as
        (MLflow run id, archsep run_id, status, complete) tuples."""
        flt = f"tags.`{RUN_ID_TAG}` = '{run_id}'" if run_id else ""
        out = []
        token = None
        while True:
            page = self.client.search_runs([self.experiment_id], filter_string=flt, max_results=50_000,
                                           page_token=token)
            for r in page:
                rid = r.data.tags.get(RUN_ID_TAG)
                if rid is not None:
                    out.append((r.info.run_id, rid, r.data.tags.get(STATUS_TAG), r.data.tags.get(DONE_TAG) == "1"))
            token = page.token
            if not token:
                return out

    def _log(self, run: _Run) -> bool:
        known = self._known.get(run.run_id)
        if known and not _replaces(known[1], run.status):
            return False
        with _quiet_warnings(), _locked(self._lockfile):
            found = self._search(run.run_id)  # another process may have logged it meanwhile
            for mid, _, status, done in found:
                if done and not _replaces(status, run.status):
                    self._known[run.run_id] = (mid, status)
                    return False
            for mid, _, _, _ in found:  # interrupted while being logged, or a replaced error
                self.client.delete_run(mid)
            mid = self._write(run)
            self._known[run.run_id] = (mid, run.status)
            return True

    def _write(self, run: _Run) -> str:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

        start = run.time_ms("started_at") or run.time_ms("finished_at")
        end = run.time_ms("finished_at")
        tags = run.tags()
        created = self.client.create_run(self.experiment_id, start_time=start, tags=tags, run_name=run.title)
        mid = created.info.run_id
        ts = end or start or 0
        params = [Param(_key(k), _text(v)[:MAX_PARAM_VAL_LENGTH]) for k, v in run.params.items()]
        metrics = [Metric(_key(k), v, ts, 0) for k, v in run.numbers().items()]
        metrics += [Metric(HELDOUT, m, ts, s) for s, m in run.curve]
        metrics += [Metric(TRAIN, m, ts, s) for s, m in run.train_curve]
        self.client.log_batch(mid, metrics=metrics, params=params)
        self.client.log_batch(mid, tags=[RunTag(DONE_TAG, "1")])
        self.client.set_terminated(mid, status="FAILED" if run.status == "error" else "FINISHED", end_time=end)
        return mid

    def runs(self) -> dict[str, str]:
        """archsep run_id -> MLflow run id, for the runs logged completely in this experiment."""
        return {k: v[0] for k, v in self._known.items()}


def _key(k: str) -> str:
    """MLflow keys: letters, digits, '_', '-', '.', ' ', '/'."""
    return "".join(c if c.isalnum() or c in "_-. /" else "_" for c in str(k))[:250]


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return json.dumps(v)


# --- TensorBoard -----------------------------------------------------------------------------------
class TensorBoardTracker(Tracker):
    """One directory per run: `OUT/tensorboard/RUN_ID/`. A run is written into a scratch
    directory and renamed into place, so a directory that exists is complete."""

    kind = "tensorboard"

    def __init__(self, out_dir: Path, name: str):
        super().__init__(out_dir, name)
        self.dir = out_dir / "tensorboard"
        self.dir.mkdir(parents=True, exist_ok=True)
        self._scratch = out_dir / ".archsep-tensorboard-tmp"  # outside the logdir: TensorBoard never sees half a run

    def path(self, run_id: str) -> Path:
        return self.dir / run_id

    def _status(self, run_id: str) -> str | None:
        try:
            return json.loads((self.path(run_id) / MARKER).read_text()).get("status")
        except (OSError, ValueError):
            return None

    def _log(self, run: _Run) -> bool:
        final = self.path(run.run_id)
        if final.exists() and not _replaces(self._status(run.run_id), run.status):
            return False
        self._scratch.mkdir(exist_ok=True)
        tmp = self._scratch / f"{run.run_id}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            self._write(run, tmp)
            if final.exists():  # a stored error that a later attempt replaced
                old = self._scratch / f"old-{run.run_id}-{uuid.uuid4().hex[:8]}"
                os.rename(final, old)
                shutil.rmtree(old, ignore_errors=True)
            try:
                os.rename(tmp, final)
            except OSError:
                if final.exists():  # another process logged it first
                    return False
                raise
            return True
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            try:
                self._scratch.rmdir()
            except OSError:
                pass

    def _write(self, run: _Run, where: Path) -> None:
        with _quiet_warnings():
            from torch.utils.tensorboard import SummaryWriter
            from torch.utils.tensorboard.summary import hparams

        where.mkdir(parents=True)
        w = SummaryWriter(log_dir=str(where), max_queue=10_000, flush_secs=3600)
        try:
            wall = (run.time_ms("finished_at") or 0) / 1000 or None
            for s, m in run.curve:
                w.add_scalar(HELDOUT, m, global_step=s, walltime=wall)
            for s, m in run.train_curve:
                w.add_scalar(TRAIN, m, global_step=s, walltime=wall)
            last = max([s for s, _ in run.curve + run.train_curve], default=0)
            numbers = {f"result/{k}": v for k, v in run.numbers().items()}
            for k, v in numbers.items():
                w.add_scalar(k, v, global_step=last, walltime=wall)
            hp = {k: (v if isinstance(v, (int, float, str, bool)) else _text(v))
                  for k, v in run.params.items() if v is not None}
            hp.update({"run_id": run.run_id, "status": run.status})
            with _quiet_warnings():
                for summary in hparams(hp, numbers):
                    w.file_writer.add_summary(summary, global_step=last, walltime=wall)  # type: ignore[attr-defined]
            w.add_text("config", "```json\n" + json.dumps(run.config, indent=2, sort_keys=True) + "\n```",
                       global_step=last, walltime=wall)
            lines = [f"| {k} | {v} |" for k, v in {"run_id": run.run_id, "label": run.label, "task": run.task,
                                                    "arch": run.arch, "status": run.status,
                                                    **run.numbers()}.items()]
            if run.error:
                lines.append(f"| error | {_first_line(Exception(run.error))} |")
            w.add_text("result", "| field | value |\n|---|---|\n" + "\n".join(lines), global_step=last, walltime=wall)
        finally:
            w.close()
        (where / MARKER).write_text(json.dumps({"run_id": run.run_id, "status": run.status, "label": run.label}))

    def runs(self) -> dict[str, Path]:
        """archsep run_id -> its directory, for the runs logged."""
        return {p.name: p for p in sorted(self.dir.iterdir()) if (p / MARKER).exists()}
