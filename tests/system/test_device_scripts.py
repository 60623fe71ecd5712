"""The prepared GPU script of the search (scripts/device/lookup_search.sh), run on the CPU
(DEVICE=cpu): from the committed N = 20 runs (FROM=) it resumes the search, trains nothing, and
brings back every run as JSON lines with the summary and the search's outcome."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_lookup_search_script_resumes_from_carried_runs_and_brings_them_back(tmp_path):
    runs = ROOT / "docs/results/lookup-fig2-search/runs.jsonl"
    n = sum(1 for line in runs.read_text().splitlines() if line.strip())
    env = {**os.environ, "OUT": str(tmp_path), "DEVICE": "cpu", "AT": "20", "FROM": str(runs), "PY": sys.executable,
           "WORKERS": "1", "OMP_NUM_THREADS": "1"}
    p = subprocess.run(["bash", "scripts/device/lookup_search.sh", "240"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert len((tmp_path / "search.jsonl").read_text().splitlines()) == n  # every run, none trained again
    summary = json.loads((tmp_path / "summary.json").read_text())
    committed = json.loads((ROOT / "docs/results/lookup-fig2-search/summary.json").read_text())
    assert [c["text"] for c in summary["claims"]] == [c["text"] for c in committed["claims"]]
    # the outcome is the whole search's as the store has it: the lengths carried are done, the rest not
    outcome = json.loads((tmp_path / "search.json").read_text())
    done = set(committed["Ns"])
    assert not outcome["complete"] and {c["point"]["task_params.N"] for c in outcome["cells"]} >= done
    for c in outcome["cells"]:
        finished = all(r.get("status") not in (None, "missing") for r in c["runs"]) and c["runs"]
        assert bool(finished) is (c["point"]["task_params.N"] in done), c["point"]
    assert (tmp_path / "machine.txt").read_text().strip()
