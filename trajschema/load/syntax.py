"""What a schema file may say, key by key: the declarations as written, validated before they are compiled."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic

from trajschema.core import MAX_SIZE, REPR, SchemaDefinitionError, SchemaProblem, closest, did_you_mean, is_int
from trajschema.files import (
    DIM_NAME,
    SIZE_LIMIT_TEXT,
    ErrorsMode,
    Problems,
    check_tree,
    join_path,
    num,
    refuse,
    shown,
    string_hint,
)

# ---------------------------------------------------------------------------
# Declarations as written (validated with pydantic and the checks below, then compiled)


def _list_or_tuple(v: Any) -> Any:
    if isinstance(v, (set, frozenset)):  # pydantic's lax mode would turn it into a list
        raise ValueError(f"expected a list, found {shown(v)} (its order is arbitrary)")
    return list(v) if isinstance(v, tuple) else v


def _one_or_many(v: Any) -> Any:
    return [v] if isinstance(v, str) else _list_or_tuple(v)


# A list (a tuple from Python is fine; a YAML !!set is not: its order is arbitrary).
# (Sets are refused by the validator rather than pydantic.Strict(), which pydantic < 2.9
# cannot apply to a list.)
_List = Annotated[list[Any], pydantic.BeforeValidator(_list_or_tuple)]
_Names = Annotated[list[pydantic.StrictStr], pydantic.BeforeValidator(_one_or_many)]
_Size = Annotated[pydantic.StrictInt, pydantic.Field(ge=0, le=MAX_SIZE)]
_Section = Annotated[dict[pydantic.StrictStr, Any], pydantic.BeforeValidator(lambda v: {} if v is None else v)]


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class _FreeDimDecl(_Strict):
    min: _Size = 0
    max: _Size | None = None
    multiple_of: Annotated[pydantic.StrictInt, pydantic.Field(gt=0, le=MAX_SIZE)] | None = None
    from_config: _Names = []  # config keys or expressions over them: checked by _compile_dims
    description: pydantic.StrictStr = ""


class _FixedDimDecl(_Strict):
    size: _Size
    description: pydantic.StrictStr = ""


class _DerivedDimDecl(_Strict):
    expr: pydantic.StrictStr
    description: pydantic.StrictStr = ""


_DimDecl = _FixedDimDecl | _DerivedDimDecl | _FreeDimDecl


class _FieldDecl(_Strict):
    shape: _List | None = None
    dtype: Any = None  # a name or a list of names: checked by _compile_dtypes
    kind: pydantic.StrictStr | None = None
    required: pydantic.StrictBool = True
    pad: Any = None  # a number or a rule name: checked by _compile_pad
    values: _List | None = None
    min: Any = None  # a number or a dim expression (experts - 1): checked by _compile_bounds
    max: Any = None
    finite: pydantic.StrictBool = False
    distinct: pydantic.StrictBool = False
    description: pydantic.StrictStr = ""


class _TagDecl(_Strict):
    kind: pydantic.StrictStr | None = None
    default: Any = None  # a scalar of the tag's kind: checked by _compile_tag
    equals: Any = None  # a dim expression: checked by _expr
    description: pydantic.StrictStr = ""


class _TopDecl(_Strict):
    name: pydantic.StrictStr
    description: pydantic.StrictStr = ""
    architectures: _Names = []
    extends: _Names = []
    dims: _Section = {}
    fields: _Section = {}
    tags: _Section = {}
    padding: _Section = {}
    extra: Literal["allow", "forbid"] | None = None


@dataclasses.dataclass(frozen=True)
class _SchemaDecl:
    """One file's declarations, every entry validated on its own (C3 merges these)."""

    name: str
    description: str
    architectures: list[str]
    extends: list[str]
    dims: dict[str, _DimDecl]
    fields: dict[str, _FieldDecl]
    tags: dict[str, _TagDecl]
    padding: dict[str, int]
    extra: str | None
    #: Problems found in the file, when it was read with ``partial`` (its other entries are here).
    problems: tuple[SchemaProblem, ...] = ()
    #: By section, the names of the entries left out for a problem.
    broken: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=dict)


_SECTION_KEYS: dict[type, tuple[str, ...]] = {
    m: tuple(m.model_fields) for m in (_TopDecl, _FieldDecl, _TagDecl, _FreeDimDecl, _FixedDimDecl, _DerivedDimDecl)
}
_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
}


def _validate(model: type[_Strict], data: Any, source: str, path: str) -> Any:
    """``model.model_validate(data)``, with pydantic's errors as one SchemaDefinitionError.

    Each key's problem is reported (unknown keys first, as a misspelled key explains the
    rest), except a required key reported missing because it is misspelled: the
    unknown key's "did you mean" says it.
    """
    if isinstance(data, Mapping) and not isinstance(data, dict):
        data = dict(data)  # pydantic validates models from dicts
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise _pydantic_error(exc, model, source, path) from None


def _pydantic_error(exc: pydantic.ValidationError, model: type[_Strict], source: str, path: str) -> Exception:
    errors = exc.errors()
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    meant = {_close_key(e, model) for e in unknown}
    found = []
    for err in [*unknown, *(e for e in errors if e["type"] != "extra_forbidden")]:
        if err["type"] == "missing" and err["loc"][-1] in meant:
            continue  # misspelled, not missing: the unknown key's "did you mean" says so
        at, problem, key = _pydantic_problem(err, model, path)
        try:
            refuse(source, at, problem, key=key)
        except SchemaDefinitionError as one:
            found.append(one.errors[0])
    return SchemaDefinitionError.of(found)


def _close_key(err: Any, model: type[_Strict]) -> str | None:
    """The key of ``model`` an unknown key (an ``extra_forbidden`` error) is a misspelling of."""
    loc = [p for p in err["loc"] if p != "[key]"]
    return closest(str(loc[-1]), _SECTION_KEYS[model] if len(loc) == 1 else ())


def _pydantic_problem(err: Any, model: type[_Strict], path: str) -> tuple[str, str, str | None]:
    """The key path, the problem and (for an unknown key) the path of the key itself."""
    loc = [p for p in err["loc"] if p != "[key]"]
    for p in loc[:-1] if err["type"] in ("extra_forbidden", "missing") else loc:
        path = f"{path}[{p}]" if isinstance(p, int) else join_path(path, p)
    kind, found, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if kind == "extra_forbidden":
        hint = did_you_mean(loc[-1], _SECTION_KEYS[model] if len(loc) == 1 else ())
        return path, f"unknown key {loc[-1]!r}{hint}", join_path(path, loc[-1])
    if kind == "missing":
        return path, f"missing required key {loc[-1]!r}", None
    if kind in _EXPECTED:
        return path, f"expected {_EXPECTED[kind]}, found {shown(found)}{string_hint(found)}", None
    if kind == "literal_error":
        return path, f"expected {ctx.get('expected')}, found {shown(found)}", None
    if kind == "value_error" and isinstance(ctx.get("error"), ValueError):
        return path, str(ctx["error"]), None  # our own validators' words
    if kind == "less_than_equal" and ctx.get("le") == MAX_SIZE:
        return path, f"{num(found)} is larger than {SIZE_LIMIT_TEXT}", None
    if kind in ("greater_than_equal", "greater_than"):
        bound = f">= {ctx.get('ge')}" if "ge" in ctx else f"> {ctx.get('gt')}"
        return path, f"must be {bound}, found {num(found)}", None
    return path, f"{err['msg']} (found {shown(found)})", None


def _check_name(name: str, source: str, path: str, what: str) -> None:
    if not name:
        refuse(source, path, f"an empty {what}")
    if name != name.strip():
        refuse(source, path, f"{what} {name!r} has leading or trailing whitespace")
    if not name.isprintable():
        refuse(source, path, f"{what} {name!r} contains a control character")


def _check_names_list(names: list[str], source: str, key: str, what: str) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        _check_name(n, source, f"{key}[{i}]", what)
        if n in seen:
            refuse(source, key, f"{'an' if what[0] in 'aeiou' else 'a'} {what} is listed twice: {REPR.repr(names)}")
        seen.add(n)


def _decl(data: Any, source: str, errors: ErrorsMode = "all", *, partial: bool = False) -> _SchemaDecl:
    """One file's declarations, every key checked on its own.

    With ``errors="all"`` the problems of every key are found together (the tree's own,
    hostile YAML, end the reading first). They are raised at once, unless ``partial``: then
    the declarations that passed come back, with the problems and the names of the entries
    left out (`_SchemaDecl.problems`, `_SchemaDecl.broken`), for the compiler to check the
    rest and report everything together. A problem of ``name``, ``extends`` or ``dims`` itself,
    or a misspelling of one of them (``dimz:``), is raised at once all the same: without
    them what the file declares is not known.
    """
    if not isinstance(data, Mapping):
        found = "an empty file" if data is None else shown(data)
        refuse(source, "", f"expected a mapping at the top level (name:, fields:, ...), found {found}")
    check_tree(data, source)
    problems = Problems(errors)
    top, named, blocking = _top(data, source, problems)
    if named:
        with problems.each():
            _check_name(top.name, source, "name", "schema name")
    with problems.each():
        _check_names_list(top.extends, source, "extends", "parent")
    blocking = blocking or any(p.path.split("[")[0] in ("name", "extends") for p in problems.found)
    with problems.each():
        _check_names_list(top.architectures, source, "architectures", "architecture")
    sections = _sections(top, source, problems)
    if problems.found and (blocking or not partial):
        problems.raise_if_any()
    return _SchemaDecl(
        name=top.name,
        description=top.description,
        architectures=top.architectures,
        extends=top.extends,
        dims=sections["dims"],
        fields=sections["fields"],
        tags=sections["tags"],
        padding=sections["padding"],
        extra=top.extra,
        problems=tuple(problems.found),
        broken={s: frozenset(n for n in getattr(top, s) if n not in sections[s]) for s in sections},
    )


def _sections(top: _TopDecl, source: str, problems: Problems) -> dict[str, dict[str, Any]]:
    """The entries of ``dims``, ``fields``, ``tags`` and ``padding`` that pass, each checked on its own."""
    out: dict[str, dict[str, Any]] = {"dims": {}, "fields": {}, "tags": {}, "padding": {}}
    for n, v in top.dims.items():
        with problems.each():
            if not DIM_NAME.fullmatch(n):
                refuse(source, f"dims.{n}", f"dim name {n!r} is not an identifier (ASCII letters, digits and _)")
            out["dims"][n] = _dim_decl(v, source, f"dims.{n}")
    for section, model, keys in (("fields", _FieldDecl, "shape, dtype, pad, ..."), ("tags", _TagDecl, _TAG_KEYS)):
        for n, v in getattr(top, section).items():
            with problems.each():
                _check_entry_name(n, source, section)
                out[section][n] = _entry(model, v, source, f"{section}.{n}", keys)
    for n, v in top.padding.items():
        with problems.each():
            out["padding"][n] = _padding_size(v, source, f"padding.{n}")
    return out


_TAG_KEYS = "kind, equals, default, ..."


def _top(data: Mapping[str, Any], source: str, problems: Problems) -> tuple[_TopDecl, bool, bool]:
    """The top-level keys, whether ``name`` is one to check, and whether a problem leaves the
    file's declarations unknown (see `_decl`). A top-level key with a problem is reported and
    left out, so that the other sections are still checked entry by entry."""
    try:
        return _validate(_TopDecl, data, source, ""), True, False
    except SchemaDefinitionError as exc:
        problems.add(exc)
        bad = {p.path.split(".")[0].split("[")[0] for p in exc.errors}
    unknown = [k for k in data if k not in _TopDecl.model_fields]
    meant = {closest(str(k), _SECTION_KEYS[_TopDecl]) for k in unknown} - {None}
    kept = {k: v for k, v in data.items() if k in _TopDecl.model_fields and k not in bad}
    blocking = not {"name", "extends", "dims"}.isdisjoint({*bad, *meant}) or "name" not in kept
    try:
        return _TopDecl.model_validate({"name": "", **kept}), "name" in kept, blocking
    except pydantic.ValidationError:  # the keys left validated on their own: cannot happen
        problems.raise_if_any()
        raise


def _check_entry_name(n: str, source: str, section: str) -> None:
    at = f"{section}.{n}" if n and n.strip() == n and n.isprintable() else f"{section}.{n!r}"
    try:
        _check_name(n, source, at, f"{section[:-1]} name")
    except SchemaDefinitionError as exc:  # the key itself: its path cannot be written out in a message
        refuse(exc.source, exc.path, exc.problem, key=f"{section}.{n}")


def _entry(model: type[_Strict], v: Any, source: str, path: str, keys: str) -> Any:
    if not isinstance(v, Mapping):
        refuse(source, path, f"expected a mapping ({keys}), found {shown(v)}")
    return _validate(model, v, source, path)


def _dim_decl(v: Any, source: str, path: str) -> _DimDecl:
    """A dim as written: a size (fixed), an expression (derived) or a mapping (any of the three)."""
    if is_int(v):
        if v < 0:
            refuse(source, path, f"a fixed dim cannot be negative, found {num(v)}")
        if v > MAX_SIZE:
            refuse(source, path, f"a fixed dim of {num(v)} is larger than {SIZE_LIMIT_TEXT}")
        return _FixedDimDecl(size=v)
    if isinstance(v, str):
        return _DerivedDimDecl(expr=v)
    if not isinstance(v, Mapping):
        refuse(
            source,
            path,
            f"expected a size (4), an expression (prompt + response) or a mapping ({{min: 1}}), found {shown(v)}",
        )
    forms = [f for f, k in (("fixed (size)", "size"), ("derived (expr)", "expr")) if k in v]
    if forms and "from_config" in v:
        refuse(
            source,
            f"{path}.from_config",
            f"from_config gives a free dim its size; this dim is {forms[0]} already (drop one of the two)",
        )
    if any(k in v for k in ("min", "max", "multiple_of")):
        forms.append("free (min, max, multiple_of)")
    if len(forms) > 1:
        refuse(
            source,
            path,
            f"a dim is fixed (size), derived (expr) or free (min, max, multiple_of), not {' and '.join(forms)} at once",
        )
    model = _FixedDimDecl if "size" in v else _DerivedDimDecl if "expr" in v else _FreeDimDecl
    return _validate(model, v, source, path)


def _padding_size(v: Any, source: str, path: str) -> int:
    if not is_int(v):
        refuse(source, path, f"expected a size (an integer >= 0), found {shown(v)}")
    if v < 0:
        refuse(source, path, f"a padding size cannot be negative, found {num(v)}")
    if v > MAX_SIZE:
        refuse(source, path, f"padding size {num(v)} is larger than {SIZE_LIMIT_TEXT}")
    return v
