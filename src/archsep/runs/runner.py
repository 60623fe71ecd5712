"""Run many configs into the results store of an output directory.

Every finished run is committed to `OUT/archsep.db` (see `store`) as soon as its batch is
back, so a crash or a kill never loses finished results, and a rerun skips them. The
executor (`local` process pool or `ray`) only computes; this process alone writes. A run the
store holds under another budget that reached its threshold before this one's budget is not
trained again (`same_runs`): the numbers would be the same.
"""
from __future__ import annotations

import json
import math
import sqlite3
import sys
from pathlib import Path
from typing import Callable, Sequence

from ..config import RunConfig
from ..engine.planning import check_memory
from ..errors import ArchsepError
from ..runs.cost import progress_weights
from ..engine.checkpoint import Checkpoints, continuable, discard, prefix_key, saved_steps, tidy
from .executors import checkpoint_every, cores, default_workers, make_executor, plan_batches
from .launch import Launch
from .progress import Progress
from ..store.db import Store, disk_full, open_store
from ..store.rows import _dumps, now, result_from_row
from ..results import RunResult


class Results(list):
    """The results of `run_configs`, in the order of its configs; `reused` holds the run ids
    that came from the store rather than from this call."""

    reused: set[str]

    @property
    def errors(self) -> list[RunResult]:
        return [r for r in self if r.status == "error"]


def commit(row: dict, store: Store | None, tracker, ck: Checkpoints | None, saved: int, total: int) -> RunResult:
    """One finished run's one path: into the store (the record; False from `add`: another sweep
    had stored it first), then mirrored to the tracker, then its checkpoint discarded (it has
    served). A full disk is one line that says what is safe (the failed transaction is rolled
    back, the store stays consistent)."""
    added = False
    if store is not None:
        try:
            added = store.add(row)
        except sqlite3.OperationalError as e:
            if disk_full(e):
                raise ArchsepError.at("out", f"the disk holding '{store.path}' is full ({e}): {saved} of {total} "
                                             "run(s) of this call were saved before it; free some space and rerun "
                                             "the same command to resume") from None
            raise
    if added and tracker is not None:
        tracker.log(row)
    if ck is not None:
        discard(ck, row["run_id"])
    return result_from_row({**row, "committed_at": ""})


def stale_code(done: dict[str, RunResult], configs: dict[str, RunConfig], desc: str) -> int:
    """Say (one line on stderr, progress bar or not) how many reused runs were made by other code
    than the plugin loaded now: a run's id names its config, not the code, so an edited plugin
    would otherwise reuse them silently. Returns their number."""
    from ..models import MODELS
    from ..plugins import code_of
    from ..tasks import TASKS

    stale = []
    for rid, r in done.items():
        c = configs.get(rid)
        if c is None:
            continue
        now = code_of(TASKS.get(c.task), MODELS.get(c.arch))
        if now and (r.extra or {}).get("code") != now:
            stale.append(c)
    if stale:
        names = sorted({f"{c.task}/{c.arch}" for c in stale})
        print(f"{desc}: {len(stale)} stored run(s) of {', '.join(names)} were made by other plugin code than "
              "the one loaded now (or before archsep recorded it): reused as stored; a run's id names its "
              "config, not its code, so train the edited plugin into a new --out", file=sys.stderr)
    return len(stale)


def _same_key(c: RunConfig) -> str | None:
    """The identity a run shares with every run that differs from it only in its budget and
    whose first steps are the same (`continuable`, stopping at its threshold); None otherwise."""
    return prefix_key(c) if continuable(c) and c.train.stop_at_threshold else None


def same_runs(store: Store, todo: Sequence[RunConfig]) -> list[dict]:
    """Rows for runs of `todo` that the store already holds under another budget: the same run
    (`_same_key`) stored with status ok, having reached its threshold within this one's budget,
    would stop at the same step with the same numbers (the learning rate is constant and nothing
    before the stop looks at the budget). Each row is that run's, under this config and run id,
    with wall_s 0 (nothing trained) and extra["same_as"] naming the run it repeats."""
    want: dict[str, list[RunConfig]] = {}
    for c in todo:
        if (k := _same_key(c)) is not None:
            want.setdefault(k, []).append(c)
    if not want:
        return []
    found: dict[str, str] = {}  # todo run id -> the stored run id it repeats
    for rid, config, samples in store.ok_runs():
        try:
            k = _same_key(RunConfig.from_dict(json.loads(config)))
        except (ArchsepError, ValueError, TypeError):
            continue  # a config this version does not read: not the same run
        for c in want.get(k or "", []):
            if samples is not None and samples <= c.train.budget:
                found.setdefault(c.run_id, rid)
    if not found:
        return []
    rows = {r["run_id"]: r for r in store.rows(set(found.values()))}
    out, at = [], now()
    for c in todo:
        if c.run_id in found and (row := rows.get(found[c.run_id])) is not None:
            extra = {**json.loads(row["extra"] or "{}"), "same_as": row["run_id"]}
            out.append({**row, "run_id": c.run_id, "config": _dumps(c.to_dict()), "wall_s": 0.0,
                        "extra": _dumps(extra), "started_at": at, "finished_at": at, "committed_at": ""})
    return out


def run_configs(configs: Sequence[RunConfig], out_dir: str | Path | None = None, workers: int | None = 1,
                progress: bool = True, on_result: Callable[[RunResult], None] | None = None,
                desc: str = "runs", executor: str = "local", address: str | None = None,
                sweep=None, retry_errors: bool = False, log: str | None = None,
                launch: Launch | None = None) -> list[RunResult]:
    """Run every config once and return the results in the order of `configs`. Runs already
    in the store of `out_dir` are reused, not recomputed (errors too, unless `retry_errors`).
    Without `out_dir` the results live in a temporary in-memory list only. Everything that can
    be checked is checked before the store is created: the executor, its address, Ray.
    `log` ("mlflow" | "tensorboard") mirrors each run to a tracker under `out_dir` after it
    is committed to the store (which stays the record). `launch` gives these options as one
    object (`runs.launch.Launch`), in place of the keyword arguments."""
    if launch is None:
        launch = Launch(None if out_dir is None else Path(out_dir), workers, executor, address, None, retry_errors,
                        log, progress)
    return launch_runs(configs, launch.check(), desc, sweep, on_result)


def launch_runs(configs: Sequence[RunConfig], launch: Launch, desc: str = "runs", sweep=None,
                on_result: Callable[[RunResult], None] | None = None) -> list[RunResult]:
    """`run_configs` with its options as one checked `Launch`."""
    assert launch.checked, "a Launch is checked where it is made (Launch.check)"
    out_dir, workers, progress, log = launch.out, launch.workers, launch.progress, launch.log
    executor, address, retry_errors = launch.executor, launch.address, launch.retry_errors
    if workers is None and executor == "local":
        workers = default_workers(configs)  # one a core; one on a GPU
    tracker = None
    for c in configs:  # a run that could not fit in memory is refused before anything is made
        check_memory(c)
    every = checkpoint_every()  # a long run's checkpoints go beside its store (engine/checkpoint.py)
    if every is None and launch.ends:
        every = math.inf  # no saves while training, but the ends a search goes on from
    ck = Checkpoints.beside(out_dir, every, launch.ends) if out_dir is not None and every is not None else None
    store: Store | None = open_store(out_dir) if out_dir is not None else None
    try:
        if log is not None:
            from ..store.tracking import make_tracker

            assert out_dir is not None  # Launch.check: a tracker needs an output directory
            tracker = make_tracker(log, out_dir, name=sweep.name if sweep is not None else None)
        if store is not None and sweep is not None:
            store.register_sweep(sweep.sweep_id, sweep.name, sweep.source,
                                 [(c.run_id, c.to_dict()) for c in configs],
                                 preset=sweep.preset, quick=sweep.quick, analysis=sweep.analysis)
        ids = [c.run_id for c in configs]
        unique = list(dict.fromkeys(ids))
        done: dict[str, RunResult] = {}
        if store is not None:
            finished = store.finished_ids(include_errors=not retry_errors)
            done = {r.run_id: r for r in store.results([i for i in unique if i in finished])}
        todo = [c for c in dict(zip(ids, configs)).values() if c.run_id not in done]
        if store is not None and todo:  # the same run stored under another budget: not trained again
            for row in same_runs(store, todo):
                done[row["run_id"]] = commit(row, store, None, ck, 0, len(todo))
            todo = [c for c in todo if c.run_id not in done]
        if ck is not None:  # a run stored after its last save and before its checkpoint went
            for rid in done:
                discard(ck, rid)
        reused = set(done)
        stale_code(done, dict(zip(ids, configs)), desc)
        reused_errors = sum(r.status == "error" for r in done.values())
        if reused_errors and progress:
            print(f"{desc}: {reused_errors} run(s) stored with status error are reused, not rerun "
                  "(retry_errors reruns them)", file=sys.stderr)
        # each run's modelled share of the work left (its budget's time where a dry run measured
        # its shape, else its FLOPs; a run stopped part way, with its group's checkpoint, counts
        # only the steps after the one saved): runs that go on from a checkpoint start first,
        # then batches most expensive first by it, and the bar advances by it, not by one per
        # run (a count of runs would promise hours after the first one)
        started = saved_steps(ck, todo) if ck is not None else {}
        weights = progress_weights(todo, started) if todo else {}
        bar = Progress(desc, weights, workers or cores(), progress)
        ex = None
        try:
            if todo:
                ex = make_executor(executor, workers, address, ck)
                if progress:
                    bar.write(f"{desc}: {len(todo)} to run, {len(unique) - len(todo)} already done; {ex.describe()}")
                for rows in ex.run(plan_batches(todo, seconds=lambda c: weights[c.run_id], resumed=started)):
                    for row in rows:
                        r = commit(row, store, tracker, ck, len(done) - len(reused), len(todo))
                        done[r.run_id] = r
                        bar.done(r)
                        if on_result:
                            on_result(r)
        finally:
            bar.close()
            if ex is not None and hasattr(ex, "close"):
                ex.close()
            if ck is not None:
                tidy(ck)
        if store is not None:
            # what the store holds (the first committed result wins when two sweeps raced)
            done.update({r.run_id: r for r in store.results(unique)})
            if tracker is not None:  # reused runs, and any whose logging failed: repeats are skipped
                for row in store.rows(unique):
                    tracker.log(row)
        out = Results(done[i] for i in ids)
        out.reused = reused
        return out
    finally:
        if tracker is not None:
            tracker.close()
        if store is not None:
            store.close()

