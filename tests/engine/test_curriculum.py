"""A length curriculum (TrainConfig.curriculum): the training stream draws each stage's batches
from the task at its length, from the run's own generator, then from the task itself; the
held-out set stays at N; bad stages are one error naming the field; the run id changes only
when a curriculum is set; a run with one trains end to end."""
import pytest
import torch

from archsep import RunConfig, TrainConfig
from archsep.engine.train import Stream, train_run
from archsep.errors import ArchsepError

TF = {"layers": 1, "width": 16, "heads": 2, "positions": "sinusoidal"}


def cfg(curriculum=(), N=12, model=TF, **train):
    return RunConfig("nearest-neighbour", "tf-preln", {"N": N}, model,
                     TrainConfig(lr=1e-3, batch_size=4, budget=4 * 12, eval_every=4, curriculum=curriculum, **train))


def test_the_stream_draws_each_stage_at_its_length_then_the_task_itself():
    c = cfg([[4, 3], [8, 2]])
    task = c.build_task()
    stream = Stream(c, task, torch.device("cpu"))
    got = [stream.next() for _ in range(8)]
    lengths = [b.x.shape[1] for b in got]
    assert lengths == [task.at_length(4).spec.seq_len] * 3 + [task.at_length(8).spec.seq_len] * 2 \
        + [task.spec.seq_len] * 3
    # the same generator, in order: the stages' batches are what their tasks draw from it
    g = torch.Generator().manual_seed(c.derived_seed("train"))
    want = [task.at_length(4).sample(4, g) for _ in range(3)] + [task.at_length(8).sample(4, g) for _ in range(2)] \
        + [task.sample(4, g) for _ in range(3)]
    for a, b in zip(got, want):
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)


def test_a_curriculum_is_part_of_the_run_id_only_when_set():
    assert cfg().run_id == cfg(()).run_id
    assert cfg([[4, 3]]).run_id == cfg(((4, 3),)).run_id  # a list and a tuple: one id
    assert cfg([[4, 3]]).run_id != cfg().run_id != cfg([[4, 5]]).run_id
    assert "curriculum" not in cfg().canonical()["train"]


@pytest.mark.parametrize("bad", [[4, 3], [[4]], [[4, 0]], [[0, 3]], [[4, 2.5]], [[True, 3]], "4:3"])
def test_bad_curricula_are_one_error_naming_the_field(bad):
    with pytest.raises(ArchsepError, match="curriculum: must be a list of \\[length, steps\\] pairs") as e:
        cfg(bad)
    assert e.value.field == "curriculum"


def test_a_stage_the_model_cannot_read_is_refused():
    learned = {**TF, "positions": "learned"}
    with pytest.raises(ArchsepError, match="train.curriculum: length 20 gives 30 positions") as e:
        cfg([[20, 3]], model=learned)
    assert e.value.field == "train.curriculum"
    cfg([[20, 3]])  # sinusoidal positions read any length
    with pytest.raises(ArchsepError, match="curriculum: draws fresh batches") as e:
        cfg([[4, 3]], train_set_size=8)
    assert e.value.field == "curriculum"


def test_a_run_with_a_curriculum_trains_and_evaluates_at_N():
    every = dict(threshold=1e-9, eval_mode="every", curve_every=1)
    r = train_run(cfg([[4, 6]], **every))
    assert r.status == "censored" and [s for s, _ in r.curve] == [16, 32, 48]  # held-out at N, every 4 steps
    plain = train_run(cfg(**every))
    assert r.curve != plain.curve  # the first six steps saw other data
