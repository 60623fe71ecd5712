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

    # cpu: the fair protocol (docs/paper_a.md): the paper's 2-layer Mamba (d_state 8) at widths
    # 16, 32 and 64 against TF-(1,64), one 6k-step budget and lr grid {1e-3, 3e-4}, 3 seeds; N = 20
    # (the controls) and 50, a length where the widths are not all at chance (the former scale had
    # every width at chance at N = 100, in reverse order, one lr and 2 seeds). No plateau stop or
    # learning-rate race (see lookup-fig2). Widths 128 and up are the full scale's
    cpu = SizeScale(Ns=(20, 50), archs=(mamba((16, 32, 64), layers=2, d_state=8), tf(1, (64,), heads=1)),
                    lrs=(1e-3, 3e-4), steps=6000, eval_every=250, val_size=1000, test_size=2000, seeds=3)
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
        """Each arm's control at the shortest length; at the longest, accuracy rising with width
        (each width's interval below the next one's) and every width below TF-(1,64). A width
        that did not learn at the shortest length gets no verdict."""
        lo, hi = min(s.Ns), max(s.Ns)
        names = [f"Mamba-{w}" for w in s.archs[0].widths]
        controls = {lab: self.control(lab, lo) for lab in (*names, "TF-(1,64)")}
        out = list(controls.values())
        out += [self.below(a, b, hi, controls[a]) for a, b in zip(names, names[1:])]
        out += [self.below(lab, "TF-(1,64)", hi, controls[lab]) for lab in names]
        return out


def _mean(values: list[float | None]) -> float | None:
    """The mean, or None when a value is missing."""
    known = [v for v in values if v is not None]
    return None if len(known) < len(values) else sum(known) / len(known)
