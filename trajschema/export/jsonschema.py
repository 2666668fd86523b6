"""A schema as a JSON Schema (2020-12) document, and the JSON rendering of a sample it describes.

JSON has no tensors, so the document describes the rendering `sample_to_json`
makes: every tensor becomes ``{"shape": [4, 9], "dtype": "int64"}`` (with
``values=True`` also ``"values"``, its elements as nested lists), every other value
stays itself. Non-finite floats, which JSON cannot write, become the strings ``"NaN"``,
``"Infinity"`` and ``"-Infinity"``. The document (`json_schema`):

* top level: an object with one entry in ``properties`` per field, the required fields
  in ``required``, and ``additionalProperties`` ``true`` for ``extra: allow``,
  ``false`` for ``extra: forbid``. ``null`` counts as absent, as in trajschema's checks:
  an optional field also accepts ``null``, a required one does not;
* a tensor field: an object with ``dtype`` (``enum`` of the allowed dtype names),
  ``shape`` (an array with one item per axis: a literal or fixed dim is ``const``, a
  named dim a ``$ref`` to its entry in ``$defs/dims``, an inline expression an integer
  ``>= 0`` annotated ``x-trajschema-expr``) and, optional, ``values``: nested arrays of
  rank depth (of the literal length where the axis is literal) whose elements carry the
  value checks as keywords: ``enum`` for ``values``, ``minimum`` / ``maximum`` (a bound
  written in dims, ``max: experts - 1``, only when the schema pins its dims: then it is a
  number), ``finite`` by which of the non-finite strings are allowed, and ``distinct`` as
  ``uniqueItems`` on the innermost arrays (the slices along the last axis) of integer and
  bool dtypes. Elements are ``boolean``
  for a ``bool`` dtype, ``integer`` for integer dtypes and ``number`` for float dtypes;
  a dtype list mixing those is one ``anyOf`` alternative per group, so a bool tensor's
  elements must be booleans. The field also carries ``x-trajschema-shape``, the symbolic
  shape (``[4, "seq"]``: dim names, sizes where the schema decides them, and inline
  expressions as text), ``x-trajschema-pad`` and ``x-trajschema-checks``;
* a non-tensor field by kind: ``int`` -> ``integer``, ``float`` -> ``number`` (or a
  non-finite string), ``bool`` -> ``boolean``, each with its value checks and also
  accepting a 0-d tensor of one of the declared dtypes trajschema accepts for the kind
  (a dense column's row); ``str`` -> ``string``, ``mapping`` -> ``object``, ``any`` ->
  anything (with ``values``: a number or boolean in ``values``, a 0-d tensor holding
  one, or a tensor of rank >= 1, whose elements trajschema does not read for ``any``);
* ``$defs/dims``: an object schema for the dims dict [`validate`][trajschema.Schema.validate]
  returns: a fixed dim is ``const``, a free one an integer with ``minimum``,
  ``maximum``, ``multipleOf`` (and ``x-trajschema-padding``, its padding size, and
  ``x-trajschema-from-config``, the model-config keys it is read from), a derived
  one an integer ``>= 0`` with ``x-trajschema-expr``; every dim says its kind in
  ``x-trajschema-dim``;
* ``$defs/tags``: an object schema for the tag dict (declared tags by kind,
  ``default``, ``x-trajschema-equals`` for a tag tied to a dim expression; undeclared
  tags are allowed).

What JSON Schema cannot say, and so is left to [`validate`][trajschema.Schema.validate]: that
axes naming one dim agree (within a field or across fields), a derived dim's or an inline
expression's relation to the other dims (``seq == prompt + response``), a tag's
``equals``, a bound in dims whose dims are not pinned and ``distinct`` on float dtypes
(both said in the field's ``description`` and ``x-trajschema-checks`` instead), and the
difference between ``1`` and ``1.0`` (an ``int`` field holding the float ``1.0``
passes). Validators that compare numbers as binary floats may also round bounds that
trajschema compares exactly. Keys of the document are sorted, it contains
no non-finite float, so ``json.dumps`` writes it deterministically.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from trajschema.check import Plan

import trajschema.check as check
from trajschema.core import (
    DTYPE_NAMES,
    DerivedDim,
    DType,
    FixedDim,
    FreeDim,
    dtype_name,
    is_tensor,
    scalar_dtype_ok,
    value_failures,
)

__all__ = ["SCHEMA_DIALECT", "json_schema", "sample_to_json"]

#: The JSON Schema dialect of the documents.
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

_NONFINITE = (("NaN", math.nan), ("Infinity", math.inf), ("-Infinity", -math.inf))
_MAX_DEPTH = 100
_NULL = {"type": "null"}


def json_schema(plan: Plan) -> dict[str, Any]:
    """A JSON Schema (2020-12) document for the `sample_to_json` rendering of one sample.

    Examples:
        >>> doc = ts.load_schema("vlm_mrope").to_json_schema()
        >>> doc["properties"]["position_ids"]["x-trajschema-shape"], doc["additionalProperties"]
        ([4, 'seq'], True)
        >>> doc["properties"]["position_ids"]["properties"]["dtype"]
        {'enum': ['int64']}
    """
    consts = _constant_dims(plan)
    doc: dict[str, Any] = {
        "$schema": SCHEMA_DIALECT,
        "title": plan.name,
        "type": "object",
        "properties": {n: _field(f, consts) for n, f in plan.fields.items()},
        "required": [n for n, f in plan.fields.items() if f.required],
        "additionalProperties": plan.extra != "forbid",
        "$defs": {"dims": _dims(plan), "tags": _tags(plan)},
        "x-trajschema-lineage": list(plan.lineage),
        "x-trajschema-architectures": list(plan.architectures),
    }
    if plan.description:
        doc["description"] = plan.description
    return _sorted(doc)


def _sorted(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _sorted(x[k]) for k in sorted(x)}
    if isinstance(x, list):
        return [_sorted(v) for v in x]
    return x


def _constant_dims(plan: Plan) -> dict[str, int]:
    """Sizes the schema alone decides: fixed dims, and derived dims over fixed ones only."""
    out: dict[str, int] = {n: d.size for n, d in plan.dims.items() if isinstance(d, FixedDim)}
    for d in plan.dim_plan.derived:
        size = d.expr.evaluate(out)
        if isinstance(size, int) and d.name in plan.dims:
            out[d.name] = size
    return out


# -- numbers as the rendering writes them ---------------------------------------------------


def _number(x: Any) -> Any:
    """A number as JSON holds it: bools and ints as they are, non-finite floats as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    return x


def _elements(group: str, f: Any) -> Any:
    """The schema of one element (or scalar) of ``group`` (bool/int/float) under ``f``'s value checks."""
    checks = {"values": f.values, "lo": f.min, "hi": f.max, "finite": f.finite}
    if group == "bool":
        allowed = [b for b in (False, True) if not value_failures(b, **checks)]
        return {"type": "boolean"} if len(allowed) == 2 else ({"enum": allowed} if allowed else False)
    out: dict[str, Any] = {"type": "integer" if group == "int" else "number"}
    if f.min is not None:
        out["minimum"] = f.min
    if f.max is not None:
        out["maximum"] = f.max
    if f.values is not None:
        finite = [int(v) if isinstance(v, bool) else v for v in f.values if isinstance(v, int) or math.isfinite(v)]
        members = [v for v in finite if group == "float" or isinstance(v, int) or float(v).is_integer()]
        if not members:
            out = False  # type: ignore[assignment]
        else:
            out["enum"] = [int(v) if group == "int" else v for v in members]
    if group != "float":
        return out
    strings = [s for s, x in _NONFINITE if not value_failures(x, **checks)]
    return {"anyOf": [out, {"enum": strings}]} if strings else out


def _group(name: str) -> str:
    d = DType(name)
    return "bool" if d.is_bool else ("float" if d.is_floating_point else "int")


def _groups(dtypes: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in dtypes:
        out.setdefault(_group(d), []).append(dtype_name(d))
    return out


# -- fields -----------------------------------------------------------------------------


def _tensor_object(
    dtypes: list[str], axes: list[Any], literal: list[int | None], elements: Any, *, unique: bool = False
) -> dict[str, Any]:
    """One dtype group's tensor object; ``unique``: the innermost arrays (slices along the last axis) are distinct."""
    values = elements
    for i, size in enumerate(reversed(literal)):
        level: dict[str, Any] = {"type": "array", "items": values}
        if size is not None:
            level["minItems"] = level["maxItems"] = size
        if unique and i == 0:
            level["uniqueItems"] = True
        values = level
    shape: dict[str, Any] = {"type": "array", "items": False, "minItems": len(axes)}
    if axes:
        shape["prefixItems"] = axes
    return {
        "type": "object",
        "properties": {"dtype": {"enum": dtypes}, "shape": shape, "values": values},
        "required": ["dtype", "shape"],
        "additionalProperties": False,
    }


def _axes(f: Any, consts: Mapping[str, int]) -> tuple[list[Any], list[int | None], list[Any]]:
    """Per axis: its item schema in ``shape``, its literal size (or None), its symbolic entry."""
    items: list[Any] = []
    literal: list[int | None] = []
    symbolic: list[Any] = []
    for e in f.shape or ():
        size = e.evaluate(consts)
        if isinstance(size, int):
            items.append({"const": size})
            symbolic.append(size)
        elif e.is_name:
            items.append({"$ref": f"#/$defs/dims/properties/{e.args[0]}"})
            symbolic.append(e.args[0])
        else:
            items.append({"type": "integer", "minimum": 0, "x-trajschema-expr": str(e)})
            symbolic.append(str(e))
        literal.append(size if isinstance(size, int) else None)
    return items, literal, symbolic


def _checks(f: Any) -> dict[str, Any]:
    """``x-trajschema-checks``: every value check, bounds in dims as their text (``"max_expr": "experts - 1"``)."""
    checks = {"values": f.values, "min": f.min, "max": f.max, "finite": f.finite, "distinct": f.distinct}
    out = {
        k: ([_number(v) for v in x] if k == "values" else _number(x))
        for k, x in checks.items()
        if x is not None and x is not False
    }
    for k, e in (("min_expr", f.min_expr), ("max_expr", f.max_expr)):
        if e is not None:
            out[k] = str(e)
    return out


def _unsaid(f: Any) -> str:
    """What the document cannot say of ``f`` (bounds in dims not pinned, distinct float slices), in words."""
    parts = [
        f"trajschema also checks {side} {e} once {', '.join(e.names())} "
        f"{'is' if len(e.names()) == 1 else 'are'} known (pin {'it' if len(e.names()) == 1 else 'them'} "
        "with dims= or Schema.with_dims to have it in this document)."
        for side, e in (("min", f.min_expr), ("max", f.max_expr))
        if e is not None
    ]
    if f.distinct and f.is_tensor and any(_group(d) == "float" for d in f.dtype_names):
        parts.append(
            "trajschema also checks that the values along the last axis are distinct; for float dtypes this "
            "document does not (uniqueItems compares JSON numbers, not the tensor's own floats)."
        )
    return " ".join(parts)


def _field(f: Any, consts: Mapping[str, int]) -> Any:
    meta: dict[str, Any] = {"x-trajschema-pad": str(f.pad)}
    if f.has_value_checks:
        meta["x-trajschema-checks"] = _checks(f)
    f = f.bounded(consts)  # a bound in dims the schema pins is a number here
    description = " ".join(x for x in (f.description, _unsaid(f)) if x)
    if description:
        meta["description"] = description
    if f.is_tensor:
        items, literal, symbolic = _axes(f, consts)
        meta["x-trajschema-shape"] = symbolic
        alts = [
            _tensor_object(names, items, literal, _elements(g, f), unique=f.distinct and g != "float")
            for g, names in _groups(f.dtype_names).items()
        ]
    else:
        meta["x-trajschema-kind"] = f.kind
        alts = _kind_alternatives(f.kind, f, tensors=True)
    if not f.required and alts:
        alts = [*alts, _NULL]
    return _one_of(alts, meta)


def _one_of(alts: list[Any], meta: dict[str, Any]) -> Any:
    if not alts:  # kind any: anything at all
        return meta or True
    if len(alts) == 1 and isinstance(alts[0], dict):
        return {**alts[0], **meta}
    return {"anyOf": alts, **meta}


def _kind_alternatives(kind: str, f: Any, *, tensors: bool) -> list[Any]:
    """The schemas a value of ``kind`` may match; ``[]`` means anything."""
    if kind == "str":
        return [{"type": "string"}]
    if kind == "mapping":
        return [{"type": "object"}]
    if kind == "any" and (f is None or not f.has_value_checks):
        return []
    f = f if f is not None else _NoChecks
    groups = {"int": ["int"], "float": ["float"], "bool": ["bool"], "any": ["bool", "int", "float"]}[kind]
    alts = [_elements(g, f) for g in groups]
    if tensors:
        for g, names in _scalar_tensor_dtypes(kind).items():
            alts.append(_tensor_object(names, [], [], _elements(g, f)))
        if kind == "any":  # trajschema reads the values of 0-d tensors only
            alts.append({"type": "object", "properties": {"shape": {"minItems": 1}}, "required": ["dtype", "shape"]})
    return alts


class _NoChecks:
    values = min = max = None
    finite = False
    has_value_checks = False


def _scalar_tensor_dtypes(kind: str) -> dict[str, list[str]]:
    """The declarable dtypes whose 0-d tensors trajschema accepts as a value of ``kind``, by group."""
    ok = [d for d in DTYPE_NAMES if scalar_dtype_ok(kind, d)]
    return _groups(ok)


# -- dims and tags ------------------------------------------------------------------------


def _dims(plan: Plan) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for n, d in plan.dims.items():
        p: dict[str, Any] = {"type": "integer"}
        if isinstance(d, FixedDim):
            p.update({"const": d.size, "x-trajschema-dim": "fixed"})
        elif isinstance(d, FreeDim):
            p.update({"minimum": d.min, "x-trajschema-dim": "free"})
            if d.max is not None:
                p["maximum"] = d.max
            if d.multiple_of is not None:
                p["multipleOf"] = d.multiple_of
            if n in plan.padding_sizes:
                p["x-trajschema-padding"] = plan.padding_sizes[n]
            if d.from_config:
                p["x-trajschema-from-config"] = [str(e) for e in d.from_config]
        elif isinstance(d, DerivedDim):
            p.update({"minimum": 0, "x-trajschema-dim": "derived", "x-trajschema-expr": str(d.expr)})
        if d.description:
            p["description"] = d.description
        props[n] = p
    return {"type": "object", "properties": props, "additionalProperties": False}


def _tags(plan: Plan) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for n, t in plan.tags.items():
        meta: dict[str, Any] = {}
        if t.description:
            meta["description"] = t.description
        if t.default is not None:
            meta["default"] = _number(t.default)
        kind = t.kind or ("int" if t.equals is not None else "any")
        alts = _kind_alternatives(kind, None, tensors=False)
        if t.equals is not None:
            meta["x-trajschema-equals"] = str(t.equals)
            if kind == "int":
                alts = [{"type": "integer", "minimum": 0}]
        props[n] = _one_of(alts, meta)
    return {"type": "object", "properties": props, "additionalProperties": True}


# -- rendering a sample --------------------------------------------------------------------


def sample_to_json(sample: Any, *, values: bool = False) -> dict[str, Any]:
    """``sample`` (or a tag dict) as the JSON value `json_schema` documents describe.

    Every tensor becomes ``{"shape": [...], "dtype": "..."}`` (plus ``"values"``, its
    elements as nested lists, when ``values`` is true and the tensor is not a ``meta``
    tensor); a nested or sparse tensor becomes ``{"dtype": ..., "layout": ...}``, which no
    tensor field accepts. Non-finite floats become ``"NaN"`` / ``"Infinity"`` /
    ``"-Infinity"``; mappings, lists and tuples are rendered item by item.

    Examples:
        >>> from trajschema.export.jsonschema import sample_to_json
        >>> sample_to_json({"input_ids": torch.tensor([5, 6]), "score": float("nan"), "uid": "q0"})
        {'input_ids': {'shape': [2], 'dtype': 'int64'}, 'score': 'NaN', 'uid': 'q0'}
        >>> sample_to_json({"mask": torch.tensor([True, False])}, values=True)
        {'mask': {'shape': [2], 'dtype': 'bool', 'values': [True, False]}}

    Raises:
        TypeError: ``sample`` is not a mapping; a key is not a str; a value has no JSON
            rendering (a set, bytes, a complex tensor's values, any other object), or a
            container contains itself. The message names the key path.
        ValueError: containers nested more than 100 deep.
    """
    out = _render(check.as_mapping(sample), "", values, set())  # the check room reads TensorDicts (and torch)
    assert isinstance(out, dict)
    return out


def _render(v: Any, path: str, values: bool, active: set[int]) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return _number(float(v))
    if is_tensor(v):
        return _render_tensor(v, path, values)
    if not isinstance(v, (Mapping, list, tuple)):
        raise TypeError(f"sample_to_json: {path or '<sample>'}: no JSON rendering for {type(v).__name__}")
    if id(v) in active:
        raise TypeError(f"sample_to_json: {path or '<sample>'}: the value contains itself")
    if len(active) >= _MAX_DEPTH:
        raise ValueError(f"sample_to_json: {path}: nested more than {_MAX_DEPTH} deep")
    active.add(id(v))
    try:
        if isinstance(v, Mapping):
            for k in v:
                if not isinstance(k, str):
                    raise TypeError(f"sample_to_json: {path or '<sample>'}: key {k!r} is not a str")
            return {k: _render(x, f"{path}.{k}" if path else k, values, active) for k, x in v.items()}
        return [_render(x, f"{path}[{i}]", values, active) for i, x in enumerate(v)]
    finally:
        active.discard(id(v))


def _render_tensor(t: torch.Tensor, path: str, values: bool) -> dict[str, Any]:
    import torch  # loaded: `t` is a tensor

    if t.is_nested or t.layout != torch.strided:
        layout = "jagged" if t.layout == torch.jagged else ("nested" if t.is_nested else str(t.layout))
        return {"dtype": dtype_name(t.dtype), "layout": layout.removeprefix("torch.")}
    out: dict[str, Any] = {"shape": list(t.shape), "dtype": dtype_name(t.dtype)}
    if values and not t.is_meta:
        if t.is_complex():
            raise TypeError(f"sample_to_json: {path}: no JSON rendering for the values of a {t.dtype} tensor")
        data = t.detach().cpu()
        if t.is_floating_point() and not bool(torch.isfinite(data).all()):
            out["values"] = _nonfinite_to_strings(data.tolist())
        else:
            out["values"] = data.tolist()
    return out


def _nonfinite_to_strings(x: Any) -> Any:
    return [_nonfinite_to_strings(v) for v in x] if isinstance(x, list) else _number(x)
