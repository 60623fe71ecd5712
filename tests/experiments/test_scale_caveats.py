"""A scale whose verdicts are not a fair test says so wherever it is named: `archsep list`,
`archsep describe`, `--dry-run`, `reproduce` and the summary's notes. Paper A's `full` scales
predate the fair protocol (1 seed, claims without controls or baselines)."""
from __future__ import annotations

import pytest

import archsep.cli.sweep as cli_sweep
from archsep.cli import main
from archsep.experiments import PRESETS
from archsep.experiments.size import NOT_FAIR_FULL, SizeExperiment
from archsep.experiments.size_search import SearchScale

PAPER_A = [n for n in PRESETS.names() if issubclass(PRESETS.get(n), SizeExperiment)]


def test_every_paper_a_full_scale_is_marked_and_no_fair_scale_is():
    assert {"lookup-fig2", "dyck-fig2", "equality-fig4", "mamba-width", "nn-fig"} <= set(PAPER_A)
    for name in PAPER_A:
        cls = PRESETS.get(name)
        assert cls.caveats.get("full") == NOT_FAIR_FULL, name
        # any other caveat is a search scale's, saying its bounds are below the paper's
        assert all(isinstance(cls().scale(sc), SearchScale) and "reduced bounds" in text
                   for sc, text in cls.caveats.items() if sc != "full"), name
        assert cls.full.seeds < 3  # what the caveat says: drop it when the full scale is made fair
    assert all(not PRESETS.get(n).caveats for n in PRESETS.names() if n not in PAPER_A)


def test_list_and_describe_say_it(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ") and line.split()}
    assert all("[full: not yet fair" in lines[n] for n in PAPER_A)
    assert all(f"{sc}: reduced bounds" in lines["lookup-fig2"] for sc in ("search", "search-steps", "search-ties"))
    assert "not yet fair" not in lines["qstr-fig1a"]
    assert main(["describe", "lookup-fig2"]) == 0
    assert f"full: {NOT_FAIR_FULL}" in capsys.readouterr().out


@pytest.mark.parametrize("scale, said", [("full", True), ("cpu", False)])
def test_the_dry_run_says_it_for_that_scale_only(monkeypatch, capsys, tmp_path, scale, said):
    monkeypatch.setattr(cli_sweep, "print_costs", lambda *a, **k: None)  # the timing itself is tested elsewhere
    assert main(["reproduce", "lookup-fig2", "--scale", scale, "--dry-run", "--out", str(tmp_path / "o")]) == 0
    assert (f"scale full: {NOT_FAIR_FULL}" in capsys.readouterr().out) is said


def test_the_summary_notes_say_it():
    exp = PRESETS.get("lookup-fig2")()
    assert f"scale full: {NOT_FAIR_FULL}" in exp.summarize([], "full").data["notes"]
    assert not any("not yet the fair" in n for n in exp.summarize([], "cpu").data["notes"])
