"""Figures for papers: PNG and SVG side by side."""
from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MARKERS = "osD^vP*X"


def save(fig, stem: Path) -> list[Path]:
    paths = []
    for ext in ("png", "svg"):
        p = stem.with_suffix(f".{ext}")
        fig.savefig(p, dpi=150, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def samples_vs_N(summary: dict, stem: Path, title: str = "") -> list[Path]:
    """Mean samples-to-threshold vs N (log-log) with bootstrap CIs; runs censored at the budget
    make the mean a lower bound, drawn as an open upward triangle."""
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    archs = sorted({p["arch"] for p in summary["points"]})
    for k, arch in enumerate(archs):
        pts = sorted((p for p in summary["points"] if p["arch"] == arch and p["mean"] is not None), key=lambda p: p["N"])
        if not pts:
            continue
        N = [p["N"] for p in pts]
        mean = [p["mean"] for p in pts]
        lo = [p["mean"] - (p["ci"][0] if p["ci"][0] is not None else p["mean"]) for p in pts]
        hi = [(p["ci"][1] if p["ci"][1] is not None else p["mean"]) - p["mean"] for p in pts]
        fit = summary.get("fits", {}).get(arch, {})
        lab = arch if fit.get("alpha") is None else f"{arch} (α={fit['alpha']:.2f})"
        line = ax.errorbar(N, mean, yerr=[lo, hi], marker=MARKERS[k % len(MARKERS)], capsize=3, label=lab)
        cN = [p["N"] for p in pts if p["n_censored"]]
        cM = [p["mean"] for p in pts if p["n_censored"]]
        if cN:
            ax.scatter(cN, cM, marker="^", s=120, facecolors="none", edgecolors=line[0].get_color(), zorder=5)
    if any(p["n_censored"] for p in summary["points"]):
        ax.scatter([], [], marker="^", facecolors="none", edgecolors="k", label="censored runs (lower bound)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    Ns = sorted({p["N"] for p in summary["points"]})
    ax.set_xticks(Ns)  # the measured lengths, written plainly, not as 2x10^0
    ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("sequence length N")
    ax.set_ylabel(f"samples to test MSE < {summary['threshold']}")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return save(fig, stem)
