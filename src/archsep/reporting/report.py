"""The self-contained HTML report, rendered: its figures, tables, sections and page. What goes
into it (the analysis of each sweep, a preset's own summary) is assembled by
`archsep.experiments.report`; the statistics come from `archsep.analysis.grid`.

The report embeds its figures as base64 PNG, has no script and no external reference, so it
opens in any browser without a network.
"""
from __future__ import annotations

import base64
import html
import io
import json
import math
import platform
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..models.matching import width_field
from ..results import RunResult
from ..store import Store

SAMPLES_STATUSES = ("ok", "censored")


# --- figures --------------------------------------------------------------------------------
def _png(fig) -> str:
    import matplotlib.pyplot as plt

    from .plots import plain_ticks

    plain_ticks(fig)  # drawn under text.parse_math: False: no mathtext in a tick label
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def figure_samples(analysis: dict, threshold: str) -> str | None:
    from .plots import samples_vs_N

    pts = [dict(p, arch=p["arch"], N=p["x"]) for p in analysis["points"]
           if isinstance(p["x"], (int, float)) and not isinstance(p["x"], bool)]
    if not pts or all(p["mean"] is None for p in pts):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        paths = samples_vs_N({"points": pts, "fits": analysis["fits"], "threshold": threshold,
                              "metric": analysis.get("metric", "MSE"), "names": analysis.get("names", {})},
                             Path(tmp) / "fig", title="samples to threshold")
        png = [p for p in paths if p.suffix == ".png"][0]
        return base64.b64encode(png.read_bytes()).decode()


def figure_curves(results: list[RunResult], analysis: dict) -> str | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plots import plain

    runs = [r for r in results if r.curve]
    if not runs:
        return None
    curves = analysis["curves"]
    colors = {c: plt.cm.tab10(i % 10) for i, c in enumerate(curves)}
    fig, ax = plt.subplots(figsize=(6, 3.8))
    seen = set()
    for r in runs:
        c = analysis["run_curves"].get(r.run_id, "?")
        xs = [s for s, _ in r.curve]
        ys = [m for _, m in r.curve]
        ax.plot(xs, ys, color=colors.get(c, "k"), alpha=0.6, lw=1, label=None if c in seen else plain(c))
        if getattr(r, "train_curve", None):  # the pre-update metric at every scheduled point, skipped or not
            ax.plot([s for s, _ in r.train_curve], [max(m, 1e-12) for _, m in r.train_curve],
                    color=colors.get(c, "k"), alpha=0.35, lw=0.8, ls=":")
        seen.add(c)
    thr = {r.config.get("train", {}).get("threshold") for r in runs}
    for t in thr:
        if t:
            ax.axhline(t, color="grey", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("samples")
    ax.set_ylabel("held-out metric")
    ax.set_title("held-out curves of every run (dotted: its training metric; dashed: threshold)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


# --- HTML -----------------------------------------------------------------------------------
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222;
padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.held{color:#176f2c;font-weight:bold}.nothold{color:#a4161a;font-weight:bold}.noverdict{color:#8a6d00;font-weight:bold}
.ok{color:#176f2c}.censored{color:#8a6d00}.diverged,.error{color:#a4161a}
pre{background:#f7f7f7;padding:.6em;overflow:auto;font-size:.82em;max-height:30em}
figure{display:inline-block;margin:.5em 1em .5em 0}figcaption{font-size:.85em;color:#555}
img.fig{max-width:100%;border:1px solid #ddd}
details summary{cursor:pointer}
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _n(x: Any, fmt: str = "{:.0f}") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return fmt.format(x)


def _table(head: list[str], rows: list[list[str]], num: frozenset[int] | set[int] = frozenset()) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td class='num'>{c}</td>" if i in num else f"<td>{c}</td>"
                                     for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def environment(rows: list[dict]) -> dict:
    import matplotlib
    import torch

    def uniq(k: str) -> str:
        return ", ".join(sorted({str(r.get(k)) for r in rows if r.get(k) is not None})) or "n/a"

    from ..store.rows import versions

    v = versions()
    return {
        "runs: archsep": uniq("archsep_version"), "runs: torch": uniq("torch_version"),
        "runs: device": uniq("device"), "runs: host": uniq("host"),
        "report: archsep": v["archsep"], "report: torch": v["torch"], "report: numpy": np.__version__,
        "report: matplotlib": matplotlib.__version__, "report: python": sys.version.split()[0],
        "report: platform": platform.platform(),
        "report: CUDA": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "not available",
        "report generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def sweep_section(sw: dict | None, title: str, a: dict, figs: list, results: list[RunResult],
                   by_id: dict) -> str:
    out = [f"<h2>{_e(title)}</h2>"]
    if sw:
        out.append(f"<p>sweep id <code>{_e(sw['sweep_id'])}</code>, {len(results)} finished run(s); "
                   f"varying: {_e(', '.join(a['varying']) or 'nothing but the seed')}</p>")
    for cap, b64 in figs:
        out.append(f"<figure><img class='fig' alt='{_e(cap)}' src='data:image/png;base64,{b64}'>"
                   f"<figcaption>{_e(cap)}</figcaption></figure>")
    out.append(_samples_tables(a))
    out.append(_runs_table(results, by_id))
    if sw:
        out.append(f"<details><summary>sweep file</summary><pre>{_e(sw['source'])}</pre></details>")
    return "\n".join(out)


def size_section(sw: dict | None, title: str, a: dict, figs: list, results: list[RunResult], by_id: dict) -> str:
    """A sweep measured by size: its figures, the accuracy of each (model, N) over seeds, its runs."""
    out = [f"<h2>{_e(title)}</h2>"]
    if sw:
        out.append(f"<p>sweep id <code>{_e(sw['sweep_id'])}</code>, {len(results)} finished run(s) in "
                   f"{len(a['cells'])} cell(s); size measurement: test accuracy of each cell's learning rate "
                   f"chosen on validation, against {_e(a['x'])}</p>")
    for cap, b64 in figs:
        out.append(f"<figure><img class='fig' alt='{_e(cap)}' src='data:image/png;base64,{b64}'>"
                   f"<figcaption>{_e(cap)}</figcaption></figure>")
    out.append("<h3>Test accuracy (mean over seeds)</h3>")
    out.append(_table(["model", "width", _e(a["x"]), "seeds", "mean test accuracy", "95% CI (t)", "lr chosen"],
                      [[_e(p["label"]), _e(p["width"]), _e(p["N"]), str(p["seeds"]), _n(p["mean"], "{:.3f}"),
                        f"[{_n(p['ci'][0], '{:.3f}')}, {_n(p['ci'][1], '{:.3f}')}]",
                        _e(", ".join(f"{lr:g}" for lr in p["lrs"]))] for p in a["points"]], {1, 2, 3, 4}))
    out.append(_runs_table(results, by_id))
    if sw:
        out.append(f"<details><summary>sweep file</summary><pre>{_e(sw['source'])}</pre></details>")
    return "\n".join(out)


def _samples_tables(a: dict) -> str:
    out = []
    if a["fits"]:
        out.append(f"<h3>Scaling exponents: samples &prop; {_e(a['x'])}<sup>&alpha;</sup></h3>")
        out.append(_table(["curve", "alpha", "95% CI (t, per-seed slopes)", "points", "note"],
                          [[_e(c), _n(f["alpha"], "{:.2f}"),
                            f"[{_n(f['ci'][0], '{:.2f}')}, {_n(f['ci'][1], '{:.2f}')}]", str(f["n_points"]),
                            "censored runs at the budget: a lower bound" if f["censored_data"] else ""]
                           for c, f in a["fits"].items()], {1, 3}))
    if a["separations"]:
        out.append("<h3>Separation statements</h3>")
        out.append(_table(["better", "worse", "statement", "held"],
                          [[_e(s["better"]), _e(s["worse"]), _e(s["text"]), _held(s)]
                           for s in a["separations"]]))
    out.append("<h3>Grid points</h3>")
    out.append(_table(["curve", _e(a["x"]), "runs", "censored", "diverged", "error", "mean", "mean 95% CI",
                       "median (KM)", "median 95% CI"],
                      [[_e(p["arch"]), _e(p["x"]), str(p["n_runs"]), str(p["n_censored"]), str(p["n_diverged"]),
                        str(p["n_error"]), _n(p["mean"]), f"[{_n(p['ci'][0])}, {_n(p['ci'][1])}]",
                        _e(p["median_text"]), _e(p["median_ci_text"])] for p in a["points"]],
                      {1, 2, 3, 4, 5, 6, 8}))
    return "\n".join(out)


def experiment_section(title: str, lead: str, figs: list, summary_text: str, tables: dict | None,
                       results: list[RunResult], by_id: dict, source: str) -> str:
    """A preset's section: its figures, its own summary text, the statistics any sweep gets
    (`tables`, when it measures samples) and its runs."""
    out = [f"<h2>{_e(title)}</h2>", f"<p>{_e(lead)}</p>"]
    for cap, b64 in figs:
        out.append(f"<figure><img class='fig' alt='{_e(cap)}' src='data:image/png;base64,{b64}'>"
                   f"<figcaption>{_e(cap)}</figcaption></figure>")
    out.append(f"<h3>Summary</h3><pre>{_e(summary_text)}</pre>")
    if tables is not None:
        out.append(_samples_tables(tables))
    out.append(_runs_table(results, by_id))
    out.append(f"<details><summary>sweep file</summary><pre>{_e(source)}</pre></details>")
    return "\n".join(out)


def _runs_table(results: list[RunResult], by_id: dict) -> str:
    out = []
    out.append("<h3>Runs</h3>")
    rows = []
    def order(r: RunResult) -> tuple:
        return (str(r.config.get("label")), json.dumps(r.config.get("task_params"), sort_keys=True),
                r.config.get("seed", 0))

    for r in sorted(results, key=order):
        row = by_id[r.run_id]
        cfg = json.dumps(r.config, indent=2, sort_keys=True)
        err = f"<pre>{_e(r.error)}</pre>" if r.error else ""
        rows.append([f"<code>{_e(r.run_id)}</code>", _e(r.config.get("label") or r.config.get("arch")),
                     _e(run_width(r.config)), _e(json.dumps(r.config.get("task_params"), sort_keys=True)),
                     _e(r.config.get("seed")),
                     _n(r.config.get("train", {}).get("lr"), "{:g}"),
                     f"<span class='{_e(r.status)}'>{_e(r.status)}</span>", _n(r.samples), _n(r.test_metric, "{:.4f}"),
                     _n(r.wall_s, "{:.1f}"),
                     _e(row.get("finished_at", ""))[:19],
                     f"<details><summary>config</summary><pre>{_e(cfg)}</pre>{err}</details>"])
    out.append(_table(["run", "arch", "width", "task_params", "seed", "lr", "status", "samples", "test metric",
                       "wall s", "finished (UTC)", "config"], rows, {2, 5, 7, 8, 9}))
    return "\n".join(out)


def run_width(config: dict) -> Any:
    """A run's model width: its model parameter named by `width_field` (`width`, or `hidden` for
    an arch whose width is called so), else (an arch not registered here) its `width`; "" where
    the run's config sets none (the model's default)."""
    params = config.get("model_params")
    if not isinstance(params, dict):
        return ""
    try:
        field = width_field(str(config.get("arch")))
    except Exception:  # noqa: BLE001 - an arch not registered here, or one without an integer width
        field = "width"
    value = params.get(field, params.get("width"))
    return "" if value is None else value


def verdict(c: dict) -> str:
    """A claim's verdict from its `held` (a separation's already weighs its censoring: `blocked`
    says only why its exponents were not compared, not that nothing could be said)."""
    if c["held"] is None:
        return "no verdict"
    return "held" if c["held"] else "did not hold"


def _held(c: dict) -> str:
    v = c.get("verdict") or verdict(c)
    cls = {"held": "held", "no verdict": "noverdict"}.get(v, "nothold")
    return f"<span class='{cls}'>{v}</span>"


def page(store: Store, data: dict, sections: list[str]) -> str:
    st = data["status"]
    counts = ", ".join(f"{k}: {v}" for k, v in st["by_status"].items())
    claims = data["claims"]
    claims_html = (_table(["claim", "source", "verdict"], [[_e(c["text"]), _e(c["source"]), _held(c)]
                                                          for c in claims])
                   if claims else "<p>No claims declared (add [analysis] separations to the sweep file).</p>")
    env = _table(["item", "value"], [[_e(k), _e(v)] for k, v in data["environment"].items()])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>archsep report: {_e(store.dir.name)}</title>
<style>{CSS}</style></head>
<body>
<h1>archsep report: {_e(store.dir.name)}</h1>
<p>{st['finished']} finished run(s) ({_e(counts)}), {st['pending']} pending. Store: <code>{_e(store.path)}</code></p>
<h2>Claims checked</h2>
{claims_html}
{''.join(sections)}
<h2>Environment</h2>
{env}
</body></html>
"""
