"""Writing output files safely: every file archsep writes (`export -o`, `report -o`, runs.csv,
summary.json, summary.txt, figures, a plugin's shipped source) goes through `atomic_write`.

- The target is checked first (`check_output`): a new name, or an existing regular file. A
  directory, a symbolic link, a FIFO, a device (/dev/null), a socket, a results store's files
  (archsep.db, -wal, -shm, -journal, anywhere), any SQLite database, and the files archsep owns
  beside a store (runs.csv, summary.json, ...) unless the caller names them as its own, are
  refused with one line naming the field.
- The data goes to a temporary file with an unpredictable name in the target's directory
  (`tempfile.mkstemp`: O_CREAT|O_EXCL, so a planted file or symlink is never opened), is
  flushed to disk, and is renamed over the target: a reader sees the old file or the new one,
  never half of one, and a symlink planted at any name is never followed.
- On every failure (a full disk, a permission, an exception in the writer) and on SIGINT or
  SIGTERM the temporary file is removed; a SIGTERM then still ends the process as it would have.

`make_dirs` creates a directory and its missing parents, and removes the ones it created if any
step fails (an over-long last component, a file in the way), so a failed --out leaves nothing.
`check_component` is the rule for names that become a default directory (results/<name>).
"""
from __future__ import annotations

import contextlib
import os
import signal
import stat
import tempfile
import threading
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Union

from .errors import ArchsepError, has_control  # noqa: F401  (has_control: re-exported)

DB_NAME = "archsep.db"  # the store's file name (runs/store.py uses this one)
STORE_SUFFIXES = ("", "-wal", "-shm", "-journal")
# files archsep writes beside a store; a command may overwrite only those it names as its own
OWNED = ("runs.csv", "curves.csv", "runs.parquet", "runs.jsonl", "summary.json", "summary.txt", "report.html")
SQLITE_MAGIC = b"SQLite format 3\x00"

Data = Union[str, bytes, Callable[[IO], None]]


def is_store_file(name: str) -> bool:
    return any(name == DB_NAME + s for s in STORE_SUFFIXES)


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a regular file"


def check_output(dest: str | Path, field: str = "dest", allow: tuple[str, ...] = (), example: str = "out.csv") -> Path:
    """`dest` if archsep may write it: a new name or an existing regular file that is no store
    and none of archsep's own files beside a store (except those in `allow`). One ArchsepError
    naming `field` otherwise."""
    dest = Path(dest)
    if dest.name in ("", ".", "..") or str(dest).endswith(os.sep):
        raise ArchsepError.at(field, f"'{dest}' is a directory; give a file name, e.g. {dest / example}")
    if is_store_file(dest.name):
        raise ArchsepError.at(field, f"'{dest}' is a results store's file; writing there would destroy every run "
                           "in it; give another file name")
    parent = dest.parent
    if not parent.is_dir():
        raise ArchsepError.at(field, f"directory '{parent}' does not exist")
    if dest.name in OWNED and dest.name not in allow and (parent / DB_NAME).exists():
        raise ArchsepError.at(field, f"'{dest}' is the {dest.name} archsep writes beside the store in '{parent}'; "
                           "give another file name")
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return dest
    except OSError as e:
        raise ArchsepError.at(field, f"cannot write '{dest}': {e.strerror or e}") from None
    if stat.S_ISLNK(st.st_mode):
        raise ArchsepError.at(field, f"'{dest}' is a symbolic link; archsep does not write through links "
                           "(give the path of a new or regular file)")
    if stat.S_ISDIR(st.st_mode):
        raise ArchsepError.at(field, f"'{dest}' is a directory; give a file name, e.g. {dest / example}")
    if not stat.S_ISREG(st.st_mode):
        raise ArchsepError.at(field, f"'{dest}' is {_kind(st.st_mode)}; archsep writes only new or regular files")
    for s in STORE_SUFFIXES:  # another name for the store beside it (a hard link)
        other = parent / (DB_NAME + s)
        with contextlib.suppress(OSError):
            if os.path.samefile(other, dest):
                raise ArchsepError.at(field, f"'{dest}' is the results store '{other}'; give another file name")
    try:
        with open(dest, "rb") as f:
            head = f.read(len(SQLITE_MAGIC))
    except OSError:
        head = b""
    if head == SQLITE_MAGIC:
        raise ArchsepError.at(field, f"'{dest}' is a SQLite database (a results store?); archsep does not "
                           "overwrite one; give another file name")
    return dest


class _Terminated(BaseException):
    """SIGTERM arrived during a write: unwind (removing the temporary file), then end as SIGTERM would."""


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.getsignal(signal.SIGTERM)
    if old is signal.SIG_IGN:
        yield
        return

    def handler(signum, frame):
        raise _Terminated()

    signal.signal(signal.SIGTERM, handler)
    try:
        yield
    except _Terminated:
        signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)
        signal.raise_signal(signal.SIGTERM)  # the old disposition: by default the process ends here
        raise KeyboardInterrupt from None  # a handler that returned: unwind as an interrupt
    finally:
        signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(dest: str | Path, data: Data, field: str = "dest", allow: tuple[str, ...] = (),
                 binary: bool | None = None, newline: str | None = None, example: str = "out.csv") -> Path:
    """Write `data` (text, bytes, or a function given the open file) to `dest` atomically: the
    checks of `check_output`, an unpredictable temporary file beside it, renamed over it; the
    temporary file is removed on any failure, SIGINT or SIGTERM. OS errors are one ArchsepError."""
    dest = check_output(dest, field, allow, example)
    binary = isinstance(data, bytes) if binary is None else binary
    try:
        old_mode = stat.S_IMODE(os.stat(dest).st_mode)
    except OSError:
        old_mode = 0o666 & ~_umask()
    tmp: str | None = None
    with _sigterm_unwinds():
        try:
            prefix = "." + dest.name[:64] + "."
            fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=dest.parent)
            text_args: dict[str, Any] = {} if binary else {"newline": newline, "encoding": "utf-8"}
            with os.fdopen(fd, "wb" if binary else "w", **text_args) as f:
                os.fchmod(f.fileno(), old_mode)
                if callable(data):
                    data(f)
                else:
                    f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dest)
            tmp = None
        except OSError as e:
            raise ArchsepError.at(field, f"cannot write '{dest}': {e.strerror or e}") from None
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
    return dest


def make_dirs(path: str | Path, field: str = "out") -> list[Path]:
    """Create directory `path` and its missing parents; returns the ones created (outermost
    first). If any step fails, the ones it created are removed again and one ArchsepError
    names `field`."""
    path = Path(path)
    missing: list[Path] = []
    p = path
    while not p.exists():  # a file in the way stops here: mkdir under it fails, 'Not a directory'
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    created: list[Path] = []
    try:
        for d in reversed(missing):
            try:
                d.mkdir()
            except FileExistsError:
                if not d.is_dir():
                    raise
                continue  # made by someone else meanwhile: not ours to remove
            created.append(d)
    except OSError as e:
        remove_dirs(created)
        raise ArchsepError.at(field, f"cannot write to '{path}': {e.strerror or e}") from None
    return created


def remove_dirs(created: list[Path]) -> None:
    """Remove the (empty) directories `make_dirs` created, innermost first."""
    for d in reversed(created):
        with contextlib.suppress(OSError):
            d.rmdir()


def check_component(name: str, field: str) -> str:
    """`name` if it is safe as one directory name under results/: not empty, no '/', '\\',
    NUL or control characters, not starting with '.' (no '.', '..', hidden names), at most
    200 characters. One ArchsepError naming `field` otherwise."""
    why = None
    if not isinstance(name, str) or not name:
        why = "is empty"
    elif "/" in name or "\\" in name:
        why = "contains '/' or '\\'"
    elif name.startswith("."):
        why = "starts with '.'"
    elif has_control(name):
        why = "contains control characters"
    elif len(name) > 200:
        why = "is longer than 200 characters"
    if why:
        raise ArchsepError.at(field, f"{name!r} would name the output directory and {why}; "
                           "use letters, digits and '_.+-=,' (or give --out)")
    return name


def path_arg(field: str):
    """An argparse type for a path flag: an empty one (an unset shell variable) is an error, not
    the default location."""
    import argparse

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{field}: empty path (an unset shell variable?); give a path or "
                                             "leave the flag out")
        return text
    return parse


def default_dir(name: str, field: str, root: str = "results") -> Path:
    """results/<name>, for a name checked by `check_component`: it never leaves results/."""
    return Path(root) / check_component(name, field)


def cache_root() -> Path | None:
    """archsep's cache directory: $ARCHSEP_CACHE_DIR, else $XDG_CACHE_HOME/archsep or
    ~/.cache/archsep; None when ARCHSEP_CACHE_DIR is set empty (caching off). What is kept there
    (measured step costs, compiled kernels) can always be made again."""
    root = os.environ.get("ARCHSEP_CACHE_DIR")
    if root is None:
        root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "archsep")
    return Path(root) if root else None
