"""One run's row: made where the run ran (`record`), and read back with every field checked
(`check_row`, `check_sweep`): a store is data from outside, so a damaged or planted row is one
ArchsepError naming the run and the field, never a traceback further on, and never code."""
from __future__ import annotations

import functools
import json
import math
import os
import socket
import typing
from datetime import datetime, timezone
from typing import Any, NoReturn

from ..errors import ArchsepError, shown
from ..results import RunResult, json_safe
from .analysis_table import _short, check_analysis

STATUSES = ("ok", "censored", "diverged", "error")

RESULT_COLUMNS = ("run_id", "config", "status", "error", "samples", "resolution", "final_metric",
                  "best_metric", "curve", "train_curve", "eval_schedule", "params", "state_size", "wall_s",
                  "test_metric", "best_samples", "extra", "archsep_version", "torch_version", "device", "host",
                  "worker_pid", "started_at",
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
    """The RunResult a row holds, every field checked (see `check_row`): a damaged row is an
    ArchsepError naming the run and the field, never a traceback further on."""
    return check_row(row)


# --- reading a row that may be damaged -------------------------------------------------------
MAX_JSON_DEPTH = 32  # archsep writes configs 3 levels deep; a store's JSON deeper than this is damaged


class Damaged(ArchsepError):
    """A damaged row: `where` names it ('run ID' or 'sweep ID'), `field` the bad field."""

    def __init__(self, where: str, field: str, why: str):
        super().__init__(f"{where}: {field}: {why}", field=field)
        self.where = where
        self.why = why


def _bad_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number archsep stores")


def _json(text: Any, where: str, field: str, kind: type | tuple[type, ...], default: Any = None,
          depth: bool = True) -> Any:
    """A JSON column: text that parses (no NaN/Infinity, bounded depth) to `kind`."""
    if text is None and default is not None:
        return default
    if not isinstance(text, str):
        raise Damaged(where, field, f"expected JSON text, got {_short(text)}")
    try:
        value = json.loads(text, parse_constant=_bad_constant)
    except RecursionError:
        raise Damaged(where, field, "JSON nested too deeply") from None
    except ValueError as e:  # JSONDecodeError included
        raise Damaged(where, field, f"not valid JSON ({shown(str(e).splitlines()[0] if str(e) else e, 80)})") from None
    if not isinstance(value, kind):
        kinds: dict[type, str] = {dict: "an object", list: "a list"}
        names = " or ".join(kinds.get(k, k.__name__) for k in
                            (kind if isinstance(kind, tuple) else (kind,)))
        raise Damaged(where, field, f"expected {names}, got {_short(value)}")
    if depth and _depth(value) > MAX_JSON_DEPTH:
        raise Damaged(where, field, f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
    return value


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in `value` (iteratively: no recursion limit)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        for x in (v.values() if isinstance(v, dict) else v):
            if isinstance(x, (dict, list)):
                stack.append((x, d + 1))
    return deepest if isinstance(value, (dict, list)) else 0


def _int(v: Any, where: str, field: str, null: bool = True, minimum: int | None = 0) -> int | None:
    if v is None and null:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or (minimum is not None and v < minimum):
        want = "an integer" + (f" >= {minimum}" if minimum is not None else "") + (" or null" if null else "")
        raise Damaged(where, field, f"expected {want}, got {_short(v)}")
    return v


def _num(v: Any, where: str, field: str, null: bool = True) -> float | None:
    if v is None and null:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise Damaged(where, field, f"expected a finite number{' or null' if null else ''}, got {_short(v)}")
    return v


def _text(v: Any, where: str, field: str, null: bool = True) -> str | None:
    if v is None and null:
        return None
    if not isinstance(v, str):
        raise Damaged(where, field, f"expected text{' or null' if null else ''}, got {_short(v)}")
    return v


def _curve(text: Any, where: str, field: str) -> list[tuple]:
    points = _json(text, where, field, list, depth=False)  # its shape, checked here, bounds its depth
    for p in points:  # the common case, as fast as Python goes; on the first doubt, the slow path names it
        if type(p) is not list or len(p) != 2:
            break
        n, m = p
        if type(n) is not int or n < 0 or (m is not None and ((type(m) is not float and type(m) is not int)
                                                              or m - m != 0)):  # inf - inf is nan
            break
    else:
        return list(map(tuple, points))
    out = []
    for i, p in enumerate(points):
        if not (isinstance(p, list) and len(p) == 2):
            raise Damaged(where, f"{field}[{i}]", f"expected a pair [samples, metric], got {_short(p)}")
        out.append((_int(p[0], where, f"{field}[{i}]", null=False), _num(p[1], where, f"{field}[{i}]")))
    return out


def check_config(cfg: Any, where: str, field: str = "config") -> dict:
    """A stored run config: the fields every reader uses, with their types. Names (task, arch)
    stay text: they are looked up, never imported. Parameters of a task or model registered
    here are checked against its fields; other parameters are shown as stored."""
    from ..registry import INF_OK, _coerce

    if not isinstance(cfg, dict):
        raise Damaged(where, field, f"expected an object, got {_short(cfg)}")
    for key in ("task", "arch"):
        if not isinstance(cfg.get(key), str) or not cfg[key]:
            raise Damaged(where, f"{field}.{key}", f"expected a name, got {_short(cfg.get(key))}")
    if not isinstance(cfg.get("label", ""), str):
        raise Damaged(where, f"{field}.label", f"expected text, got {_short(cfg['label'])}")
    if "seed" in cfg:  # absent (a result written by hand): its readers take seed 0 and empty tables
        _int(cfg["seed"], where, f"{field}.seed", null=False)
    for key in ("task_params", "model_params", "train"):
        if not isinstance(cfg.get(key, {}), dict):
            raise Damaged(where, f"{field}.{key}", f"expected an object, got {_short(cfg.get(key))}")
    from ..config import _train_hints
    from ..models import MODELS
    from ..tasks import TASKS

    hints = {"train": _train_hints()}
    for key, reg, name in (("task_params", TASKS, cfg["task"]), ("model_params", MODELS, cfg["arch"])):
        cls = reg.known(name)
        hints[key] = _hints(cls) if cls is not None else {}
    for key, types in hints.items():
        for k, v in cfg.get(key, {}).items():
            tp = types.get(k)
            if tp is None or (v is None and key == "train" and k in INF_OK):  # +inf is stored as null
                continue
            if typing.get_origin(tp) is typing.Literal:  # another version's choices: shown as text
                tp = str
            try:
                _coerce(f"{field}.{key}.{k}", v, tp)
            except ArchsepError as e:
                f, _, why = str(e).partition(": ")
                raise Damaged(where, f"{field}.{key}.{k}", shown(why, 120)) from None
    return cfg


@functools.lru_cache(maxsize=256)
def _hints(cls: type) -> dict[str, Any]:
    import dataclasses

    try:
        hints = typing.get_type_hints(cls)
        return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init and f.name in hints}
    except Exception:  # noqa: BLE001 - a class whose hints cannot be read: its parameters stay unchecked
        return {}


def check_row(row: dict) -> RunResult:
    """The RunResult of one `runs` row, checking every field a reader uses. Raises `Damaged`
    (an ArchsepError) naming the run id and the field."""
    rid = row.get("run_id")
    if not isinstance(rid, str) or not rid:
        raise Damaged(f"run {_short(rid)}", "run_id", f"expected a run id, got {_short(rid)}")
    where = f"run {shown(rid, 40)}"
    status = row.get("status")
    if status not in STATUSES:
        raise Damaged(where, "status", f"unknown value {_short(status)}; allowed: {', '.join(STATUSES)}")
    config = check_config(_json(row.get("config"), where, "config", dict), where)
    for col in ("archsep_version", "torch_version", "device", "host", "started_at", "finished_at", "committed_at"):
        _text(row.get(col), where, col)
    _int(row.get("worker_pid"), where, "worker_pid")
    return RunResult(
        run_id=rid, config=config, status=status,
        samples=_int(row.get("samples"), where, "samples"),
        resolution=_int(row.get("resolution"), where, "resolution"),  # type: ignore[arg-type]  # None in old rows
        final_metric=_num(row.get("final_metric"), where, "final_metric"),
        best_metric=_num(row.get("best_metric"), where, "best_metric"),
        curve=_curve(row.get("curve"), where, "curve"),
        train_curve=_curve(row.get("train_curve"), where, "train_curve"),
        eval_schedule=_json(row.get("eval_schedule"), where, "eval_schedule", dict),
        wall_s=typing.cast(float, _num(row.get("wall_s"), where, "wall_s", null=False)),  # null=False: a number
        params=_int(row.get("params"), where, "params") or 0,
        state_size=_int(row.get("state_size"), where, "state_size"),
        error=_text(row.get("error"), where, "error"),
        test_metric=_num(row.get("test_metric"), where, "test_metric"),
        best_samples=_int(row.get("best_samples"), where, "best_samples"),
        extra=_json(row.get("extra") or None, where, "extra", dict, default={}),
    )


def check_sweep(sw: dict) -> dict:
    """One `sweeps` row with its `analysis` parsed and checked (a dict under 'analysis_data')."""
    sid = sw.get("sweep_id")
    where = f"sweep {_short(sid) if not isinstance(sid, str) else shown(sid, 40)}"
    _text(sid, where, "sweep_id", null=False)
    for col in ("name", "source", "created_at"):
        _text(sw.get(col), where, col, null=False)
    _text(sw.get("preset"), where, "preset")
    _int(sw.get("quick"), where, "quick", null=False)
    a = _json(sw.get("analysis"), where, "analysis", dict)

    def fail(field: str, why: str) -> NoReturn:
        raise Damaged(where, field, why)

    return {**sw, "analysis_data": check_analysis(a, fail, stored=True)}
