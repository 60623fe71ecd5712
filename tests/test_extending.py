"""docs/extending.md, run exactly as written: its files and commands, from a directory outside
the package, through the local pool (2 workers) and through a real local Ray cluster."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "extending.md"
BIN = Path(sys.executable).parent


def blocks() -> dict[str, str]:
    """The doc's fenced blocks that carry a title=NAME."""
    return {m.group(1): m.group(2) for m in re.finditer(r"```\w+ title=(\S+)\n(.*?)```", DOC.read_text(), re.S)}


def commands(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture
def example(tmp_path: Path) -> Path:
    for name, text in blocks().items():
        if not name.endswith(".sh"):
            (tmp_path / name).write_text(text)
    return tmp_path


def run(cmd: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # `archsep` and `python` of this install
    args = shlex.split(cmd, comments=True)
    proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=timeout)
    done = subprocess.CompletedProcess(args, proc.returncode, out, err)
    done.pid = proc.pid  # the driver's
    return done


def test_doc_has_the_example():
    b = blocks()
    assert {"first_token.py", "first_token.toml", "run.sh", "ray.sh"} <= set(b)
    code = [line for line in b["first_token.py"].splitlines() if line.strip()]
    assert len(code) <= 40  # the promise of the page


@pytest.mark.slow
def test_example_runs_through_the_local_pool(example: Path):
    outs, pids = [], []
    for cmd in commands(blocks()["run.sh"]):
        p = run(cmd, example)
        assert p.returncode == 0, f"{cmd}\n{p.stderr[-2000:]}"
        outs.append(p.stdout)
        pids.append(p.pid)
    assert "ok" in outs[0] and "ok" in outs[1]  # check-task, check-model
    assert "24 run(s)" in outs[2] and "ok 24" in outs[2]
    assert (example / "report.html").stat().st_size > 10_000
    alpha, _, verdict = outs[4].strip().partition(" ")
    assert float(alpha) > 0 and "alpha_MLP - alpha_TF" in verdict
    # the workers ran the plugin: every run trained (none stored as an error) in pool workers
    import archsep

    df = archsep.load(example / "results" / "first-token")
    assert len(df) == 24 and set(df.status) <= {"ok", "censored"}
    with archsep.open_store(example / "results" / "first-token", create=False) as store:
        workers = {r["worker_pid"] for r in store.rows()}
    assert workers and pids[2] not in workers  # trained in the pool's workers, which imported the plugin


@pytest.mark.slow
@pytest.mark.ray
def test_example_runs_on_ray(example: Path):
    pytest.importorskip("ray")
    (cmd,) = commands(blocks()["ray.sh"])
    p = run(cmd, example)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "ok 24" in p.stdout
    import archsep

    df = archsep.load(example / "results" / "first-token-ray")
    assert len(df) == 24 and set(df.status) <= {"ok", "censored"}
