"""The import graph of the impactlab package: layers whose imports point down, no cycles.

The graph is read from the source with ``ast``. It counts every import a module makes, at load
time, under ``if TYPE_CHECKING:`` (a cycle that only type checkers see is still a cycle in the
design) and inside function bodies (a deferred import is still a dependency). Importing
``impactlab.a.b`` also loads the package ``impactlab.a``, so that is an edge too (except to the
importer's own packages, which are already loading). The top package ``impactlab`` (its
``__init__``) is left out as a target only when reached that way.

The layers, bottom first, are the package's folders (docs/architecture.md says why each
boundary is where it is); the modules at the top level are the top layer.
"""

from __future__ import annotations

import ast
import pathlib

import impactlab

PACKAGE = pathlib.Path(impactlab.__file__).parent
TOP = "impactlab"
#: The layers, bottom first: a module may import its own layer and the layers below it.
LAYERS = ("base", "inputs", "sim", "policies", "analysis", "runs", "notebook", "top")
#: Modules allowed at the top level besides the subpackages (the issue asks for about ten).
MAX_TOP_MODULES = 10


def layer(module: str) -> str:
    """The layer of a dotted module name: its folder under the package, else ``top``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else "top"


def module_name(path: pathlib.Path) -> str:
    """``impactlab/policies/fair.py`` -> ``impactlab.policies.fair`` (``__init__`` -> package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, pathlib.Path]:
    """Every module of the package by dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def all_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module: at load time, typing-only, and inside functions."""
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def targets(name: str, path: pathlib.Path, known: set[str]) -> set[str]:
    """The impactlab modules that module ``name`` (at ``path``) imports when loaded."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in all_imports(ast.parse(path.read_text(), str(path))):
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
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return []


def test_the_graph_sees_relative_absolute_typing_and_deferred_imports():
    graph = import_graph()
    engine = f"{TOP}.sim.engine"
    assert f"{TOP}.inputs.budgets" in graph[engine]  # from ..inputs.budgets import BudgetTree
    assert f"{TOP}.inputs" in graph[engine]  # ... which loads the package first
    assert f"{TOP}.sim.policy" in graph[engine]  # from .policy import ... (its own package)
    assert f"{TOP}.base.config" in graph[TOP]  # __init__: typing-only import
    probe = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .engine import Engine\n"
        "def later():\n    from .cli import main\n"
    )
    assert sorted(n.module for n in all_imports(probe)) == ["cli", "engine", "typing"]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every edge that points to a higher layer than its importer's, as ``a -> b`` lines."""
    rank = {name: i for i, name in enumerate(LAYERS)}
    return [
        f"{src} ({layer(src)}) -> {dst} ({layer(dst)})"
        for src, dsts in sorted(graph.items())
        for dst in sorted(dsts)
        if rank[layer(dst)] > rank[layer(src)]
    ]


def test_the_layer_check_reports_an_import_that_points_up():
    graph = {f"{TOP}.sim.engine": {f"{TOP}.analysis.metrics", f"{TOP}.base.units"}}
    assert upward_imports(graph) == [f"{TOP}.sim.engine (sim) -> {TOP}.analysis.metrics (analysis)"]
    assert (
        layer(f"{TOP}.cli") == layer(TOP) == "top"
        and layer(f"{TOP}.inputs.traces.philly") == "inputs"
    )


def test_every_import_points_down_the_layers():
    graph = import_graph()
    assert {layer(name) for name in graph} == set(LAYERS), "a layer folder is missing or unknown"
    assert not upward_imports(graph), "imports that point up:\n" + "\n".join(upward_imports(graph))


def test_the_top_level_holds_few_modules():
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= MAX_TOP_MODULES, f"{len(top)} modules at the top level: {top}"


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_no_import_cycles_among_impactlab_modules():
    cycle = find_cycle(import_graph())
    assert not cycle, "import cycle: " + " -> ".join(cycle)


def test_health_knows_nothing_of_the_engine():
    assert f"{TOP}.sim.engine" not in import_graph()[f"{TOP}.sim.health"]


def test_the_floor_imports_only_itself():
    graph = import_graph()
    wrong = {
        name: sorted(d for d in deps if layer(d) != "base")
        for name, deps in graph.items()
        if layer(name) == "base"
    }
    assert not {k: v for k, v in wrong.items() if v}, f"the floor imports layers above it: {wrong}"
