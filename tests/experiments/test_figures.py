"""Figures that cannot mislead (issue 50): each figure kind drawn from small synthetic inputs,
its title and legend checked against those inputs."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from archsep.experiments import PRESETS
from archsep.reporting import plots
from archsep.results import Summary

LABELS = ("LSTM-64", "TF-(1,64)")
NS = (20, 100)
SEEDS = (0, 1, 2)
BASELINE = "best trivial baseline (depth-counter)"


def _curve(label: str, N: int, seed: int) -> list[list[float]]:
    """A curve that differs by label, length and seed; seed 2 of the TF stops early at step 200."""
    top = 0.5 + 0.1 * seed + (0.2 if label.startswith("TF") else 0.0) - N / 1000
    steps = (100, 200) if (label.startswith("TF") and seed == 2) else (100, 200, 300)
    return [[s, top * s / 300] for s in steps]


def _cells(widths: dict[str, tuple[int, ...]] | None = None) -> list[dict]:
    widths = widths or {lab: (64,) for lab in LABELS}
    out = []
    for lab in LABELS:
        fam = lab.replace("64", "w")
        for w in widths[lab]:
            name = lab.replace("64", str(w))
            for N in NS:
                for seed in SEEDS:
                    runs = [{"lr": 1e-3, "curve": _curve(lab, N, seed)},
                            {"lr": 3e-4, "curve": [[100, 0.0], [200, 0.0], [300, 0.0]]}]
                    out.append({"label": name, "family": fam, "N": N, "width": w, "seed": seed, "runs": runs,
                                "best_lr": 1e-3, "test_acc": 0.6 + 0.1 * seed, "status": "ok"})
    return out


def _points(cells: list[dict]) -> list[dict]:
    from archsep.analysis.size import size_points

    return size_points(cells)


def _baselines() -> list[dict]:
    return [{"variant": "", "N": N, "baselines": {"constant": 0.5, "depth-counter": acc}, "best": "depth-counter",
             "best_acc": acc} for N, acc in ((20, 0.8), (100, 0.7))]


@pytest.fixture
def drawn(monkeypatch):
    """Every figure `plots.save` writes (the files too), kept open for inspection."""
    figs: list = []
    real = plots.save

    def keep(fig, stem):
        figs.append(fig)
        return real(fig, stem)

    monkeypatch.setattr(plots, "save", keep)
    monkeypatch.setattr(plots.plt, "close", lambda fig=None: None)  # `save` closes what it wrote
    yield figs
    monkeypatch.undo()
    for fig in figs:
        plots.plt.close(fig)


def _outside(fig, legend, ax) -> bool:
    """The legend lies outside the axes' data area (right of it or below it)."""
    r = fig.canvas.get_renderer()
    lb, ab = legend.get_window_extent(r), ax.get_window_extent(r)
    return lb.x0 >= ab.x1 - 1 or lb.y1 <= ab.y0 + 1


def test_accuracy_draws_the_baseline_over_every_model_and_names_it():
    cells = _cells()
    fig = plots.draw_accuracy_vs_N(_points(cells), "dyck-fig2 (cpu)", _baselines(), target=0.99)
    fig.canvas.draw()
    ax = fig.axes[0]
    [base] = [ln for ln in ax.get_lines() if ln.get_gid() == "baseline"]
    models = {c.get_label(): c for c in ax.containers}  # the models' error bars: line, caps and bars
    assert sorted(models) == sorted(LABELS)
    parts = [a for c in models.values() for a in (c.lines[0], *c.lines[1], *c.lines[2]) if a is not None]
    assert len(parts) > len(LABELS) and all(base.get_zorder() > a.get_zorder() for a in parts)
    assert base.get_ydata().tolist() == [0.8, 0.7]
    legend = ax.get_legend()
    assert {t.get_text() for t in legend.get_texts()} == {*LABELS, BASELINE}
    assert any("trivial baseline" in t.get_text() for t in ax.texts)  # named on the line too
    assert _outside(fig, legend, ax)
    title = ax.get_title()
    assert "dyck-fig2 (cpu)" in title and "0.99" in title
    plots.plt.close(fig)


def test_val_curves_draw_every_seed_thin_and_their_mean_thick():
    cells = _cells()
    fig = plots.draw_val_curves(cells, "dyck-fig2 (cpu)", target=0.99)
    fig.canvas.draw()
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == [f"N = {N}" for N in NS]
    for ax, N in zip(axes, NS):
        by_colour: dict[str, dict[str, list]] = {}
        for ln in ax.get_lines():
            if ln.get_gid() in ("seed", "mean"):
                by_colour.setdefault(ln.get_color(), {}).setdefault(ln.get_gid(), []).append(ln)
        assert len(by_colour) == len(LABELS)
        for group in by_colour.values():
            assert len(group["seed"]) == len(SEEDS) and len(group["mean"]) == 1
            assert group["mean"][0].get_linewidth() > max(ln.get_linewidth() for ln in group["seed"])
        # the TF's mean at step 300: seeds 0 and 1 there, seed 2 (stopped at 200) held at its last value
        [tf] = [g["mean"][0] for g in by_colour.values() if g["mean"][0].get_label() == "TF-(1,64)"]
        tops = [0.5 + 0.1 * s + 0.2 - N / 1000 for s in SEEDS]
        expect = (tops[0] + tops[1] + tops[2] * 200 / 300) / 3
        assert tf.get_xdata().tolist() == [100, 200, 300]
        assert tf.get_ydata()[-1] == pytest.approx(expect)
    legend = axes[-1].get_legend()
    assert [t.get_text() for t in legend.get_texts()] == list(LABELS)
    assert _outside(fig, legend, axes[-1])
    title = fig.get_suptitle()
    assert "dyck-fig2 (cpu)" in title and "every seed thin, mean thick" in title and "3 seeds" in title
    plots.plt.close(fig)


def test_mean_curve_keeps_a_seed_that_stopped_at_its_last_value():
    xs, ys = plots.mean_curve([[(1, 0.5), (2, 1.0)], [(1, 0.5), (2, 0.5), (3, 0.6)], []])
    assert xs == [1, 2, 3]
    assert ys == pytest.approx([0.5, 0.75, 0.8])
    # a seed that starts later counts only from its first point
    assert plots.mean_curve([[(2, 1.0)], [(1, 0.0), (2, 0.0)]]) == ([1, 2], [0.0, 0.5])


def test_heat_maps_only_where_a_family_has_two_widths(tmp_path, drawn):
    one = _cells()
    paths = plots.size_figures(one, _points(one), "x (cpu)", tmp_path, 0.99, _baselines())
    assert sorted(p.name for p in paths) == ["accuracy.png", "accuracy.svg", "val_curves.png", "val_curves.svg"]
    assert not (tmp_path / "heatmaps.png").exists()
    two = _cells({"LSTM-64": (64,), "TF-(1,64)": (16, 64)})
    out = tmp_path / "two"
    out.mkdir()
    paths = plots.size_figures(two, _points(two), "x (cpu)", out, 0.99, _baselines())
    assert (out / "heatmaps.png").exists() and out / "heatmaps.png" in paths
    heat = drawn[-3]  # heat maps, accuracy, validation curves, in that order
    assert [ax.get_title() for ax in heat.axes if ax.get_title()] == ["TF-(1,w)"]  # the one-width LSTM is left out
    assert "LSTM-w" in heat.get_suptitle() and "x (cpu)" in heat.get_suptitle()


def test_a_size_preset_titles_every_figure_with_its_preset_scale_and_target(tmp_path, drawn):
    cells = _cells()
    data = {"cells": cells, "target": 0.95, "baselines": _baselines()}
    paths = PRESETS.get("dyck-fig2")().figures(Summary("dyck-fig2", "paper-n", data, []), tmp_path)
    assert {p.stem for p in paths} == {"accuracy", "val_curves"}
    acc, val = drawn
    assert "dyck-fig2 (paper-n): test accuracy against N" in acc.axes[0].get_title()
    assert "0.95" in acc.axes[0].get_title()
    assert val.get_suptitle().startswith("dyck-fig2 (paper-n): validation accuracy")
    assert [list(ln.get_ydata()) for ax in val.axes for ln in ax.get_lines() if ln.get_linestyle() == "--"] \
        == [[0.95, 0.95]] * len(NS)


def _samples_data(threshold: float, arms: tuple[str, ...]) -> dict:
    points = [{"arch": a, "N": q, "mean": 1000.0 * q * (k + 1), "median": 1000.0 * q * (k + 1),
               "ci": [900.0 * q * (k + 1), 1100.0 * q * (k + 1)],
               "n_runs": 3, "n_censored": int(a == "FFN" and q == 2), "median_text": "", "x": q,
               "curve": {"label": a, "arm": a, "protocol": "training", "task": "", "extras": {}}}
              for k, a in enumerate(arms) for q in (1, 2)]
    fits = {a: {"alpha": 1.0, "ci": [0.5, 1.5], "intercept": 7.0} for a in arms}
    return {"threshold": threshold, "budget": 4000, "eval_size": 100, "seeds": 3, "seed_list": [0, 1, 2],
            "Ns": [1, 2], "points": points, "fits": fits, "metric": "MSE", "names": {}, "notes": []}


def test_a_sample_figure_title_states_its_threshold_scale_and_only_the_arms_run(tmp_path, drawn):
    exp = PRESETS.get("qstr-fig3")()
    summary = Summary("qstr-fig3", "mse05", _samples_data(0.5, ("TF", "FFN")), [])
    title = exp.figure_title(summary)
    assert "qstr-fig3 (mse05)" in title and "MSE < 0.5 " in title and "arms run: TF, FFN" in title
    assert "0.88" not in title and "RNN" not in title  # the description's threshold and arm are not this figure's
    fig1b = PRESETS.get("qstr-fig1b")()
    s = Summary("qstr-fig1b", "quick", _samples_data(0.2, ("TF", "RNN", "FFN")), [])
    fig1b.figures(s, tmp_path)
    fig = drawn[-1]
    ax = fig.axes[0]
    assert "qstr-fig1b (quick)" in ax.get_title() and "MSE < 0.2 " in ax.get_title()
    labels = {t.get_text().split(":")[0] for t in ax.get_legend().get_texts()}
    assert labels == {"TF", "RNN", "FFN", "censored runs (lower bound)"}
    assert _outside(fig, ax.get_legend(), ax)


class _Run:
    def __init__(self, arm: str, q: int, samples: int, status: str = "ok"):
        self.config = {"label": arm, "arch": arm, "task_params": {"q": q}}
        self.samples, self.status = samples, status

    @property
    def censored(self) -> bool:
        return self.status == "censored"


def test_figure_3_names_only_its_arms_and_keeps_its_legends_off_the_data():
    exp = PRESETS.get("qstr-fig3")()
    data = _samples_data(0.5, ("TF", "FFN"))
    results = [_Run(a, q, 1000 * q * (k + 1) + seed, "censored" if (a, q, seed) == ("FFN", 2, 0) else "ok")
               for k, a in enumerate(("TF", "FFN")) for q in (1, 2) for seed in SEEDS]
    fig = exp.draw(Summary("qstr-fig3", "mse05", data, [], results))
    fig.canvas.draw()
    title = fig.get_suptitle()
    assert "qstr-fig3 (mse05)" in title and "< 0.5" in title and "RNN" not in title and "0.88" not in title
    left, right = fig.axes[:2]
    assert {t.get_text() for t in left.get_legend().get_texts()} == {"TF, mean", "FFN, mean",
                                                                      "censored run (at the budget)"}
    assert {t.get_text() for t in right.get_legend().get_texts()} == {
        "FFN / TF", "FFN / TF with censored runs (a lower bound)"}
    assert all(_outside(fig, a.get_legend(), a) for a in (left, right))
    plots.plt.close(fig)


def _redraw_script():
    path = Path(__file__).resolve().parents[2] / "scripts" / "redraw_figures.py"
    spec = importlib.util.spec_from_file_location("redraw_figures", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up while being defined
    spec.loader.exec_module(mod)
    return mod


def test_redraw_replaces_figures_and_removes_the_ones_no_longer_drawn(tmp_path):
    folder = tmp_path / "dyck-fig2-cpu"
    folder.mkdir()
    d = {"preset": "dyck-fig2", "scale": "cpu", "quick": False, "cells": _cells(), "target": 0.99,
         "baselines": _baselines(), "claims": [{"kind": "control", "text": "t", "held": True, "values": {}}],
         "wall_s": 1.0, "figures": ["heatmaps.png", "heatmaps.svg"]}
    (folder / "summary.json").write_text(json.dumps(d))
    for stale in ("heatmaps.png", "heatmaps.svg", "accuracy.png"):
        (folder / stale).write_bytes(b"old")
    assert _redraw_script().main([str(folder)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["accuracy.png", "accuracy.svg", "summary.json",
                                                        "val_curves.png", "val_curves.svg"]
    assert (folder / "accuracy.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((folder / "summary.json").read_text()) == d  # left as it was


def test_redraw_rebuilds_figure_3_runs_from_runs_csv_and_refuses_qstr_heads(tmp_path):
    mod = _redraw_script()
    folder = tmp_path / "fig3"
    folder.mkdir()
    d = {"preset": "qstr-fig3", "scale": "mse05", **_samples_data(0.5, ("TF", "FFN")), "claims": []}
    (folder / "summary.json").write_text(json.dumps(d))
    rows = ["arch,N,q,seed,samples,censored,diverged,status"]
    for a in ("TF", "FFN"):
        for q in (1, 2):
            for s in SEEDS:
                cut = (a, q, s) == ("FFN", 2, 0)
                rows.append(f"{a},7,{q},{s},{1000 * q + s},{cut},False,{'censored' if cut else 'ok'}")
    (folder / "runs.csv").write_text("\n".join(rows) + "\n")
    summary = mod.load(folder)
    assert len(summary.results) == 12 and sum(r.censored for r in summary.results) == 1
    assert {r.config["task_params"]["q"] for r in summary.results} == {1, 2}
    drawn, removed = mod.redraw(folder)
    assert [p.name for p in drawn] == ["figure.png", "figure.svg"] and removed == []
    heads = tmp_path / "heads"
    heads.mkdir()
    (heads / "summary.json").write_text(json.dumps({"preset": "qstr-heads", "scale": "full", "claims": []}))
    with pytest.raises(ValueError, match="runs.csv"):
        mod.redraw(heads)
    link = tmp_path / "link"
    link.symlink_to(folder)
    with pytest.raises(ValueError, match="link"):
        mod.redraw(link)
