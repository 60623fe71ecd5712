"""How far a reader walks to follow one run from `archsep reproduce` to the store.

Runs `archsep reproduce` of a tiny two-run preset in this process (one worker, so the training
happens in a worker process and the walk here is the driver's: the CLI, planning, the runner,
the executor's loop, the commit), traces every call between archsep functions with
`sys.setprofile`, and counts, over the distinct call edges (caller function -> callee function,
each counted once however often it runs, as a reader follows it once):

- stops: callee functions in another file than their caller's (a reader opens another file);
- files: the distinct files those stops are in;
- climbs: stops whose callee's layer is above its caller's (tests/system/test_layers.py's
  LAYERS): control going back up, e.g. a store calling into the runner;
- returns: the distinct edges whose return goes back to another file (the same as the stops,
  less the calls that never return here).

Only calls made before the first row is committed (`Store.add`) and the commit itself count:
"from reproduce to the store". Prints the counts and, with `--edges`, every stop in order.

It also counts the **spine**: the stops whose both ends were on the call stack when the run's row
was committed (`Store.add`), i.e. the path a reader follows from the command to the commit
without the side trips (checks, helpers, planning) that return before it; and the **spine's own
calls**: every stop made from a function on the spine, the functions a reader sees called while
following the spine (each read once, not followed further).

    .venv/bin/python benchmarks/walk.py [--edges]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "system"))
from test_layers import LAYERS  # noqa: E402

import archsep  # noqa: E402
from archsep.cli import main as cli_main  # noqa: E402
from archsep.experiments import PRESETS  # noqa: E402
from archsep.experiments.samples import Arch, SampleComplexityExperiment, Scale  # noqa: E402

PKG = Path(archsep.__file__).resolve().parent


class Walk(SampleComplexityExperiment):
    description = "two runs, for benchmarks/walk.py"
    _s = Scale(Ns=(2,), seeds=2, archs=(Arch("FFN", "ffn", {"hidden": [8]}),),
               train={"threshold": 0.9, "budget": 640, "eval_size": 50})
    full = quick = _s


def layer(path: str) -> int:
    top = Path(path).resolve().relative_to(PKG).with_suffix("").parts[0]  # a folder, or a root module
    return LAYERS.get("" if top == "__init__" else top, LAYERS[""])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--edges", action="store_true", help="print every stop in the order first taken")
    a = ap.parse_args()
    edges: dict[tuple[str, str, str, str], bool] = {}  # (caller file, caller fn, callee file, callee fn) -> returned
    stack: list[tuple[str, str]] = []
    done = [False]
    spine: set[tuple[str, str]] = set()  # (file, function) on the stack at the commit

    def prof(frame, event, arg):
        if done[0]:
            return
        code = frame.f_code
        f = code.co_filename
        mine = f.startswith(str(PKG))
        if event == "call":
            if mine:
                caller = next((s for s in reversed(stack) if s[0]), None)
                if caller is not None and caller[0] != f:
                    edges.setdefault((caller[0], caller[1], f, code.co_name), False)
            stack.append((f if mine else "", code.co_name))
            if mine and f.endswith("store/db.py") and code.co_name == "add":
                spine.update(s for s in stack if s[0])
        elif event == "return" and stack:
            me = stack.pop()
            caller = next((s for s in reversed(stack) if s[0]), None)
            if me[0] and caller is not None and caller[0] != me[0]:
                key = (caller[0], caller[1], me[0], me[1])
                if key in edges:
                    edges[key] = True
            if me[0].endswith("store/db.py") and me[1] == "add":
                done[0] = True

    with tempfile.TemporaryDirectory() as tmp, PRESETS.temporary("walk-two-runs", Walk):
        sys.setprofile(prof)
        try:
            cli_main(["reproduce", "walk-two-runs", "--out", str(Path(tmp) / "o"), "--workers", "1", "--no-progress"])
        finally:
            sys.setprofile(None)
    stops = list(edges)
    files = {e[2] for e in stops}
    climbs = [e for e in stops if layer(e[2]) > layer(e[0])]
    returns = sum(edges.values())
    if a.edges:
        for e in stops:
            mark = "  ^ climb" if e in climbs else ""
            print(f"{Path(e[0]).relative_to(PKG)}:{e[1]} -> {Path(e[2]).relative_to(PKG)}:{e[3]}{mark}")
    print(f"from `archsep reproduce` to the store: {len(stops)} stops in {len(files)} files, "
          f"{len(climbs)} climbs back up, {returns} returns")
    on = [e for e in stops if (e[0], e[1]) in spine and (e[2], e[3]) in spine]
    off = [e for e in stops if (e[0], e[1]) in spine]
    for name, what, part in (("its spine", "the calls on the stack at the commit", on),
                             ("the spine's own calls", "every stop made from a function on the spine", off)):
        if a.edges:
            print(f"{name}:")
            for e in part:
                print(f"  {Path(e[0]).relative_to(PKG)}:{e[1]} -> {Path(e[2]).relative_to(PKG)}:{e[3]}")
        print(f"{name} ({what}): {len(part)} stops in {len({e[2] for e in part})} files, "
              f"{sum(1 for e in part if e in climbs)} climbs back up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
