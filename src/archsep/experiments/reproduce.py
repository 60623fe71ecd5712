"""Run an experiment end to end: plan -> executor -> store -> analyze -> figures -> text.
Writes OUT/archsep.db (every run), runs.csv, summary.json, the figures and summary.txt."""
from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from ..errors import ArchsepError
from ..fileio import OWNED, atomic_write, check_output, default_dir
from ..results import Summary
from ..sweeps.file import Sweep
from ..runs.launch import Launch
from ..runs.executors import default_workers
from ..runs.runner import launch_runs
from ..runs.search import outcome, run_search, save_outcome
from ..store import DB_NAME, open_store
from ..reporting.tables import write_csv
from .base import EXPERIMENTS, Experiment, write_json
from .plan import plan_sweep
from .size_search import NOT_RUN

# the per-preset JSON-lines stores of archsep before every run went to archsep.db (paper A's
# cells, Figure 2's runs): a directory holding one is refused, not silently mixed
LEGACY_FILES = tuple(f"{stem}.jsonl" for stem in ("cells", "results"))


def default_out(name: str, scale: str, overrides: dict | None = None) -> Path:
    """results/<preset>[-<scale>][-<field>=<value>...]"""
    # a --set value becomes part of the name: it must stay one directory under results/
    return default_dir(outputs_name(name, scale, overrides), "set")


OUTPUTS = ("runs.csv", "curves.csv", "summary.json", "summary.txt")
# the figures the presets draw (PNG and SVG of each stem)
FIGURES = tuple(f"{stem}.{ext}" for stem in ("figure", "heatmaps", "accuracy", "val_curves") for ext in ("png", "svg"))


def remove_stale_figures(out_dir: Path, drawn: list[Path]) -> list[Path]:
    """Remove the figures (FIGURES) in `out_dir` that the last drawing, `drawn`, did not produce
    (e.g. heatmaps.* from before a one-width preset stopped drawing them), so that no figure
    of older runs sits beside the new ones. Only regular files go; a link is left alone (and
    never followed). Returns what was removed."""
    import os
    import stat

    keep = {p.name for p in drawn}
    gone = []
    for name in FIGURES:
        p = out_dir / name
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if name not in keep and stat.S_ISREG(st.st_mode):
            p.unlink()
            gone.append(p)
    return gone


def outputs_name(name: str, scale: str = "full", overrides: dict | None = None) -> str:
    """What one output directory's summary describes: a preset at a scale with its overrides
    (the name of its sweep, less any --only: arms added later belong to the same outputs)."""
    from .plan import override_suffix

    return (name if scale == "full" else f"{name}-{scale}") + override_suffix(overrides)


def check_out(out_dir: Path, outputs: str | None = None) -> None:
    """An output directory is new, empty, or one archsep wrote (it holds an archsep store):
    never a directory of someone else's files that reproduce would overwrite. One directory
    holds the outputs of one preset (at one scale, with one set of overrides: `outputs`, see
    `outputs_name`): a second one is refused, not written over the first's summary. An output
    file's name taken by a directory (or anything but a file) is refused before any run."""
    for f in LEGACY_FILES:
        if (out_dir / f).exists():
            raise ArchsepError.at("out", f"'{out_dir}' holds {f} from an older archsep, which this version does not "
                               "read; rerun into a new output directory (the old files are left untouched)")
    for f in OUTPUTS:  # a directory, link, FIFO or device in the way: refused before any run, not after
        check_output(out_dir / f, "out", allow=OWNED)
    if any(out_dir.iterdir()) and not (out_dir / DB_NAME).exists():
        mine = [f for f in OUTPUTS if (out_dir / f).exists()]
        raise ArchsepError.at("out", f"'{out_dir}' is not empty and holds no archsep store"
                           + (f" ({', '.join(mine)} would be overwritten)" if mine else "")
                           + "; use an empty or new directory")
    for f in OUTPUTS + FIGURES:
        p = out_dir / f
        if p.exists() and not p.is_file():
            what = "a directory" if p.is_dir() else "not a regular file"
            raise ArchsepError.at("out", f"'{p}' is {what}; reproduce writes its {f} there: move it away or give "
                               "another output directory (nothing was run or written)")
    if outputs is not None and (out_dir / DB_NAME).exists():
        with open_store(out_dir, create=False) as store:
            sweeps = store.sweeps()
        others = list(dict.fromkeys(_outputs_of(sw) for sw in sweeps))
        others = [o for o in others if o != outputs]
        if others:
            raise ArchsepError.at("out", f"'{out_dir}' holds the outputs of {others[0]}; one output directory holds "
                                         "one preset's outputs (its runs.csv, summary and figures): give another "
                                         f"output directory for {outputs}, e.g. {out_dir / outputs}")


def _outputs_of(sweep: dict) -> str:
    """The outputs a stored sweep's runs belong to (`outputs_name`), from the preset, scale and
    overrides its plan recorded; a sweep file's runs (no preset) are outputs of their own."""
    a = sweep["analysis_data"]  # a preset's sweep has recorded its scale since before --only existed
    if sweep["preset"] is None or "scale" not in a:
        return sweep["name"]
    return outputs_name(sweep["preset"], a["scale"], a.get("overrides"))


def stored(configs: list, out_dir: Path) -> list:
    """The planned runs that the store of `out_dir` holds (finished, errors included), training
    nothing; a directory without a store is one error naming --out."""
    if not (out_dir / DB_NAME).is_file():
        raise ArchsepError.at("out", f"'{out_dir}' holds no archsep store: nothing has run there yet (drop "
                                     "--finished-only to run the preset)")
    with open_store(out_dir, create=False) as store:  # rows() gives the ids it holds, in the order asked
        return store.results(list(dict.fromkeys(c.run_id for c in configs)))


def stored_all(out_dir: Path) -> list:
    """Every finished run the store of `out_dir` holds (a search's analysis replays it)."""
    if not (out_dir / DB_NAME).is_file():
        raise ArchsepError.at("out", f"'{out_dir}' holds no archsep store: nothing has run there yet (drop "
                                     "--finished-only to run the preset)")
    with open_store(out_dir, create=False) as store:
        return store.results()


def without_unused(exp: Experiment, scale: str, sweep: Sweep, out_dir: Path) -> tuple[Sweep, list[str]]:
    """`sweep` (a search scale's) without its cells that no claim can use, as the runs the store
    of `out_dir` holds decide it (`size_unused`: their arm's positive control failed), and those
    cells' names; `sweep` itself where there is no store or no such cell."""
    if sweep.search is None or not (out_dir / DB_NAME).is_file():
        return sweep, []
    left = {(c["label"], c["N"]) for c in exp.summarize(stored_all(out_dir), scale).data.get("not_run") or []}
    s = sweep.search
    keep = [c for c, cell in enumerate(s.cells) if (cell.label, cell.point.get("task_params.N")) not in left]
    if len(keep) == len(s.cells):
        return sweep, []
    search = dataclasses.replace(s, cells=[s.cells[c] for c in keep],
                                 batch_sizes={i: s.batch_sizes[c] for i, c in enumerate(keep)})
    names = [cell.name for c, cell in enumerate(s.cells) if c not in keep]
    return dataclasses.replace(sweep, search=search, configs=search.first_rung()), names


def reproduce(name: str | Experiment, scale: str = "full", launch: Launch | None = None,
              overrides: dict | None = None, only: list[str] | None = None, at: list[int] | None = None,
              train: bool = True, extra: list[str] | None = None, every_cell: bool = False, **options) -> Summary:
    """Run experiment `name` (or an experiment already built) at `scale`, with `overrides` of
    every run's fields (e.g. {"train.weight_decay": 0.1}), `only` some of its architectures
    (e.g. ["TF", "FFN"]), `at` some points of its axis (e.g. [1, 2]) and, for the atlas, `extra`
    archs of one's own beside its mixers (e.g. ["mingru"], a plugin's: `--with`); returns its summary
    (also written to OUT). How it runs is `launch`
    (`runs.launch.Launch`), or its fields as keyword arguments: out, workers, device, progress,
    executor, address, retry_errors, log. With `train=False` nothing is trained: the outputs are
    written from the planned runs OUT's store already holds (a long run's results so far), and
    the summary's notes say how many planned runs are still pending. A search scale leaves out the
    cells no claim can use (`without_unused`) unless `every_cell`."""
    exp = EXPERIMENTS.get(name)() if isinstance(name, str) else name
    name = exp.registry_name
    launch = (launch or Launch(**options)).check()
    # registered in the store: `archsep status OUT` sees the plan
    sweep = plan_sweep(exp, scale, launch.device, overrides, only, at, extra)
    out_dir = launch.out if launch.out is not None else default_out(name, scale, overrides)
    if out_dir.is_dir():
        check_out(out_dir, outputs_name(name, scale, overrides))
    launch = dataclasses.replace(launch, out=out_dir, workers=launch.workers or default_workers(sweep.configs))
    # every run's memory is checked before OUT and its store are created
    t0 = time.perf_counter()
    if sweep.search is not None:  # a search scale: its rungs, then the analysis replays it over the store
        # (OUT/search.json is then the whole search's outcome, every length, not only --at's)
        if train:
            if not every_cell:
                sweep, left = without_unused(exp, scale, sweep, out_dir)
                if left:
                    print(f"{name}: not run: {', '.join(left)}: {NOT_RUN}", file=sys.stderr, flush=True)
            if sweep.search is not None and sweep.search.cells:
                run_search(sweep, launch)
        results = stored_all(out_dir)
    else:
        results = (launch_runs(sweep.configs, launch, desc=name, sweep=sweep) if train
                   else stored(sweep.configs, out_dir))
    summary = exp.summarize(results, scale, overrides)  # each run id counted once
    planned = {c.run_id for c in sweep.configs}
    pending = 0 if sweep.search is not None else len(planned - {r.run_id for r in results})
    if pending:
        summary.data["pending"] = pending
        summary.data["notes"] = [f"{pending} of the {len(planned)} planned runs are not "
                                 "finished yet: these outputs are from the runs finished so far, and a claim "
                                 "that reads a missing run may change", *summary.data["notes"]]
    summary.wall_s = round(time.perf_counter() - t0, 1)
    summary.out = out_dir
    write_csv(exp.table(summary), out_dir / "runs.csv")
    if curves := exp.curves(summary):
        write_csv(curves, out_dir / "curves.csv")
    d = summary.to_dict()
    drawn = exp.figures(summary, out_dir)
    remove_stale_figures(out_dir, drawn)
    d["figures"] = [p.name for p in drawn]
    write_json(out_dir / "summary.json", d)
    atomic_write(out_dir / "summary.txt", exp.summary_text(summary) + "\n", "out", allow=OWNED)
    if (walked := getattr(summary, "walk", None)) is not None:  # a search: the whole of it, as the store has it
        save_outcome(out_dir, outcome(*walked))
    return summary
