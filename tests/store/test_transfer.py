"""Finished runs carried between stores (`archsep export --format jsonl`, `archsep import`): a
store rebuilt from the file holds the same rows, a sweep rerun into it recomputes nothing (and only
the runs the file lacks), and a file that is not what export wrote is refused whole, by one line
naming the file, the line and the field, with nothing written and no module imported."""
from __future__ import annotations

import json
import sys

import pytest

from archsep.cli import main
from archsep.sweeps import file as sw
from archsep.runs.runner import run_configs
from archsep.store import DB_NAME, RESULT_COLUMNS, open_store

from sweep_util import tiny_toml


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A finished tiny sweep (2 arms x 2 lengths) and its JSON-lines export."""
    d = tmp_path_factory.mktemp("src")
    s = sw.parse(tiny_toml(Ns=(2, 3), seeds=1))
    first = run_configs(s.configs, d, workers=1, progress=False, sweep=s)
    assert main(["export", str(d), "--format", "jsonl"]) == 0
    return s, d, first, (d / "runs.jsonl").read_text().splitlines()


def _rows(d) -> dict:
    with open_store(d, create=False) as st:
        return {r["run_id"]: {k: v for k, v in r.items() if k != "committed_at"} for r in st.rows()}


def test_an_imported_store_holds_the_same_rows_and_a_rerun_recomputes_nothing(made, tmp_path, capsys):
    s, src, first, lines = made
    assert len(lines) == 4 and all(list(json.loads(line)) == list(RESULT_COLUMNS) for line in lines)
    capsys.readouterr()
    assert main(["import", str(src / "runs.jsonl"), "--out", str(tmp_path)]) == 0
    assert "4 run(s) added" in capsys.readouterr().out
    assert _rows(tmp_path) == _rows(src)
    seen: list = []
    again = run_configs(s.configs, tmp_path, workers=1, progress=False, sweep=s, on_result=seen.append)
    assert seen == [] and [r.to_dict() for r in again] == [r.to_dict() for r in first]
    assert main(["import", str(src / "runs.jsonl"), "--out", str(tmp_path)]) == 0  # twice: nothing changes
    assert "0 run(s) added to" in capsys.readouterr().out and _rows(tmp_path) == _rows(src)


def test_a_partial_file_resumes_the_sweep_with_the_missing_run_alone(made, tmp_path, monkeypatch):
    s, src, first, lines = made
    monkeypatch.setenv("ARCHSEP_THREADS", "1")
    part = tmp_path / "part.jsonl"
    part.write_text("\n".join(lines[1:]) + "\n\n")  # one run missing; a blank line is no row
    out = tmp_path / "store"
    out.mkdir()
    assert main(["import", str(part), "--out", str(out)]) == 0
    seen: list = []
    again = run_configs(s.configs, out, workers=1, progress=False, sweep=s, on_result=seen.append)
    assert [r.run_id for r in seen] == [json.loads(lines[0])["run_id"]]
    def numbers(rs):  # all but the clock
        return [{k: v for k, v in r.to_dict().items() if k != "wall_s"} for r in rs]

    assert numbers(again) == numbers(first)  # the same numbers, here or there


def test_runs_trained_on_a_gpu_are_imported_and_read_on_a_machine_without_one(made, tmp_path, capsys, monkeypatch):
    """A lent GPU's runs say device "cuda" in their configs; the device is not in a run's identity,
    so they are the runs a CPU's sweep asks for. Importing and reading them needs no GPU (this
    refused, on this machine, the runs a lent H200 trained for qstr-fig3); training on "cuda"
    where there is none is still one line, before anything runs."""
    import torch

    from archsep import RunConfig
    from archsep.errors import ArchsepError

    s, src, first, lines = made
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rows = [json.loads(line) for line in lines]
    for r in rows:
        c = json.loads(r["config"])
        c["train"]["device"] = "cuda"
        r["config"] = json.dumps(c)
        assert RunConfig.from_dict(c).run_id == r["run_id"]  # the same run as on the CPU
    f = tmp_path / "gpu.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    assert main(["import", str(f), "--out", str(tmp_path / "store")]) == 0
    assert "4 run(s) added" in capsys.readouterr().out
    seen: list = []
    again = run_configs(s.configs, tmp_path / "store", workers=1, progress=False, sweep=s, on_result=seen.append)
    assert seen == [] and [r.samples for r in again] == [r.samples for r in first]
    with open_store(tmp_path / "store", create=False) as st:  # the stored configs read back as they are
        assert {json.loads(r["config"])["train"]["device"] for r in st.rows()} == {"cuda"}
    with pytest.raises(ArchsepError, match="device: 'cuda' asked for but no CUDA device"):
        run_configs([RunConfig.from_dict(json.loads(rows[0]["config"]))], tmp_path / "other", workers=1,
                    progress=False)
    assert not (tmp_path / "other").exists()


def test_a_stored_run_keeps_its_result_when_a_file_says_otherwise(made, tmp_path, capsys):
    _, src, _, lines = made
    out = tmp_path / "store"
    out.mkdir()
    (tmp_path / "a.jsonl").write_text(lines[0] + "\n")
    assert main(["import", str(tmp_path / "a.jsonl"), "--out", str(out)]) == 0
    row = json.loads(lines[0])
    row["samples"] = 1  # a number is not part of the run's identity: a valid row with another result
    (tmp_path / "b.jsonl").write_text(json.dumps(row) + "\n")
    capsys.readouterr()
    assert main(["import", str(tmp_path / "b.jsonl"), "--out", str(out)]) == 0
    assert "0 run(s) added" in capsys.readouterr().out
    assert _rows(out)[row["run_id"]]["samples"] == json.loads(lines[0])["samples"]


def _bad(lines: list[str], how: str) -> str:
    row = json.loads(lines[1])
    if how == "not json":
        return "{not json"
    if how == "array":
        return "[1, 2]"
    if how == "unknown column":
        return json.dumps({**row, "evil": 1})
    if how == "missing column":
        return json.dumps({k: v for k, v in row.items() if k != "curve"})
    if how == "status":
        return json.dumps({**row, "status": "great"})
    if how == "run id":
        return json.dumps({**row, "run_id": "0123456789abcdef"})
    if how == "config":  # another run's config under this id
        cfg = json.loads(row["config"])
        return json.dumps({**row, "config": json.dumps({**cfg, "seed": 7})})
    if how == "nan":
        return lines[1].replace('"wall_s": ', '"wall_s": NaN, "x": ', 1)
    if how == "twice":
        return lines[1]
    if how == "plugin":
        cfg = json.loads(row["config"])
        return json.dumps({**row, "config": json.dumps({**cfg, "arch": "os.system"})})
    raise AssertionError(how)


WHY = {"not json": "not a JSON object", "array": "expected a JSON object", "unknown column": "unknown column evil",
       "missing column": "missing column curve", "status": "status", "run id": "is not its config's",
       "config": "is not its config's", "nan": "not a JSON object", "twice": "appears twice",
       "plugin": "config"}


@pytest.mark.parametrize("how", list(WHY))
def test_a_file_that_export_did_not_write_is_refused_whole(made, tmp_path, capsys, how):
    _, _, _, lines = made
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join([lines[0], lines[1], _bad(lines, how), lines[2]]) + "\n")
    out = tmp_path / "store"
    modules = set(sys.modules)
    capsys.readouterr()
    assert main(["import", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "line 3" in err and WHY[how] in err and "Traceback" not in err, err
    assert not (out / DB_NAME).exists()  # nothing written, not even the rows before the bad line
    assert set(sys.modules) - modules == set()  # a name in a row is looked up, never imported


def test_export_jsonl_never_writes_over_a_store_and_names_its_formats(made, tmp_path, capsys):
    _, src, _, _ = made
    assert main(["export", str(src), "--format", "jsonl", "-o", str(src / DB_NAME)]) == 2
    assert "results store" in capsys.readouterr().err
    assert main(["export", str(src), "--format", "xml"]) == 2
    assert "allowed: csv, jsonl, parquet" in capsys.readouterr().err


def test_a_path_that_is_not_a_regular_file_is_one_line(tmp_path, capsys):
    import os

    os.mkfifo(tmp_path / "fifo")  # reading it would block forever
    for bad in (tmp_path / "fifo", tmp_path, tmp_path / "missing.jsonl"):
        assert main(["import", str(bad), "--out", str(tmp_path / "store")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and ("not a regular file" in err or "cannot read" in err), err
    assert not (tmp_path / "store").exists()
