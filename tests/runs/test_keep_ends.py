"""`--keep-ends` (issue 55, "a larger budget goes on"): runs keep their state at the end of their
budget, and the same sweep with a larger budget goes on from there, to the numbers the larger
budget gives trained from step 0 (engine/checkpoint.py, "Ends")."""
from __future__ import annotations

from archsep.cli import main
from archsep.store import open_store
from sweep_util import lstm_toml, write


def _results(out) -> dict:
    with open_store(out) as st:
        return {(r.config["seed"], r.config["train"]["budget"]): r for r in st.results()}


def test_raising_the_budget_goes_on_from_the_ends_to_the_numbers_of_a_run_trained_from_the_start(tmp_path):
    small, big = write(tmp_path / "small.toml", lstm_toml("ends", "index-lookup", 6, 64 * 60, 1e-6)), \
        write(tmp_path / "big.toml", lstm_toml("ends", "index-lookup", 6, 64 * 140, 1e-6))
    out = tmp_path / "out"
    args = ["--workers", "1", "--no-progress", "--keep-ends"]
    assert main(["sweep", str(small), "--out", str(out), *args]) == 0
    assert len(list((out / "checkpoints" / "ends").glob("*.pt"))) == 2  # one end per censored run
    assert main(["sweep", str(big), "--out", str(out), *args]) == 0
    fresh = tmp_path / "fresh"
    assert main(["sweep", str(big), "--out", str(fresh), "--workers", "1", "--no-progress"]) == 0
    went_on, plain = _results(out), _results(fresh)
    for seed in (0, 1):
        a, b = went_on[(seed, 64 * 140)], plain[(seed, 64 * 140)]
        assert a.extra.get("resumed_at") == [60] and "resumed_at" not in b.extra
        assert (a.curve, a.best_metric, a.test_metric, a.status) == (b.curve, b.best_metric, b.test_metric, b.status)
    assert not (fresh / "checkpoints").exists()  # without the flag nothing is kept
