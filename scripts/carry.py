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

Where DIR lies in a git work tree, the checkpoints are carried only while the commits since the
branch was laid, the work tree's other changes and this carry's checkpoints stay within
--diff-budget-mb of diffs as text (scripts/submission_size.py: a submission past 256 MiB is refused
whole, and 2026-12-07's session was lost so, six carries of two 14 MB checkpoints each); past it the
runs are carried and the checkpoints left as they were, saying so.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import submission_size  # noqa: E402  (the script beside this one)


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


def chosen(src: Path, max_bytes: int, keep: Callable[[str], bool] = lambda name: True
           ) -> tuple[dict[str, Path], list[str]]:
    """`src`'s `.pt` files that `keep` names, at most `max_bytes` each, and the names too large."""
    here = {p.name: p for p in sorted(src.glob("*.pt"))
            if p.is_file() and not p.is_symlink() and keep(p.name)} if src.is_dir() else {}
    return ({n: p for n, p in here.items() if p.stat().st_size <= max_bytes},
            [n for n, p in here.items() if p.stat().st_size > max_bytes])


def carry_cost(repo: Path, dest: Path, files: dict[str, Path]) -> int:
    """The diff text, against HEAD, of making `dest`'s `.pt` files exactly `files`: a new file at its
    base-85 size, a changed one at its old and new sizes, a dropped one at its old size."""
    rel = dest.resolve().relative_to(repo).as_posix()
    head: dict[str, tuple[str, int]] = {}
    for line in submission_size.git_out(repo, "ls-tree", "-l", "HEAD", f"{rel}/").decode().splitlines():
        meta, _, path = line.partition("\t")
        _, kind, blob, size = meta.split()
        if kind == "blob" and path.endswith(".pt"):
            head[path.rsplit("/", 1)[-1]] = (blob, int(size))
    cost = 0.0
    for name, p in files.items():
        old = head.pop(name, None)
        if old is not None and submission_size.git_out(repo, "hash-object", str(p)).decode().strip() == old[0]:
            continue
        cost += submission_size.BASE85 * (p.stat().st_size + (old[1] if old else 0))
    return int(cost + submission_size.BASE85 * sum(size for _, size in head.values()))


def copy_file(src: Path, dest: Path, field: str) -> None:
    """`src`'s bytes into `dest`, written whole (a temporary file beside it, renamed), never through a link."""
    def write(f) -> None:
        with open(src, "rb") as g:
            shutil.copyfileobj(g, f)

    atomic_write(dest, write, field, binary=True, example="RUN.pt")


def mirror(here: dict[str, Path], dest: Path) -> list[str]:
    """Make `dest`'s `.pt` files exactly `here` (name: source); returns the names copied."""
    dest.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink():
        raise ArchsepError.at("--checkpoints", f"'{dest}' is a symbolic link; nothing is written through links")
    copied = []
    for name, p in here.items():
        copy_file(p, dest / name, "--checkpoints")
        copied.append(name)
    for old in dest.glob("*.pt"):
        if old.name not in copied and not old.is_symlink():
            old.unlink()
    return copied


def over_budget(checkpoints: Path, parts: list[tuple[dict[str, Path], Path]], budget_mb: float) -> tuple[str, str]:
    """Why carrying `parts` (files, into a folder under `checkpoints`) would take the submission's
    diffs past `budget_mb` MiB ('' while it would not, or where no git work tree holds them), and
    where the submission's diffs stand with them ('' where no git work tree holds them)."""
    repo = submission_size.top(checkpoints.resolve())
    if repo is None:
        return "", ""
    try:
        rel = checkpoints.resolve().relative_to(repo)
        base = submission_size.base_commit(repo)
        now = submission_size.committed_diff_bytes(repo, base) + submission_size.uncommitted_diff_bytes(repo, rel)
        add = sum(carry_cost(repo, dest, files) for files, dest in parts)
    except submission_size.SizeError as e:
        return f"the submission's size cannot be told ({e}), so none is risked", ""
    stand = (f"the submission's diffs since {base[:7]}, the work tree's changes and these checkpoints "
             f"included: {(now + add) / 2**20:.1f} MiB of {submission_size.DIFF_LIMIT / 2**20:.0f} MiB")
    if (now + add) / 2**20 <= budget_mb:
        return "", stand
    return (f"the commits since {base[:7]} and the work tree's other changes weigh {now / 2**20:.1f} MiB of "
            f"diffs as text, these checkpoints {add / 2**20:.1f} MiB more, past --diff-budget-mb "
            f"{budget_mb:g} (a submission past 256 MiB is refused whole: scripts/submission_size.py); "
            "the runs are carried, the checkpoints left as they were"), stand


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path, help="the store (a directory holding archsep.db)")
    ap.add_argument("file", type=Path, help="the JSON-lines file the runs are carried in")
    ap.add_argument("--committed", type=Path, nargs="*", default=[], help="files whose runs are committed already")
    ap.add_argument("--checkpoints", type=Path, help="the folder the store's checkpoints are carried in")
    ap.add_argument("--ends", action="store_true", help="carry the kept ends too (into CHECKPOINTS/ends)")
    ap.add_argument("--max-mb", type=float, default=20.0, help="leave out a checkpoint larger than this (default 20)")
    ap.add_argument("--diff-budget-mb", type=float, default=200.0,
                    help="carry no checkpoint taking the submission's diffs past this (MiB; default 200, of 256)")
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
            parts = [(*chosen(a.store / "checkpoints", max_bytes), a.checkpoints)]
            if a.ends:
                parts.append((*chosen(a.store / "checkpoints" / "ends", max_bytes, wanted), a.checkpoints / "ends"))
            over, stand = over_budget(a.checkpoints, [(here, dest) for here, _, dest in parts], a.diff_budget_mb)
            if over:
                print(f"{a.checkpoints}: no checkpoint carried: {over}")
                return 0
            if stand:
                print(stand)
            for here, too_big, dest in parts:
                copied = mirror(here, dest)
                print(f"{dest}: {len(copied)} checkpoint(s)" + (f"; over {a.max_mb:g} MB, left out: "
                                                              f"{', '.join(too_big)}" if too_big else ""))
    except ArchsepError as e:
        print(f"carry: error: {printable(str(e))}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
