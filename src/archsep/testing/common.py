"""What the contract checks share: a failed check's exception and its one-line message, the
runner that records passed checks, seeded generators."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch

from ..errors import ArchsepError

SEEDS = (0, 1)  # the two sampling seeds of the batch checks


class _Failed(Exception):
    """A contract violation found by a check (turned into a one-line ArchsepError)."""


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise _Failed(message)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Checks:
    """Runs named checks; records the passed ones, turns the first failure into one line."""

    def __init__(self, what: str):
        self.what = what
        self.passed: list[str] = []

    @contextlib.contextmanager
    def check(self, name: str) -> Iterator[None]:
        try:
            yield
        except _Failed as e:
            raise ArchsepError(_one_line(f"{self.what}: check '{name}' failed: {e}")) from None
        except ArchsepError as e:
            raise ArchsepError(_one_line(f"{self.what}: check '{name}' failed: {e}")) from e
        except Exception as e:  # noqa: BLE001  (a crash inside the extension is a failed check)
            raise ArchsepError(_one_line(f"{self.what}: check '{name}' failed: {type(e).__name__}: {e}")) from e
        self.passed.append(name)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-4) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=tol, atol=tol))
