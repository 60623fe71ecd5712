"""`archsep export` and `archsep.load` carry both curves of every run (issue 55): the held-out
curve and the training (progressive, pre-update) curve, as the store holds them."""
from __future__ import annotations

import json

import archsep
from archsep.runs.runner import run_configs
from archsep.sweeps import file as sw
from sweep_util import tiny_toml


def test_load_gives_the_training_curve_beside_the_held_out_curve(tmp_path):
    s = sw.parse(tiny_toml("curves", budget=640))
    results = {r.run_id: r for r in run_configs(s.configs, tmp_path, workers=1, progress=False, sweep=s)}
    df = archsep.load(tmp_path)
    assert {"curve", "train_curve"} <= set(df.columns)
    for _, row in df.iterrows():
        r = results[row["run_id"]]
        assert [tuple(p) for p in json.loads(row["train_curve"])] == [tuple(p) for p in r.train_curve]
        assert len(r.train_curve) >= len(r.curve)  # a point at every scheduled evaluation, skipped or not
