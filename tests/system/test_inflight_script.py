"""scripts/inflight.py and docs/results/in-flight/cells.toml: every committed cell names files that
exist and commands of presets and scales that exist; `resume` imports a cell's committed and carried
runs and puts its checkpoints back without replacing the store's own; `carry` then changes nothing;
a damaged cells file or an unknown cell is one line and exit 2."""
from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from archsep.experiments.base import EXPERIMENTS
from archsep.store import open_store

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "docs" / "results" / "lookup-fig2-search-steps" / "runs.jsonl"


def _script():
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("inflight_script", ROOT / "scripts" / "inflight.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["inflight_script"] = mod  # its dataclass looks its module up
    spec.loader.exec_module(mod)
    return mod


def test_every_committed_cell_names_files_and_commands_that_exist():
    cells = _script().read_cells()
    assert cells and len({c.name for c in cells}) == len(cells)
    for c in cells:
        for f in c.committed:
            assert (ROOT / f).is_file(), (c.name, f)
        for cmd in c.commands:
            words = shlex.split(cmd)
            assert "--out" not in words, (c.name, cmd)  # the script adds it
            if words[0] == "reproduce":
                scale = words[words.index("--scale") + 1]
                assert scale in EXPERIMENTS.get(words[1]).scales, (c.name, cmd)
            else:
                assert words[0] == "sweep" and (ROOT / words[1]).is_file(), (c.name, cmd)


def test_a_damaged_cells_file_or_an_unknown_cell_is_one_line(tmp_path, capsys):
    mod = _script()
    bad = tmp_path / "cells.toml"
    bad.write_text('[[cell]]\nname = "a"\nissue = 1\nwhat = "x"\ncommitted = []\ncarried = "a.jsonl"\n'
                   'commands = ["sweep s.toml"]\nstore = "/elsewhere"\n')
    with pytest.raises(mod.CellError, match="unknown field.*store.*allowed"):
        mod.read_cells(bad)
    bad.write_text('[[cell]]\nname = "../a"\nissue = 1\nwhat = "x"\ncommitted = []\ncarried = "a.jsonl"\n'
                   'commands = ["sweep s.toml"]\n')
    with pytest.raises(mod.CellError, match="plain names"):
        mod.read_cells(bad)
    bad.write_text("[[cell]\n")
    with pytest.raises(mod.CellError, match="cannot be read"):
        mod.read_cells(bad)
    assert mod.main(["resume", "no-such-cell"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lookup-search-ties" in err[0]  # names the cells there are


def test_resume_imports_a_cells_runs_and_checkpoints_and_carry_then_changes_nothing(tmp_path, monkeypatch, capsys):
    mod = _script()
    lines = RUNS.read_text().splitlines()[:4]
    root = tmp_path / "repo"
    here = root / "docs" / "results" / "in-flight"
    (here / "checkpoints" / "c" / "ends").mkdir(parents=True)
    (root / "docs" / "results" / "x").mkdir()
    (root / "docs" / "results" / "x" / "runs.jsonl").write_text(lines[0] + "\n" + lines[1] + "\n")
    (here / "c.jsonl").write_text(lines[2] + "\n" + lines[3] + "\n")
    (here / "cells.toml").write_text('[[cell]]\nname = "c"\nissue = 1\nwhat = "a cell"\n'
                                     'committed = ["docs/results/x/runs.jsonl"]\ncarried = "c.jsonl"\n'
                                     'commands = ["sweep s.toml"]\n')
    (here / "checkpoints" / "c" / "r.pt").write_bytes(b"carried")
    (here / "checkpoints" / "c" / "ends" / "e-1000.pt").write_bytes(b"end")
    monkeypatch.setattr(mod, "ROOT", root)
    monkeypatch.setattr(mod, "HERE", here)
    runs = tmp_path / "runs"
    store = runs / "c"
    (store / "checkpoints").mkdir(parents=True)
    (store / "checkpoints" / "r.pt").write_bytes(b"the store's own, newer")
    assert mod.main(["--runs", str(runs), "resume", "c"]) == 0
    with open_store(store, create=False) as s:
        assert s.finished_ids() == {json.loads(line)["run_id"] for line in lines}
    assert (store / "checkpoints" / "r.pt").read_bytes() == b"the store's own, newer"  # never replaced
    assert (store / "checkpoints" / "ends" / "e-1000.pt").read_bytes() == b"end"
    before = (here / "c.jsonl").read_text()
    assert mod.main(["--runs", str(runs), "carry", "c"]) == 0
    assert (here / "c.jsonl").read_text() == before  # nothing new: nothing changed
    assert "0 more than before" in capsys.readouterr().out
    assert not list(tmp_path.rglob("*.tmp"))


def test_start_runs_the_cells_commands_in_the_background_at_nice_19_into_its_store_and_log(tmp_path, monkeypatch):
    mod = _script()
    assert mod.with_workers(["sweep", "s.toml", "--workers", "1"], 2) == ["sweep", "s.toml", "--workers", "2"]
    assert mod.with_workers(["sweep", "s.toml"], None) == ["sweep", "s.toml"]
    monkeypatch.setattr(mod, "ROOT", tmp_path)  # the commands run from here
    (tmp_path / "s.toml").write_text("not a sweep file [")
    cell = mod.Cell(name="c", issue=1, what="x", committed=(), carried="c.jsonl",
                    commands=("sweep s.toml --workers 1",))
    runs = tmp_path / "runs"
    pid = mod.start(cell, runs, workers=2)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped: its /proc entry stays
    niceness = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 2  # archsep's one-line error for the damaged sweep file, its exit code
    assert niceness == 19
    log = (runs / "c.log").read_text().strip().splitlines()
    assert len(log) == 1 and "s.toml" in log[0]
    assert (runs / "c").is_dir()
