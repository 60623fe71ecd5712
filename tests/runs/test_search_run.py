"""Running a search (runs/search.py): every trial an ordinary run in the store, a promoted trial
going on from its end to the numbers it gives trained from the start, a killed search resuming to
the same trials and winners, and a price for the whole search before anything runs."""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time

import pytest

from archsep.engine.train import train_run
from archsep.runs.launch import Launch
from archsep.runs.search import OUTCOME, outcome, price, run_search, table
from archsep.store import open_store
from archsep.sweeps import file as sw
from archsep.sweeps.search import replay
from sweep_util import ARCHSEP, cli, env, search_toml, write


def _without_time(out: dict) -> dict:
    """An outcome without what depends on the machine's speed."""
    text = json.dumps(out, sort_keys=True)
    d = json.loads(text)
    for cell in d["cells"]:
        for r in cell["runs"] + [t["last"] for t in cell.get("trials", [])]:
            r.pop("wall_s", None)
    return d


def run_seconds(cfg, steps):
    """A known cost per run for pricing by hand: steps x layers x 1/lr (CPU), no GPU time."""
    return steps * cfg.model_params.get("layers", 1) * 1e-3 / cfg.train.lr, 0.0


def known_cost(monkeypatch) -> None:
    """Price every run at `run_seconds`, timing nothing."""
    from archsep.runs import cost

    monkeypatch.setattr(cost, "run_seconds", run_seconds)
    monkeypatch.setattr(cost, "step_costs", lambda *a, **k: None)


def test_a_search_promotes_by_validation_and_its_promoted_trials_go_on_from_their_ends(tmp_path):
    s = sw.parse(search_toml())
    out = run_search(s, Launch(tmp_path, workers=1, progress=False).check())
    assert not (tmp_path / OUTCOME).exists()  # written once, by its caller (the CLI's is read below)
    assert not (tmp_path / "checkpoints").exists()  # every end removed once the search is done
    search = s.search
    with open_store(tmp_path) as st:
        stored = {r.run_id: r for r in st.results()}
    for c, cell in enumerate(out["cells"]):
        if not cell["searched"]:
            assert [r["seed"] for r in cell["runs"]] == [0, 1] and "winner" not in cell
            continue
        rungs = cell["rungs"]
        assert [r["steps"] for r in rungs] == [40, 80, 160] and rungs[0]["trained"] == [0, 1, 2, 3]
        for before, after in zip(rungs, rungs[1:]):
            assert before["promoted"] == sorted(before["ranked"][:len(before["ranked"]) // 2])
            assert after["ranked"] and set(after["ranked"]) == set(before["promoted"])
        # the ranking is by best validation at the rung, then samples, then order
        for r, rung in enumerate(rungs):
            res = {t: stored[search.config(c, t, r).run_id] for t in rung["trained"]}
            keys = [(res[t].best_metric, res[t].best_samples, t) for t in rung["ranked"] if t in res]
            assert keys == sorted(keys)
        w = cell["winner"]
        assert w == rungs[-1]["ranked"][0] and cell["winner_params"] == search.cells[c].params(w)
        last = stored[search.config(c, w, 2).run_id]
        assert last.extra.get("resumed_at") == [40, 80]  # it went on, rung after rung
        plain = train_run(search.config(c, w, 2))  # ... to the numbers it gives from the start
        assert (last.curve, last.best_metric, last.test_metric) == (plain.curve, plain.best_metric, plain.test_metric)
        assert [r["run_id"] for r in cell["runs"]] == [search.config(c, w, None, s).run_id for s in (0, 1)]
    # replayed over the store, running nothing, the search takes the same path to the same winners
    assert outcome(search, replay(search, stored)) == out
    partial = replay(search, {i: r for i, r in stored.items() if r.config["train"]["budget"] != 160 * 64})
    assert not partial.complete and not partial.final and all(len(v) == 2 for v in partial.rungs.values())
    n8 = replay(search, {i: r for i, r in stored.items() if r.config["task_params"]["N"] == 8})
    assert n8.incomplete == {c for c, cell in enumerate(search.cells) if cell.point["task_params.N"] == 6}
    assert {k[0] for k in n8.final} == {c for c in range(len(search.cells)) if c not in n8.incomplete}


def test_the_price_of_a_search_counts_every_rung_at_its_worst_and_nothing_already_stored(tmp_path):
    s = sw.parse(search_toml())
    whole = price(s.search, 1, set())
    fewer = price(sw.parse(search_toml(trials=2)).search, 1, set())
    assert whole["schedule"] == [4, 2, 1] and fewer["schedule"] == [2, 1, 1]
    assert whole["arms"]["LSTM"]["runs"] == 2 * (4 + 2 + 1) + 2 * 1  # trials at each rung, + the winners' seed 1
    assert 0 < fewer["cpu_core_s"] < whole["cpu_core_s"]
    first = {c.run_id for c in s.configs}
    assert price(s.search, 1, first)["cpu_core_s"] < whole["cpu_core_s"]
    f = write(tmp_path / "s.toml", search_toml())
    r = cli("sweep", f, "--out", tmp_path / "o", "--dry-run", "--workers", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "a search over 1 arm(s) x 2 cell(s): 4 trials per arm and cell" in r.stdout
    assert "at most [4, 2, 1] trials trained at each" in r.stdout and "total: on this machine about" in r.stdout
    assert not (tmp_path / "o").exists()  # a dry run makes nothing


def test_the_expected_price_counts_the_trials_that_go_on_at_the_rungs_average(monkeypatch):
    """Beside the worst case, a central estimate: at each rung the promoted trials cost the
    rung's average trial; the winners' other seeds an average trial each. With a known cost per
    run (steps x layers x 1/lr, here), both prices are computed by hand."""
    known_cost(monkeypatch)
    search = sw.parse(search_toml()).search
    est = price(search, 2, set())
    worst = expected = 0.0
    for c, cell in enumerate(search.cells):
        if not cell.searched:  # the Transformer: both seeds, as declared
            expected += sum(run_seconds(search.config(c, 0, None, s), 160)[0] for s in search.seeds)
            continue
        for r, (steps, n, prev) in enumerate(zip((40, 80, 160), (4, 2, 1), (0, 40, 80))):
            each = sorted((run_seconds(search.config(c, t, r), steps - prev)[0] for t in range(4)), reverse=True)
            worst += sum(each[:n])
            expected += n * sum(each) / 4
        each = [run_seconds(search.config(c, t, None, 1), 160)[0] for t in range(4)]
        worst += max(each)
        expected += sum(each) / 4
    tf = est["arms"]["TF"]["cpu_s"]
    assert est["cpu_core_s"] - tf == pytest.approx(worst) and est["expected_core_s"] == pytest.approx(expected)
    assert est["expected_core_s"] < est["cpu_core_s"] and est["expected_wall_s"] == pytest.approx(expected / 2)
    # the point estimate: the geometric middle of the size-blind price and the worst case
    assert est["estimate_core_s"] == pytest.approx((expected * est["cpu_core_s"]) ** 0.5)
    assert est["expected_core_s"] < est["estimate_core_s"] < est["cpu_core_s"]
    # with a tie every trial may go on at every rung: the worst case counts them all, the expected
    # price keeps keep's share
    tied = price(sw.parse(search_toml().replace("keep = 0.5", "keep = 0.5\ntie = 2")).search, 2, set())
    assert tied["schedule"] == [4, 4, 4] and tied["arms"]["LSTM"]["runs"] == 2 * (4 + 4 + 4) + 2 * 1
    assert tied["expected_core_s"] == pytest.approx(est["expected_core_s"]) and tied["cpu_core_s"] > est["cpu_core_s"]


def test_a_run_with_a_checkpoint_is_priced_from_its_step(monkeypatch, tmp_path):
    """A search killed mid-run goes on from the run's checkpoint, so its price counts only the
    steps after it: a promoted trial at rung 2 (40 -> 80 steps) saved at step 60 costs 20 steps,
    a winner's seed saved at 80 of 160 costs 80; by hand, with a known cost per run. And the CLI's
    dry run reads the checkpoints beside the store."""
    from archsep.engine.checkpoint import Checkpoints, save
    known_cost(monkeypatch)
    search = sw.parse(search_toml()).search
    searched = [c for c, cell in enumerate(search.cells) if cell.searched]
    started = {search.config(c, t, 1).run_id: 60 for c in searched for t in range(4)}
    started.update({search.config(c, t, None, 1).run_id: 80 for c in searched for t in range(4)})
    whole, resumed = price(search, 1, set()), price(search, 1, set(), started=started)
    half = 0.0
    for c in searched:
        rung2 = sorted((run_seconds(search.config(c, t, 1), 40)[0] for t in range(4)), reverse=True)
        half += sum(rung2[:2]) / 2 + max(run_seconds(search.config(c, t, None, 1), 160)[0] for t in range(4)) / 2
    assert half > 0 and whole["cpu_core_s"] - resumed["cpu_core_s"] == pytest.approx(half)
    assert resumed["resumed"] == len(started) and whole["resumed"] == 0
    monkeypatch.undo()
    f = write(tmp_path / "s.toml", search_toml())
    first = sw.parse(search_toml()).configs[0]
    for out, step in ((tmp_path / "new", None), (tmp_path / "resumed", 20)):
        if step:  # the first run of rung 1 (40 steps) killed at step 20
            assert save(Checkpoints.beside(out), [first], {"step": step})
        r = cli("sweep", f, "--out", out, "--dry-run", "--workers", "1")
        assert r.returncode == 0, r.stderr[-2000:]
        assert ("1 go on from a checkpoint, counted from its step" in r.stdout) == bool(step)


def _rows(db) -> int:
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2)
        try:
            return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


@pytest.mark.slow
def test_a_search_killed_in_the_middle_of_a_rung_resumes_to_the_same_trials_and_winners(tmp_path):
    text = search_toml(name="killed", steps=(100, 300, 600))
    f = write(tmp_path / "s.toml", text)
    whole = run_search(sw.parse(text), Launch(tmp_path / "whole", workers=1, progress=False).check())
    out = tmp_path / "killed"
    p = subprocess.Popen([*ARCHSEP, "sweep", str(f), "--out", str(out), "--workers", "1", "--no-progress"],
                         env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while _rows(out / "archsep.db") < 9 and p.poll() is None and time.time() < deadline:
            time.sleep(0.02)  # rung 1 holds 8 trials: the 9th row is in rung 2
        assert p.poll() is None, "the search ended before it could be killed in its second rung"
        p.send_signal(signal.SIGKILL)
    finally:
        p.wait(30)
    assert 9 <= _rows(out / "archsep.db") < 8 + 4 + 2 + 2 + 4
    assert not (out / OUTCOME).exists()
    r = cli("sweep", f, "--out", out, "--workers", "1", "--no-progress", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    again = json.loads((out / OUTCOME).read_text())
    assert _without_time(again) == _without_time(whole)


def test_a_search_under_way_is_priced_from_the_promotions_its_store_already_holds(monkeypatch):
    """With the store's results, a rung they decide costs nothing more and the next one trains
    exactly the trials it promoted, not the most expensive ones: here rung 1 promotes each cell's
    two cheapest trials, so the worst case at rung 2 is their cost alone (by hand, with a known
    cost per run), and a trial that stopped early at rung 1 trains no more."""
    from archsep.results import RunResult
    from archsep.runs.search import standing

    known_cost(monkeypatch)
    search = sw.parse(search_toml()).search
    searched = [c for c, cell in enumerate(search.cells) if cell.searched]
    results = {}
    for c in searched:  # rung 1: the cheaper the trial, the better its validation error
        by_cost = sorted(range(4), key=lambda t: run_seconds(search.config(c, t, 0), 40)[0])
        for place, t in enumerate(by_cost):
            cfg = search.config(c, t, 0)
            stopped = place == 0 and c == searched[0]  # reached its threshold at 20 steps: done
            results[cfg.run_id] = RunResult(cfg.run_id, cfg.to_dict(), "ok" if stopped else "censored",
                                            20 * 64 if stopped else 40 * 64, 20 * 64, 0.1 * (place + 1),
                                            0.1 * (place + 1), best_samples=20 * 64)
    stand = standing(search, results)
    assert {c: d for c, (d, _, _) in stand.items()} == {c: 1 for c in searched}
    est = price(search, 1, set(results), results)
    worst = 0.0
    for c in searched:
        dec, alive, stopped = stand[c]
        cheap = sorted(range(4), key=lambda t: run_seconds(search.config(c, t, 0), 40)[0])[:2]
        assert alive == sorted(cheap) and stopped == ({cheap[0]} if c == searched[0] else set())
        worst += sum(run_seconds(search.config(c, t, 1), 40)[0] for t in alive if t not in stopped)  # rung 2
        worst += max(run_seconds(search.config(c, t, 2), 80)[0] for t in alive)  # rung 3: one goes on
        worst += max(run_seconds(search.config(c, t, None, 1), 160)[0] for t in alive)  # the winner's seed 1
    assert est["cpu_core_s"] - est["arms"]["TF"]["cpu_s"] == pytest.approx(worst)
    assert est["cpu_core_s"] < price(search, 1, set(results))["cpu_core_s"]  # without them: the worst trials
    assert set(est["decided"].values()) == {1}


SETTLE = '[search.settle]\nlevel = 0.95\nat = { "task_params.N" = 6 }\n'


def test_a_winner_whose_first_seed_settles_its_control_trains_no_other_seed(tmp_path, monkeypatch):
    """[search.settle]: at the control's point (N = 6) the tiny LSTM's winner scores far below 95%
    on its first seed (about 10% here, 160 steps), so the mean of its 3 seeds is at most
    (x + 2) / 3 < 95% whatever the others score: they are not trained. At N = 8 (no control) and
    for the arm not searched every seed trains. Replayed over the store the search takes the same
    path; the same search without `settle` finds those two seeds missing, and prices exactly them,
    where the settled one prices nothing. Trained later anyway, the two seeds are read as usual."""
    text = search_toml(name="settled", seeds=3, extra=SETTLE)
    s = sw.parse(text)
    search = s.search
    out = run_search(s, Launch(tmp_path, workers=1, progress=False).check())
    with open_store(tmp_path) as st:
        stored = {r.run_id: r for r in st.results()}
    by = {(cell["label"], cell["point"]["task_params.N"]): cell for cell in out["cells"]}
    lstm6 = by[("LSTM", 6)]
    [first] = lstm6["runs"]
    x = 1 - first["test_metric"]
    assert first["seed"] == 0 and x < 0.85  # what makes it settle: (x + 2) / 3 < 0.95
    assert lstm6["settled"]["most"] == pytest.approx((x + 2) / 3) and lstm6["settled"]["level"] == 0.95
    c6 = next(c for c, cell in enumerate(search.cells) if cell.label == "LSTM" and cell.point["task_params.N"] == 6)
    others = [search.config(c6, lstm6["winner"], None, seed) for seed in (1, 2)]
    assert not any(cfg.run_id in stored for cfg in others)
    assert [len(by[k]["runs"]) for k in (("LSTM", 8), ("TF", 6), ("TF", 8))] == [3, 3, 3]
    assert all("settled" not in by[k] for k in (("LSTM", 8), ("TF", 6), ("TF", 8)))
    assert outcome(search, replay(search, stored)) == out
    assert "settled: its control fails" in table(out).splitlines()[0]
    plain = sw.parse(search_toml(name="settled", seeds=3)).search
    assert replay(plain, stored).incomplete == {c6}
    # seeds already there (trained before the search settled anything) are read as usual: one of
    # the two, and the cell is still settled with both seeds it has; both, and it is not settled
    one = replay(search, {**stored, others[0].run_id: stored[first["run_id"]]})
    assert c6 in one.settled and sorted(s for (c, _t, s) in one.final if c == c6) == [0, 1]
    from archsep.runs.runner import launch_runs

    launch_runs(others, Launch(tmp_path, workers=1, progress=False).check())
    again = run_search(s, Launch(tmp_path, workers=1, progress=False).check())
    assert [r["seed"] for r in next(c for c in again["cells"] if c["label"] == "LSTM" and c["point"] ==
                                    {"task_params.N": 6})["runs"]] == [0, 1, 2]
    assert all("settled" not in c for c in again["cells"])
    known_cost(monkeypatch)
    assert price(search, 1, set(stored), stored)["cpu_core_s"] == 0
    assert price(plain, 1, set(stored), stored)["cpu_core_s"] == pytest.approx(
        sum(run_seconds(cfg, 160)[0] for cfg in others))
