"""The compiled selective scan's backward (models/kernels/selective_scan.c, `scan_backward`) against
the same kernel at an earlier revision, side by side in one run: the same inputs, the two
libraries taking turns call by call, their outputs compared bit for bit.

    python benchmarks/scan_backward.py [--before c4e303e~1] [--Ls 20 100 200 400] [--reps 15]
                                       [--clock thread]

The earlier source is read with `git show REV:src/archsep/models/kernels/selective_scan.c` (a
clone with its history), compiled by `native.library` into archsep's cache like the current one
(nothing written here). The shapes are paper A's Mamba-64 as the presets build it: batch 64,
E = 128 channels (expand 2), N = 16 states; one thread.

c4e303e changed the backward: it keeps the decays exp(dt A) from its recompute (L * N * E floats
more scratch per sequence) and steps the recomputed states out of place, so the walk back in time
evaluates no exp and copies no state; the numbers are the same bit for bit.
"""
from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from archsep.models.kernels import native

native_scan = importlib.import_module("archsep.models.kernels.native_scan")  # the module, not its function
SOURCE = "src/archsep/models/kernels/selective_scan.c"
ROOT = Path(__file__).resolve().parents[1]


def earlier(rev: str):
    """The kernel library compiled from `rev`'s source, typed as the current one is."""
    text = subprocess.run(["git", "show", f"{rev}:{SOURCE}"], cwd=ROOT, capture_output=True, text=True)
    if text.returncode != 0:
        sys.exit(f"--before: git cannot show {rev}:{SOURCE} here ({text.stderr.strip() or 'no history'})")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "selective_scan.c"
        path.write_text(text.stdout)
        lib = native.library(path)  # compiled into the cache, keyed by the source's hash
    if lib is None:
        sys.exit(f"no compiler here to build the kernel ({native.why_not()})")
    return native_scan.typed(lib)


def backward(lib, L: int, clock, B: int = 64, E: int = 128, N: int = 16) -> tuple[float, list[torch.Tensor]]:
    """One call of `lib`'s scan_backward on seeded inputs: (seconds, its gradients)."""
    g = torch.Generator().manual_seed(0)
    u, dt, z, gout = (torch.randn(B, L, E, generator=g) for _ in range(4))
    dt = torch.nn.functional.softplus(dt)
    AT = -torch.rand(N, E, generator=g) * 4
    Bm, Cm, D = torch.randn(B, L, N, generator=g), torch.randn(B, L, N, generator=g), torch.randn(E, generator=g)
    gu, gdt, gz = (torch.empty(B, L, E) for _ in range(3))
    gB, gC, gAT, gD = torch.empty(B, L, N), torch.empty(B, L, N), torch.zeros(N, E), torch.zeros(E)
    work = torch.empty(native_scan.backward_scratch(L, N, E))  # enough for either revision (the former needed less)
    args = [native_scan._ptr(t) for t in (u, dt, AT, Bm, Cm, D, z, gout, gu, gdt, gAT, gB, gC, gD, gz, work)]
    t = clock()
    lib.scan_backward(*args, B, L, E, N)
    return clock() - t, [gu, gdt, gAT, gB, gC, gD, gz]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="c4e303e~1", help="the revision to compare with")
    ap.add_argument("--Ls", type=int, nargs="+", default=[20, 100, 200, 400])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="wall time (an idle machine) or the thread's CPU time (a busy one)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    clock = time.perf_counter if a.clock == "wall" else time.thread_time
    now, before = native_scan._scan_library(), earlier(a.before)
    if now is None:
        sys.exit(f"no compiled kernel here ({native.why_not()})")
    print(f"scan_backward, batch 64, E = 128, N = 16, one thread, {a.clock} time, median of {a.reps}")
    print("    L   before ms   now ms   faster   outputs")
    for L in a.Ls:
        tb, tn, same = [], [], True
        for _ in range(a.reps):
            t0, r0 = backward(before, L, clock)
            t1, r1 = backward(now, L, clock)
            tb.append(t0)
            tn.append(t1)
            same = same and all(torch.equal(x, y) for x, y in zip(r0, r1))
        b, n = statistics.median(tb), statistics.median(tn)
        print(f"{L:5d}   {b * 1e3:9.1f}   {n * 1e3:6.1f}   {b / n:5.2f}x   {'identical' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
