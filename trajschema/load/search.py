"""Finding, parsing, composing (``extends``) and compiling schema files.

Schema files are strict: anything malformed fails at load time with a
[`SchemaDefinitionError`][trajschema.SchemaDefinitionError] naming the file, the key path and the problem — never a
Python or torch error, and never later at first use. Reading a file goes through four
gates, each of which refuses what the next one could not survive:

1. bytes: a regular file of at most ``MAX_FILE_BYTES``, UTF-8;
2. YAML (`_SchemaYAMLLoader`): no key given twice, no merge keys, string keys
   only, at most ``MAX_DEPTH`` levels of nesting;
3. the parsed tree (`check_tree`): no structure that contains itself (an alias
   inside its own anchor) and at most ``MAX_NODES`` values once aliases are expanded;
4. declarations (pydantic models and the ``_compile_*`` functions): every key, type,
   range, dim, dtype and pad fill.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from trajschema.core import SchemaDefinitionError, SchemaNotFoundError, describe_value, did_you_mean
from trajschema.files import (
    ENV_VAR,
    MAX_EXTENDS_DEPTH,
    NOTHING,
    PATH_SHOWN,
    ErrorsMode,
    Found,
    check_errors_mode,
    file_problem,
    read_yaml,
    readable,
    refuse,
    reporting,
    schema_search_path,
    search_path_files,
    shown_name,
)
from trajschema.load.compile import _compile
from trajschema.load.config import config_architectures, pin_config_dims, read_model_config
from trajschema.load.syntax import _decl, _FreeDimDecl, _SchemaDecl
from trajschema.schema import Schema

__all__ = [
    "load_found",
    "load_schema",
    "resolve_schema",
    "schema_for_architecture",
    "schema_for_config",
    "schema_from_dict",
    "schema_names",
]


def schema_names() -> list[str]:
    """Names of all schemas on the search path (``TRAJSCHEMA_PATH`` and packaged), sorted.

    A file that cannot be read or does not load is listed too (`trajschema list` shows why).

    Examples:
        >>> "text" in ts.schema_names()
        True
    """
    return sorted(search_path_files(schema_search_path()).files)


def _not_found(name: str, known: list[str], what: str = "schema", note: str = "") -> SchemaNotFoundError:
    hint = did_you_mean(name, known)
    return SchemaNotFoundError(
        f"no {what} {shown_name(name)}{hint} known: {', '.join(known) or '(none)'} "
        f"(searched {', '.join(str(d) for d in schema_search_path())}{note}; "
        f"add directories with {ENV_VAR})"
    )


# ---------------------------------------------------------------------------
# Public loaders


def load_schema(name_or_path: str | os.PathLike[str], *, errors: ErrorsMode = "all") -> Schema:
    """Load a packaged schema by name, or a schema file by path.

    Examples:
        >>> ts.load_schema("vlm_mrope").dims["rope_rows"].size
        4

    A malformed file is reported whole, as pydantic reports a model: every problem of the
    file that does not follow from another, in one `SchemaDefinitionError` (its
    ``errors``; ``str()`` lists them one a line, under a header with the count):

        >>> bad = {"name": "mine", "fields": {"a": {"kind": "int", "pad": "eso"}, "b": {"kind": "strr", "pad": 0}}}
        >>> try:
        ...     ts.schema_from_dict(bad)
        ... except ts.SchemaDefinitionError as exc:
        ...     for p in exc.errors:
        ...         print(f"{p.path}: {p.problem.split(';')[0]}")
        fields.a.pad: unknown pad rule 'eso'
        fields.b.kind: unknown kind 'strr'

    From a file, each problem also has the ``line`` and ``column`` of the key or value it
    is about, and ``str()`` shows them as editors do, ``mine.yaml:8:48: fields.a.pad: ...``.

    Args:
        name_or_path: a name from `schema_names`, or a path to a ``.yaml`` file (its
            ``extends`` are looked up beside it first, then on the search path).
        errors: ``"all"`` (the default) reports every problem found in one pass;
            ``"first"`` stops at the first one, which is the first ``"all"`` reports.
            Problems of the YAML itself (syntax, a key given twice, aliases that expand
            too far) end the reading at once in both modes.

    A file found by name must declare that name (``name:`` is its file name without
    ``.yaml``): ``my_vlm.yaml`` that says ``name: other`` would be listed as ``my_vlm``
    and shown as ``other``, and ``other`` could not be loaded. A file loaded by path may
    declare any name.

    Raises:
        SchemaNotFoundError: no such name or file (a long name is shown cut, with its length).
        SchemaDefinitionError: the file (or a parent) is malformed or cannot be read (a
            dangling or looping symbolic link, a FIFO, a device, no permission), or a file
            found by name declares another name, naming the file. A file of that name that
            cannot be read is not skipped for one further down the search path: it is the
            one asked for.
        TypeError: ``name_or_path`` is neither a string nor a path, or ``errors`` is no string.
        ValueError: ``errors`` is neither ``"all"`` nor ``"first"``.
    """
    errors = check_errors_mode(errors)
    text = _text_of(name_or_path)
    if text is None:
        raise TypeError(f"name_or_path must be a schema name or a path, found {type(name_or_path).__name__}")
    is_path = isinstance(name_or_path, os.PathLike) or text.endswith((".yaml", ".yml")) or os.sep in text
    if is_path:
        return _load_path(text, errors)
    hit = search_path_files(schema_search_path(), name=text).files.get(text)
    if hit is None:
        search = search_path_files(schema_search_path())
        raise _not_found(text, sorted(search.files), note=search.unlisted_note())
    return load_found(text, hit, errors=errors)


def _text_of(name_or_path: Any) -> str | None:
    """The text of a name or a path (``None`` for anything else, a bytes path or a failing ``__fspath__``)."""
    if isinstance(name_or_path, str):
        return name_or_path
    if not isinstance(name_or_path, os.PathLike):
        return None
    try:
        text = os.fspath(name_or_path)
    except Exception:  # the object's own __fspath__ failed: it is no path
        return None
    return text if isinstance(text, str) else None


def _load_path(text: str, errors: ErrorsMode) -> Schema:
    path = Path(text)
    problem = file_problem(path)  # a FIFO or a device is never opened: reading it could block forever
    if problem == NOTHING:
        raise SchemaNotFoundError(f"no schema file at {shown_name(text, PATH_SHOWN)}")
    if problem is not None and _too_long(text):  # no file can be there; do not echo the whole path
        raise SchemaNotFoundError(f"no schema file at {shown_name(text)}: {os.strerror(errno.ENAMETOOLONG)}")
    return _load_file(readable(Found(path, problem)), errors)


def _too_long(text: str) -> bool:
    try:
        os.stat(text)
    except OSError as exc:
        return exc.errno == errno.ENAMETOOLONG
    except ValueError:  # a NUL byte
        return False
    return False


def load_found(name: str, hit: Found, *, errors: ErrorsMode = "all") -> Schema:
    """The schema of a file the search path holds under ``name``, which it must declare.

    ``errors`` is `load_schema`'s: every problem of the file, or the first.

    Raises:
        SchemaDefinitionError: the file cannot be read or does not load, or its ``name:``
            is not ``name`` (naming the file, its ``name:`` and its file name).
    """
    schema = _load_file(readable(hit), errors)
    if schema.name != name:
        refuse(
            str(hit.path),
            "name",
            f"this file is found as {name!r} (its file name) but declares name {shown_name(schema.name)}; "
            "a schema found by name must declare its file name (rename the file or its name:, "
            "or load it by path)",
        )
    return schema


def resolve_schema(schema_or_name: Any, *, argument: str = "schema") -> Schema:
    """A `Schema` as it is, a schema name or path loaded with `load_schema`.

    Every function that takes "a Schema or a schema name" resolves it here, so each
    accepts the same things and words a refusal the same way.

    Raises:
        TypeError: ``schema_or_name`` is neither, naming what was found and ``argument``.
        SchemaNotFoundError, SchemaDefinitionError: as from `load_schema`.
    """
    if isinstance(schema_or_name, Schema):
        return schema_or_name
    if _text_of(schema_or_name) is not None:
        return load_schema(schema_or_name)
    raise TypeError(f"{argument} must be a trajschema.Schema or a schema name, found {describe_value(schema_or_name)}")


def schema_for_architecture(architecture: str) -> Schema:
    """The schema whose ``architectures:`` lists a Hugging Face architecture name.

    Examples:
        >>> ts.schema_for_architecture("Qwen2VLForConditionalGeneration").name
        'vlm_mrope'

    Raises:
        SchemaNotFoundError: no schema (or more than one) declares it.
        SchemaDefinitionError: a file on the search path is malformed or cannot be read,
            or a search path entry cannot be listed: any of them might claim the
            architecture, so the answer would not be sure (the message names it).
        TypeError: ``architecture`` is not a string.
    """
    if not isinstance(architecture, str):
        raise TypeError(f"architecture must be a str, found {type(architecture).__name__}")
    search = search_path_files(schema_search_path())
    for d, why in search.unlisted:  # it may hold a schema that claims the architecture
        refuse(str(d), "", f"{why}; schema_for_architecture reads every schema file on the search path")
    hits: list[str] = []
    known: list[str] = []
    for name, hit in search.files.items():
        path = readable(hit)
        archs = _declared(path).architectures
        known.extend(archs)
        if architecture in archs:
            hits.append(name)
    if len(hits) > 1:
        raise SchemaNotFoundError(f"architecture {architecture!r} is claimed by several schemas: {', '.join(hits)}")
    if not hits:
        raise _not_found(architecture, sorted(set(known)), what="schema for architecture")
    return load_found(hits[0], search.files[hits[0]])


def schema_for_config(config: Any, *, schema: Schema | str | None = None) -> Schema:
    """The schema of a model, from its config, with the dims the config gives pinned.

    The schema is the one whose ``architectures:`` lists the config's ``architectures``
    (as `schema_for_architecture` picks it), or ``schema`` (a `Schema` or a schema name)
    when given. Every free dim that declares ``from_config:`` is then fixed at the size
    the config gives (``experts`` from ``num_experts``, ``n_routed_experts`` or
    ``num_local_experts``; see "Dims from the model config" in the schema language), and
    its `FixedDim.source` says which key gave it.

    Examples:
        >>> ts.schema_for_config({"architectures": ["Qwen2VLForConditionalGeneration"]}).name
        'vlm_mrope'

    Args:
        config: a mapping (a parsed ``config.json``), a ``transformers.PretrainedConfig``
            (read through its ``to_dict()``; transformers is never imported for the
            others), or a path to a ``config.json`` or to a model directory holding one.
            Only local files are read: a hub id is not downloaded.
        schema: the schema to pin instead of the one the architectures pick.

    Raises:
        ModelConfigError: the config cannot be read (not JSON, not an object, larger
            than 16 MiB, a directory without ``config.json``, a dangling or looping
            symbolic link), has no usable ``architectures``, or does not give a dim the
            schema reads from it: a key holding no size (a str, float, bool or negative),
            two keys that disagree, no complete alternative, a size the dim does not
            allow. The message names the file and the key.
        SchemaNotFoundError: no schema claims the config's architectures, or they pick
            more than one schema.
        SchemaDefinitionError: a schema file on the search path cannot be read (see
            `schema_for_architecture`).
        TypeError: ``config`` is none of the accepted kinds.
    """
    cfg = read_model_config(config)
    chosen = (
        resolve_schema(schema)
        if schema is not None
        else _schema_of_architectures(cfg.source, config_architectures(cfg))
    )
    return pin_config_dims(chosen, cfg)


def _schema_of_architectures(source: str, architectures: list[str]) -> Schema:
    """The one schema claiming any of ``architectures`` (a config may list several model classes)."""
    search = search_path_files(schema_search_path())
    for d, why in search.unlisted:  # it may hold a schema that claims an architecture
        refuse(str(d), "", f"{why}; schema_for_config reads every schema file on the search path")
    claims: dict[str, list[str]] = {}
    for name, hit in search.files.items():
        path = readable(hit)
        for arch in _declared(path).architectures:
            claims.setdefault(arch, []).append(name)
    hits = list(dict.fromkeys(n for a in architectures for n in claims.get(a, ())))
    listed = ", ".join(map(repr, architectures))
    if len(hits) > 1:
        by = "; ".join(f"{a!r} by {', '.join(claims[a])}" for a in architectures if a in claims)
        raise SchemaNotFoundError(
            f"{source}: architectures: {listed}: claimed by more than one schema ({by}); pass schema= to choose one"
        )
    if not hits:
        hint = did_you_mean(architectures[0], claims)
        raise SchemaNotFoundError(
            f"{source}: architectures: no schema claims {listed}{hint} (known: {', '.join(sorted(claims)) or 'none'}; "
            f"searched {', '.join(str(d) for d in schema_search_path())}); pass schema= to choose one"
        )
    return load_found(hits[0], search.files[hits[0]])


def _declared(path: Path) -> _SchemaDecl:
    """The declarations of the schema file at ``path`` (its problems located, as a load's are)."""
    with reporting():
        return _decl(read_yaml(path), str(path))


def schema_from_dict(
    data: Mapping[str, Any], *, base_dir: str | os.PathLike[str] | None = None, errors: ErrorsMode = "all"
) -> Schema:
    """Compile a schema from an already-parsed mapping (same keys as a YAML file).

    ``extends`` names are looked up in ``base_dir`` first, then on the search path.

    Raises:
        SchemaDefinitionError: as `load_schema` raises it, naming ``<mapping>`` (a mapping
            has no lines); ``errors`` is `load_schema`'s too.
    """
    errors = check_errors_mode(errors)
    chain = _Chain(base_dir=Path(base_dir) if base_dir else None, errors=errors)
    with reporting(errors):
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


def _load_file(path: Path, errors: ErrorsMode = "all") -> Schema:
    search = tuple(schema_search_path())
    hit = _CACHE.get(path)
    if hit is not None and hit[1] == search and all(_mtime(p) == m for p, m in hit[2]):
        return hit[0]
    chain = _Chain(base_dir=path.parent, errors=errors)
    stamp = _mtime(path)
    with reporting(errors):
        schema = chain.compile(read_yaml(path), str(path), path)
    used = ((path, stamp), *((Path(src), _mtime(Path(src))) for _, src in chain.decls.values()))
    _CACHE[path] = (schema, search, used)
    return schema


class _Chain:
    """Resolves ``extends`` (C3 order) for one load, detecting cycles.

    Schemas are known by name, and a parent is found by its file name, so a parent's
    ``name:`` must be its file name; a schema is identified by its file too, so a file
    that reaches itself under another name is a cycle, and two files of one name a clash.
    """

    def __init__(self, base_dir: Path | None, errors: ErrorsMode = "all") -> None:
        self.base_dir = base_dir
        self.errors = errors
        self.decls: dict[str, tuple[_SchemaDecl, str]] = {}
        self.loading: list[tuple[str, Path | None]] = []
        self.mro: dict[str, list[str]] = {}

    def _find(self, name: str, child_source: str, child_dir: Path | None) -> Path:
        dirs = ([child_dir] if child_dir else []) + schema_search_path()
        hit = search_path_files(dirs, name=name).files.get(name)
        if hit is None:
            search = search_path_files(dirs)
            hint = did_you_mean(name, sorted(search.files))
            refuse(child_source, "extends", f"unknown parent schema {shown_name(name)}{hint}{search.unlisted_note()}")
        return readable(hit)  # a parent that cannot be read is named, not skipped for another of its name

    def _parent(self, name: str, child_source: str, child_dir: Path | None) -> tuple[_SchemaDecl, str]:
        path = self._find(name, child_source, child_dir)
        for i, (n, p) in enumerate(self.loading):
            if p == path or n == name:
                self._cycle(i, name, path, child_source)
        if name in self.decls:
            if self.decls[name][1] != str(path):  # found beside another child: another file
                refuse(child_source, "extends", f"two schemas are named {name!r}: {self.decls[name][1]} and {path}")
            return self.decls[name]
        decl = _decl(read_yaml(path), str(path), self.errors)
        if decl.name != name:
            refuse(
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
            refuse(child_source, "extends", f"cycle in extends: {cycle}{note}")
        where = f"{p}" if p else "the mapping being compiled"
        refuse(child_source, "extends", f"two schemas are named {name!r}: {where} and {path}, which it extends")

    def _linearize(self, decl: _SchemaDecl, source: str, path: Path | None) -> list[str]:
        if decl.name in self.mro:
            return self.mro[decl.name]
        if len(self.loading) >= MAX_EXTENDS_DEPTH:
            refuse(source, "extends", f"extends chains more than {MAX_EXTENDS_DEPTH} schemas deep")
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
        """The schema of ``data`` (read from ``source``), with every problem found in one pass.

        The file's own entries with a problem are left out of the merge (a parent's entry
        of that name would stand in for it and be blamed for nothing), and reported with
        what the compiler finds in the rest.
        """
        decl = _decl(data, source, self.errors, partial=True)
        try:
            mro = self._linearize(decl, source, path)
            by_name = {decl.name: (decl, source), **{n: self.decls[n] for n in mro[1:]}}
            ancestors = {n: set(self.mro[n][1:]) for n in mro}
            merged: dict[str, dict[str, tuple[Any, str]]] = {}
            for section in ("dims", "fields", "tags", "padding"):
                merged[section] = _merge_section(section, mro, by_name, ancestors)
                for name in decl.broken.get(section, ()):
                    merged[section].pop(name, None)
        except SchemaDefinitionError as exc:  # a parent's problem, or parents that disagree
            raise type(exc).of((*decl.problems, *exc.errors)) from None
        _drop_outdated_padding(merged, [by_name[n][1] for n in mro])
        extra = next((e for n in mro if (e := by_name[n][0].extra)), "allow")
        sources = [by_name[n][1] for n in mro]
        return _compile(decl, mro, sources, ancestors, merged, extra, self.errors)


def _c3_merge(seqs: list[list[str]], source: str) -> list[str]:
    out: list[str] = []
    seqs = [list(s) for s in seqs if s]
    while seqs:
        for seq in seqs:
            head = seq[0]
            if not any(head in s[1:] for s in seqs):
                break
        else:
            refuse(source, "extends", "parents cannot be ordered consistently (no C3 linearization)")
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


def _merge_section(section, mro, by_name, ancestors) -> dict[str, tuple[Any, str]]:
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
            if len({repr(getattr(by_name[d][0], section)[key]) for d in leaves}) > 1:
                _conflict(section, key, leaves, mro, by_name, ancestors)
        owner = declarers[0]
        out[key] = (getattr(by_name[owner][0], section)[key], by_name[owner][1])
    return out


def _conflict(section: str, key: str, leaves: list[str], mro, by_name, ancestors) -> NoReturn:
    """Two ancestors that declare ``key`` differently, named in the schema whose ``extends`` brings them together.

    That is the most basic schema in C3 order with two disagreeing leaves among its
    ancestors (a descendant comes before its ancestors, so no schema under it joins them):
    the schema being loaded when it extends them itself, an intermediate parent when the
    conflict came in with it (loading that parent fails the same way).
    """
    for joiner in reversed(mro):
        under = [d for d in leaves if d in ancestors[joiner]]
        if len({repr(getattr(by_name[d][0], section)[key]) for d in under}) > 1:
            break
    else:  # unreachable: the schema being loaded has every leaf among its ancestors
        joiner, under = mro[0], leaves
    decl, source = by_name[joiner]
    kin = "parents" if all(d in decl.extends for d in under) else "ancestors"
    refuse(
        source,
        f"{section}.{key}",
        f"{kin} {' and '.join(under)} declare {_WHAT[section]} {key!r} differently; declare it in {joiner!r} to choose",
    )
