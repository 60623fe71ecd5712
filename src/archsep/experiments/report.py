"""What `archsep report` puts on its page: one section per sweep of a store. A preset's sweep
gets its experiment's own summary, claims and figures (and the statistics any sweep gets); any
other sweep gets the grid analysis of its runs (`archsep.analysis.grid`) with the separations
its file declares. `archsep.reporting.report` renders the page."""
from __future__ import annotations

import base64
import tempfile
from pathlib import Path

from ..analysis.grid import analyze_runs
from ..analysis.lengths import length_points
from ..analysis.size import analyze_size
from .size_search import SearchScale
from ..errors import ArchsepError
from ..fileio import atomic_write, check_output
from ..registry import reading
from ..reporting.plots import accuracy_vs_length, accuracy_vs_width, size_figures
from ..reporting.report import (environment, experiment_section, figure_curves, figure_samples, page,
                                size_section, sweep_section, verdict)
from ..results import RunResult
from ..store import Store, open_store
from .base import EXPERIMENTS, Experiment
from .samples import SampleComplexityExperiment

def build(store: Store) -> tuple[str, dict]:
    """The report's HTML and its analysis data. Reading never imports (`registry.reading`)."""
    with reading():
        return _build(store)


def _build(store: Store) -> tuple[str, dict]:
    rows = store.rows()
    if not rows:
        raise ArchsepError.at("store", f"the store '{store.path}' holds no finished runs yet")
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
    for planned in sweeps:
        ids = [p["run_id"] for p in store.planned(planned["sweep_id"])]
        covered.update(ids)
        groups.append((planned, [i for i in ids if i in by_id]))
    rest = [i for i in by_id if i not in covered]
    if rest:
        groups.append((None, rest))
    import matplotlib

    # labels, names and fields are stored text, from anywhere: none is read as mathtext ('TF $x_$')
    with matplotlib.rc_context({"text.parse_math": False}):
        searches: set[tuple] = set()
        for sw, ids in groups:
            if not ids:
                continue
            results = [checked[i] for i in ids]
            meta = sw["analysis_data"] if sw else {}
            title = sw["name"] if sw else "runs outside any sweep"
            exp = _experiment_of(sw)
            scale = meta.get("scale")
            if exp is not None and sw is not None and scale in exp.scales \
                    and isinstance(exp.scale(scale), SearchScale):  # a search: one section for all its rungs
                if (sw["preset"], scale) in searches:
                    continue
                searches.add((sw["preset"], scale))
                results, title = list(checked.values()), f"{sw['preset']} --scale {scale} (a search: every rung)"
            lfigs, lengths = _length_figures(title, results)  # runs with train.eval_lengths
            summary = None
            if exp is not None and sw is not None:
                try:
                    summary = exp.summarize(results, meta.get("scale") or ("quick" if sw["quick"] else "full"),
                                            meta.get("overrides"))
                except Exception:  # noqa: BLE001 - runs this preset cannot analyse (names not registered here,
                    summary = None  # fields it needs missing): the generic analysis below, as for any sweep
            if summary is not None and exp is not None and sw is not None:  # a preset: its own analysis and text
                claims = [{**c.to_dict(), "source": title} for c in summary.claims]
                figs = _experiment_figures(exp, summary)
                curves = figure_curves(results, analyze_runs(results))
                figs += [(f"{title}: held-out metric against samples", curves)] if curves else []
                figs += lfigs
                analyses.append({"sweep": title, "summary": summary.to_dict()})
                sections.append(_experiment_section(sw, title, exp, summary, figs, results, by_id))
            elif meta.get("measure") == "size":  # accuracy per cell, lr chosen on validation, as paper A's presets
                a = analyze_size(results, meta.get("x", "task_params.N"), meta.get("width"))
                claims = []
                figs = _drawn(title, lambda out, a=a, title=title: size_figures(a["cells"], a["points"], title, out)
                              + accuracy_vs_width(a["points"], title, out / "accuracy_vs_width"))
                figs += lfigs
                analyses.append({"sweep": title, **a})
                sections.append(size_section(sw, title, a, figs, results, by_id))
            else:
                a = analyze_runs(results, meta.get("x", "task_params.N"), meta.get("separations"))
                claims = [{"text": s["text"], "held": s["held"], "source": title,
                           "verdict": verdict(s)} for s in a["separations"]]
                thr = ", ".join(sorted({str(r.config.get("train", {}).get("threshold")) for r in results}))
                drawn = [(f"{title}: samples to threshold ({thr}) against {a['x']}", figure_samples(a, thr)),
                         (f"{title}: held-out metric against samples", figure_curves(results, a))]
                figs = [(cap, png) for cap, png in drawn if png] + lfigs
                analyses.append({"sweep": title, **a})
                sections.append(sweep_section(sw, title, a, figs, results, by_id))
            if lengths is not None:
                analyses[-1]["lengths"] = lengths
            all_claims += claims
            figures += figs
    data = {"claims": all_claims, "analyses": analyses, "environment": environment(rows),
            "status": store.status()}
    return page(store, data, sections), data


def _length_figures(title: str, results: list[RunResult]) -> tuple[list[tuple[str, str]], dict | None]:
    """The accuracy-against-length figure of the runs evaluated at other lengths
    (`train.eval_lengths`) and its data; none without such runs."""
    lengths = length_points(results)
    if not lengths["points"]:
        return [], None
    return _drawn(title, lambda out: accuracy_vs_length(lengths, title, out / "accuracy-vs-length")), lengths


def _experiment_of(sw: dict | None) -> Experiment | None:
    """The registered experiment a sweep was planned from, if any (and if still known)."""
    if not sw or not sw.get("preset"):
        return None
    try:
        return EXPERIMENTS.get(sw["preset"])()
    except ArchsepError:
        return None


def _experiment_figures(exp: Experiment, summary) -> list[tuple[str, str]]:
    return _drawn(f"{summary.experiment} ({summary.scale})", lambda out: exp.figures(summary, out))


def _drawn(title: str, draw) -> list[tuple[str, str]]:
    """(caption, base64 PNG) of each figure `draw(directory)` writes; none where it cannot draw."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        try:
            paths = draw(Path(tmp))
        except Exception:  # noqa: BLE001 - partial data that cannot be drawn yet: report without it
            return []
        for p in paths:
            if p.suffix == ".png":
                out.append((f"{title}: {p.stem}", base64.b64encode(p.read_bytes()).decode()))
    return out


def _experiment_section(sw: dict, title: str, exp: Experiment, summary, figs: list, results: list[RunResult],
                        by_id: dict) -> str:
    lead = (f"preset {summary.experiment} at scale {summary.scale}: {exp.description}; sweep id {sw['sweep_id']}, "
            f"{len(results)} finished run(s)")
    tables = None
    if isinstance(exp, SampleComplexityExperiment):  # the same statistics any sweep gets
        tables = analyze_runs(results, f"task_params.{exp.axis}", [list(s) for s in exp.separations])
    return experiment_section(title, lead, figs, exp.summary_text(summary), tables, results, by_id, sw["source"])


def write_report(out_dir: str | Path, dest: str | Path) -> Path:
    """Build the report of OUT's store and write it to `dest` (checked first: never the store, a
    directory, a link or a device; written atomically, see archsep.fileio)."""
    store = open_store(out_dir, create=False)
    try:
        check_output(dest, "dest", allow=("report.html",), example="report.html")  # before the report is built
    except ArchsepError:
        store.close()
        raise
    try:
        text, _ = build(store)
    finally:
        store.close()
    return atomic_write(dest, text, "dest", allow=("report.html",), example="report.html")
