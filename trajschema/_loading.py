"""Finding, parsing, composing (``extends``) and compiling schema files."""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import pydantic
import torch
import yaml

from ._dims import DerivedDim, Expr, ExprError, FixedDim, FreeDim, parse_expr
from ._errors import SchemaDefinitionError, SchemaNotFoundError
from ._schema import KINDS, PAD_RULES, Field, PadRule, Schema, Tag, dtype_name

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

_DTYPES: dict[str, torch.dtype] = {
    dtype_name(d): d
    for d in (
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
    )
}
# torch's own aliases are traps: torch.int is int32 and torch.float is float32.
_DTYPE_HINTS = {
    "int": "int64 (torch.int is int32; say int32 if that is meant)",
    "long": "int64",
    "float": "float32 (or float64)",
    "double": "float64",
    "half": "float16",
    "short": "int16",
    "bfloat": "bfloat16",
    "uint16": "int32 (uint16 tensors are not supported by most torch ops)",
}


# ---------------------------------------------------------------------------
# Declarations as written in YAML (validated with pydantic, then compiled)


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class _FreeDimDecl(_Strict):
    min: pydantic.NonNegativeInt = 0
    max: pydantic.NonNegativeInt | None = None
    multiple_of: pydantic.PositiveInt | None = None
    description: str = ""


class _FieldDecl(_Strict):
    shape: list[pydantic.StrictInt | str] | None = None
    dtype: str | list[str] | None = None
    kind: str | None = None
    required: pydantic.StrictBool = True
    pad: pydantic.StrictBool | pydantic.StrictInt | pydantic.StrictFloat | str | None = None
    values: list[pydantic.StrictBool | pydantic.StrictInt | pydantic.StrictFloat] | None = None
    min: pydantic.StrictInt | pydantic.StrictFloat | None = None
    max: pydantic.StrictInt | pydantic.StrictFloat | None = None
    finite: pydantic.StrictBool = False
    description: str = ""


class _TagDecl(_Strict):
    kind: str | None = None
    default: Any = None
    equals: pydantic.StrictInt | str | None = None
    description: str = ""


class _SchemaDecl(_Strict):
    name: str
    description: str = ""
    architectures: list[str] = []
    extends: list[str] = []
    dims: dict[str, pydantic.StrictInt | str | _FreeDimDecl] = {}
    fields: dict[str, _FieldDecl] = {}
    tags: dict[str, _TagDecl] = {}
    padding: dict[str, pydantic.NonNegativeInt] = {}
    extra: Literal["allow", "forbid"] | None = None

    @pydantic.field_validator("extends", "architectures", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @pydantic.field_validator("dims", "fields", "tags", "padding", mode="before")
    @classmethod
    def _empty_section(cls, v: Any) -> Any:
        return {} if v is None else v  # `fields:` with nothing under it


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
        if not path.is_file():
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
    """
    hits: list[str] = []
    known: list[str] = []
    for name, path in _files_by_name(schema_search_path()).items():
        archs = _read_yaml(path).get("architectures") or []
        archs = [archs] if isinstance(archs, str) else archs
        known.extend(a for a in archs if isinstance(a, str))
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
    return chain.compile(dict(data), "<mapping>")


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
    schema = chain.compile(_read_yaml(path), str(path))
    used = ((path, stamp), *((Path(src), _mtime(Path(src))) for _, src in chain.decls.values()))
    _CACHE[path] = (schema, search, used)
    return schema


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SchemaDefinitionError(str(path), where, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None
    except OSError as exc:
        raise SchemaDefinitionError(str(path), "", f"cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise SchemaDefinitionError(str(path), "", f"expected a mapping at the top level, found {type(data).__name__}")
    return data


def _decl(data: Mapping[str, Any], source: str) -> _SchemaDecl:
    try:
        return _SchemaDecl.model_validate(data)
    except pydantic.ValidationError as exc:
        errors = exc.errors()
        # A union (a dim is an int, an expression or a mapping) fails once per member;
        # an unknown key is the most telling of those failures, so report it first.
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = [str(p) for p in err["loc"]]
        # pydantic reports union members as extra path parts; keep the real key path.
        keys = [p for p in loc if p not in _UNION_TAGS and not p.startswith(("function-", "list["))]
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            where = "" if len(keys) == 1 else keys[0] if len(keys) == 3 else None
            section = _SECTION_KEYS.get(where, ())
            close = difflib.get_close_matches(keys[-1], section, n=1)
            msg = f"unknown key {keys[-1]!r}" + (f"; did you mean {close[0]!r}?" if close else "")
        elif err["type"] == "missing":
            msg = f"missing required key {keys[-1]!r}"
        else:
            msg = f"{msg} (found {err.get('input')!r})"
        return _raise(source, ".".join(keys[:-1] if err["type"] in ("extra_forbidden", "missing") else keys), msg)


_UNION_TAGS = {"int", "str", "bool", "float", "_FreeDimDecl", "list[...]"}
_SECTION_KEYS = {
    "": tuple(_SchemaDecl.model_fields),
    "fields": tuple(_FieldDecl.model_fields),
    "dims": tuple(_FreeDimDecl.model_fields),
    "tags": tuple(_TagDecl.model_fields),
}


def _raise(source: str, path: str, problem: str):
    raise SchemaDefinitionError(source, path, problem)


class _Chain:
    """Resolves ``extends`` (C3 order) for one load, detecting cycles."""

    def __init__(self, base_dir: Path | None) -> None:
        self.base_dir = base_dir
        self.decls: dict[str, tuple[_SchemaDecl, str]] = {}
        self.loading: list[str] = []
        self.mro: dict[str, list[str]] = {}

    def _parent(self, name: str, child_source: str, child_dir: Path | None) -> tuple[_SchemaDecl, str]:
        if name in self.loading:
            cycle = " -> ".join([*self.loading[self.loading.index(name) :], name])
            _raise(child_source, "extends", f"cycle in extends: {cycle}")
        if name in self.decls:
            return self.decls[name]
        dirs = ([child_dir] if child_dir else []) + schema_search_path()
        files = _files_by_name(dirs)
        if name not in files:
            close = difflib.get_close_matches(name, sorted(files), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            _raise(child_source, "extends", f"unknown parent schema {name!r}{hint}")
        path = files[name]
        decl = _decl(_read_yaml(path), str(path))
        self.decls[name] = (decl, str(path))
        self._linearize(decl, str(path), path.parent)
        return decl, str(path)

    def _linearize(self, decl: _SchemaDecl, source: str, here: Path | None) -> list[str]:
        if decl.name in self.mro:
            return self.mro[decl.name]
        self.loading.append(decl.name)
        try:
            parents = [self._parent(p, source, here) for p in decl.extends]
            if len(set(decl.extends)) != len(decl.extends):
                _raise(source, "extends", f"a parent is listed twice: {decl.extends}")
            seqs = [self._linearize(p, s, Path(s).parent) for p, s in parents]
            mro = [decl.name, *_c3_merge([*seqs, list(decl.extends)], source)]
        finally:
            self.loading.pop()
        self.mro[decl.name] = mro
        return mro

    def compile(self, data: dict[str, Any], source: str) -> Schema:
        decl = _decl(data, source)
        here = self.base_dir
        mro = self._linearize(decl, source, here)
        by_name = {decl.name: (decl, source), **{n: self.decls[n] for n in mro[1:]}}
        ancestors = {n: set(self.mro[n][1:]) for n in mro}
        merged: dict[str, dict[str, tuple[Any, str]]] = {}
        for section in ("dims", "fields", "tags", "padding"):
            merged[section] = _merge_section(section, mro, by_name, ancestors, source)
        extra = next((by_name[n][0].extra for n in mro if by_name[n][0].extra), "allow")
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


# ---------------------------------------------------------------------------
# Compiling merged declarations


def _expr(text: Any, source: str, path: str) -> Expr:
    try:
        return parse_expr(text)
    except ExprError as exc:
        _raise(source, path, str(exc))
        raise  # unreachable


def _compile(decl, source, mro, merged, extra) -> Schema:
    dims: dict[str, Any] = {}
    for name, (d, src) in merged["dims"].items():
        path = f"dims.{name}"
        if not name.isidentifier():
            _raise(src, path, f"dim name {name!r} is not an identifier")
        if isinstance(d, int):
            if d < 0:
                _raise(src, path, f"a fixed dim cannot be negative, found {d}")
            dims[name] = FixedDim(name, d)
        elif isinstance(d, str):
            dims[name] = DerivedDim(name, _expr(d, src, path))
        else:
            if d.max is not None and d.max < d.min:
                _raise(src, path, f"max {d.max} is below min {d.min}")
            dims[name] = FreeDim(name, d.min, d.max, d.multiple_of)
    for d in dims.values():
        if isinstance(d, DerivedDim):
            _check_names(d.expr, dims, merged["dims"][d.name][1], f"dims.{d.name}")
    _check_dim_cycles(dims, merged["dims"])

    fields: dict[str, Field] = {}
    for name, (f, src) in merged["fields"].items():
        fields[name] = _compile_field(name, f, src, dims)

    tags: dict[str, Tag] = {}
    for name, (t, src) in merged["tags"].items():
        path = f"tags.{name}"
        eq = None
        if t.equals is not None:
            eq = _expr(t.equals, src, f"{path}.equals")
            _check_names(eq, dims, src, f"{path}.equals")
        if t.kind is not None and t.kind not in KINDS:
            _raise(src, f"{path}.kind", _unknown("kind", t.kind, KINDS))
        tags[name] = Tag(name, t.kind or ("int" if eq is not None else None), t.default, eq, t.description)

    padding: dict[str, int] = {}
    for name, (size, src) in merged["padding"].items():
        if name not in dims:
            _raise(src, f"padding.{name}", _unknown("dim", name, list(dims)))
        if not isinstance(dims[name], FreeDim):
            _raise(
                src, f"padding.{name}", f"only free dims take a padding size; {name!r} is {type(dims[name]).__name__}"
            )
        if not dims[name].allows(size):
            _raise(src, f"padding.{name}", f"padding size {size} breaks the dim's bounds ({dims[name].describe()})")
        padding[name] = size

    return Schema(
        name=decl.name,
        description=decl.description,
        architectures=decl.architectures,
        lineage=mro,
        dims=dims,
        fields=fields,
        tags=tags,
        padding_sizes=padding,
        extra=extra,
        source=source,
    )


def _unknown(what: str, found: str, known) -> str:
    close = difflib.get_close_matches(str(found), list(known), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} {found!r}{hint} (known: {', '.join(map(str, known))})"


def _check_names(expr: Expr, dims: Mapping[str, Any], source: str, path: str) -> None:
    for n in expr.names():
        if n not in dims:
            _raise(source, path, _unknown("dim", n, list(dims)) + "; declare it under dims:")


def _check_dim_cycles(dims: Mapping[str, Any], decls) -> None:
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            cycle = " -> ".join([*trail[trail.index(name) :], name])
            _raise(decls[trail[0]][1], f"dims.{trail[0]}", f"dims depend on each other in a cycle: {cycle}")
        state[name] = 1
        d = dims[name]
        if isinstance(d, DerivedDim):
            for n in d.expr.names():
                visit(n, [*trail, name])
        state[name] = 2

    for name in dims:
        visit(name, [])


def _compile_dtype(name: Any, source: str, path: str) -> torch.dtype:
    if not isinstance(name, str):
        _raise(source, path, f"expected a torch dtype name, found {name!r}")
    name = name.removeprefix("torch.")
    if name in _DTYPES:
        return _DTYPES[name]
    if name in _DTYPE_HINTS:
        _raise(source, path, f"ambiguous dtype {name!r}; did you mean {_DTYPE_HINTS[name]}?")
    _raise(source, path, _unknown("dtype", name, list(_DTYPES)))
    raise AssertionError  # unreachable


def _compile_field(name: str, f: _FieldDecl, src: str, dims) -> Field:
    path = f"fields.{name}"
    if f.pad is None:
        _raise(
            src,
            f"{path}.pad",
            f"field {name!r} has no pad rule; every field needs one (a number, or one of {', '.join(PAD_RULES)})",
        )
    if f.kind is not None and f.kind != "tensor":
        if f.kind not in KINDS:
            _raise(src, f"{path}.kind", _unknown("kind", f.kind, KINDS))
        if f.shape is not None or f.dtype is not None:
            _raise(src, path, f"a {f.kind!r} field has no shape or dtype; drop them or drop kind")
        kind, shape, dtypes = f.kind, None, ()
    else:
        if f.shape is None or f.dtype is None:
            missing = "shape" if f.shape is None else "dtype"
            _raise(
                src,
                path,
                f"a tensor field needs both shape and dtype ({missing} is missing), "
                f"or a kind: one of {', '.join(KINDS)}",
            )
        kind = "tensor"
        shape = tuple(_expr(e, src, f"{path}.shape[{i}]") for i, e in enumerate(f.shape))
        for i, e in enumerate(shape):
            _check_names(e, dims, src, f"{path}.shape[{i}]")
        raw = f.dtype if isinstance(f.dtype, list) else [f.dtype]
        if not raw:
            _raise(src, f"{path}.dtype", "an empty dtype list allows nothing")
        dtypes = tuple(_compile_dtype(d, src, f"{path}.dtype") for d in raw)
    pad = _compile_pad(f.pad, kind, dtypes, src, f"{path}.pad")
    if pad.rule == "fill" and not isinstance(pad.value, bool):
        value = pad.value
        broken = (
            (f.values is not None and value not in f.values and "in values")
            or (f.min is not None and value < f.min and f">= min {f.min}")
            or (f.max is not None and value > f.max and f"<= max {f.max}")
            or (f.finite and not math.isfinite(value) and "finite")
        )
        if broken:
            _raise(src, f"{path}.pad", f"fill {value!r} must itself pass the field's value checks (be {broken})")
    if f.values is not None and not f.values:
        _raise(src, f"{path}.values", "an empty values list allows nothing")
    for key in ("min", "max"):
        v = getattr(f, key)
        if v is not None and kind not in ("tensor", "int", "float"):
            _raise(src, f"{path}.{key}", f"{key} applies to tensors, int and float, not {kind!r}")
    if f.finite and kind not in ("tensor", "float"):
        _raise(src, f"{path}.finite", f"finite applies to tensors and float, not {kind!r}")
    return Field(
        name=name,
        kind=kind,
        shape=shape,
        dtypes=dtypes,
        required=f.required,
        pad=pad,
        values=tuple(f.values) if f.values is not None else None,
        min=f.min,
        max=f.max,
        finite=f.finite,
        description=f.description,
    )


_RULE_KINDS = {
    "eos": ("tensor", "int"),
    "positions": ("tensor",),
    "uid": ("str",),
    "index": ("int", "any"),
    "empty": ("mapping", "any"),
    "copy": ("tensor", *KINDS),
}


def _compile_pad(pad: Any, kind: str, dtypes, src: str, path: str) -> PadRule:
    if isinstance(pad, str):
        if pad not in PAD_RULES:
            _raise(src, path, _unknown("pad rule", pad, PAD_RULES))
        if kind not in _RULE_KINDS[pad]:
            _raise(src, path, f"pad rule {pad!r} does not fit a {kind!r} field (it fits {', '.join(_RULE_KINDS[pad])})")
        return PadRule(pad)
    if kind == "tensor":
        if isinstance(pad, float) and not math.isfinite(pad) and not any(d.is_floating_point for d in dtypes):
            _raise(src, path, f"fill {pad!r} does not fit integer dtypes")
        if isinstance(pad, float) and not all(d.is_floating_point for d in dtypes) and not pad.is_integer():
            _raise(src, path, f"fill {pad!r} is not an integer but the field allows integer dtypes")
    elif kind in ("str", "mapping"):
        _raise(
            src,
            path,
            f"a {kind!r} field cannot be filled with the number {pad!r}; "
            f"use one of {', '.join(r for r, k in _RULE_KINDS.items() if kind in k)}",
        )
    elif kind == "int" and not (isinstance(pad, int) and not isinstance(pad, bool)):
        _raise(src, path, f"an 'int' field needs an integer fill, found {pad!r}")
    elif kind == "bool" and not isinstance(pad, bool):
        _raise(src, path, f"a 'bool' field needs true or false, found {pad!r}")
    return PadRule("fill", pad)
