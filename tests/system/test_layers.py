"""Dependencies point one way: tasks -> models -> engine -> store -> runs, sweeps -> analysis ->
reporting -> experiments, constructions -> cli (README, "Layout"; docs/design.md). Every import
of every module under src/archsep, at module level or inside a function, is read from its AST;
one that climbs to a higher layer fails, and so does a circle of imports among the modules of
one folder or of one rank."""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Callable

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"

# rank of each top-level part of the package; a module may import its own rank or below. The
# root modules have true ranks of their own (errors < fileio < plugins < registry), and parts of
# one rank must not import each other in a circle (`test_no_circle_within_a_folder_or_a_rank`)
LAYERS: dict[str, int] = {
    "errors": 0, "results": 0,
    "fileio": 1,
    "plugins": 2,
    "registry": 3,
    "tasks": 4,
    "models": 5,
    "config": 6,
    "engine": 7, "testing": 7,
    "store": 8,
    "runs": 9, "sweeps": 9,
    "analysis": 10,
    "reporting": 11,
    "experiments": 12, "constructions": 12,
    "cli": 13, "__main__": 13, "": 13,  # "" is the package facade, archsep/__init__.py
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _submodule(package: str, name: str) -> str:
    """`from package import name`: the submodule when there is one, else the package itself."""
    where = SRC.joinpath(*package.split("."), name)
    return f"{package}.{name}" if where.is_dir() or where.with_suffix(".py").exists() else package


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every archsep import in the file, wherever it stands."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if node.module is None:  # `from . import plugins` imports archsep.plugins
                found += [(node.lineno, _submodule(target, a.name)) for a in node.names]
            else:
                found.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
    return [(line, t) for line, t in found if t == "archsep" or t.startswith("archsep.")]


def layer(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    if top not in LAYERS:
        raise AssertionError(f"{module}: its part '{top}' has no layer; add it to LAYERS")
    return LAYERS[top]


def climbs(path: Path) -> list[str]:
    me = _module_name(path)
    return [f"{path.relative_to(SRC)}:{line} imports {target} (layer {layer(target)} > {layer(me)})"
            for line, target in imports(path) if layer(target) > layer(me)]


MODULES = sorted((SRC / "archsep").rglob("*.py"))


def test_every_module_has_a_layer_and_imports_only_downwards():
    assert len(MODULES) > 50
    bad = [c for p in MODULES for c in climbs(p)]
    assert not bad, "imports that climb a layer:\n" + "\n".join(bad)


@pytest.mark.parametrize("line", ["from ..experiments import EXPERIMENTS",
                                  "import archsep.cli",
                                  "from .. import cli"])
def test_an_upward_import_inside_a_function_fails(tmp_path, line):
    pkg = tmp_path / "archsep" / "engine"
    pkg.mkdir(parents=True)
    bad = pkg / "sneaky.py"
    bad.write_text(f"def f():\n    {line}\n    return 1\n")
    global SRC
    old, SRC = SRC, tmp_path
    try:
        assert climbs(bad) and "sneaky.py:2" in climbs(bad)[0]
        ok = pkg / "fine.py"
        ok.write_text("from ..tasks import TASKS\nfrom . import train\n")
        assert climbs(ok) == []
    finally:
        SRC = old


def graph(modules: list[Path]) -> dict[str, set[str]]:
    """module -> the archsep modules it imports (a package's import is its __init__)."""
    return {_module_name(p): {t for _, t in imports(p)} for p in modules}


def circles(g: dict[str, set[str]], same: "Callable[[str, str], bool]") -> list[list[str]]:
    """The circles of `g` among modules that `same` puts together (strongly connected components
    of more than one module, or a module importing itself), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in g or not same(v, w):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or v in g.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def folder(module: str) -> str:
    path = SRC.joinpath(*module.split("."))
    return module if path.is_dir() else module.rpartition(".")[0]


def together(a: str, b: str) -> bool:
    """Two modules of one folder, or of one rank (the root modules and same-rank parts)."""
    return folder(a) == folder(b) or layer(a) == layer(b)


def test_no_circle_within_a_folder_or_a_rank():
    found = circles(graph(MODULES), together)
    assert not found, "imports in a circle:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_a_circle_within_a_folder_is_found(tmp_path):
    global SRC
    pkg = tmp_path / "archsep" / "cli"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .sweep import COMMANDS\n")
    (pkg / "sweep.py").write_text("def f():\n    from . import as_flags\n")
    (pkg / "args.py").write_text("X = 1\n")
    old, SRC = SRC, tmp_path
    try:
        mods = sorted(pkg.glob("*.py"))
        assert circles(graph(mods), together) == [["archsep.cli", "archsep.cli.sweep"]]
        (pkg / "sweep.py").write_text("def f():\n    from .args import X\n")
        assert circles(graph(mods), together) == []
    finally:
        SRC = old
