"""Size separations (paper A, SPEC 3): test accuracy of a trained model for one
(task, architecture, length N, width) cell.

Per cell and per learning rate of a grid: online training with Adam (no weight decay),
cross-entropy, a fresh batch every step and a step budget; every `eval_every` steps (and at
the last step) the validation accuracy is measured and training stops at the first point
where it reaches the target (99%). Each learning rate keeps its best-validation checkpoint
(training on these tasks can oscillate late on). The learning rate with the best validation
accuracy wins (ties: the one that stopped in fewer steps, then the first in the grid); that
checkpoint's accuracy on `test_size` fresh examples at length N is the cell's result.

Data streams, all from the run seed and never shared:
  training   RunConfig.derived_seed("train")     task.sample   (variable lengths where the task has them)
  validation derive_seed(seed, "validation")     task.sample_test (length N), drawn once per run
  test       derive_seed(seed, "size-test")      task.sample_test (length N), drawn once per cell
The model initialisation (derived_seed("init")) and the training stream are the same for every
learning rate of a cell, so the grid compares learning rates on equal terms.

This loop is separate from `train.train_run` because it must return the trained model and
validate on `sample_test` data; it reuses RunConfig for building tasks, models and seeds.
"""
from __future__ import annotations

import hashlib
import json
import math
import multiprocessing as mp
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import torch

from ..config import RunConfig, TrainConfig, derive_seed, resolve_device
from ..errors import check
from ..engine.evaluation import evaluate
from ..tasks.base import Batch, Task

CELLS_FILE = "cells.jsonl"


@dataclass(frozen=True)
class SizeCell:
    """One point of a (length x width) grid for one architecture."""

    task: str
    arch: str
    label: str  # the architecture's name in tables and figures, e.g. "TF-(1,64)"
    N: int
    width: int  # the grid's width axis (the model's width / hidden size)
    task_params: dict = field(default_factory=dict)  # N is added from the field above
    model_params: dict = field(default_factory=dict)
    lrs: tuple[float, ...] = (1e-3, 3e-4)
    steps: int = 2000  # step budget per learning rate
    batch_size: int = 64
    eval_every: int = 100  # steps between validation points
    val_size: int = 1000
    test_size: int = 5000
    target: float = 0.99  # early stop at validation accuracy >= target
    seed: int = 0
    device: str = "auto"

    def __post_init__(self) -> None:
        check(len(self.lrs) >= 1 and all(lr > 0 for lr in self.lrs), "lrs", f"must be positive learning rates, got {self.lrs}")
        check(self.steps >= 1, "steps", f"must be >= 1, got {self.steps}")
        check(self.eval_every >= 1, "eval_every", f"must be >= 1, got {self.eval_every}")
        check(self.val_size >= 1, "val_size", f"must be >= 1, got {self.val_size}")
        check(self.test_size >= 1, "test_size", f"must be >= 1, got {self.test_size}")
        check(0 < self.target <= 1, "target", f"must be in (0, 1], got {self.target}")
        self.run_config(self.lrs[0])  # a bad task / model parameter fails here, before any work

    def run_config(self, lr: float) -> RunConfig:
        train = TrainConfig(lr=lr, weight_decay=0.0, batch_size=self.batch_size, budget=self.steps * self.batch_size,
                            threshold=1 - self.target + 1e-12, eval_every=self.eval_every, eval_size=self.val_size,
                            eval_mode="every", device=self.device)
        return RunConfig(self.task, self.arch, {**self.task_params, "N": self.N}, dict(self.model_params),
                         train, self.seed, self.label)

    def canonical(self) -> dict:
        d = asdict(self)
        d.pop("device")
        d["lrs"] = list(self.lrs)
        d["task_params"] = self.run_config(self.lrs[0]).build_task().params()
        d["model_params"] = self.run_config(self.lrs[0]).model_config().params()
        return d

    @property
    def cell_id(self) -> str:
        blob = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(("size:" + blob).encode()).hexdigest()[:16]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["lrs"] = list(self.lrs)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "SizeCell":
        return cls(**{**d, "lrs": tuple(d["lrs"])})


def accuracy(model: torch.nn.Module, task: Task, data: Batch) -> float:
    """Accuracy (1 - the task's error metric) over `data`, in eval mode."""
    was = model.training
    model.eval()
    error, _ = evaluate(model, task, data)
    model.train(was)
    return 1.0 - error


def train_lr(cell: SizeCell, lr: float) -> tuple[dict, torch.nn.Module, Task]:
    """Train one learning rate of a cell; returns its record, the final model and the task."""
    cfg = cell.run_config(lr)
    dev = resolve_device(cell.device)
    task = cfg.build_task()
    torch.manual_seed(cfg.derived_seed("init"))
    model = cfg.model_config().build(task.spec).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    train_gen = torch.Generator(dev).manual_seed(cfg.derived_seed("train"))
    val = task.sample_test(cell.val_size, torch.Generator(dev).manual_seed(derive_seed(cell.seed, "validation")))
    curve: list[tuple[int, float]] = []
    status, step = "censored", 0
    best_acc, best_state = -1.0, None
    for step in range(1, cell.steps + 1):
        batch = task.sample(cell.batch_size, train_gen)
        loss = task.loss(model(batch.x), batch)
        if not torch.isfinite(loss):
            status = "diverged"
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % cell.eval_every and step != cell.steps:
            continue
        acc = accuracy(model, task, val)
        curve.append((step, acc))
        if acc > best_acc:  # keep the best checkpoint: training can be unstable late on
            best_acc, best_step = acc, step
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        if acc >= cell.target:
            status = "ok"
            break
    if best_state is None:  # diverged before the first validation point
        curve.append((step, accuracy(model, task, val)))
        best_acc, best_step = curve[-1][1], step
    else:
        model.load_state_dict(best_state)
    rec = {"lr": lr, "status": status, "steps": step, "val_acc": best_acc, "best_step": best_step,
           "final_val_acc": curve[-1][1], "curve": curve}
    return rec, model, task


def measure_cell(cell: SizeCell, on_lr: Callable[[dict], None] | None = None) -> dict:
    """Run the learning-rate grid of one cell and test the selected model. Never raises: a
    crashing cell comes back with status 'error' and the message."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = {"cell_id": cell.cell_id, "cell": cell.to_dict(), "label": cell.label, "arch": cell.arch,
           "task": cell.task, "N": cell.N, "width": cell.width, "seed": cell.seed}
    try:
        best = None
        runs = []
        for k, lr in enumerate(cell.lrs):
            rec, model, task = train_lr(cell, lr)
            runs.append(rec)
            if on_lr:
                on_lr(rec)
            key = (rec["val_acc"], -rec["best_step"], -k)
            if best is None or key > best[0]:
                best = (key, rec, model, task)
            if rec["status"] == "ok" and rec["steps"] <= cell.eval_every:
                break  # reached the target at the first validation point: no lr can do better
        assert best is not None
        _, rec, model, task = best
        dev = next(model.parameters()).device
        test = task.sample_test(cell.test_size, torch.Generator(dev).manual_seed(derive_seed(cell.seed, "size-test")))
        out.update(status="ok", test_acc=accuracy(model, task, test), best_lr=rec["lr"], val_acc=rec["val_acc"],
                   steps=rec["steps"], reached=rec["status"] == "ok", runs=runs,
                   params=sum(p.numel() for p in model.parameters()),
                   state_size=_state_size(model, task), error=None)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:  # recorded, so one bad cell never loses the grid
        out.update(status="error", test_acc=None, best_lr=None, val_acc=None, steps=None, reached=False, runs=[],
                   params=None, state_size=None,
                   error=f"{type(e).__name__}: {e}\n" + traceback.format_exc(limit=3))
    out["wall_s"] = round(time.perf_counter() - t0, 3)
    out["cpu_s"] = round(time.process_time() - c0, 3)  # what an idle core would need, near enough
    return out


def _state_size(model: torch.nn.Module, task: Task) -> int | None:
    fn = getattr(model, "state_size", None)
    return fn(task.spec.seq_len) if fn else None


# --- many cells: a process pool and an append-only store, resumable ------------------------
class CellStore:
    """One JSON line per finished cell, flushed and fsynced; a cut line is redone."""

    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / CELLS_FILE

    def load(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        if self.path.exists():
            for line in self.path.read_text().splitlines():
                try:
                    r = json.loads(line)
                    out[r["cell_id"]] = r
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue
        return out

    def add(self, r: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(r) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(1, workers))


def _init(threads: int) -> None:
    torch.set_num_threads(threads)


def _measure(d: dict) -> dict:
    return measure_cell(SizeCell.from_dict(d))


def run_cells(cells: Sequence[SizeCell], out_dir: str | Path | None = None, workers: int = 1,
              progress: bool = True, desc: str = "cells") -> list[dict]:
    """Measure every cell once (cells already in OUT/cells.jsonl are reused) and return the
    results in the order of `cells`. Slow cells go first so a pool finishes evenly."""
    from tqdm import tqdm

    store = None
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        store = CellStore(Path(out_dir))
    done = store.load() if store else {}
    ids = [c.cell_id for c in cells]
    todo = [c for c in dict(zip(ids, cells)).values() if c.cell_id not in done]
    todo.sort(key=lambda c: -c.N * c.steps * len(c.lrs))
    bar = tqdm(total=len(set(ids)), initial=len(set(ids)) - len(todo), desc=desc, unit="cell",
               disable=not progress, file=sys.stderr, dynamic_ncols=True)

    def finish(r: dict) -> None:
        done[r["cell_id"]] = r
        if store:
            store.add(r)
        acc = "n/a" if r["test_acc"] is None else f"{r['test_acc']:.3f}"
        bar.set_postfix_str(f"{r['label']} N={r['N']} acc={acc} {r['status']}")
        bar.update(1)

    try:
        if workers <= 1 or len(todo) <= 1:
            torch.set_num_threads(_threads(1))
            for c in todo:
                finish(measure_cell(c))
        else:
            ctx = mp.get_context("spawn")
            with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init, initargs=(_threads(workers),)) as pool:
                futs = [pool.submit(_measure, c.to_dict()) for c in todo]
                for f in as_completed(futs):
                    finish(f.result())
    finally:
        bar.close()
    return [done[i] for i in ids]


CELL_COLUMNS = ["label", "arch", "task", "N", "width", "seed", "test_acc", "val_acc", "best_lr", "steps",
                "reached", "status", "params", "state_size", "wall_s", "cpu_s", "cell_id"]


def write_cells_csv(results: list[dict], path: Path) -> None:
    import csv

    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as f:
        w = csv.DictWriter(f, CELL_COLUMNS, extrasaction="ignore")
        w.writeheader()
        for r in results:
            w.writerow({k: (round(v, 5) if isinstance(v, float) and math.isfinite(v) else v) for k, v in r.items()})
    tmp.replace(path)
