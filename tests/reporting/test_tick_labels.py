"""Log axes in plain text (issue 55): `archsep report` draws under `text.parse_math: False`, so
that stored labels are drawn as written, where matplotlib's own log formatters would print their
mathtext raw (`$\\mathdefault{10^{4}}$`). Every figure archsep writes gets plain tick labels
(`reporting.plots.plain_ticks`): checked on the figures the report itself draws, read back at
the moment they are saved."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import matplotlib
import matplotlib.figure
import matplotlib.ticker
import pytest

from archsep.experiments.report import build
from archsep.reporting.plots import (PlainLogFormatter, accuracy_vs_length, draw_samples_vs_N, log_label,
                                     plain_ticks, plt, save)
from archsep.reporting.report import figure_curves, figure_samples
from archsep.results import RunResult
from archsep.store import open_store, record

MATHTEXT = ("$", "mathdefault", "^{")


@pytest.fixture
def saved(monkeypatch) -> list[list[str]]:
    """The tick labels (major and minor, both axes, every axes) of each figure saved from here
    on, read right after it was drawn into its file."""
    labels: list[list[str]] = []
    original = matplotlib.figure.Figure.savefig

    def savefig(fig, *args, **kwargs):
        out = original(fig, *args, **kwargs)
        labels.append([t.get_text() for ax in fig.get_axes() for axis in (ax.xaxis, ax.yaxis)
                       for t in axis.get_ticklabels(which="both") if t.get_text()])
        return out

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    return labels


def _plain(labels: list[list[str]]) -> None:
    assert labels and all(labels), labels
    bad = [t for fig in labels for t in fig if any(m in t for m in MATHTEXT)]
    assert not bad, bad


def _store(out: Path, Ns=(8, 32, 128, 512)) -> None:
    """Two arms over four lengths spanning decades of samples, with held-out curves: the report
    draws samples against N and the curves, both on log-log axes."""
    with open_store(out) as st:
        planned = []
        for label, arch, slope in (("TF", "tf-b", 1.0), ("FFN", "ffn", 2.0)):
            for N in Ns:
                for seed in (0, 1):
                    cfg = {"task": "qstr", "arch": arch, "seed": seed, "label": label,
                           "task_params": {"N": N, "d": 4, "q": 1}, "model_params": {},
                           "train": {"budget": 10**7, "threshold": 0.5, "lr": 1e-3}}
                    samples = int(64 * N**slope) + 64 * seed
                    rid = f"{label}{N}s{seed}"
                    curve = [(64 * 4**k, 2.0 / (1 + k)) for k in range(6)]
                    st.add(record(RunResult(rid, cfg, "ok", samples, 64, 0.4, 0.3, curve, curve[:2],
                                            {"every_steps": 1}, 1.0, 10)))
                    planned.append((rid, cfg))
        st.register_sweep("sw-ticks", "ticks", 'name = "ticks"\n', planned,
                          analysis={"x": "task_params.N", "separations": [["TF", "FFN"]]})


def test_the_reports_figures_have_plain_tick_labels(tmp_path, saved):
    _store(tmp_path)
    with open_store(tmp_path, create=False) as st:
        html, data = build(st)
    assert data["analyses"] and html.count("data:image/png;base64,") >= 2
    _plain(saved)
    assert any(t.startswith("10") and t[2:3] in "⁰¹²³⁴⁵⁶⁷⁸⁹⁻" for fig in saved for t in fig), saved


def test_each_report_figure_helper_draws_plain_log_labels(tmp_path, saved):
    analysis = {"points": [{"arch": a, "x": N, "mean": m * N**2, "ci": [0.8 * m * N**2, 1.2 * m * N**2],
                            "n_censored": int(a == "B" and N == 64)}
                           for a, m in (("A", 10.0), ("B", 300.0)) for N in (4, 16, 64)],
                "fits": {"A": {"alpha": 2.0, "ci": [1.9, 2.1], "intercept": 2.3}}, "names": {}}
    runs = [SimpleNamespace(run_id=f"r{i}", curve=[(100 * 10**k, 1.0 / (k + 1) ** 3) for k in range(5)],
                            config={"train": {"threshold": 0.01}}) for i in range(2)]
    lengths = {"points": [{"curve": "TF $x_$", "length": n, "mean": 10.0**-k, "ci": [None, None]}
                          for k, n in enumerate((16, 64, 256, 1024))], "measure": "MSE", "train_N": {"TF $x_$": 16}}
    with matplotlib.rc_context({"text.parse_math": False}):
        assert figure_samples(analysis, "0.5")
        assert figure_curves(runs, {"curves": ["A"], "run_curves": {"r0": "A", "r1": "A"}})  # type: ignore[arg-type]
        assert accuracy_vs_length(lengths, "lengths", tmp_path / "lengths")
        fig = draw_samples_vs_N({"points": [dict(p, N=p["x"]) for p in analysis["points"]], "threshold": 0.5},
                                "a $ in the title")
        save(fig, tmp_path / "samples")
    assert len(saved) == 7  # figure_curves (one PNG), the others a PNG and an SVG each
    _plain(saved)


def test_plain_ticks_replaces_every_mathtext_formatter():
    fig, (ax, bx) = plt.subplots(1, 2)
    ax.plot([100, 3e5], [1e-3, 0.5])
    ax.set_xscale("log")
    ax.set_yscale("log")
    bx.plot([0, 10, 1000], [-50, 3, 2000])
    bx.set_xscale("symlog", linthresh=1)  # as paper B's fig2 draws steps
    bx.set_yscale("symlog")
    bx.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter(useMathText=True))
    mathtext = matplotlib.ticker.LogFormatterMathtext
    assert isinstance(ax.xaxis.get_major_formatter(), mathtext)  # what matplotlib gives a log axis
    plain_ticks(fig)
    for axis in (ax.xaxis, ax.yaxis):
        assert isinstance(axis.get_major_formatter(), PlainLogFormatter)
        assert isinstance(axis.get_minor_formatter(), PlainLogFormatter)
    assert isinstance(bx.yaxis.get_major_formatter(), PlainLogFormatter)  # a symlog axis labels no minor tick
    assert not bx.xaxis.get_major_formatter().get_useMathText()  # type: ignore[attr-defined]
    fig.canvas.draw()
    ys = [t.get_text() for t in bx.get_yticklabels() if t.get_text()]
    assert "−10²" in ys and "0" in ys and "10³" in ys, ys
    assert "10⁵" in [t.get_text() for t in ax.get_xticklabels()]
    plt.close(fig)


@pytest.mark.parametrize("x, text", [(1, "10⁰"), (10, "10¹"), (1e4, "10⁴"), (2000, "2×10³"), (0.03, "3×10⁻²"),
                                     (1e-5, "10⁻⁵"), (9999.9999999, "10⁴")])
def test_log_label(x, text):
    assert log_label(x) == text
