"""A run trained to its budget keeps its end (`Checkpoints.ends`), and the same run with a larger
budget goes on from it to the numbers it gives trained from the start (engine/checkpoint.py):
what lets a search's promoted trial go on instead of starting again."""
from __future__ import annotations

import dataclasses

import pytest

import archsep.engine.checkpoint as checkpoint
from archsep.config import RunConfig, TrainConfig
from archsep.engine.checkpoint import Checkpoints
from archsep.engine.train import train_many, train_run

SAME = ("status", "samples", "final_metric", "best_metric", "curve", "train_curve", "test_metric", "best_samples",
        "params", "state_size", "error")

CONFIGS = {
    # classification, a recurrent model, best checkpoint and a test set
    "lookup-lstm": RunConfig("index-lookup", "lstm", {"N": 8}, {"hidden": 16},
                             TrainConfig(budget=64 * 120, eval_every=20, eval_size=300, threshold=1e-6,
                                         eval_mode="every", keep_best=True, test_size=300, weight_decay=0.0)),
    # regression with a replayed training set (the stream's order and position carry over)
    "qstr-ffn-replay": RunConfig("qstr", "ffn", {"N": 3}, {},
                                 TrainConfig(budget=64 * 150, eval_every=10, eval_size=300, threshold=1e-9,
                                             train_set_size=500, eval_mode="every")),
}


def _budget(cfg: RunConfig, steps: int) -> RunConfig:
    return dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, budget=steps * cfg.train.batch_size))


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_larger_budget_goes_on_from_the_end_of_a_smaller_one_to_the_same_numbers(name, tmp_path):
    big = CONFIGS[name]
    steps = big.train.budget // big.train.batch_size
    small = _budget(big, steps // 3 + 7)  # an end between two evaluations: the window carries over
    plain = train_run(big)
    assert plain.status == "censored" and len(plain.curve) > 4
    ck = Checkpoints(str(tmp_path / "ck"), float("inf"), ends=True)
    first = train_many([small], checkpoints=ck)[0]
    assert checkpoint.end_step(ck, big) == steps // 3 + 7
    assert checkpoint.end_step(ck, small) == 0  # a run never goes on from its own end
    went_on = train_many([big], checkpoints=ck)[0]
    assert went_on.extra.get("resumed_at") == [steps // 3 + 7]
    for f in SAME:
        assert getattr(went_on, f) == getattr(plain, f), f
    assert went_on.curve[:len(first.curve)] == first.curve  # the smaller run is the larger's first part
    assert went_on.wall_s >= first.wall_s  # its time counts the part it went on from


def test_ends_are_kept_only_where_asked_for_and_only_where_the_first_steps_do_not_see_the_budget(tmp_path):
    cfg = _budget(CONFIGS["lookup-lstm"], 40)
    ck = Checkpoints(str(tmp_path / "ck"), float("inf"))
    train_many([cfg], checkpoints=ck)
    assert not (tmp_path / "ck" / checkpoint.ENDS).exists()  # ends off: nothing kept
    prog = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, eval_mode="progressive"))
    assert not checkpoint.continuable(prog)  # a progressive schedule looks in full at a run's last step
    on = Checkpoints(str(tmp_path / "ck"), float("inf"), ends=True)
    train_many([prog], checkpoints=on)
    assert not (tmp_path / "ck" / checkpoint.ENDS).exists()
    train_many([cfg], checkpoints=on)
    assert checkpoint.end_step(on, _budget(cfg, 80)) == 40
    other = dataclasses.replace(_budget(cfg, 80), seed=1)  # another seed is another run
    assert checkpoint.end_step(on, other) == 0
    checkpoint.discard_ends(on, [cfg])
    assert checkpoint.end_step(on, _budget(cfg, 80)) == 0


def test_a_damaged_or_foreign_end_is_ignored_and_the_run_starts_from_step_0(tmp_path):
    small, big = _budget(CONFIGS["lookup-lstm"], 40), _budget(CONFIGS["lookup-lstm"], 80)
    ck = Checkpoints(str(tmp_path / "ck"), float("inf"), ends=True)
    train_many([small], checkpoints=ck)
    path = ck.end_path(small, 40)
    path.write_bytes(b"not a checkpoint")
    r = train_many([big], checkpoints=ck)[0]
    assert "resumed_at" not in r.extra
    plain = train_run(big)
    assert r.curve == plain.curve
