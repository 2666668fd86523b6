"""What a schema file may say, key by key: the declarations as written, validated before they are compiled."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic

from trajschema.load.filetext import (
    _DIM_NAME,
    _MAX_SIZE,
    _MAX_SIZE_TEXT,
    _REPR,
    _join,
    _num,
    _raise,
    _show,
    _string_hint,
)
from trajschema.load.reader import _check_tree

# ---------------------------------------------------------------------------
# Declarations as written (validated with pydantic and the checks below, then compiled)


def _list_or_tuple(v: Any) -> Any:
    if isinstance(v, (set, frozenset)):  # pydantic's lax mode would turn it into a list
        raise ValueError(f"expected a list, found {_show(v)} (its order is arbitrary)")
    return list(v) if isinstance(v, tuple) else v


def _one_or_many(v: Any) -> Any:
    return [v] if isinstance(v, str) else _list_or_tuple(v)


# A list (a tuple from Python is fine; a YAML !!set is not: its order is arbitrary).
# (Sets are refused by the validator rather than pydantic.Strict(), which pydantic < 2.9
# cannot apply to a list.)
_List = Annotated[list[Any], pydantic.BeforeValidator(_list_or_tuple)]
_Names = Annotated[list[pydantic.StrictStr], pydantic.BeforeValidator(_one_or_many)]
_Size = Annotated[pydantic.StrictInt, pydantic.Field(ge=0, le=_MAX_SIZE)]
_Section = Annotated[dict[pydantic.StrictStr, Any], pydantic.BeforeValidator(lambda v: {} if v is None else v)]


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


class _FreeDimDecl(_Strict):
    min: _Size = 0
    max: _Size | None = None
    multiple_of: Annotated[pydantic.StrictInt, pydantic.Field(gt=0, le=_MAX_SIZE)] | None = None
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
    """``model.model_validate(data)``, with pydantic's first error as a SchemaDefinitionError."""
    if isinstance(data, Mapping) and not isinstance(data, dict):
        data = dict(data)  # pydantic validates models from dicts
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        errors = exc.errors()
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        _raise(source, *_pydantic_problem(err, model, path))


def _pydantic_problem(err: Any, model: type[_Strict], path: str) -> tuple[str, str]:
    loc = [p for p in err["loc"] if p != "[key]"]
    for p in loc[:-1] if err["type"] in ("extra_forbidden", "missing") else loc:
        path = f"{path}[{p}]" if isinstance(p, int) else _join(path, p)
    kind, found, ctx = err["type"], err.get("input"), err.get("ctx") or {}
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(str(loc[-1]), _SECTION_KEYS[model] if len(loc) == 1 else (), n=1)
        return path, f"unknown key {loc[-1]!r}" + (f"; did you mean {close[0]!r}?" if close else "")
    if kind == "missing":
        return path, f"missing required key {loc[-1]!r}"
    if kind in _EXPECTED:
        return path, f"expected {_EXPECTED[kind]}, found {_show(found)}{_string_hint(found)}"
    if kind == "literal_error":
        return path, f"expected {ctx.get('expected')}, found {_show(found)}"
    if kind == "value_error" and isinstance(ctx.get("error"), ValueError):
        return path, str(ctx["error"])  # our own validators' words
    if kind == "less_than_equal" and ctx.get("le") == _MAX_SIZE:
        return path, f"{_num(found)} is larger than {_MAX_SIZE_TEXT}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = f">= {ctx.get('ge')}" if "ge" in ctx else f"> {ctx.get('gt')}"
        return path, f"must be {bound}, found {_num(found)}"
    return path, f"{err['msg']} (found {_show(found)})"


def _check_name(name: str, source: str, path: str, what: str) -> None:
    if not name:
        _raise(source, path, f"an empty {what}")
    if name != name.strip():
        _raise(source, path, f"{what} {name!r} has leading or trailing whitespace")
    if not name.isprintable():
        _raise(source, path, f"{what} {name!r} contains a control character")


def _check_names_list(names: list[str], source: str, key: str, what: str) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        _check_name(n, source, f"{key}[{i}]", what)
        if n in seen:
            _raise(source, key, f"{'an' if what[0] in 'aeiou' else 'a'} {what} is listed twice: {_REPR.repr(names)}")
        seen.add(n)


def _decl(data: Any, source: str) -> _SchemaDecl:
    if not isinstance(data, Mapping):
        found = "an empty file" if data is None else _show(data)
        _raise(source, "", f"expected a mapping at the top level (name:, fields:, ...), found {found}")
    _check_tree(data, source)
    top = _validate(_TopDecl, data, source, "")
    _check_name(top.name, source, "name", "schema name")
    _check_names_list(top.architectures, source, "architectures", "architecture")
    _check_names_list(top.extends, source, "extends", "parent")
    for n in top.dims:
        if not _DIM_NAME.fullmatch(n):
            _raise(source, f"dims.{n}", f"dim name {n!r} is not an identifier (ASCII letters, digits and _)")
    for section in ("fields", "tags"):
        for n in getattr(top, section):
            at = f"{section}.{n}" if n and n.strip() == n and n.isprintable() else f"{section}.{n!r}"
            _check_name(n, source, at, f"{section[:-1]} name")
    return _SchemaDecl(
        name=top.name,
        description=top.description,
        architectures=top.architectures,
        extends=top.extends,
        dims={n: _dim_decl(v, source, f"dims.{n}") for n, v in top.dims.items()},
        fields={
            n: _entry(_FieldDecl, v, source, f"fields.{n}", "shape, dtype, pad, ...") for n, v in top.fields.items()
        },
        tags={n: _entry(_TagDecl, v, source, f"tags.{n}", "kind, equals, default, ...") for n, v in top.tags.items()},
        padding={n: _padding_size(v, source, f"padding.{n}") for n, v in top.padding.items()},
        extra=top.extra,
    )


def _entry(model: type[_Strict], v: Any, source: str, path: str, keys: str) -> Any:
    if not isinstance(v, Mapping):
        _raise(source, path, f"expected a mapping ({keys}), found {_show(v)}")
    return _validate(model, v, source, path)


def _dim_decl(v: Any, source: str, path: str) -> _DimDecl:
    """A dim as written: a size (fixed), an expression (derived) or a mapping (any of the three)."""
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 0:
            _raise(source, path, f"a fixed dim cannot be negative, found {_num(v)}")
        if v > _MAX_SIZE:
            _raise(source, path, f"a fixed dim of {_num(v)} is larger than {_MAX_SIZE_TEXT}")
        return _FixedDimDecl(size=v)
    if isinstance(v, str):
        return _DerivedDimDecl(expr=v)
    if not isinstance(v, Mapping):
        _raise(
            source,
            path,
            f"expected a size (4), an expression (prompt + response) or a mapping ({{min: 1}}), found {_show(v)}",
        )
    forms = [f for f, k in (("fixed (size)", "size"), ("derived (expr)", "expr")) if k in v]
    if forms and "from_config" in v:
        _raise(
            source,
            f"{path}.from_config",
            f"from_config gives a free dim its size; this dim is {forms[0]} already (drop one of the two)",
        )
    if any(k in v for k in ("min", "max", "multiple_of")):
        forms.append("free (min, max, multiple_of)")
    if len(forms) > 1:
        _raise(
            source,
            path,
            f"a dim is fixed (size), derived (expr) or free (min, max, multiple_of), not {' and '.join(forms)} at once",
        )
    model = _FixedDimDecl if "size" in v else _DerivedDimDecl if "expr" in v else _FreeDimDecl
    return _validate(model, v, source, path)


def _padding_size(v: Any, source: str, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        _raise(source, path, f"expected a size (an integer >= 0), found {_show(v)}")
    if v < 0:
        _raise(source, path, f"a padding size cannot be negative, found {_num(v)}")
    if v > _MAX_SIZE:
        _raise(source, path, f"padding size {_num(v)} is larger than {_MAX_SIZE_TEXT}")
    return v
