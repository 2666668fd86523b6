"""Finding, parsing, composing (``extends``) and compiling schema files.

Schema files are strict: anything malformed fails at load time with a
:class:`SchemaDefinitionError` naming the file, the key path and the problem — never a
Python or torch error, and never later at first use. Reading a file goes through four
gates, each of which refuses what the next one could not survive:

1. bytes: a regular file of at most ``_MAX_FILE_BYTES``, UTF-8;
2. YAML (:class:`_SchemaYAMLLoader`): no key given twice, no merge keys, string keys
   only, at most ``_MAX_DEPTH`` levels of nesting;
3. the parsed tree (:func:`_check_tree`): no structure that contains itself (an alias
   inside its own anchor) and at most ``_MAX_NODES`` values once aliases are expanded;
4. declarations (pydantic models and the ``_compile_*`` functions): every key, type,
   range, dim, dtype and pad fill.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from ._compile import _compile
from ._errors import SchemaNotFoundError
from ._filetext import _MAX_EXTENDS_DEPTH, _raise
from ._schema import Schema
from ._syntax import _decl, _FreeDimDecl, _SchemaDecl
from ._yaml import _read_yaml

__all__ = [
    "load_schema",
    "schema_for_architecture",
    "schema_from_dict",
    "schema_names",
    "schema_search_path",
]

#: Environment variable: extra schema directories (``os.pathsep``-separated),
#: searched before the packaged ones so a project can add or override families.
ENV_VAR = "TRAJSCHEMA_PATH"

# ---------------------------------------------------------------------------
# Search path


def _packaged_dir() -> Path:
    # In a wheel the schemas sit inside the package; in a source checkout or an
    # editable install they are the repository's top-level `schemas/`.
    inside = Path(__file__).resolve().parent / "schemas"
    if inside.is_dir():
        return inside
    return Path(__file__).resolve().parent.parent / "schemas"


def schema_search_path() -> list[Path]:
    """The directories searched for schema names: ``TRAJSCHEMA_PATH`` entries, then the packaged ones."""
    extra = [Path(p) for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p.strip()]
    return [*extra, _packaged_dir()]


def _files_by_name(dirs: list[Path]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for d in dirs:
        if not d.is_dir():
            continue
        for p in sorted(d.iterdir()):
            if p.suffix in (".yaml", ".yml") and p.is_file():
                found.setdefault(p.stem, p)
    return found


def schema_names() -> list[str]:
    """Names of all schemas on the search path (``TRAJSCHEMA_PATH`` and packaged), sorted.

    Examples:
        >>> "text" in ts.schema_names()
        True
    """
    return sorted(_files_by_name(schema_search_path()))


def _not_found(name: str, known: list[str], what: str = "schema") -> SchemaNotFoundError:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return SchemaNotFoundError(
        f"no {what} {name!r}{hint} known: {', '.join(known) or '(none)'} "
        f"(searched {', '.join(str(d) for d in schema_search_path())}; "
        f"add directories with {ENV_VAR})"
    )


# ---------------------------------------------------------------------------
# Public loaders


def load_schema(name_or_path: str | os.PathLike[str]) -> Schema:
    """Load a packaged schema by name, or a schema file by path.

    Examples:
        >>> ts.load_schema("vlm_mrope").dims["rope_rows"].size
        4

    Args:
        name_or_path: a name from :func:`schema_names`, or a path to a ``.yaml`` file
            (its ``extends`` are looked up beside it first, then on the search path).

    Raises:
        SchemaNotFoundError: no such name or file.
        SchemaDefinitionError: the file (or a parent) is malformed.
    """
    text = os.fspath(name_or_path)
    is_path = isinstance(name_or_path, os.PathLike) or text.endswith((".yaml", ".yml")) or os.sep in text
    if is_path:
        path = Path(text)
        if path.is_dir():
            _raise(str(path), "", "is a directory, not a schema file")
        if not path.is_file():
            if path.exists():  # a FIFO or a device: reading it could block forever
                _raise(str(path), "", "is not a regular file")
            raise SchemaNotFoundError(f"no schema file at {text!r}")
        return _load_file(path.resolve())
    files = _files_by_name(schema_search_path())
    if text not in files:
        raise _not_found(text, sorted(files))
    return _load_file(files[text].resolve())


def schema_for_architecture(architecture: str) -> Schema:
    """The schema whose ``architectures:`` lists a Hugging Face architecture name.

    Examples:
        >>> ts.schema_for_architecture("Qwen2VLForConditionalGeneration").name
        'vlm_mrope'

    Raises:
        SchemaNotFoundError: no schema (or more than one) declares it.
        SchemaDefinitionError: a file on the search path is malformed.
    """
    hits: list[str] = []
    known: list[str] = []
    for name, path in _files_by_name(schema_search_path()).items():
        archs = _decl(_read_yaml(path), str(path)).architectures
        known.extend(archs)
        if architecture in archs:
            hits.append(name)
    if len(hits) > 1:
        raise SchemaNotFoundError(f"architecture {architecture!r} is claimed by several schemas: {', '.join(hits)}")
    if not hits:
        raise _not_found(architecture, sorted(set(known)), what="schema for architecture")
    return load_schema(hits[0])


def schema_from_dict(data: Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None) -> Schema:
    """Compile a schema from an already-parsed mapping (same keys as a YAML file).

    ``extends`` names are looked up in ``base_dir`` first, then on the search path.
    """
    chain = _Chain(base_dir=Path(base_dir) if base_dir else None)
    return chain.compile(data, "<mapping>", None)


# ---------------------------------------------------------------------------
# Reading and composing


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


# path -> (schema, the search path it was resolved on, (file, mtime) of every file used).
# Schemas are immutable, so a hit is shared; editing the file or any parent reloads it.
_CACHE: dict[Path, tuple[Schema, tuple[Path, ...], tuple[tuple[Path, float | None], ...]]] = {}


def _load_file(path: Path) -> Schema:
    search = tuple(schema_search_path())
    hit = _CACHE.get(path)
    if hit is not None and hit[1] == search and all(_mtime(p) == m for p, m in hit[2]):
        return hit[0]
    chain = _Chain(base_dir=path.parent)
    stamp = _mtime(path)
    schema = chain.compile(_read_yaml(path), str(path), path)
    used = ((path, stamp), *((Path(src), _mtime(Path(src))) for _, src in chain.decls.values()))
    _CACHE[path] = (schema, search, used)
    return schema


class _Chain:
    """Resolves ``extends`` (C3 order) for one load, detecting cycles.

    Schemas are known by name, and a parent is found by its file name, so a parent's
    ``name:`` must be its file name; a schema is identified by its file too, so a file
    that reaches itself under another name is a cycle, and two files of one name a clash.
    """

    def __init__(self, base_dir: Path | None) -> None:
        self.base_dir = base_dir
        self.decls: dict[str, tuple[_SchemaDecl, str]] = {}
        self.loading: list[tuple[str, Path | None]] = []
        self.mro: dict[str, list[str]] = {}

    def _find(self, name: str, child_source: str, child_dir: Path | None) -> Path:
        files = _files_by_name(([child_dir] if child_dir else []) + schema_search_path())
        if name not in files:
            close = difflib.get_close_matches(name, sorted(files), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            _raise(child_source, "extends", f"unknown parent schema {name!r}{hint}")
        return files[name].resolve()

    def _parent(self, name: str, child_source: str, child_dir: Path | None) -> tuple[_SchemaDecl, str]:
        path = self._find(name, child_source, child_dir)
        for i, (n, p) in enumerate(self.loading):
            if p == path or n == name:
                self._cycle(i, name, path, child_source)
        if name in self.decls:
            if self.decls[name][1] != str(path):  # found beside another child: another file
                _raise(child_source, "extends", f"two schemas are named {name!r}: {self.decls[name][1]} and {path}")
            return self.decls[name]
        decl = _decl(_read_yaml(path), str(path))
        if decl.name != name:
            _raise(
                str(path),
                "name",
                f"this file is found as {name!r} (its file name) but declares name {decl.name!r}; "
                "a parent's name must be its file name",
            )
        self.decls[name] = (decl, str(path))
        self._linearize(decl, str(path), path)
        return decl, str(path)

    def _cycle(self, i: int, name: str, path: Path, child_source: str) -> NoReturn:
        n, p = self.loading[i]
        cycle = " -> ".join([*(m for m, _ in self.loading[i:]), name])
        if p == path:
            note = "" if n == name else f" ({path.name}, found as {name!r}, is the file of {n!r})"
            _raise(child_source, "extends", f"cycle in extends: {cycle}{note}")
        where = f"{p}" if p else "the mapping being compiled"
        _raise(child_source, "extends", f"two schemas are named {name!r}: {where} and {path}, which it extends")

    def _linearize(self, decl: _SchemaDecl, source: str, path: Path | None) -> list[str]:
        if decl.name in self.mro:
            return self.mro[decl.name]
        if len(self.loading) >= _MAX_EXTENDS_DEPTH:
            _raise(source, "extends", f"extends chains more than {_MAX_EXTENDS_DEPTH} schemas deep")
        here = path.parent if path else self.base_dir
        self.loading.append((decl.name, path))
        try:
            parents = [self._parent(p, source, here) for p in decl.extends]
            seqs = [self._linearize(p, s, Path(s)) for p, s in parents]
            mro = [decl.name, *_c3_merge([*seqs, list(decl.extends)], source)]
        finally:
            self.loading.pop()
        self.mro[decl.name] = mro
        return mro

    def compile(self, data: Any, source: str, path: Path | None) -> Schema:
        decl = _decl(data, source)
        mro = self._linearize(decl, source, path)
        by_name = {decl.name: (decl, source), **{n: self.decls[n] for n in mro[1:]}}
        ancestors = {n: set(self.mro[n][1:]) for n in mro}
        merged: dict[str, dict[str, tuple[Any, str]]] = {}
        for section in ("dims", "fields", "tags", "padding"):
            merged[section] = _merge_section(section, mro, by_name, ancestors, source)
        _drop_outdated_padding(merged, [by_name[n][1] for n in mro])
        extra = next((e for n in mro if (e := by_name[n][0].extra)), "allow")
        return _compile(decl, source, mro, merged, extra)


def _c3_merge(seqs: list[list[str]], source: str) -> list[str]:
    out: list[str] = []
    seqs = [list(s) for s in seqs if s]
    while seqs:
        for seq in seqs:
            head = seq[0]
            if not any(head in s[1:] for s in seqs):
                break
        else:
            _raise(source, "extends", "parents cannot be ordered consistently (no C3 linearization)")
        out.append(head)
        seqs = [[x for x in s if x != head] for s in seqs]
        seqs = [s for s in seqs if s]
    return out


def _drop_outdated_padding(merged: dict[str, dict[str, tuple[Any, str]]], sources: list[str]) -> None:
    """A padding size belongs to the free dim it sizes: a schema that redeclares an inherited
    free dim as fixed or derived replaces it whole, inherited padding size included (a size
    declared as new as the dim, or newer, still has to be a free dim's)."""
    rank = {src: i for i, src in reversed(list(enumerate(sources)))}
    for name, (_, src) in list(merged["padding"].items()):
        dim = merged["dims"].get(name)
        if dim is not None and not isinstance(dim[0], _FreeDimDecl) and rank[dim[1]] < rank[src]:
            del merged["padding"][name]


_WHAT = {"dims": "dim", "fields": "field", "tags": "tag", "padding": "padding size"}


def _merge_section(section, mro, by_name, ancestors, source) -> dict[str, tuple[Any, str]]:
    """For each key, the declaration of the first schema in C3 order that declares it.

    Two unrelated parents that both declare a key themselves, differently, conflict
    unless the child declares it.
    """
    child = mro[0]
    keys: dict[str, None] = {}
    for n in reversed(mro):  # base keys first, so declaration order reads naturally
        keys.update(dict.fromkeys(getattr(by_name[n][0], section)))
    out: dict[str, tuple[Any, str]] = {}
    for key in keys:
        declarers = [n for n in mro if key in getattr(by_name[n][0], section)]
        if declarers[0] != child:
            # Keep only the most derived declarers: drop any that another declarer extends.
            leaves = [d for d in declarers if not any(d in ancestors[o] for o in declarers if o != d)]
            values = {repr(getattr(by_name[d][0], section)[key]) for d in leaves}
            if len(values) > 1:
                _raise(
                    source,
                    f"{section}.{key}",
                    f"parents {' and '.join(leaves)} declare {_WHAT[section]} {key!r} differently; "
                    f"declare it in {child!r} to choose",
                )
        owner = declarers[0]
        out[key] = (getattr(by_name[owner][0], section)[key], by_name[owner][1])
    return out
