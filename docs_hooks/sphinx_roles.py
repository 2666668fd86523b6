"""Sphinx cross-reference roles in docstrings, rewritten in mkdocstrings' syntax.

mkdocstrings reads docstrings as Markdown, so a Sphinx role such as
``:func:`trajschema.load_schema` `` shows on the API page as the literal text
`:func:` followed by a code span. This module rewrites each role into what
mkdocstrings understands:

- a cross-reference, ``[`load_schema`][trajschema.load_schema]``, when the target is an
  object the API page documents (a `::: name` block of the `docs/api/` pages for a public name,
  or a member of such a class that has a docstring of its own);
- a plain code span, `` `load_schema` ``, for any other target (an internal module, a
  private helper, the standard library), so the strict build never meets a link to an
  anchor that does not exist.

It reads docstrings (every string statement, attribute docstrings included) and `#:`
doc comments. Inside them it leaves fenced code blocks, doctest lines and code spans
alone, so a docstring may still show a role as an example.

A target is looked up the way Sphinx looks it up: first as a member of the class the
docstring belongs to (``:meth:`violations` `` inside `Schema`), then through the names
of the module the docstring is in (``:func:`install` `` in `trajschema.verl`) or as a
full dotted path (``:func:`trajschema.contract.contract.is_padding` `` links to the
public `trajschema.is_padding`, the same object), and only when its first name means
nothing there, as a name of `trajschema`, `trajschema.verl` or `trajschema.testing`
(when exactly one of them has it). A target that starts with a dot (``:meth:`.padding` ``)
is searched for among every documented object ending with it, and links only when
exactly one does (or one of the docstring's own class).

The text shown: the last name of the target for a `~` prefix
(``:meth:`~trajschema.Schema.validate` `` shows `validate`); for a full path, the
documented name it resolved to without its public module (`trajschema.Schema.padding`
shows `Schema.padding`); the title of an explicit ``:func:`title <target>` `` role;
else the target as written. A `!` prefix (Sphinx's "do not link") gives a code span.

Only modules of the `trajschema` package are imported to look a name up; any other
module counts only if it is imported already, so a docstring naming a module cannot
make the rewriter run it.

Command line (from the repository root):

```text
python -m docs_hooks.sphinx_roles trajschema/          # list the roles; exit 1 if there are any
python -m docs_hooks.sphinx_roles --fix trajschema/    # rewrite them in place
```
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import importlib
import inspect
import io
import re
import sys
import tokenize
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from docs_hooks import api_page

#: The Python roles rewritten, written with or without the `py:` domain (`:py:func:`).
ROLES = ("func", "meth", "class", "attr", "data", "exc", "mod", "obj", "const")


#: The only package whose modules are imported to resolve a name.
IMPORTABLE = "trajschema"

# A role (not glued to a word before it), or a run of backticks that opens a code span.
_TOKEN = re.compile(r"(?<![\w`]):(?:py:)?(?P<role>" + "|".join(ROLES) + r"):`(?P<body>[^`]+)`|(?P<ticks>`+)")
_TITLED = re.compile(r"(?P<title>.*\S)\s*<(?P<target>[^<>]+)>", re.S)
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_FENCE = re.compile(r"[ \t]*(?P<fence>`{3,}|~{3,})")
_MISSING = object()


@dataclasses.dataclass(frozen=True)
class Context:
    """Where a docstring is: its module's dotted name and the qualified name of its class, if any."""

    module: str | None = None
    cls: str | None = None


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """One role found: where (1-based line in its file), the role as written, what replaces it."""

    line: int
    role: str
    replacement: str
    target: str | None  # the documented object it links to; None for a plain code span


# -- the documented objects ---------------------------------------------------------------------


def _own_docstring(value: object) -> bool:
    """Whether a class member has a docstring of its own (a method, property or cached property)."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, (property, functools.cached_property)) or inspect.isfunction(value):
        return bool(getattr(value, "__doc__", None))
    return False


def documented_objects(api_markdown: str | None = None) -> dict[str, object]:
    """Every object the API page renders with an anchor, by its dotted path there.

    The page's `:::` blocks that name a public name, and for a class the members defined
    in its own body (not inherited) whose name has no leading underscore and which have a
    docstring: mkdocstrings renders those and no others.
    """
    text = api_page.all_api_markdown() if api_markdown is None else api_markdown
    public = set(api_page.public_names())
    found: dict[str, object] = {}
    for path in api_page.documented_names(text):
        if path not in public:
            continue
        module, _, name = path.rpartition(".")
        obj = getattr(importlib.import_module(module), name)
        found[path] = obj
        if inspect.isclass(obj):
            for member, value in vars(obj).items():
                if not member.startswith("_") and _own_docstring(value):
                    found[f"{path}.{member}"] = value
    return found


# -- resolving a target -----------------------------------------------------------------------------


class Resolver:
    """Finds the documented object a role's target means, in the context of its docstring."""

    def __init__(self, documented: Mapping[str, object]) -> None:
        self.documented = dict(documented)
        self._by_id: dict[int, list[str]] = {}
        for path, obj in self.documented.items():
            self._by_id.setdefault(id(obj), []).append(path)

    @classmethod
    def from_api_page(cls) -> Resolver:
        return cls(documented_objects())

    def resolve(self, target: str, context: Context = Context()) -> str | None:
        """The dotted path of the documented object ``target`` names, or None."""
        if target.startswith("."):
            return self._by_suffix(target[1:], context)
        if not _DOTTED.fullmatch(target):
            return None
        if context.cls is not None:
            owner = self._path_of(self._lookup(context.cls, context.module), context.cls.rpartition(".")[2])
            if owner is not None and f"{owner}.{target}" in self.documented:
                return f"{owner}.{target}"
        parts = target.split(".")
        head = self._lookup(parts[0], context.module)
        if head is not _MISSING:
            return self._through(head, parts)
        matches = [f"{m}.{target}" for m in api_page.PUBLIC_MODULES if f"{m}.{target}" in self.documented]
        return matches[0] if len(matches) == 1 else None

    def _through(self, head: object, parts: Sequence[str]) -> str | None:
        """The path of ``parts`` once its first name is known to mean ``head``: the longest
        prefix that is a documented object, then the rest as its members."""
        chain = [head]
        for part in parts[1:]:
            nxt = self._attribute(chain[-1], part)
            if nxt is _MISSING:
                break
            chain.append(nxt)
        for i in range(len(chain), 0, -1):
            base = self._path_of(chain[i - 1], parts[i - 1])
            if base is not None:
                full = ".".join([base, *parts[i:]])
                return full if full in self.documented else None
        return None

    def _by_suffix(self, name: str, context: Context) -> str | None:
        if not _DOTTED.fullmatch(name):
            return None
        matches = [p for p in self.documented if p == name or p.endswith("." + name)]
        if len(matches) > 1 and context.cls is not None:
            # Sphinx prefers the docstring's own class, then anything.
            owner = self._path_of(self._lookup(context.cls, context.module), context.cls.rpartition(".")[2])
            matches = [p for p in matches if owner is not None and p.startswith(owner + ".")] or matches
        return matches[0] if len(matches) == 1 else None

    def _path_of(self, obj: object, name: str) -> str | None:
        """The documented path of ``obj``; a value that is not a class, function or module
        must also carry the documented name (two constants can be one object)."""
        if obj is _MISSING:
            return None
        paths = self._by_id.get(id(obj), [])
        if inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj):
            return paths[0] if paths else None
        # A constant documented under two names (an alias) is found by the name used.
        return next((p for p in paths if p.rpartition(".")[2] == name), None)

    def _lookup(self, dotted: str, module: str | None) -> object:
        """``dotted`` read in ``module``'s namespace, else as a module path; _MISSING if neither."""
        parts = dotted.split(".")
        obj = _MISSING
        namespace = _module(module) if module is not None else None
        if namespace is not None:
            obj = self._attribute(namespace, parts[0])
        if obj is _MISSING:
            obj = _module(parts[0])
        for part in parts[1:]:
            if obj is _MISSING:
                break
            obj = self._attribute(obj, part)
        return obj if obj is not None else _MISSING

    @staticmethod
    def _attribute(obj: object, name: str) -> object:
        try:
            return getattr(obj, name)
        except (AttributeError, ImportError):
            pass
        if inspect.ismodule(obj):
            sub = _module(f"{obj.__name__}.{name}")
            if sub is not None:
                return sub
        return _MISSING


def _module(name: str) -> object | None:
    """The module ``name``: imported if it belongs to `trajschema` (never a `__main__`), else
    only if some code imported it already."""
    if name in sys.modules:
        return sys.modules[name]
    if name.split(".")[0] != IMPORTABLE or name.rpartition(".")[2] == "__main__":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# -- rewriting text ---------------------------------------------------------------------------------


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def rewrite_role(body: str, resolve: Callable[[str], str | None]) -> tuple[str, str | None]:
    """The Markdown for one role whose text between the backticks is ``body``, and its link target.

    >>> rewrite_role("~pkg.mod.name", lambda t: None)
    ('`name`', None)
    >>> rewrite_role("pkg.Thing", lambda t: "pkg.Thing")
    ('[`pkg.Thing`][pkg.Thing]', 'pkg.Thing')
    """
    text = " ".join(body.split())
    title = None
    if (titled := _TITLED.fullmatch(text)) is not None:
        title, text = titled["title"], titled["target"].strip()
    link = not text.startswith("!")
    text = text.removeprefix("!")
    short = text.startswith("~")
    text = text.removeprefix("~")
    target = resolve(text) if link else None
    name = text.lstrip(".")
    if title is not None:
        shown = title
    elif short:
        shown = name.rpartition(".")[2]
    else:
        # A full path shows as the documented name it resolved to, without its public module.
        shown = _unprefixed(target) if target is not None and name.startswith(IMPORTABLE + ".") else name
    shown = shown or " ".join(body.split())  # `~` or `.` alone: show what was written
    return (f"[{_code(shown)}][{target}]", target) if target is not None else (_code(shown), None)


def _unprefixed(name: str) -> str:
    """A documented path without the public module it starts with (the longest):
    `trajschema.verl.install` -> `install`, `trajschema.Schema.padding` -> `Schema.padding`."""
    for module in sorted(api_page.PUBLIC_MODULES, key=len, reverse=True):
        if name.startswith(module + "."):
            return name[len(module) + 1 :]
    return name


def _prose_and_code(text: str) -> list[tuple[str, bool]]:
    """``text`` cut into pieces, each (piece, is_code): fenced blocks and doctest blocks are code."""
    pieces: list[tuple[str, bool]] = []
    fence = ""
    doctest = False
    for line in re.findall(r"[^\n]*\n|[^\n]+", text):
        stripped = line.strip()
        if fence:
            code = True
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                fence = ""
        elif (opening := _FENCE.match(line)) is not None:
            code, fence = True, opening["fence"]
        else:
            doctest = stripped.startswith(">>>") or (doctest and bool(stripped))
            code = doctest
        if pieces and pieces[-1][1] == code:
            pieces[-1] = (pieces[-1][0] + line, code)
        else:
            pieces.append((line, code))
    return pieces


def _closing(text: str, start: int, ticks: int) -> int | None:
    """The end of the first run of exactly ``ticks`` backticks from ``start`` (a code span's close)."""
    for run in re.finditer(r"`+", text[start:]):
        if len(run[0]) == ticks:
            return start + run.end()
    return None


def _rewrite_prose(
    text: str, resolve: Callable[[str], str | None]
) -> tuple[str, list[tuple[int, str, str, str | None]]]:
    out: list[str] = []
    found: list[tuple[int, str, str, str | None]] = []  # (offset, role, replacement, target)
    pos = 0
    while (m := _TOKEN.search(text, pos)) is not None:
        if m["ticks"]:
            # A code span is left as it is; an unmatched run of backticks is literal text.
            end = _closing(text, m.end(), len(m["ticks"])) or m.end()
            out.append(text[pos:end])
            pos = end
            continue
        replacement, target = rewrite_role(m["body"], resolve)
        out += [text[pos : m.start()], replacement]
        found.append((m.start(), m[0], replacement, target))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out), found


def rewrite_text(text: str, resolve: Callable[[str], str | None]) -> tuple[str, list[Rewrite]]:
    """``text`` with its roles rewritten, and what was rewritten (lines counted from 1 in ``text``).

    >>> rewrite_text(":func:`f` and ``:func:`g` ``", lambda t: None)[0]
    '`f` and ``:func:`g` ``'
    """
    out: list[str] = []
    found: list[Rewrite] = []
    line = 1
    for piece, is_code in _prose_and_code(text):
        if is_code:
            out.append(piece)
        else:
            new, roles = _rewrite_prose(piece, resolve)
            out.append(new)
            found += [Rewrite(line + piece.count("\n", 0, at), role, rep, tgt) for at, role, rep, tgt in roles]
        line += piece.count("\n")
    return "".join(out), found


# -- rewriting Python files -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Span:
    """A docstring or `#:` comment: character offsets in the source, its first line, its context."""

    start: int
    end: int
    line: int
    context: Context


def _text_spans(source: str, module: str | None) -> list[_Span]:
    """Every string statement (docstrings, attribute docstrings) and `#:` comment of ``source``."""
    tree = ast.parse(source)
    lines = source.split("\n")
    starts = [0, *(m.end() for m in re.finditer("\n", source))]

    def offset(lineno: int, col: int) -> int:
        # ast counts columns in UTF-8 bytes; the source is text.
        return starts[lineno - 1] + len(lines[lineno - 1].encode()[:col].decode())

    spans: list[_Span] = []

    def visit(node: ast.AST, cls: str | None, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if (
                isinstance(child, ast.Expr)
                and isinstance(child.value, ast.Constant)
                and isinstance(child.value.value, str)
            ):
                value = child.value
                assert value.end_lineno is not None and value.end_col_offset is not None
                spans.append(
                    _Span(
                        offset(value.lineno, value.col_offset),
                        offset(value.end_lineno, value.end_col_offset),
                        value.lineno,
                        Context(module, cls),
                    )
                )
            if isinstance(child, ast.ClassDef):
                # A class defined inside a function cannot be looked up by name.
                visit(child, None if local else (f"{cls}.{child.name}" if cls else child.name), local)
            else:
                visit(child, cls, local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(tree, None, False)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and token.string.startswith("#:"):
            start = starts[token.start[0] - 1] + token.start[1]
            spans.append(_Span(start, start + len(token.string), token.start[0], Context(module)))
    return sorted(spans, key=lambda s: s.start)


def rewrite_source(source: str, module: str | None, resolver: Resolver) -> tuple[str, list[Rewrite]]:
    """``source`` (a Python module named ``module``) with the roles of its docstrings and `#:`
    comments rewritten, and what was rewritten (lines of ``source``). Raises SyntaxError when
    ``source`` is not Python."""
    out: list[str] = []
    found: list[Rewrite] = []
    pos = 0
    for span in _text_spans(source, module):
        new, roles = rewrite_text(
            source[span.start : span.end], functools.partial(resolver.resolve, context=span.context)
        )
        out += [source[pos : span.start], new]
        found += [dataclasses.replace(r, line=span.line + r.line - 1) for r in roles]
        pos = span.end
    out.append(source[pos:])
    return "".join(out), found


def module_name(path: Path) -> str:
    """The dotted module name of a Python file, from the packages (folders with `__init__.py`) around it."""
    path = path.resolve()
    parts = [] if path.stem == "__init__" else [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return ".".join(parts) or path.stem


def python_files(paths: Iterable[Path]) -> list[Path]:
    """The `.py` files of ``paths`` (folders are searched recursively), each once, in order."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"{path}: no such file or folder")
    return list(dict.fromkeys(files))


def _rewrite_file(path: Path, resolver: Resolver) -> tuple[bytes, list[Rewrite]]:
    """The new bytes of ``path`` and its rewrites; ValueError naming the file if it cannot be read."""
    raw = path.read_bytes()
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    bom = "\ufeff" if source.startswith("\ufeff") else ""
    try:
        new, found = rewrite_source(source.removeprefix(bom), module_name(path), resolver)
        ast.parse(new)  # only text inside strings and comments changed; make sure of it
    except (SyntaxError, tokenize.TokenError) as e:
        raise ValueError(f"{path}: not Python that parses ({e})") from None
    return (bom + new).encode("utf-8"), found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m docs_hooks.sphinx_roles",
        description="List (or with --fix, rewrite) the Sphinx roles in the docstrings of Python files.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="Python files or folders")
    parser.add_argument("--fix", action="store_true", help="rewrite the files in place")
    args = parser.parse_args(argv)
    try:
        files = python_files(args.paths)
        resolver = Resolver.from_api_page()
        # Every file is rewritten in memory first: a file that fails leaves every file unwritten.
        results = {path: _rewrite_file(path, resolver) for path in files}
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ImportError as e:  # a public module needs what is not installed (the strategies need hypothesis)
        print(f"error: cannot import what the API page documents: {e}", file=sys.stderr)
        return 2
    count = 0
    for path, (new, found) in results.items():
        for r in found:
            print(f"{path}:{r.line}: {' '.join(r.role.split())} -> {r.replacement}")
        count += len(found)
        if args.fix and found:
            path.write_bytes(new)
    linked = sum(r.target is not None for _, found in results.values() for r in found)
    verb = "rewrote" if args.fix else "found"
    touched = sum(bool(found) for _, found in results.values())
    print(
        f"{verb} {count} roles in {touched} of {len(files)} files ({linked} as links, {count - linked} as code spans)"
    )
    return 1 if count and not args.fix else 0


if __name__ == "__main__":
    raise SystemExit(main())
