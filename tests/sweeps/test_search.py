"""A sweep file's [search] (sweeps/search.py): the trials it draws, the same budget for every
searched arm, the ranking, and a one-line error for each mistake in the table."""
from __future__ import annotations

import math

import pytest

from archsep.errors import ArchsepError
from archsep.results import RunResult
from archsep.sweeps import file as sw
from archsep.sweeps.search import draw, finished_early, rank
from sweep_util import search_toml


def test_every_searched_arm_draws_the_same_trials_in_every_cell_and_the_same_on_every_parse():
    s = sw.parse(search_toml(trials=4))
    search = s.search
    assert search is not None and search.steps == (40, 80, 160) and search.schedule() == [4, 2, 1]
    lstm = [c for c in search.cells if c.label == "LSTM"]
    assert [c.point for c in lstm] == [{"task_params.N": 6}, {"task_params.N": 8}]
    assert all(c.searched and len(c.flats) == 4 for c in lstm)
    assert [lstm[0].params(t) for t in range(4)] == [lstm[1].params(t) for t in range(4)]
    assert len({tuple(sorted(lstm[0].params(t).items())) for t in range(4)}) == 4  # without replacement
    again = sw.parse(search_toml(trials=4)).search
    assert [c.flats for c in again.cells] == [c.flats for c in search.cells]
    tf = [c for c in search.cells if c.label == "TF"]
    assert all(not c.searched and len(c.flats) == 1 for c in tf)
    # what runs first: every trial at the first rung, the arm not searched at the last, every seed
    first = s.configs
    assert sum(c.arm == "LSTM" for c in first) == 8 and sum(c.arm == "TF" for c in first) == 4
    assert {c.train.budget for c in first if c.arm == "LSTM"} == {40 * 64}
    assert {c.train.budget for c in first if c.arm == "TF"} == {160 * 64}
    assert {c.seed for c in first if c.arm == "LSTM"} == {0} and {c.seed for c in first if c.arm == "TF"} == {0, 1}


def test_a_promoted_trial_is_the_same_run_with_a_larger_budget():
    search = sw.parse(search_toml()).search
    a, b = search.config(0, 1, 0), search.config(0, 1, 2)
    assert a.run_id != b.run_id and b.train.budget == 160 * 64
    assert {**a.to_dict(), "train": None} == {**b.to_dict(), "train": None}
    assert {k: v for k, v in a.train.__dict__.items() if k != "budget"} == \
           {k: v for k, v in b.train.__dict__.items() if k != "budget"}


def test_the_draw_depends_on_the_seed_and_the_label_and_a_full_draw_is_the_whole_space():
    space = {"train.lr": [1e-2, 1e-3, 1e-4, 1e-5], "model_params.layers": [1, 2, 4, 6]}
    a = draw(space, 5, 0, "LSTM")
    assert a == draw(space, 5, 0, "LSTM") and len(a) == 5
    assert a != draw(space, 5, 1, "LSTM") or a != draw(space, 5, 0, "Mamba")
    assert len(draw(space, 16, 0, "LSTM")) == 16


def _r(i: int, status: str, best: float | None, at: int | None, budget: int = 640) -> RunResult:
    return RunResult(f"r{i}", {"train": {"batch_size": 64, "budget": budget}}, status, budget if status == "censored"
                     else at, 64, best, best, best_samples=at)  # type: ignore[arg-type]


def test_trials_rank_by_best_validation_then_samples_then_order_and_failures_last():
    results = [(0, _r(0, "censored", 0.5, 320)), (1, _r(1, "censored", 0.2, 640)), (2, _r(2, "error", None, None)),
               (3, _r(3, "censored", 0.2, 320)), (4, None), (5, _r(5, "diverged", math.nan, None))]
    assert rank(results) == [3, 1, 0, 2, 4, 5]
    assert not finished_early(_r(0, "censored", 0.5, 320), 10)
    assert finished_early(_r(0, "ok", 0.001, 320), 10)  # its threshold: it trains no more
    assert finished_early(RunResult("p", {"train": {"batch_size": 64}}, "censored", 320, 64, 0.5, 0.5), 10)  # plateau


@pytest.mark.parametrize("extra, field", [
    ('[search.arms.GRU]\n"model_params.layers" = [1]\n', "search.arms.GRU"),  # no such arm
    ('[search.arms.TF]\n"task_params.N" = [3]\n', "search.arms.TF.task_params.N"),  # a cell, not searched
    ('[search.arms.TF]\n"train.budget" = [640]\n', "search.arms.TF.train.budget"),
    ('[search.arms.TF]\n"train.lr" = [1e-3]\n', "search.arms.TF.train.lr"),  # also in search.axes
    ('[search.arms.TF]\n"model_params.hiddenn" = [3]\n', "model_params.hiddenn"),
    ('[search.arms.TF]\n"model_params.layers" = []\n', "search.arms.TF.model_params.layers"),
])
def test_a_mistake_in_the_search_table_is_one_line_naming_the_field(extra, field):
    with pytest.raises(ArchsepError) as e:
        sw.parse(search_toml(extra=extra))
    assert field in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("change, field", [
    (lambda t: t.replace("trials = 4", "trials = 7"), "search.trials"),  # more than LSTM's 6 points
    (lambda t: t.replace("keep = 0.5", "keep = 1.5"), "search.keep"),
    (lambda t: t.replace("keep = 0.5", "keep = 0.5\ntie = -1"), "search.tie"),
    (lambda t: t.replace("keep = 0.5", "keep = 0.5\ntie = true"), "search.tie"),
    (lambda t: t.replace("steps = [40, 80, 160]", "steps = [80, 40]"), "search.steps"),
    (lambda t: t.replace("steps = [40, 80, 160]", "steps = [40, 90]"), "search.steps"),  # not an evaluation step
    (lambda t: t.replace('eval_mode = "every", ', ""), "train.eval_mode"),  # progressive: not continuable
    (lambda t: t.replace("weight_decay = 0.0", "weight_decay = 0.0, budget = 640"), "base.train.budget"),
    (lambda t: t.replace("trials = 4\n", "trials = 4\nrungs = 3\n"), "search.rungs"),
    (lambda t: t.replace("trials = 4\n", ""), "search.trials"),
    (lambda t: t.replace('"task_params.N" = [6, 8]', '"task_params.N" = [6, 8]\n"train.lr" = [1e-3]'), "train.lr"),
    (lambda t: t + '[match]\nto = "TF"\n', "match"),
])
def test_a_search_that_cannot_run_as_declared_is_refused_before_anything_runs(change, field):
    with pytest.raises(ArchsepError) as e:
        sw.parse(change(search_toml()))
    assert field in str(e.value) and "\n" not in str(e.value)


def test_trials_the_validation_set_cannot_tell_apart_from_the_last_kept_one_go_on_with_it():
    """`tie`: after keep's share, every further trial within `tie` standard errors of the last kept
    one's held-out error (binomial, on its eval_size examples) goes on too, in rank order; a trial
    beyond it, or a failed one, does not; the margin narrows away from chance; a metric that is not
    an error rate has none; without `tie` exactly keep's share goes on (the searches already run
    keep their walks). The worst-case schedule then counts every trial at every rung; the
    expected one keeps keep's share."""
    from archsep.sweeps.search import margin

    plain = sw.parse(search_toml()).search
    tied = sw.parse(search_toml().replace("keep = 0.5", "keep = 0.5\ntie = 2")).search
    assert plain.tie == 0 and tied.tie == 2
    assert [c.flats for c in plain.cells] == [c.flats for c in tied.cells]  # the same trials, the same runs

    def r(i, best, status="censored"):
        out = _r(i, status, best, 640 if best is not None else None)
        out.config["train"]["eval_size"] = 1000
        return out

    latest = {0: r(0, 0.50), 1: r(1, 0.48), 2: r(2, 0.53), 3: r(3, None, "error")}
    order = rank(list(latest.items()))
    assert order == [1, 0, 2, 3]
    assert plain.kept(order, latest) == [1, 0]
    assert margin(latest[0], 2) == pytest.approx(2 * math.sqrt(0.25 / 1000))  # 3.2 points
    assert tied.kept(order, latest) == [1, 0, 2]  # 0.53 is within 3.2 points of 0.50; the failed run is not
    apart = {**latest, 2: r(2, 0.54)}
    assert tied.kept(rank(list(apart.items())), apart) == [1, 0]
    sure = {0: r(0, 0.03), 1: r(1, 0.02), 2: r(2, 0.05)}  # near 97%: the margin is 1.1 points
    assert tied.kept(rank(list(sure.items())), sure) == [1, 0]
    mse = {0: r(0, 1.5), 1: r(1, 1.4), 2: r(2, 1.5)}  # not an error rate: no ties
    assert tied.kept(rank(list(mse.items())), mse) == [1, 0]
    assert plain.schedule() == tied.schedule() == [4, 2, 1] and tied.worst_schedule() == [4, 4, 4]
    assert "tie" not in plain.describe() and tied.describe()["tie"] == 2


@pytest.mark.parametrize("settle, field", [
    ('level = 1.5\nat = { "task_params.N" = 6 }', "search.settle.level"),
    ('level = true\nat = { "task_params.N" = 6 }', "search.settle.level"),
    ('level = 0.95', "search.settle.at"),
    ('level = 0.95\nat = { "task_params.M" = 6 }', "search.settle.at.task_params.M"),  # not a grid axis
    ('level = 0.95\nat = { "task_params.N" = 7 }', "search.settle.at.task_params.N"),  # not a grid value
    ('level = 0.95\nat = { "task_params.N" = 6 }\nseeds = 2', "search.settle.seeds"),
])
def test_a_mistake_in_the_settle_table_is_one_line_naming_the_field(settle, field):
    with pytest.raises(ArchsepError) as e:
        sw.parse(search_toml(extra=f"[search.settle]\n{settle}\n"))
    assert field in str(e.value) and "\n" not in str(e.value)


def test_a_control_is_settled_only_where_no_score_of_the_other_seeds_could_pass_it():
    """`Settle.decide`: with its first seed at x the mean of n seeds is at most (x + n - 1) / n;
    settled (the others need not train) only where that is below the level. Not settled: a first
    seed high enough, no test accuracy, one seed only, or a metric that is not an error rate."""
    from archsep.sweeps.search import Settle

    s = Settle(0.95, {"task_params.N": 6})
    assert s.applies(sw.parse(search_toml()).search.cells[0]) and not s.applies(sw.parse(search_toml()).search.cells[1])

    def r(test_metric):
        return RunResult("r", {"train": {"batch_size": 64}}, "censored", 640, 64, 0.5, 0.5, test_metric=test_metric)

    got = s.decide(r(0.3), 3)  # 70%: at most (0.7 + 2) / 3 = 90%
    assert got is not None and got["most"] == pytest.approx(0.9) and got["accuracy"] == pytest.approx(0.7)
    assert s.decide(r(0.1), 3) is None  # 90%: the others at 100% would give 96.7%
    assert s.decide(r(0.16), 3) is not None and s.decide(r(0.14), 3) is None  # the edge: 84% vs 86%
    assert s.decide(r(0.3), 2) is not None and s.decide(r(0.05), 2) is None
    assert s.decide(r(0.3), 1) is None and s.decide(r(None), 3) is None and s.decide(None, 3) is None
    assert s.decide(r(1.4), 3) is None  # an MSE
    search = sw.parse(search_toml(extra='[search.settle]\nlevel = 0.95\nat = { "task_params.N" = 6 }\n')).search
    assert search.settle == s and search.describe()["settle"] == {"level": 0.95, "at": {"task_params.N": 6}}
    assert "settle" not in sw.parse(search_toml()).search.describe()
    qstr = search_toml().replace('task = "index-lookup"', 'task = "qstr"\ntask_params = { d = 4, q = 1 }')
    sw.parse(qstr)  # a regression task can be searched ...
    with pytest.raises(ArchsepError, match="search.settle: cell LSTM N=6's task is scored by an MSE"):
        sw.parse(qstr + '[search.settle]\nlevel = 0.95\nat = { "task_params.N" = 6 }\n')  # ... but not settled


def test_each_rung_sweep_names_the_next_and_the_walk_fetches_under_those_names():
    """The store names a search's stage sweeps `{name}.rung{n}` / `{name}.winners` (`stage_sweep`);
    `next_rung_sweep` reads one rung's name to the next one's, and nothing else has a next rung."""
    from archsep.sweeps.search import WINNERS, next_rung_sweep, stage_rung, stage_sweep, walk

    search = sw.parse(search_toml(trials=4)).search
    stages: list[str] = []

    def fetch(configs, stage):
        stages.append(stage)
        return [RunResult(c.run_id, c.to_dict(), "censored", c.train.budget, 64, 0.5, 0.5,  # type: ignore[arg-type]
                          best_samples=c.train.budget) for c in configs]

    walk(search, fetch)
    assert stages == ["rung1", "rung2", "rung3", WINNERS]
    assert [stage_rung(s) for s in stages] == [1, 2, 3, None]
    names = [stage_sweep("lookup.search-N20", s) for s in stages]
    assert names[0] == "lookup.search-N20.rung1"
    assert [next_rung_sweep(n) for n in names] == [names[1], names[2], "lookup.search-N20.rung4", None]
    assert [next_rung_sweep(n) for n in ["rung1", "x.rung", "x.rungs2", "x.rung2b", "x.winners"]] == [None] * 5
