"""Run many configs: a pool of worker processes, a progress bar, and every finished run
appended to the output directory at once, so a crash or a kill never loses finished results."""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Iterable, Sequence

import torch
from tqdm import tqdm

from .config import RunConfig
from .errors import ArchsepError
from .train import RunResult, train_run

RESULTS_FILE = "results.jsonl"


def threads_for(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def _worker_init(threads: int) -> None:
    torch.set_num_threads(threads)


def _run_one(cfg_dict: dict) -> dict:
    return train_run(RunConfig.from_dict(cfg_dict)).to_dict()


def result_from_dict(d: dict) -> RunResult:
    d = dict(d)
    d["curve"] = [tuple(p) for p in d.get("curve", [])]
    d["train_curve"] = [tuple(p) for p in d.get("train_curve", [])]
    return RunResult(**d)


class JsonlStore:
    """Append-only results file: one JSON line per finished run, flushed and fsynced."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / RESULTS_FILE

    def load(self) -> dict[str, RunResult]:
        if not self.path.exists():
            return {}
        out: dict[str, RunResult] = {}
        with self.path.open() as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    r = result_from_dict(json.loads(line))
                except (json.JSONDecodeError, TypeError):
                    continue  # a line cut by a kill mid-write: that run is simply redone
                out[r.run_id] = r
        return out

    def add(self, r: RunResult) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(r.to_dict()) + "\n")
            f.flush()
            os.fsync(f.fileno())


def prepare_out(out_dir: str | Path) -> Path:
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".archsep-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ArchsepError(f"--out: cannot write to '{out}': {e.strerror or e}") from None
    return out


def run_configs(configs: Sequence[RunConfig], out_dir: str | Path | None = None, workers: int = 1,
                progress: bool = True, on_result: Callable[[RunResult], None] | None = None,
                desc: str = "runs") -> list[RunResult]:
    """Run every config once (results already in `out_dir` are reused, not recomputed) and
    return the results in the order of `configs`."""
    store = JsonlStore(prepare_out(out_dir)) if out_dir is not None else None
    done = store.load() if store else {}
    ids = [c.run_id for c in configs]
    todo = [c for c in dict(zip(ids, configs)).values() if c.run_id not in done]
    bar = tqdm(total=len(set(ids)), initial=len(set(ids)) - len(todo), desc=desc, unit="run",
               disable=not progress, file=sys.stderr, dynamic_ncols=True)
    failures = 0

    def finish(r: RunResult) -> None:
        nonlocal failures
        done[r.run_id] = r
        if store:
            store.add(r)
        failures += r.status in ("error", "diverged")
        label = r.config.get("label") or r.config["arch"]
        bar.set_postfix_str(f"{label} N={r.config['task_params'].get('N', '?')} {r.status} "
                            f"samples={r.samples} failed={failures}")
        bar.update(1)
        if on_result:
            on_result(r)

    try:
        if workers <= 1 or len(todo) <= 1:
            torch.set_num_threads(threads_for(1))
            for c in todo:
                finish(train_run(c))
        else:
            ctx = mp.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init,
                                     initargs=(threads_for(workers),)) as pool:
                futs = [pool.submit(_run_one, c.to_dict()) for c in todo]
                for f in as_completed(futs):
                    finish(result_from_dict(f.result()))
    finally:
        bar.close()
    return [done[i] for i in ids]
