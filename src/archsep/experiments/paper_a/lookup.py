"""Paper A, Figure 2 (left): index lookup. A one-layer Transformer of width 64 against LSTM,
Mamba-style and DSS models over lengths N."""
from __future__ import annotations

from ...results import Claim
from ..base import EXPERIMENTS
from ..size import SizeExperiment, SizeScale, dss, lstm, mamba, pct, tf


@EXPERIMENTS.register("lookup-fig2")
class LookupFig2(SizeExperiment):
    description = "Index lookup: 1-layer Transformer vs LSTM, Mamba-style and DSS over lengths (paper A, Fig. 2 left)"
    runtime = {"quick": "about 1.3 min (2 CPU cores)", "full": "hours; meant for a GPU"}
    task = "index-lookup"
    # one head, as in Theorem 1's construction. Variable training lengths make the largest
    # indices rare (p = N needs k = N), so most of the budget goes into the last few indices.
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(1, (64,), heads=1), lstm((64, 128, 256)),
                                                     mamba((64, 128, 256)), dss((64, 128, 256))),
                     lrs=(2e-3, 1e-3, 3e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1)
    quick = SizeScale(Ns=(20, 50, 100), archs=(tf(1, (64,), heads=1), lstm((64,))),
                      lrs=(2e-3,), steps=4000, eval_every=200, val_size=500, test_size=5000)

    def claims(self, table: dict, s: SizeScale) -> list[Claim]:
        N = 100 if 100 in s.Ns else max(s.Ns)
        t, l_ = self.acc(table, "TF-(1,64)", N, 64), self.acc(table, "LSTM-64", N, 64)
        return [Claim("threshold", f"TF-(1,64) reaches >= 95% test accuracy on index lookup at N={N} ({pct(t)})",
                      t is not None and t >= 0.95, {"N": N, "TF-(1,64)": t}),
                Claim("ordering", f"LSTM-64 is far lower at N={N}: at least 30 points below TF-(1,64) "
                                  f"({pct(l_)} vs {pct(t)})",
                      t is not None and l_ is not None and l_ <= t - 0.30, {"N": N, "LSTM-64": l_, "TF-(1,64)": t})]
