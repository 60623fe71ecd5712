"""Issue 20, 'outputs written safely' and 'validation where a value enters': an output path never
destroys data, never follows a planted link, never leaves a temporary file behind (full disk,
SIGINT, SIGTERM), and default directories never leave results/.

The CLI cases run the real `archsep.cli.main`, each in its own forked process (one interpreter
imports archsep and torch once; a group of cases is forked at the same time, so concurrent
writers really are concurrent). Real files, symlinks, FIFOs, /dev/null (as root), a real 64 KiB
tmpfs (where mounting is allowed) and real signals.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from archsep.fileio import atomic_write, check_component, make_dirs
from archsep.errors import ArchsepError
from archsep.results import RunResult
from archsep.store import DB_NAME, open_store, record
from sweep_util import env, tiny_toml

ROOT = os.geteuid() == 0

ZYGOTE = r"""
import json, os, sys, traceback
import archsep.cli  # imported once; every case is a fresh fork of this process
res = {}
for group in json.load(sys.stdin):
    pids = {}
    for c in group:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.chdir(c["cwd"])
                os.environ.update(c.get("env", {}))
                for fd, path in ((1, c["stdout"]), (2, c["stderr"])):
                    os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
                try:
                    code = archsep.cli.main(c["argv"])
                except SystemExit as e:
                    code = e.code if isinstance(e.code, int) else 1
                except BaseException:
                    traceback.print_exc()
                    code = 1
                sys.stdout.flush(); sys.stderr.flush()
            finally:
                os._exit(code)
        pids[pid] = c["id"]
    for pid, cid in pids.items():
        _, status = os.waitpid(pid, 0)
        res[cid] = os.waitstatus_to_exitcode(status)
print(json.dumps(res))
"""


def _result(i: int, label: str = "TF", status: str = "ok", error: str | None = None, points: int = 3) -> RunResult:
    cfg = {"task": "qstr", "arch": "tf-b", "seed": i, "label": label, "task_params": {"N": 2 + i % 3, "d": 4},
           "model_params": {}, "train": {"threshold": 0.5, "budget": 640}}
    curve = [(64 * (k + 1), 1.0 / (k + 1)) for k in range(points)]
    return RunResult(f"run{i:04d}", cfg, status, 640 if status == "ok" else None, 64, 0.5, 0.4, curve, curve,
                     {}, 1.0, 10, None, error)


def _store(d: Path, n: int = 3, **kw) -> Path:
    with open_store(d) as st:
        for i in range(n):
            st.add(record(_result(i, **kw)))
    return d


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".tmp") or ".tmp" in p.name)


def run_groups(root: Path, groups: list[list[tuple]]) -> dict[str, tuple[int, str, str]]:
    """Each case (id, argv, cwd[, env]); the cases of one group run at the same time."""
    jobs = []
    for group in groups:
        g = []
        for cid, argv, cwd, *extra in group:
            io = root / "io" / cid
            io.mkdir(parents=True)
            g.append({"id": cid, "argv": [str(a) for a in argv], "cwd": str(cwd), "env": extra[0] if extra else {},
                      "stdout": str(io / "stdout"), "stderr": str(io / "stderr")})
        jobs.append(g)
    p = subprocess.run([sys.executable, "-c", ZYGOTE], input=json.dumps(jobs), capture_output=True, text=True,
                       env=env(), timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    codes = json.loads(p.stdout.strip().splitlines()[-1])
    return {j["id"]: (codes[j["id"]], Path(j["stderr"]).read_text(), Path(j["stdout"]).read_text())
            for g in jobs for j in g}


def one_line(res, cid: str, expected: str) -> str:
    code, err, out = res[cid]
    lines = err.strip().splitlines()
    assert code == 2, (cid, code, err)
    assert len(lines) == 1 and lines[0].startswith("archsep: error: ") and "Traceback" not in err, (cid, err)
    assert expected in lines[0], (cid, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Every file-system trap, set up once; every CLI case run once (grouped, forked)."""
    root = tmp_path_factory.mktemp("hostile")
    S = _store(root / "S")  # a store with 3 runs
    D = root / "D"
    D.mkdir()
    (D / "adir").mkdir()
    os.mkfifo(D / "fifo")
    (D / "victim.txt").write_text("precious\n")
    os.symlink(D / "victim.txt", D / "link.csv")  # -o a symlink: refused
    (D / "victim2.txt").write_text("precious 2\n")
    os.symlink(D / "victim2.txt", D / "x.csv.tmp")  # planted at the old predictable temp name
    (D / "victim3.txt").write_text("precious 3\n")
    os.symlink(D / "victim3.txt", D / "r.html.tmp")
    (D / "copy.db").write_bytes((S / DB_NAME).read_bytes())  # a copied store under another name
    (D / "exits.py").write_text("import sys\nsys.exit(0)\n")
    (D / "ok.toml").write_text(tiny_toml("ok", Ns=(2,), arms=("ffn",), budget=640))
    dots = root / "dots"
    dots.mkdir()
    (dots / "dots.toml").write_text(tiny_toml("..", Ns=(2,), arms=("ffn",), budget=640))
    esc = root / "esc"
    esc.mkdir()
    C = root / "C"  # 4 concurrent exports to one file
    C.mkdir()
    lonely = root / "lonely"
    lonely.mkdir()
    long_out = lonely / "new1" / "new2" / ("x" * 300)
    before = {"store": _digest(S / DB_NAME), "copy": _digest(D / "copy.db")}
    E = _store(root / "E", n=2, label="TF\x1b]0;pwned\x07\x1b[2J", status="error",
               error="boom\x1b]0;owned\x07\nsecond line")  # status prints stored labels and errors
    big = _store(root / "big", n=4, points=1500)  # each curve ~30 KB of JSON: the CSV cannot fit in 64 KiB
    mnt = root / "mnt"  # a real 64 KiB tmpfs, where this machine lets us mount one
    mnt.mkdir()
    mounted = ROOT and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                                      capture_output=True).returncode == 0
    if mounted:
        (mnt / "keep.txt").write_text("kept\n")

    cases = [
        ("export-store", ["export", S, "-o", S / DB_NAME], root),
        ("report-store", ["report", S, "-o", S / DB_NAME], root),
        ("export-wal", ["export", S, "-o", S / (DB_NAME + "-wal")], root),
        ("report-shm", ["report", S, "-o", S / (DB_NAME + "-shm")], root),
        ("export-owned", ["export", S, "-o", S / "summary.json"], root),
        ("report-owned", ["report", S, "-o", S / "runs.csv"], root),
        ("export-dir", ["export", S, "-o", D / "adir"], root),
        ("report-dir", ["report", S, "-o", D / "adir"], root),
        ("export-fifo", ["export", S, "-o", D / "fifo"], root),
        ("report-fifo", ["report", S, "-o", D / "fifo"], root),
        ("export-symlink", ["export", S, "-o", D / "link.csv"], root),
        ("export-copied-store", ["export", S, "-o", D / "copy.db"], root),
        ("export-planted-tmp", ["export", S, "-o", D / "x.csv"], root),
        ("report-planted-tmp", ["report", S, "-o", D / "r.html"], root),
        ("out-too-long", ["sweep", D / "ok.toml", "--out", long_out, "--no-progress"], root),
        ("name-dotdot", ["sweep", "dots.toml", "--no-progress"], dots),
        ("set-label-escapes", ["sweep", "qstr-fig1b", "--quick", "--set", "label=../../../../../esc",
                               "--no-progress"], esc),
        ("reproduce-label-escapes", ["reproduce", "qstr-fig1b", "--quick", "--set", "label=../../esc",
                                     "--no-progress"], esc),
        ("plugin-exits", ["--import", D / "exits.py", "list"], root),
        ("threads-abc", ["sweep", D / "ok.toml", "--out", root / "T1", "--no-progress"], root,
         {"ARCHSEP_THREADS": "abc"}),
        ("threads-zero", ["sweep", D / "ok.toml", "--out", root / "T2", "--no-progress"], root,
         {"ARCHSEP_THREADS": "0"}),
    ]
    cases.append(("status-escapes", ["status", E], root))
    if mounted:
        cases += [("export-full", ["export", big, "-o", mnt / "runs.csv"], root),
                  ("report-full", ["report", big, "-o", mnt / "r.html"], root)]
    if ROOT:
        cases += [("export-devnull", ["export", S, "-o", "/dev/null"], root),
                  ("report-devnull", ["report", S, "-o", "/dev/null"], root)]
    many = _store(root / "many", n=40, points=1500)  # a 1 MB CSV: four writers really overlap
    concurrent = [(f"concurrent-{i}", ["export", many, "-o", C / "same.csv"], root) for i in range(4)]
    try:
        res = run_groups(root, [[c] for c in cases] + [concurrent])
        full_disk = sorted(p.name for p in mnt.iterdir()) if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False)
    res["full-disk-listing"] = full_disk
    return res, root, S, D, before


def test_the_store_is_never_an_output(world):
    res, root, S, D, before = world
    for cid in ("export-store", "report-store", "export-wal", "report-shm"):
        one_line(res, cid, "results store's file")
    one_line(res, "export-copied-store", "is a SQLite database")
    one_line(res, "export-owned", "summary.json archsep writes beside the store")
    one_line(res, "report-owned", "runs.csv archsep writes beside the store")
    assert _digest(S / DB_NAME) == before["store"] and _digest(D / "copy.db") == before["copy"]
    assert sorted(p.name for p in S.iterdir() if not p.name.startswith(DB_NAME)) == []  # nothing written there
    with open_store(S, create=False) as st:
        assert len(st.rows()) == 3


def test_a_directory_is_refused_and_nothing_is_left(world):
    res, root, S, D, _ = world
    one_line(res, "export-dir", "is a directory")
    one_line(res, "report-dir", "is a directory")
    assert list((D / "adir").iterdir()) == [] and not (D / "adir.tmp").exists()
    assert _leftovers(D) == ["r.html.tmp", "x.csv.tmp"]  # the two planted links, nothing of ours


def test_a_fifo_is_refused_and_stays_a_fifo(world):
    res, root, S, D, _ = world
    one_line(res, "export-fifo", "is a FIFO")
    one_line(res, "report-fifo", "is a FIFO")
    assert stat.S_ISFIFO(os.lstat(D / "fifo").st_mode)


@pytest.mark.skipif(not ROOT, reason="replacing /dev/null needs root; as a user the rename fails anyway")
def test_dev_null_is_refused_and_stays_a_device(world):
    res, *_ = world
    one_line(res, "export-devnull", "is a character device")
    one_line(res, "report-devnull", "is a character device")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not any(p.name.startswith(".null.") for p in Path("/dev").iterdir())


def test_links_are_never_followed(world):
    res, root, S, D, _ = world
    one_line(res, "export-symlink", "is a symbolic link")
    assert (D / "victim.txt").read_text() == "precious\n" and (D / "link.csv").is_symlink()
    # a symlink planted at the old predictable temporary name: the export and the report succeed,
    # the files the links point at are untouched, the links are left as they were
    for cid, out in (("export-planted-tmp", "x.csv"), ("report-planted-tmp", "r.html")):
        code, err, _ = res[cid]
        assert code == 0, (cid, err)
        assert (D / out).is_file() and not (D / out).is_symlink()
    assert (D / "x.csv").read_text().startswith("run_id,")
    assert "<!DOCTYPE html>" in (D / "r.html").read_text()
    assert (D / "victim2.txt").read_text() == "precious 2\n" and (D / "victim3.txt").read_text() == "precious 3\n"
    assert (D / "x.csv.tmp").is_symlink() and (D / "r.html.tmp").is_symlink()


def test_concurrent_exports_to_one_file_all_succeed(world):
    res, root, S, D, _ = world
    for i in range(4):
        code, err, _ = res[f"concurrent-{i}"]
        assert code == 0, err
    C = root / "C"
    assert [p.name for p in C.iterdir()] == ["same.csv"]  # no temporary file left
    lines = (C / "same.csv").read_text().splitlines()
    assert lines[0].startswith("run_id,") and len(lines) == 41


def test_a_too_long_out_leaves_no_parent_directories(world):
    res, root, *_ = world
    one_line(res, "out-too-long", "--out: cannot write to")
    assert list((root / "lonely").iterdir()) == []


def test_default_directories_never_leave_results(world):
    res, root, *_ = world
    one_line(res, "name-dotdot", "name: expected a short name")
    one_line(res, "set-label-escapes", "--set: ")
    one_line(res, "reproduce-label-escapes", "--set: ")
    assert sorted(p.name for p in (root / "dots").iterdir()) == ["dots.toml"]
    assert list((root / "esc").iterdir()) == []
    assert not (root.parent / "esc").exists()


def test_a_plugin_exiting_at_import_is_an_error_naming_it(world):
    res, root, S, D, _ = world
    one_line(res, "plugin-exits", "exits.py' called sys.exit(0)")


def test_archsep_threads_must_be_a_positive_integer(world):
    res, root, *_ = world
    one_line(res, "threads-abc", "ARCHSEP_THREADS: expected a positive integer")
    one_line(res, "threads-zero", "ARCHSEP_THREADS: expected a positive integer")
    assert not (root / "T1").exists() and not (root / "T2").exists()  # checked before the store is made


def test_a_full_disk_leaves_no_temporary_file(world):
    res, *_ = world
    if res["full-disk-listing"] is None:
        pytest.skip("cannot mount a small tmpfs here")
    one_line(res, "export-full", "No space left on device")
    one_line(res, "report-full", "No space left on device")
    assert res["full-disk-listing"] == ["keep.txt"]


def test_status_escapes_control_characters_of_a_stored_label(world):
    res, *_ = world
    code, err, out = res["status-escapes"]
    assert code == 0, err
    assert "\x1b" not in out and "\x07" not in out
    assert "TF\\x1b]0;pwned\\x07\\x1b[2J" in out and "boom\\x1b]0;owned\\x07" in out


# --- signals: the writer killed mid-write ------------------------------------------------------------
SLOW_WRITER = r"""
import signal, sys, time, types
# Ctrl-C's handler, as in a terminal: a shell starting the suite in the background (cmd &) makes its
# children ignore SIGINT, and Python then keeps it ignored, so the interrupt would never arrive
signal.signal(signal.SIGINT, signal.default_int_handler)
pkg = types.ModuleType("archsep")  # archsep.fileio alone, without importing torch: a fast start
pkg.__path__ = [sys.argv[2]]
sys.modules["archsep"] = pkg
from archsep.fileio import atomic_write

def write(f):
    f.write("x" * 200_000)
    f.flush()
    print("writing", flush=True)
    time.sleep(60)

atomic_write(sys.argv[1], write)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_write_leaves_the_old_file_and_no_temporary(tmp_path, sig):
    d = tmp_path / "out"
    d.mkdir()
    (d / "runs.csv").write_text("old\n")
    src = str(Path(atomic_write.__code__.co_filename).parent)
    p = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(d / "runs.csv"), src], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env())
    try:
        assert p.stdout.readline().strip() == "writing"
        assert len(_leftovers(d)) == 1  # the write is under way, in a temporary file
        os.kill(p.pid, sig)
        p.wait(timeout=30)
    finally:
        p.kill()
    if sig == signal.SIGTERM:
        assert p.returncode == -signal.SIGTERM  # still ends as SIGTERM would, after cleaning up
    else:
        assert p.returncode != 0 and "KeyboardInterrupt" in p.stderr.read()
    assert [f.name for f in d.iterdir()] == ["runs.csv"] and (d / "runs.csv").read_text() == "old\n"


# --- the helpers directly ----------------------------------------------------------------------------
def test_atomic_write_keeps_the_mode_and_removes_its_temporary_on_a_failing_writer(tmp_path):
    dest = tmp_path / "a.txt"
    dest.write_text("old")
    dest.chmod(0o640)

    def boom(f):
        f.write("half")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        atomic_write(dest, boom)
    assert dest.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]
    atomic_write(dest, "new")
    assert dest.read_text() == "new" and stat.S_IMODE(dest.stat().st_mode) == 0o640


def test_make_dirs_removes_what_it_created_on_failure(tmp_path):
    with pytest.raises(ArchsepError, match="out: cannot write to"):
        make_dirs(tmp_path / "a" / "b" / ("y" * 300))
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(ArchsepError, match="Not a directory"):
        make_dirs(tmp_path / "file" / "x" / "y")
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
    assert make_dirs(tmp_path / "n1" / "n2") == [tmp_path / "n1", tmp_path / "n1" / "n2"]


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "a\\b", "", "a\x1b]0;x\x07", "a\nb", "a\x00b",
                                  "x" * 201])
def test_a_default_directory_name_is_one_plain_component(name):
    with pytest.raises(ArchsepError, match="^name: "):
        check_component(name, "name")


# --- figures read no mathtext ------------------------------------------------------------------------
def test_report_draws_a_stored_dollar_label_as_text(tmp_path):
    S = _store(tmp_path / "S", n=3, label="TF $x_$")  # written by an older archsep, which accepted it
    from archsep.experiments.report import write_report

    p = write_report(S, tmp_path / "r.html")
    assert "TF $x_$" in p.read_text()
