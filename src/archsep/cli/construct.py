"""`archsep construct NAME --N ... [--out DIR]`: run a hand-set construction, print its table,
write NAME.csv and NAME.png/.svg."""
from __future__ import annotations

import argparse
import time

from ..fileio import default_dir, path_arg


def add_parser(sub, positive_int) -> None:
    from ..constructions import CONSTRUCTIONS

    c = sub.add_parser("construct", help="check a theoretical construction (hand-set weights, no training)")
    c.add_argument("name", help=f"one of: {', '.join(CONSTRUCTIONS.names())}")
    c.add_argument("--N", nargs="+", type=positive_int("--N"),
                   help="sequence lengths (default: the construction's own)")
    c.add_argument("--out", type=path_arg("--out"), help="output directory (default results/construct-NAME)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--threads", type=positive_int("--threads"), default=None, help="torch threads")


def cmd_construct(a: argparse.Namespace) -> int:
    import torch

    from ..constructions import CONSTRUCTIONS, format_table, run_construction

    CONSTRUCTIONS.get(a.name)  # unknown name -> one-line error before any work
    if a.threads:
        torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    rows, paths = run_construction(a.name, a.N, a.out or default_dir(f"construct-{a.name}", "name"), a.seed)
    print(format_table(rows))
    print(f"{a.name}: {len(rows)} rows in {time.perf_counter() - t0:.0f}s; wrote {', '.join(str(p) for p in paths)}")
    return 0
