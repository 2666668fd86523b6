"""The package's shape: its modules import each other without a circle, and functions fit on a screen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "trajschema"
MAX_FUNCTION_LINES = 60


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(path: Path) -> set[str]:
    """The package modules ``path`` imports at run time (at top level or inside functions)."""
    tree = ast.parse(path.read_text())
    skip = {id(n) for block in ast.walk(tree) if _is_type_checking_block(block) for n in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module)
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trajschema."):
            found.add(node.module.split(".")[1])
    return found


def import_graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in PACKAGE.glob("*.py")}
    return {name: {m for m in _imports(p) if m in modules and m != name} for name, p in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    trail: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        trail.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return [*trail[trail.index(m) :], m]
            if m not in state and (cycle := visit(m)):
                return cycle
        trail.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (cycle := visit(n)):
            return cycle
    return None


def test_no_import_circle_among_the_modules():
    graph = import_graph()
    assert find_cycle({k: v - {"__init__"} for k, v in graph.items() if k != "__init__"}) is None


def test_the_cycle_finder_can_fail():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_lower_layers_do_not_import_the_front_door():
    graph = import_graph()
    below = ["_binding", "_check", "_columns", "_decl", "_dims", "_errors", "_kinds", "_plan", "_sample", "_screen"]
    below += ["_types", "_values", "_padding", "_fastpath"]
    for name in below:
        assert "_schema" not in graph[name] and "_loading" not in graph[name], name


def _long_functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # Count code, not the docstring: documentation is not what makes a function long.
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
                body = body[1:]
            if not body:
                continue
            lines = (body[-1].end_lineno or body[-1].lineno) - body[0].lineno + 1
            if lines > MAX_FUNCTION_LINES:
                out.append((node.name, lines))
    return out


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.name)
def test_functions_fit_on_a_screen(path):
    assert _long_functions(path) == []
