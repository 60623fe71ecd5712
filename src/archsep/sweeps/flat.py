"""Flat configs ("task_params.N" -> value) and the tables of a sweep file: shared by reading a
sweep (`file`) and matching its arms (`match`)."""
from __future__ import annotations

from typing import Any

from ..errors import ArchsepError, closest


def _check_table(doc: Any, name: str, keys: tuple[str, ...], where: str) -> None:
    """A top-level table of known keys: anything else is named with the closest allowed key."""
    if not isinstance(doc, dict):
        raise ArchsepError(f"{where}: {name}: expected a table, got {doc!r}")
    for k in doc:
        if k not in keys:
            raise ArchsepError(f"{where}: {name}.{k}: unknown key{closest(k, keys)}; allowed: {', '.join(keys)}")


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in flat.items():
        head, _, sub = k.partition(".")
        if sub:
            out.setdefault(head, {})[sub] = v
        else:
            out[k] = v
    return out


def _describe(flat: dict, keys: list[str]) -> str:
    return "(" + ", ".join(f"{k}={flat[k]!r}" for k in keys if k in flat) + ")"
