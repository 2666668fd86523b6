"""Every problem of a schema file at once, each with the line and column the YAML gives it.

A file is read into a tree of YAML nodes, whose start marks say where each key and value
is; `Places` keeps them by key path (the paths the messages name). Loading runs inside
`reporting`, which makes the places of every file read known to `place` and gives each
problem raised its line and column. The checks of a file run as independent units
(`Problems.each`: a dim, a field, a tag, ...): a unit stops at its first problem, and
the load goes on with the next one, so one run reports every independent problem.
A unit that only fails because one before it did (a field over a dim that did not
compile) raises `Consequence`, which is dropped: its cause is reported already.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any, Literal

import yaml

from trajschema.core import SchemaDefinitionError, SchemaProblem

#: How many problems a load reports: every one it can find soundly, or the first only.
ErrorsMode = Literal["all", "first"]
ERRORS_MODES: tuple[ErrorsMode, ...] = ("all", "first")

Mark = tuple[int, int]  # (line, column), 1-based as editors count


def check_errors_mode(errors: Any) -> ErrorsMode:
    """``errors`` as the loaders take it, or a TypeError / ValueError naming what was found."""
    if not isinstance(errors, str):
        raise TypeError(f"errors must be 'all' or 'first', found {type(errors).__name__}")
    if errors not in ERRORS_MODES:
        raise ValueError(f"errors must be 'all' or 'first', found {errors!r}")
    return errors


def _mark(node: yaml.Node) -> Mark:
    return node.start_mark.line + 1, node.start_mark.column + 1


@dataclasses.dataclass(frozen=True)
class Places:
    """Where each key path of one file is: its key (``fields.x`` at ``x:``) and its value."""

    keys: dict[str, Mark]
    values: dict[str, Mark]

    def of(self, path: str, *, key: bool = False) -> Mark | None:
        """The place of ``path``: its value when that is a scalar, else its key (a mapping
        or a list starts there); for a path the file does not hold (a key that is missing),
        the nearest enclosing key that it does."""
        while True:
            if not key and path in self.values:
                return self.values[path]
            if path in self.keys:
                return self.keys[path]
            if path in self.values:  # a list item: it has no key
                return self.values[path]
            if not path:
                return None
            key = True
            cut = max(path.rfind("."), path.rfind("["))
            path = path[: max(cut, 0)]


def places_of(root: yaml.Node, paths: dict[int, str]) -> Places:
    """The `Places` of a composed document; ``paths`` maps ``id(node)`` to its key path.

    Aliases share nodes, and each node is looked at once (``paths`` holds each once), so a
    file of aliases of aliases costs what its text does.
    """
    keys: dict[str, Mark] = {}
    values: dict[str, Mark] = {}
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        path = paths.get(id(node), "")
        if isinstance(node, yaml.ScalarNode):
            values.setdefault(path, _mark(node))
        elif isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                name = k.value if isinstance(k, yaml.ScalarNode) else "?"
                child = f"{path}.{name}" if path else str(name)
                keys.setdefault(child, _mark(k))
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                if not isinstance(v, yaml.ScalarNode):
                    values.setdefault(f"{path}[{i}]", _mark(v))
                stack.append(v)
    return Places(keys, values)


# The places of the files read so far by the load under way (source -> Places), or None.
_PLACES: contextvars.ContextVar[dict[str, Places] | None] = contextvars.ContextVar("trajschema_places", default=None)


def remember(source: str, places: Places) -> None:
    """Keep the places of a file just read, for the problems the load under way finds in it."""
    known = _PLACES.get()
    if known is not None:
        known[source] = places


def place(source: str, path: str, *, key: bool = False) -> Mark | None:
    """Where ``path`` is in ``source``, if a load under way read that file (see `Places.of`)."""
    known = _PLACES.get()
    places = known.get(source) if known is not None else None
    return places.of(path, key=key) if places is not None else None


def located(p: SchemaProblem) -> SchemaProblem:
    """``p`` with the line and column of its key path, when it has none yet and the file gives one."""
    if p.line is not None:
        return p
    mark = place(p.source, p.path)
    return p if mark is None else dataclasses.replace(p, line=mark[0], column=mark[1])


@contextlib.contextmanager
def reporting(errors: ErrorsMode = "all") -> Iterator[None]:
    """Run a load: the files it reads are located, and a problem leaves located (only the first
    with ``errors="first"``), as the error type it was raised as."""
    token = _PLACES.set({})
    try:
        yield
    except SchemaDefinitionError as exc:
        found = tuple(located(p) for p in exc.errors)
        found = found[:1] if errors == "first" else found
        if found == exc.errors:
            raise
        raise type(exc).of(found) from None
    finally:
        _PLACES.reset(token)


class Consequence(Exception):
    """A check that fails only because an earlier one did: nothing new to report."""


class Problems:
    """The problems of one stage of a load, collected unit by unit.

    With ``errors="first"`` nothing is collected: the first problem ends the load, as the
    same check in ``"all"`` mode reports it first.

    A unit that fails leaves nothing behind, so what it would have made is missing::

        problems = Problems("all")
        for name, v in items:
            with problems.each():
                out[name] = check(v)  # on a problem, out has no name: skip what uses it
        problems.raise_if_any()
    """

    def __init__(self, errors: ErrorsMode = "all", found: Iterable[SchemaProblem] = ()) -> None:
        self.errors = errors
        self.found: list[SchemaProblem] = list(found)
        self.error_type: type[SchemaDefinitionError] = SchemaDefinitionError

    @contextlib.contextmanager
    def each(self) -> Iterator[None]:
        """One independent unit: its problems are kept and the load goes on after it."""
        try:
            yield
        except Consequence:
            if not self.found:  # a consequence needs a cause, reported before it
                raise
        except SchemaDefinitionError as exc:
            if self.errors == "first":
                raise
            self.error_type = type(exc)
            self.found.extend(located(p) for p in exc.errors)

    def add(self, exc: SchemaDefinitionError) -> None:
        """Report ``exc`` (raised at once with ``errors="first"``)."""
        with self.each():
            raise exc

    def raise_if_any(self) -> None:
        if self.found:
            raise self.error_type.of(self.found)
