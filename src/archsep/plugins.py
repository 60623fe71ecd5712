"""Plugins: a researcher's own tasks, models and experiments, registered from their own code.

Four ways to bring them in, all equivalent:
- a module or a file on the command line: `archsep --import my_pkg.tasks --import ./mytask.py ...`;
- in a sweep file: `imports = ["my_pkg.tasks", "./mytask.py"]` (paths relative to the file);
- an installed package's entry point in the group `archsep.plugins` (loaded the first time a
  registry is asked for a name it does not know, or for its list of names);
- an import string as the name: `task = "my_pkg.tasks:Parity"`, `arch = "my_pkg.models:Net"`.

Names read from a store are data: while reading (`registry.reading`), an import string
resolves only from a module already imported here (`resolve_loaded`), never by importing.

Whatever registered a class in this process is imported again in every worker (local pool or
Ray) before it trains anything: `payload()` names those modules and, for code that is not
installed in site-packages, carries its source, so a Ray node without the files gets them too.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import site
import sys
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import ArchsepError
from .fileio import atomic_write

ENTRY_POINT_GROUP = "archsep.plugins"
MAX_SHIPPED_BYTES = 8 << 20  # source shipped with a plugin package: more is not a plugin


@dataclass(frozen=True)
class Plugin:
    """What a worker needs to import a module: its name, where its top-level package lives
    here, and that package's source files when it is not installed."""

    module: str
    root: str  # the top-level module or package directory (a path)
    files: tuple[tuple[str, str], ...] = ()  # (path relative to root's parent, source)


_MODULES: dict[str, None] = {}  # plugin modules in the order they were loaded (an ordered set)
_ENTRY_POINTS_LOADED = False


def _one_line(e: BaseException) -> str:
    msg = str(e).splitlines()[0] if str(e) else ""
    where = ""
    if isinstance(e, SyntaxError) and e.filename:
        where = f" ({Path(e.filename).name}, line {e.lineno})"
    return f"{type(e).__name__}: {msg}{where}"


def is_path(spec: str) -> bool:
    """A file or directory path rather than a module name (module names have no slashes)."""
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def load(spec: str, base: str | Path | None = None, field: str = "imports") -> str:
    """Import plugin `spec` (a module name, or a path to a .py file or a package directory,
    relative to `base`) here, and remember it for the workers. Returns the module's name.
    A plugin that fails to import is one ArchsepError naming it."""
    if is_path(spec):
        path = Path(spec).expanduser()
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        path = path.resolve()
        if not path.exists():
            raise ArchsepError.at(field, f"plugin file '{spec}' does not exist")
        if path.is_dir() and not (path / "__init__.py").exists():
            raise ArchsepError.at(field, f"'{spec}' is a directory without __init__.py, not a Python package")
        name = path.stem if path.is_file() else path.name
        if not name.isidentifier():
            raise ArchsepError.at(field, f"plugin file '{spec}': '{name}' is not a valid module name; rename it")
        _add_path(str(path.parent))
        module = _import(name, spec, field)
        got = Path(getattr(module, "__file__", "") or "").resolve()
        if got not in (path, path / "__init__.py"):
            raise ArchsepError.at(field, f"plugin '{spec}' would be imported as module '{name}', but that name is "
                               f"already taken by {got or 'a built-in module'}; rename the file")
    else:
        name = spec
        _import(name, spec, field)
    note(name)
    return name


def _import(name: str, spec: str, field: str):
    try:
        return importlib.import_module(name)
    except ArchsepError as e:  # e.g. a plugin registering a different class under a taken name
        raise ArchsepError.at(field, f"plugin '{spec}': {e}") from None
    except SystemExit as e:  # sys.exit() at import: an error naming the plugin, not archsep's exit
        raise ArchsepError.at(field, f"plugin '{spec}' called sys.exit({e.code!r}) while being imported") from None
    except Exception as e:  # noqa: BLE001 - the user's code: any error is one line naming it
        raise ArchsepError.at(field, f"cannot import plugin '{spec}': {_one_line(e)}") from None


def _add_path(directory: str) -> None:
    if directory not in sys.path:
        sys.path.insert(0, directory)


def note(module: str) -> None:
    """Remember a module that registered something, so workers import it too."""
    if module != "archsep" and not module.startswith("archsep.") and module != "__main__":
        _MODULES.setdefault(module, None)


def load_entry_points() -> None:
    """Import every installed package's `archsep.plugins` entry point (once per process)."""
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except ArchsepError as e:
            raise ArchsepError(f"plugins: entry point '{ep.name}' ({ep.value}): {e}") from None
        except SystemExit as e:
            raise ArchsepError(f"plugins: entry point '{ep.name}' ({ep.value}) called sys.exit({e.code!r}) "
                               "while being imported") from None
        except Exception as e:  # noqa: BLE001
            raise ArchsepError(f"plugins: entry point '{ep.name}' ({ep.value}) in group {ENTRY_POINT_GROUP} "
                               f"failed to import: {_one_line(e)}") from None


def resolve(name: str, field: str):
    """The object an import string 'package.module:Attr' names (importing the module)."""
    mod_name, _, attr = name.partition(":")
    if not mod_name or not attr:
        raise ArchsepError.at(field, f"'{name}' is not an import string 'package.module:Class'")
    if importlib.util.find_spec(mod_name.split(".")[0]) is None:
        _add_path(os.getcwd())  # as `python -m` would: a module beside the user finds itself
    module = _import(mod_name, mod_name, field)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ArchsepError.at(field, f"module '{mod_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    note(mod_name)
    return obj


def resolve_loaded(name: str, field: str):
    """The object an import string names if its module is already imported in this process
    (nothing is imported, no path is added), else None. For names read from a store: data."""
    mod_name, _, attr = name.partition(":")
    module = sys.modules.get(mod_name) if mod_name and attr else None
    if module is None:
        return None
    obj: Any = module
    for part in attr.split("."):
        if not part.isidentifier() or part.startswith("__"):
            return None
        obj = getattr(obj, part, None)  # a plain attribute of code already loaded here
        if obj is None:
            return None
    return obj


# --- what workers need ---------------------------------------------------------------------------
def _installed(path: Path) -> bool:
    roots = set(site.getsitepackages() + [site.getusersitepackages()])
    roots |= {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")}
    return any(str(path).startswith(str(Path(r).resolve()) + os.sep) for r in roots if r)


def _plugin(module: str) -> Plugin | None:
    mod = sys.modules.get(module)
    if mod is None:
        return None
    top = sys.modules.get(module.split(".")[0])
    f = getattr(top, "__file__", None)
    if not f:  # a namespace package or a module made in memory: importable by name only
        return Plugin(module, "")
    root = Path(f).resolve()
    root = root.parent if root.name == "__init__.py" else root
    if _installed(root):
        return Plugin(module, str(root))
    files, size = [], 0
    for p in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
        if "__pycache__" in p.parts:
            continue
        text = p.read_text()
        size += len(text)
        if size > MAX_SHIPPED_BYTES:
            break
        files.append((str(p.relative_to(root.parent)), text))
    return Plugin(module, str(root), tuple(files))


def payload() -> list[Plugin]:
    """The plugins this process loaded, for a worker's `activate`."""
    return [p for p in (_plugin(m) for m in _MODULES) if p is not None]


def _own_private_dir(where: Path) -> None:
    """Create `where` (mode 0700) or accept it only if it is a real directory of this user that
    nobody else can write: code is imported from it."""
    import stat

    try:
        where.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(where)
    except OSError as e:
        raise ArchsepError(f"imports: cannot create '{where}': {e.strerror or e}") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise ArchsepError(f"imports: '{where}' is not a private directory of this user (a link, or "
                           "writable by others); remove it and rerun")


def activate(plugins: list[Plugin] | None) -> None:
    """In a worker: import what the driver imported. Code whose files exist here at the same
    place is imported from there; otherwise from the source the driver sent."""
    for p in plugins or ():
        if p.module in sys.modules:
            continue
        if p.root and Path(p.root).exists():
            _add_path(str(Path(p.root).parent))
        elif p.files:
            digest = hashlib.sha256(repr(p.files).encode()).hexdigest()[:16]
            where = Path(tempfile.gettempdir()) / f"archsep-plugins-{os.getuid()}-{digest}"
            _own_private_dir(where)  # a predictable name in a shared /tmp: someone else's is refused
            for rel, text in p.files:
                dest = where / rel
                if not dest.exists():
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write(dest, text, "imports")  # two workers may write the same file
            _add_path(str(where))
        _import(p.module, p.module, "imports")
        note(p.module)


# --- which code made a run ---------------------------------------------------------------------
_FINGERPRINTS: dict[str, str | None] = {}


def fingerprint(cls: type) -> str | None:
    """A hash of the source file that defines `cls`, where that is a plugin (None for archsep's own
    classes: a built-in's code is archsep's version, and its run ids are the contract). A run keeps
    its task's and model's (`code_of`), so a rerun can tell a plugin edited since (issue 55)."""
    module = getattr(cls, "__module__", "") or ""
    if module == "archsep" or module.startswith("archsep."):
        return None
    if module not in _FINGERPRINTS:
        f = getattr(sys.modules.get(module), "__file__", None)
        try:
            _FINGERPRINTS[module] = hashlib.sha256(Path(f).read_bytes()).hexdigest()[:16] if f else None
        except OSError:
            _FINGERPRINTS[module] = None
    return _FINGERPRINTS[module]


def code_of(task_cls: type, model_cls: type) -> dict[str, str]:
    """{"task": ..., "model": ...}: the fingerprints of a run's plugin code (empty for built-ins)."""
    out = {"task": fingerprint(task_cls), "model": fingerprint(model_cls)}
    return {k: v for k, v in out.items() if v is not None}

