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
from extras import needs

ROOT = Path(__file__).resolve().parents[2]
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


def run_on_ray(example: Path, block: str) -> str:
    """The doc's one-command Ray block, run; its stdout."""
    needs("ray")
    (cmd,) = commands(blocks()[block])
    p = run(cmd, example)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


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
    assert "ok 24" in run_on_ray(example, "ray.sh")
    import archsep

    df = archsep.load(example / "results" / "first-token-ray")
    assert len(df) == 24 and set(df.status) <= {"ok", "censored"}


def _size_checks(example: Path, out: str) -> None:
    import archsep

    a = archsep.analyze(example / "results" / out)  # [analysis] measure = "size", read from the store
    assert a["measure"] == "size" and len(a["cells"]) == 8  # 2 N x 2 widths x 2 seeds
    assert all(len(c["runs"]) == 2 and c["best_lr"] in (3e-3, 1e-3) for c in a["cells"])
    assert {(p["label"], p["N"]) for p in a["points"]} == {(f"MLP-{w}", N) for w in (2, 16) for N in (4, 16)}
    assert all(p["seeds"] == 2 and p["ci"][0] is not None for p in a["points"])
    wide = [p["mean"] for p in a["points"] if p["width"] == 16]
    assert min(wide) >= 0.95  # a 16-wide MLP learns to copy the first token
    with archsep.open_store(example / "results" / out, create=False) as store:
        assert {r["status"] for r in store.rows()} <= {"ok", "censored"}


@pytest.mark.slow
def test_size_example_runs_through_the_local_pool_and_its_report_draws_it(example: Path):
    outs = []
    for cmd in commands(blocks()["size.sh"]):
        p = run(cmd, example)
        assert p.returncode == 0, f"{cmd}\n{p.stderr[-2000:]}"
        outs.append(p.stdout)
    assert "16 run(s)" in outs[0]
    html = (example / "size-report.html").read_text()
    for caption in ("first-token-size: heatmaps", "first-token-size: accuracy", "first-token-size: val_curves"):
        assert f"alt='{caption}' src='data:image/png;base64," in html
    assert "Test accuracy (mean over seeds)" in html and "MLP-16@N=4:" in outs[2]
    _size_checks(example, "first-token-size")


@pytest.mark.slow
@pytest.mark.ray
def test_size_example_runs_on_ray(example: Path):
    assert "16 run(s)" in run_on_ray(example, "size-ray.sh")
    _size_checks(example, "first-token-size-ray")
