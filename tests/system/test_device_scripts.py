"""The prepared GPU scripts, run on the CPU (DEVICE=cpu). The search's (scripts/device/lookup_search.sh):
from two committed files of runs (FROM=) it resumes the search, trains nothing, and brings back every
run as JSON lines with the summary and the search's outcome. A sweep file's (sweep_file.sh): runs
cut by its limit come back as checkpoints that a second call goes on from."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sweep_util import tiny_toml

ROOT = Path(__file__).resolve().parents[2]


def test_the_lookup_search_script_resumes_from_carried_runs_and_brings_them_back(tmp_path):
    """Two carried files (FROM=, space-separated, imported in order): the untied search's runs and
    the runs its walk with ties added (SCALE=search-ties), whose summary is committed beside them."""
    files = [ROOT / "docs/results/lookup-fig2-search/runs.jsonl",
             ROOT / "docs/results/lookup-fig2-search-ties/runs.jsonl"]
    n = sum(1 for f in files for line in f.read_text().splitlines() if line.strip())
    env = {**os.environ, "OUT": str(tmp_path), "DEVICE": "cpu", "AT": "20", "SCALE": "search-ties",
           "FROM": " ".join(map(str, files)), "PY": sys.executable, "WORKERS": "1", "OMP_NUM_THREADS": "1"}
    p = subprocess.run(["bash", "scripts/device/lookup_search.sh", "240"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert len((tmp_path / "search.jsonl").read_text().splitlines()) == n  # every run, none trained again
    summary = json.loads((tmp_path / "summary.json").read_text())
    committed = json.loads((ROOT / "docs/results/lookup-fig2-search-ties/summary.json").read_text())
    assert [c["text"] for c in summary["claims"]] == [c["text"] for c in committed["claims"]]
    # the outcome is the whole search's as the store has it: every cell the committed walk finished
    # has the same runs, finished; the lengths not walked are not
    outcome = json.loads((tmp_path / "search.json").read_text())
    mine = {(c["label"], c["point"]["task_params.N"]): c["runs"] for c in outcome["cells"]}
    theirs = json.loads((ROOT / "docs/results/lookup-fig2-search-ties/search.json").read_text())
    done = {(c["label"], c["point"]["task_params.N"]): c["runs"] for c in theirs["cells"] if c["runs"]}
    assert not outcome["complete"] and done and set(done) <= set(mine)
    for key, runs in done.items():
        assert [r["run_id"] for r in mine[key]] == [r["run_id"] for r in runs], key
        assert all(r.get("status") not in (None, "missing") for r in mine[key]), key
    assert any(not runs for key, runs in mine.items() if key[1] == 200)
    assert (tmp_path / "machine.txt").read_text().strip()


@pytest.mark.slow
def test_the_sweep_file_script_brings_back_runs_cut_short_as_checkpoints_and_goes_on_from_them(tmp_path):
    """scripts/device/sweep_file.sh on the CPU: two runs side by side, cut by its time limit long
    before their budget, come back as their checkpoints (and a status naming their steps); a second
    call given them (CKPT=) and the first call's runs (FROM=) goes on from those steps, not from 0."""
    f = tmp_path / "s.toml"
    f.write_text(tiny_toml("cut", Ns=(3,), seeds=2, arms=("tf-b",), budget=64_000_000, threshold=1e-9))

    def call(out: Path, **extra: str) -> dict[str, int]:
        out.mkdir()
        env = {**os.environ, "OUT": str(out), "DEVICE": "cpu", "FILE": str(f), "PY": sys.executable,
               "OMP_NUM_THREADS": "1", "ARCHSEP_CHECKPOINT_S": "0", "WORKERS": "2", **extra}
        p = subprocess.run(["bash", "scripts/device/sweep_file.sh", "12"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 124, (p.stdout + p.stderr)[-3000:]  # cut by its limit
        assert "workers 2; exit 124" in (out / "sweep.log").read_text()
        status = (out / "status.txt").read_text()
        steps = {m.group(1): int(m.group(2)) for m in re.finditer(r"checkpoint (\w+) .*?: step (\d+) of", status)}
        assert list((out / "checkpoints").glob("*.pt"))  # a file per group of runs trained together
        return steps

    first = call(tmp_path / "one")
    assert len(first) == 2 and all(s > 0 for s in first.values())
    (tmp_path / "one" / "runs.jsonl").touch()  # none finished: an empty file to carry
    one = tmp_path / "one"
    second = call(tmp_path / "two", FROM=str(one / "runs.jsonl"), CKPT=str(one / "checkpoints"))
    assert set(second) == set(first) and all(second[k] > first[k] for k in first)
