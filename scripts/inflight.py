"""The cells in flight (docs/results/in-flight/cells.toml), each in one command, so that a new
machine takes up the runs the last one carried and hands them on the same way:

    .venv/bin/python scripts/inflight.py list                   each cell, its carried runs, its store
    .venv/bin/python scripts/inflight.py resume NAME            import its committed and carried runs
                                                                into RUNS/NAME, put its checkpoints back
    .venv/bin/python scripts/inflight.py start NAME [--workers N]  its commands in the background (nice 19,
                                                                its autogroup at 19, a checkpoint every
                                                                2 minutes), the log at RUNS/NAME.log
    .venv/bin/python scripts/inflight.py carry NAME [--checkpoints] [--ends]
                                                                scripts/carry.py with the cell's files
    .venv/bin/python scripts/inflight.py finish NAME            its store's new runs into its results
                                                                folder's runs.jsonl, its outputs made
                                                                again there from the committed files
                                                                alone, the results pages written

`finish` is for a cell whose commands are done: a store rebuilt in a temporary folder from the
committed files (its results' runs.jsonl now among them) gives the outputs (`finish` in cells.toml,
run with --finished-only), so the committed files are checked to hold every run they rest on. The
PROVENANCE, the prose and the cell's row, file and entry here stay yours to write and remove.

RUNS is --runs (default /work/runs). `resume` never replaces a checkpoint the store already has
(the store's own is as new or newer), and imports only what the store lacks. `carry` takes the
checkpoints only when asked: the last carry of a session (docs/results/in-flight/README.md).
A bad name or a damaged cells file is one line and exit 2.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

from archsep.errors import ArchsepError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import carry as carry_script  # noqa: E402  (the script beside this one)

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "docs" / "results" / "in-flight"
FIELDS = {"name", "issue", "what", "committed", "carried", "commands", "queued", "results", "finish"}


class CellError(Exception):
    """A one-line reason."""


@dataclass(frozen=True)
class Cell:
    name: str
    issue: int
    what: str
    committed: tuple[str, ...]
    carried: str
    commands: tuple[str, ...]
    queued: bool = True
    results: str = ""  # the committed results folder its runs end in
    finish: str = ""  # the archsep command that writes its outputs there (with --finished-only)

    def files(self) -> list[Path]:
        """What `resume` imports, in order: the committed files, then the carried one (if any)."""
        carried = HERE / self.carried
        return [ROOT / f for f in self.committed] + ([carried] if carried.is_file() else [])


def read_cells(path: Path | None = None) -> list[Cell]:
    """The cells of `path` (default: cells.toml here), checked: every field known and of its type,
    names unique and plain."""
    path = path or HERE / "cells.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise CellError(f"{path.name}: cannot be read ({str(e).splitlines()[0]})") from None
    cells = []
    for i, raw in enumerate(data.get("cell", [])):
        where = f"{path.name}: cell {i + 1}"
        if not isinstance(raw, dict) or set(raw) - FIELDS:
            raise CellError(f"{where}: unknown field(s) {sorted(set(raw) - FIELDS) if isinstance(raw, dict) else raw!r}"
                            f"; allowed: {', '.join(sorted(FIELDS))}")
        missing = sorted({"name", "issue", "what", "committed", "carried", "commands"} - set(raw))
        if missing:
            raise CellError(f"{where}: field '{missing[0]}' missing")
        if not all(isinstance(raw[f], list) for f in ("committed", "commands")):
            raise CellError(f"{where}: committed and commands are lists of text")
        cell = Cell(name=raw["name"], issue=raw["issue"], what=raw["what"], committed=tuple(raw["committed"]),
                    carried=raw["carried"], commands=tuple(raw["commands"]), queued=raw.get("queued", True),
                    results=raw.get("results", ""), finish=raw.get("finish", ""))
        strings = [cell.name, cell.what, cell.carried, *cell.committed, *cell.commands]
        if not all(isinstance(s, str) and s for s in strings) or not isinstance(cell.issue, int) \
                or not isinstance(cell.results, str) or not isinstance(cell.finish, str) \
                or not isinstance(cell.queued, bool) or not cell.commands:
            raise CellError(f"{where}: name, what, carried, committed and commands are (lists of) text, issue a "
                            "number, queued true or false, and commands not empty")
        if not cell.name.replace("-", "").isalnum() or "/" in cell.carried or ".." in cell.carried:
            raise CellError(f"{where}: name '{cell.name}' and carried '{cell.carried}' are plain names "
                            "(letters, digits, '-'; the carried file here, no folders)")
        inside = [f for f in (*cell.committed, *([cell.results] if cell.results else []))
                  if not f.startswith("docs/results/") or ".." in Path(f).parts]
        if inside:
            raise CellError(f"{where}: committed and results are paths under docs/results/ without '..', "
                            f"not {inside[0]!r}")
        if cell.name in {c.name for c in cells}:
            raise CellError(f"{where}: name '{cell.name}' twice")
        cells.append(cell)
    return cells


def find(cells: list[Cell], name: str) -> Cell:
    for c in cells:
        if c.name == name:
            return c
    raise CellError(f"cell: no cell '{name}' in cells.toml; the cells: {', '.join(c.name for c in cells)}")


def archsep(*args: str) -> list[str]:
    return [sys.executable, "-m", "archsep", *args]


def last_line(text: str, default: str = "failed") -> str:
    return (text.strip().splitlines() or [default])[-1]


def import_file(cell: Cell, f: Path, store: Path) -> str:
    """`archsep import f --out store`; its last line, or a CellError with its error."""
    if not f.is_file():
        raise CellError(f"{cell.name}: committed file '{f.relative_to(ROOT)}' is missing")
    p = subprocess.run(archsep("import", str(f), "--out", str(store)), capture_output=True, text=True)
    if p.returncode != 0:
        raise CellError(f"{cell.name}: import {f.name}: {last_line(p.stderr)}")
    return last_line(p.stdout, "")


def resume(cell: Cell, runs: Path) -> list[str]:
    """Import the cell's runs into its store and put its checkpoints back; returns what was done."""
    store = runs / cell.name
    done = [f"{f.relative_to(ROOT)}: {import_file(cell, f, store)}" for f in cell.files()]
    for sub in ("", "ends"):
        src, dest = HERE / "checkpoints" / cell.name / sub, store / "checkpoints" / sub
        files = sorted(p for p in src.glob("*.pt") if p.is_file() and not p.is_symlink()) if src.is_dir() else []
        put = [p for p in files if not (dest / p.name).exists()]
        if put:
            dest.mkdir(parents=True, exist_ok=True)
            if dest.is_symlink():
                raise CellError(f"{cell.name}: '{dest}' is a symbolic link; nothing is written through links")
        for p in put:
            carry_script.copy_file(p, dest / p.name, "checkpoints")
        if files:
            done.append(f"checkpoints/{cell.name}/{sub}: {len(put)} put back, {len(files) - len(put)} the store had")
    return done


def with_workers(words: list[str], workers: int | None) -> list[str]:
    """`words` with --workers set to `workers` (as they are for None)."""
    if workers is None:
        return words
    if "--workers" in words:
        i = words.index("--workers")
        return words[:i] + words[i + 2:] + ["--workers", str(workers)]
    return words + ["--workers", str(workers)]


def start(cell: Cell, runs: Path, workers: int | None = None) -> int:
    """The cell's commands, one after another, in the background in a session of their own at nice
    19 (and their autogroup at 19, so that a test suite beside them runs at full speed); returns its pid."""
    store = runs / cell.name
    store.mkdir(parents=True, exist_ok=True)
    line = " && ".join(shlex.join(archsep(*with_workers(shlex.split(c), workers), "--no-progress", "--out", str(store)))
                       for c in cell.commands)
    env = dict(os.environ, ARCHSEP_CHECKPOINT_S=os.environ.get("ARCHSEP_CHECKPOINT_S", "120"))
    with open(runs / f"{cell.name}.log", "ab") as log:
        p = subprocess.Popen(["nice", "-n", "19", "bash", "-c", line], stdout=log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True, env=env, cwd=ROOT)
    try:
        Path(f"/proc/{p.pid}/autogroup").write_text("19")
    except OSError:
        pass  # no autogroups here: nice alone
    return p.pid


def carry(cell: Cell, runs: Path, checkpoints: bool, ends: bool) -> int:
    argv = [str(runs / cell.name), str(HERE / cell.carried), "--committed", *[str(ROOT / f) for f in cell.committed]]
    if checkpoints:
        argv += ["--checkpoints", str(HERE / "checkpoints" / cell.name)] + (["--ends"] if ends else [])
    return carry_script.main(argv)


def finish(cell: Cell, runs: Path) -> list[str]:
    """The cell's results folder made from its store (see the module's docstring); returns what was done."""
    if not (cell.results and cell.finish):
        raise CellError(f"{cell.name}: cells.toml gives it no results and finish to write its outputs with")
    results = ROOT / cell.results
    runs_file = results / "runs.jsonl"
    others = [ROOT / f for f in cell.committed if ROOT / f != runs_file]
    if carry_script.main([str(runs / cell.name), str(runs_file), "--committed", *map(str, others)]) != 0:
        raise CellError(f"{cell.name}: its runs could not be carried into {cell.results}/runs.jsonl (the line above)")
    done = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        for f in others + [runs_file]:
            import_file(cell, f, store)
        p = subprocess.run(archsep(*shlex.split(cell.finish), "--finished-only", "--no-progress", "--out", str(store)),
                           capture_output=True, text=True, cwd=ROOT)
        if p.returncode != 0:
            raise CellError(f"{cell.name}: {cell.finish}: {last_line(p.stderr)}")
        for f in sorted(store.iterdir()):
            if f.is_file() and not f.is_symlink() and not f.name.startswith("archsep.db"):
                carry_script.copy_file(f, results / f.name, "results")
                done.append(f.name)
    from archsep.reporting import results_page

    page = results_page.write(ROOT / "docs" / "results")
    return [f"{cell.results}: {', '.join(done)} made again from the committed runs", f"wrote {page}"]


def store_line(store: Path) -> str:
    """Where a cell's store stands here: its finished and pending runs, and each run in progress
    with its step and pace (`archsep status --json`), or 'not here'."""
    if not (store / "archsep.db").is_file():
        return "not here"
    p = subprocess.run(archsep("status", str(store), "--json"), capture_output=True, text=True)
    try:
        st = json.loads(p.stdout)
        line = f"here, {int(st['finished'])} finished, {int(st['pending'])} pending"
        for c in st["checkpoints"]:
            pace = f", {60 * c['step'] / c['elapsed']:.3g} steps a minute" if c.get("elapsed") else ""
            line += f"; {c['label']} seed {c['seed']} at step {c['step']} of {c['steps']}{pace}"
    except (ValueError, TypeError, KeyError, ZeroDivisionError):
        return f"here ({last_line(p.stderr, 'status unreadable')})"
    return line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, default=Path("/work/runs"), help="the folder of the stores")
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("list", help="each cell, its carried runs and checkpoints, its store here")
    for name in ("resume", "start", "carry", "finish"):
        p = sub.add_parser(name)
        p.add_argument("cell")
        if name == "start":
            p.add_argument("--workers", type=int, help="the commands' --workers (default: as cells.toml has it)")
        if name == "carry":
            p.add_argument("--checkpoints", action="store_true", help="carry the store's checkpoints too")
            p.add_argument("--ends", action="store_true", help="and its kept ends (with --checkpoints)")
    a = ap.parse_args(argv)
    try:
        cells = read_cells()
        if a.what == "list":
            for c in cells:
                f = HERE / c.carried
                n = sum(1 for line in f.read_text().splitlines() if line.strip()) if f.is_file() else 0
                ck = HERE / "checkpoints" / c.name
                cks = len(list(ck.glob("*.pt"))) + len(list((ck / "ends").glob("*.pt"))) if ck.is_dir() else 0
                print(f"{c.name} (issue {c.issue}{'' if c.queued else ', not queued'}): {c.what}; {n} run(s) "
                      f"carried, {cks} checkpoint(s); store {store_line(a.runs / c.name)}")
            return 0
        cell = find(cells, a.cell)
        if a.what == "resume":
            for line in resume(cell, a.runs):
                print(line)
            print("then: python scripts/inflight.py start " + cell.name)
        elif a.what == "start":
            if a.workers is not None and a.workers < 1:
                raise CellError(f"--workers: {a.workers}; allowed: 1 or more")
            print(f"{cell.name}: started, pid {start(cell, a.runs, a.workers)}, log {a.runs / (cell.name + '.log')}")
        elif a.what == "finish":
            for line in finish(cell, a.runs):
                print(line)
            print("then: its PROVENANCE, the prose, and its row, carried file, checkpoints and cells.toml entry here")
        else:
            return carry(cell, a.runs, a.checkpoints, a.ends)
    except (CellError, ArchsepError) as e:
        print(f"inflight: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
