"""Paper B, Figure 1: samples to reach a test-MSE threshold against N (SPEC section 5).

A template for a new sample-complexity figure: the architectures, two scales and the
separations to check; `SampleComplexityExperiment` plans, analyzes and draws it."""
from __future__ import annotations

from ..base import EXPERIMENTS
from ..samples import Arch, SampleComplexityExperiment, Scale

TF = Arch("TF", "tf", {"heads": 1, "mlp_width": 100})
FFN = Arch("FFN", "ffn", {})  # paper sizes [N*d*q, 1000]
GRU = Arch("RNN", "rnn", {"cell": "gru", "hidden": 500})  # what the authors ran
GRU_SMALL = Arch("RNN", "rnn", {"cell": "gru", "hidden": 64})  # quick: same cell, 1/8 the width

PAPER = {"lr": 1e-3, "weight_decay": 0.1, "batch_size": 64}


@EXPERIMENTS.register("qstr-fig1a")
class Fig1a(SampleComplexityExperiment):
    description = "1STR, linear link, d=10: samples to test MSE < 0.7 (paper B, Fig. 1a)"
    runtime = {"quick": "about 1-2 min (2 CPU cores)", "full": "about 28 min (2 CPU cores)"}
    published = {"TF": {2: 2900, 12: 17100}, "RNN": {2: 1500, 12: 73800}, "FFN": {2: 2000, 12: 115000}}
    full = Scale(Ns=(2, 4, 6, 8, 10, 12), seeds=5, archs=(TF, GRU, FFN),
                 train={**PAPER, "threshold": 0.7, "budget": 400_000, "eval_size": 5000},
                 task_params={"q": 1, "d": 10, "link": "linear"})
    quick = Scale(Ns=(2, 4, 6, 8), seeds=2, archs=(TF, GRU_SMALL, FFN),
                  train={**PAPER, "threshold": 0.7, "budget": 120_000, "eval_size": 2000},
                  task_params={"q": 1, "d": 10, "link": "linear"})
    separations = (("TF", "FFN"), ("TF", "RNN"))


@EXPERIMENTS.register("qstr-fig1b")
class Fig1b(SampleComplexityExperiment):
    description = "simple-1STR, linear link, d=10: samples to test MSE < 0.02 (paper B, Fig. 1b)"
    runtime = {"quick": "about 2-3 min (2 CPU cores)", "full": "hours on CPU; meant for a GPU"}
    published = {"TF": {25: 118000, 33: 168000}, "RNN": {25: 103000, 33: 165000}, "FFN": {25: 241000, 33: 629000}}
    full = Scale(Ns=(25, 27, 29, 31, 33), seeds=5, archs=(TF, GRU, FFN),
                 train={**PAPER, "threshold": 0.02, "budget": 1_500_000, "eval_size": 5000},
                 task_params={"q": 1, "d": 10, "link": "linear", "simple": True})
    # quick: a looser threshold (0.2) so that every architecture gets there within the budget
    quick = Scale(Ns=(25, 29, 33), seeds=2, archs=(TF, GRU_SMALL, FFN),
                  train={**PAPER, "threshold": 0.2, "budget": 150_000, "eval_size": 2000},
                  task_params={"q": 1, "d": 10, "link": "linear", "simple": True})
    separations = (("TF", "FFN"), ("RNN", "FFN"))
