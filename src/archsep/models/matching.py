"""Matched comparisons (MAD's iso-parameter / iso-state protocol): the width at which an
architecture's trainable parameters (or its recurrent state) come closest to a target.

    match_width("lstm", {"layers": 1}, spec, target=51_000)        -> Match(value=..., count=...)
    match_width("retnet", {"heads": 4}, spec, target=51_000)       # widths that 4 heads divide

The counts depend on the task (a token vocabulary, learned positions of its length, the output
size), so a match is made for one `TaskSpec`. Widths are searched among those the model's own
config accepts (e.g. multiples of `heads`); a parameter count grows with the width, so a
bisection finds the two widths around the target and the closer one is chosen. No width within
`tolerance` (relative) is an `ArchsepError` naming the field, the target and the closest count.
"""
from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from typing import Any

from ..errors import ArchsepError
from ..tasks.base import TaskSpec
from .registry import MODELS

BY = ("params", "state")  # what is matched: trainable parameters, or floats carried between positions
MAX_WIDTH = 8192
WIDTH_FIELDS = ("width", "hidden")  # the field searched when none is named, in this order


@dataclass(frozen=True)
class Match:
    value: int  # the chosen width
    count: int  # its parameters (or state floats)
    target: int

    @property
    def error(self) -> float:
        return abs(self.count - self.target) / self.target


def width_field(arch: str) -> str:
    """The parameter that sets an architecture's width: its `width`, else its `hidden`."""
    cls = MODELS.get(arch)
    hints = typing.get_type_hints(cls)
    fields = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for name in WIDTH_FIELDS:  # an integer width (ffn's `hidden` is a list of widths)
        if name in fields and int in (typing.get_args(hints[name]) or (hints[name],)):
            return name
    raise ArchsepError.at("field", f"{arch} has no integer width parameter ({' or '.join(WIDTH_FIELDS)}); name the "
                          f"parameter to search (its fields: {', '.join(sorted(fields))})")


_COUNTS: dict[tuple, int] = {}  # (config class, params, spec, by) -> count: a plan matches the same models often
_MAX_COUNTS = 100_000


def measure(arch: str, params: dict[str, Any], spec: TaskSpec, by: str = "params") -> int:
    """Trainable parameters, or state floats per sequence at the task's length, of one model
    (remembered per config class, parameters, task spec and `by`: a count depends on nothing else)."""
    if by not in BY:
        raise ArchsepError.at("by", f"must be one of {', '.join(BY)}, got {by!r}")
    cls = MODELS.known(arch)
    key = (cls, json.dumps(params, sort_keys=True, default=repr), spec, by)
    if cls is not None and key in _COUNTS:
        return _COUNTS[key]
    model = MODELS.build(arch, **params).build(spec)
    if by == "params":
        n = sum(p.numel() for p in model.parameters() if p.requires_grad)
    else:
        state = model.state_size(spec.seq_len)
        if state is None:
            raise ArchsepError.at("by", f"{arch} carries no fixed-size state (attention keeps a cache that grows "
                                  "with the length); match it by \"params\"")
        n = int(state)
    if cls is not None:
        if len(_COUNTS) >= _MAX_COUNTS:
            _COUNTS.clear()
        _COUNTS[key] = n
    return n


def match_width(arch: str, params: dict[str, Any], spec: TaskSpec, target: int, by: str = "params",
                field: str | None = None, tolerance: float = 0.05) -> Match:
    """The value of `field` (default: the width) whose count is closest to `target`."""
    name = field or width_field(arch)
    if name in params:
        raise ArchsepError.at(name, f"is chosen by the match; do not also set it (got {params[name]!r})")
    if target < 1:
        raise ArchsepError.at("target", f"must be >= 1, got {target}")
    cache: dict[int, int | None] = {}

    def count(w: int) -> int | None:  # None: the config rejects this width (e.g. heads do not divide it)
        if w not in cache:
            try:
                cache[w] = measure(arch, {**params, name: w}, spec, by)
            except ArchsepError as e:
                if e.field == "by":
                    raise
                cache[w] = None
            except ValueError:  # a module refusing the shape
                cache[w] = None
        return cache[w]

    def valid_near(w: int, up: bool) -> int | None:  # the nearest accepted width from w in one direction
        step = 1 if up else -1
        for v in range(w, MAX_WIDTH + 1 if up else 0, step):
            if count(v) is not None:
                return v
        return None

    lo = valid_near(1, up=True)
    if lo is None:
        raise ArchsepError.at(name, f"{arch} accepts no {name} in 1..{MAX_WIDTH}")
    hi = lo
    while (count(hi) or 0) < target:  # doubling: count(lo) < target <= count(hi), or hi the largest tried
        nxt = valid_near(2 * hi, up=True) if 2 * hi <= MAX_WIDTH else None
        if nxt is None:
            break
        lo, hi = hi, nxt
    while (count(lo) or 0) < target <= (count(hi) or 0):  # bisection over the accepted widths between
        m = (lo + hi) // 2
        mid = valid_near(m, up=True) if m > lo else None
        if mid is None or mid >= hi:
            mid = valid_near(m, up=False)
            if mid is None or mid <= lo:
                break  # no accepted width strictly between
        if (count(mid) or 0) >= target:
            hi = mid
        else:
            lo = mid
    best = min((w for w in {lo, hi}), key=lambda w: (abs((count(w) or 0) - target), w))
    found = Match(best, count(best) or 0, target)
    if found.error > tolerance:
        raise ArchsepError.at(name, f"no {name} of {arch} has {by} within {tolerance:.0%} of {target}: the closest "
                              f"is {name} = {best} with {found.count} ({found.error:.1%} off)")
    return found
