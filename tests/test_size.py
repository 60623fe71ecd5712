"""Size measurement (paper A): per-cell training with an lr grid, early stop, validation and
test sets from their own seeds, the resumable cell store, and the paper-A presets' plumbing."""
from __future__ import annotations

import json

import pytest
import torch

from archsep.experiments import size
from archsep.errors import ArchsepError
from archsep.experiments import PRESETS
from archsep.experiments.paper_a.figures import SizePreset, SizeScale, lstm
from archsep.experiments.size import SizeCell, measure_cell, run_cells


def tiny(**kw) -> SizeCell:
    base = dict(task="index-lookup", arch="lstm", label="LSTM-8", N=4, width=8,
                task_params={"vocab": 4, "min_length": 2}, model_params={"hidden": 8},
                lrs=(1e-2, 1e-3), steps=30, eval_every=10, val_size=100, test_size=200, device="cpu")
    return SizeCell(**{**base, **kw})


def test_cell_runs_the_lr_grid_and_tests_the_selected_model():
    r = measure_cell(tiny())
    assert r["status"] == "ok", r["error"]
    assert [x["lr"] for x in r["runs"]] == [1e-2, 1e-3]
    best = max(r["runs"], key=lambda x: x["val_acc"])
    assert r["val_acc"] == best["val_acc"] and r["best_lr"] in (1e-2, 1e-3)
    for run in r["runs"]:
        assert [s for s, _ in run["curve"]] == list(range(10, run["steps"] + 1, 10))
        assert all(0 <= a <= 1 for _, a in run["curve"])
    assert 0 <= r["test_acc"] <= 1 and r["params"] > 0 and r["state_size"] == 2 * 8
    again = measure_cell(tiny())
    assert again["test_acc"] == r["test_acc"] and again["runs"] == r["runs"]  # a seed decides every number


def test_early_stop_at_target_validation_accuracy():
    # N=1: the index always points at the only symbol, so the task is learnable in a few steps
    r = measure_cell(tiny(N=1, task_params={"vocab": 2, "min_length": 1}, lrs=(3e-2,), steps=400, eval_every=5))
    assert r["reached"] and r["runs"][0]["status"] == "ok"
    assert r["steps"] < 400 and r["runs"][0]["curve"][-1][1] >= 0.99
    assert r["test_acc"] >= 0.95


def test_validation_and_test_sets_are_fresh_and_at_length_N(monkeypatch):
    seen: list[tuple[int, tuple]] = []
    from archsep.tasks.index_lookup import IndexLookup

    orig = IndexLookup.sample_test

    def spy(self, n, generator):
        b = orig(self, n, generator)
        seen.append((n, tuple(b.x.shape)))
        spy.batches.append(b)
        return b

    spy.batches = []
    monkeypatch.setattr(IndexLookup, "sample_test", spy)
    r = measure_cell(tiny(N=6, lrs=(1e-2,)))
    assert r["status"] == "ok"
    (nv, sv), (nt, st) = seen
    assert (nv, nt) == (100, 200) and sv[1] == st[1] == 7  # N symbols + the query token
    val, test = spy.batches
    assert not torch.equal(val.x[:100], test.x[:100])  # different seeds


def test_cell_errors_are_recorded_not_raised(monkeypatch):
    def boom(cell, lr):
        raise RuntimeError("kaput")

    monkeypatch.setattr(size, "train_lr", boom)
    r = measure_cell(tiny())
    assert r["status"] == "error" and "kaput" in r["error"] and r["test_acc"] is None


def test_bad_cells_fail_at_construction_naming_the_field():
    with pytest.raises(ArchsepError, match="lrs"):
        tiny(lrs=())
    with pytest.raises(ArchsepError, match="steps"):
        tiny(steps=0)
    with pytest.raises(ArchsepError, match="target"):
        tiny(target=1.5)
    with pytest.raises(ArchsepError, match="vocab"):
        tiny(task_params={"vocab": 1})
    with pytest.raises(ArchsepError, match="hidden"):
        tiny(model_params={"hidden": 0})


def test_cell_ids_depend_on_what_is_measured_not_on_the_device():
    assert tiny().cell_id == tiny(device="auto").cell_id
    assert tiny().cell_id != tiny(N=5).cell_id != tiny(lrs=(1e-2,)).cell_id
    c = tiny()
    assert SizeCell.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_run_cells_stores_and_resumes(tmp_path, monkeypatch):
    cells = [tiny(steps=10, lrs=(1e-2,)), tiny(N=3, steps=10, lrs=(1e-2,))]
    first = run_cells(cells, tmp_path, workers=1, progress=False)
    assert [r["N"] for r in first] == [4, 3]
    lines = (tmp_path / "cells.jsonl").read_text().splitlines()
    assert len(lines) == 2

    def no_work(cell, on_lr=None):
        raise AssertionError("a stored cell was recomputed")

    monkeypatch.setattr(size, "measure_cell", no_work)
    again = run_cells(cells, tmp_path, workers=1, progress=False)
    assert [r["test_acc"] for r in again] == [r["test_acc"] for r in first]


# --- presets --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["lookup-fig2", "dyck-fig2", "mamba-width", "equality-fig4"])
def test_paper_a_presets_build_their_grids(name):
    p = PRESETS.get(name)()
    for quick in (True, False):
        cells = p.cells(quick, "cpu")
        assert cells and len({c.cell_id for c in cells}) == len(cells)
        assert all(c.test_size >= 1000 for c in cells)
    full = p.cells(False, "cpu")
    assert max(c.N for c in full) == 400
    assert len(p.configs(True, "cpu")) == sum(len(c.lrs) for c in p.cells(True, "cpu"))


class TinyPreset(SizePreset):
    task = "dyck"
    quick = full = SizeScale(Ns=(4, 6), archs=(lstm((4, 8)),), lrs=(1e-2,), steps=10, eval_every=5,
                             val_size=50, test_size=100)

    def claims(self, table, s):
        return [{"text": "LSTM-8 at N=6 is measured", "held": self.acc(table, "LSTM-8", 6, 8) is not None}]


def test_reproduce_runs_a_size_preset_end_to_end(tmp_path, monkeypatch):
    from archsep.experiments.reproduce import reproduce, text_summary

    monkeypatch.setitem(PRESETS._items, "tiny-size", TinyPreset)
    TinyPreset.registry_name = "tiny-size"
    s = reproduce("tiny-size", quick=True, out=tmp_path, workers=1, device="cpu", progress=False)
    assert s["preset"] == "tiny-size" and s["n_cells"] == 4 and s["n_errors"] == 0
    assert s["claims"] == [{"text": "LSTM-8 at N=6 is measured", "held": True}]
    for f in ("runs.csv", "summary.json", "summary.txt", "heatmaps.png", "heatmaps.svg", "val_curves.png",
              "val_curves.svg", "cells.jsonl"):
        assert (tmp_path / f).exists(), f
    rows = (tmp_path / "runs.csv").read_text().splitlines()
    assert rows[0].startswith("label,arch,task,N,width") and len(rows) == 5
    assert json.loads((tmp_path / "summary.json").read_text())["claims"][0]["held"] is True
    txt = text_summary(TinyPreset, s)
    assert "LSTM-4" in txt and "LSTM-8" in txt and "claim HELD" in txt


def test_claims_read_the_right_cells():
    p = PRESETS.get("lookup-fig2")()
    table = {"TF-(1,64)": {(100, 64): 0.99}, "LSTM-64": {(100, 64): 0.20}}
    c = p.claims(table, p.quick)
    assert [x["held"] for x in c] == [True, True]
    table["LSTM-64"][(100, 64)] = 0.9
    assert [x["held"] for x in p.claims(table, p.quick)] == [True, False]
    d = PRESETS.get("dyck-fig2")()
    table = {"LSTM-64": {(N, 64): 1.0 for N in d.quick.Ns},
             "TF-(1,64)": {(20, 64): 0.99, (50, 64): 0.9, (100, 64): 0.7}}
    assert [x["held"] for x in d.claims(table, d.quick)] == [True, True]
    table["TF-(1,64)"][(100, 64)] = 1.0
    assert [x["held"] for x in d.claims(table, d.quick)] == [True, False]


def test_mamba_and_equality_claims():
    m = PRESETS.get("mamba-width")()
    Ns, ws = m.quick.Ns, m.quick.archs[0].widths
    table = {f"Mamba-{w}": {(N, w): (0.9 if N == min(Ns) else 0.1) + 0.01 * w / 16 for N in Ns} for w in ws}
    assert [c["held"] for c in m.claims(table, m.quick)] == [True, True]
    table = {f"Mamba-{w}": {(N, w): 0.5 for N in Ns} for w in ws}
    assert [c["held"] for c in m.claims(table, m.quick)] == [False, False]
    e = PRESETS.get("equality-fig4")()
    hi = max(e.quick.Ns)
    table = {f"TF-(2,64) [{v}]": {(hi, 64): 0.9} for v, _ in e.quick.variants}
    table.update({f"LSTM-{w} [{v}]": {(hi, w): 0.5 if w == 8 else 0.95} for v, _ in e.quick.variants for w in (8, 64)})
    assert [c["held"] for c in e.claims(table, e.quick)] == [True, False, True, False]
