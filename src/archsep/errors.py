"""User-facing errors: the CLI prints them as one line and exits with code 2."""
from __future__ import annotations

import difflib
import unicodedata
from typing import Iterable


class ArchsepError(Exception):
    """A mistake in the user's input (parameters, configs, paths). Never a bug."""


def closest(name: str, allowed: Iterable[str]) -> str:
    """' (did you mean X?)' for the nearest allowed name, or ''."""
    match = difflib.get_close_matches(str(name), list(allowed), n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""


def unknown(field: str, value: object, allowed: Iterable[str]) -> ArchsepError:
    allowed = sorted(allowed)
    return ArchsepError(
        f"{field}: unknown value '{value}'{closest(str(value), allowed)}; allowed: {', '.join(allowed)}"
    )


def check(cond: bool, field: str, message: str) -> None:
    """Raise an ArchsepError naming `field` unless `cond`."""
    if not cond:
        raise ArchsepError(f"{field}: {message}")


_CONTROL = ("Cc", "Cf", "Zl", "Zp")


def has_control(text: str) -> bool:
    """Control or format characters: ESC, OSC, BEL, newline, NUL, DEL, C1, bidi overrides, ..."""
    return any(unicodedata.category(ch) in _CONTROL for ch in text)


def printable(text: object) -> str:
    """`text` safe for a terminal, on one line: control and format characters are shown
    escaped (\\x1b, \\n, \\u202e), never sent raw."""
    s = str(text)
    if not has_control(s):
        return s
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch) in _CONTROL else ch for ch in s)
