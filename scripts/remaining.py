"""What the runs still in flight or queued would cost, each priced by its own `--dry-run` against the
store it goes into (docs/results/in-flight/README.md names the commands and how to build each store
on a new machine):

    python scripts/remaining.py [--runs /work/runs] > docs/results/in-flight/remaining.md

One row per command: the core-hours of this machine at the worst (every run to its budget, every
trial promoted) and, for a search, its estimate (the geometric middle of the worst and the
size-blind price), and one H100's hours (modelled). A store that is missing is priced as empty
(every run to train). Nothing is trained; the stores are only read.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inflight import read_cells  # noqa: E402  (the script beside this one)

# (what, the archsep command's arguments, the store under --runs), in the order the two cores run
# them: docs/results/in-flight/cells.toml's queued cells, a row per command
QUEUE = [(f"{c.what} (issue {c.issue})" + (f", command {i + 1} of {len(c.commands)}" if len(c.commands) > 1 else ""),
          cmd, c.name) for c in read_cells() if c.queued for i, cmd in enumerate(c.commands)]
# what a session with a lent GPU runs first (scripts/device/): (what, the dry run's arguments, the
# store it is priced against, the device command); its runs imported into that store spare the cores
GPU_FIRST = [
    ("mamba-width search, N = 100 (issue 52; import its search.jsonl into mamba-width-search)",
     "reproduce mamba-width --scale search --at 100", "mamba-width-search",
     "PRESET=mamba-width SCALE=search AT=100 FROM='docs/results/mamba-width-search/runs.jsonl"
     " docs/results/in-flight/mamba-width-search.jsonl' bash scripts/device/lookup_search.sh 540"),
]
TOTAL = re.compile(r"total: .*?\(([\d.]+) (h|min) of one core\); on one H100 \(modelled\) about ([\d.]+) (h|min|s)")
ESTIMATE = re.compile(r"estimate: .*?\(([\d.]+) (h|min) of one core\)")


def hours(value: str, unit: str) -> float:
    return float(value) * {"h": 1.0, "min": 1 / 60, "s": 1 / 3600}[unit]


def cell(v: float | None) -> str:
    return "–" if v is None else f"{v:.1f}"


def price(args: str, store: Path) -> tuple[float | None, float | None, float | None, bool]:
    """(worst core-hours, estimated core-hours or None, H100 hours, whether its steps were timed
    under load) from the command's --dry-run."""
    cmd = [sys.executable, "-m", "archsep", *args.split(), "--dry-run", "--out", str(store)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    total, est = TOTAL.search(out), ESTIMATE.search(out)
    loaded = "timed while other work kept every core busy" in out
    if total is None:
        return None, None, None, loaded
    return (hours(total.group(1), total.group(2)), hours(est.group(1), est.group(2)) if est else None,
            hours(total.group(3), total.group(4)), loaded)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=Path("/work/runs"), help="the folder of the stores")
    a = ap.parse_args()
    print(f"# What the queued runs cost ({datetime.now(timezone.utc):%Y-%m-%d}, `python scripts/remaining.py`)\n")
    print("| what | command | this machine, core-hours at worst | estimate | one H100, hours (modelled) |")
    print("|---|---|---|---|---|")
    any_loaded = False
    sums = [0.0, 0.0]  # the worst, the estimates (a row without one: its worst)
    for what, args, store in QUEUE:
        worst, est, gpu, loaded = price(args, a.runs / store)
        any_loaded |= loaded
        print(f"| {what} | `archsep {args}` | {cell(worst)} | {cell(est)} | {cell(gpu)} |")
        sums[0] += worst or 0.0
        sums[1] += (est if est is not None else worst) or 0.0
    per_session = 2 * 3.0  # two cores for a session's 180 minutes, at most
    print(f"\nIn all: {sums[0]:.1f} core-hours at worst, {sums[1]:.1f} at the estimates (a row without one "
          f"counted at its worst). A session gives at most {per_session:.0f} core-hours (two cores, 180 "
          f"minutes): at least {sums[1] / per_session:.0f} sessions at the estimates, {sums[0] / per_session:.0f} "
          "at worst, on these machines alone.")
    print("\nOn a lent GPU first (its 15 minutes of device time; each command brings its runs back as JSON lines):\n")
    print("| what | device command | one H100, hours (modelled) | the same runs on this machine, core-hours at worst |")
    print("|---|---|---|---|")
    for what, args, store, device in GPU_FIRST:
        worst, _, gpu, loaded = price(args, a.runs / store)
        any_loaded |= loaded
        print(f"| {what} | `{device}` | {cell(gpu)} | {cell(worst)} |")
    print("\nThe runs a device command trains are part of a row above (imported, that row's command finds them "
          "finished); priced on their own, their step times timed again, so the two figures differ with the load.")
    print("\nA search's estimate is its own `--dry-run`'s (benchmarks/search_estimate.py); a preset that is not a "
          "search has its worst only, every run to its budget, where most stop at their threshold sooner.")
    if any_loaded:
        print("The step times were measured while other training kept every core busy: the CPU hours are upper "
              "bounds (`--dry-run` says so).")


if __name__ == "__main__":
    main()
