"""scripts/carry.py, which carries a store's runs in flight into docs/results/in-flight/: the file
keeps its own lines as they were and in their order, loses the runs a committed file now holds and
gains the store's others; the checkpoints folder becomes the store's (a finished run's is gone);
a link is never written through; a damaged file is one line and exit 2, and changes nothing."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from archsep.store import open_store
from archsep.store.transfer import import_rows, read_rows

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "docs" / "results" / "lookup-fig2-search-steps" / "runs.jsonl"  # 9 committed runs


def _carry():
    spec = importlib.util.spec_from_file_location("carry_script", ROOT / "scripts" / "carry.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


def _store(tmp_path: Path, lines: list[str]) -> Path:
    src = tmp_path / "src.jsonl"
    src.write_text("".join(line + "\n" for line in lines))
    store_dir = tmp_path / "store"
    with open_store(store_dir) as store:
        import_rows(store, read_rows(src))
    return store_dir


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["run_id"] for line in path.read_text().splitlines()]


def test_a_carry_keeps_the_files_lines_drops_committed_runs_and_appends_the_stores_others(tmp_path):
    lines = RUNS.read_text().splitlines()[:6]
    ids = [json.loads(line)["run_id"] for line in lines]
    store = _store(tmp_path, lines)
    committed = tmp_path / "committed.jsonl"
    committed.write_text(lines[0] + "\n")  # run 0 is committed elsewhere now
    carried = tmp_path / "carried.jsonl"
    # the file as an earlier carry left it: runs 3 and 0, run 3's line with another committed_at
    row3 = json.loads(lines[3])
    row3["committed_at"] = "2026-01-01T00:00:00+00:00"
    old3 = json.dumps(row3)
    carried.write_text(old3 + "\n" + lines[0] + "\n")
    ck = store / "checkpoints"
    (ck / "ends").mkdir(parents=True)
    (ck / "aaaa.pt").write_bytes(b"a" * 100)
    (ck / "big.pt").write_bytes(b"b" * 3000)
    (ck / "ends" / "e-4000.pt").write_bytes(b"e" * 10)
    dest = tmp_path / "ck"
    dest.mkdir()
    (dest / "finished.pt").write_bytes(b"old")  # its run finished: the store holds no checkpoint of it
    rc = _carry()([str(store), str(carried), "--committed", str(committed), "--checkpoints", str(dest),
                   "--ends", "--max-mb", str(2000 / 2**20)])
    assert rc == 0
    out = carried.read_text().splitlines()
    assert out[0] == old3  # kept as it was, first
    assert _ids(carried) == [ids[3], ids[1], ids[2], ids[4], ids[5]]  # 0 dropped, the rest in the store's order
    assert sorted(p.name for p in dest.glob("*.pt")) == ["aaaa.pt"]  # big.pt over the limit, finished.pt gone
    assert (dest / "aaaa.pt").read_bytes() == b"a" * 100
    assert (dest / "ends" / "e-4000.pt").read_bytes() == b"e" * 10
    before = carried.read_text()
    assert _carry()([str(store), str(carried), "--committed", str(committed)]) == 0
    assert carried.read_text() == before  # a second carry with nothing new changes nothing
    assert not [p for p in tmp_path.rglob("*.tmp")]


def test_a_carry_never_writes_through_a_link_nor_keeps_a_damaged_file(tmp_path, capsys):
    lines = RUNS.read_text().splitlines()[:2]
    store = _store(tmp_path, lines)
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    link = tmp_path / "carried.jsonl"
    link.symlink_to(target)
    assert _carry()([str(store), str(link)]) == 2
    assert target.read_text() == ""
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "link" in err[0]
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(lines[0][:-5] + "\n")
    assert _carry()([str(store), str(damaged)]) == 2
    assert damaged.read_text() == lines[0][:-5] + "\n"
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert _carry()([str(tmp_path / "nostore"), str(tmp_path / "x.jsonl")]) == 2
    assert not (tmp_path / "x.jsonl").exists()
