"""Finished runs carried between stores as JSON lines: one `runs` row per line, every column, so
that a long run can span machines and sessions. `archsep export DIR --format jsonl` writes them;
`archsep import FILE --out DIR` adds them to a store, where a preset or sweep rerun into DIR
reuses them as if it had run them there.

Reading such a file is reading data, never code: each line is parsed as JSON and checked like a
stored row (`store.check_row`), its columns must be exactly the store's, and its run id must be
the hash of its own config, so a row cannot pose as another run. Every line is checked before
anything is written; a run the store already holds keeps its stored result (the store's rule:
the first committed result wins, except that an `error` row gives way to a finished one).
"""
from __future__ import annotations

import json
from pathlib import Path

from ..config import RunConfig
from ..errors import ArchsepError, shown
from .db import Store
from .rows import RESULT_COLUMNS, Damaged, _bad_constant, check_row

MAX_LINE = 16 << 20  # bytes: a run's curves are kilobytes; a longer line is not a row


def dump_lines(store: Store) -> list[str]:
    """Every row of `store`, checked, as one JSON text each (columns in the store's order)."""
    out = []
    for row in store.rows():
        store.check(row)  # a damaged row: one line naming the store, the run and the field
        out.append(json.dumps({c: row[c] for c in RESULT_COLUMNS}, sort_keys=False, allow_nan=False))
    return out


def read_rows(path: str | Path) -> list[dict]:
    """The checked rows of a JSON-lines file; an ArchsepError naming the file, the line and the
    field at the first bad one."""
    p = Path(path)
    where = f"'{shown(p, 300)}'"
    if p.exists() and not p.is_file():  # a directory, a FIFO (reading one would block), a device
        raise ArchsepError.at("file", f"{where} is not a regular file")
    try:
        with open(p, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ArchsepError.at("file", f"cannot read {where}: {e.strerror or e}") from None
    rows, seen = [], set()
    for n, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        at = f"{where} line {n}"
        if len(line) > MAX_LINE:
            raise ArchsepError.at("file", f"{at}: longer than {MAX_LINE} bytes; not a run's row")
        try:
            row = json.loads(line.decode("utf-8"), parse_constant=_bad_constant)
        except (UnicodeDecodeError, ValueError) as e:
            raise ArchsepError.at("file", f"{at}: not a JSON object ({shown(e, 120)})") from None
        if not isinstance(row, dict):
            raise ArchsepError.at("file", f"{at}: expected a JSON object, got {type(row).__name__}")
        extra, missing = sorted(set(row) - set(RESULT_COLUMNS)), [c for c in RESULT_COLUMNS if c not in row]
        if extra or missing:
            what = f"unknown column {shown(extra[0], 60)}" if extra else f"missing column {missing[0]}"
            raise ArchsepError.at("file", f"{at}: {what}; a row has exactly the columns "
                                          f"{', '.join(RESULT_COLUMNS)}")
        try:
            result = check_row(row)
        except Damaged as e:
            raise ArchsepError(f"{at}: {e}", field=e.field) from None
        try:
            rid = RunConfig.from_dict(result.config).run_id
        except ArchsepError as e:
            raise ArchsepError(f"{at}: config: {e} (a plugin's run needs its --import)", field=e.field) from None
        if rid != result.run_id:
            raise ArchsepError.at("run_id", f"{at}: run id {shown(result.run_id, 40)} is not its config's "
                                            f"({rid}); the row was altered or made by an archsep whose ids differ")
        if rid in seen:
            raise ArchsepError.at("run_id", f"{at}: run {rid} appears twice in the file")
        seen.add(rid)
        rows.append(row)
    return rows


def import_rows(store: Store, rows: list[dict]) -> tuple[int, int]:
    """Add checked rows (`read_rows`) to `store`: (added, kept: already stored and left as they were)."""
    added = sum(store.add(row) for row in rows)
    return added, len(rows) - added
