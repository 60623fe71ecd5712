"""Paper A, Figure 2 (right): bounded Dyck-(2,2). One-layer Transformers of growing width and
a two-layer one against LSTM-64 and Mamba-style-64 over lengths N."""
from __future__ import annotations

from ...results import Claim
from ..base import EXPERIMENTS
from ..size import SizeExperiment, SizeScale, lstm, mamba, pct, tf


@EXPERIMENTS.register("dyck-fig2")
class DyckFig2(SizeExperiment):
    description = "Bounded Dyck-(2,2): TF-(1,w) and TF-(2,64) vs LSTM-64 and Mamba-style-64 (paper A, Fig. 2 right)"
    runtime = {"quick": "about 1 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "dyck"
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(1, (64, 128, 256)), tf(2, (64,)), lstm((64,)), mamba((64,))),
                     lrs=(1e-3, 3e-4, 1e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(20, 50, 100), archs=(tf(1, (64,)), lstm((64,))),
                      lrs=(1e-3,), steps=1000, eval_every=100, val_size=500, test_size=5000)
    # cpu: N up to 200, two seeds, one learning rate; TF-(2,64) (a two-layer model is 6x the
    # cost at N = 200) is left to the full scale
    cpu = SizeScale(Ns=(50, 100, 200), archs=(tf(1, (64,)), lstm((64,))),
                    lrs=(1e-3,), steps=5000, eval_every=250, val_size=1000, test_size=5000, seeds=2)
    scales = ("quick", "cpu", "full")

    def claims(self, table: dict, s: SizeScale) -> list[Claim]:
        if self.scale_name(s) == "cpu":
            ls, t = self.acc(table, "LSTM-64", 200, 64), self.acc(table, "TF-(1,64)", 200, 64)
            return [Claim("threshold", f"N=200: LSTM-64 >= 95% on Dyck-(2,2) ({pct(ls)})",
                          ls is not None and ls >= 0.95, {"N": 200, "LSTM-64": ls}),
                    Claim("threshold", f"N=200: TF-(1,64) <= 75% on Dyck-(2,2) ({pct(t)})",
                          t is not None and t <= 0.75, {"N": 200, "TF-(1,64)": t})]
        lo, hi = min(s.Ns), max(s.Ns)
        by_N = {N: self.acc(table, "LSTM-64", N, 64) for N in s.Ns}
        out = [Claim("threshold", "LSTM-64 reaches >= 95% on Dyck-(2,2) at every length ("
                     + ", ".join(f"N={N}: {pct(v)}" for N, v in by_N.items()) + ")",
                     all(v is not None and v >= 0.95 for v in by_N.values()), {"LSTM-64": by_N})]
        a, b = self.acc(table, "TF-(1,64)", lo, 64), self.acc(table, "TF-(1,64)", hi, 64)
        seq = {N: self.acc(table, "TF-(1,64)", N, 64) for N in s.Ns}
        out.append(Claim("trend", f"TF-(1,64)'s Dyck accuracy falls as N grows (N={lo}: {pct(a)} -> N={hi}: {pct(b)}; "
                                  "held = lower at the largest N than at the smallest, by >= 2 points)",
                         a is not None and b is not None and b <= a - 0.02, {"TF-(1,64)": seq}))
        return out
