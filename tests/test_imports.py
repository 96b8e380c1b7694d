"""No import circle in the package: the graph of every module's imports has no cycle.

The graph is read from the source (`ast`), not from a running interpreter: every import
statement counts, those inside functions and under `if TYPE_CHECKING:` too. An edge goes to the
module imported; for `from P import name`, to `P.name` when that is a module, else to `P`. No
edge goes to a parent package implicitly. A cycle is a strongly connected component of two or
more modules (or one that imports itself); each is named with a path around it.
"""

from __future__ import annotations

import ast
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {
    "slotwarden": "slotwarden",
    "model": "slotwarden.model",
    "runtime": "slotwarden.runtime",
    "kernels": "slotwarden.kernels",
    "verification": "slotwarden.verification",
}
"""Source folder -> the package it installs as (pyproject.toml's package-dir)."""


def modules(folders: dict[str, str], root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Module name -> (its file, whether it is a package's `__init__`)."""
    out = {}
    for folder, package in folders.items():
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if "__pycache__" in parts:
                continue
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            out[".".join([package, *parts])] = (path, is_package)
    return out


def _imported(node: ast.AST, name: str, is_package: bool, known) -> list[str]:
    """The modules one import statement of module `name` reaches (only those in `known`)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if node.level:
        here = name.split(".") if is_package else name.split(".")[:-1]
        base = here[: len(here) - (node.level - 1)]
        parent = ".".join(base + ([node.module] if node.module else []))
    else:
        parent = node.module or ""
    out = []
    for alias in node.names:
        child = f"{parent}.{alias.name}"
        if child in known:
            out.append(child)
        elif parent in known:
            out.append(parent)
    return out


def import_graph(folders: dict[str, str], root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules it imports (of the same source folders)."""
    found = modules(folders, root)
    graph: dict[str, set[str]] = {name: set() for name in found}
    for name, (path, is_package) in found.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                graph[name].update(_imported(node, name, is_package, found))
    return graph


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                out.append(sorted(component))
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The components that hold a cycle: two or more modules, or one that imports itself."""
    return [c for c in components(graph) if len(c) > 1 or c[0] in graph[c[0]]]


def path_around(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """A shortest cycle through the component's first module, staying inside the component."""
    start, inside = component[0], set(component)
    came_from = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & inside):
                if child == start:
                    path = [node]
                    while came_from[path[-1]] is not None:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    nxt.append(child)
        frontier = nxt
    raise AssertionError(f"no cycle through {start}")


def describe(graph: dict[str, set[str]], found: list[list[str]]) -> str:
    return "\n".join(" -> ".join(path_around(graph, c)) for c in found)


def test_the_package_has_no_import_cycle():
    graph = import_graph(FOLDERS)
    assert {"slotwarden.cli.commands", "slotwarden.model.lifecycle", "slotwarden.verification.machines"} <= set(graph)
    assert sum(map(len, graph.values())) > len(graph)  # the imports were read: not a vacuous pass
    found = cycles(graph)
    assert not found, f"{len(found)} import cycles:\n{describe(graph, found)}"


def test_the_finder_names_a_planted_cycle(tmp_path):
    """Broken variant: a tiny package with a circle (one side under TYPE_CHECKING, one inside a
    function, one relative) is found and named; without the circle, nothing is."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .c import thing\n")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fake import b\n")
    (pkg / "b.py").write_text("def f():\n    from .sub.c import thing\n")
    (pkg / "sub" / "c.py").write_text("import fake.a\nthing = 1\n")
    (pkg / "d.py").write_text("import fake.sub\nimport os\n")  # a package's __init__, and outside
    graph = import_graph({"pkg": "fake"}, tmp_path)
    assert graph["fake.a"] == {"fake.b"} and graph["fake.b"] == {"fake.sub.c"}
    assert graph["fake.sub"] == {"fake.sub.c"} and graph["fake.d"] == {"fake.sub"}
    found = cycles(graph)
    assert found == [["fake.a", "fake.b", "fake.sub.c"]]
    assert describe(graph, found) == "fake.a -> fake.b -> fake.sub.c -> fake.a"
    (pkg / "sub" / "c.py").write_text("thing = 1\n")
    assert cycles(import_graph({"pkg": "fake"}, tmp_path)) == []


def test_a_module_that_imports_itself_is_a_cycle(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "__init__.py").write_text("")
    (tmp_path / "p" / "m.py").write_text("from q import m\n")
    graph = import_graph({"p": "q"}, tmp_path)
    assert cycles(graph) == [["q.m"]]
