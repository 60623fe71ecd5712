"""Dependencies point one way: tasks -> models -> engine -> runs -> analysis -> reporting ->
experiments, constructions -> cli (README, "Layout"). Every import of every module under
src/archsep, at module level or inside a function, is read from its AST; one that climbs to a
higher layer fails."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# rank of each top-level part of the package; a module may import its own rank or below
LAYERS: dict[str, int] = {
    "errors": 0, "fileio": 0, "registry": 0, "plugins": 0, "results": 0,
    "tasks": 1,
    "models": 2,
    "config": 3,
    "engine": 4, "testing": 4,
    "runs": 5,
    "analysis": 6,
    "reporting": 7,
    "experiments": 8, "constructions": 8,
    "cli": 9, "__main__": 9, "": 9,  # "" is the package facade, archsep/__init__.py
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
