"""The Ray executor on a real local Ray cluster (127.0.0.1), started once for this module."""
from __future__ import annotations

import os

import pytest
from extras import needs

ray = needs("ray")

from archsep.sweeps import file as sw  # noqa: E402
from archsep.runs.executors import RayExecutor  # noqa: E402
from archsep.runs.runner import run_configs  # noqa: E402
from archsep.store import open_store  # noqa: E402
from sweep_util import cli, tiny_toml, write  # noqa: E402

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def cluster():
    """A local cluster started the way `--executor ray` without --address starts one."""
    assert not ray.is_initialized()
    ex = RayExecutor(address=None, workers=2)
    assert ex.started_here and ex.cpus >= 1
    yield ray.get_runtime_context().gcs_address
    ex.close()
    assert not ray.is_initialized()


def test_a_sweep_runs_on_the_local_ray_cluster_and_only_the_driver_writes(cluster, tmp_path):
    s = sw.parse(tiny_toml("ray-inproc", Ns=(2, 3), seeds=2))
    results = run_configs(s.configs, tmp_path, workers=2, progress=False, executor="ray", sweep=s)
    assert len(results) == 8 and {r.status for r in results} <= {"ok", "censored"}
    with open_store(tmp_path) as st:
        rows = st.rows()
        assert st.status()["pending"] == 0
    assert len(rows) == 8
    assert all(r["worker_pid"] != os.getpid() for r in rows)  # computed in Ray workers ...
    assert ray.is_initialized()  # ... on the cluster this module started, which stays up


def test_the_cli_connects_to_a_running_cluster_by_address(cluster, tmp_path):
    f = write(tmp_path / "s.toml", tiny_toml("ray-cli", Ns=(2, 3)))
    out = tmp_path / "out"
    r = cli("sweep", f, "--out", out, "--executor", "ray", "--address", cluster, "--workers", "2", timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "ray-cli: 4 run(s)" in r.stdout
    with open_store(out) as st:
        rows = st.rows()
    assert len(rows) == 4 and all(row["host"] for row in rows)
    assert f"ray ({cluster})" in r.stderr  # the progress line names the cluster it ran on


def test_ray_gives_the_same_stored_numbers_as_one_local_worker(cluster, tmp_path):
    """Faults 7: a run's numbers do not depend on the executor or on how runs were spread."""
    import sqlite3

    f = write(tmp_path / "s.toml", tiny_toml("spread", Ns=(2, 3), seeds=4, budget=3200, threshold=0.3))
    s = sw.parse(f.read_text())
    rows = {}
    for name, kw in (("local", {"workers": 1}), ("ray", {"workers": 2, "executor": "ray"})):
        run_configs(s.configs, tmp_path / name, progress=False, sweep=s, **kw)
        con = sqlite3.connect(tmp_path / name / "archsep.db")
        rows[name] = {r[0]: r[1:] for r in con.execute(
            "SELECT run_id, status, samples, final_metric, best_metric, curve, train_curve FROM runs")}
        con.close()
    assert len(rows["local"]) == 16 and rows["local"] == rows["ray"]


@pytest.mark.slow
def test_ray_tasks_stop_when_the_driver_is_killed(cluster, tmp_path):
    """Faults 1: kill -9 of a driver whose tasks run on a cluster: its tasks stop within 10 s."""
    import signal
    import subprocess
    import time

    from sweep_util import ARCHSEP, env

    f = write(tmp_path / "s.toml", tiny_toml("ray-orphans", Ns=tuple(range(2, 10)), seeds=2, budget=64_000,
                                             threshold=0.001))

    def busy_workers() -> set[int]:  # Ray names a worker's process after the task it runs
        out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
        return {int(line.split()[0]) for line in out.splitlines()[1:] if "ray::run_batch" in line}

    p = subprocess.Popen([*ARCHSEP, "sweep", str(f), "--out", str(tmp_path / "out"), "--executor", "ray",
                          "--address", cluster, "--workers", "2", "--no-progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    deadline = time.time() + 120
    while time.time() < deadline and not busy_workers() and p.poll() is None:
        time.sleep(0.5)
    assert busy_workers(), "no Ray task started"
    time.sleep(1)
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=30)
    deadline = time.time() + 10
    while busy_workers() and time.time() < deadline:
        time.sleep(0.5)
    assert not busy_workers()


def test_a_search_on_ray_draws_trains_and_promotes_as_on_the_local_pool(cluster, tmp_path):
    """A search's trials, promotions and winners (issue 52): the same on the cluster as on one
    local worker, because promotions read only stored results, which do not depend on the executor."""
    from archsep.runs.launch import Launch
    from archsep.runs.search import run_search
    from sweep_util import search_toml

    s = sw.parse(search_toml(name="search-ray"))
    outs = {}
    for name, kw in (("local", {"workers": 1}), ("ray", {"workers": 2, "executor": "ray"})):
        out = run_search(s, Launch(tmp_path / name, progress=False, **kw).check())
        for cell in out["cells"]:
            for r in cell["runs"] + [t["last"] for t in cell.get("trials", [])]:
                r.pop("wall_s", None)
        outs[name] = out
    assert outs["local"] == outs["ray"]
    assert {c["winner"] for c in outs["ray"]["cells"] if c["searched"]} <= {0, 1, 2, 3}
