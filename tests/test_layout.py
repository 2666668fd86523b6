"""The package's shape: rooms that data flows down through, no circle, no underscore across rooms, short functions.

A room is a subpackage of ``trajschema`` (``core``, ``check``, ...) or one of the top-level
modules (the front door ``schema``, ``__init__``, ``__main__``). ``FLOORS`` orders them from
the ground up: a room imports only rooms on lower floors (and its own modules), so a
newcomer can read the package bottom up. The checks read the source (``ast``), so they
see type-only imports too.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "trajschema"
MAX_FUNCTION_LINES = 60

#: Rooms from the ground floor up; rooms on one floor do not import each other.
FLOORS: list[set[str]] = [
    {"core"},
    {"check", "files"},
    {"padding", "export", "evolution"},
    {"dense"},
    {"packed"},
    {"schema"},
    {"load"},
    {"contract", "runtime", "dropin", "bundle"},
    {"tq"},
    {"testing"},
    {"verl", "skyrl", "trl", "openrlhf"},
    {"cli"},
    {"__init__", "__main__"},
]
FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}


def modules() -> dict[str, Path]:
    """``{"core.dims": path, "schema": path, "core": core/__init__.py, ...}``."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__" and len(parts) > 1:
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def room_of(module: str) -> str:
    return module.split(".")[0]


def imports(module: str, path: Path) -> list[tuple[str, list[str]]]:
    """``(imported module, names)`` for every package import of ``module``, type-only ones too."""
    tree = ast.parse(path.read_text())
    here = f"trajschema.{module}" if module not in ("__init__", "__main__") else "trajschema.__init__"
    package = here if path.name == "__init__.py" and module != "__init__" else here.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                absolute = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                target = absolute.removeprefix("trajschema").removeprefix(".")
            elif (node.module or "").startswith("trajschema"):
                target = node.module.removeprefix("trajschema").removeprefix(".")
            else:
                continue
            found.append((target or "__init__", [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("trajschema."):
                    found.append((alias.name.removeprefix("trajschema."), []))
        elif (dynamic := _dynamic_import(node)) is not None:
            found.append((dynamic, []))
    return found


def _dynamic_import(node: ast.AST) -> str | None:
    """The package module a literal ``importlib.import_module("trajschema...")`` or
    ``__import__("trajschema...")`` call names (an edge like any import), else ``None``."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return None
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    target = node.args[0].value
    if name not in ("import_module", "__import__") or not isinstance(target, str):
        return None
    if target != "trajschema" and not target.startswith("trajschema."):
        return None
    return target.removeprefix("trajschema").removeprefix(".") or "__init__"


def module_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = set()
        for target, names in imports(name, path):
            for t in [target, *(f"{target}.{n}" for n in names)]:
                if t in mods and t != name:
                    targets.add(t)
        graph[name] = targets
    return graph


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


def test_every_room_has_a_floor():
    assert {room_of(m) for m in modules()} == set(FLOOR)


def test_no_import_circle_among_the_modules_not_even_a_type_only_one():
    graph = module_graph()
    # A room's __init__ hands on its modules' names; the modules never import it back.
    assert find_cycle(graph) is None


def test_the_cycle_finder_can_fail():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def arrows_up() -> list[str]:
    bad = []
    for module, targets in module_graph().items():
        here = room_of(module)
        for target in targets:
            there = room_of(target)
            if there != here and FLOOR[there] >= FLOOR[here]:
                bad.append(f"{module} -> {target} (floor {FLOOR[here]} -> {FLOOR[there]})")
    return sorted(bad)


def test_data_flows_down_no_arrow_runs_back_up():
    assert arrows_up() == []


def test_no_underscore_name_crosses_a_room():
    bad = []
    for module, path in modules().items():
        for target, names in imports(module, path):
            if room_of(target) != room_of(module) and room_of(target) not in ("__init__",):
                bad += [f"{module} imports {n} from {target}" for n in names if n.startswith("_")]
    assert bad == []


def test_each_room_says_what_it_is_and_what_it_offers():
    for room in {room_of(m) for m in modules()}:
        init = PACKAGE / room / "__init__.py"
        if not init.exists():
            continue
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{room}/__init__.py has no docstring"
        exported = [
            node
            for node in tree.body
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets)
        ]
        assert exported, f"{room}/__init__.py lists nothing in __all__"
        names = ast.literal_eval(exported[0].value)
        assert names and len(set(names)) == len(names), f"{room}/__init__.py: __all__ is empty or repeats"


def test_no_room_offers_a_name_its_modules_have():
    """``from trajschema.runtime import checked`` must not find a function where a module is meant, or the reverse."""
    clashes = []
    for room in {room_of(m) for m in modules()}:
        init = PACKAGE / room / "__init__.py"
        if not init.exists():
            continue
        tree = ast.parse(init.read_text())
        offered = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                offered.update(a.asname or a.name for a in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                offered.add(node.name)
        clashes += [f"{room}.{p.stem}" for p in (PACKAGE / room).glob("*.py") if p.stem in offered]
    assert clashes == []


def test_other_rooms_import_a_room_through_its_front():
    """Another room takes a name from ``trajschema.check``, never from ``trajschema.check.batch``."""
    bad = []
    for module, path in modules().items():
        for target, _ in imports(module, path):
            there = room_of(target)
            if there != room_of(module) and "." in target and there not in ("verl", "testing"):
                bad.append(f"{module} imports from {target}")
    assert bad == []


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


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_functions_fit_on_a_screen(path):
    assert _long_functions(path) == []


def test_the_layout_checks_can_fail(tmp_path, monkeypatch):
    """Each rule, on a small package that breaks it."""
    pkg = tmp_path / "trajschema"
    (pkg / "core").mkdir(parents=True)
    (pkg / "check").mkdir()
    (pkg / "core" / "__init__.py").write_text('"""c."""\n')
    (pkg / "core" / "dims.py").write_text("from trajschema.check.plan import _x\n")
    (pkg / "check" / "plan.py").write_text("from trajschema.core import dims\n" + "def f():\n" + "    x = 1\n" * 61)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    assert find_cycle(module_graph()) is not None
    assert arrows_up() == ["core.dims -> check.plan (floor 0 -> 1)"]
    with pytest.raises(AssertionError):
        test_no_underscore_name_crosses_a_room()
    with pytest.raises(AssertionError):
        test_each_room_says_what_it_is_and_what_it_offers()
    with pytest.raises(AssertionError):
        test_other_rooms_import_a_room_through_its_front()
    assert _long_functions(pkg / "check" / "plan.py") == [("f", 61)]


@pytest.mark.parametrize(
    "call",
    [
        'importlib.import_module("trajschema.check.plan")',
        'import_module("trajschema.check.plan")',
        '__import__("trajschema.check.plan")',
    ],
)
def test_a_dynamic_import_up_is_an_arrow_up(tmp_path, monkeypatch, call):
    """The edge the layout registry once hid: a lower room importing a higher one by name."""
    pkg = tmp_path / "trajschema"
    (pkg / "core").mkdir(parents=True)
    (pkg / "check").mkdir()
    (pkg / "core" / "__init__.py").write_text('"""c."""\n')
    (pkg / "core" / "layout.py").write_text(f"import importlib\ndef load():\n    return {call}\n")
    (pkg / "check" / "plan.py").write_text("from trajschema.core import layout\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", pkg)
    assert arrows_up() == ["core.layout -> check.plan (floor 0 -> 1)"]
    assert find_cycle(module_graph()) == ["check.plan", "core.layout", "check.plan"]


def test_a_dynamic_import_of_something_else_is_no_edge():
    tree = ast.parse('importlib.import_module("tensordict")\nimport_module(name)\n__import__("os")')
    assert [d for n in ast.walk(tree) if (d := _dynamic_import(n)) is not None] == []


BENCHMARKS = PACKAGE.parent / "benchmarks"


def benchmark_graph(folder: Path) -> dict[str, set[str]]:
    """Which benchmark scripts each script imports (top level or inside a function)."""
    names = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and node.module in names:
                found.add(node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in names}
        graph[path.stem] = found - {path.stem}
    return graph


def test_the_benchmarks_import_no_circle():
    # The runner (bench_core) imports the parts; the parts share only the harness and the workload.
    graph = benchmark_graph(BENCHMARKS)
    assert {"bench_core", "harness", "workload"} <= set(graph)
    assert find_cycle(graph) is None
    assert not graph["harness"] and not graph["workload"] - {"harness"}
