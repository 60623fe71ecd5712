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


def _file(tmp_path, budget: int, threshold: float):
    text = lstm_toml("same", "dyck", 8, 64 * budget, threshold, lr=0.01)
    return write(tmp_path / f"s{budget}-{threshold}.toml", text)


def _sweep(tmp_path, out, budget: int, threshold: float) -> dict:
    f = _file(tmp_path, budget, threshold)
    assert main(["sweep", str(f), "--out", str(out), *ARGS]) == 0
    with open_store(out) as st:
        return {r.config["seed"]: r for r in st.results() if r.config["train"]["budget"] == 64 * budget
                and r.config["train"]["threshold"] == threshold}


def _priced(tmp_path, out, budget: int, threshold: float, capsys) -> str:
    """The first line of `sweep --dry-run`'s price for that sweep into OUT."""
    f = _file(tmp_path, budget, threshold)
    capsys.readouterr()
    assert main(["sweep", str(f), "--out", str(out), "--dry-run", *ARGS]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if " to run in " in line)


def _numbers(r) -> tuple:
    return r.status, r.samples, r.best_samples, r.curve, r.best_metric, r.final_metric, r.test_metric


def test_a_run_that_reached_its_threshold_is_the_same_run_under_a_larger_budget(tmp_path, capsys):
    out, fresh = tmp_path / "out", tmp_path / "fresh"
    assert "2 runs, 2 to run" in _priced(tmp_path, out, 500, 0.15, capsys)
    small = _sweep(tmp_path, out, 200, 0.15)
    assert all(r.status == "ok" and r.samples < 64 * 200 for r in small.values()), [r.status for r in small.values()]
    # --dry-run prices the copies at nothing: none of the two is trained
    line = _priced(tmp_path, out, 500, 0.15, capsys)
    assert "2 runs, 0 to run" in line and "2 the store holds as the same run" in line, line
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


def test_a_run_censored_at_its_budget_is_trained_again_under_a_larger_one(tmp_path, capsys):
    out = tmp_path / "out"
    small = _sweep(tmp_path, out, 40, 1e-6)  # a threshold it cannot reach
    assert all(r.status == "censored" for r in small.values())
    assert "2 runs, 2 to run" in _priced(tmp_path, out, 80, 1e-6, capsys)
    big = _sweep(tmp_path, out, 80, 1e-6)
    assert all("same_as" not in r.extra and r.wall_s > 0 for r in big.values())


def _search_toml(steps) -> str:
    return ('name = "same-search"\nseeds = 2\n[base]\ntask = "dyck"\ntask_params = { N = 8 }\n'
            'train = { eval_every = 20, eval_size = 300, test_size = 300, eval_mode = "every", keep_best = true, '
            'threshold = 0.15, weight_decay = 0.0 }\n'
            '[[arms]]\nlabel = "LSTM"\narch = "lstm"\nmodel_params = { hidden = 16 }\n'
            f'[search]\nsteps = {list(steps)}\nkeep = 0.5\ntrials = 2\n'
            '[search.axes]\n"train.lr" = [1e-2, 3e-3]\n[search.arms.LSTM]\n"model_params.layers" = [1]\n')


def test_a_search_with_a_rung_added_prices_its_winners_copies_at_nothing(tmp_path, capsys):
    """A search given a last rung past its old one (equality's 20k -> 80k): its winners' seeds
    that stopped at their threshold within the old rung are copied, and --dry-run says so."""
    out = tmp_path / "out"
    old = write(tmp_path / "old.toml", _search_toml((100, 200)))
    new = write(tmp_path / "new.toml", _search_toml((100, 200, 400)))
    assert main(["sweep", str(old), "--out", str(out), *ARGS]) == 0
    with open_store(out) as st:
        seeds = [r for r in st.results() if r.config["train"]["budget"] == 64 * 200 and r.config["train"]["lr"] == 0.01]
    assert sorted(r.config["seed"] for r in seeds) == [0, 1] and all(r.status == "ok" for r in seeds), seeds
    capsys.readouterr()
    assert main(["sweep", str(new), "--out", str(out), "--dry-run", *ARGS]) == 0
    text = capsys.readouterr().out
    assert "2 of its runs the store holds as the same run" in text, text
    assert main(["sweep", str(new), "--out", str(out), *ARGS]) == 0
    with open_store(out) as st:
        at_new = [r for r in st.results() if r.config["train"]["budget"] == 64 * 400]
    assert len(at_new) == 2 and all(r.extra.get("same_as") and r.wall_s == 0.0 for r in at_new), at_new
