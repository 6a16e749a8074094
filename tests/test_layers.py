"""The house of ``coordinator/``: no import circle between its modules, and imports only down
the layers (README "How it is built", docs/architecture.md "Layers").

Imports are read from the source (``ast``), not by importing: a module-level import and one
inside a function both count, since either runs when the code does. Only imports under
``if TYPE_CHECKING:`` are left out: they name a type for the checker and never run.
"""
from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "coordinator"

# Lowest first. A module may import its own layer and the layers below it, never one above.
LAYERS: list[set[str]] = [
    {"errors"},  # CoordError, the one error base: every layer may import it
    {"metadata"},  # ODF objects, codecs, block hash, signatures, the chain check
    {"workspace"},  # the .coord folder, the read model, the append path, graph, catalog
    # the work: slices and hashes, engines, authorship and verify, ingest, transforms, sharing,
    # current-ODF dataset folders (store)
    {"data", "engine", "trust", "ingest", "transform", "repository", "store"},
    {"build", "lineage", "query"},  # services the front ends call
    {"serve", "cli"},  # the front ends
]
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__), the generated gRPC stubs left out."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if "generated" in parts:
            continue
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(name: str, path: Path, is_package: bool, known: dict) -> set[str]:
    """The coordinator modules ``name`` imports when its code runs."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()

    def resolve(dotted: str) -> str | None:
        while dotted and dotted not in known:  # ``from x.y import f``: f is no module, x.y is
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                targets = [alias.name for alias in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - child.level + 1]
                    source = ".".join(base + ([child.module] if child.module else []))
                else:
                    source = child.module or ""
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in known else source
                           for alias in child.names]
            else:
                visit(child)
                continue
            for target in targets:
                module = resolve(target)
                if module and module != name and module.startswith("coordinator."):
                    found.add(module)

    visit(ast.parse(path.read_text(), str(path)))
    return found


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, is_package, known) for name, (path, is_package) in known.items()}


def unit(module: str) -> str:
    """The package (or top-level module) of ``coordinator`` a module belongs to."""
    return module.split(".")[1]


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(TopologicalSorter(graph).static_order())
    except CycleError as e:
        return list(e.args[1])
    return None


def test_no_import_circle_between_modules():
    graph = import_graph()
    assert cycle(graph) is None, f"import circle: {' -> '.join(cycle(graph) or [])}"


def test_no_import_circle_between_packages():
    units: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        if module != "coordinator":
            units.setdefault(unit(module), set()).update(unit(t) for t in targets if unit(t) != unit(module))
    assert cycle(units) is None, f"packages import each other: {' -> '.join(cycle(units) or [])}"


def test_every_package_has_a_layer():
    units = {unit(m) for m in modules() if m != "coordinator"}
    assert units == set(RANK), f"not in LAYERS: {units - set(RANK)}; gone: {set(RANK) - units}"


def test_imports_point_down_the_layers():
    upward = sorted(
        f"{module} imports {target}"
        for module, targets in import_graph().items() if module != "coordinator"
        for target in targets if RANK[unit(target)] > RANK[unit(module)]
    )
    assert upward == []


def test_the_check_sees_function_level_imports_and_leaves_out_type_checking(tmp_path):
    (tmp_path / "coordinator" / "a").mkdir(parents=True)
    for init in (tmp_path / "coordinator" / "__init__.py", tmp_path / "coordinator" / "a" / "__init__.py"):
        init.write_text("")
    (tmp_path / "coordinator" / "a" / "x.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .y import T\n"
        "def f():\n    from . import y\n")
    (tmp_path / "coordinator" / "a" / "y.py").write_text("from ..a.x import f\n")
    known = {"coordinator": None, "coordinator.a": None, "coordinator.a.x": None, "coordinator.a.y": None}
    x = imports("coordinator.a.x", tmp_path / "coordinator" / "a" / "x.py", False, known)
    y = imports("coordinator.a.y", tmp_path / "coordinator" / "a" / "y.py", False, known)
    assert (x, y) == ({"coordinator.a.y"}, {"coordinator.a.x"})
    assert cycle({"coordinator.a.x": x, "coordinator.a.y": y}) is not None
