"""Discoverability: `archsep list` (every registered name with a one-line summary, and a model's
state size at a reference length) and `archsep describe NAME` (a task's, model's, link's or
preset's parameters with their types and defaults, and its docstring).

Both read the registries only: a name is never imported from a string here.
"""
from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import sys
import typing

from ..errors import ArchsepError

REFERENCE = ("index-lookup", {"N": 100})  # the task a model's state size is stated on in `list`


def add_parsers(sub) -> None:
    sub.add_parser("list", help="list presets, tasks, architectures and links, each with a one-line summary")
    d = sub.add_parser("describe", help="a task's, architecture's, link's or preset's parameters and documentation")
    d.add_argument("name", metavar="NAME", help="a registered name (see `archsep list`)")


def _registries() -> list[tuple[str, typing.Any]]:
    from ..experiments import PRESETS
    from ..models import MODELS
    from ..tasks import TASKS
    from ..tasks.links import LINKS

    return [("presets", PRESETS), ("tasks", TASKS), ("archs", MODELS), ("links", LINKS)]


def _own_doc(cls: type) -> str:
    """The class's own docstring (a dataclass without one gets its signature: not a summary),
    else its module's."""
    doc = cls.__dict__.get("__doc__") or ""
    if dataclasses.is_dataclass(cls) and doc.startswith(cls.__name__ + "("):
        doc = ""
    return inspect.cleandoc(doc or (sys.modules[cls.__module__].__doc__ or ""))


# what a '. ' follows when it does not end a sentence: "et al. 2023", "paper A, Fig. 2", "Eq. A.2"
ABBREVIATIONS = ("al", "e.g", "i.e", "cf", "vs", "resp", "approx", "Fig", "Figs", "Eq", "Eqs", "Thm", "Prop",
                 "Lem", "Cor", "Def", "App", "Sec", "Tab", "Ref", "Alg")
_SENTENCE_END = re.compile("".join(rf"(?<!\b{re.escape(a)})" for a in ABBREVIATIONS) + r"\.\s")


def summary_line(cls: type, limit: int = 110) -> str:
    """The first sentence of what the entry says about itself (a preset's description), on one
    line, cut at `limit` characters."""
    text = getattr(cls, "description", "") or _own_doc(cls)
    para = " ".join(text.strip().split("\n\n")[0].split())
    end = _SENTENCE_END.search(para)
    first = para[: end.start() + 1] if end else para
    return first if len(first) <= limit else first[: limit - 1].rsplit(" ", 1)[0] + " …"


def state_line(cls: type) -> str:
    """A model's state at its defaults on the reference task: the floats it carries from one
    position to the next, or that it is not recurrent (its cache grows with N)."""
    from ..tasks import TASKS

    task = TASKS.get(REFERENCE[0])(**REFERENCE[1])
    try:
        model = cls().build(task.spec)
        size = model.state_size(task.spec.seq_len)
    except Exception:  # a model made for other inputs (paper B's vector tasks): nothing to state
        return ""
    return f"state {size} floats" if size is not None else "not recurrent (attention: a cache grows with N)"


def cmd_list(a: argparse.Namespace) -> int:
    for title, reg in _registries():
        print(f"{title}:")
        names = reg.names()
        width = max((len(n) for n in names), default=0) + 2
        aliases: dict[str, list[str]] = {}
        for old, new in reg.aliases().items():
            aliases.setdefault(new, []).append(old)
        for n in names:
            cls = reg.get(n)
            extra = [f"was {', '.join(aliases[n])}"] if n in aliases else []
            if title == "archs":
                extra += [s for s in [state_line(cls)] if s]
            if title == "presets":
                extra += [f"{scale}: " + ("not yet fair" if text.startswith("not yet") else text.split(" (")[0])
                          for scale, text in getattr(cls, "caveats", {}).items()]
            tail = f"  [{'; '.join(extra)}]" if extra else ""
            print(f"  {n:<{width}}{summary_line(cls)}{tail}")
    print(f"(model state sizes at their defaults on {REFERENCE[0]} N={REFERENCE[1]['N']}; `archsep describe NAME` "
          "for parameters; a scale 'not yet fair' gives verdicts that are not a test: `describe` says why)")
    return 0


def _fields(cls: type) -> list[str]:
    if not dataclasses.is_dataclass(cls):
        return []
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = repr(f.default)
        elif f.default_factory is not dataclasses.MISSING:
            default = repr(f.default_factory())
        else:
            default = "(required)"
        hint = hints.get(f.name)
        kind = hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")
        out.append(f"  {f.name}: {kind} = {default}")
    return out


def cmd_describe(a: argparse.Namespace) -> int:
    found = [(title, reg.get(a.name)) for title, reg in _registries() if reg.known(a.name) is not None]
    if not found:
        names = sorted({n for _, reg in _registries() for n in reg.names()})
        raise ArchsepError(f"NAME: '{a.name}' is not a registered preset, task, architecture or link; "
                           f"known: {', '.join(names)}")
    for title, cls in found:
        print(f"{a.name} ({title[:-1]}, {cls.__module__}.{cls.__qualname__})")
        fields = _fields(cls)
        if fields:
            print("parameters:")
            print("\n".join(fields))
        if title == "presets":
            print(f"scales: {', '.join(cls.scales)}")
            for scale, text in getattr(cls, "runtime", {}).items():
                print(f"  {scale}: {text}")
            for scale, text in getattr(cls, "caveats", {}).items():
                print(f"  {scale}: {text}")
        if title == "archs" and (s := state_line(cls)):
            print(f"{s} (defaults, {REFERENCE[0]} N={REFERENCE[1]['N']})")
        doc = _own_doc(cls)
        if doc:
            print()
            print(doc)
    return 0


COMMANDS = {"list": cmd_list, "describe": cmd_describe}
