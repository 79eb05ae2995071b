"""The shape issue 20 asks of `proxy/`: no two first-level packages (or loose modules) import
each other, however indirectly, and no function takes more than 8 parameters.

Every import counts: at module level, under `TYPE_CHECKING`, inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "proxy"
MAX_PARAMETERS = 8


def _unit(module: str) -> str | None:
    """`proxy.turn.service` -> `turn`; `proxy.errors` -> `errors`; anything else -> None."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "proxy" else None


def _module_of(path: Path) -> str:
    relative = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    module = _module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return found


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        unit = _unit(_module_of(path))
        if unit is None:
            continue
        edges = graph.setdefault(unit, set())
        for target in _imports(path):
            other = _unit(target)
            if other is not None and other != unit and (ROOT / other).exists() | (ROOT / f"{other}.py").exists():
                edges.add(other)
    return graph


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        unit = todo.pop()
        if unit not in seen:
            seen.add(unit)
            todo.extend(graph.get(unit, ()))
    return seen


def test_no_two_packages_reach_each_other() -> None:
    graph = import_graph()
    reach = {unit: _reach(graph, unit) for unit in graph}
    pairs = sorted({tuple(sorted((a, b))) for a in graph for b in reach[a] if a != b and a in reach.get(b, ())})
    assert pairs == []


def _count(args: ast.arguments, method: bool) -> int:
    positional = [*args.posonlyargs, *args.args]
    if method and positional and positional[0].arg in ("self", "cls"):
        positional = positional[1:]
    return len(positional) + len(args.kwonlyargs) + (args.vararg is not None) + (args.kwarg is not None)


def test_no_function_takes_more_than_eight_parameters() -> None:
    wide = []
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                count = _count(node.args, id(node) in methods)
                if count > MAX_PARAMETERS:
                    wide.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name} ({count})")
    assert wide == []


def test_the_graph_sees_a_cycle_when_there_is_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert "a" in _reach(graph, "c") and "c" in _reach(graph, "a")
    assert "d" not in _reach(graph, "a")
