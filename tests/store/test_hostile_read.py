"""Opening a results folder is reading data: nothing it names is imported, nothing is written
beside it, and a damaged store is one line naming the store, the run (or sweep) and the field
(issue 20). Every store here is a real SQLite file made through the Store API and then damaged
with sqlite3, as a hostile or broken copy would be."""
from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import archsep
from archsep.cli import main
from archsep.errors import ArchsepError
from archsep.results import RunResult
from archsep.store import DB_NAME, open_store, record
from sweep_util import env

MARKER_MODULE = textwrap.dedent('''
    import pathlib
    pathlib.Path(__file__).with_name("IMPORTED").write_text("the store's module ran")
    class T:
        pass
''')


def make_store(out: Path, task: str = "qstr", arch: str = "tf-b", preset: str | None = None,
               label: str = "TF") -> list[str]:
    """A real store: 2 N x 2 seeds of one arm, planned by one sweep. Returns the run ids."""
    ids = []
    with open_store(out) as st:
        planned = []
        for N in (2, 3):
            for seed in (0, 1):
                cfg = {"task": task, "arch": arch, "seed": seed, "label": label, "task_params": {"N": N, "d": 4,
                                                                                                 "q": 1},
                       "model_params": {}, "train": {"budget": 2000, "threshold": 0.5, "lr": 1e-3}}
                rid = f"run{N}{seed}"
                st.add(record(RunResult(rid, cfg, "ok", 200 * N + 64 * seed, 64, 0.4, 0.3,
                                        [(64, 0.9), (128, 0.4)], [(64, 1.0)], {"every_steps": 1}, 1.5, 10)))
                planned.append((rid, cfg))
                ids.append(rid)
        st.register_sweep("sw1", "hostile", 'name = "hostile"\n', planned, preset=preset,
                          analysis={"x": "task_params.N", "separations": []})
    return ids


def digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def run_main(capsys, *args) -> tuple[int, str, list[str]]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err.strip().splitlines()


# --- reading never imports -------------------------------------------------------------------
def _hostile_folder(tmp_path: Path, where: str) -> Path:
    """A results folder whose store names 'relpwn_mod:T' (as a run's task or arch, or as the
    sweep's preset) and that ships relpwn_mod.py, which leaves a file behind when imported."""
    folder = tmp_path / "downloaded"
    folder.mkdir()
    name = "relpwn_mod:T"
    make_store(folder, task=name if where == "task" else "qstr", arch=name if where == "arch" else "tf-b",
               preset=name if where == "preset" else None)
    (folder / "relpwn_mod.py").write_text(MARKER_MODULE)
    return folder


@pytest.mark.parametrize("where", ["task", "arch", "preset"])
def test_opening_a_results_folder_never_imports_what_its_store_names(tmp_path, where, monkeypatch, capsys):
    folder = _hostile_folder(tmp_path, where)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))  # as `python -m`, a notebook or `python -c` in the folder would
    sys.modules.pop("relpwn_mod", None)
    for cmd in (["status", "."], ["export", ".", "-o", tmp_path / "runs.csv"], ["report", "."]):
        code, out, err = run_main(capsys, *cmd)
        assert code == 0, (cmd, err)
    assert len(archsep.load(".")) == 4
    a = archsep.analyze(".")
    assert len(a["points"]) == 2  # N = 2, 3: the runs are analysed, their names shown as stored
    assert "relpwn_mod" not in sys.modules and not (folder / "IMPORTED").exists()
    if where != "preset":
        assert "relpwn_mod:T" in (folder / "report.html").read_text()  # shown as text
        assert set(archsep.load(".")[where]) == {"relpwn_mod:T"}


def test_archsep_report_in_a_folder_shipping_a_module_runs_none_of_it(tmp_path):
    """The issue's command as typed: `archsep report .` in the folder (python -m puts the
    folder on sys.path first); an arch 'this:X' would print the Zen of Python on import."""
    folder = tmp_path / "downloaded"
    folder.mkdir()
    make_store(folder, task="relpwn_mod:T", arch="this:X", preset="relpwn_mod:T")
    (folder / "relpwn_mod.py").write_text(MARKER_MODULE)
    r = subprocess.run([sys.executable, "-m", "archsep.cli", "report", "."], cwd=folder, env=env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not (folder / "IMPORTED").exists()
    assert "Beautiful is better than ugly" not in r.stdout + r.stderr
    assert "this:X" in (folder / "report.html").read_text()


def test_while_reading_an_import_string_resolves_only_from_a_module_already_loaded(tmp_path, monkeypatch):
    import types

    from archsep import TASKS
    from archsep.registry import reading
    from archsep.tasks.qstr import QSTR

    (tmp_path / "relpwn_mod.py").write_text(MARKER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("relpwn_mod", None)
    with reading(), pytest.raises(ArchsepError, match="never imported.*--import"):
        TASKS.get("relpwn_mod:T")
    assert "relpwn_mod" not in sys.modules and not (tmp_path / "IMPORTED").exists()
    loaded = types.ModuleType("h20_loaded_plugin")  # a plugin the user already loaded
    loaded.Task = QSTR
    monkeypatch.setitem(sys.modules, "h20_loaded_plugin", loaded)
    with reading():
        assert TASKS.get("h20_loaded_plugin:Task") is QSTR
    assert TASKS.known("h20_loaded_plugin:Task") is QSTR  # resolved once, then registered under its string
    with TASKS.temporary("h20_loaded_plugin:Task"):  # gone for the rest of the test session
        pass


# --- readers write nothing -------------------------------------------------------------------
def _copied_with_wal(tmp_path: Path) -> Path:
    """A store copied (db and -wal, no -shm) while its writer still held an uncheckpointed
    commit: run20's samples are 777 only in the -wal."""
    src = tmp_path / "src"
    src.mkdir()
    make_store(src)
    con = sqlite3.connect(src / DB_NAME)
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("UPDATE runs SET samples = 777 WHERE run_id = 'run20'")
    con.commit()
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in (DB_NAME, DB_NAME + "-wal"):
        shutil.copyfile(src / name, copy / name)
    con.close()
    assert (copy / (DB_NAME + "-wal")).stat().st_size > 0 and not (copy / (DB_NAME + "-shm")).exists()
    return copy


READERS = {
    "status": lambda d, o: main(["status", str(d)]),
    "status --json": lambda d, o: main(["status", str(d), "--json"]),
    "export": lambda d, o: main(["export", str(d), "-o", str(o / "runs.csv")]),
    "report": lambda d, o: main(["report", str(d), "-o", str(o / "report.html")]),
    "load": lambda d, o: archsep.load(d),
    "analyze": lambda d, o: archsep.analyze(d),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_readers_create_nothing_beside_a_copied_wal_store_and_still_read_the_wal(tmp_path, reader, monkeypatch, capsys):
    store = _copied_with_wal(tmp_path)
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(private))
    before = {p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in store.iterdir()}
    out = tmp_path / "outputs"
    out.mkdir()
    got = READERS[reader](store, out)
    assert {p.name: (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()) for p in store.iterdir()} \
        == before  # no -shm, nothing else; the files themselves unchanged
    assert list(private.iterdir()) == []  # the private copy is gone too
    if reader == "load":
        assert 777 in set(got["samples"])  # the commit that lives only in the -wal was read
    elif reader == "export":
        assert got == 0 and ",777," in (out / "runs.csv").read_text()
    elif reader != "analyze":
        assert got == 0


def test_a_read_only_copied_wal_store_is_read_without_writing(tmp_path, capsys):
    store = _copied_with_wal(tmp_path)
    store.chmod(0o555)
    try:
        assert main(["status", str(store)]) == 0
        assert 777 in set(archsep.load(store)["samples"])
    finally:
        store.chmod(0o755)
    assert sorted(p.name for p in store.iterdir()) == [DB_NAME, DB_NAME + "-wal"]


# --- every damaged store gives one line ------------------------------------------------------
DEEP = "[" * 100_000 + "]" * 100_000
DAMAGE = {  # case: (SQL, args, what is named: the run or sweep, the field)
    "config nested 1e5 deep": ("UPDATE runs SET config = ? WHERE run_id = 'run20'", (DEEP,), "run20", "config"),
    "a parameter nested 1e5 deep": ("UPDATE runs SET config = json_set(config, '$.task_params.N', json(?)) "
                                    "WHERE run_id = 'run20'", ("[" * 900 + "]" * 900,), "run20", "config"),
    "config is a JSON list": ("UPDATE runs SET config = '[1, 2]' WHERE run_id = 'run20'", (), "run20", "config"),
    "config not JSON": ("UPDATE runs SET config = '{oops' WHERE run_id = 'run20'", (), "run20", "config"),
    "text in samples": ("UPDATE runs SET samples = 'abc' WHERE run_id = 'run20'", (), "run20", "samples"),
    "text in wall_s": ("UPDATE runs SET wall_s = 'fast' WHERE run_id = 'run20'", (), "run20", "wall_s"),
    "fraction in params": ("UPDATE runs SET params = 2.5 WHERE run_id = 'run20'", (), "run20", "params"),
    "NaN in curve": ("UPDATE runs SET curve = '[[64, NaN]]' WHERE run_id = 'run20'", (), "run20", "curve"),
    "Infinity in train_curve": ("UPDATE runs SET train_curve = '[[64, -Infinity]]' WHERE run_id = 'run20'", (),
                                "run20", "train_curve"),
    "curve an object": ("UPDATE runs SET curve = '{}' WHERE run_id = 'run20'", (), "run20", "curve"),
    "curve point not a pair": ("UPDATE runs SET curve = '[[64]]' WHERE run_id = 'run20'", (), "run20", "curve[0]"),
    "seed as text": ("UPDATE runs SET config = json_set(config, '$.seed', '0') WHERE run_id = 'run20'", (),
                     "run20", "config.seed"),
    "label a number": ("UPDATE runs SET config = json_set(config, '$.label', 5) WHERE run_id = 'run20'", (),
                       "run20", "config.label"),
    "task_params a list": ("UPDATE runs SET config = json_set(config, '$.task_params', json('[2]')) "
                           "WHERE run_id = 'run20'", (), "run20", "config.task_params"),
    "budget as text": ("UPDATE runs SET config = json_set(config, '$.train.budget', 'lots') WHERE run_id = 'run20'",
                       (), "run20", "config.train.budget"),
    "N as text": ("UPDATE runs SET config = json_set(config, '$.task_params.N', 'abc') WHERE run_id = 'run20'", (),
                  "run20", "config.task_params.N"),
    "eval_schedule a list": ("UPDATE runs SET eval_schedule = '[]' WHERE run_id = 'run20'", (), "run20",
                             "eval_schedule"),
    "status outside the set": ("UPDATE runs SET status = 'pwned' WHERE run_id = 'run20'", (), "run20", "status"),
    "analysis separations not pairs": ("UPDATE sweeps SET analysis = '{\"separations\": [[\"TF\"]]}'", (), "sw1",
                                       "analysis.separations"),
    "analysis x a number": ("UPDATE sweeps SET analysis = '{\"x\": 5}'", (), "sw1", "analysis.x"),
    "analysis not JSON": ("UPDATE sweeps SET analysis = '{oops'", (), "sw1", "analysis"),
}


def _damage(folder: Path, sql: str, args: tuple) -> None:
    make_store(folder)
    con = sqlite3.connect(folder / DB_NAME)
    con.execute("PRAGMA ignore_check_constraints = ON")  # a hostile writer ignores the CHECK on status
    assert con.execute(sql, args).rowcount != 0  # -1: a schema change
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    for extra in ("-wal", "-shm"):
        (folder / (DB_NAME + extra)).unlink(missing_ok=True)


@pytest.mark.parametrize("case", list(DAMAGE))
def test_every_reader_names_the_store_the_run_and_the_field_of_a_damaged_row(tmp_path, case, capsys):
    sql, args, what, field = DAMAGE[case]
    folder = tmp_path / "store"
    folder.mkdir()
    _damage(folder, sql, args)
    before = digest(folder)
    db = str(folder / DB_NAME)
    kind = "sweep" if what.startswith("sw") else "run"

    code, out, err = run_main(capsys, "status", folder)  # the rest of the store is reported, the damage listed
    assert code == 2 and len(err) == 1 and err[0].startswith("archsep: error: "), err
    assert db in err[0] and f"{kind} {what}: {field}:" in err[0], err
    assert f"damaged   {kind} {what}: {field}:" in out
    assert (f"{db}: 3 finished" if kind == "run" else f"{db}: 4 finished") in out
    for cmd in (["export", folder, "-o", tmp_path / "runs.csv"], ["report", folder, "-o", tmp_path / "r.html"]):
        code, out, err = run_main(capsys, *cmd)
        assert code == 2 and len(err) == 1 and "Traceback" not in out, (cmd, err)
        assert err[0].startswith(f"archsep: error: store '{db}' is damaged: {kind} {what}: {field}:"), err
    readers = [archsep.load] + ([archsep.analyze] if kind == "run" else [])  # analyze reads no sweep rows
    for read in readers:
        with pytest.raises(ArchsepError) as e:
            read(folder)
        assert e.value.field == field and f"store '{db}' is damaged: {kind} {what}: {field}:" in str(e.value)
        assert "\n" not in str(e.value)
    assert digest(folder) == before  # untouched, nothing written beside it
    assert not (tmp_path / "runs.csv").exists() and not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("value", ["abc", "", "1e3", "-1"])
def test_a_schema_version_that_is_not_a_number_is_one_line_from_every_reader(tmp_path, value, capsys):
    folder = tmp_path / "store"
    folder.mkdir()
    _damage(folder, "UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    before = digest(folder)
    for cmd in (["status", folder], ["status", folder, "--json"], ["export", folder, "-o", tmp_path / "x.csv"],
                ["report", folder, "-o", tmp_path / "x.html"]):
        code, out, err = run_main(capsys, *cmd)
        assert code == 2 and len(err) == 1 and "meta.schema_version" in err[0] and str(folder) in err[0], err
    for read in (archsep.load, archsep.analyze):
        with pytest.raises(ArchsepError) as e:
            read(folder)
        assert e.value.field == "meta.schema_version"
    assert digest(folder) == before


def test_a_store_missing_a_column_is_one_line(tmp_path, capsys):
    folder = tmp_path / "store"
    folder.mkdir()
    _damage(folder, "ALTER TABLE runs DROP COLUMN curve", ())
    code, out, err = run_main(capsys, "status", folder)
    assert code == 2 and len(err) == 1 and "runs: missing column(s) curve" in err[0], err


def test_status_escapes_control_characters_of_stored_text(tmp_path, capsys):
    """A stored label and error with ESC/OSC/BEL sequences (retitle, clear the terminal) are
    printed as escapes, never raw."""
    make_store(tmp_path, label="\x1b]0;pwned\x07TF\x1b[2J")
    con = sqlite3.connect(tmp_path / DB_NAME)
    con.execute("UPDATE runs SET status = 'error', samples = NULL, error = ? WHERE run_id = 'run20'",
                ("boom\x1b[2J\x00\r",))
    con.commit()
    con.close()
    code, out, err = run_main(capsys, "status", tmp_path)
    assert code == 0, err
    assert "error     run20 \\x1b]0;pwned\\x07TF\\x1b[2J" in out and "boom\\x1b[2J\\x00" in out
    assert not any(c in out for c in "\x1b\x07\x00\r")


def test_odd_but_well_formed_values_are_shown_not_fatal(tmp_path, capsys):
    """A task not registered here (its parameters cannot be checked) whose N is text in one run
    and a list in another, a curve point with a null metric (a diverged evaluation), an unknown
    train field: every reader works and the report shows them as stored."""
    make_store(tmp_path, task="foreign_pkg:Task")
    con = sqlite3.connect(tmp_path / DB_NAME)
    con.execute("UPDATE runs SET config = json_set(config, '$.task_params.N', 'abc') WHERE run_id = 'run20'")
    con.execute("UPDATE runs SET config = json_set(config, '$.task_params.N', json('[1, 2]')) WHERE run_id = 'run21'")
    con.execute("UPDATE runs SET config = json_set(config, '$.train.later_field', 'x') WHERE run_id = 'run30'")
    con.execute("UPDATE runs SET curve = '[[64, null], [128, 0.5]]' WHERE run_id = 'run31'")
    con.commit()
    con.close()
    for cmd in (["status", tmp_path], ["export", tmp_path, "-o", tmp_path / "x.csv"],
                ["report", tmp_path, "-o", tmp_path / "x.html"]):
        code, out, err = run_main(capsys, *cmd)
        assert code == 0, (cmd, err)
    points = archsep.analyze(tmp_path)["points"]
    # numbers, then the rest
    assert [p["x"] for p in points if p["arch"] == "TF later_field=None"] == [3, "abc", [1, 2]]
    assert "foreign_pkg:Task" in (tmp_path / "x.html").read_text()


@pytest.mark.parametrize("label", ["TF $x_$", "TF " + "A" * 1_000_000], ids=["mathtext", "a megabyte"])
def test_a_stored_label_is_drawn_as_text(tmp_path, label, capsys):
    """'TF $x_$' would be parsed as (broken) mathtext by matplotlib, and a megabyte-long label
    would make a legend too large to draw: either failed the whole report."""
    make_store(tmp_path, label=label)
    code, out, err = run_main(capsys, "report", tmp_path, "-o", tmp_path / "r.html")
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert page.count("src='data:image/png;base64,") == 2 and label in page


def test_every_config_archsep_writes_reads_back(tmp_path):
    """The checks accept what archsep itself stores: screen_z = inf (stored as null), nullable
    parameters, a probe in `extra`, a curve point whose metric was NaN (stored as null)."""
    from archsep import RunConfig, TrainConfig

    cfg = RunConfig("qstr", "tf-b", {"N": 2, "d": 4, "q": 1}, {"mlp_width": 16},
                    TrainConfig(screen_z=float("inf"), budget=640), seed=3, label="TF").to_dict()
    with open_store(tmp_path) as st:
        st.add(record(RunResult("a", cfg, "diverged", None, 64, float("nan"), 0.5, [(64, float("nan"))], [(64, 1.0)],
                                {"every_steps": 1}, 0.5, 10, extra={"probes": [[[1.0, 2.0]]]})))
    (r,) = archsep.load_results(tmp_path)
    assert r.config["train"]["screen_z"] is None and r.curve == [(64, None)] and r.final_metric is None
    assert archsep.load(tmp_path)["status"].tolist() == ["diverged"]


def test_the_row_check_accepts_every_config_of_every_preset():
    """No false alarm: every run every preset plans, at every scale, as stored, passes."""
    from archsep.experiments import EXPERIMENTS
    from archsep.store.rows import _dumps, check_config

    n = 0
    for name in EXPERIMENTS.names():
        exp = EXPERIMENTS.get(name)()
        for scale in exp.scales:
            for c in exp.plan(scale, "cpu"):
                check_config(json.loads(_dumps(c.to_dict())), f"run {c.run_id}")
                n += 1
    assert n > 500
