"""Statistics over a results store and the self-contained HTML report.

The analysis groups runs into grid points (everything but the seed), and grid points into
curves (everything but the seed and the scaling variable x, by default task_params.N). Per
point: mean and Kaplan-Meier median with bootstrap CIs, "> budget" when the median is not
estimable. Per curve: the exponent of samples ~ x^alpha with a bootstrap CI. Between curves:
the declared separations (difference of exponents with its CI, and whether it excludes 0).

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
from collections import defaultdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ArchsepError
from ..registry import reading
from ..analysis.stats import fit_exponent, separation, summarize_point
from ..runs.store import Store, open_store
from ..runs.sweep import flatten_config
from ..results import RunResult

SAMPLES_STATUSES = ("ok", "censored")


def _flat(r: RunResult) -> dict[str, Any]:
    from ..config import RunConfig

    try:
        return flatten_config(RunConfig.from_dict(r.config))
    except Exception:  # noqa: BLE001 - a stored config this version cannot rebuild: use it raw
        c = r.config
        out = {"task": c.get("task"), "arch": c.get("arch"), "label": c.get("label", ""), "seed": c.get("seed")}
        for t in ("task_params", "model_params", "train"):
            out.update({f"{t}.{k}": v for k, v in (c.get(t) or {}).items()})
        return out


def _key(v: Any) -> str:
    return json.dumps(v, sort_keys=True)


def analyze(results: list[RunResult] | str | Path, x: str = "task_params.N", separations: list | None = None) -> dict:
    """Per-point statistics, exponent fits and separation statements (a JSON-safe dict) of
    `results` (or of every run stored in an output directory): `points` (per curve and x:
    mean and median samples with CIs, censored counts), `fits` (per curve: the exponent alpha
    of samples ~ x^alpha with its 95% CI), `separations` (for each (better, worse) label pair:
    whether worse's exponent is larger, censoring-aware). The names in the runs' configs are
    data: nothing is imported because of them (`registry.reading`)."""
    with reading():
        if isinstance(results, (str, Path)):
            from .tables import load_results

            results = load_results(results)
        return _analyze(results, x, separations)


def _analyze(results: list[RunResult], x: str, separations: list | None) -> dict:
    flats = [_flat(r) for r in results]
    fields = sorted({k for f in flats for k in f} - {"seed", "train.device"})
    varying = [k for k in fields if len({_key(f.get(k)) for f in flats}) > 1]
    curve_fields = _curve_fields(flats, varying, x)

    def curve_of(f: dict) -> str:
        name = f.get("label") or f.get("arch") or "?"
        if "task" in varying:
            name = f"{f.get('task')}/{name}"
        extra = " ".join(f"{k.split('.')[-1]}={f.get(k)}" for k in curve_fields)
        return f"{name} {extra}".strip()

    pts: dict[str, dict[Any, list[tuple[RunResult, dict]]]] = defaultdict(lambda: defaultdict(list))
    for r, f in zip(results, flats):
        pts[curve_of(f)][_key(f.get(x))].append((r, f))
    points, fits, data, cens_any, cens_flags = [], {}, {}, {}, {}
    for curve in sorted(pts):
        data[curve], cens = {}, {}
        for xk in sorted(pts[curve], key=_x_order):
            rs = [r for r, _ in pts[curve][xk]]
            xv = json.loads(xk)
            budget = max(int(r.config.get("train", {}).get("budget", 0)) for r in rs) or None
            p = summarize_point(curve, xv, [r.samples for r in rs], [r.status for r in rs], budget).to_dict()
            p["x"] = xv
            points.append(p)
            ok = [r for r in rs if r.status in SAMPLES_STATUSES and r.samples]
            if isinstance(xv, (int, float)) and not isinstance(xv, bool) and xv > 0 and ok:
                data[curve][xv] = np.array([r.samples for r in ok], float)
                cens[xv] = np.array([r.status == "censored" for r in ok], bool)
        cens_any[curve] = any(c.any() for c in cens.values())
        cens_flags[curve] = cens
        if len(data[curve]) >= 2:
            fits[curve] = fit_exponent(data[curve], cens).to_dict()
    seps = []
    for better, worse in separations or []:
        b, w = _match(better, data), _match(worse, data)
        if b is None or w is None:
            seps.append({"better": better, "worse": worse, "held": False,
                         "text": f"{better} vs {worse}: no data for {'/'.join(n for n, m in ((better, b), (worse, w)) if m is None)}"})
            continue
        s = separation(better, data[b], worse, data[w], censored=cens_any[b] or cens_any[w],
                       censored_a=cens_flags[b], censored_b=cens_flags[w])
        seps.append(s.to_dict())
    from ..experiments.samples import describe_runs

    named = describe_runs(results)
    names = {}  # curve -> its model's name (a curve's runs share their label)
    for c, by_x in pts.items():
        cfg = next(iter(by_x.values()))[0][0].config
        names[c] = named["names"].get((cfg.get("label") or cfg["arch"]).split(" [")[0])
    return {"x": x, "varying": varying, "points": points, "fits": fits, "separations": seps,
            "curves": sorted(pts), "curve_fields": curve_fields, "metric": named["metric"],
            "names": {c: n for c, n in names.items() if n}}


def _x_order(key: str) -> tuple:
    """Numbers in order, then any other stored value (text, lists: a foreign or odd store) by
    its JSON text, then null: values of mixed types never compare with each other."""
    v = json.loads(key)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return (0, v, "")
    return (2 if v is None else 1, 0, key)


def _curve_fields(flats: list[dict], varying: list[str], x: str) -> list[str]:
    """Varying fields that name a curve beyond its label: those not fixed by (task, label, arch)
    (an arm's own model_params are part of what its label means)."""
    out = []
    for k in varying:
        if k in (x, "label", "arch", "task", "seed"):
            continue
        per: dict[tuple, set] = defaultdict(set)
        for f in flats:
            per[(f.get("task"), f.get("label"), f.get("arch"))].add(_key(f.get(k)))
        if any(len(v) > 1 for v in per.values()):
            out.append(k)
    return out


def _match(label: str, data: dict) -> str | None:
    if label in data:
        return label
    hits = [c for c in data if c.split(" ")[0].split("/")[-1] == label]
    return hits[0] if len(hits) == 1 else None


# --- figures --------------------------------------------------------------------------------
def _png(fig) -> str:
    import matplotlib.pyplot as plt

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
    flats = {r.run_id: _flat(r) for r in runs}
    curves = analysis["curves"]
    colors = {c: plt.cm.tab10(i % 10) for i, c in enumerate(curves)}
    fig, ax = plt.subplots(figsize=(6, 3.8))
    seen = set()
    curve_fields = analysis["curve_fields"]
    for r in runs:
        f = flats[r.run_id]
        name = f.get("label") or f.get("arch") or "?"
        if "task" in analysis["varying"]:
            name = f"{f.get('task')}/{name}"
        extra = " ".join(f"{k.split('.')[-1]}={f.get(k)}" for k in curve_fields)
        c = f"{name} {extra}".strip()
        xs = [s for s, _ in r.curve]
        ys = [m for _, m in r.curve]
        ax.plot(xs, ys, color=colors.get(c, "k"), alpha=0.6, lw=1, label=None if c in seen else plain(c))
        seen.add(c)
    thr = {r.config.get("train", {}).get("threshold") for r in runs}
    for t in thr:
        if t:
            ax.axhline(t, color="grey", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("samples")
    ax.set_ylabel("held-out metric")
    ax.set_title("held-out curves of every run (dashed: threshold)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return _png(fig)


# --- HTML -----------------------------------------------------------------------------------
CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
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


def _table(head: list[str], rows: list[list[str]], num: set[int] = frozenset()) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td class='num'>{c}</td>" if i in num else f"<td>{c}</td>"
                                     for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def environment(rows: list[dict]) -> dict:
    import matplotlib
    import torch

    def uniq(k: str) -> str:
        return ", ".join(sorted({str(r.get(k)) for r in rows if r.get(k) is not None})) or "n/a"

    from ..runs.store import versions

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


def build(store: Store) -> tuple[str, dict]:
    """The report's HTML and its analysis data. Reading never imports (`registry.reading`)."""
    with reading():
        return _build(store)


def _build(store: Store) -> tuple[str, dict]:
    rows = store.rows()
    if not rows:
        raise ArchsepError(f"DIR: the store '{store.path}' holds no finished runs yet")
    checked = {r["run_id"]: store.check(r) for r in rows}  # a damaged row: one line naming it
    by_id = {r["run_id"]: r for r in rows}
    sweeps = store.sweeps()
    sections = []
    all_claims: list[dict] = []
    analyses = []
    figures: list[tuple[str, str]] = []
    # one analysis per sweep (its planned runs); runs outside any sweep form one more group
    groups: list[tuple[dict | None, list[str]]] = []
    covered: set[str] = set()
    for sw in sweeps:
        ids = [p["run_id"] for p in store.planned(sw["sweep_id"])]
        covered.update(ids)
        groups.append((sw, [i for i in ids if i in by_id]))
    rest = [i for i in by_id if i not in covered]
    if rest:
        groups.append((None, rest))
    import matplotlib

    # labels, names and fields are stored text, from anywhere: none is read as mathtext ('TF $x_$')
    with matplotlib.rc_context({"text.parse_math": False}):
        for sw, ids in groups:
            if not ids:
                continue
            results = [checked[i] for i in ids]
            meta = sw["analysis_data"] if sw else {}
            title = sw["name"] if sw else "runs outside any sweep"
            exp = _experiment_of(sw)
            summary = None
            if exp is not None:
                try:
                    summary = exp.summarize(results, meta.get("scale") or ("quick" if sw["quick"] else "full"),
                                            meta.get("overrides"))
                except Exception:  # noqa: BLE001 - runs this preset cannot analyse (names not registered here,
                    summary = None  # fields it needs missing): the generic analysis below, as for any sweep
            if summary is not None:  # a preset: its own analysis, claims, figures and text
                claims = [{**c.to_dict(), "source": title} for c in summary.claims]
                figs = _experiment_figures(exp, summary)
                curves = figure_curves(results, analyze(results))
                figs += [(f"{title}: held-out metric against samples", curves)] if curves else []
                analyses.append({"sweep": title, "summary": summary.to_dict()})
                sections.append(_experiment_section(sw, title, exp, summary, figs, results, by_id))
            else:
                a = analyze(results, meta.get("x", "task_params.N"), meta.get("separations"))
                claims = [{"text": s["text"], "held": s["held"], "source": title,
                           "verdict": _verdict(s)} for s in a["separations"]]
                thr = ", ".join(sorted({str(r.config.get("train", {}).get("threshold")) for r in results}))
                figs = [(f"{title}: samples to threshold ({thr}) against {a['x']}", figure_samples(a, thr)),
                        (f"{title}: held-out metric against samples", figure_curves(results, a))]
                figs = [f for f in figs if f[1]]
                analyses.append({"sweep": title, **a})
                sections.append(_sweep_section(sw, title, a, figs, results, by_id))
            all_claims += claims
            figures += figs
    data = {"claims": all_claims, "analyses": analyses, "environment": environment(rows),
            "status": store.status()}
    return _page(store, data, sections), data


def _experiment_of(sw: dict | None):
    """The registered experiment a sweep was planned from, if any (and if still known)."""
    if not sw or not sw.get("preset"):
        return None
    from ..experiments import EXPERIMENTS

    try:
        return EXPERIMENTS.get(sw["preset"])()
    except ArchsepError:
        return None


def _experiment_figures(exp, summary) -> list[tuple[str, str]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            paths = exp.figures(summary, Path(tmp))
        except Exception:  # noqa: BLE001 - partial data an experiment cannot draw yet: report without it
            return []
        for p in paths:
            if p.suffix == ".png":
                out.append((f"{summary.experiment} ({summary.scale}): {p.stem}", base64.b64encode(p.read_bytes()).decode()))
    return out


def _experiment_section(sw: dict, title: str, exp, summary, figs: list, results: list[RunResult], by_id: dict) -> str:
    out = [f"<h2>{_e(title)}</h2>",
           f"<p>preset <code>{_e(summary.experiment)}</code> at scale <code>{_e(summary.scale)}</code>: "
           f"{_e(exp.description)}; sweep id <code>{_e(sw['sweep_id'])}</code>, {len(results)} finished run(s)</p>"]
    for cap, b64 in figs:
        out.append(f"<figure><img class='fig' alt='{_e(cap)}' src='data:image/png;base64,{b64}'>"
                   f"<figcaption>{_e(cap)}</figcaption></figure>")
    out.append(f"<h3>Summary</h3><pre>{_e(exp.summary_text(summary))}</pre>")
    from ..experiments.samples import SampleComplexityExperiment

    if isinstance(exp, SampleComplexityExperiment):  # the same statistics any sweep gets
        out.append(_samples_tables(analyze(results, f"task_params.{exp.axis}", [list(s) for s in exp.separations])))
    out.append(_runs_table(results, by_id))
    out.append(f"<details><summary>sweep file</summary><pre>{_e(sw['source'])}</pre></details>")
    return "\n".join(out)


def _sweep_section(sw: dict | None, title: str, a: dict, figs: list, results: list[RunResult],
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


def _runs_table(results: list[RunResult], by_id: dict) -> str:
    out = []
    out.append("<h3>Runs</h3>")
    rows = []
    for r in sorted(results, key=lambda r: (str(r.config.get("label")), json.dumps(r.config.get("task_params"), sort_keys=True), r.config.get("seed", 0))):
        row = by_id[r.run_id]
        cfg = json.dumps(r.config, indent=2, sort_keys=True)
        err = f"<pre>{_e(r.error)}</pre>" if r.error else ""
        rows.append([f"<code>{_e(r.run_id)}</code>", _e(r.config.get("label") or r.config.get("arch")),
                     _e(json.dumps(r.config.get("task_params"), sort_keys=True)), _e(r.config.get("seed")),
                     _n(r.config.get("train", {}).get("lr"), "{:g}"),
                     f"<span class='{_e(r.status)}'>{_e(r.status)}</span>", _n(r.samples), _n(r.test_metric, "{:.4f}"),
                     _n(r.wall_s, "{:.1f}"),
                     _e(row.get("finished_at", ""))[:19],
                     f"<details><summary>config</summary><pre>{_e(cfg)}</pre>{err}</details>"])
    out.append(_table(["run", "arch", "task_params", "seed", "lr", "status", "samples", "test metric", "wall s",
                       "finished (UTC)", "config"], rows, {4, 6, 7, 8}))
    return "\n".join(out)


def _verdict(c: dict) -> str:
    if c["held"] is None or c.get("blocked"):
        return "no verdict"
    return "held" if c["held"] else "did not hold"


def _held(c: dict) -> str:
    v = c.get("verdict") or _verdict(c)
    cls = {"held": "held", "no verdict": "noverdict"}.get(v, "nothold")
    return f"<span class='{cls}'>{v}</span>"


def _page(store: Store, data: dict, sections: list[str]) -> str:
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


def write_report(out_dir: str | Path, dest: str | Path) -> Path:
    """Build the report of OUT's store and write it to `dest` (checked first: never the store, a
    directory, a link or a device; written atomically, see archsep.fileio)."""
    from ..fileio import atomic_write, check_output

    store = open_store(out_dir, create=False)
    try:
        check_output(dest, "-o", allow=("report.html",), example="report.html")  # before the report is built
    except ArchsepError:
        store.close()
        raise
    try:
        text, _ = build(store)
    finally:
        store.close()
    return atomic_write(dest, text, "-o", allow=("report.html",), example="report.html")
