"""Carry a store's runs in flight into docs/results/in-flight/ (docs/results/in-flight/README.md):
its finished runs that no committed file holds, one JSON line each, into FILE, and the checkpoints
of its runs in progress (and, with --ends, the kept ends a run still to come goes on from) into DIR.

    .venv/bin/python scripts/carry.py STORE FILE [--committed F ...] [--checkpoints DIR] [--ends]

FILE keeps its lines as they are, in their order (a run stays the line it was carried as), drops
any run a committed file now holds, and gains the store's other runs at its end, so that a carry
changes only what changed. DIR's `.pt` files become the store's (a finished run's checkpoint is
gone from the store, so from DIR too); one over --max-mb is left out and named. Every file is
written whole (a temporary file beside it, renamed), never through a link.

With --ends, an end (OUT/checkpoints/ends/<prefix>-<step>.pt: engine/checkpoint.py) is carried only
while a run may still go on from it (`end_wanted`): a planned, unfinished run of its prefix with a
larger budget, or a search's trial whose next rung is not planned yet. An end at a search's last
rung, one whose trial the next rung did not promote and one a larger finished run has used are left
out; an end no planned run names is carried (nothing says it is dead).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Callable

from archsep.config import RunConfig
from archsep.engine.checkpoint import end_name, prefix_key
from archsep.errors import ArchsepError, printable
from archsep.fileio import atomic_write
from archsep.registry import reading
from archsep.store import open_store
from archsep.store.transfer import dump_lines, read_rows
from archsep.sweeps.search import next_rung_sweep


def run_ids(path: Path) -> set[str]:
    """The run ids of a JSON-lines file of runs (checked, as `archsep import` checks them)."""
    return {r["run_id"] for r in read_rows(path)}


def carried_lines(old: list[str], store_lines: list[str], committed: set[str]) -> list[str]:
    """FILE's new lines: its own first (as they are, minus the committed ones), then the store's
    runs it lacks, in the store's order."""
    keep = [line for line in old if json.loads(line)["run_id"] not in committed]
    have = {json.loads(line)["run_id"] for line in keep} | committed
    return keep + [line for line in store_lines if json.loads(line)["run_id"] not in have]


def _rungs(source: str) -> list[int]:
    """A sweep file's search's rung steps ([]: no search, or a source that does not read)."""
    try:
        steps = tomllib.loads(source).get("search", {}).get("steps")
    except (tomllib.TOMLDecodeError, AttributeError):
        return []
    return [int(x) for x in steps if isinstance(x, int)] if isinstance(steps, list) else []


def end_wanted(store) -> Callable[[str], bool]:
    """Whether the end named `name` may still be gone on from, by the store's planned runs."""
    finished = store.finished_ids()
    sweeps = {s["sweep_id"]: (s["name"], _rungs(s["source"])) for s in store.sweeps()}
    names = {name for name, _ in sweeps.values()}
    runs: dict[str, list[tuple[int, bool, str, list[int]]]] = {}  # prefix -> (steps, finished, sweep, rungs)
    for row in store.planned():
        try:
            cfg = RunConfig.from_dict(json.loads(row["config"]))
        except (ArchsepError, ValueError, TypeError, KeyError):
            continue
        sweep, rungs = sweeps.get(row["sweep_id"], ("", []))
        runs.setdefault(prefix_key(cfg), []).append((cfg.train.budget // cfg.train.batch_size,
                                                     row["run_id"] in finished, sweep, rungs))

    def wanted(name: str) -> bool:
        end = end_name(name)
        if not end or end[0] not in runs:
            return True
        step, mine = end[1], runs[end[0]]
        longer = [done for steps, done, _, _ in mine if steps > step]
        if longer:
            return not all(longer)
        for steps, _, sweep, rungs in mine:
            if steps != step:
                continue
            if rungs and step >= max(rungs):
                return False  # the last rung's budget (a winner's seeds too): nothing goes beyond
            if next_rung_sweep(sweep) in names:
                return False  # a next rung that did not promote it
        return True

    return wanted


def mirror(src: Path, dest: Path, max_bytes: int, keep: Callable[[str], bool] = lambda name: True
           ) -> tuple[list[str], list[str]]:
    """Make `dest`'s `.pt` files those of `src` that `keep` names (at most `max_bytes` each);
    returns the names copied and those left out as too large."""
    dest.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink():
        raise ArchsepError.at("--checkpoints", f"'{dest}' is a symbolic link; nothing is written through links")
    here = {p.name: p for p in sorted(src.glob("*.pt"))
            if p.is_file() and not p.is_symlink() and keep(p.name)} if src.is_dir() else {}
    copied, too_big = [], []
    for name, p in here.items():
        if p.stat().st_size > max_bytes:
            too_big.append(name)
            continue
        def write(f, p=p) -> None:
            with open(p, "rb") as g:
                shutil.copyfileobj(g, f)

        atomic_write(dest / name, write, "--checkpoints", binary=True, example="RUN.pt")
        copied.append(name)
    for old in dest.glob("*.pt"):
        if old.name not in copied and not old.is_symlink():
            old.unlink()
    return copied, too_big


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="the store (a directory holding archsep.db)")
    ap.add_argument("file", type=Path, help="the JSON-lines file the runs are carried in")
    ap.add_argument("--committed", type=Path, nargs="*", default=[], help="files whose runs are committed already")
    ap.add_argument("--checkpoints", type=Path, help="the folder the store's checkpoints are carried in")
    ap.add_argument("--ends", action="store_true", help="carry the kept ends too (into CHECKPOINTS/ends)")
    ap.add_argument("--max-mb", type=float, default=20.0, help="leave out a checkpoint larger than this (default 20)")
    a = ap.parse_args(argv)
    try:
        if not (a.store / "archsep.db").is_file():
            raise ArchsepError.at("store", f"'{a.store}' holds no archsep.db")
        committed: set[str] = set()
        for f in a.committed:
            committed |= run_ids(f)
        old = [line.rstrip("\n") for line in a.file.read_text().splitlines() if line.strip()] if a.file.exists() else []
        if old:
            run_ids(a.file)  # its own lines checked before any is kept
        with reading(), open_store(a.store, create=False) as store:
            lines = dump_lines(store)
            wanted = end_wanted(store)
        out = carried_lines(old, lines, committed)
        atomic_write(a.file, "".join(line + "\n" for line in out), "file", example="runs.jsonl")
        print(f"{a.file}: {len(out)} run(s) ({len(out) - len(old)} more than before)")
        if a.checkpoints:
            max_bytes = int(a.max_mb * 2**20)
            parts: list[tuple[Path, Path, Callable[[str], bool]]] = [(a.store / "checkpoints", a.checkpoints,
                                                                        lambda name: True)]
            if a.ends:
                parts.append((a.store / "checkpoints" / "ends", a.checkpoints / "ends", wanted))
            for src, dest, keep in parts:
                copied, too_big = mirror(src, dest, max_bytes, keep)
                print(f"{dest}: {len(copied)} checkpoint(s)" + (f"; over {a.max_mb:g} MB, left out: "
                                                              f"{', '.join(too_big)}" if too_big else ""))
    except ArchsepError as e:
        print(f"carry: error: {printable(str(e))}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
