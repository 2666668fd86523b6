"""A schema as rows of display strings: what ``trajschema show`` and the generated docs pages print.

One place decides how a field, dim or tag reads to a person, so the command line and the
documentation site cannot describe the same schema differently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from trajschema.core import DerivedDim, Expr, Field, FixedDim, Tag

if TYPE_CHECKING:
    from trajschema.check import Plan

__all__ = ["DimRow", "FieldRow", "TagRow", "dim_rows", "extends", "field_rows", "tag_rows", "value_checks"]


@dataclasses.dataclass(frozen=True)
class FieldRow:
    """One field: ``shape`` reads ``"[rope_rows, seq]"`` (empty for non-tensors); ``dtype`` the dtypes or the kind."""

    name: str
    shape: str
    dtype: str
    required: str
    pad: str
    checks: str
    description: str


@dataclasses.dataclass(frozen=True)
class DimRow:
    """One dim: ``kind`` is ``fixed``, ``free`` or ``derived``; ``padding_default`` is empty when there is none."""

    name: str
    kind: str
    definition: str
    padding_default: str
    description: str


@dataclasses.dataclass(frozen=True)
class TagRow:
    """One declared tag; empty strings where the tag declares nothing."""

    name: str
    kind: str
    default: str
    equals: str
    description: str


def _dim_bound(side: str, expr: Expr, sizes: Mapping[str, int]) -> str:
    """``"max experts - 1"``, with its value when every dim it names is fixed: ``"max experts - 1 (= 127)"``."""
    value = expr.evaluate(sizes)
    return f"{side} {expr}" + ("" if value is None else f" (= {value})")


def value_checks(f: Field, sizes: Mapping[str, int] | None = None) -> str:
    """``"values [0, 1]; min 0; max experts - 1; distinct; finite"``, or ``""`` for a field without value checks.

    ``sizes`` (the schema's fixed dims) shows what a bound written in dims comes to:
    ``max experts - 1 (= 127)`` once ``experts`` is pinned.
    """
    parts = []
    if f.values is not None:
        parts.append("values [" + ", ".join(repr(v) for v in f.values) + "]")
    for side, literal, expr in (("min", f.min, f.min_expr), ("max", f.max, f.max_expr)):
        if literal is not None:
            parts.append(f"{side} {literal!r}")
        if expr is not None:
            parts.append(_dim_bound(side, expr, sizes or {}))
    if f.distinct:
        parts.append("distinct")
    if f.finite:
        parts.append("finite")
    return "; ".join(parts)


def _fixed_sizes(plan: Plan) -> dict[str, int]:
    return {n: d.size for n, d in plan.dims.items() if isinstance(d, FixedDim)}


def _field_row(f: Field, sizes: Mapping[str, int]) -> FieldRow:
    if f.is_tensor:
        shape = "[" + ", ".join(str(e) for e in f.shape or ()) + "]"
        dtype = " | ".join(f.dtype_names)
    else:
        shape, dtype = "", f.kind
    return FieldRow(
        name=f.name,
        shape=shape,
        dtype=dtype,
        required="yes" if f.required else "no",
        pad=str(f.pad),
        checks=value_checks(f, sizes),
        description=f.description,
    )


def field_rows(plan: Plan) -> list[FieldRow]:
    """The schema's fields in declaration order (inherited ones included)."""
    sizes = _fixed_sizes(plan)
    return [_field_row(f, sizes) for f in plan.fields.values()]


def dim_rows(plan: Plan) -> list[DimRow]:
    """The schema's dims with their bounds or definition and the padding default of free dims."""
    rows = []
    for d in plan.dims.values():
        if isinstance(d, FixedDim):
            kind = "fixed"
        elif isinstance(d, DerivedDim):
            kind = "derived"
        else:
            kind = "free"
        default = plan.padding_sizes.get(d.name)
        rows.append(DimRow(d.name, kind, d.describe(), "" if default is None else str(default), d.description))
    return rows


def _tag_row(t: Tag) -> TagRow:
    return TagRow(
        name=t.name,
        kind=t.kind or "",
        default="" if t.default is None else repr(t.default),
        equals="" if t.equals is None else str(t.equals),
        description=t.description,
    )


def tag_rows(plan: Plan) -> list[TagRow]:
    """The schema's declared tags."""
    return [_tag_row(t) for t in plan.tags.values()]


def extends(plan: Plan) -> list[str]:
    """The schemas this one inherits from, nearest first, in resolution (C3) order."""
    return list(plan.lineage[1:])
