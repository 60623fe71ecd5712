"""Paper A, Figure 4: string equality, eq-random and eq-one. A two-layer Transformer against
a one-layer one, LSTMs and Mamba-style models over lengths N."""
from __future__ import annotations

from ...results import Claim
from ..base import EXPERIMENTS
from ..size import SizeExperiment, SizeScale, lstm, mamba, pct, tf

VARIANTS = (("eq-random", {"variant": "eq-random"}), ("eq-one", {"variant": "eq-one"}))


@EXPERIMENTS.register("equality-fig4")
class EqualityFig4(SizeExperiment):
    description = ("String equality (eq-random, eq-one): 2-layer Transformer vs 1-layer, LSTM and Mamba-style "
                   "(paper A, Fig. 4)")
    runtime = {"quick": "about 1.2 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "equality"
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(2, (64,)), tf(1, (64,)), lstm((64, 256)), mamba((64, 256))),
                     lrs=(1e-3, 3e-4, 1e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1, variants=VARIANTS)
    quick = SizeScale(Ns=(20, 40), archs=(tf(2, (64,)), lstm((8, 64))),
                      lrs=(1e-3,), steps=2000, eval_every=100, val_size=500, test_size=2000, variants=VARIANTS)
    # cpu: eq-random only, N = 50 and 200, two seeds, 5k steps; TF-(2,64) costs 215 ms a step at N = 200
    cpu = SizeScale(Ns=(50, 200), archs=(tf(2, (64,)), lstm((64,))), lrs=(1e-3,), steps=5000, eval_every=250,
                    val_size=1000, test_size=5000, seeds=2, variants=VARIANTS[:1])
    scales = ("quick", "cpu", "full")

    def claims(self, table: dict, s: SizeScale) -> list[Claim]:
        if self.scale_name(s) == "cpu":
            t, l_ = self.acc(table, "TF-(2,64) [eq-random]", 200, 64), self.acc(table, "LSTM-64 [eq-random]", 200, 64)
            return [Claim("ordering", f"eq-random, N=200: TF-(2,64) above LSTM-64 ({pct(t)} vs {pct(l_)})",
                          t is not None and l_ is not None and t > l_, {"N": 200, "TF-(2,64)": t, "LSTM-64": l_})]
        hi = max(s.Ns)
        out = []
        widths = next(a.widths for a in s.archs if a.label == "LSTM")
        for v, _ in s.variants:
            t = self.acc(table, f"TF-(2,64) [{v}]", hi, 64)
            for w in sorted(widths):
                l_ = self.acc(table, f"LSTM-{w} [{v}]", hi, w)
                out.append(Claim("ordering", f"{v}: TF-(2,64) beats LSTM-{w} by >= 2 points at N={hi} "
                                             f"({pct(t)} vs {pct(l_)})",
                                 t is not None and l_ is not None and t >= l_ + 0.02,
                                 {"N": hi, "TF-(2,64)": t, f"LSTM-{w}": l_}))
        return out
