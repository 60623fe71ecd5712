"""Held-out evaluation: blocks, the full mean, and screening against the last full evaluation."""

import math

import pytest
import torch

from archsep.config import RunConfig, TrainConfig
from archsep.engine.evaluation import BLOCK, block_metrics, evaluate, held_out_set, screen


@pytest.fixture(scope="module")
def setup():
    c = RunConfig("qstr", "tf-b", {"N": 4}, {}, TrainConfig(eval_size=5000))
    task = c.build_task()
    torch.manual_seed(0)
    model = c.model_config().build(task.spec).eval()
    return task, model, held_out_set(c, task)


def test_evaluate_is_the_example_mean_with_a_standard_error(setup):
    task, model, data = setup
    mean, se = evaluate(model, task, data)
    with torch.no_grad():
        direct = float(task.metric(model(data.x), data))
    assert mean == pytest.approx(direct, rel=1e-5)
    assert 0 < se < 0.1 * mean
    assert len(block_metrics(model, task, data)) == 5000 // BLOCK


def test_screen_returns_the_exact_mean_when_the_threshold_is_within_reach(setup):
    task, model, data = setup
    mean, se = evaluate(model, task, data)
    exact = block_metrics(model, task, data)
    noisy = exact + 0.05 * torch.randn(len(exact), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # an exact reference: stops only above the threshold; a noisy one: not within 4 of its ~0.008 se
    for ref, threshold in ((exact, mean + 0.01), (exact, mean + 1e-9), (noisy, mean - 0.01)):
        ev = screen(model, task, data, ref, threshold, z=4.0)
        assert not ev.stopped and ev.examples == 5000
        assert ev.mean == pytest.approx(mean, rel=1e-9) and torch.equal(ev.blocks, exact)


def test_screen_stops_at_the_first_look_when_the_mean_is_far_above_the_threshold(setup):
    task, model, data = setup
    mean, _ = evaluate(model, task, data)
    ref = block_metrics(model, task, data) + 0.01  # an earlier evaluation, slightly worse everywhere
    ev = screen(model, task, data, ref, mean / 2, z=4.0)
    assert ev.stopped and ev.examples == 500 and ev.blocks is None
    # the change on the first blocks is exactly -0.01, so the estimate is exact here
    assert ev.mean == pytest.approx(mean, abs=1e-6) and ev.se == pytest.approx(0, abs=1e-6)


def test_screen_with_infinite_z_always_evaluates_everything(setup):
    task, model, data = setup
    ev = screen(model, task, data, None, 1e-6, z=math.inf)
    assert not ev.stopped and ev.mean == pytest.approx(evaluate(model, task, data)[0], rel=1e-9)
