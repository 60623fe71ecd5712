"""The bar for the README's promise: its two commands pass on a fresh clone with no extras.

Clones this repository's HEAD into a temporary folder (with `../shared` beside it when this
checkout has one, as CI lays it out), then runs, timed, exactly the README's two commands:

    bash scripts/setup.sh && .venv/bin/archsep reproduce qstr-fig1a --quick
    .venv/bin/python -m pytest -q

and fails (exit 1) when either exits non-zero, when the README no longer states those two
commands, or when an extra (ray, pyarrow, mlflow, tensorboard) is importable in the fresh
environment (then it would not be a test without the extras). Prints each command's wall time
and pytest's closing line. Takes the setup's download time plus the suite's (about 10 minutes on
2 cores); run it on an idle machine. `--keep` leaves the clone for a look.

    python3 benchmarks/fresh_clone.py [--keep]
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["bash scripts/setup.sh && .venv/bin/archsep reproduce qstr-fig1a --quick", ".venv/bin/python -m pytest -q"]
EXTRAS = ("ray", "pyarrow", "mlflow", "tensorboard")


def readme_commands(readme: str) -> list[str]:
    """The bash block under the README's "## Two commands"."""
    m = re.search(r"^## Two commands\s*\n+```bash\n(.*?)```", readme, re.S | re.M)
    return [line.strip() for line in m.group(1).splitlines() if line.strip()] if m else []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", action="store_true", help="leave the clone in place and print where it is")
    a = ap.parse_args()
    found = readme_commands((ROOT / "README.md").read_text())
    if found != COMMANDS:
        print(f"FAIL: the README's two commands are now {found}; update this bar with them")
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="archsep-fresh-"))
    clone = tmp / "main"
    ok = True
    try:
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        shared = ROOT.parent / "shared"
        if shared.is_dir():
            (tmp / "shared").symlink_to(shared)
        for cmd in COMMANDS:
            t0 = time.perf_counter()
            p = subprocess.run(["bash", "-c", cmd], cwd=clone, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            tail = [line for line in (p.stdout + p.stderr).splitlines() if line.strip()][-1:] or [""]
            print(f"{'ok  ' if p.returncode == 0 else 'FAIL'} {wall:7.0f} s  {cmd}\n        {tail[0]}")
            ok &= p.returncode == 0
            if p.returncode != 0:
                print((p.stdout + p.stderr)[-3000:])
                break
        probe = "import importlib.util as u; print([m for m in %r if u.find_spec(m)])" % (EXTRAS,)
        present = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-c", probe], capture_output=True,
                                 text=True).stdout.strip()
        if present not in ("[]", ""):
            print(f"FAIL: extras present in the fresh environment: {present}")
            ok = False
    finally:
        if a.keep:
            print(f"kept: {clone}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
