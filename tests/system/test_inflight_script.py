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
from archsep.store.transfer import import_rows, read_rows

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
    for field, value in (("committed", '"docs/results/x/runs.jsonl"'), ("committed", '["../../elsewhere.jsonl"]'),
                         ("results", '"docs/results/../../x"')):
        more = "committed = []\n" if field == "results" else ""
        bad.write_text(f'[[cell]]\nname = "a"\nissue = 1\nwhat = "x"\ncarried = "a.jsonl"\n'
                       f'commands = ["sweep s.toml"]\n{field} = {value}\n{more}')
        with pytest.raises(mod.CellError, match="lists of|under docs/results"):
            mod.read_cells(bad)
    bad.write_text("[[cell]\n")
    with pytest.raises(mod.CellError, match="cannot be read"):
        mod.read_cells(bad)
    assert mod.main(["resume", "no-such-cell"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mamba-width-search" in err[0]  # names the cells there are


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
    assert mod.main(["--runs", str(runs), "list"]) == 0
    assert "c (issue 1): a cell; 2 run(s) carried, 2 checkpoint(s); store here, 4 finished, 0 pending" \
        in capsys.readouterr().out
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


def test_finish_carries_the_new_runs_and_makes_the_outputs_again_from_the_committed_files(tmp_path, monkeypatch):
    """mamba-width's committed search at N = 20, its last 5 runs only in the store: `finish` appends
    them to the results' runs.jsonl and writes the same claims as the committed summary."""
    mod = _script()
    committed = ROOT / "docs" / "results" / "mamba-width-search"
    lines = (committed / "runs.jsonl").read_text().splitlines()
    root = tmp_path / "repo"
    results = root / "docs" / "results" / "mw"
    results.mkdir(parents=True)
    (results / "runs.jsonl").write_text("".join(line + "\n" for line in lines[:-5]))
    (results / "PROVENANCE").write_text((committed / "PROVENANCE").read_text())
    monkeypatch.setattr(mod, "ROOT", root)
    runs = tmp_path / "runs"
    with open_store(runs / "mw") as s:
        import_rows(s, read_rows(committed / "runs.jsonl"))
    cell = mod.Cell(name="mw", issue=52, what="x", committed=("docs/results/mw/runs.jsonl",), carried="mw.jsonl",
                    commands=("reproduce mamba-width --scale search --at 20",), results="docs/results/mw",
                    finish="reproduce mamba-width --scale search --at 20")
    done = mod.finish(cell, runs)
    out = (results / "runs.jsonl").read_text().splitlines()
    assert out[:-5] == lines[:-5]  # its lines kept as they were
    ids = [json.loads(line)["run_id"] for line in out]
    assert sorted(ids[-5:]) == sorted(json.loads(line)["run_id"] for line in lines[-5:])  # the 5 appended
    new, old = (json.loads((d / "summary.json").read_text()) for d in (results, committed))
    assert [(c["text"], c["held"]) for c in new["claims"]] == [(c["text"], c["held"]) for c in old["claims"]]
    assert (root / "docs" / "results" / "README.md").is_file() and "mw" in done[0]
    assert not list(results.glob("archsep.db*")) and not list(tmp_path.rglob("*.tmp"))
    missing = mod.Cell(name="mw", issue=52, what="x", committed=(), carried="mw.jsonl", commands=("sweep s.toml",))
    with pytest.raises(mod.CellError, match="no results and finish"):
        mod.finish(missing, runs)
