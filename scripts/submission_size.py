"""What the commits a stop would submit weigh, against this workplace's two limits: the diffs of
all the commits since the branch was laid, added up as text (256 MiB; a binary file's diff is its
base-85 text, so a 14 MB checkpoint added weighs about 18 MB, replaced about 36, removed about
18), and those commits packed as git sends them (512 MiB). A submission over either is refused
whole: a session's work is lost (2026-12-07: six carries of two 14 MB checkpoints each).

    .venv/bin/python scripts/submission_size.py [--base REV] [--fraction 0.8]

BASE is the commit the branch was laid at when the session began (its reflog's oldest entry);
the work tree's uncommitted changes count too (an untracked file at its base-85 size). Exits 1
when either total passes FRACTION of its limit, 2 on bad input (one line).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

DIFF_LIMIT = 256 * 2**20
PACK_LIMIT = 512 * 2**20
BASE85 = 1.27  # bytes of `git diff --binary` text per byte of a binary file (base 85 and its line framing)


class SizeError(Exception):
    """A one-line reason (not a repository, no reflog, a bad revision)."""


def git_out(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    p = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True)
    if p.returncode != 0:
        last = (p.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[-1]
        raise SizeError(f"git {' '.join(args[:2])}: {last}")
    return p.stdout


def top(path: Path) -> Path | None:
    """The work tree holding `path` (None: not in one)."""
    d = path if path.is_dir() else path.parent
    while not d.exists():
        d = d.parent
    p = subprocess.run(["git", "-C", str(d), "rev-parse", "--show-toplevel"], capture_output=True)
    return Path(p.stdout.decode().strip()) if p.returncode == 0 else None


def base_commit(repo: Path) -> str:
    """The commit the current branch was laid at (its reflog's oldest entry)."""
    branch = git_out(repo, "rev-parse", "--abbrev-ref", "HEAD").decode().strip()
    log = git_out(repo, "reflog", "show", "--format=%H", branch).decode().split()
    if not log:
        raise SizeError(f"branch '{branch}' has no reflog: pass --base REV (the commit that landed last)")
    return log[-1]


def resolve(repo: Path, rev: str) -> str:
    """`rev`'s commit id, or a one-line error naming --base."""
    try:
        return git_out(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").decode().strip()
    except SizeError:
        raise SizeError(f"--base: '{rev}' names no commit of this repository") from None


def committed_diff_bytes(repo: Path, base: str) -> int:
    """The `git diff --binary` text of every commit in base..HEAD, added up."""
    total = 0
    for c in git_out(repo, "rev-list", f"{base}..HEAD").decode().split():
        total += len(git_out(repo, "diff", "--binary", f"{c}^", c))
    return total


def uncommitted_diff_bytes(repo: Path, exclude: Path | None = None) -> int:
    """The work tree's changes against HEAD: tracked ones as `git diff --binary`, untracked files at
    their base-85 size; paths under `exclude` (relative to the repository) are left out."""
    spec = ["--", "."] + ([f":(exclude){exclude.as_posix()}"] if exclude else [])
    total = len(git_out(repo, "diff", "--binary", "HEAD", *spec))
    for name in git_out(repo, "ls-files", "--others", "--exclude-standard", "-z", *spec).decode().split("\0"):
        if name and (repo / name).is_file():
            total += int(BASE85 * (repo / name).stat().st_size)
    return total


def packed_bytes(repo: Path, base: str) -> int:
    """base..HEAD's objects packed as git sends them."""
    return len(git_out(repo, "pack-objects", "--revs", "--stdout", "-q", stdin=f"HEAD\n^{base}\n".encode()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="the commit that landed last (default: the branch's reflog's oldest entry)")
    ap.add_argument("--fraction", type=float, default=0.8, help="exit 1 past this share of a limit (default 0.8)")
    ap.add_argument("--repo", type=Path, default=Path("."), help="a path in the repository (default .)")
    a = ap.parse_args(argv)
    try:
        if not 0 < a.fraction <= 1:
            raise SizeError(f"--fraction: {a.fraction} is not in (0, 1]")
        repo = top(a.repo.resolve())
        if repo is None:
            raise SizeError(f"--repo: '{a.repo}' is not in a git work tree")
        base = resolve(repo, a.base) if a.base else base_commit(repo)
        diff = committed_diff_bytes(repo, base) + uncommitted_diff_bytes(repo)
        pack = packed_bytes(repo, base)
    except SizeError as e:
        print(f"submission_size: error: {e}", file=sys.stderr)
        return 2
    over = False
    for what, n, limit in (("diffs as text (the work tree's changes included)", diff, DIFF_LIMIT),
                           ("commits packed", pack, PACK_LIMIT)):
        bad = n > a.fraction * limit
        over |= bad
        print(f"{what} since {base[:7]}: {n / 2**20:.1f} MiB of "
              f"{limit / 2**20:.0f} MiB" + (f", past {a.fraction:g} of it: commit less" if bad else ""))
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
