"""scripts/search_next.py: the runs a stored search trains next, for the cells named, best first;
trained first, they are the search's own runs (same ids), which the search then reuses untouched."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from archsep.experiments import EXPERIMENTS
from archsep.experiments.paper_a.lookup import LookupFig2
from archsep.experiments.plan import from_experiment
from archsep.experiments.reproduce import reproduce
from archsep.experiments.size_search import SearchScale
from archsep.runs.launch import Launch
from archsep.store import open_store
from sweep_util import search_toml

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("search_next_script", ROOT / "scripts" / "search_next.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class TinyNext(LookupFig2):
    search = SearchScale(search_toml(name="tiny-next").replace('label = "TF"', 'label = "TF-(1,64)"'), Ns=(6, 8),
                         tf="TF-(1,64)", families=("LSTM",))
    scales = ("search",)


def test_the_next_runs_are_the_searchs_own_and_it_reuses_them(tmp_path, registered, capsys):
    registered(EXPERIMENTS, "tiny-next", TinyNext)
    main = _script().main
    store = tmp_path / "s"
    assert main(["tiny-next", "search", str(store), "--at", "6", "--dry-run"]) == 2  # no store yet
    assert capsys.readouterr().err.count("\n") == 1
    open_store(store).close()
    search = from_experiment("tiny-next", "search").search
    assert search is not None
    assert main(["tiny-next", "search", str(store), "--at", "6", "--label", "GRU", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "label" in err and "LSTM" in err
    # an empty store: the first rung, the LSTM's 4 trials and TF-(1,64)'s seeds at N = 6
    assert main(["tiny-next", "search", str(store), "--at", "6", "--dry-run"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()[:-1]]
    first = {c.run_id for c in search.first_rung() if c.task_params["N"] == 6}
    assert set(listed) == first and len(listed) == len(first)
    # two of the LSTM's, trained by the script, then the search: it trains the rest and reuses those two
    assert main(["tiny-next", "search", str(store), "--at", "6", "--label", "LSTM", "--limit", "2"]) == 0
    out = capsys.readouterr().out
    trained = [line.split()[0] for line in out.splitlines() if "best held-out metric" in line]
    assert len(trained) == 2 and set(trained) <= first
    with open_store(store) as st:
        before = {r.run_id: r.wall_s for r in st.results()}
    assert set(before) == set(trained)
    summary = reproduce("tiny-next", "search", Launch(store, workers=1, progress=False), at=[6])
    with open_store(store) as st:
        after = {r.run_id: r.wall_s for r in st.results()}
    assert all(after[k] == before[k] for k in trained) and set(first) <= set(after)
    # the store's search complete at N = 6: nothing left to train there
    assert main(["tiny-next", "search", str(store), "--at", "6", "--dry-run"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("0 run(s)")
    # at N = 8 the first rung of the cells the search would run: without those its summary left
    # out (an arm whose control failed at 6), as the search itself leaves them out
    left = {c["label"] for c in summary.data.get("not_run") or [] if c["N"] == 8}
    assert main(["tiny-next", "search", str(store), "--at", "6,8", "--dry-run"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines()[:-1]}
    want = {cfg.run_id for c, cell in enumerate(search.cells) for cfg in search.first_rung()
            if cfg.task_params["N"] == 8 and cfg.label == cell.label and cell.point["task_params.N"] == 8
            and cell.label not in left}
    assert listed == want and (want or left)  # without the filter the left cells would be listed


def test_the_next_rung_comes_best_first():
    """At a later rung the runs come in the order the rung before ranked their trials."""
    mod = _script()
    search = from_experiment("lookup-fig2", "search").search
    assert search is not None
    c = next(i for i, cell in enumerate(search.cells) if cell.searched and cell.name.startswith("Mamba"))
    n = len(search.cells[c].flats)
    # a store whose rung 1 has every trial of that cell, trial t scoring (n - t) / 100: the last best
    from archsep.results import RunResult

    by_id = {}
    for t in range(n):
        cfg = search.config(c, t, 0)
        err = 1 - (t + 1) / 100
        by_id[cfg.run_id] = RunResult(cfg.run_id, cfg.to_dict(), "censored", cfg.train.budget, 1000, err, err,
                                      curve=[(cfg.train.budget, err)])
    rows = [(name, stage, cfg) for name, stage, cfg in mod.missing(search, by_id) if name == search.cells[c].name]
    at2 = [cfg for _, stage, cfg in rows if stage == "rung2"]
    assert at2, rows[:3]
    order = [next(t for t in range(n) if search.config(c, t, 1).run_id == cfg.run_id) for cfg in at2]
    assert order == sorted(order, reverse=True)  # the best at rung 1 (the last trials) first
