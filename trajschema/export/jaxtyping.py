"""A schema's tensor fields as jaxtyping annotations, for functions checked with ``@jaxtyped``.

Each tensor field becomes ``<Dtype>[torch.Tensor, "<dims>"]``, one jaxtyping axis per
declared axis:

* an integer literal, a fixed dim (``rope_rows: 4``) and an expression over fixed dims
  only (``rope_rows - 1``) become the literal size: ``"4 seq"``;
* a free dim and a *declared* derived dim (``seq: prompt + response``) become a named
  axis (``"seq"``), which jaxtyping binds on first sight and holds every other field of
  the same call to. A declared derived dim stays a name, not jaxtyping's symbolic
  ``"prompt+response"``: jaxtyping evaluates a symbolic axis only after every name in it
  was bound by an earlier argument of the same call (else it raises
  ``AnnotationError``), and a symbolic axis binds no name, so a function taking only
  ``input_ids`` and ``position_ids`` could not be annotated. The relation
  ``seq == prompt + response`` and the bounds of free dims (``min``, ``max``,
  ``multiple_of``) are therefore *not* checked by the annotations (nor by the
  hand-written jaxtyping baseline in ``benchmarks/bench_core.py``, which asserts them in
  its body): check them with [`validate`][trajschema.Schema.validate];
* an inline shape expression (``shape: [prompt + response]``), which has no name,
  becomes jaxtyping's symbolic axis (``"prompt+response"``, written without spaces as
  jaxtyping splits axes on whitespace; a derived dim inside it is expanded to its
  expression when it is not itself a named axis) when every name in it is bound by a
  named axis of a *required* tensor field declared *before* it (or an earlier axis of the
  same field). Annotating a function's parameters in the schema's field order, as
  `all_annotations` lists them, then checks the expression; a function that leaves
  out the fields binding those names gets jaxtyping's ``AnnotationError``. An expression
  whose names no earlier field binds becomes the anonymous axis ``"_"``: any size passes;
* jaxtyping reads a leading ``_`` as "anonymous" and cannot evaluate a keyword, so a dim
  named ``_x`` or ``if`` gets the axis name ``d_x`` / ``dif`` (a ``d`` is prefixed until
  the name is free).

Dtypes: ``bool`` -> ``Bool``, ``uint8`` -> ``UInt8``, ``int8`` .. ``int64`` -> ``Int8`` ..
``Int64``, ``float16`` / ``bfloat16`` / ``float32`` / ``float64`` -> ``Float16`` /
``BFloat16`` / ``Float32`` / ``Float64``. A list of dtypes becomes a subclass of
``jaxtyping.AbstractDtype`` listing exactly those dtypes (jaxtyping's documented way to
define a dtype set), named like ``Int16|Int32|Int64`` (found by that name on this module,
so annotations pickle). jaxtyping's own categories are not
used because none equals a set trajschema can declare: ``Int`` also admits ``int4``
(torch has ``torch.int4``), ``Float`` the float8 dtypes. One dtype set always maps to the
same class, so annotations of equal fields are the same object.

Value checks are not part of an annotation (jaxtyping checks dtypes and shapes, never
elements): ``values``, ``min`` / ``max`` (literal or written in dims, ``max: experts - 1``),
``finite`` and ``distinct`` are left to [`validate`][trajschema.Schema.validate].
"""

from __future__ import annotations

import functools
import keyword
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trajschema.core import DerivedDim, Expr, FixedDim, did_you_mean, dtype_name

if TYPE_CHECKING:
    from trajschema.check import Plan

__all__ = ["AxisNames", "all_annotations", "dense_annotations", "field_annotation", "symbolic_axis"]

#: trajschema dtype name -> jaxtyping dtype class name.
JAXTYPING_DTYPE = {
    "bool": "Bool",
    "uint8": "UInt8",
    "int8": "Int8",
    "int16": "Int16",
    "int32": "Int32",
    "int64": "Int64",
    "uint16": "UInt16",
    "float16": "Float16",
    "bfloat16": "BFloat16",
    "float32": "Float32",
    "float64": "Float64",
}


_DTYPE_BY_CLASS = {v: k for k, v in JAXTYPING_DTYPE.items()}


def __getattr__(name: str) -> Any:
    """The dtype-set classes by name (``Int16|Int32|Int64``), so annotations using them pickle."""
    parts = name.split("|")
    if len(parts) > 1 and all(p in _DTYPE_BY_CLASS for p in parts):
        return _dtype_class(tuple(_DTYPE_BY_CLASS[p] for p in parts))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def field_annotation(plan: Plan, field: str) -> Any:
    """The jaxtyping annotation of one tensor field of ``schema``.

    Examples:
        >>> ts.load_schema("vlm_mrope").jaxtyping("position_ids")
        <class 'jaxtyping.Int64[Tensor, '4 seq']'>
        >>> ts.load_schema("moe_routed").jaxtyping("routed_experts")
        <class 'jaxtyping.Int16|Int32|Int64|UInt8|UInt16[Tensor, 'seq layers topk']'>

    Raises:
        TypeError: ``field`` is not a string, or names a non-tensor field.
        ValueError: ``schema`` has no field ``field``.
    """
    f = _tensor_field(plan, field)
    return _annotate(plan, f.name, AxisNames(plan))


def all_annotations(plan: Plan) -> dict[str, Any]:
    """The jaxtyping annotation of every tensor field of ``schema``, in declaration order.

    Examples:
        >>> ann = ts.load_schema("text").annotations()
        >>> ann["input_ids"].dim_str, list(ann)[:3]
        ('seq', ['prompts', 'responses', 'input_ids'])
    """
    names = AxisNames(plan)
    return {f.name: _annotate(plan, f.name, names) for f in plan.fields.values() if f.is_tensor}


def dense_annotations(plan: Plan, bound: Any) -> dict[str, Any]:
    """The jaxtyping annotation of every tensor column of a dense batch, by batch key.

    What [`Schema.annotations`][trajschema.Schema.annotations] returns with ``layout=``;
    ``bound`` is the layout fitted to ``schema`` (`trajschema.dense.bind_layout`; this room
    sits below the dense one, so it takes the fitted form). The first axis is ``batch``;
    the axis a layout pads is named after its dim, ``<dim>_padded`` (``seq_padded``,
    ``prompt_padded``, ``response_padded``), bound once per call like any jaxtyping name,
    so every tensor padded along one axis must share its length; the other axes are as in
    [`Schema.jaxtyping`][trajschema.Schema.jaxtyping]. The dtype is the layout's
    ``dtype:`` when it sets one (SkyRL's float32 ``loss_mask``), else the schema's.
    Fields the layout does not hold as a tensor column (``absent``, ``slice_of``,
    ``same_as``, ``gather``, ``metadata.<name>`` keys) have none.

    The annotations check shapes and dtypes only: where the masks put the real values,
    and every sample's own sizes, are [`validate_batch`][trajschema.Schema.validate_batch]'s
    (with ``layout=``).

    Examples:
        >>> ann = ts.load_schema("text").annotations(layout="skyrl")
        >>> ann["sequences"]
        <class 'jaxtyping.Int64[Tensor, 'batch seq_padded']'>
        >>> ann["loss_mask"]
        <class 'jaxtyping.Float32[Tensor, 'batch response_padded']'>
    """
    columns = [
        p
        for p in bound.placed.values()
        if p.held == "column" and p.field.is_tensor and not p.key.startswith("metadata.")
    ]
    padded = {p.dim: f"{p.dim}_padded" for p in columns if p.dim is not None}
    names = AxisNames(plan, reserved=frozenset({"batch", *padded.values()}))
    seen: set[str] = set()  # names bound by a named axis of an earlier required column
    out = {}
    for p in columns:
        axes, local = ["batch"], set(seen)
        for i, e in enumerate(p.field.shape or ()):
            axes.append(padded[p.dim] if i + 1 == p.axis else _axis(e, names, local))
            local |= _plain_names([e]) if i + 1 != p.axis else set()
        if p.field.required:
            seen = local
        dtypes = [p.entry.dtype] if p.entry.dtype is not None else p.field.dtypes
        out[p.key] = _cached_annotation(tuple(dtype_name(d) for d in dtypes), " ".join(axes))
    return out


def _tensor_field(plan: Plan, field: Any) -> Any:
    if not isinstance(field, str):
        raise TypeError(f"schema {plan.name!r}: a field name must be a str, found {_shown(field)}")
    f = plan.fields.get(field)
    if f is None:
        hint = did_you_mean(field, plan.fields)
        raise ValueError(f"schema {plan.name!r} has no field {field!r}{hint} (its fields: {', '.join(plan.fields)})")
    if not f.is_tensor:
        raise TypeError(
            f"schema {plan.name!r}: field {field!r} is a {f.kind} field, not a tensor; "
            f"jaxtyping annotates tensors only (annotate it as a plain Python type)"
        )
    return f


def _shown(v: Any) -> str:
    """``int 3``: the type and, when short and safe to take, the repr of a refused field name."""
    from trajschema.core import describe_value, shown_value

    text = shown_value(v)
    return describe_value(v) if text == describe_value(v) else f"{type(v).__name__} {text}"


class AxisNames:
    """The jaxtyping axis name of each dim: the dim's own name unless jaxtyping would misread it."""

    def __init__(self, plan: Plan, reserved: frozenset[str] = frozenset()) -> None:
        dims: Mapping[str, Any] = plan.dims
        #: The dims whose size the schema alone decides: fixed ones, and derived ones over them.
        self.fixed: dict[str, int] = {n: d.size for n, d in dims.items() if isinstance(d, FixedDim)}
        for d in plan.dim_plan.derived:
            size = d.expr.evaluate(self.fixed)
            if isinstance(size, int) and d.name in dims:
                self.fixed[d.name] = size
        self.dims = dims
        taken = set(dims) | reserved
        self.names: dict[str, str] = {}
        for n in dims:
            alias = n
            while (
                alias.startswith("_")
                or keyword.iskeyword(alias)
                or (alias != n and alias in taken)
                or alias in reserved
            ):
                alias = "d" + alias
            taken.add(alias)
            self.names[n] = alias


def _annotate(plan: Plan, field: str, names: AxisNames) -> Any:
    return _cached_annotation(*_field_parts(plan, field, names))


def _field_parts(plan: Plan, field: str, names: AxisNames) -> tuple[tuple[str, ...], str]:
    """A tensor field's annotation as its parts: the dtype names and jaxtyping's dim string.

    The one place a function parameter's annotation is decided: `field_annotation` and
    `all_annotations` build the annotation objects from these. (The exported sample class,
    `trajschema.export.jaxtyping_class`, decides its own axes: it holds every field at once,
    so it writes a derived dim as jaxtyping's symbolic axis where this keeps the name.)
    """
    bound = _bound_before(plan, field)
    axes = []
    shape = plan.fields[field].shape or ()
    for i, e in enumerate(shape):
        axes.append(_axis(e, names, bound | _plain_names(shape[:i])))
    return plan.fields[field].dtype_names, " ".join(axes)


@functools.lru_cache(maxsize=4096)
def _cached_annotation(dtypes: tuple[str, ...], dim_str: str) -> Any:
    import torch  # the live annotations only: the axis names and the generated source need no torch

    return _dtype_class(dtypes)[torch.Tensor, dim_str]


@functools.lru_cache(maxsize=256)
def _dtype_class(dtypes: tuple[str, ...]) -> Any:
    import jaxtyping

    if len(dtypes) == 1:
        return getattr(jaxtyping, JAXTYPING_DTYPE[dtypes[0]])
    name = "|".join(JAXTYPING_DTYPE[d] for d in dtypes)
    return type(name, (jaxtyping.AbstractDtype,), {"dtypes": list(dtypes), "__module__": __name__})


def _plain_names(shape: Any) -> set[str]:
    return {e.args[0] for e in shape if e.is_name}


def _bound_before(plan: Plan, field: str) -> set[str]:
    """Dims a named axis of a required tensor field declared before ``field`` binds."""
    out: set[str] = set()
    for f in plan.fields.values():
        if f.name == field:
            return out
        if f.is_tensor and f.required:  # an optional field may be None, binding nothing
            out |= _plain_names(f.shape or ())
    return out


def _axis(e: Expr, names: AxisNames, bound: set[str]) -> str:
    folded = e.evaluate(names.fixed)
    if isinstance(folded, int):
        return str(folded)
    if e.is_name:
        return names.names[e.args[0]]
    rendered = symbolic_axis(e, names, bound, top=True)
    return rendered if rendered is not None else "_"


def symbolic_axis(e: Expr, names: AxisNames, bound: set[str], *, top: bool = False) -> str | None:
    """``e`` as a Python expression jaxtyping can evaluate from the bound names, or ``None``."""
    folded = e.evaluate(names.fixed)
    if isinstance(folded, int):
        return str(folded) if folded >= 0 or top else f"({folded})"
    if e.is_name:
        n = e.args[0]
        if n in bound:
            return names.names[n]
        d = names.dims[n]
        if isinstance(d, DerivedDim):
            return symbolic_axis(d.expr, names, bound, top=top)
        return None
    parts = [symbolic_axis(a, names, bound) for a in e.args]
    if any(p is None for p in parts):
        return None
    text = f"-{parts[0]}" if e.op == "neg" else f"{parts[0]}{e.op}{parts[1]}"
    return text if top else f"({text})"
