"""The sweep/store subcommands of the `archsep` CLI: sweep, status, export, import, report.

Kept apart from cli.py so that the main CLI file stays small; cli.py registers these.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from ..errors import ArchsepError, printable
from ..fileio import atomic_write, check_output, default_dir, path_arg


def add_parsers(sub, positive_int) -> None:
    s = sub.add_parser("sweep", help="run a sweep file (TOML) or a preset as a sweep, into a results store")
    s.add_argument("spec", metavar="FILE", help="a sweep file (.toml) or a preset name (see `archsep list`)")
    s.add_argument("--out", type=path_arg("--out"),
                   help="output directory holding the store archsep.db (default results/<sweep name>)")
    s.add_argument("--executor", default="local", help="local (default: a process pool) | ray")
    s.add_argument("--address", help="Ray cluster address HOST:PORT (default: start a local cluster)")
    s.add_argument("--workers", type=positive_int("--workers"),
                   help="worker processes (local) or concurrent tasks (ray); default: CPU cores "
                        "(local: 1 where the runs train on a GPU)")
    s.add_argument("--device", help="auto | cpu | cuda, for every run (not part of a run's identity)")
    from .args import add_scale_args, add_with_arg

    add_scale_args(s)
    add_with_arg(s)
    s.add_argument("--retry-errors", action="store_true", help="run again the runs stored with status error")
    s.add_argument("--keep-ends", action="store_true",
                   help="keep each run's state at the end of its budget (OUT/checkpoints/ends), so that the "
                        "same runs with a larger budget go on from there to the numbers they give trained "
                        "from the start (runs with eval_mode = every; runs then train one at a time)")
    s.add_argument("--log", help="also record each finished run in mlflow | tensorboard (under --out)")
    s.add_argument("--dry-run", action="store_true", help="validate and list the runs, run nothing")
    s.add_argument("--print-toml", action="store_true", help="print the sweep as a TOML file and exit")
    s.add_argument("--no-progress", action="store_true")

    st = sub.add_parser("status", help="done, pending and failed runs of a results store")
    st.add_argument("dir", metavar="DIR")
    st.add_argument("--json", action="store_true", help="machine-readable output")

    e = sub.add_parser("export", help="write the store's runs as one flat table (pandas reads it directly), "
                                      "or as JSON lines that `archsep import` adds to another store")
    e.add_argument("dir", metavar="DIR")
    e.add_argument("--format", default="csv", help="csv | parquet | jsonl (every stored column of every run, "
                                                   "one run a line: for `archsep import`)")
    e.add_argument("-o", "--output", type=path_arg("-o"), help="output file (default DIR/runs.<format>)")

    i = sub.add_parser("import", help="add finished runs from `archsep export --format jsonl` files to a store, "
                                      "where a preset or sweep rerun into it reuses them")
    i.add_argument("files", metavar="FILE", nargs="+")
    i.add_argument("--out", type=path_arg("--out"), required=True, help="output directory holding the store")

    r = sub.add_parser("report", help="a self-contained HTML report of a results store")
    r.add_argument("dir", metavar="DIR")
    r.add_argument("-o", "--output", type=path_arg("-o"), help="output file (default DIR/report.html)")


def finished_in(out: str | Path) -> set[str]:
    """The run ids OUT's store holds finished (none where there is no store yet)."""
    from ..store import DB_NAME, open_store

    if not (Path(out) / DB_NAME).exists():
        return set()
    with open_store(out, create=False) as store:
        return store.finished_ids()


def repeated_in(out: str | Path, configs, finished: set[str]) -> set[str]:
    """The run ids of `configs` not `finished` that OUT's store holds as the same run under
    another budget (`runs.runner.same_runs`): a run copies them instead of training them, so
    they cost nothing."""
    from ..runs.runner import same_runs
    from ..store import DB_NAME, open_store

    todo = [c for c in configs if c.run_id not in finished]
    if not todo or not (Path(out) / DB_NAME).exists():
        return set()
    with open_store(out, create=False) as store:
        return {row["run_id"] for row in same_runs(store, todo)}


def started_in(out: str | Path, configs, finished: set[str]) -> dict[str, int]:
    """Run id -> the step saved, for the runs of `configs` not `finished` that go on from a
    checkpoint in OUT (a dry run counts only their steps after it)."""
    from ..engine.checkpoint import Checkpoints, saved_steps

    return saved_steps(Checkpoints.beside(out), [c for c in configs if c.run_id not in finished])


def stored_results(out: str | Path) -> dict:
    """OUT's store's finished runs, run id -> result (none where there is no store yet)."""
    from ..store import DB_NAME, open_store

    if not (Path(out) / DB_NAME).exists():
        return {}
    with open_store(out, create=False) as store:
        return {r.run_id: r for r in store.results()}


def print_costs(name: str, configs, out, workers: int | None) -> None:
    """The cost estimate of `configs` (runs finished in OUT's store cost nothing more)."""

    from ..runs.cost import estimate, report
    from ..runs.executors import cores

    stored = finished_in(out)
    same = repeated_in(out, configs, stored)
    finished = (stored | same) & {c.run_id for c in configs}
    started = started_in(out, configs, finished)  # these cost only their steps after the one saved
    text = report(name, {**estimate(configs, workers or cores(), finished, started), "same": len(same)})
    print("\n".join(printable(line) for line in text.splitlines()))


def launch_of(a: argparse.Namespace):
    """The launch options from the flags, checked once, before anything is created: --executor,
    --address (an unreachable one fails in seconds), --device, --log and its packages."""
    from ..runs.launch import Launch

    return Launch(a.out, a.workers, a.executor, a.address, a.device, getattr(a, "retry_errors", False), a.log,
                  not a.no_progress, ends=getattr(a, "keep_ends", False)).check()


def cmd_sweep(a: argparse.Namespace) -> int:
    import dataclasses

    from ..experiments import plan
    from ..runs.runner import launch_runs
    from .args import scale_of

    launch = launch_of(a)
    s = plan.load(a.spec, scale_of(a), a.device, plan.parse_set(a.set), a.with_archs)
    if a.print_toml:
        sys.stdout.write(s.source)
        return 0
    out = Path(a.out) if a.out else default_dir(s.name, "set" if s.preset else f"{s.origin}: name")
    if s.search is not None:
        return _search(s, a, launch, out)
    if a.dry_run:
        print(f"{printable(s.name)}: {len(s.configs)} run(s), sweep id {s.sweep_id}")
        for c in s.configs:
            print(f"  {c.run_id}  {printable(c.label or c.arch):<6} {json.dumps(c.task_params, sort_keys=True)} "
                  f"seed={c.seed}")
        print_costs(s.name, s.configs, out, a.workers)
        return 0
    results = launch_runs(s.configs, dataclasses.replace(launch, out=out), desc=s.name, sweep=s)
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    print(f"{s.name}: {len(results)} run(s) in {out}: "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    print(f"  next: archsep status {out}; archsep report {out} -o {out / 'report.html'}")
    return errors_exit(results, out)


def print_search_price(s, out: Path, workers: int | None) -> None:
    """The price of a search (`runs.search.price`): runs finished in OUT's store cost nothing, a
    run with a checkpoint in OUT only its steps after it."""
    from ..runs.executors import cores
    from ..runs.search import price, price_report

    search = s.search
    stored = stored_results(out)
    every = [search.config(c, t, r, seed) for c, cell in enumerate(search.cells) for t in range(len(cell.flats))
             for r, seed in [*((r, None) for r in range(len(search.steps))), *((None, x) for x in search.seeds)]]
    same = repeated_in(out, every, set(stored))
    finished = set(stored) | same
    est = price(search, workers or cores(), finished, stored, started_in(out, every, finished))
    print("\n".join(printable(line) for line in price_report(s.name, search, {**est, "same": len(same)}).splitlines()))


def _search(s, a: argparse.Namespace, launch, out: Path) -> int:
    """A sweep file with a [search]: its price (--dry-run), or the search, rung after rung."""
    import dataclasses

    from ..runs.search import run_search, save_outcome, table

    if a.dry_run:
        first = s.configs
        print(f"{printable(s.name)}: a search; {len(first)} run(s) first, sweep id {s.sweep_id}")
        for c in first[:20]:
            print(f"  {c.run_id}  {printable(c.label or c.arch):<6} {json.dumps(c.task_params, sort_keys=True)} "
                  f"{json.dumps(c.model_params, sort_keys=True)} lr={c.train.lr:g} seed={c.seed}")
        if len(first) > 20:
            print(f"  ... and {len(first) - 20} more")
        print_search_price(s, out, a.workers)
        return 0
    result = run_search(s, dataclasses.replace(launch, out=out))
    save_outcome(out, result)
    print(f"{s.name}: search done in {out} ({out / 'search.json'}):")
    for line in table(result).splitlines():
        print(printable(line))
    runs = [r for cell in result["cells"] for r in cell["runs"]]
    errors = [r for r in runs if r["status"] == "error"]
    if errors:
        print(f"archsep: error: {len(errors)} of the winners' {len(runs)} run(s) ended in error; see "
              f"`archsep status {out}`", file=sys.stderr)
        return ERROR_EXIT
    return 0


ERROR_EXIT = 3  # some runs of the invocation ended in error (2: a mistake in the input)


def errors_exit(results, out: Path) -> int:
    """0, or ERROR_EXIT with one line naming how many runs failed and the first message."""
    errors = [r for r in results if r.status == "error"]
    if not errors:
        return 0
    reused = sum(r.run_id in getattr(results, "reused", set()) for r in errors)
    first = (errors[0].error or "").strip().splitlines()[0] if errors[0].error else "unknown error"
    print(f"archsep: error: {len(errors)} of {len(results)} run(s) ended in error"
          + (f" ({reused} reused from the store; rerun them with --retry-errors)" if reused else "")
          + f"; first: {first}; see `archsep status {out}`", file=sys.stderr)
    return ERROR_EXIT


def cmd_status(a: argparse.Namespace) -> int:
    """The store's counts. Damaged rows are listed (and make the exit code 2, with one line on
    stderr) while the rest of the store is reported; stored text is printed with its control
    characters escaped."""
    from ..errors import shown
    from ..registry import reading
    from ..store import open_store

    with reading(), open_store(a.dir, create=False) as store:
        st = store.status()
        st["checkpoints"] = _checkpointed(Path(a.dir), store)
    if a.json:
        print(json.dumps(st, indent=2))
    else:
        print(f"{shown(st['path'], 400)}: {st['finished']} finished, {st['pending']} pending; "
              + ", ".join(f"{k} {v}" for k, v in st["by_status"].items())
              + (f"; damaged {len(st['damaged'])}" if st["damaged"] else ""))
        for s in st["sweeps"]:
            print(f"  sweep {shown(s['name'])} ({shown(s['sweep_id'])}): {s['done']}/{s['total']} done, "
                  f"{s['pending']} pending, {s['failed']} failed")
        for c in st["checkpoints"]:
            lr = f" lr={c['lr']:g}" if isinstance(c["lr"], (int, float)) else ""
            print(f"  checkpoint {shown(c['run_id'])} {shown(c['label'])} {shown(json.dumps(c['task_params']))} "
                  f"{shown(json.dumps(c['model_params'], sort_keys=True))}{lr} seed={c['seed']}: "
                  f"step {c['step']} of {c['steps']} ({100 * c['step'] / c['steps']:.0f}%)"
                  + (f", its best held-out metric so far {c['best']:.4g} at step {c['best_step']}"
                     if c["best"] is not None else "") + _pace(c) + "; the same command goes on from there")
        for f in st["failed"][:20]:
            cfg = json.loads(f["config"])
            msg = (f["error"] or "").strip().splitlines()[0] if (f["error"] or "").strip() else \
                "metric above the divergence limit"
            print(f"  {f['status']:<9} {shown(f['run_id'])} {shown(cfg.get('label') or cfg.get('arch'))} "
                  f"{shown(json.dumps(cfg.get('task_params'), sort_keys=True))} seed={cfg.get('seed')}: {shown(msg)}")
        if len(st["failed"]) > 20:
            print(f"  ... and {len(st['failed']) - 20} more failed run(s) (--json lists all)")
        for d in st["damaged"][:20]:
            print(f"  damaged   {d['error']}")
        if len(st["damaged"]) > 20:
            print(f"  ... and {len(st['damaged']) - 20} more damaged row(s) (--json lists all)")
    if st["damaged"]:
        d = st["damaged"]
        print(f"archsep: error: store '{shown(st['path'], 400)}' is damaged: {len(d)} row(s) cannot be read "
              f"(listed {'in the JSON' if a.json else 'above'}); first: {d[0]['error']}", file=sys.stderr)
        return 2
    return 0


def _pace(c: dict) -> str:
    """A checkpointed run's pace so far and what it leaves at that pace, where its checkpoint says how
    long it has trained: ", 110 steps a minute over its 18 min of training (every part): about 2.2 h
    to go at that pace"."""
    from ..runs.cost import hms

    if not c.get("elapsed"):
        return ""
    per_min = 60 * c["step"] / c["elapsed"]
    return (f", {per_min:.3g} steps a minute over its {hms(c['elapsed'])} of training (every part): about "
            f"{hms(60 * (c['steps'] - c['step']) / per_min)} to go at that pace")


def _checkpointed(out: Path, store) -> list[dict]:
    """The pending runs with a checkpoint of theirs, or of the stacked group they train in, in
    OUT/checkpoints (engine/checkpoint.py): where a rerun goes on from. Read as data, never
    written."""
    from ..engine.checkpoint import Checkpoints, group_progress

    ck = Checkpoints.beside(out)
    if not Path(ck.dir).is_dir():
        return []
    seen = store.finished_ids()  # and, as the loop goes, the pending runs already looked at
    pending: list[tuple[str, dict, int, int]] = []
    for row in store.planned():
        rid = row["run_id"]
        if rid in seen:
            continue
        seen.add(rid)
        try:
            cfg = json.loads(row["config"])
            train = cfg["train"]
            batch = int(train["batch_size"])
            steps = int(train["budget"]) // batch
        except (ValueError, TypeError, KeyError, ZeroDivisionError):
            continue  # a damaged plan: status reports the rows it can read
        if steps > 0:
            pending.append((rid, cfg, steps, batch))
    saved = group_progress(ck, [(rid, cfg) for rid, cfg, _, _ in pending])  # every run of a stacked group
    return [{"run_id": rid, "label": cfg.get("label") or cfg.get("arch"), "task_params": cfg.get("task_params"),
             "model_params": cfg.get("model_params"), "lr": cfg["train"].get("lr"), "seed": cfg.get("seed"),
             "steps": steps, **saved[rid],
             "best_step": saved[rid]["best_samples"] // batch if saved[rid]["best_samples"] is not None else None}
            for rid, cfg, steps, batch in pending if rid in saved]


from ..reporting.tables import export_rows  # noqa: E402  (kept importable from here)


def _check_dir(d: str) -> None:
    if not Path(d).is_dir():
        raise ArchsepError.at("store", f"'{d}' is not a directory")


FORMATS = ("csv", "parquet", "jsonl")
FORMAT_FILES = tuple(f"runs.{f}" for f in FORMATS)


def cmd_export(a: argparse.Namespace) -> int:
    from ..store import open_store

    fmt = a.format.lower()
    if fmt not in FORMATS:
        from ..errors import unknown

        raise unknown("--format", a.format, list(FORMATS))
    _check_dir(a.dir)
    dest = Path(a.output) if a.output else Path(a.dir) / f"runs.{fmt}"
    check_output(dest, "dest", allow=FORMAT_FILES, example=f"runs.{fmt}")  # before any work
    from ..registry import reading

    if fmt == "jsonl":
        from ..store.transfer import dump_lines

        with reading(), open_store(a.dir, create=False) as store:
            lines = dump_lines(store)
        atomic_write(dest, "".join(line + "\n" for line in lines), "dest", allow=FORMAT_FILES, example="runs.jsonl")
        print(f"{len(lines)} run(s) -> {dest}; add them to another store with: archsep import {dest} --out DIR")
        return 0
    with reading(), open_store(a.dir, create=False) as store:
        rows = export_rows(store)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    if fmt == "csv":
        def write(f) -> None:
            w = csv.DictWriter(f, columns)
            w.writeheader()
            w.writerows(rows)

        atomic_write(dest, write, "dest", allow=FORMAT_FILES, newline="", example="runs.csv")
    else:
        table = _parquet_table(rows, columns)  # before the file is made: a missing pyarrow leaves nothing

        def write_pq(f) -> None:
            import pyarrow.parquet as pq

            pq.write_table(table, f)

        atomic_write(dest, write_pq, "dest", allow=FORMAT_FILES, binary=True, example="runs.parquet")
    print(f"{len(rows)} run(s), {len(columns)} column(s) -> {dest}")
    return 0


def cmd_import(a: argparse.Namespace) -> int:
    """Every file is read and checked before the store is opened: a bad line adds nothing."""
    from ..store import open_store
    from ..store.transfer import import_rows, read_rows

    rows: dict[str, dict] = {}
    for f in a.files:
        for row in read_rows(f):
            rows.setdefault(row["run_id"], row)  # the same run in two files: the first file's
    with open_store(a.out) as store:
        added, kept = import_rows(store, list(rows.values()))
    print(f"{added} run(s) added to {a.out}, {kept} already there (kept as stored)")
    return 0


def _parquet_table(rows: list[dict], columns: list[str]):
    try:
        import pyarrow as pa
    except ImportError:
        raise ArchsepError("--format parquet: needs pyarrow; pip install 'archsep[parquet]'") from None
    arrays = []
    for c in columns:
        vals = [r.get(c) for r in rows]
        try:
            arrays.append(pa.array(vals))
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # mixed types in one column: keep them as text
            arrays.append(pa.array([None if v is None else str(v) for v in vals]))
    return pa.Table.from_arrays(arrays, names=columns)


def cmd_report(a: argparse.Namespace) -> int:
    from ..experiments.report import write_report

    _check_dir(a.dir)
    dest = Path(a.output) if a.output else Path(a.dir) / "report.html"
    check_output(dest, "dest", allow=("report.html",), example="report.html")  # before the report is built
    p = write_report(a.dir, dest)
    print(f"report -> {p}")
    return 0


COMMANDS = {"sweep": cmd_sweep, "status": cmd_status, "export": cmd_export, "import": cmd_import,
            "report": cmd_report}
