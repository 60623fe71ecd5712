"""A size measurement from a sweep file (`[analysis] measure = "size"`): its runs grouped into
cells, the learning rate chosen on validation, accuracy per (model, width, N) over seeds; and
its keys checked like every other."""
from __future__ import annotations

import dataclasses

import pytest

from archsep.analysis.size import analyze_size, size_cells, size_points
from archsep.errors import ArchsepError
from archsep.results import RunResult
from archsep.sweeps import file as sw

SIZE = '''name = "s"
seeds = 2
[base]
task = "index-lookup"
arch = "lstm"
label = "LSTM"
train = { budget = 640, threshold = 0.01, eval_mode = "every", keep_best = true, test_size = 100 }
[grid]
"task_params.N" = [4, 8]
"model_params.hidden" = [4, 8]
"train.lr" = [1e-3, 3e-3]
[analysis]
'''


def test_a_size_sweep_parses_and_bad_keys_are_refused_by_name():
    s = sw.parse(SIZE + 'measure = "size"\nwidth = "model_params.hidden"\n')
    assert s.analysis == {"x": "task_params.N", "separations": [], "measure": "size", "width": "model_params.hidden"}
    assert sw.parse(SIZE).analysis == {"x": "task_params.N", "separations": []}  # samples: as before
    for extra, field in [('measure = "sizes"', "analysis.measure"), ('width = "hidden"\nmeasure = "size"',
                                                                     "analysis.width"),
                         ('width = "model_params.hidden"', "analysis.width"),
                         ('measure = "size"\nseparations = [["A", "B"]]', "analysis.separations")]:
        with pytest.raises(ArchsepError) as e:
            sw.parse(SIZE + extra + "\n")
        assert field in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ArchsepError, match="allowed: samples, size"):
        sw.parse(SIZE + 'measure = "sizes"\n')


def _run(rid: str, N: int, hidden: int, seed: int, lr: float, val_err: float, test_err: float, samples: int = 640,
         status: str = "ok") -> RunResult:
    cfg = {"task": "index-lookup", "arch": "lstm", "label": "LSTM", "seed": seed, "task_params": {"N": N},
           "model_params": {"hidden": hidden},
           "train": {"budget": 640, "batch_size": 64, "lr": lr, "threshold": 0.01, "keep_best": True}}
    return RunResult(rid, cfg, status, samples, 640, val_err, val_err, test_metric=test_err, best_samples=samples,
                     curve=[(320, val_err + 0.1), (samples, val_err)])


def test_cells_choose_the_learning_rate_on_validation_not_on_test():
    runs = [_run("a", 4, 8, 0, 1e-3, val_err=0.10, test_err=0.05),   # better on test, worse on validation
            _run("b", 4, 8, 0, 3e-3, val_err=0.02, test_err=0.30),
            _run("c", 4, 8, 1, 1e-3, val_err=0.05, test_err=0.10),
            _run("d", 4, 8, 1, 3e-3, val_err=0.05, test_err=0.20, samples=320),  # a tie: fewer steps wins
            _run("e", 8, 8, 0, 1e-3, val_err=0.50, test_err=0.50)]
    cells = size_cells(runs, width="model_params.hidden")
    by = {(c["N"], c["seed"]): c for c in cells}
    assert len(cells) == 3 and {len(c["runs"]) for c in cells} == {1, 2}
    assert by[(4, 0)]["best_lr"] == 3e-3 and by[(4, 0)]["test_acc"] == pytest.approx(0.70)
    assert by[(4, 1)]["best_lr"] == 3e-3 and by[(4, 1)]["test_acc"] == pytest.approx(0.80)
    assert all(c["label"] == "LSTM-8" and c["family"] == "LSTM" and c["width"] == 8 for c in cells)
    (p4, p8) = size_points(cells)
    assert p4["N"] == 4 and p4["seeds"] == 2 and p4["mean"] == pytest.approx(0.75)
    assert p4["ci"][0] < 0.75 < p4["ci"][1]  # a t interval over the two seeds
    assert p8["seeds"] == 1 and p8["ci"] == [None, None]  # one seed: no interval
    a = analyze_size(runs, width="model_params.hidden")
    assert a["measure"] == "size" and a["cells"] == cells


def test_the_width_comes_from_the_model_config_when_the_sweep_leaves_it_at_its_default():
    r = _run("a", 4, 8, 0, 1e-3, 0.1, 0.1)
    r.config["model_params"] = {}  # LSTM's default hidden size
    from archsep.models import MODELS

    default = MODELS.get("lstm")().hidden
    (cell,) = size_cells([r])
    assert cell["width"] == default and cell["label"] == f"LSTM-{default}"


def test_analyze_reads_a_cells_learning_rates_in_the_order_the_sweep_planned_them(tmp_path):
    """Two learning rates tie on validation and steps: the first in the grid wins, whichever
    finished (was committed) first."""
    import archsep
    from archsep.store import open_store, record

    s = sw.parse(SIZE.replace('"model_params.hidden" = [4, 8]', '"model_params.hidden" = [4]')
                 .replace('"task_params.N" = [4, 8]', '"task_params.N" = [4]').replace("seeds = 2", "seeds = 1")
                 + 'measure = "size"\n')
    first, second = s.configs  # lr 1e-3, then 3e-3, as the grid lists them
    with open_store(tmp_path) as store:
        store.register_sweep(s.sweep_id, s.name, s.source, [(c.run_id, c.to_dict()) for c in s.configs],
                             analysis=s.analysis)
        for c, test_err in ((second, 0.3), (first, 0.1)):  # the second lr is committed first
            r = _run(c.run_id, 4, 4, 0, c.train.lr, val_err=0.05, test_err=test_err)
            store.add(record(dataclasses.replace(r, config=c.to_dict())))
    (cell,) = archsep.analyze(tmp_path)["cells"]
    assert cell["best_lr"] == first.train.lr and cell["test_acc"] == pytest.approx(0.9)


def test_the_report_of_a_size_sweep_over_widths_draws_accuracy_against_width(tmp_path):
    """Issue 55: a size sweep's report plots test accuracy against width (one line per family and
    N, the widths written plainly), where some family has two widths."""
    import matplotlib

    from archsep.experiments.report import build
    from archsep.reporting.plots import accuracy_vs_width
    from archsep.runs.runner import run_configs
    from archsep.store import open_store

    s = sw.parse(SIZE.replace('"train.lr" = [1e-3, 3e-3]', '"train.lr" = [3e-3]').replace("seeds = 2", "seeds = 1")
                 + 'measure = "size"\nwidth = "model_params.hidden"\n')
    run_configs(s.configs, tmp_path, workers=1, progress=False, sweep=s)
    with open_store(tmp_path) as st:
        _, data = build(st)
    (a,) = data["analyses"]
    assert {(p["width"], p["N"]) for p in a["points"]} == {(4, 4), (8, 4), (4, 8), (8, 8)}
    with matplotlib.rc_context({"text.parse_math": False}):
        paths = accuracy_vs_width(a["points"], "s", tmp_path / "w")
    assert [p.suffix for p in paths] == [".png", ".svg"]
    one = [dict(p, width=4) for p in a["points"]]  # one width per family: nothing to draw
    assert accuracy_vs_width(one, "s", tmp_path / "none") == []
    html = (tmp_path / "report.html")
    from archsep.cli import main

    assert main(["report", str(tmp_path), "-o", str(html)]) == 0
    assert "accuracy_vs_width" in html.read_text()
