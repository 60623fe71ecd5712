"""The `archsep` command line. User mistakes print one line and exit with code 2."""
from __future__ import annotations

import argparse
import re
import sqlite3
import sys
from typing import NoReturn

from ..errors import ArchsepError, printable
from ..fileio import path_arg
from .args import (_axis_values, _labels, _positive_int, add_scale_args, add_with_arg, scale_of,  # noqa: F401
                   split_labels)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, no usage dump
        # argparse says "argument --at: --at: expected ..." for a type's own message that names its flag
        message = re.sub(r"^argument (\S+): \1: ", r"\1: ", message)
        print(f"archsep: error: {printable(message)}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from ..experiments import PRESETS

    p = _Parser(prog="archsep", description="Architecture separations: Transformers vs FFNs and RNNs.")
    from .. import __version__

    p.add_argument("--version", action="version", version=f"archsep {__version__}")
    p.add_argument("--import", metavar="MODULE_OR_PATH", dest="imports", action="append",
                   help="import a plugin (a module name or a .py file) that registers tasks, archs or presets; "
                        "repeatable, anywhere on the line; workers import it too")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)

    r = sub.add_parser("reproduce", help="run a figure preset end to end")
    r.add_argument("preset", help=f"one of: {', '.join(PRESETS.names())}")
    add_scale_args(r)
    r.add_argument("--out", type=path_arg("--out"), help="output directory (default results/<preset>[-<scale>])")
    r.add_argument("--workers", type=_positive_int("--workers"),
                   help="worker processes (default: CPU cores; 1 where the runs train on a GPU)")
    r.add_argument("--device", default="auto", help="auto | cpu | cuda")
    r.add_argument("--executor", default="local", help="local (default: a process pool) | ray")
    r.add_argument("--address", help="Ray cluster address HOST:PORT (default: start a local cluster)")
    r.add_argument("--retry-errors", action="store_true", help="run again the runs stored with status error")
    r.add_argument("--keep-ends", action="store_true",
                   help="keep each run's state at the end of its budget (OUT/checkpoints/ends), so that the "
                        "same runs with a larger budget go on from there to the numbers they give trained "
                        "from the start (runs with eval_mode = every; runs then train one at a time)")
    r.add_argument("--only", type=_labels("--only"),
                   help="only these architectures of the preset, by label (e.g. TF,FFN); the others can "
                        "be added later into the same --out")
    r.add_argument("--at", type=_axis_values,
                   help="only the runs at these points of the figure's axis (N, or q for qstr-fig3), e.g. 1,2; "
                        "the others can be added later into the same --out")
    add_with_arg(r)
    r.add_argument("--every-cell", action="store_true",
                   help="a search scale: also train the cells no claim can use (an arm whose positive control "
                        "failed, at longer lengths), which it leaves out otherwise")
    r.add_argument("--finished-only", action="store_true",
                   help="train nothing: write the outputs (runs.csv, summary, figures) from the runs --out's store "
                        "already holds, e.g. a long run's results so far; the summary says how many are pending")
    r.add_argument("--log", help="also record each finished run in mlflow | tensorboard (under --out)")
    r.add_argument("--dry-run", action="store_true",
                   help="run nothing: print the runs' FLOPs and estimated time here and on a GPU")
    r.add_argument("--no-progress", action="store_true")

    from .describe import add_parsers as _describe_parsers  # list, describe

    _describe_parsers(sub)
    from .sweep import add_parsers as _sweep_parsers  # sweep, status, export, report

    _sweep_parsers(sub, _positive_int)
    from .check import add_parsers as _check_parsers  # check-task, check-model

    _check_parsers(sub)
    from .construct import add_parser as _construct_parser  # construct

    _construct_parser(sub, _positive_int)
    return p


def cmd_reproduce(a: argparse.Namespace) -> int:
    from ..experiments import EXPERIMENTS
    from ..experiments.plan import parse_set, plan_sweep
    from ..experiments.reproduce import default_out, reproduce
    from .sweep import errors_exit, launch_of

    exp = EXPERIMENTS.get(a.preset)()  # built once; an unknown preset or scale: one line before any work
    scale = exp.check_scale(scale_of(a))
    launch = launch_of(a)  # the options, checked once
    overrides = parse_set(a.set)
    if a.dry_run:
        from .sweep import print_costs

        s = plan_sweep(exp, scale, a.device, overrides, a.only, a.at, a.with_archs)
        out = a.out or default_out(a.preset, scale, overrides)
        left: list[str] = []
        if s.search is not None and not a.every_cell:  # as the run would: without the cells no claim can use
            from pathlib import Path

            from ..experiments.reproduce import without_unused

            s, left = without_unused(exp, scale, s, Path(out))
        print(f"{s.name}: {len(s.configs)} run(s); estimating their cost", flush=True)  # the count first
        if scale in exp.caveats:
            print(f"scale {scale}: {exp.caveats[scale]}", flush=True)
        if left:
            from ..experiments.size_search import NOT_RUN

            print(f"not run: {', '.join(left)}: {NOT_RUN}", flush=True)
        if s.search is not None:
            from .sweep import print_search_price

            print_search_price(s, out, a.workers)
        else:
            print_costs(s.name, s.configs, out, a.workers)
        return 0
    if scale in exp.caveats:
        print(f"scale {scale}: {exp.caveats[scale]}", file=sys.stderr, flush=True)
    summary = reproduce(exp, scale, launch, overrides, a.only, at=a.at, train=not a.finished_only,
                        extra=a.with_archs, every_cell=a.every_cell)
    print(exp.summary_text(summary))
    return errors_exit(summary.results, summary.out)


COMMANDS = {"reproduce": cmd_reproduce}
from .describe import COMMANDS as _DESCRIBE_COMMANDS  # noqa: E402

COMMANDS.update(_DESCRIBE_COMMANDS)
from .sweep import COMMANDS as _SWEEP_COMMANDS  # noqa: E402

COMMANDS.update(_SWEEP_COMMANDS)
from .check import COMMANDS as _CHECK_COMMANDS  # noqa: E402

COMMANDS.update(_CHECK_COMMANDS)
from .construct import cmd_construct  # noqa: E402

COMMANDS["construct"] = cmd_construct


# the library's field names (ArchsepError.field) that the command line sets by a flag or an argument
FLAG_OF = {"out": "--out", "executor": "--executor", "address": "--address", "workers": "--workers",
           "set": "--set", "format": "--format", "scale": "--scale", "import": "--import", "only": "--only",
           "at": "--at", "with": "--with", "log": "--log", "store": "DIR", "sweep_file": "FILE", "dest": "-o",
           "file": "FILE"}


def as_flags(e: ArchsepError) -> str:
    """The error as the command line says it: a field the CLI sets is named by its flag."""
    if e.field in FLAG_OF and e.detail is not None:
        return f"{FLAG_OF[e.field]}: {e.detail}"
    return str(e)


def split_imports(argv: list[str]) -> tuple[list[str], list[str]]:
    """`--import X` / `--import=X`, anywhere on the line: they are loaded before the parser is
    built, so a plugin's presets, tasks and archs are known to it."""
    rest, imports, i = [], [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--import" and i + 1 < len(argv):
            imports.append(argv[i + 1])
            i += 2
            continue
        if a.startswith("--import="):
            imports.append(a.split("=", 1)[1])
        else:
            rest.append(a)
        i += 1
    return imports, rest


def main(argv: list[str] | None = None) -> int:
    from .. import plugins

    imports, argv = split_imports(list(sys.argv[1:] if argv is None else argv))
    try:
        for spec in imports:
            plugins.load(spec, field="import")
    except ArchsepError as e:
        print(f"archsep: error: {printable(as_flags(e))}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except ArchsepError as e:  # one line, whatever text a value carried (ESC, newlines)
        print(f"archsep: error: {printable(as_flags(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("archsep: interrupted; finished runs are saved and will be reused", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `archsep ... | head`: the reader left, nothing is wrong
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (MemoryError, RuntimeError) as e:
        if not isinstance(e, MemoryError) and "allocate" not in str(e):
            raise
        print(f"archsep: error: out of memory ({str(e).splitlines()[0][:160] if str(e) else 'MemoryError'}); "
              "finished runs are saved; use smaller sizes or a machine with more memory", file=sys.stderr)
        return 2
    except sqlite3.OperationalError as e:
        from ..store import disk_full

        if not disk_full(e):
            raise
        print(f"archsep: error: the disk holding the store is full ({e}); finished runs in the store are saved; "
              "free some space and rerun the same command to resume", file=sys.stderr)
        return 2
    except OSError as e:
        import errno

        if e.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        print(f"archsep: error: the disk is full ({e.filename or ''}: {e.strerror}); finished runs in the store are "
              "saved; free some space and rerun the same command to resume", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
