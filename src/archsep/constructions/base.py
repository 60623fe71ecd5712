"""The construction interface, shared helpers (near-orthogonal codes, chunked attention) and
the table writers."""
from __future__ import annotations

import abc
import math
from pathlib import Path
from typing import ClassVar, Sequence

import torch

from ..reporting.tables import write_csv
from ..errors import ArchsepError
from ..fileio import check_output, make_dirs
from ..registry import Registry


class Construction(abc.ABC):
    registry_name: ClassVar[str]
    description: ClassVar[str] = ""
    default_Ns: ClassVar[tuple[int, ...]] = (10, 100, 1000, 10_000)

    @abc.abstractmethod
    def run(self, Ns: Sequence[int], seed: int = 0) -> list[dict]:
        """The result table: one flat dict per row."""

    @abc.abstractmethod
    def plot(self, rows: list[dict], stem: Path) -> list[Path]: ...

    def memory(self, N: int) -> float:
        """Bytes the construction needs at length N, roughly (0: not estimated)."""
        return 0.0


CONSTRUCTIONS: Registry[Construction] = Registry("construction")


def rademacher_codes(n: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """n codes in {+-1/sqrt k}^k: near-orthogonal, |<c_i, c_j>| = O(sqrt(log n / k)) for i != j."""
    return (torch.randint(0, 2, (n, k), generator=generator).float() * 2 - 1) / math.sqrt(k)


def max_coherence(codes: torch.Tensor, chunk: int = 2048) -> float:
    """max_{i != j} <c_i, c_j>, computed in row chunks (n x n never held at once)."""
    n = codes.shape[0]
    best = -math.inf
    for s in range(0, n, chunk):
        g = codes[s:s + chunk] @ codes.T
        idx = torch.arange(s, min(s + chunk, n))
        g[idx - s, idx] = -math.inf
        best = max(best, float(g.max()))
    return best


def _cell(v) -> str:
    if isinstance(v, float):
        if v != v:
            return "nan"
        return f"{v:.3g}" if (v == 0 or 1e-3 <= abs(v) < 1e5) else f"{v:.2e}"
    return str(v)


def format_table(rows: list[dict]) -> str:
    if not rows:
        return "(no rows)"
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    cells = [[_cell(r.get(c, "")) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.rjust(w) for v, w in zip(vals, widths))  # noqa: E731
    return "\n".join([line(cols)] + [line(row) for row in cells])


def run_construction(name: str, Ns: Sequence[int] | None = None, out: str | Path | None = None,
                     seed: int = 0) -> tuple[list[dict], list[Path]]:
    """Run one construction; with `out`, write NAME.csv and NAME.png/.svg there."""
    from ..engine.planning import available_memory

    c = CONSTRUCTIONS.get(name)()
    Ns = tuple(Ns) if Ns else c.default_Ns
    have = available_memory(torch.device("cpu"))
    for N in Ns:
        try:
            need = float(c.memory(N))
        except OverflowError:  # N beyond a float: astronomically large
            need = math.inf
        if need > have:
            size = "an astronomical amount" if not math.isfinite(need) else f"about {need / 2**30:,.1f} GB"
            raise ArchsepError(f"N: construction '{name}' at N={N} needs {size}, more than "
                               f"the {have / 2**30:,.1f} GB this machine has free")
    if out is not None:  # refused before the (long) run: a file, link or device in the way
        d = Path(out)
        for f in (f"{name}.csv", f"{name}.png", f"{name}.svg"):
            if d.is_dir():
                check_output(d / f, "out")
    rows = c.run(Ns, seed=seed)
    paths: list[Path] = []
    if out is not None:
        make_dirs(d, "out")
        paths.append(write_csv(rows, d / f"{name}.csv"))
        paths += c.plot(rows, d / name)
    return rows, paths


@torch.no_grad()
def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """softmax(q k^T) v for (B, Lq, D), (B, Lk, D), (B, Lk, E), in query chunks so that the
    Lq x Lk score matrix is never held whole (400 MB per example at L = 10^4)."""
    return torch.cat([torch.softmax(q[:, s:s + chunk] @ k.transpose(1, 2), -1) @ v
                      for s in range(0, q.shape[1], chunk)], 1)


def sharp_scale(n_keys: int, coherence: float, slack: float = 3.0) -> float:
    """A query scale eta making the softmax nearly hard: with unit self-score and off-target
    scores <= coherence, the off-target weight is at most n e^{-eta (1 - coh)} = e^{-slack} / n^2."""
    n = max(n_keys, 2)
    return (3 * math.log(n) + slack) / max(1 - coherence, 1e-6)
