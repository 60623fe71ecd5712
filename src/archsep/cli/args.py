"""The command line's argument types and the options several commands share (`--scale`,
`--quick`, `--only`, `--at`, `--with`): below every command's module, so none of them imports the
package's facade (`cli/__init__`) back."""
from __future__ import annotations

import argparse

from ..errors import ArchsepError


def _positive_int(field: str):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{field}: expected a positive integer, got '{text}'") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{field}: expected a positive integer, got '{text}'")
        return v
    return parse


def split_labels(text: str) -> list[str]:
    """Comma-separated labels; a comma inside brackets belongs to its label (TF-(1,64))."""
    out, cur, depth = [], "", 0
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += (ch in "([") - (ch in ")]")
        cur += ch
    return [x.strip() for x in out + [cur] if x.strip()]


def _labels(field: str):
    """A comma-separated list of at least one label ('' is an unset shell variable, not 'all')."""
    def parse(text: str) -> list[str]:
        out = split_labels(text)
        if not out:
            raise argparse.ArgumentTypeError(f"{field}: expected one or more architecture labels (e.g. TF,FFN), "
                                             f"got {text!r}")
        return out
    return parse


def _axis_values(text: str) -> list[int]:
    """A comma-separated list of at least one integer point of a figure's axis (e.g. 1,2)."""
    parts = [x.strip() for x in text.split(",") if x.strip()]
    try:
        out = [int(x) for x in parts]
    except ValueError:
        out = []
    if not out:
        raise argparse.ArgumentTypeError(f"--at: expected one or more integers (points of the figure's axis, "
                                         f"e.g. 1,2), got {text!r}")
    return list(dict.fromkeys(out))


def add_scale_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scale", help="quick | full (default) | a preset's other scales, e.g. cpu")
    p.add_argument("--quick", action="store_true", help="shorthand for --scale quick")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="with a preset: set a field of every run, e.g. train.weight_decay=0.1 (repeatable); "
                        "seed=S starts the preset's seed list at S (seeds S, S+1, ...); label and the preset's "
                        "grid axes (e.g. task_params.N) are refused: use --only, or a sweep file")


def add_with_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--with", dest="with_archs", action="append", default=[], metavar="NAME",
                   help="atlas only: add a mixer of your own (a registered arch, e.g. a plugin's loaded with "
                        "--import FILE) beside the built-in mixers on every task, its width matched to the "
                        "Transformer's parameters like theirs; repeatable. Adds runs, changes none: "
                        "archsep --import mingru.py reproduce atlas --with mingru")


def scale_of(a: argparse.Namespace, default: str = "full") -> str:
    if a.quick and a.scale not in (None, "quick"):
        raise ArchsepError(f"--quick: given with --scale {a.scale}; keep one")
    return "quick" if a.quick else (a.scale or default)
