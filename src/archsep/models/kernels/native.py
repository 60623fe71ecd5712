"""Kernels written in C, compiled on first use with the machine's C compiler and loaded with
ctypes; every one has a PyTorch fallback, so archsep runs (slower) where none compiles.

`selective_scan.c` is Mamba-1's selective scan on one CPU thread (models/mamba.py, scan
'native'). It is compiled with `cc -O3 -march=native` (the code vectorises over channels) into
the cache directory (`fileio.cache_root()`/native, named by a hash of the source, the flags,
the compiler and the CPU), so each machine compiles it once; with ARCHSEP_CACHE_DIR set empty it
is compiled into a temporary directory that is removed once the library is loaded (as where the
cache directory cannot be written). A kept library is used only if it is a regular file owned
by this user and writable by nobody else (else it is rebuilt).
ARCHSEP_NATIVE=0 turns compiled kernels off (every caller then takes its fallback).
Only archsep's own source is ever compiled or loaded: nothing from a store or a results folder.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from ...fileio import cache_root

SCAN_SOURCE = Path(__file__).with_name("selective_scan.c")
FLAGS = ("-O3", "-fopenmp-simd", "-fPIC", "-shared")
_why_not: list[str] = []  # why the last load failed, for messages


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC") or "cc") or shutil.which("gcc")


def _cpu() -> str:
    """The CPU's model and feature flags: -march=native code runs only where these match."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags"))][:2]
        return "".join(lines)
    except OSError:
        return platform.processor() or platform.machine()


def _flags() -> list[str]:
    native = ["-march=native"] if platform.machine() in ("x86_64", "AMD64", "aarch64", "arm64") else []
    return [*FLAGS, *native]


def _trusted(path: Path) -> bool:
    """A kept library is loaded only if it is a regular file of this user's that nobody else can write."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _compile(cc: str, source: Path, dest_dir: Path, name: str) -> Path:
    """Compile `source` to `dest_dir`/`name` atomically (a temporary name, then a rename): two
    processes compiling at once each write their own file, and a reader sees a whole library."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=dest_dir)
    os.close(fd)
    try:
        subprocess.run([cc, *_flags(), str(source), "-o", tmp, "-lm"], check=True, capture_output=True, timeout=120)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest_dir / name)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest_dir / name


@functools.cache
def library(source: Path = SCAN_SOURCE) -> ctypes.CDLL | None:
    """The compiled `source`, or None (no compiler, ARCHSEP_NATIVE=0, a failed build; `why_not()` says)."""
    _why_not.clear()
    if os.environ.get("ARCHSEP_NATIVE", "1") == "0":
        _why_not.append("ARCHSEP_NATIVE=0")
        return None
    cc = _compiler()
    if cc is None:
        _why_not.append("no C compiler (cc or gcc) on PATH")
        return None
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30).stdout.split("\n")[0]
        key = hashlib.sha256("|".join([source.read_text(), *_flags(), cc, version, _cpu()]).encode()).hexdigest()[:16]
        name = f"{source.stem}-{key}.so"
        root = cache_root()
        if root is not None:
            kept = root / "native" / name
            try:
                if not _trusted(kept):
                    kept.parent.mkdir(parents=True, exist_ok=True)
                    _compile(cc, source, kept.parent, name)
            except OSError:  # a cache directory this process cannot write: build as without one
                pass
            else:
                if _trusted(kept):
                    return ctypes.CDLL(str(kept))
        # no cache (or none usable): compile, load, and leave nothing behind
        with tempfile.TemporaryDirectory(prefix="archsep-native-") as d:
            return ctypes.CDLL(str(_compile(cc, source, Path(d), name)))
    except (OSError, subprocess.SubprocessError) as e:
        err = getattr(e, "stderr", b"") or b""
        _why_not.append(f"{type(e).__name__}: {e} {err.decode(errors='replace')[:300]}".strip())
        return None


def why_not() -> str:
    """Why `library()` returned None (empty when it did not)."""
    return "; ".join(_why_not)
