"""The repository's shape: stages import one way, no cycles, docs that point
at real tests (the wheel's contents are tests/test_install.py's)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: What each stage may import (besides itself). Arrows point one way:
#: cli -> analyses -> engine -> results -> maths <- sources; nn stands beside them on maths.
# errors is a leaf every stage may use: what went wrong
_LEAVES = {"errors"}
ALLOWED = {
    "errors": set(),
    "maths": _LEAVES,
    "sources": _LEAVES | {"maths"},
    "results": _LEAVES | {"maths"},
    "engine": _LEAVES | {"maths", "results", "sources"},
    "analyses": _LEAVES | {"maths", "results", "sources", "engine"},
    "nn": _LEAVES | {"maths"},
}


def library_modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the normstats package."""
    modules = {}
    for path in sorted((ROOT / "normstats").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def imported_modules(path: Path, known: set[str]) -> set[str]:
    """normstats modules ``path`` imports anywhere (module level or inside functions)."""
    found = set()
    tree = ast.parse(path.read_text())
    typing_only = {id(n) for block in ast.walk(tree) if _is_type_checking(block)
                   for n in ast.walk(block)}
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue  # imports for type hints only never run
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found.update(name for name in names if name in known)
    return found


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and \
        node.test.id == "TYPE_CHECKING"


def stage(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) == 1:
        return None  # the package itself: the public API gathers every stage
    return parts[1]


def import_graph() -> dict[str, set[str]]:
    modules = library_modules()
    known = set(modules)
    graph = {}
    for name, path in modules.items():
        # importing a package runs its __init__; "from normstats.x import y" names both
        graph[name] = {m for m in imported_modules(path, known) if m != name}
    return graph


def test_the_library_never_imports_click():
    offenders = [str(p.relative_to(ROOT)) for p in (ROOT / "normstats").rglob("*.py")
                 if re.search(r"^\s*(import click|from click)", p.read_text(), re.MULTILINE)]
    assert offenders == []


def test_stages_import_one_way():
    wrong = []
    for module, imports in import_graph().items():
        own = stage(module)
        if own is None or own == "__main__":
            continue
        for target in imports:
            other = stage(target)
            if other not in (None, own) and other not in ALLOWED.get(own, set()):
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_no_import_cycles():
    graph = import_graph()
    # A package's __init__ importing its children is not a cycle of the data flow.
    edges = {m: {t for t in targets if not m.startswith(t + ".") and t != "normstats"}
             for m, targets in graph.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in edges.get(node, ()):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target])
            elif target not in state:
                visit(target, path + [target])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == []



def test_every_test_named_by_the_reliability_matrix_exists():
    text = (ROOT / "docs" / "reliability.md").read_text()
    named = re.findall(r"`([\w/]+\.py)::(test_\w+)", text)
    assert len(named) > 20
    missing = []
    for file, test in named:
        path = ROOT / "tests" / file
        if not path.is_file() or not re.search(rf"^def {test}\(", path.read_text(), re.M):
            missing.append(f"{file}::{test}")
    assert missing == []


def test_importing_the_package_loads_neither_numpy_nor_dask():
    """``import normstats`` is cheap: the public names load their stages on first use."""
    code = ("import sys, normstats; print(sorted(m for m in ('numpy', 'dask', 'PIL', 'zarr', "
            "'distributed') if m in sys.modules)); "
            "print(normstats.compute.__module__, normstats.DatasetStats.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "normstats.analyses.compute DatasetStats"]
