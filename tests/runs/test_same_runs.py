"""A run the store holds under another budget is not trained again where the numbers would be
the same (`runs.runner.same_runs`): a run that reached its threshold at step s stops there under
any budget of at least s steps (the learning rate is constant, nothing before the stop looks at
the budget). A run censored at its budget, or one that reached its threshold only past the
budget asked for, is trained."""
from __future__ import annotations

from archsep.cli import main
from archsep.store import open_store
from sweep_util import lstm_toml, write

ARGS = ["--workers", "1", "--no-progress"]


def _sweep(tmp_path, out, budget: int, threshold: float) -> dict:
    f = write(tmp_path / f"s{budget}-{threshold}.toml", lstm_toml("same", "dyck", 8, 64 * budget, threshold, lr=0.01))
    assert main(["sweep", str(f), "--out", str(out), *ARGS]) == 0
    with open_store(out) as st:
        return {r.config["seed"]: r for r in st.results() if r.config["train"]["budget"] == 64 * budget
                and r.config["train"]["threshold"] == threshold}


def _numbers(r) -> tuple:
    return r.status, r.samples, r.best_samples, r.curve, r.best_metric, r.final_metric, r.test_metric


def test_a_run_that_reached_its_threshold_is_the_same_run_under_a_larger_budget(tmp_path):
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    small = _sweep(tmp_path, out, 200, 0.15)
    assert all(r.status == "ok" and r.samples < 64 * 200 for r in small.values()), [r.status for r in small.values()]
    big = _sweep(tmp_path, out, 500, 0.15)
    plain = _sweep(tmp_path, fresh, 500, 0.15)  # trained from step 0 in a store of its own
    for seed in (0, 1):
        assert big[seed].extra.get("same_as") == small[seed].run_id and big[seed].wall_s == 0.0
        assert big[seed].run_id != small[seed].run_id and big[seed].config["train"]["budget"] == 64 * 500
        assert "same_as" not in plain[seed].extra and plain[seed].wall_s > 0
        assert _numbers(big[seed]) == _numbers(plain[seed])
    # a budget below the step where it reached its threshold is another run: trained, censored there
    first = min(r.samples for r in small.values()) // 64
    short = _sweep(tmp_path, out, first - 20, 0.15)
    assert all("same_as" not in r.extra and r.status == "censored" for r in short.values())


def test_a_run_censored_at_its_budget_is_trained_again_under_a_larger_one(tmp_path):
    out = tmp_path / "out"
    small = _sweep(tmp_path, out, 40, 1e-6)  # a threshold it cannot reach
    assert all(r.status == "censored" for r in small.values())
    big = _sweep(tmp_path, out, 80, 1e-6)
    assert all("same_as" not in r.extra and r.wall_s > 0 for r in big.values())
