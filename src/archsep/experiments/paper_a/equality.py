"""Paper A, Figure 4: string equality, eq-random and eq-one. A two-layer Transformer against
a one-layer one, LSTMs and Mamba-style models over lengths N."""
from __future__ import annotations

from ...results import Claim
from ..base import EXPERIMENTS
from ..size import NOT_FAIR_FULL, SizeExperiment, SizeScale, lstm, mamba, pct, tf
from ..size_search import LRS, TIE, SearchScale, search_text

VARIANTS = (("eq-random", {"variant": "eq-random"}), ("eq-one", {"variant": "eq-one"}))
_ARMS = (("TF-(2,64)", 'arch = "tf-preln"\nmodel_params = { heads = 4, layers = 2, positions = "learned", '
                       'causal = true, width = 64 }'),
         ("LSTM-64", 'arch = "lstm"\nmodel_params = { layers = 1, hidden = 64 }'),
         ("Mamba-64", 'arch = "mamba"\nmodel_params = { layers = 1, width = 64 }'))
# "the paper's search" on equality (issue 54): TF-(2,64), LSTM-64 and Mamba-64 on both variants,
# each arm (an architecture on a variant) its best of a search over the learning rate (1e-2 down to
# 1e-4), successive halving at 1k, 5k, 20k and 80k steps keeping half (and any trial within `TIE`
# standard errors of the last kept one's validation error: near chance their order is noise),
# chosen on validation, the winner with 3 seeds; the cpu scale's protocol otherwise, validation
# every 250 steps. The last rung is calibrated (docs/results/equality-one-controls/, issue 54): on
# eq-one at N = 20 the slowest control that passes, LSTM-64 at lr 1e-3, reached 99% validation at
# 53.5k steps and TF-(2,64) at lr 3e-4 was at 98.8% at 60k, both beyond the former last rung of
# 20k (under which TF-(2,64)'s eq-one control failed); 80k is 1.5x the LSTM's count
_VARIANT_ARMS = [(f"{lab} [{v}]", f'{arm}\ntask_params = {{ variant = "{v}" }}')
                 for v, _ in VARIANTS for lab, arm in _ARMS]
SEARCH = search_text("equality-fig4-search", "equality", _VARIANT_ARMS, [1000, 5000, 20000, 80000], 0.5, 5,
                     {"train.lr": LRS}, {label: {} for label, _ in _VARIANT_ARMS}, TIE)


@EXPERIMENTS.register("equality-fig4")
class EqualityFig4(SizeExperiment):
    description = ("String equality (eq-random, eq-one): 2-layer Transformer vs 1-layer, LSTM and Mamba-style "
                   "(paper A, Fig. 4)")
    runtime = {"quick": "about 1.2 min (2 CPU cores)", "full": "hours; meant for a GPU",
               "search": "hours per length on 2 cores, N >= 200 a GPU's (--dry-run prices it; --at 20 first)"}
    task = "equality"
    caveats = {"full": NOT_FAIR_FULL,
               "search": "reduced bounds (<= 80k steps; the paper's: <= 250k, lr down to 1e-6): an arm that fails "
                         "its control here is not evidence against the paper"}
    full = SizeScale(Ns=(20, 50, 100, 200, 400), archs=(tf(2, (64,)), tf(1, (64,)), lstm((64, 256)), mamba((64, 256))),
                     lrs=(1e-3, 3e-4, 1e-4), steps=20_000, eval_every=250, val_size=2000, seeds=1, variants=VARIANTS)
    quick = SizeScale(Ns=(20, 40), archs=(tf(2, (64,)), lstm((8, 64))),
                      lrs=(1e-3,), steps=2000, eval_every=100, val_size=500, test_size=2000, variants=VARIANTS)
    # cpu: the fair protocol (docs/paper_a.md): TF-(2,64) and LSTM-64 on both variants, one
    # 20k-step budget and one learning rate, 3e-4, for every arm, 3 seeds, every run to the target
    # or its budget; N = 20 (every arm's control) and 200 (the paper has the LSTM struggle beyond
    # N = 100). Calibrated at N = 200 (docs/results/equality-controls/, one seed, 20k steps): at
    # 1e-3 neither model left chance; at 3e-4 TF-(2,64) reached 98.6% and LSTM-64 stayed at chance,
    # so the one rate is the one at which anything learned, and a second would double the preset
    # past 2 hours. The former cpu scale (eq-random alone, 5k steps, one lr, 2 seeds) had both
    # models at chance at N = 200: its claim could not fail
    cpu = SizeScale(Ns=(20, 200), archs=(tf(2, (64,)), lstm((64,))), lrs=(3e-4,), steps=20_000,
                    eval_every=250, val_size=1000, test_size=2000, seeds=3, variants=VARIANTS)
    search = SearchScale(SEARCH, Ns=(20, 100, 200, 400), tf="",
                         families=tuple(label for label, _ in _VARIANT_ARMS), settle=True)
    scales = ("quick", "cpu", "search", "full")

    def claims(self, table: dict, s: SizeScale | SearchScale) -> list[Claim]:
        if isinstance(s, SearchScale):
            return self.search_claims(s)
        if self.scale_name(s) == "cpu":
            return self.fair_claims(s)
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

    def fair_claims(self, s: SizeScale) -> list[Claim]:
        """eq-random: each arm's control at the shortest length; at the longest, TF-(2,64) above the
        best trivial baseline (counting symbols) and LSTM-64 below TF-(2,64) (`versus`); each arm
        reading the order at both lengths (`reads`: the same-counts negatives). eq-one:
        every arm's control, and every arm doing well (the control's level) at the longest
        length. Counting symbols is exact on eq-one, so that claim is the paper's "every model
        does well", not a separation."""
        lo, hi = min(s.Ns), max(s.Ns)
        names = s.labels()
        tf_, rest = names[0], tuple(f"{n} [eq-random]" for n in names[1:])
        out = self.versus(s, f"{tf_} [eq-random]", rest, "eq-random")
        out += [self.reads(f"{lab} [eq-random]", N, out[i], "same-counts", "reads the order", "counting symbols")
                for i, lab in enumerate(names) for N in (lo, hi)]
        controls = {lab: self.control(f"{lab} [eq-one]", lo) for lab in names}
        out += list(controls.values())
        out += [self.reaches(f"{lab} [eq-one]", hi, controls[lab]) for lab in names]
        return out

    def search_claims(self, s: SearchScale) -> list[Claim]:
        """Paper A's equality statements on each arm's winner. eq-random: every arm's control at
        the shortest length; at every longer length TF-(2,64) above the best trivial baseline
        (counting symbols) and reading the order (>= 95% on the same-counts negatives, where
        counting scores 0%: a Transformer that only counts fails it); beyond N = 100, where the
        paper has the LSTM struggle, LSTM-64 and Mamba-64 below TF-(2,64); each recurrent arm
        reading the order at the shortest length (it learned equality, not a count). eq-one:
        every arm's control and every arm at the control's level at each longer length (counting
        is exact there: the paper's "every model does well", not a separation)."""
        lo = min(s.Ns)
        controls = {lab: self.control(lab, lo) for lab in s.families}
        out = list(controls.values())
        if len(s.Ns) < 2:
            return out
        tf_, rest = "TF-(2,64) [eq-random]", ("LSTM-64 [eq-random]", "Mamba-64 [eq-random]")
        longer = [N for N in s.Ns if N > lo]
        out += [self.beats_baseline(tf_, N, controls[tf_], "eq-random") for N in longer]
        out += [self.reads(tf_, N, controls[tf_], "same-counts", "reads the order", "counting symbols")
                for N in (lo, *longer)]
        out += [self.below(lab, tf_, N, controls[lab]) for lab in rest for N in longer if N > 100]
        out += [self.reads(lab, lo, controls[lab], "same-counts", "reads the order", "counting symbols")
                for lab in rest]
        out += [self.reaches(lab, N, controls[lab]) for lab in s.families if lab.endswith("[eq-one]")
                for N in longer]
        return out
