"""User-facing errors: the CLI prints them as one line and exits with code 2."""
from __future__ import annotations

import difflib
import sys
import unicodedata
from typing import Iterable


class ArchsepError(Exception):
    """A mistake in the user's input (parameters, configs, paths) or a damaged file. Never a bug.
    `field` names what was wrong where the raiser knows it (e.g. 'config.seed', 'out'), as data;
    `detail` is the message without it (`ArchsepError.at`). The library's text names fields by
    their library names; the CLI shows a field that is a flag by its flag (`cli.FLAG_OF`)."""

    def __init__(self, *args: object, field: str | None = None, detail: str | None = None):
        super().__init__(*args)
        self.field = field
        self.detail = detail

    @classmethod
    def at(cls, field: str, detail: str) -> ArchsepError:
        """'field: detail', with both kept as data."""
        return cls(f"{field}: {detail}", field=field, detail=detail)


def shown(text: object, limit: int = 200) -> str:
    """`text` safe to print on one terminal line: control characters (ESC, BEL, newlines, NUL,
    C1 codes) written as escapes, and cut at `limit` characters."""
    s = str(text)
    out = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s[:limit])
    return out + ("..." if len(s) > limit else "")


def closest(name: str, allowed: Iterable[str]) -> str:
    """' (did you mean X?)' for the nearest allowed name, or ''."""
    match = difflib.get_close_matches(str(name), list(allowed), n=1, cutoff=0.5)
    return f" (did you mean '{match[0]}'?)" if match else ""


def unknown(field: str, value: object, allowed: Iterable[str], hint: str = "") -> ArchsepError:
    """'field: unknown value ...; allowed: ...', with the nearest allowed name and `hint` (in
    brackets, at the end) where given."""
    allowed = sorted(allowed)
    detail = f"unknown value '{value}'{closest(str(value), allowed)}; allowed: {', '.join(allowed)}"
    return ArchsepError.at(field, detail + (f" ({hint})" if hint else ""))


def check(cond: bool, field: str, message: str) -> None:
    """Raise an ArchsepError naming `field` unless `cond`."""
    if not cond:
        raise ArchsepError.at(field, message)


_CONTROL = ("Cc", "Cf", "Zl", "Zp")


def has_control(text: str) -> bool:
    """Control or format characters: ESC, OSC, BEL, newline, NUL, DEL, C1, bidi overrides, ..."""
    return any(unicodedata.category(ch) in _CONTROL for ch in text)


def printable(text: object) -> str:
    """`text` safe for a terminal, on one line, whole: `shown` without a length limit."""
    return shown(text, limit=sys.maxsize)
