"""A catalogue of bad inputs: each is a one-line error naming the field, with exit code 2.

Every case runs the real CLI (`archsep.cli.main`) in its own process with its own stdout,
stderr and exit status. To keep 40+ cases fast, the processes are forked from one interpreter
that imported archsep (and torch) once; a few cases also run as fresh `python -m archsep.cli`.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from archsep.store import DB_NAME, open_store
from sweep_util import cli, env

GOOD = """name = "bad"
seeds = 1
[base]
task = "qstr"
arch = "ffn"
task_params = { d = 4 }
train = { budget = 640, eval_size = 50 }
[grid]
"task_params.N" = [2, 3]
"""


def edit(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


# (case id, sweep-file text or None, argv (FILE = the sweep file, D = the case's directory), expected text)
TOML_CASES = [
    ("toml-syntax", "name = \n[base", ["sweep", "FILE"], "not valid TOML"),
    ("top-unknown-key", "grdi = {}\n" + GOOD, ["sweep", "FILE"], "unknown key 'grdi' (did you mean 'grid'?)"),
    ("base-unknown-key", edit('task = "qstr"', 'tsk = "qstr"'), ["sweep", "FILE"],
     "base.tsk: unknown key (did you mean 'task'?)"),
    ("grid-unknown-task-param", GOOD + '"task_params.NN" = [2]\n', ["sweep", "FILE"],
     "grid.task_params.NN[0]: unknown key 'NN' (did you mean 'N'?)"),
    ("unknown-train-key", edit("budget = 640", "budget = 640, lrr = 0.1"), ["sweep", "FILE"],
     "base.train.lrr: unknown key 'lrr' (did you mean 'lr'?)"),
    ("unknown-model-param", edit('arch = "ffn"', 'arch = "tf-b"\nmodel_params = { mlp_widht = 8 }'), ["sweep", "FILE"],
     "base.model_params.mlp_widht: unknown key 'mlp_widht' (did you mean 'mlp_width'?)"),
    ("grid-unknown-field", GOOD + "trian.lr = [0.1]\n", ["sweep", "FILE"],
     "grid.trian: unknown key 'trian' (did you mean 'train'?)"),
    ("lr-wrong-type", edit("budget = 640", 'budget = 640, lr = "fast"'), ["sweep", "FILE"],
     "base.train.lr: expected a number"),
    ("N-wrong-type", edit("[2, 3]", "[2.5, 3]"), ["sweep", "FILE"], "grid.task_params.N[0]: expected an integer"),
    ("flag-wrong-type", edit("d = 4", 'd = 4, simple = "yes"'), ["sweep", "FILE"],
     "base.task_params.simple: expected true or false"),
    ("empty-axis", edit("[2, 3]", "[]"), ["sweep", "FILE"], "grid.task_params.N: empty axis"),
    ("axis-not-a-list", edit("[2, 3]", "3"), ["sweep", "FILE"], "grid.task_params.N: expected a list of values"),
    ("seeds-zero", edit("seeds = 1", "seeds = 0"), ["sweep", "FILE"], "seeds: expected a count >= 1"),
    ("seeds-empty", edit("seeds = 1", "seeds = []"), ["sweep", "FILE"], "seeds: empty list of seeds"),
    ("seeds-negative", edit("seeds = 1", "seeds = [-1]"), ["sweep", "FILE"], "seeds: expected non-negative"),
    ("seeds-and-seed-axis", GOOD + "seed = [0, 1]\n", ["sweep", "FILE"], "seeds: given both"),
    ("unknown-task", edit('task = "qstr"', 'task = "qstrr"'), ["sweep", "FILE"],
     "task: unknown value 'qstrr' (did you mean 'qstr'?)"),
    ("unknown-arch", edit('arch = "ffn"', 'arch = "transformr"'), ["sweep", "FILE"],
     "arch: unknown value 'transformr'"),
    ("unknown-link", edit("d = 4", 'd = 4, link = "linaer"'), ["sweep", "FILE"],
     "link: unknown value 'linaer' (did you mean 'linear'?)"),
    ("q-greater-than-N", edit("d = 4", "d = 4, q = 3"), ["sweep", "FILE"], "q: must be <= N=2"),
    ("N-zero", edit("[2, 3]", "[0, 3]"), ["sweep", "FILE"], "N: must be >= 1"),
    ("negative-lr", edit("budget = 640", "budget = 640, lr = -1e-3"), ["sweep", "FILE"], "lr: must be > 0"),
    ("threshold-zero", edit("budget = 640", "budget = 640, threshold = 0.0"), ["sweep", "FILE"],
     "threshold: must be > 0"),
    ("budget-below-batch", edit("budget = 640", "budget = 10"), ["sweep", "FILE"], "budget: must be >= batch_size"),
    ("eval-every-zero", edit("budget = 640", "budget = 640, eval_every = 0"), ["sweep", "FILE"],
     "eval_every: must be >= 1"),
    ("missing-task", edit('task = "qstr"\n', ""), ["sweep", "FILE"], "task: missing"),
    ("same-run-twice", GOOD.replace("[grid]", '[[arms]]\nlabel = "A"\n[[arms]]\nlabel = "B"\n[grid]'),
     ["sweep", "FILE"], "are the same run"),
    ("bad-name", edit('name = "bad"', 'name = "my sweep"'), ["sweep", "FILE"], "name: expected a short name"),
    ("arms-not-tables", "arms = 3\n" + GOOD, ["sweep", "FILE"], "arms: expected an array of tables"),
    ("bad-separations", GOOD + '[analysis]\nseparations = ["TF"]\n', ["sweep", "FILE"], "analysis.separations"),
    ("unknown-analysis-key", GOOD + '[analysis]\nxx = "task_params.N"\n', ["sweep", "FILE"],
     "analysis.xx: unknown key (did you mean 'x'?)"),
    # issue 20: values are checked where they enter
    ("label-mathtext-dollar", edit('arch = "ffn"', 'arch = "ffn"\nlabel = "TF $x_$"'), ["sweep", "FILE"],
     "base.label: '$' is not allowed in a label"),
    ("label-escape-sequence", edit('arch = "ffn"', 'arch = "ffn"\nlabel = "TF\\u001b]0;pwned\\u0007"'),
     ["sweep", "FILE"], "base.label: expected printable text without control characters"),
    ("label-newline", GOOD.replace("[grid]", '[[arms]]\nlabel = "A\\nB"\n[grid]'), ["sweep", "FILE"],
     "arms[0].label: expected printable text"),
    ("label-nul", GOOD.replace("[grid]", '[[arms]]\nlabel = "A\\u0000B"\n[grid]'), ["sweep", "FILE"],
     "arms[0].label: expected printable text"),
    ("separation-of-one-label", GOOD + '[analysis]\nseparations = [["ffn", "ffn"]]\n', ["sweep", "FILE"],
     "analysis.separations[0]: a separation compares two different labels"),
    ("name-dotdot", edit('name = "bad"', 'name = ".."'), ["sweep", "FILE"], "name: expected a short name"),
    ("nested-1e5-deep", 'name = "deep"\nseeds = ' + "[" * 100_000 + "]" * 100_000 + "\n", ["sweep", "FILE"],
     "nested deeper than"),
]

CLI_CASES = [
    ("missing-file", None, ["sweep", "D/nope.toml"], "FILE: sweep file"),
    ("file-is-a-directory", None, ["sweep", "D/adir.toml"], "is a directory"),
    ("unknown-preset", None, ["sweep", "qstr-fig9"], "preset: unknown value 'qstr-fig9'"),
    ("unknown-executor", GOOD, ["sweep", "FILE", "--executor", "dask"], "--executor: unknown value 'dask'"),
    ("address-without-ray", GOOD, ["sweep", "FILE", "--address", "127.0.0.1:6379"], "--address: only used with"),
    ("unreachable-ray-address", GOOD, ["sweep", "FILE", "--executor", "ray", "--address", "127.0.0.1:9"],
     "--address: cannot reach a Ray cluster at '127.0.0.1:9'"),
    ("malformed-ray-address", GOOD, ["sweep", "FILE", "--executor", "ray", "--address", "nohostport"],
     "--address: expected HOST:PORT"),
    ("unwritable-out", GOOD, ["sweep", "FILE", "--out", "D/afile/sub"], "--out: cannot write to"),
    ("workers-zero", GOOD, ["sweep", "FILE", "--workers", "0"], "--workers: expected a positive integer"),
    ("unknown-device", GOOD, ["sweep", "FILE", "--device", "tpu"], "device: unknown value 'tpu'"),
    ("corrupted-store", GOOD, ["sweep", "FILE", "--out", "D/corrupt"], "store: "),
    ("foreign-store", GOOD, ["sweep", "FILE", "--out", "D/foreign"], "archsep did not create"),
    ("status-missing-dir", None, ["status", "D/nope"], "DIR: "),
    ("status-no-store", None, ["status", "D/empty"], "DIR: no results store"),
    ("status-corrupted-store", None, ["status", "D/corrupt"], "store: "),
    ("export-bad-format", None, ["export", "D/store", "--format", "xlsx"], "--format: unknown value 'xlsx'"),
    ("export-missing-output-dir", None, ["export", "D/store", "-o", "D/nodir/x.csv"], "-o: directory"),
    ("export-missing-dir", None, ["export", "D/nope"], "DIR: "),
    ("report-empty-store", None, ["report", "D/store"], "holds no finished runs"),
    ("report-foreign-store", None, ["report", "D/foreign"], "archsep did not create"),
    ("reproduce-unknown-preset", None, ["reproduce", "qstr-fig9"], "preset: unknown value 'qstr-fig9'"),
    ("only-empty", None, ["reproduce", "qstr-fig1b", "--quick", "--only", ""], "--only: expected one or more"),
    ("at-not-an-integer", None, ["reproduce", "qstr-fig3", "--quick", "--at", "1,x"], "--at: expected one or more"),
    ("at-not-planned", None, ["reproduce", "qstr-fig3", "--quick", "--at", "9", "--dry-run"],
     "--at: q=9 is not planned; preset qstr-fig3 plans q = 1, 2, 3"),
    ("at-without-axis", None, ["reproduce", "qstr-heads", "--quick", "--at", "2"], "--at: preset qstr-heads has no"),
    ("set-float-for-integer", None, ["sweep", "qstr-fig1b", "--quick", "--set", "train.budget=1e3", "--dry-run"],
     "--set: train.budget: expected an integer, got 1000.0"),
    ("set-negative-seed", None, ["sweep", "qstr-fig1b", "--quick", "--set", "seed=-5", "--dry-run"],
     "--set: seed: expected a non-negative integer"),
    ("set-label-escape-sequence", None, ["sweep", "qstr-fig1b", "--quick", "--set", "label=A\x1b]0;x\x07", "--dry-run"],
     "--set: label: the labels name"),  # labels name a preset's arms: --set label is refused outright
    ("set-label-dollar", None, ["sweep", "qstr-fig1b", "--quick", "--set", "label=TF $x_$", "--dry-run"],
     "--set: label: the labels name"),
    ("set-label-leaves-results", None, ["sweep", "qstr-fig1b", "--quick", "--set", "label=../../../../../esc"],
     "--set: label: the labels name"),
    ("construct-N-beyond-memory", None, ["construct", "qstr", "--N", str(10**29)], "N: construction 'qstr' at N="),
    ("export-empty-output", None, ["export", "D/store", "-o", ""], "-o: empty path"),
    ("report-empty-output", None, ["report", "D/store", "-o", ""], "-o: empty path"),
    ("sweep-empty-out", GOOD, ["sweep", "FILE", "--out", ""], "--out: empty path"),
]

CASES = TOML_CASES + CLI_CASES

ZYGOTE = r"""
import json, os, sys, traceback
import archsep.cli  # imported once; every case is a fresh fork of this process
out = []
for c in json.load(sys.stdin):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.chdir(c["cwd"])
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
    _, status = os.waitpid(pid, 0)
    out.append(os.waitstatus_to_exitcode(status))
print(json.dumps(out))
"""


def _setup(d: Path) -> None:
    """The files some cases point at."""
    (d / "adir.toml").mkdir()
    (d / "afile").write_text("a regular file, not a directory")
    (d / "empty").mkdir()
    (d / "corrupt").mkdir()
    (d / "corrupt" / DB_NAME).write_bytes(b"definitely not SQLite " * 50)
    (d / "foreign").mkdir()
    con = sqlite3.connect(d / "foreign" / DB_NAME)
    con.execute("CREATE TABLE customers (id INTEGER)")
    con.commit()
    con.close()
    open_store(d / "store").close()


def _digests(d: Path) -> dict[str, str]:
    return {p: hashlib.sha256((d / p / DB_NAME).read_bytes()).hexdigest() for p in ("corrupt", "foreign")}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    _setup(root)
    before = _digests(root)
    jobs = []
    for cid, text, argv, _ in CASES:
        cdir = root / cid
        cdir.mkdir()
        f = cdir / "sweep.toml"
        if text is not None:
            f.write_text(text)
        args = [str(f) if a == "FILE" else a.replace("D/", f"{root}/") for a in argv]
        jobs.append({"argv": args, "cwd": str(cdir), "stdout": str(cdir / "stdout"), "stderr": str(cdir / "stderr")})
    p = subprocess.run([sys.executable, "-c", ZYGOTE], input=json.dumps(jobs), capture_output=True, text=True,
                       env=env(), timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    codes = json.loads(p.stdout.strip().splitlines()[-1])
    res = {cid: (code, Path(j["stderr"]).read_text(), Path(j["stdout"]).read_text())
           for (cid, *_), code, j in zip(CASES, codes, jobs)}
    return res, root, before


def test_the_catalogue_is_large_enough():
    assert len(CASES) >= 25 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("cid, expected", [(c[0], c[3]) for c in CASES])
def test_bad_input_is_one_line_naming_the_field_with_exit_code_2(outcomes, cid, expected):
    res, root, _ = outcomes
    code, err, out = res[cid]
    lines = err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("archsep: error: ") and "Traceback" not in err
    assert expected in lines[0], lines[0]
    assert "\x1b" not in err and "\x07" not in err and "\x00" not in err  # values are shown escaped
    assert out == ""


def test_bad_stores_were_left_untouched_and_nothing_was_half_created(outcomes):
    res, root, before = outcomes
    assert _digests(root) == before
    assert not (root / "q-greater-than-N" / "results").exists()  # validation happens before any output
    assert not (root / "unreachable-ray-address" / "results").exists()
    assert sorted(p.name for p in (root / "set-label-leaves-results").iterdir()) == ["stderr", "stdout"]


def test_a_fresh_cli_process_agrees(tmp_path):
    r = cli("sweep", "nope.toml", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == "archsep: error: FILE: sweep file 'nope.toml' does not exist"
