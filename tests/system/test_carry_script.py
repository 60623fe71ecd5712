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


def test_with_ends_a_carry_takes_only_the_ends_a_run_still_to_come_goes_on_from(tmp_path):
    """A two-rung search (1k, 4k steps): trial A promoted (its 4k run finished), B promoted (its 4k run
    still to come), C not promoted; and a three-rung search whose trial E is at rung 1, its rung 2
    not planned yet."""
    from archsep.config import RunConfig
    from archsep.engine.checkpoint import prefix_key

    row = json.loads(RUNS.read_text().splitlines()[0])  # a finished run: trial A's 4k run
    a4 = json.loads(row["config"])
    def at(cfg: dict, steps: int, lr: float | None = None) -> dict:
        c = json.loads(json.dumps(cfg))
        c["train"]["budget"] = steps * c["train"]["batch_size"]
        if lr is not None:
            c["train"]["lr"] = lr
        return c
    a4 = at(a4, 4000)
    row["config"] = json.dumps(a4, sort_keys=True)
    row["run_id"] = RunConfig.from_dict(a4).run_id
    row["samples"] = min(row["samples"], 4000 * 64)
    trials = {"A": a4["train"]["lr"], "B": 1e-4, "C": 3e-4, "E": 1e-2}
    cfg = {t: {s: at(a4, s, lr) for s in (1000, 4000)} for t, lr in trials.items()}
    rid = {t: {s: RunConfig.from_dict(c).run_id for s, c in v.items()} for t, v in cfg.items()}
    key = {t: prefix_key(RunConfig.from_dict(v[1000])) for t, v in cfg.items()}
    src = tmp_path / "src.jsonl"
    src.write_text(json.dumps(row) + "\n")
    store_dir = tmp_path / "store"
    two = '[search]\nsteps = [1000, 4000]\n'
    three = '[search]\nsteps = [1000, 4000, 16000]\n'
    with open_store(store_dir) as store:
        import_rows(store, read_rows(src))
        store.register_sweep("s1", "s.rung1", two, [(rid[t][1000], cfg[t][1000]) for t in "ABC"])
        store.register_sweep("s2", "s.rung2", two, [(rid[t][4000], cfg[t][4000]) for t in "AB"])
        store.register_sweep("e1", "e.rung1", three, [(rid["E"][1000], cfg["E"][1000])])
        seed = at(a4, 4000, 1e-4)
        seed["seed"] = 1  # trial B's winner's seed 1 at the last rung's budget
        store.register_sweep("sw", "s.winners", two, [(RunConfig.from_dict(seed).run_id, seed)])
    assert rid["A"][4000] == row["run_id"]
    ends = store_dir / "checkpoints" / "ends"
    ends.mkdir(parents=True)
    names = {f"{key['A']}-1000.pt": False,  # A's 4k run, the one that went on from it, is finished
             f"{key['A']}-4000.pt": False,  # the last rung's end: nothing goes beyond
             f"{key['B']}-1000.pt": True,  # B's 4k run is still to come
             f"{key['C']}-1000.pt": False,  # rung 2 did not promote C
             f"{key['E']}-1000.pt": True,  # rung 2 not planned yet: E may be promoted
             f"{'0' * 20}-1000.pt": True,  # no planned run names it: carried
             f"{prefix_key(RunConfig.from_dict(seed))}-4000.pt": False}  # a winner's seed's end
    for n in names:
        (ends / n).write_bytes(b"e")
    dest = tmp_path / "ck"
    carried = tmp_path / "carried.jsonl"
    assert _carry()([str(store_dir), str(carried), "--checkpoints", str(dest), "--ends"]) == 0
    assert sorted(p.name for p in (dest / "ends").glob("*.pt")) == sorted(n for n, k in names.items() if k)
    assert _ids(carried) == [row["run_id"]]
