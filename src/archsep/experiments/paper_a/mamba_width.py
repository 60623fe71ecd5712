"""Paper A, Figure 3: index lookup with Mamba-style models across widths and lengths."""
from __future__ import annotations

from ...results import Claim
from ..base import EXPERIMENTS
from ..size import SizeExperiment, SizeScale, mamba, pct, tf


@EXPERIMENTS.register("mamba-width")
class MambaWidth(SizeExperiment):
    description = "Index lookup with Mamba-style models across widths and lengths (paper A, Fig. 3)"
    runtime = {"quick": "about 2 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "index-lookup"
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(mamba((32, 64, 128, 256, 512)),),
                     lrs=(1e-3, 3e-4, 1e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(10, 20, 40), archs=(mamba((16, 32, 64), d_state=8),),
                      lrs=(3e-3,), steps=1500, eval_every=100, val_size=500, test_size=2000)

    # cpu: widths 16-64 (d_state 8) against TF-(1,64) at N = 20..100, two seeds, 2000 steps
    cpu = SizeScale(Ns=(20, 50, 100), archs=(mamba((16, 32, 64), d_state=8), tf(1, (64,), heads=1)),
                    lrs=(3e-3,), steps=2000, eval_every=250, val_size=1000, test_size=5000, seeds=2)
    scales = ("quick", "cpu", "full")

    def claims(self, table: dict, s: SizeScale) -> list[Claim]:
        widths = s.archs[0].widths
        if self.scale_name(s) == "cpu":
            return self.cpu_claims(table, s)
        lo, hi = min(s.Ns), max(s.Ns)
        falls = [(w, self.acc(table, f"Mamba-{w}", lo, w), self.acc(table, f"Mamba-{w}", hi, w)) for w in widths]
        out = [Claim("trend", "At every width, Mamba's accuracy is lower at the largest N than at the smallest ("
                     + "; ".join(f"w={w}: {pct(a)} -> {pct(b)}" for w, a, b in falls) + ")",
                     all(a is not None and b is not None and b < a for _, a, b in falls),
                     {"by_width": {w: [a, b] for w, a, b in falls}})]

        def mean(w: int) -> float | None:
            return _mean([self.acc(table, f"Mamba-{w}", N, w) for N in s.Ns])

        narrow, wide = mean(min(widths)), mean(max(widths))
        out.append(Claim("ordering", f"Wider is better: averaged over N, Mamba-{max(widths)} beats Mamba-{min(widths)} "
                                     f"by >= 2 points ({pct(wide)} vs {pct(narrow)})",
                         wide is not None and narrow is not None and wide >= narrow + 0.02,
                         {"wide": wide, "narrow": narrow}))
        return out

    def cpu_claims(self, table: dict, s: SizeScale) -> list[Claim]:
        widths = s.archs[0].widths
        means = {w: [self.acc(table, f"Mamba-{w}", N, w) for N in s.Ns] for w in widths}
        avg = {w: _mean(m) for w, m in means.items()}
        rising = all((lo := avg[a]) is not None and (hi := avg[b]) is not None and hi > lo
                     for a, b in zip(widths, widths[1:]))
        out = [Claim("trend", "Mamba's accuracy (mean over N) rises with width ("
                     + ", ".join(f"w={w}: {pct(v)}" for w, v in avg.items()) + ")", rising, {"mean": avg})]
        for N in [N for N in s.Ns if N >= 100]:
            t = self.acc(table, "TF-(1,64)", N, 64)
            ms = {w: self.acc(table, f"Mamba-{w}", N, w) for w in widths}
            out.append(Claim("ordering", f"N={N}: every Mamba width is below TF-(1,64) ({pct(t)} vs "
                             + ", ".join(f"Mamba-{w}: {pct(v)}" for w, v in ms.items()) + ")",
                             t is not None and all(v is not None and v < t for v in ms.values()),
                             {"N": N, "TF-(1,64)": t, **{f"Mamba-{w}": v for w, v in ms.items()}}))
        return out


def _mean(values: list[float | None]) -> float | None:
    """The mean, or None when a value is missing."""
    known = [v for v in values if v is not None]
    return None if len(known) < len(values) else sum(known) / len(known)
