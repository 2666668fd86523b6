"""Reading a schema file strictly: bytes, YAML (no duplicate or merge keys, only string keys, bounded
nesting) and the parsed tree."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from trajschema.files.filetext import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_INT_CHARS,
    MAX_NODES,
    _text,
    _word,
    join_path,
    refuse,
)
from trajschema.files.problems import places_of, remember

# ---------------------------------------------------------------------------
# Reading YAML


class _YAMLProblem(Exception):
    """Raised inside the loader; turned into a SchemaDefinitionError with the file name.

    ``mark`` is the YAML mark of the node at fault (its line and column, 0-based).
    """

    def __init__(self, path: str, problem: str, mark: Any) -> None:
        super().__init__(path, problem)
        self.path, self.problem, self.mark = path, problem, mark


class _SchemaYAMLLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, refusing what it would otherwise accept quietly.

    * a key given twice in one mapping (PyYAML keeps the last one);
    * merge keys ``<<:``: they override silently, which is what duplicate keys are
      refused for, and YAML 1.2 dropped them (an alias ``*name`` reuses a whole entry);
    * keys that are not strings (``1:``, ``null:``, ``on:`` — YAML 1.1 reads
      ``on``/``off``/``yes``/``no`` as booleans);
    * nesting deeper than ``MAX_DEPTH`` (the composer recurses once per level);
    * integer literals longer than ``MAX_INT_CHARS`` and impossible dates (which would
      raise ``ValueError`` from inside the constructor).

    ``paths`` maps ``id(node)`` to the node's key path, for the messages; the caller
    fills it (`_node_paths`) between composing and constructing.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.paths: dict[int, str] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.depth >= MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise _YAMLProblem("", f"nested more than {MAX_DEPTH} levels deep; a schema needs 5", mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        path = self.paths.get(id(node), "")
        marks: dict[Any, Any] = {}
        for key_node, _ in node.value:
            mark = key_node.start_mark
            line = mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _YAMLProblem(
                    join_path(path, "<<"),
                    f"YAML merge keys (<<, line {line}) are not supported: they override keys silently; "
                    "write the entry out, or reuse a whole entry with an alias (*name)",
                    mark,
                )
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise _YAMLProblem(
                    path,
                    f"key {_text(key)} on line {line} is {_word(key)}, not a string; quote it if a name is meant "
                    "(YAML reads 1, null, true, on, off, yes and no as numbers, null and booleans)",
                    mark,
                )
            if key in marks:
                raise _YAMLProblem(
                    join_path(path, key),
                    f"key {key!r} is given twice ({_two_places(marks[key], mark)}); YAML would keep only the last",
                    mark,
                )
            marks[key] = mark
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        if len(node.value) > MAX_INT_CHARS:
            raise _YAMLProblem(
                self.paths.get(id(node), ""),
                f"an integer literal of {len(node.value)} characters (line {node.start_mark.line + 1}); "
                f"the limit is {MAX_INT_CHARS}",
                node.start_mark,
            )
        return super().construct_yaml_int(node)

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as exc:  # 2001-02-30
            raise _YAMLProblem(
                self.paths.get(id(node), ""), f"invalid date {node.value!r}: {exc}", node.start_mark
            ) from None


def _place(mark: Any) -> tuple[int, int]:
    """A YAML mark (0-based) as editors count: 1-based line and column."""
    return mark.line + 1, mark.column + 1


def _text_place(text: str, exc: Exception) -> tuple[int, int]:
    """Line and column of a reader error (it knows only the character offset)."""
    at = getattr(exc, "position", 0)
    line_start = text.rfind("\n", 0, at) + 1
    return text.count("\n", 0, at) + 1, at - line_start + 1


def _two_places(a: Any, b: Any) -> str:
    if a.line == b.line:  # a flow mapping: {pad: 0, pad: 1}
        return f"line {a.line + 1}, columns {a.column + 1} and {b.column + 1}"
    return f"lines {a.line + 1} and {b.line + 1}"


_SchemaYAMLLoader.add_constructor("tag:yaml.org,2002:int", _SchemaYAMLLoader.construct_yaml_int)
_SchemaYAMLLoader.add_constructor("tag:yaml.org,2002:timestamp", _SchemaYAMLLoader.construct_yaml_timestamp)


def _node_paths(root: yaml.Node) -> dict[int, str]:
    """The key path of every node, each visited once (aliases share nodes), in document order."""
    paths: dict[int, str] = {}
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in paths:
            continue
        paths[id(node)] = path
        if isinstance(node, yaml.MappingNode):
            children = [(v, join_path(path, k.value if isinstance(k, yaml.ScalarNode) else "?")) for k, v in node.value]
        elif isinstance(node, yaml.SequenceNode):
            children = [(v, f"{path}[{i}]") for i, v in enumerate(node.value)]
        else:
            continue
        stack.extend(reversed(children))
    return paths


def _parse_yaml(text: str, source: str) -> Any:
    loader = None
    try:
        loader = _SchemaYAMLLoader(text)  # the reader refuses control characters right away
        node = loader.get_single_node()
        if node is None:
            return None
        loader.paths = _node_paths(node)
        data = loader.construct_document(node)
        remember(source, places_of(node, loader.paths))
        return data
    except _YAMLProblem as p:
        refuse(source, p.path, p.problem, mark=_place(p.mark))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context
        context = f" ({exc.context})" if exc.problem and exc.context else ""
        refuse(source, "", f"invalid YAML: {what}{context}", mark=_place(mark) if mark else None)
    except yaml.YAMLError as exc:  # ReaderError: a control character
        refuse(source, "", f"invalid YAML: {str(exc).splitlines()[0]}", mark=_text_place(text, exc))
    finally:
        if loader is not None:
            loader.dispose()


# ---------------------------------------------------------------------------
# Reading a file: what is on the file system at a path, and its bytes

#: ``file_problem``'s answer for a path where nothing is, not even a symbolic link.
NOTHING = "nothing is there"
#: ... and for a directory.
IS_A_DIRECTORY = "is a directory, not a schema file"

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def os_problem(exc: OSError, path: Path) -> str:
    """Why ``path`` cannot be opened, as a schema-file message says it."""
    if exc.errno == errno.ELOOP:
        return "is a symbolic link that never reaches a file (too many levels of symbolic links)"
    if isinstance(exc, FileNotFoundError) and os.path.islink(path):
        try:
            target = os.readlink(path)
        except OSError:  # removed or replaced since: say what stat said
            target = "a path"
        return f"is a symbolic link to {target}, which does not exist"
    return f"cannot be read: {exc.strerror or exc}"


def _mode_problem(mode: int) -> str | None:
    """Why a file of this ``st_mode`` is not a schema file (``None`` for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return IS_A_DIRECTORY
    kind = next((word for test, word in _KINDS if test(mode)), "not a file")
    return f"is not a regular file ({kind})"


def file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read as a schema file, without opening it (``None``: a regular file).

    ``NOTHING`` when there is nothing at ``path`` (not even a dangling symbolic link): a
    missing file is not found rather than broken. A FIFO or a device is never opened, so
    looking never blocks.
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError) as exc:
        if not os.path.islink(path):
            return NOTHING
        return os_problem(exc, path)
    except OSError as exc:
        return os_problem(exc, path)
    except ValueError:  # a NUL byte in the name
        return NOTHING
    return _mode_problem(mode)


def read_text(path: Path) -> str:
    # Opened without blocking and checked on the open file: a FIFO put in the file's place
    # after the caller looked must not hang the reader, and a device is not read.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        refuse(str(path), "", IS_A_DIRECTORY)
    except OSError as exc:
        refuse(str(path), "", os_problem(exc, path))
    try:
        problem = _mode_problem(os.fstat(fd).st_mode)
        if problem:
            refuse(str(path), "", problem)
        with os.fdopen(fd, "rb") as fh:
            fd = -1
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:  # EIO, or a file that vanished under a network mount
        refuse(str(path), "", os_problem(exc, path))
    finally:
        if fd >= 0:
            os.close(fd)
    if len(raw) > MAX_FILE_BYTES:
        refuse(str(path), "", f"larger than {MAX_FILE_BYTES >> 20} MiB; a schema file is a few KiB")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        column = len(raw[line_start : exc.start].decode("utf-8", errors="replace")) + 1  # in characters
        refuse(
            str(path),
            "",
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} ({exc.reason}); schema files are UTF-8",
            mark=(raw.count(b"\n", 0, exc.start) + 1, column),
        )


def read_yaml(path: Path) -> Any:
    return _parse_yaml(read_text(path), str(path))


def check_tree(data: Any, source: str) -> None:
    """Refuse a parsed tree that contains itself, nests too deeply or expands too far.

    Aliases share objects, so a YAML file of a few lines can parse (cheaply) into a tree
    that contains itself (``a: &x [*x]``) or that is exponentially large once walked
    ("billion laughs"); validating either would recurse forever or run out of memory.
    This walk is iterative and stops at ``MAX_NODES`` values. It also refuses non-string
    keys, for mappings that did not come from YAML ([`schema_from_dict`][trajschema.schema_from_dict]).
    """
    stack: list[tuple[Any, str, tuple[int, ...]]] = [(data, "", ())]
    count = 0
    while stack:
        obj, path, chain = stack.pop()
        count += 1
        if count > MAX_NODES:
            refuse(
                source, "", f"expands to more than {MAX_NODES} values (aliases of aliases?); a schema needs hundreds"
            )
        if isinstance(obj, Mapping):
            for key in obj:
                if not isinstance(key, str):
                    refuse(source, path, f"key {_text(key)} is {_word(key)}, not a string")
            children = [(v, join_path(path, k)) for k, v in obj.items()]
        elif isinstance(obj, (list, tuple)):
            children = [(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        else:
            continue
        if id(obj) in chain:
            refuse(source, path, "contains itself (as a YAML alias inside its own anchor does: a: &x [*x])")
        if len(chain) >= MAX_DEPTH:
            refuse(source, path, f"nested more than {MAX_DEPTH} levels deep; a schema needs 5")
        chain = (*chain, id(obj))
        stack.extend((v, p, chain) for v, p in reversed(children))
