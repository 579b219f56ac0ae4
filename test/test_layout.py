"""The layout's rules, read from the source (ast, nothing imported): no import circles, no product module
imports a benchmark, the runtime knows no other m3 package, and memory and control take from perception
only its encoders. Every import counts: module level, inside functions and under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "m3_runtime": ROOT / "src/m3_runtime/m3_runtime",
    "m3_perception": ROOT / "src/m3_perception/m3_perception",
    "m3_memory": ROOT / "src/m3_memory/m3_memory",
    "m3_control": ROOT / "src/m3_control/m3_control",
    "m3_agent": ROOT / "m3_agent",
}
BENCH = "m3_agent.bench"
MATERIAL = "m3_perception.material"  # test, bench and demo-episode material
# query_encoders embeds face images and voice samples with perception's own models (issue 21 allows it).
PERCEPTION_FOR_QUERIES = {"m3_perception.faces.face_encoder", "m3_perception.assembly"}


def modules() -> dict[str, Path]:
    out = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = path
    return out


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (a package counts as its __init__)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    package = package.rsplit(".", 1)[0]
                base = f"{package}.{base}"
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
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
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_checker_finds_a_circle_and_a_package_import(tmp_path):
    (tmp_path / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from m3_x.b import B\n")
    (tmp_path / "b.py").write_text("def f():\n    from m3_x import a\n")
    known = {"m3_x.a": tmp_path / "a.py", "m3_x.b": tmp_path / "b.py"}
    graph = {name: imports_of(name, path, known) for name, path in known.items()}
    assert graph == {"m3_x.a": {"m3_x.b"}, "m3_x.b": {"m3_x.a"}}
    assert circles(graph) == [["m3_x.a", "m3_x.b"]]


def test_no_import_circles(graph):
    assert circles(graph) == []


def test_no_product_module_imports_a_benchmark(graph):
    product = {name: deps for name, deps in graph.items() if not name.startswith(BENCH)}
    offenders = {name: sorted(d for d in deps if d.startswith(BENCH)) for name, deps in product.items()}
    assert {name: deps for name, deps in offenders.items() if deps} == {}


def test_no_node_module_imports_test_material(graph):
    users = (BENCH, MATERIAL, "m3_agent.demo")
    offenders = {
        n: sorted(d for d in deps if d.startswith(MATERIAL)) for n, deps in graph.items() if not n.startswith(users)
    }
    assert {n: d for n, d in offenders.items() if d} == {}


def test_the_runtime_knows_no_other_m3_package(graph):
    offenders = {
        n: sorted(d for d in deps if not d.startswith("m3_runtime"))
        for n, deps in graph.items()
        if n.startswith("m3_runtime")
    }
    assert {n: d for n, d in offenders.items() if d} == {}


def test_memory_and_control_take_only_encoders_from_perception(graph):
    offenders = {
        name: sorted(d for d in deps if d.startswith("m3_perception") and d not in PERCEPTION_FOR_QUERIES)
        for name, deps in graph.items()
        if name.startswith(("m3_memory", "m3_control"))
    }
    assert {n: d for n, d in offenders.items() if d} == {}
    control = {d for n, deps in graph.items() if n.startswith("m3_control") for d in deps}
    assert not {d for d in control if d.startswith("m3_perception")}
