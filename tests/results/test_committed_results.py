"""A bar over the committed paper-A results (docs/results/<preset>-<scale>/): every size preset's
folder at the cpu and paper-n scales is one protocol (one step budget and one learning-rate grid
per N across its architectures), every cell has at least 3 seeds, and every claim other
than a control names the control it depends on (and a baseline claim its baseline). A folder
still holding a former protocol's run is listed in FORMER and must fail the bar (so the list
cannot outlive the rerun that retires it)."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from archsep.experiments import PRESETS
from archsep.experiments.size import SizeExperiment

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
FAIR_SCALES = ("cpu", "paper-n")
# run under the protocol the issue "paper A as a fair test" retired; rerun under the fair one
FORMER: set[str] = set()


def _folders() -> list[Path]:
    out = []
    for summary in sorted(RESULTS.glob("*/summary.json")):
        d = json.loads(summary.read_text())
        name = d.get("preset")
        if name in PRESETS.names() and issubclass(PRESETS.get(name), SizeExperiment) and d.get("scale") in FAIR_SCALES:
            out.append(summary.parent)
    return out


def problems(d: dict) -> list[str]:
    """What keeps a size summary from being a fair test (empty: none)."""
    out = []
    if d.get("unequal") != []:
        out.append(f"the arms were not trained alike: {d.get('unequal', 'not recorded')}")
    budgets: dict = defaultdict(set)
    grids: dict = defaultdict(set)
    seeds: dict = defaultdict(set)
    for c in d["cells"]:
        where = c["N"]
        budgets[where].add(c.get("budget_steps", json.dumps(d.get("budget"))))
        grids[where].add(tuple(sorted(c.get("lr_grid") or (r["lr"] for r in c["runs"]))))
        seeds[(c["label"], c["N"])].add(c["seed"])
    out += [f"{w}: step budgets {sorted(map(str, b))}" for w, b in budgets.items() if len(b) > 1]
    if not isinstance(d.get("budget"), int):
        out.append(f"budget {d.get('budget')!r}: more than one")
    out += [f"{w}: lr grids {sorted(g)}" for w, g in grids.items() if len(g) > 1]
    out += [f"{k}: {len(s)} seed(s)" for k, s in seeds.items() if len(s) < 3]
    for c in d["claims"]:
        values = c.get("values") or {}
        if c["kind"] != "control" and "control" not in values:
            out.append(f"claim names no control: {c['text']}")
        if c["kind"] == "baseline" and values.get("baseline") is None:
            out.append(f"baseline claim without its baseline: {c['text']}")
    return out


def test_the_bar_sees_every_committed_paper_a_folder_and_the_former_ones_are_still_there():
    names = {p.name for p in _folders()}
    assert {"lookup-fig2-cpu", "dyck-fig2-cpu", "nn-fig-cpu", "equality-fig4-cpu", "mamba-width-cpu"} <= names
    assert FORMER <= names, f"rerun and retired: remove {sorted(FORMER - names)} from FORMER"


@pytest.mark.parametrize("folder", _folders(), ids=lambda p: p.name)
def test_a_committed_paper_a_result_is_one_protocol_with_controls_and_three_seeds(folder):
    found = problems(json.loads((folder / "summary.json").read_text()))
    if folder.name in FORMER:
        assert found, f"{folder.name} passes the bar now: remove it from FORMER"
    else:
        assert found == [], found


def test_the_bar_fails_a_result_given_two_budgets_two_grids_two_seeds_or_a_claim_without_control():
    d = json.loads((RESULTS / "dyck-fig2-cpu" / "summary.json").read_text())
    assert problems(d) == []

    def broken(change) -> list[str]:
        e = json.loads(json.dumps(d))
        change(e)
        return problems(e)

    def budget(e):
        e["cells"][0]["budget_steps"] = 4000

    def grid(e):
        e["cells"][0]["lr_grid"] = [1e-3]

    def seeds(e):
        e["cells"] = [c for c in e["cells"] if not (c["label"] == "LSTM-64" and c["seed"] == 2)]

    def claim(e):
        next(c for c in e["claims"] if c["kind"] == "ordering")["values"].pop("control")

    def unequal(e):
        e["unequal"] = ["LSTM-w: steps 6000 (the scale's: 2000)"]

    for change, what in ((budget, "step budgets"), (grid, "lr grids"), (seeds, "seed(s)"),
                         (claim, "names no control"), (unequal, "not trained alike")):
        found = broken(change)
        assert len(found) >= 1 and any(what in f for f in found), (what, found)


@pytest.mark.parametrize("folder", _folders(), ids=lambda p: p.name)
def test_a_committed_paper_a_summary_states_the_claims_the_current_code_makes_of_its_cells(folder):
    """The committed claims are what `SizeExperiment.claims_of` says of the committed cells and
    baselines now: a change to a claim's logic or wording fails here until the committed
    summaries are made again (`scripts/redraw_figures.py --text --claims`)."""
    d = json.loads((folder / "summary.json").read_text())
    exp = PRESETS.get(d["preset"])()
    now = [(c.text, c.verdict) for c in exp.claims_of(d, d["scale"])]
    assert now == [(c["text"], c["verdict"]) for c in d["claims"]]


def test_the_claims_check_sees_a_changed_verdict():
    d = json.loads((RESULTS / "dyck-fig2-cpu" / "summary.json").read_text())
    exp = PRESETS.get("dyck-fig2")()
    for c in d["cells"]:
        if c["label"] == "TF-(2,64)" and c["N"] == 100:
            c["test_acc"] = 0.999  # the Transformer would now clear the depth counter at N = 100
    assert [c.verdict for c in exp.claims_of(d, "cpu")] != [c["verdict"] for c in d["claims"]]
