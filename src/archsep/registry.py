"""Name -> class registries for tasks and models; adding one is one decorator."""
from __future__ import annotations

import contextvars
import dataclasses
import functools
import math
import typing
from contextlib import contextmanager
from typing import Any, Callable, Generic, Iterator, TypeVar

from .errors import ArchsepError, closest, unknown

T = TypeVar("T")
PLUGIN_HINT = "a plugin's name? load it with --import MODULE_OR_PATH or the sweep file's imports = [...]"
INF_OK = {"screen_z"}  # float fields where +inf has a meaning ("never stop early"); every other rejects nan/inf


# True while archsep reads what a store, a sweep row or a config says: the names found there are
# data. They are looked up among what is registered in this process (built-ins, plugins the user
# loaded, installed entry points) and never imported; see `reading`.
_READING: contextvars.ContextVar[bool] = contextvars.ContextVar("archsep_reading", default=False)


@contextmanager
def reading() -> Iterator[None]:
    """Within this block no registry imports a module because a name asks for it: an import
    string ('pkg.mod:Class') resolves only when its module is already imported (a plugin the
    user loaded with --import, a sweep's imports, their own code); otherwise it is an
    ArchsepError, and readers show the stored name as text. Used by every reading path
    (status, export, report, load, analyze)."""
    token = _READING.set(True)
    try:
        yield
    finally:
        _READING.reset(token)


def is_reading() -> bool:
    return _READING.get()


def _same_class(a: type, b: type) -> bool:
    """The same class, or its redefinition (a notebook cell or a module run twice)."""
    return a is b or (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__)


class Registry(Generic[T]):
    """Names -> classes. Plugins add to it (see `archsep.plugins`): by decorator in their own
    module, through the `archsep.plugins` entry points, or by import string 'pkg.mod:Class'."""

    def __init__(self, kind: str, base: type | None = None, plugins: bool = False):
        self.kind = kind
        self.plugins = plugins  # a name a sweep file uses may come from a plugin: an unknown one says how to load it
        self.base = base  # what an import string must name
        self._items: dict[str, type[T]] = {}
        self._aliases: dict[str, str] = {}  # an earlier name -> the name it was renamed to

    def register(self, name: str, aliases: tuple[str, ...] = ()) -> Callable[[type[T]], type[T]]:
        """Register a class under `name`. `aliases` are its earlier names, oldest first: they
        keep resolving to it, and the oldest stays its name in run ids (`identity`), so runs
        stored before a rename keep their ids."""
        def deco(cls: type[T]) -> type[T]:
            for n in (name, *aliases):
                old = self._items.get(self._aliases.get(n, n))
                if old is not None and not _same_class(old, cls):
                    raise ArchsepError(f"{self.kind} '{n}' is already registered to {old.__module__}."
                                       f"{old.__qualname__}; register {cls.__module__}.{cls.__qualname__} under "
                                       "another name")
            self._items[name] = cls
            self._aliases.update({a: name for a in aliases})
            cls.registry_name = name  # type: ignore[attr-defined]
            cls.identity_name = aliases[0] if aliases else name  # type: ignore[attr-defined]
            from . import plugins

            plugins.note(cls.__module__)  # workers import it too
            return cls

        return deco

    @contextmanager
    def temporary(self, name: str, cls: type[T] | None = None) -> Iterator[type[T] | None]:
        """Within the block, `name` is `cls` (None: not registered); afterwards the registry is
        as it was, whatever the block did under that name (a test's preset, a plugin a test
        loads). Nothing is noted for the workers: a temporary entry lives in this process."""
        had = name in self._items
        before = self._items.get(name)
        names = ("registry_name", "identity_name")
        kept = {k: getattr(cls, k) for k in names if cls is not None and k in vars(cls)}
        if cls is None:
            self._items.pop(name, None)
        else:
            self._items[name] = cls
            cls.registry_name = cls.identity_name = name  # type: ignore[attr-defined]
        try:
            yield cls
        finally:
            if had:
                self._items[name] = before  # type: ignore[assignment]
            else:
                self._items.pop(name, None)
            if cls is not None:
                for k in names:
                    if k in kept:
                        setattr(cls, k, kept[k])
                    elif k in vars(cls):
                        delattr(cls, k)

    def names(self) -> list[str]:
        from . import plugins

        plugins.load_entry_points()
        return sorted(self._items)

    def aliases(self) -> dict[str, str]:
        """{earlier name: current name} of renamed entries."""
        return dict(self._aliases)

    def known(self, name: object) -> type[T] | None:
        """The class registered under `name` right now, or None: never imports anything."""
        return self._items.get(self._aliases.get(name, name)) if isinstance(name, str) else None

    def identity(self, name: str) -> str:
        """The name a run id is made with: an entry's oldest name (an alias after a rename), so
        that 'tf' and 'tf-b' are one run; any other name (an import string included) as given."""
        current = self._aliases.get(name, name)
        cls = self._items.get(current)
        if cls is None or getattr(cls, "registry_name", None) != current:
            return name
        return getattr(cls, "identity_name", name)

    def get(self, name: str) -> type[T]:
        name = self._aliases.get(name, name)
        if name not in self._items:
            from . import plugins

            if ":" in name:
                if _READING.get():
                    return self._from_loaded_module(name)
                return self._from_import_string(name)
            plugins.load_entry_points()  # an installed plugin may provide it
            if name not in self._items:
                raise unknown(self.kind, name, self._items, PLUGIN_HINT if self.plugins else "")
        return self._items[name]

    def _from_loaded_module(self, name: str) -> type[T]:
        """An import string while reading: only from a module this process already imported."""
        from . import plugins

        cls = plugins.resolve_loaded(name, self.kind)
        if cls is None:
            from .errors import shown

            raise ArchsepError(f"{self.kind}: '{shown(name)}' is not registered here, and names read from a store are "
                               "never imported; load its plugin with --import to resolve it", field=self.kind)
        return self._check_class(name, cls)

    def _from_import_string(self, name: str) -> type[T]:
        from . import plugins

        return self._check_class(name, plugins.resolve(name, self.kind))

    def _check_class(self, name: str, cls: Any) -> type[T]:
        if not isinstance(cls, type) or (self.base is not None and not issubclass(cls, self.base)):
            what = f"a subclass of {self.base.__module__}.{self.base.__qualname__}" if self.base else "a class"
            raise ArchsepError(f"{self.kind}: '{name}' is not {what}")
        self._items[name] = cls
        if "registry_name" not in cls.__dict__:
            cls.registry_name = name  # type: ignore[attr-defined]
        return cls

    def build(self, name: str, **params: Any) -> T:
        cls = self.get(name)
        return from_params(cls, params, f"{self.kind} '{name}'")


def _coerce(field: str, value: Any, tp: Any) -> Any:
    """Light type checking for config values: ints stay ints, bools are not ints, lists are lists."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(field, value, a)
            except ArchsepError as e:
                errors.append(str(e))
        raise ArchsepError(errors[0] if errors else f"{field}: bad value {value!r}")
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise unknown(field, value, [str(a) for a in allowed])
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ArchsepError(f"{field}: expected a list, got {value!r}")
        (inner, *_rest) = typing.get_args(tp) or (Any,)
        out = [_coerce(f"{field}[{i}]", v, inner) for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if tp is bool:
        if not isinstance(value, bool):
            raise ArchsepError(f"{field}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ArchsepError(f"{field}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ArchsepError(f"{field}: expected a number, got {value!r}")
        value = float(value)
        if not math.isfinite(value) and not (math.isinf(value) and value > 0 and field.rsplit(".", 1)[-1] in INF_OK):
            raise ArchsepError(f"{field}: expected a finite number, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ArchsepError(f"{field}: expected a string, got {value!r}")
        return value
    return value


@functools.lru_cache(maxsize=None)
def init_fields(cls: type) -> dict[str, Any]:
    """{name: resolved type} of a dataclass's init fields, computed once per class (resolving
    type hints costs about a millisecond, and planning a large sweep builds every run)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}


def from_params(cls: type[T], params: dict[str, Any], where: str) -> T:
    """Build dataclass `cls` from `params`, rejecting unknown keys and wrong types by name."""
    fields = hints = init_fields(cls)  # type: ignore[arg-type]  # a class is hashable; the stub asks for Hashable
    kwargs = {}
    for key, value in params.items():
        if key not in fields:
            raise ArchsepError(
                f"{where}: unknown key '{key}'{closest(key, fields)}; allowed: {', '.join(sorted(fields))}"
            )
        kwargs[key] = _coerce(f"{where}.{key}", value, hints[key])
    return cls(**kwargs)
