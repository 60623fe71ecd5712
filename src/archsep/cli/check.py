"""The contract-check subcommands of the `archsep` CLI: check-task, check-model.

Each prints the checks passed, one a line, then "ok"; a failed check (or a mistake in the
arguments) is one line `archsep: error: ...` on stderr and exit code 2, as everywhere in the CLI.
See `archsep.testing` for what is checked.
"""
from __future__ import annotations

import argparse
from typing import Any

from ..errors import ArchsepError


def add_parsers(sub) -> None:
    t = sub.add_parser("check-task", help="check a task against the task contract (shapes, seeds, baseline, ...)")
    t.add_argument("name", metavar="NAME", help="a registered task (see `archsep list`)")
    t.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a task parameter, e.g. N=8 (repeatable; VALUE as TOML, bare words are strings)")

    m = sub.add_parser("check-model", help="check an architecture against the model contract (shapes, "
                                           "gradients, fitting 64 examples, ...)")
    m.add_argument("name", metavar="NAME", help="a registered architecture (see `archsep list`)")
    m.add_argument("--task", help="check on this task only (default: small qstr and index-lookup instances)")
    m.add_argument("--task-param", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter of --task, e.g. N=8 (repeatable)")
    m.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="a model parameter, e.g. width=16 (repeatable)")


def _params(items: list[str], flag: str) -> dict[str, Any]:
    from ..experiments.plan import parse_set

    try:
        return parse_set(items)
    except ArchsepError as e:  # parse_set names its own flag (--set); here it is another
        raise ArchsepError(f"{flag}: {str(e).partition(': ')[2]}") from None


def _report(passed: list[str]) -> int:
    for name in passed:
        print(name)
    print("ok")
    return 0


def cmd_check_task(a: argparse.Namespace) -> int:
    from ..testing import check_task

    return _report(check_task(a.name, **_params(a.param, "--param")))


def cmd_check_model(a: argparse.Namespace) -> int:
    from ..testing import check_model

    task_params = _params(a.task_param, "--task-param")
    if task_params and a.task is None:
        raise ArchsepError("--task-param: given without --task")
    return _report(check_model(a.name, a.task, task_params or None, **_params(a.param, "--param")))


COMMANDS = {"check-task": cmd_check_task, "check-model": cmd_check_model}
