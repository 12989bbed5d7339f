"""The import graph of the impactlab package: one direction of data flow, no cycles.

The graph is read from the source with ``ast``. It counts every import a module makes when it
is loaded, including those under ``if TYPE_CHECKING:`` (a cycle that only type checkers see is
still a cycle in the design); imports inside a function body run later and are left out.
Importing ``impactlab.a.b`` also loads the package ``impactlab.a``, so that is an edge too
(except to the importer's own packages, which are already loading). The top package
``impactlab`` (its ``__init__``) is left out as a target only when reached that way.
"""

from __future__ import annotations

import ast
import pathlib

import impactlab

PACKAGE = pathlib.Path(impactlab.__file__).parent
TOP = "impactlab"
#: The configuration layer: it may import only these impactlab modules, so that everything
#: else can depend on it and it on nothing that runs a simulation.
CONFIG_LAYER = {f"{TOP}.config", f"{TOP}.params", f"{TOP}.registry"}
CONFIG_LAYER_MAY_IMPORT = CONFIG_LAYER | {f"{TOP}.units"}


def module_name(path: pathlib.Path) -> str:
    """``impactlab/policies/fair.py`` -> ``impactlab.policies.fair`` (``__init__`` -> package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, pathlib.Path]:
    """Every module of the package by dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def load_time_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Import statements that run when the module is loaded (``if TYPE_CHECKING:`` included)."""
    found: list[ast.Import | ast.ImportFrom] = []
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def targets(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """The impactlab modules that module ``name`` (at ``path``) imports when loaded."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in load_time_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name.split(".")[0] == TOP)
            continue
        if node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        if base.split(".")[0] != TOP:
            continue
        # ``from pkg import x``: x is a submodule if one exists by that name, else a name in pkg.
        for alias in node.names:
            out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {t for t in with_packages(out, name) if t != name}


def with_packages(found: set[str], importer: str) -> set[str]:
    """Add the packages that loading each module loads first, but not the importer's own."""
    own = {importer.rsplit(".", k)[0] for k in range(importer.count(".") + 1)}
    out = set(found)
    for target in found:
        parts = target.split(".")
        out.update(".".join(parts[:k]) for k in range(2, len(parts)))
    return {t for t in out if t not in own or t in found}


def import_graph() -> dict[str, set[str]]:
    """Module -> the impactlab modules it imports when loaded."""
    mods = modules()
    return {name: targets(name, path, set(mods)) for name, path in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as a path ``[a, b, ..., a]``, or ``[]`` if there is none."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return []


def test_the_graph_sees_relative_absolute_and_type_checking_imports():
    graph = import_graph()
    assert f"{TOP}.budgets" in graph[f"{TOP}.engine"]  # from .budgets import BudgetTree
    assert f"{TOP}.policies.base" in graph[f"{TOP}.engine"]  # from .policies.base import ...
    assert f"{TOP}.policies" in graph[f"{TOP}.engine"]  # ... which loads the package first
    assert f"{TOP}.config" in graph[TOP]  # __init__: from .config import SimConfig
    probe = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .engine import Engine\n"
                      "def later():\n    from .cli import main\n")
    assert sorted(n.module for n in load_time_imports(probe)) == ["engine", "typing"]


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycles_among_impactlab_modules():
    cycle = find_cycle(import_graph())
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_health_knows_nothing_of_the_engine():
    assert f"{TOP}.engine" not in import_graph()[f"{TOP}.health"]


def test_the_config_layer_imports_only_itself_and_units():
    graph = import_graph()
    assert CONFIG_LAYER <= set(graph), f"missing: {sorted(CONFIG_LAYER - set(graph))}"
    wrong = {name: sorted(graph[name] - CONFIG_LAYER_MAY_IMPORT) for name in sorted(CONFIG_LAYER)}
    wrong = {name: deps for name, deps in wrong.items() if deps}
    assert not wrong, f"the config layer imports modules above it: {wrong}"

