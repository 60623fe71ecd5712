"""Run a preset end to end: its runs, runs.csv, summary.json, figures and a text summary."""
from __future__ import annotations

import os
import time
from pathlib import Path

from ..config import RunConfig
from ..runs.runner import run_configs
from ..runs.store import prepare_out
from . import PRESETS
from .base import write_json
from .samples import write_runs_csv


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def reproduce(name: str, quick: bool = False, out: str | Path | None = None, workers: int | None = None,
              device: str = "auto", progress: bool = True) -> dict:
    """Run preset `name`; returns its summary (also written to OUT/summary.json)."""
    preset = PRESETS.get(name)()
    out_dir = prepare_out(out or Path("results") / (name + ("-quick" if quick else "")))
    t0 = time.perf_counter()
    if callable(getattr(preset, "run", None)):  # a preset with its own kind of results (paper A's size grids)
        return _finish(preset, preset.run(out_dir, quick, workers or default_workers(), device, progress),
                       quick, out_dir, t0)
    configs = preset.configs(quick, device)
    from ..runs.sweep import from_preset

    # the preset is a sweep: registering it lets `archsep status/report OUT` see the plan
    sweep = from_preset(name, quick, device) if configs and all(isinstance(c, RunConfig) for c in configs) else None
    results = run_configs(configs, out_dir, workers or default_workers(), progress=progress, desc=name,
                          sweep=sweep)
    write_runs_csv(results, out_dir / "runs.csv")
    return _finish(preset, results, quick, out_dir, t0)


def _finish(preset, results: list, quick: bool, out_dir: Path, t0: float) -> dict:
    summary = preset.summarize(results, quick)
    summary["wall_s"] = round(time.perf_counter() - t0, 1)
    summary["figures"] = [p.name for p in preset.plot(results, summary, out_dir)]
    write_json(out_dir / "summary.json", summary)
    (out_dir / "summary.txt").write_text(text_summary(preset, summary) + "\n")
    return summary


def text_summary(preset, summary: dict) -> str:
    if callable(getattr(preset, "text_summary", None)):  # the preset formats its own results
        return preset.text_summary(summary)
    lines = [f"{summary['preset']}{' (quick)' if summary.get('quick') else ''}: "
             f"{sum(p.get('n_runs', 0) for p in summary.get('points', []))} runs in {summary.get('wall_s', 0):.0f}s"]
    published = getattr(preset, "published", {})
    if summary.get("points"):
        lines.append(f"  {'arch':<6}{'N':>4}{'mean':>10}{'median':>10}  {'mean 95% CI':<20}{'censored':>9}  published")
        for p in sorted(summary["points"], key=lambda p: (p["arch"], p["N"])):
            ci = "n/a" if p["ci"][0] is None else f"[{p['ci'][0]:.0f}, {p['ci'][1]:.0f}]"
            mean = "n/a" if p["mean"] is None else f"{p['mean']:.0f}"
            pub = published.get(p["arch"], {}).get(p["N"], "")
            lines.append(f"  {p['arch']:<6}{p['N']:>4}{mean:>10}{p['median_text']:>10}  {ci:<20}"
                         f"{p['n_censored']:>5}/{p['n_runs']:<3}  {pub}")
    for arch, f in summary.get("fits", {}).items():
        a = f["alpha"]
        ci = f["ci"]
        txt = "n/a" if a is None else f"{a:.2f}"
        citxt = "" if ci[0] is None else f" (95% CI [{ci[0]:.2f}, {ci[1]:.2f}])"
        lines.append(f"  alpha[{arch}] = {txt}{citxt}{' (censored runs enter at the budget)' if f.get('censored_data') else ''}")
    for c in summary.get("claims", []):
        lines.append(f"  claim {'HELD' if c['held'] else 'DID NOT HOLD'}: {c['text']}")
    return "\n".join(lines)
