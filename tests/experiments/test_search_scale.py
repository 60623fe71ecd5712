"""A size preset's search scale ("the paper's search", experiments/size_search.py): the preset
runs its search, its cells are each family's winner at every seed, and every claim names its
protocol, the search and the winner it read; the "same size" scales name theirs."""
from __future__ import annotations

import json
from pathlib import Path

from archsep.experiments import EXPERIMENTS
from archsep.experiments.paper_a.lookup import LookupFig2
from archsep.experiments.plan import from_experiment
from archsep.experiments.reproduce import reproduce
from archsep.experiments.size_search import SAME_SIZE, SEARCH, SearchScale
from archsep.runs.launch import Launch
from archsep.sweeps.search import replay
from sweep_util import search_toml

TEXT = search_toml(name="tiny-lookup-search").replace('label = "TF"', 'label = "TF-(1,64)"')


class TinySearch(LookupFig2):
    search = SearchScale(TEXT, Ns=(6, 8), tf="TF-(1,64)", families=("LSTM",))
    scales = ("search",)


def test_a_search_scale_reads_each_familys_winner_and_its_claims_name_their_protocol(tmp_path, registered):
    registered(EXPERIMENTS, "tiny-search", TinySearch)
    sweep = from_experiment("tiny-search", "search")
    assert sweep.search is not None and sweep.preset == "tiny-search"
    assert [c.point for c in sweep.search.cells if c.label == "LSTM"] == [{"task_params.N": 6}, {"task_params.N": 8}]
    summary = reproduce("tiny-search", "search", Launch(tmp_path, workers=1, progress=False))
    d = summary.data
    assert d["protocol"] == SEARCH and d["Ns"] == [6, 8] and not d["incomplete"]
    # the cells: each family's winner and the Transformer, at every seed and length
    from archsep.store import open_store

    with open_store(tmp_path) as st:
        stored = {r.run_id: r for r in st.results()}
    w = replay(sweep.search, stored)
    for win in d["winners"]:
        c = next(i for i, cell in enumerate(sweep.search.cells)
                 if cell.label == win["label"] and cell.point["task_params.N"] == win["N"])
        assert win["trial"] == w.winner(c) and win["params"] == sweep.search.cells[c].params(w.winner(c))
        cells = [x for x in d["cells"] if x["label"] == win["label"] and x["N"] == win["N"]]
        assert sorted(x["seed"] for x in cells) == [0, 1]
        assert {x["best_lr"] for x in cells} == {win["params"]["train.lr"]}
        runs = [stored[sweep.search.config(c, win["trial"], None, s).run_id] for s in (0, 1)]
        assert sorted(x["test_acc"] for x in cells) == sorted(1 - r.test_metric for r in runs)
    # the claims: the fair protocol's (controls at 6; at 8 the baseline and LSTM below TF), each
    # naming its protocol, the search and the winners it read
    texts = [c.text for c in summary.claims]
    assert len(texts) == 4 and all(t.startswith(f"[{SEARCH}] ") for t in texts)
    assert "control: LSTM learns at N=6" in texts[1]
    lstm_control = summary.claims[1]
    mean = sum(x["test_acc"] for x in d["cells"] if x["label"] == "LSTM" and x["N"] == 6) / 2
    assert lstm_control.held == (mean >= 0.95)  # held where it learned, not held where it did not
    assert lstm_control.values["protocol"] == SEARCH and lstm_control.values["search"]["steps"] == [40, 80, 160]
    assert lstm_control.values["winners"]["LSTM"] == next(x["params"] for x in d["winners"]
                                                         if x["label"] == "LSTM" and x["N"] == 6)
    # its cost: each trial's steps (to its crossing, its stop or its last rung) against every
    # trial trained to the last rung
    cost = d["search_cost"]
    assert cost["every_trial_to_the_end"] == 2 * 4 * 160
    lstm = [c for c, cell in enumerate(sweep.search.cells) if cell.label == "LSTM"]
    assert cost["trial_steps"] == sum(min(r.samples, r.config["train"]["budget"]) // 64
                                      for c in lstm for r in w.latest[c].values())
    assert 0 < cost["trial_steps"] < cost["every_trial_to_the_end"]
    written = json.loads((tmp_path / "summary.json").read_text())
    assert [c["text"] for c in written["claims"]] == texts
    assert "protocol: the paper's search" in (tmp_path / "summary.txt").read_text()
    # the report: one section for the whole search (every rung's sweep), with the same claims
    from archsep.experiments.report import build

    with open_store(tmp_path) as st:
        _, rep = build(st)
    assert [a["sweep"] for a in rep["analyses"]] == ["tiny-search --scale search (a search: every rung)"]
    assert [c["text"] for c in rep["analyses"][0]["summary"]["claims"]] == texts
    # read again from the store alone, the same summary
    again = reproduce("tiny-search", "search", Launch(tmp_path, workers=1, progress=False), train=False)
    assert [c.to_dict() for c in again.claims] == [c.to_dict() for c in summary.claims]


def test_a_search_summary_with_one_length_done_states_the_controls_only(tmp_path, registered):
    registered(EXPERIMENTS, "tiny-search", TinySearch)
    summary = reproduce("tiny-search", "search", Launch(tmp_path, workers=1, progress=False), at=[6])
    assert summary.data["Ns"] == [6] and summary.data["incomplete"] == ["LSTM N=8", "TF-(1,64) N=8"]
    assert [c.kind for c in summary.claims] == ["control", "control"]
    assert "not finished: LSTM N=8, TF-(1,64) N=8" in (tmp_path / "summary.txt").read_text()


def test_the_same_size_scales_name_their_protocol():
    exp = LookupFig2()
    data = json.loads((Path(__file__).resolve().parents[2] / "docs/results/lookup-fig2-cpu/summary.json").read_text())
    claims = exp.claims_of(data, "cpu")
    assert claims and all(c.text.startswith(f"[{SAME_SIZE}] ") and c.values["protocol"] == SAME_SIZE
                          for c in claims)


def test_the_lookup_search_prices_itself_before_anything_runs(tmp_path):
    from sweep_util import cli

    r = cli("reproduce", "lookup-fig2", "--scale", "search", "--at", "20", "--dry-run", "--out", tmp_path / "o",
            timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "a search over 5 arm(s) x 1 cell(s): 12 trials per arm and cell, rungs at [1000, 4000, 16000]" in r.stdout
    assert "at most [12, 3, 1] trials trained at each" in r.stdout and not (tmp_path / "o").exists()
