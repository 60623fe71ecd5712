"""Theoretical constructions with hand-set weights (SPEC section 4): no training, only a check
that a theorem's weights do what the proof says, at N up to 10^4 in seconds.

A construction is one file registering a `Construction` subclass plus an import line below.
`run(Ns, seed)` returns a table (a list of flat dicts); `plot(rows, stem)` draws it.
"""
from __future__ import annotations

from .base import CONSTRUCTIONS, Construction, format_table, run_construction, write_csv
from . import qstr, lookup, dyck, equality, nearest  # noqa: F401,E402  (registers)

__all__ = ["CONSTRUCTIONS", "Construction", "format_table", "run_construction", "write_csv"]
