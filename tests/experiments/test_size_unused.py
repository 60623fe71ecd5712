"""A search scale leaves out the cells no claim can use (`experiments/size_unused.py`): an arm's
cells beyond its failed control, where every claim on it reads "no verdict" whatever it scores;
never a cell a verdict can change with, nor one whose control is not decided yet."""
from __future__ import annotations

from archsep.cli import main
from archsep.experiments import EXPERIMENTS
from archsep.experiments.paper_a.lookup import LookupFig2
from archsep.experiments.reproduce import reproduce
from archsep.experiments.size_search import SEARCH, SearchScale
from archsep.experiments.size_unused import unused
from archsep.runs.launch import Launch
from archsep.store import open_store
from test_search_scale import TinySearch


def _data(preset: str, acc: dict, Ns: tuple, missing: tuple = ()) -> dict:
    """A search summary's data for `preset`: every arm at every N in `Ns` (test accuracy
    acc[(label, N)], default 0.999, on three seeds; the extra test set the same), none at the
    (label, N) in `missing`; the best trivial baseline 0.5."""
    s = EXPERIMENTS.get(preset)().search
    cells = [{"label": lab, "N": N, "width": 0, "seed": k, "best_lr": 1e-3,
              "test_acc": acc.get((lab, N), 0.999), "extra_acc": {"x": acc.get((lab, N), 0.999)}}
             for lab in ((s.tf,) if s.tf else ()) + s.families for N in Ns for k in range(3)
             if (lab, N) not in missing]
    variants = {lab.split("[")[-1].rstrip("]") if "[" in lab else "" for lab in s.families}
    return {"cells": cells, "Ns": list(Ns), "protocol": SEARCH, "winners": [],
            "baselines": [{"variant": v, "N": N, "best_acc": 0.5} for v in variants for N in Ns],
            "search": {"trials": 5, "steps": [1000, 5000, 20000], "keep": 0.5, "seed": 0}}


def _unused(preset: str, acc: dict, Ns: tuple, cells: list, missing: tuple = ()) -> list:
    return unused(EXPERIMENTS.get(preset)(), _data(preset, acc, Ns, missing), "search", cells)


def test_an_arm_whose_control_failed_is_not_run_at_the_longer_lengths_its_claims_read():
    """Lookup: the LSTM's control failed at N = 20 (mean 50%), so "LSTM below TF-(1,64)" at 200
    reads no verdict whatever it scores there: left out. Mamba passed its control, and the
    Transformer's cell is the other side of every comparison: both train."""
    cells = [("LSTM", 200), ("Mamba", 200), ("TF-(1,64)", 200)]
    assert _unused("lookup-fig2", {("LSTM", 20): 0.5}, (20,), cells) == [("LSTM", 200)]
    # every arm's control passed: nothing is left out
    assert _unused("lookup-fig2", {}, (20,), cells) == []


def test_a_control_not_decided_yet_leaves_nothing_out():
    """The LSTM's cell at N = 20 not finished (a search still at its first length, or a rung added
    since): it may pass, and then its claims at 200 read the cell, which trains."""
    assert _unused("lookup-fig2", {}, (20,), [("LSTM", 200)], missing=(("LSTM", 20),)) == []


class _LongestOnly(LookupFig2):
    """Lookup with its search's claims at the longest length alone (its rule before 2026-12-07)."""

    def claims(self, table: dict, s):
        if isinstance(s, SearchScale) and len(s.Ns) >= 2:
            return self.versus(s, s.tf, s.families)
        return super().claims(table, s)


def test_a_cell_no_claim_reads_is_the_figures_and_trains(registered):
    """Where a preset's claims read the longest length alone, a length between (here 50, with 20
    and 400 finished) is read by none, so it is not "unusable" but the figure's: it trains even
    where the arm's control failed. Lookup's search claims at every length (since 2026-12-07), so
    there the same cell is read, by claims that cannot reach a verdict: left out."""
    registered(EXPERIMENTS, "lookup-longest", _LongestOnly)
    done, failed = (20, 400), {("LSTM", 20): 0.5}
    assert _unused("lookup-longest", failed, done, [("LSTM", 50)], missing=(("LSTM", 400),)) == []
    assert _unused("lookup-fig2", failed, done, [("LSTM", 50)], missing=(("LSTM", 400),)) == [("LSTM", 50)]


def test_a_failed_arm_that_another_arms_claim_compares_with_still_trains():
    """Dyck: TF-(1,256) failed its control; at N = 100 it is the wider side of "TF-(1,64) below
    TF-(1,256)", gated on TF-(1,64)'s control, so its result there can change that verdict: it
    trains. At 200 only its own claims read it ("below LSTM-64", gated on its control): left out."""
    failed = {("TF-(1,256)", 20): 0.9}
    assert _unused("dyck-fig2", failed, (20,), [("TF-(1,256)", 100), ("TF-(1,256)", 200)]) == [("TF-(1,256)", 200)]


def test_equalitys_failed_eq_one_control_leaves_its_longer_cells_out_and_no_other():
    failed = {("Mamba-64 [eq-one]", 20): 0.687}
    cells = [(lab, 100) for lab in EXPERIMENTS.get("equality-fig4")().search.families]
    assert _unused("equality-fig4", failed, (20,), cells) == [("Mamba-64 [eq-one]", 100)]


class _FailedLSTM(TinySearch):
    """The tiny lookup search with a control the LSTM cannot pass (a level above 100%) and one the
    Transformer cannot fail (0%): its runs are too short to learn."""

    def control(self, label, N, level=0.95):
        return super().control(label, N, 1.01 if label == "LSTM" else 0.0)


def test_a_search_trains_no_cell_it_leaves_out_and_its_verdicts_are_those_of_training_it(tmp_path, registered,
                                                                                       capsys):
    """End to end: the search at its first length, then at the second; the LSTM's control
    failed, so its cell at N = 8 is not trained (no run of it in the store), the summary says
    so apart from the cells not finished, and every verdict is the one the summary gives after
    `every_cell` trained it."""
    registered(EXPERIMENTS, "tiny-failed", _FailedLSTM)
    launch = Launch(tmp_path, workers=1, progress=False)
    reproduce("tiny-failed", "search", launch, at=[6])
    # --dry-run prices the search as it will run: without the cell
    out = ["reproduce", "tiny-failed", "--scale", "search", "--at", "8", "--dry-run", "--out", str(tmp_path)]
    capsys.readouterr()
    assert main(out) == 0
    priced = capsys.readouterr().out
    assert "not run: LSTM N=8: a positive control their claims rest on failed" in priced and " 2 run(s)" in priced
    assert main([*out, "--every-cell"]) == 0
    priced = capsys.readouterr().out
    assert "not run" not in priced and " 6 run(s)" in priced
    left = reproduce("tiny-failed", "search", launch, at=[8])
    with open_store(tmp_path) as st:
        at8 = {r.config["label"] for r in st.results() if r.config["task_params"]["N"] == 8}
    assert at8 == {"TF-(1,64)"}
    assert [c["cell"] for c in left.data["not_run"]] == ["LSTM N=8"] and left.data["incomplete"] == []
    text = (tmp_path / "summary.txt").read_text()
    assert "not run (the note says why): LSTM N=8" in text and "not finished" not in text
    [below] = [c for c in left.claims if "N=8: LSTM below TF-(1,64)" in c.text]
    assert below.held is None and "LSTM did not train here" in below.text
    trained = reproduce("tiny-failed", "search", launch, at=[8], every_cell=True)
    assert trained.data["not_run"] == [] and trained.data["incomplete"] == []
    assert [c.held for c in trained.claims] == [c.held for c in left.claims]
