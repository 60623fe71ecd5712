"""scripts/submission_size.py and carry.py's budget: a checkpoint committed and then removed weighs
twice its base-85 text in the submission's diffs, as the workplace counts them; past a budget a
carry keeps its runs and carries no checkpoint, so that a session's submission is never refused
whole for its size (2026-12-07)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "docs" / "results" / "lookup-fig2-search-steps" / "runs.jsonl"


def _script(name: str):
    sys.path.insert(0, str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, check=True, text=True).stdout.strip()


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "README").write_text("landed\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "landed")
    return repo, _git(repo, "rev-parse", "HEAD")


def test_a_binary_file_added_then_removed_counts_twice_and_past_the_fraction_exits_1(tmp_path, capsys):
    size = _script("submission_size")
    repo, base = _repo(tmp_path)
    assert size.base_commit(repo) == base  # the reflog's oldest entry
    (repo / "ck.pt").write_bytes(os.urandom(200_000))
    assert 1.2 * 200_000 < size.uncommitted_diff_bytes(repo) < 1.35 * 200_000  # untracked, at its base-85 size
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "carry")
    _git(repo, "rm", "-q", "ck.pt")
    _git(repo, "commit", "-q", "-m", "finished")
    diff = size.committed_diff_bytes(repo, base)
    assert 2 * 1.2 * 200_000 < diff < 2 * 1.35 * 200_000
    assert size.uncommitted_diff_bytes(repo) == 0
    assert size.packed_bytes(repo, base) > 200_000  # random bytes do not compress
    argv = ["--repo", str(repo)]
    assert size.main(argv + ["--fraction", "1"]) == 0
    assert size.main(argv + ["--fraction", str(200_000 / size.DIFF_LIMIT)]) == 1
    assert "commit less" in capsys.readouterr().out
    assert size.main(argv + ["--base", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--base" in err[0]


def test_a_carry_past_its_budget_carries_the_runs_and_no_checkpoint(tmp_path, capsys):
    from archsep.store import open_store
    from archsep.store.transfer import import_rows, read_rows

    carry = _script("carry")
    repo, _ = _repo(tmp_path)
    src = tmp_path / "src.jsonl"
    src.write_text("".join(line + "\n" for line in RUNS.read_text().splitlines()[:2]))
    store = tmp_path / "store"
    with open_store(store) as s:
        import_rows(s, read_rows(src))
    (store / "checkpoints").mkdir()
    ck = os.urandom(300_000)
    (store / "checkpoints" / "r.pt").write_bytes(ck)
    dest = repo / "in-flight" / "checkpoints"
    carried = repo / "in-flight" / "runs.jsonl"
    carried.parent.mkdir()
    argv = [str(store), str(carried), "--checkpoints", str(dest)]
    assert carry.main(argv + ["--diff-budget-mb", "0.3"]) == 0  # 300 kB at base 85 is about 0.36 MiB
    assert len(carried.read_text().splitlines()) == 2 and not list(dest.glob("*.pt"))
    assert "no checkpoint carried" in capsys.readouterr().out
    assert carry.main(argv + ["--diff-budget-mb", "0.5"]) == 0
    assert (dest / "r.pt").read_bytes() == ck
    assert "MiB of 256 MiB" in capsys.readouterr().out  # where the submission stands
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "carry")
    assert carry.carry_cost(repo, dest, {"r.pt": store / "checkpoints" / "r.pt"}) == 0  # unchanged: nothing
    (store / "checkpoints" / "r.pt").write_bytes(os.urandom(300_000))  # the run went on: replaced
    assert carry.carry_cost(repo, dest, {"r.pt": store / "checkpoints" / "r.pt"}) > 2 * 1.2 * 300_000
    assert carry.carry_cost(repo, dest, {}) > 1.2 * 300_000  # the run finished: its file removed
    # the commits since the branch was laid (about 0.36 MiB) count toward the budget too
    assert carry.main(argv + ["--diff-budget-mb", "0.5"]) == 0
    assert "no checkpoint carried" in capsys.readouterr().out
    assert (dest / "r.pt").read_bytes() == ck
