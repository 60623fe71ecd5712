"""Successive halving across a learning-rate grid and the plateau stop (TrainConfig.halving_lrs,
halving_rungs, patience): a race's runs train exactly as they would alone, the worse half stops
at each rung, the replay on stored curves predicts the engine, and a race is never split."""
from __future__ import annotations

import dataclasses

import pytest

from archsep.analysis.halving import replay
from archsep.config import RunConfig, TrainConfig
from archsep.engine.planning import plan_batches
from archsep.engine.train import train_many, train_run
from archsep.errors import ArchsepError

GRID = (1e-2, 3e-3, 1e-4)
RUNGS = (0.25, 0.5)
LSTM = ("lstm", {"hidden": 16, "layers": 1})
TF = ("tf-preln", {"width": 16, "heads": 2, "layers": 1, "positions": "learned", "causal": True})


def _cfg(lr: float, model=LSTM, seed: int = 0, steps: int = 80, **train) -> RunConfig:
    t = TrainConfig(lr=lr, weight_decay=0.0, batch_size=16, budget=16 * steps, threshold=1e-3, eval_every=10,
                    eval_size=200, eval_mode="every", keep_best=True, test_size=100, **train)
    return RunConfig("dyck", model[0], {"N": 12}, model[1], t, seed)


def _race(model=LSTM, seed: int = 0, grid=GRID, rungs=RUNGS) -> list[RunConfig]:
    return [_cfg(lr, model, seed, halving_lrs=grid, halving_rungs=rungs) for lr in grid]


def _samples(r) -> int:
    return r.curve[-1][0]


@pytest.fixture(scope="module")
def lstm_race():
    raced = train_many(_race())
    alone = [train_run(_cfg(lr)) for lr in GRID]
    return raced, alone


def test_a_race_trains_each_run_as_it_trains_alone(lstm_race):
    raced, alone = lstm_race
    for r, a in zip(raced, alone):
        assert r.curve == a.curve[:len(r.curve)]  # bitwise: side by side is the plain path
    stopped = [r for r in raced if "stopped" in r.extra]
    assert stopped, "a three-rate race on a grid this wide stops someone"
    for r, a in zip(raced, alone):
        if "stopped" not in r.extra:  # the survivors are the runs trained alone, to the end
            assert r.test_metric == a.test_metric and r.samples == a.samples and r.status == a.status


def test_the_worse_half_stops_at_the_rungs_as_the_replay_predicts(lstm_race):
    raced, alone = lstm_race
    rungs = [s * 16 for s in _race()[0].train.rung_steps()]
    assert rungs == [20 * 16, 40 * 16]
    rep = replay([a.curve for a in alone], rungs)
    assert {k: r.extra["stopped"]["step"] * 16 for k, r in enumerate(raced) if "stopped" in r.extra} == rep.halved
    for k, r in enumerate(raced):
        if k in rep.halved:
            assert r.extra["stopped"]["why"] == "halved" and r.status == "censored" and r.samples == rep.halved[k]
        assert r.extra["halving"] == {"race": 3, "grid": 3}
    assert sum(_samples(r) for r in raced) == rep.samples_raced < rep.samples_full
    # the chosen rate is select's on the raced results, and the replay's
    best = min(range(3), key=lambda k: (raced[k].best_metric, raced[k].best_samples, k))
    assert best == rep.chosen_raced


def test_a_stacked_race_halves_alike():
    """Small Transformers stack (vmap); seeds pool in one group and each seed is its own race."""
    cfgs = _race(TF, 0, GRID[:2], (0.5,)) + _race(TF, 1, GRID[:2], (0.5,))
    batches = plan_batches(cfgs)
    assert len(batches) == 1  # stacked: one computation for both races
    raced = train_many(cfgs)
    plain = train_many([_cfg(c.train.lr, TF, c.seed) for c in cfgs])  # the same stack, no halving
    for seed in (0, 1):
        rep = replay([r.curve for r in plain[2 * seed:2 * seed + 2]], [40 * 16])
        got = {k: r.extra["stopped"]["step"] * 16 for k, r in enumerate(raced[2 * seed:2 * seed + 2])
               if "stopped" in r.extra}
        assert got == rep.halved
    for r, p in zip(raced, plain):  # a shrinking stack leaves its runs' numbers as they were
        assert [m for _, m in r.curve] == pytest.approx([m for _, m in p.curve[:len(r.curve)]], abs=1e-6)
        if "stopped" not in r.extra:
            assert r.test_metric == pytest.approx(p.test_metric, abs=1e-6)
    assert any("stopped" in r.extra for r in raced)


def test_a_race_is_never_split_across_batches():
    # 9 seeds x 2 rates of a stackable model: 18 runs, more than a stack holds (16)
    cfgs = [c for seed in range(9) for c in _race(TF, seed, GRID[:2], (0.5,))]
    batches = plan_batches(cfgs)
    assert sorted(len(b) for b in batches) == [2, 16]
    for b in batches:
        assert {c.seed for c in b} == {c.seed for c in b if c.train.lr == GRID[0]}
        assert len(b) == 2 * len({c.seed for c in b})
    # without halving the same runs keep their former plan
    assert sorted(len(b) for b in plan_batches([_cfg(c.train.lr, TF, c.seed) for c in cfgs])) == [2, 16]


def test_a_lone_run_of_a_race_says_its_race_was_incomplete():
    r = train_run(_race()[0])
    assert r.extra["halving"] == {"race": 1, "grid": 3} and "stopped" not in r.extra


def test_a_plateau_stops_the_run_where_its_curve_stopped_improving():
    full = train_run(_cfg(1e-4, steps=120))
    stopped = train_run(_cfg(1e-4, steps=120, patience=2))
    assert stopped.curve == full.curve[:len(stopped.curve)]
    best, since, stop = None, 0, None
    for s, m in full.curve:
        if best is None or m < best:
            best, since = m, 0
        else:
            since += 1
        if since >= 2:
            stop = s
            break
    assert stop is not None, "lr 1e-4 on this task plateaus within 120 steps"
    assert stopped.extra["stopped"] == {"why": "plateau", "step": stop // 16}
    assert stopped.samples == stop and stopped.status == "censored"


def test_the_replay_can_say_the_race_chose_another_rate():
    """A late bloomer: behind at the rung, best at the end. The replay must say so."""
    fast = [(100, 0.5), (200, 0.4), (300, 0.4), (400, 0.4)]
    late = [(100, 0.9), (200, 0.8), (300, 0.1), (400, 0.05)]
    rep = replay([fast, late], [200])
    assert rep.chosen_full == 1 and rep.chosen_raced == 0 and not rep.same
    assert rep.halved == {1: 200} and rep.samples_raced == 400 + 200
    # a run that had finished (reached its threshold) before a rung is not stopped there
    assert replay([[(100, 0.0)], late], [200]).halved == {1: 200}
    assert replay([late, [(100, 0.0)]], [200]).halved == {0: 200}


@pytest.mark.parametrize("bad, field", [
    ({"halving_lrs": (1e-2, 1e-4), "halving_rungs": (0.5,), "lr": 3e-3}, "halving_lrs"),
    ({"halving_lrs": (1e-3,), "halving_rungs": (0.5,)}, "halving_lrs"),
    ({"halving_lrs": (1e-3, 1e-3), "halving_rungs": (0.5,)}, "halving_lrs"),
    ({"halving_lrs": (1e-3, 1e-4), "halving_rungs": ()}, "halving_rungs"),
    ({"halving_lrs": (1e-3, 1e-4), "halving_rungs": (0.5, 0.25)}, "halving_rungs"),
    ({"halving_lrs": (1e-3, 1e-4), "halving_rungs": (1.0,)}, "halving_rungs"),
    ({"halving_rungs": (0.5,)}, "halving_lrs"),
    ({"patience": -1}, "patience"),
])
def test_bad_halving_settings_name_their_field(bad, field):
    with pytest.raises(ArchsepError) as e:
        TrainConfig(**bad)
    assert e.value.field == field


def test_the_new_fields_keep_every_stored_id():
    c = _cfg(1e-3)
    assert c.run_id == dataclasses.replace(c, train=dataclasses.replace(c.train, patience=0)).run_id
    assert _cfg(GRID[1]).run_id != _race()[1].run_id  # a raced run is not the lone run: its result depends on the grid
    assert RunConfig.from_dict(_race()[0].to_dict()).run_id == _race()[0].run_id


def test_curves_csv_replays_to_what_a_raced_preset_did(tmp_path, registered):
    """Oracle end to end: a tiny size preset run with its whole grid writes curves.csv; the
    replay on it predicts the learning rate and the stops of the same preset run as a race."""
    from archsep.analysis.halving import read_curves
    from archsep.experiments import PRESETS
    from archsep.experiments.reproduce import reproduce
    from archsep.experiments.size import SizeExperiment, SizeScale, lstm

    scale = SizeScale(Ns=(6, 10), archs=(lstm((8,)),), lrs=(3e-2, 1e-4), steps=40, eval_every=5, val_size=50,
                      test_size=100, seeds=2)

    class Full(SizeExperiment):
        task = "dyck"
        quick = full = scale

    class Raced(Full):
        quick = full = dataclasses.replace(scale, halving=(0.25, 0.5))

    for name, cls in (("t-full", Full), ("t-raced", Raced)):
        registered(PRESETS, name, cls)
        reproduce(name, "quick", out=tmp_path / name, workers=1, device="cpu", progress=False)
    full, raced = read_curves(tmp_path / "t-full" / "curves.csv"), read_curves(tmp_path / "t-raced" / "curves.csv")
    assert sorted(full) == sorted(raced) and len(full) == 4
    chosen = {}
    import csv
    with (tmp_path / "t-raced" / "runs.csv").open() as f:
        for row in csv.DictReader(f):
            chosen[(int(row["N"]), int(row["seed"]))] = float(row["best_lr"])
    n_halved = 0
    for key, runs in full.items():
        rung_steps = [10, 20]  # 0.25 and 0.5 of 40 steps, on the evaluation grid
        rep = replay([runs[k] for k in sorted(runs)], rung_steps)
        got = {k: c[-1][0] for k, c in raced[key].items() if c[-1][0] < runs[k][-1][0]}
        assert got == rep.halved, key
        n_halved += len(got)
        for k in runs:  # each raced curve is the full one up to where the race stopped it
            assert raced[key][k] == runs[k][:len(raced[key][k])]
        assert chosen[(key[2], key[3])] == scale.lrs[rep.chosen_raced]
    assert n_halved >= 2  # the race stopped runs: the comparison above is not vacuous


def test_a_dry_run_counts_a_race_as_the_steps_it_can_train_at_most():
    from archsep.runs.cost import planned_steps

    two = _race(grid=GRID[:2], rungs=(0.25,))  # 80 steps: both to 20, one to 80
    assert [planned_steps(c) for c in two] == [50, 50]
    three = _race()  # three to 20, two to 40, one to 80: 60 + 40 + 40 = 140 of 240
    assert sum(planned_steps(c) for c in three) == pytest.approx(140, abs=1)
    assert planned_steps(_cfg(1e-3)) == 80
