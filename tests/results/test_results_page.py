"""docs/results/README.md is generated from the committed summaries and agrees with them, and the
prose that interprets results (the README's presets section, docs/presets.md) quotes only
numbers that a committed results file holds."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from archsep.reporting.results_page import BEGIN, END, PAGE, render, stale_docs, verdict, versus_claims, with_block

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
SCRIPT = ROOT / "scripts" / "results_page.py"


def test_the_committed_results_page_is_what_the_committed_summaries_render():
    assert (RESULTS / PAGE).read_text() == render(RESULTS), \
        "docs/results/README.md is stale: run .venv/bin/python scripts/results_page.py"


def _tiny(root: Path) -> Path:
    folder = root / "lookup-fig2-cpu"
    folder.mkdir(parents=True)
    cells = [{"label": lab, "N": N, "width": 64, "seed": s, "test_acc": acc}
             for lab, acc in (("TF-(1,64)", 0.95), ("LSTM-64", 0.25)) for N in (20, 100) for s in range(3)]
    claims = [{"kind": "control", "text": "control: TF-(1,64) learns at N=20 (mean 95.0% >= 95.0%)", "held": True,
               "verdict": "held"},
              {"kind": "control", "text": "control: LSTM-64 learns at N=20 (mean 25.0% >= 95.0%)", "held": False,
               "verdict": "did not hold"},
              {"kind": "ordering", "text": "LSTM-64 below TF-(1,64) at N=100", "held": None,
               "verdict": "no verdict"}]
    (folder / "summary.json").write_text(json.dumps({"preset": "lookup-fig2", "scale": "cpu", "cells": cells,
                                                     "baselines": [{"variant": "", "N": 20, "best_acc": 0.114}],
                                                     "claims": claims}))
    (folder / "runs.csv").write_text("label,N,seed,wall_s\n" + "".join(
        f"\"{c['label']}\",{c['N']},{c['seed']},600\n" for c in cells))
    (folder / "PROVENANCE").write_text("command: archsep reproduce lookup-fig2 --scale cpu\nmore\n")
    return folder


def test_the_page_counts_verdicts_quotes_claims_and_sums_run_time_from_the_files(tmp_path):
    _tiny(tmp_path)
    page = render(tmp_path)
    row = next(line for line in page.splitlines() if line.startswith("| [lookup-fig2-cpu]"))
    # runs, run time (12 x 600 s = 2.0 h), held / did not hold / no verdict
    assert row.endswith("| current | 12 | 2.0 h | 1 | 1 | 1 |"), row
    assert "- **did not hold**: control: LSTM-64 learns at N=20 (mean 25.0% >= 95.0%)" in page
    assert "| TF-(1,64) | 95.0% | 95.0% |" in page and "| best trivial baseline | 11.4% | – |" in page
    assert "run time by arm: LSTM-64 1.0 h, TF-(1,64) 1.0 h" in page
    assert "`command: archsep reproduce lookup-fig2 --scale cpu`" in page


def test_check_fails_when_a_summary_changes_under_the_committed_page(tmp_path):
    folder = _tiny(tmp_path)
    run = [sys.executable, str(SCRIPT), "--root", str(tmp_path)]
    assert subprocess.run(run, capture_output=True, text=True).returncode == 0
    assert subprocess.run(run + ["--check"], capture_output=True, text=True).returncode == 0
    d = json.loads((folder / "summary.json").read_text())
    d["claims"][2].update(held=True, verdict="held")  # a verdict that changed after the page was written
    (folder / "summary.json").write_text(json.dumps(d))
    r = subprocess.run(run + ["--check"], capture_output=True, text=True)
    assert r.returncode == 1 and "differs" in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == [PAGE, "lookup-fig2-cpu"]  # no temp files left


def test_a_former_folder_is_marked_and_a_verdict_is_read_from_held_when_older_summaries_lack_it(tmp_path):
    folder = _tiny(tmp_path)
    shutil.copytree(folder, tmp_path / "lookup-fig2-cpu" / "former")
    page = render(tmp_path)
    assert "| [lookup-fig2-cpu/former](lookup-fig2-cpu/former/) | `lookup-fig2` | cpu | former |" in page
    assert [verdict({"held": True}), verdict({"held": False}), verdict({"held": None})] == \
        ["held", "did not hold", "no verdict"]


def test_the_readme_and_paper_a_blocks_are_what_the_committed_summaries_render():
    assert stale_docs(RESULTS) == {}, "a generated block is stale: run .venv/bin/python scripts/results_page.py"
    for doc in ("README.md", "docs/paper_a.md"):
        assert BEGIN.split(":")[0] in (ROOT / doc).read_text()


def test_the_protocol_blocks_list_each_transformer_vs_recurrent_claim_with_its_verdict(tmp_path):
    folder = _tiny(tmp_path)
    d = json.loads((folder / "summary.json").read_text())
    d["claims"][2].update(text="[same size] no verdict: LSTM-64 did not train here (control: x); N=100: LSTM-64 below "
                               "TF-(1,64): 25.0% (upper end 30.0%) vs 95.0% (lower end 90.0%)",
                          values={"N": 100, "LSTM-64": 0.25, "TF-(1,64)": 0.95, "protocol": "same size"})
    d["claims"] += [  # a Transformer on both sides, and a claim with no protocol: neither is listed
        {"kind": "ordering", "text": "N=100: TF-(1,64) below TF-(2,64): 1.0% vs 2.0%", "held": True,
         "values": {"protocol": "same size"}},
        {"kind": "ordering", "text": "N=100: LSTM-64 below TF-(1,64): 1.0% vs 2.0%", "held": True, "values": {}},
        {"kind": "ordering", "text": "[the paper's search] N=50: TF-(1,64) below LSTM: 90.0% (upper end 95.0%) vs "
                                     "99.0% (lower end 98.0%)", "held": False,
         "values": {"N": 50, "LSTM": 0.99, "TF-(1,64)": 0.9, "protocol": "the paper's search"}},
        {"kind": "ordering", "held": None, "values": {"protocol": "same size"},  # a quoted control before the claim
         "text": "[same size] no verdict: a control did not hold (and a Transformer trains at N=100: N=100: TF-(2,64) "
                 "above the baseline (95.2%): mean 51.9%); N=100: TF-(1,64) below Mamba-64: 51.3% vs 98.9%"},
        {"kind": "ordering", "held": None, "values": {"protocol": "the paper's search"},  # a cell not run yet
         "text": "[the paper's search] no verdict (fewer than 2 seeds): N=100: Mamba below TF-(1,64): n/a "
                 "(upper end n/a) vs 96.4% (lower end 93.6%)"}]
    (folder / "summary.json").write_text(json.dumps(d))
    got = versus_claims(tmp_path)
    assert [(c["protocol"], c["N"], c["worse"], c["better"], c["verdict"], c["why"]) for c in got] == [
        ("same size", 100, "LSTM-64", "TF-(1,64)", "no verdict", "LSTM-64 did not train here (control: x)"),
        ("the paper's search", 50, "TF-(1,64)", "LSTM", "did not hold", ""),
        ("same size", 100, "TF-(1,64)", "Mamba-64", "no verdict", "a control did not hold (and a Transformer trains at "
         "N=100: N=100: TF-(2,64) above the baseline (95.2%): mean 51.9%)"),
        ("the paper's search", 100, "Mamba", "TF-(1,64)", "no verdict", "fewer than 2 seeds")]
    doc = "docs/paper_a.md"
    text = with_block(f"before\n{BEGIN.format('protocol-claims')}\nSTALE ROW\n{END.format('protocol-claims')}\nafter\n",
                      tmp_path, doc)
    assert text.startswith("before\n") and text.endswith("after\n") and "STALE ROW" not in text
    assert "| same size | 100 | LSTM-64 below TF-(1,64) | no verdict | 25.0% vs 95.0% |" in text
    assert "| the paper's search | 50 | TF-(1,64) below LSTM | did not hold | 90.0% vs 99.0% |  |" in text
    counts = with_block(f"{BEGIN.format('protocol-counts')}\n{END.format('protocol-counts')}", tmp_path, "README.md")
    assert "| [lookup-fig2-cpu](docs/results/lookup-fig2-cpu/) | same size | 2 | 0 | 0 | 2 |" in counts
    assert with_block("no block here", tmp_path, doc) == "no block here"


def test_the_lookup_block_sets_each_family_beside_itself_under_each_protocol(tmp_path):
    """paper_a.md's lookup table: a row per family (LSTM-64 under same size and LSTM under the
    search are one row), a column per scale and length, the control at the shortest length and
    "below TF" with its verdict at the others, the numbers the claims hold."""
    def control(label, mean, held):
        return {"kind": "control", "text": f"control: {label} learns at N=20", "held": held,
                "values": {"label": label, "N": 20, "mean": mean}}

    def below(protocol, N, worse, a, b, held):
        return {"kind": "ordering", "held": held, "values": {"N": N, worse: a, "TF-(1,64)": b, "protocol": protocol},
                "text": f"[{protocol}] N={N}: {worse} below TF-(1,64): {a} vs {b}"}

    for name, claims in (("lookup-fig2-cpu", [control("TF-(1,64)", 0.99, True), control("LSTM-64", 0.11, False),
                                              below("same size", 100, "LSTM-64", 0.04, 0.95, None)]),
                         ("lookup-fig2-search", [control("TF-(1,64)", 0.994, True), control("LSTM", 0.96, True),
                                                 below("the paper's search", 50, "LSTM", 0.2, 0.98, True)])):
        means = {(v.get("label"), v["N"]): v.get("mean") for v in (c["values"] for c in claims) if "label" in v}
        means |= {(k, c["values"]["N"]): x for c in claims if c["kind"] == "ordering"
                  for k, x in c["values"].items() if k not in ("N", "protocol")}
        cells = [{"label": lab, "N": N, "width": 64, "seed": 0, "test_acc": m, "best_lr": 1e-3}
                 for (lab, N), m in means.items()]
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"preset": "lookup-fig2", "claims": claims,
                                                                  "cells": cells}))
        (tmp_path / name / "PROVENANCE").write_text("command: archsep reproduce lookup-fig2\n")
    text = with_block(f"{BEGIN.format('lookup-protocols')}\nOLD\n{END.format('lookup-protocols')}", tmp_path,
                      "docs/paper_a.md")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert "N = 20 | [same size (width 64)](results/lookup-fig2-cpu/), N = 100 | [the paper's search]" in rows[0]
    assert rows[1:] == ["| TF-(1,64) | control held (99.0%) | 95.0% | control held (99.4%) | 98.0% |",
                        "| LSTM | control did not hold (11.0%) | 4.0%: below TF no verdict | control held (96.0%) | "
                        "20.0%: below TF held |"]


NUMBER = re.compile(r"(?<![\w.\-])(\d+\.\d+%?|\d+%)")


def _results_text() -> str:
    kinds = ("summary.txt", "summary.json", "PROVENANCE", "*.md", "*.txt", "*.csv")
    return "\n".join(p.read_text(errors="replace") for k in kinds for p in RESULTS.rglob(k) if p.name != PAGE) \
        + render(RESULTS)


def quoted_numbers(text: str) -> list[str]:
    """The decimals and percentages of a text (integers such as N or a seed count are left out)."""
    return NUMBER.findall(text)


def unsupported(text: str, source: str) -> list[str]:
    """The numbers of `text` that `source` does not hold as a whole number token (37.9 is not
    found in 0.3791 or 137.95)."""
    tokens = set(re.findall(r"(?<![\d.])\d+(?:\.\d+)?(?![\d])", source))
    return sorted({n for n in quoted_numbers(text) if n.rstrip("%") not in tokens})


def _presets_section() -> str:
    readme = (ROOT / "README.md").read_text()
    m = re.search(r"^## Presets\n(.*?)(?=^## )", readme, re.S | re.M)
    return m.group(1) if m else ""


@pytest.mark.parametrize("doc", ["README.md#Presets", "docs/presets.md"])
def test_every_number_the_results_prose_quotes_is_in_a_committed_results_file(doc):
    text = _presets_section() if doc.startswith("README") else (ROOT / doc).read_text()
    assert unsupported(text, _results_text()) == []


def test_the_number_check_catches_a_typed_number():
    source = _results_text()
    assert unsupported("Mamba-64 at 31.6% against 11.4%", source) == []
    assert unsupported("LSTM-64 at 37.9% and 4.4137 core-hours", source) == ["37.9%", "4.4137"]


def test_the_search_controls_block_lists_each_searched_control_with_its_winner(tmp_path):
    """paper_a.md's third block: only folders whose summary names winners (a search), each control
    with its verdict and mean, the winner's configuration it read; a control that failed reads
    "did not hold" with its own mean, an arm that was not searched says so, and a searched arm
    whose cell is not finished (no winner yet) says that instead."""
    def control(label, mean, held):
        return {"kind": "control", "text": f"control: {label} learns at N=20", "held": held,
                "verdict": {True: "held", False: "did not hold", None: "no verdict"}[held],
                "values": {"label": label, "N": 20, "mean": mean}}

    for name, summary in (
            ("dyck-fig2-search", {"winners": [{"label": "LSTM-64", "N": 20, "params": {"train.lr": 0.01}},
                                              {"label": "TF-(1,256)", "N": 20, "params": {"train.lr": 0.0003,
                                                                                        "model_params.layers": 2}}],
                                  "search": {"arms": ["LSTM-64", "TF-(1,256)", "Mamba-64"]},
                                  "claims": [control("LSTM-64", 0.995, True), control("TF-(1,256)", 0.942, False),
                                             control("TF-(1,64)", 0.98, True), control("Mamba-64", None, None)]}),
            ("dyck-fig2-cpu", {"claims": [control("LSTM-64", 0.5, False)]})):  # no search: not listed
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps({"preset": "dyck-fig2", "cells": [], **summary}))
        (tmp_path / name / "PROVENANCE").write_text("command: archsep reproduce dyck-fig2\n")
    text = with_block(f"{BEGIN.format('search-controls')}\nOLD\n{END.format('search-controls')}", tmp_path,
                      "docs/paper_a.md")
    rows = [line for line in text.splitlines() if line.startswith("| [")]
    assert rows == ["| [dyck-fig2-search](results/dyck-fig2-search/) | 20 | LSTM-64 | held | 99.5% | lr 1e-2 |",
                    "| [dyck-fig2-search](results/dyck-fig2-search/) | 20 | TF-(1,256) | did not hold | 94.2% | "
                    "lr 3e-4, layers 2 |",
                    "| [dyck-fig2-search](results/dyck-fig2-search/) | 20 | TF-(1,64) | held | 98.0% | not searched |",
                    "| [dyck-fig2-search](results/dyck-fig2-search/) | 20 | Mamba-64 | no verdict | – | "
                    "not found yet (the search not finished) |"]
