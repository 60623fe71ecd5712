"""Committed separation statements are the current analysis's: the atlas's and Figure 3's claims
and a sweep folder's separations, made again from their committed runs.csv (scripts/redraw_figures.py
--claims, scripts/resummarize_sweep.py), equal what is committed. A change to
`analysis.separation` that would reword or flip them fails here until they are made again."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("folder, sweep", [("matched-lookup", "docs/results/matched-lookup/sweep.toml"),
                                           ("mingru-vs-zoo", "examples/plugins/mingru.toml")])
def test_a_sweep_folders_separations_are_the_current_analysis(folder, sweep):
    rs = _script("resummarize_sweep")
    block = rs.block(RESULTS / folder, ROOT / sweep)
    assert block in (RESULTS / folder / "summary.txt").read_text(encoding="utf-8")
    assert "[held]" in block  # the censored arms read as separations in samples


@pytest.mark.parametrize("folder", ["atlas-cpu", "qstr-fig3", "qstr-fig3-cpu", "qstr-fig3-mse05"])
def test_claims_made_again_from_runs_csv_are_the_committed_ones(folder):
    from archsep.results import Claim, Summary

    rf = _script("redraw_figures")
    path = RESULTS / folder
    d = json.loads((path / "summary.json").read_text(encoding="utf-8"))
    summary = Summary(d["preset"], d["scale"], {k: v for k, v in d.items() if k not in rf.NOT_DATA},
                      [Claim.from_dict(c) for c in d["claims"]])
    committed = [(c.text, c.verdict) for c in summary.claims]
    rf.reanalysed(path, summary)
    again = [(c.text, c.verdict) for c in summary.claims]
    assert len(again) == len(committed)
    for now, was in zip(again, committed):  # one claim at a time, so that a failure shows which
        assert now == was
    if "atlas" in d:  # the table's numbers to rounding (a sum's last bit is not the analysis)
        assert len(summary.data["atlas"]) == len(d["atlas"])
        for now, was in zip(summary.data["atlas"], d["atlas"]):
            assert now.keys() == was.keys()
            for k, v in was.items():
                close = (pytest.approx(v, rel=1e-9, abs=1e-12) if isinstance(v, (float, list)) and v else v)
                assert now[k] == close, (now["task"], now["arch"], k)
