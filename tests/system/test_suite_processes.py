"""The suite runs in one process per core (pytest-xdist, pyproject's `addopts`): what must not
run side by side, every test that starts a local Ray cluster, is kept in one of them."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = '''
def pytest_collection_finish(session):
    for i in session.items:
        print("ITEM", repr((i.nodeid, bool(i.get_closest_marker("ray")),
                            [m.args for m in i.iter_markers("xdist_group")])))
'''


def test_every_ray_test_and_no_other_is_in_the_one_group_that_runs_in_one_process(tmp_path):
    (tmp_path / "group_probe.py").write_text(PROBE)
    files = ["tests/system/test_ray.py", "tests/system/test_extending.py", "tests/system/test_faults.py"]
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-p", "group_probe", "--collect-only", "-q",
                        "-p", "no:cacheprovider", *files], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    items = [ast.literal_eval(line[5:]) for line in r.stdout.splitlines() if line.startswith("ITEM ")]
    ray = [(node, groups) for node, is_ray, groups in items if is_ray]
    assert len(ray) >= 2 and len(items) > len(ray)  # test_extending's two are collected even without Ray
    assert all(groups == [("ray",)] for _, groups in ray), ray
    assert all(not groups for _, is_ray, groups in items if not is_ray)
