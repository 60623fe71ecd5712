"""A search scale run a part at a time: a committed sweep file that says it is a preset's search
scale with an arm left out, at some lengths, must plan that scale's own runs (every trial at every
rung, and the winners' seeds), so that `archsep reproduce PRESET --scale SCALE` reuses what the file
trained. A change to the scale's space, rungs or trial draw that the file does not follow fails
here, not sessions later as runs the preset trains again."""
from __future__ import annotations

from pathlib import Path

import pytest

from archsep.experiments.plan import from_experiment
from archsep.sweeps.file import Sweep, load_file

ROOT = Path(__file__).resolve().parents[2]
CAL = "docs/results/lookup-search-calibration"

# (file, preset, scale, the lengths it runs, the arm labels it plans)
PARTS = [
    (f"{CAL}/search-steps-lstm.toml", "lookup-fig2", "search-steps", [20], {"LSTM", "TF-(1,64)"}),
    (f"{CAL}/search-steps-lstm-n50.toml", "lookup-fig2", "search-steps", [50], {"LSTM", "TF-(1,64)"}),
    (f"{CAL}/search-steps-lstm-n100.toml", "lookup-fig2", "search-steps", [100], {"LSTM", "TF-(1,64)"}),
    (f"{CAL}/search-paper-dss-n20.toml", "lookup-fig2", "search-paper", [20], {"DSS", "TF-(1,64)"}),
    (f"{CAL}/search-steps-ties-mamba-n100.toml", "lookup-fig2", "search-steps-ties", [100], {"Mamba", "TF-(1,64)"}),
]


def run_ids(s: Sweep) -> dict[str, str]:
    """Every run the sweep can train, id -> arm label: each cell's trials at every rung with the
    trials' seed, at the last rung with every seed (a winner's), and the runs it starts with."""
    assert s.search is not None
    out = {c.run_id: c.label for c in s.configs}
    se = s.search
    for c, cell in enumerate(se.cells):
        for t in range(len(cell.flats)):
            for r in range(len(se.steps)):
                cfg = se.config(c, t, r)
                out[cfg.run_id] = cfg.label
            for seed in se.seeds:
                cfg = se.config(c, t, None, seed)
                out[cfg.run_id] = cfg.label
    return out


@pytest.mark.parametrize("path, preset, scale, at, labels", PARTS, ids=[p[0].rsplit("/", 1)[1] for p in PARTS])
def test_a_search_part_plans_the_scales_own_runs(path, preset, scale, at, labels):
    part = run_ids(load_file(ROOT / path))
    whole = run_ids(from_experiment(preset, scale, at=at))
    assert set(part.values()) == labels
    assert set(part) <= set(whole), f"{len(set(part) - set(whole))} of {len(part)} runs are not the scale's"
    # the arms it keeps are whole: every run of theirs the scale plans at these lengths is the file's
    assert {i for i, lab in whole.items() if lab in labels} == set(part)


def test_the_check_fails_for_a_part_that_has_drifted(tmp_path):
    """A file whose space differs from the scale's in one value (lr 1e-2 left out) plans other
    trials: the check above would fail for it."""
    text = (ROOT / PARTS[2][0]).read_text().replace('"train.lr" = [1e-2, 3e-3,', '"train.lr" = [3e-3,')
    assert '"train.lr" = [3e-3,' in text
    (tmp_path / "drift.toml").write_text(text)
    part = run_ids(load_file(tmp_path / "drift.toml"))
    whole = run_ids(from_experiment("lookup-fig2", "search-steps", at=[100]))
    assert not set(part) <= set(whole)


def test_the_winners_runs_carried_to_a_gpu_are_the_searchs_own():
    """winners-lstm-n100.toml lists, as plain runs, the search-steps scale's LSTM winner at N = 100
    with seeds 1 and 2 and TF-(1,64)'s three seeds, for a lent GPU: each must be a run the scale
    plans at its last rung with that seed (the same run id), or the search would train it again."""
    s = load_file(ROOT / CAL / "winners-lstm-n100.toml")
    whole = from_experiment("lookup-fig2", "search-steps", at=[100])
    se = whole.search
    assert se is not None
    last = {se.config(c, t, None, seed).run_id: (cell.label, seed)
            for c, cell in enumerate(se.cells) for t in range(len(cell.flats)) for seed in se.seeds}
    got = sorted(last[c.run_id] for c in s.configs)
    assert got == [("LSTM", 1), ("LSTM", 2), ("TF-(1,64)", 0), ("TF-(1,64)", 1), ("TF-(1,64)", 2)]
    assert {c.train.budget // c.train.batch_size for c in s.configs} == {se.steps[-1]}
