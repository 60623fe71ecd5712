"""A long run's state, saved while it trains, so that a killed run goes on where it was.

A group of runs trained together (one run alone, seeds stacked into one computation, or a
learning-rate race side by side: `train._train_group`) saves its whole state at a scheduled
evaluation point once `every_s` seconds of its training have passed since the last save: the
parameters and the optimizer's moments, each run's data stream, curves, held-out schedule and
(for a run already finished) result, which runs still train, and the torch generator. Started
again with the same configs, the group loads that state and trains on from the next step; its
runs then give **the same numbers** as runs never interrupted (tests/engine/test_checkpoint.py), each
`wall_s` counts the training time of every part, and `extra["resumed_at"]` lists the steps
they went on from. The file is named by the group's first run id.

**Ends** (`Checkpoints.ends`, a search's trials: `sweeps.search`): a run that trains to the end
of its budget also keeps its state at that last step, in OUT/checkpoints/ends/<prefix>-<step>.pt,
where <prefix> names its config without its budget (`prefix_key`). The same run with a larger
budget, trained later with ends on, goes on from the longest such state below its own budget
instead of from step 0, and gives **the same numbers** as the larger run trained from the start
(tests/engine/test_checkpoint_ends.py): a constant learning rate and a schedule of evaluations
that does not look at the budget (`continuable`: eval_mode "every", no learning-rate race) make a
run's first steps the same whatever its budget. Ends are kept until their owner (the search)
removes them (`discard_ends`).

The file is data: it is read with `torch.load(weights_only=True)` (tensors, numbers, strings,
lists and dicts; never a pickled object, so reading it runs no code), and used only when it
names this run's exact config and the same archsep and torch versions; anything else (another
version, a damaged or foreign file) is ignored and the run starts from its first step. It is
written atomically (`fileio.atomic_write`) and the driver removes it once the finished run is in
the store (`runs.runner`).
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import pickle
import warnings
import zipfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Sequence

import torch

from ..config import RunConfig
from ..errors import ArchsepError
from ..fileio import atomic_write

FORMAT = 1
DIR_NAME = "checkpoints"  # beside the store: OUT/checkpoints/<run id>.pt
# what reading a damaged, foreign or code-bearing file can raise (weights_only refuses objects)
UNREADABLE = (OSError, RuntimeError, EOFError, ValueError, TypeError, KeyError, AttributeError, ImportError,
              IndexError, UnicodeDecodeError, RecursionError, pickle.UnpicklingError, zipfile.BadZipFile)


ENDS = "ends"  # OUT/checkpoints/ends/<prefix key>-<step>.pt


@dataclass(frozen=True)
class Checkpoints:
    """Where a run's checkpoint goes and how often (seconds of its training between saves;
    0: at every scheduled evaluation; inf: never). With `ends`, a run that trains to its budget
    also keeps its last state for the same run with a larger budget (see the module's text)."""

    dir: str
    every_s: float
    ends: bool = False

    def path(self, run_id: str) -> Path:
        return Path(self.dir) / f"{run_id}.pt"

    def end_path(self, cfg: RunConfig, step: int) -> Path:
        return Path(self.dir) / ENDS / f"{prefix_key(cfg)}-{step}.pt"

    @classmethod
    def beside(cls, out: str | Path, every_s: float = 0.0, ends: bool = False) -> "Checkpoints":
        """The checkpoints of the store in folder `out` (OUT/checkpoints)."""
        return cls(str(Path(out) / DIR_NAME), every_s, ends)


def continuable(cfg: RunConfig) -> bool:
    """Whether a run's first steps are the same whatever its budget, so that a larger budget can
    go on from its end: evaluations at every scheduled point (the progressive schedule forces a
    full one at a run's last step) and no learning-rate race (its rungs are fractions of the
    budget). The learning rate is constant in every run."""
    return cfg.train.eval_mode == "every" and not cfg.train.halving_lrs


def _budgetless(cfg: RunConfig) -> dict:
    d = json.loads(json.dumps(cfg.to_dict()))
    d["train"]["budget"] = None
    d.pop("label", None)  # not part of a run's identity
    return d


def prefix_key(cfg: RunConfig) -> str:
    """The identity of a run without its budget: every run that differs from it only there."""
    return hashlib.sha256(json.dumps(_budgetless(cfg), sort_keys=True).encode()).hexdigest()[:20]


def _archsep_version() -> str:
    try:
        return version("archsep")
    except PackageNotFoundError:  # a source tree that is not installed
        return "0+unknown"


def _identity(cfgs: Sequence[RunConfig]) -> dict:
    return {"format": FORMAT, "archsep": _archsep_version(), "torch": str(torch.__version__),
            "configs": json.dumps([c.to_dict() for c in cfgs], sort_keys=True)}


def save(ck: Checkpoints, cfgs: Sequence[RunConfig], state: dict[str, Any]) -> bool:
    """Write `state` (tensors, numbers, strings, lists, tuples, dicts) as the checkpoint of the
    group of runs `cfgs` (one run, or runs trained together), named by the first one's id.
    A checkpoint is an aid, never a reason for a run to fail: where it cannot be written (a full
    disk, a link or anything but a folder in the way) nothing is written and False is returned."""
    d = Path(ck.dir)
    try:
        if d.is_symlink():  # never write through a link planted at the folder's name
            return False
        d.mkdir(parents=True, exist_ok=True)
        atomic_write(ck.path(cfgs[0].run_id), lambda f: torch.save({**_identity(cfgs), "state": state}, f),
                     field="checkpoint", binary=True)
    except (ArchsepError, OSError):
        return False
    return True


def load(ck: Checkpoints, cfgs: Sequence[RunConfig]) -> dict[str, Any] | None:
    """The saved state of the group `cfgs` (on the CPU; the runs move it), or None where there
    is none it can use (see the module's text)."""
    p = ck.path(cfgs[0].run_id)
    if not p.is_file():  # a directory, link to one or device in its place is not ours: ignored
        return None
    try:
        data = p.read_bytes()
        with warnings.catch_warnings():  # a foreign pickle's protocol warning: it is refused or ignored anyway
            warnings.simplefilter("ignore")
            saved = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except UNREADABLE:
        return None  # damaged, foreign, or a pickle asking to build an object: not used
    if not isinstance(saved, dict) or not isinstance(saved.get("state"), dict):
        return None
    if any(saved.get(k) != v for k, v in _identity(cfgs).items()):
        return None
    return saved["state"]


def save_end(ck: Checkpoints, cfg: RunConfig, step: int, state: dict[str, Any]) -> bool:
    """Keep the state of run `cfg` at its last step `step` (its budget), for the same run with a
    larger budget (`load_end`). As `save`: never a reason to fail, False where not written."""
    d = Path(ck.dir)
    try:
        if d.is_symlink() or (d / ENDS).is_symlink():
            return False
        (d / ENDS).mkdir(parents=True, exist_ok=True)
        ident = {**_identity([cfg]), "configs": json.dumps(_budgetless(cfg), sort_keys=True)}
        atomic_write(ck.end_path(cfg, step), lambda f: torch.save({**ident, "state": state}, f),
                     field="checkpoint", binary=True)
    except (ArchsepError, OSError):
        return False
    return True


def end_name(name: str) -> tuple[str, int] | None:
    """(prefix key, step) of a kept end's file name `<prefix key>-<step>.pt`, or None."""
    key, _, tail = name[:-3].rpartition("-") if name.endswith(".pt") else ("", "", "")
    return (key, int(tail)) if key and tail.isascii() and tail.isdigit() else None


def _end_steps(ck: Checkpoints, cfg: RunConfig) -> list[int]:
    """The steps of the kept ends of `cfg`'s prefix, below its own budget, longest first."""
    d = Path(ck.dir) / ENDS
    if not d.is_dir() or d.is_symlink():
        return []
    key, top = prefix_key(cfg), cfg.train.budget // cfg.train.batch_size
    steps = []
    for p in d.glob(f"{key}-*.pt"):
        end = end_name(p.name)
        if end and end[0] == key and 0 < end[1] < top and p.is_file() and not p.is_symlink():
            steps.append(end[1])
    return sorted(steps, reverse=True)


def load_end(ck: Checkpoints, cfg: RunConfig) -> dict[str, Any] | None:
    """The state a run goes on from: the longest kept end of the same run with a smaller budget
    (`save_end`), or None. A file that does not name this run's prefix, archsep and torch is
    ignored, as `load` ignores one."""
    if not continuable(cfg):
        return None
    ident = {**_identity([cfg]), "configs": json.dumps(_budgetless(cfg), sort_keys=True)}
    for step in _end_steps(ck, cfg):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                saved = torch.load(io.BytesIO(ck.end_path(cfg, step).read_bytes()), map_location="cpu",
                                   weights_only=True)
        except UNREADABLE:
            continue
        if (isinstance(saved, dict) and isinstance(saved.get("state"), dict)
                and all(saved.get(k) == v for k, v in ident.items()) and saved["state"].get("step") == step):
            return saved["state"]
    return None


def end_step(ck: Checkpoints, cfg: RunConfig) -> int:
    """The step run `cfg` would go on from (0: from the start); reads only file names."""
    steps = _end_steps(ck, cfg) if continuable(cfg) else []
    return steps[0] if steps else 0


def discard_ends(ck: Checkpoints, cfgs: Sequence[RunConfig]) -> None:
    """Remove the kept end of each of `cfgs` at its own budget (no link is followed)."""
    d = Path(ck.dir) / ENDS
    if Path(ck.dir).is_symlink() or d.is_symlink() or not d.is_dir():
        return
    for c in cfgs:
        p = ck.end_path(c, c.train.budget // c.train.batch_size)
        if p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)


def _saved(ck: Checkpoints, run_id: str, config: dict) -> tuple[int | None, list, list, float | None]:
    """The step the checkpoint of run `run_id` (`config` as stored; the first run of its group)
    was saved at, the configs of that group (as JSON has them), each one's best full evaluation
    so far ((metric, samples), or None: `_best`) and the seconds the group had trained by then,
    over every part (None where not well formed); (None, [], [], None) where there is none of
    that run's. Reads the file mapped, read-only: a large checkpoint costs only the few values
    read from it; a run id that is not a plain name is never made a path."""
    path = ck.path(run_id) if isinstance(run_id, str) and run_id.isalnum() else None
    if path is None or not path.is_file():
        return None, [], [], None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            saved = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        group = json.loads(saved["configs"]) if isinstance(saved, dict) and saved.get("format") == FORMAT else None
        mine = json.loads(json.dumps(config))  # as JSON has it (tuples as lists)
        step = saved["state"]["step"] if isinstance(group, list) and group[:1] == [mine] else None
        tracks = saved["state"].get("tracks") if step is not None else None
        elapsed = saved["state"].get("elapsed") if step is not None else None
    except UNREADABLE:
        return None, [], [], None
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0 or not isinstance(group, list):
        return None, [], [], None
    bests = [_best(t) for t in tracks] if isinstance(tracks, list) and len(tracks) == len(group) else []
    seconds = elapsed if isinstance(elapsed, float) and math.isfinite(elapsed) and elapsed > 0 else None
    return step, group, bests or [None] * len(group), seconds


def _best(track: Any) -> tuple[float, int] | None:
    """A saved run's best full evaluation so far, (metric, samples), where it is well formed."""
    b = track.get("best") if isinstance(track, dict) else None
    if not isinstance(b, (list, tuple)) or len(b) != 2:
        return None
    m, n = b
    if isinstance(m, bool) or not isinstance(m, (int, float)) or isinstance(n, bool) or not isinstance(n, int):
        return None
    return float(m), n


def saved_steps(ck: Checkpoints, configs: Sequence[RunConfig]) -> dict[str, int]:
    """Run id -> the step its group's checkpoint was saved at, for the runs of `configs` that
    go on from one (the runner, `--dry-run`): see `group_steps`."""
    return group_steps(ck, [(c.run_id, c.to_dict()) for c in configs])


def group_steps(ck: Checkpoints, runs: Sequence[tuple[str, dict]]) -> dict[str, int]:
    """`saved_steps` for (run id, config as stored) pairs: see `group_progress`."""
    return {rid: p["step"] for rid, p in group_progress(ck, runs).items()}


def group_progress(ck: Checkpoints, runs: Sequence[tuple[str, dict]]) -> dict[str, dict[str, Any]]:
    """Run id -> {"step": the step its group's checkpoint was saved at, "best": its best full
    evaluation's metric so far or None, "best_samples": the samples it was at, "elapsed": the
    seconds its group had trained by then, every part counted, or None}, for (run id,
    config as stored) pairs (`archsep status` reads them from the store): every run a checkpoint
    names gets its own, not only the first one, whose id names the file (seeds stacked into one
    computation go on together)."""
    ids = {json.dumps(json.loads(json.dumps(cfg)), sort_keys=True): rid for rid, cfg in runs}
    out: dict[str, dict[str, Any]] = {}
    for rid, cfg in runs:
        step, group, bests, elapsed = _saved(ck, rid, cfg)
        if step is None:
            continue
        for g, best in zip(group, bests):
            other = ids.get(json.dumps(g, sort_keys=True))
            if other is not None:
                out[other] = {"step": step, "best": best[0] if best else None,
                              "best_samples": best[1] if best else None, "elapsed": elapsed}
    return out


def discard(ck: Checkpoints, run_id: str) -> None:
    """Remove a finished run's checkpoint (a link or anything but a file at its name is left)."""
    p = ck.path(run_id)
    if p.is_file() and not p.is_symlink() and not Path(ck.dir).is_symlink():
        p.unlink(missing_ok=True)


def tidy(ck: Checkpoints) -> None:
    """When no run of this call trains any more: remove the temporary files of saves cut short
    by a kill (`fileio.atomic_write` names them .<run id>.pt.<random>.tmp), then the folder once
    it is empty. Nothing else is touched, and no link is followed."""
    d = Path(ck.dir)
    if not d.is_dir() or d.is_symlink():
        return
    ends = d / ENDS
    for folder in (d, ends) if ends.is_dir() and not ends.is_symlink() else (d,):
        for p in folder.glob(".*.pt.*.tmp"):
            if p.is_file() and not p.is_symlink():
                p.unlink(missing_ok=True)
    if ends.is_dir() and not ends.is_symlink() and not any(ends.iterdir()):
        ends.rmdir()
    if not any(d.iterdir()):
        d.rmdir()
