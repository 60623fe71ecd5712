"""Paper B, Figure 3 (camera-ready): samples to MSE < 0.88 on the hermite2 link as q grows,
the Transformer with H = q heads (the axis q is carried in the 'N' slot of the points)."""
from __future__ import annotations

import math
from pathlib import Path

from ...results import Claim, Summary
from ..base import EXPERIMENTS, _fmt_setting, claim_lines, settings_text
from ..samples import SETTING_NAMES, Arch, SampleComplexityExperiment, Scale, _fmt, _median


@EXPERIMENTS.register("qstr-fig3")
class Fig3(SampleComplexityExperiment):
    description = "qSTR, hermite2 link, N=7: samples to test MSE < 0.88 as q grows (TF with H = q heads)"
    runtime = {"quick": "about 3 min (2 CPU cores)", "full": "about 4 min (2 CPU cores)"}
    axis = "q"
    TF = Arch("TF", "tf-b", {"mlp_width": 100})
    common = {"lr": 1e-4, "weight_decay": 0.1, "batch_size": 64, "threshold": 0.88}
    full = Scale(Ns=(1, 2, 3, 4, 5), seeds=5, archs=(TF,),
                 train={**common, "budget": 2_000_000, "eval_size": 5000},
                 task_params={"N": 7, "d": 10, "link": "hermite2"})
    quick = Scale(Ns=(1, 2, 3), seeds=1, archs=(TF,),
                  train={**common, "budget": 300_000, "eval_size": 2000},
                  task_params={"N": 7, "d": 10, "link": "hermite2"})
    separations = ()
    growth = 1.25  # a rise beyond seed-to-seed noise

    def model_params(self, arch, x: int) -> dict:
        return {**arch.params, "heads": x}  # H = q heads, as the theory needs

    def claims(self, points, fits, samples, budget, censored=None) -> list[Claim]:
        out = []
        tf = sorted((p for p in points if p["arch"] == "TF"), key=lambda p: p["N"])
        if tf:
            cens = sum(p["n_censored"] for p in tf)
            thr = _fmt_setting(getattr(self, "settings", {}).get("threshold", self.common["threshold"]))
            out.append(Claim("threshold", f"TF with H = q heads reaches MSE < {thr} for every q ({cens} censored run(s))",
                             cens == 0, {"censored": cens}))
            lo, hi = tf[0], tf[-1]
            mlo, mhi = _median(points, "TF", lo["N"]), _median(points, "TF", hi["N"])
            ratio = math.inf if mhi is None else (mhi / mlo if mlo else math.nan)
            out.append(Claim("growth", f"samples grow with q: median at q={hi['N']} ({_fmt(mhi, budget)}) is more than "
                                       f"{self.growth}x the median at q={lo['N']} ({_fmt(mlo, budget)}; ratio {ratio:.2f})",
                             bool(mlo is not None and ratio > self.growth),
                             {"q_low": lo["N"], "q_high": hi["N"], "median_low": mlo, "median_high": mhi, "ratio": ratio}))
        return out

    def figures(self, summary: Summary, out: Path) -> list[Path]:
        from ...reporting.plots import plt, save

        fig, ax = plt.subplots(figsize=(5.2, 3.8))
        for r in summary.results:
            ax.plot(r.config["task_params"]["q"], r.samples if r.samples else float("nan"),
                    "^" if r.censored else "o", color="C0", alpha=0.5, mfc="none" if r.censored else "C0")
        pts = sorted((p for p in summary.data["points"] if p["median"] is not None), key=lambda p: p["N"])
        ax.plot([p["N"] for p in pts], [p["median"] for p in pts], "-", color="C0", label="TF (H = q), median")
        ax.set_xlabel("q (tokens per label)")
        ax.set_ylabel(f"samples to MSE < {_fmt_setting(summary.data['threshold'])}")
        ax.set_yscale("log")
        ax.set_title(self.figure_title(summary), fontsize=8)
        ax.legend()
        return save(fig, out / "figure")

    def text(self, summary: Summary) -> str:
        lines = [f"{summary.experiment} ({summary.scale}): {summary.wall_s or 0:.0f}s; "
                 f"{settings_text(summary.data, SETTING_NAMES)}",
                 f"  {'q':>2} {'median':>10} {'mean':>10} {'censored':>9}"]
        for p in sorted(summary.data["points"], key=lambda p: p["N"]):
            mean = "n/a" if p["mean"] is None else f"{p['mean']:.0f}"
            lines.append(f"  {p['N']:>2} {p['median_text']:>10} {mean:>10} {p['n_censored']:>5}/{p['n_runs']}")
        return "\n".join(lines + claim_lines(summary.claims))
