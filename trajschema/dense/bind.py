"""Fitting a layout to one schema: where every field of the schema sits in the dense batch.

`bind_layout` checks once, per (layout, plan) pair, everything that does not depend on
data: a padded field names one per-sample dim the layout pads, a slice names a part of
its source's axis, the masks that give sizes are 0/1 fields on the right axis, every
per-sample dim gets a length. Its answer, a `BoundLayout`, is what the check, the
conversions and the padding read.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, NoReturn

from trajschema.core import (
    PAD_TOKEN,
    Axis,
    Field,
    FieldEntry,
    Layout,
    LayoutDefinitionError,
    did_you_mean,
    fits_dtype,
)
from trajschema.dense.view import METADATA

if TYPE_CHECKING:
    from trajschema.check import Plan

__all__ = ["BoundLayout", "Placed", "bind_layout", "per_row_metadata", "sliced_layout"]


@dataclasses.dataclass(frozen=True)
class Placed:
    """One schema field as a bound layout holds it.

    Attributes:
        field: the schema's declaration.
        entry: the layout's entry for it (after ``overrides``).
        key: the batch key of a ``column`` (``metadata.<name>`` reads ``batch.metadata``).
        dim: the per-sample dim the layout pads in this field (``None``: none; the field
            is stored as ``(B, *shape)``).
        axis: that dim's axis in the dense tensor, counting the batch axis (shape index + 1).
    """

    field: Field
    entry: FieldEntry
    key: str | None
    dim: str | None
    axis: int | None

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def held(self) -> str:
        return self.entry.held


@dataclasses.dataclass(frozen=True)
class BoundLayout:
    """A layout fitted to a schema (see `bind_layout`).

    Attributes:
        layout: the layout.
        plan: the schema's plan, with the fields the layout ``adds`` after the schema's own.
        placed: every field of ``plan``, in its order.
        parts: every per-sample dim (an axis's, a block's, or one a block ``holds``) by name.
        sizes: the mask field that counts each dim that ``sizes:`` names.
    """

    layout: Layout
    plan: Plan
    placed: Mapping[str, Placed]
    parts: frozenset[str]
    sizes: Mapping[str, str]

    def axis_of(self, dim: str) -> Axis:
        return self.layout.axes[dim]

    def columns(self) -> list[Placed]:
        return [p for p in self.placed.values() if p.held == "column"]

    def derived(self, sources: Collection[str]) -> frozenset[str]:
        """The fields held as a ``slice_of`` or ``same_as`` one of the columns ``sources``."""
        return frozenset(
            n for n, p in self.placed.items() if p.held in ("slice", "same_as") and p.entry.source in sources
        )


def _fail(layout: Layout, plan: Plan, path: str, problem: str) -> NoReturn:
    raise LayoutDefinitionError(layout.source, path, f"{problem} (with schema {plan.name!r})")


def _per_sample_dims(layout: Layout) -> frozenset[str]:
    dims = set(layout.axes)
    for axis in layout.axes.values():
        for b in axis.blocks:
            dims.add(b.dim)
            dims.update(b.holds)
    return frozenset(dims)


def _padded_dim(
    layout: Layout, plan: Plan, f: Field, parts: frozenset[str], path: str
) -> tuple[str | None, int | None]:
    if not f.is_tensor or not f.shape:
        return None, None
    found = [(i, e.args[0]) for i, e in enumerate(f.shape) if e.is_name and e.args[0] in parts]
    composite = [str(e) for e in f.shape if not e.is_name and set(e.names()) & parts]
    if composite:
        _fail(
            layout,
            plan,
            path,
            f"field {f.name!r} has an axis {composite[0]!r} built from padded dims; "
            "a layout pads axes named by one dim",
        )
    if len(found) > 1:
        _fail(
            layout,
            plan,
            path,
            f"field {f.name!r} has two padded dims ({found[0][1]}, {found[1][1]}); a layout pads one axis per field",
        )
    if not found:
        return None, None
    return found[0][1], found[0][0] + 1


def _place(layout: Layout, plan: Plan, f: Field, parts: frozenset[str]) -> Placed:
    entry = layout.entry(f.name, plan.lineage)
    path = f"fields.{f.name}"
    dim, axis = _padded_dim(layout, plan, f, parts, path)
    if entry.held == "gather" and f.kind not in ("mapping", "any"):
        _fail(layout, plan, path, f"gather builds a mapping per sample; field {f.name!r} is {f.describe()}")
    if entry.held == "column" and dim is not None and dim not in layout.axes:
        _fail(
            layout,
            plan,
            path,
            f"dim {dim!r} is only part of a padded axis in this layout; "
            f"hold {f.name!r} as slice_of the field that carries the axis",
        )
    if entry.dtype is not None and not f.is_tensor:
        _fail(layout, plan, path, f"dtype: applies to tensor fields; {f.name!r} is {f.kind}")
    key = (entry.key or f.name) if entry.held == "column" else None
    return Placed(field=f, entry=entry, key=key, dim=dim, axis=axis)


def _check_source(bound: dict[str, Placed], p: Placed, layout: Layout, plan: Plan) -> None:
    path = f"fields.{p.name}"
    src = bound.get(p.entry.source or "")
    if src is None:
        _fail(layout, plan, path, f"{p.held} names {p.entry.source!r}, which is not a field of the schema")
    if src.held != "column":
        _fail(
            layout, plan, path, f"{p.held} names {src.name!r}, which this layout holds as {src.held}, not as a column"
        )
    if p.held == "same_as":
        if (src.dim, src.field.shape) != (p.dim, p.field.shape):
            _fail(
                layout,
                plan,
                path,
                f"same_as {src.name!r}: its shape {src.field.describe()} is not {p.field.describe()}",
            )
        return
    if p.dim is None or src.dim is None:
        _fail(
            layout,
            plan,
            path,
            f"slice_of {src.name!r}: both must have a padded dim ({p.field.describe()}, {src.field.describe()})",
        )
    axis = layout.axes[src.dim]
    if not any(p.dim == b.dim or p.dim in b.holds for b in axis.blocks):
        _fail(layout, plan, path, f"slice_of {src.name!r}: its axis {src.dim!r} holds no part {p.dim!r}")


def _check_sizes(bound: Mapping[str, Placed], layout: Layout, plan: Plan, needed: frozenset[str]) -> dict[str, str]:
    sizes: dict[str, str] = {}
    for dim, mask in layout.sizes.items():
        p = bound.get(mask)
        if p is None:
            if dim in needed:
                _fail(layout, plan, f"sizes.{dim}", f"mask {mask!r} is not a field of the schema")
            continue
        if p.held != "column" or p.dim is None:
            _fail(layout, plan, f"sizes.{dim}", f"mask {mask!r} must be a column with a padded axis")
        if not any(dim in (b.dim, *b.holds) or dim == p.dim for b in layout.axes[p.dim].blocks):
            _fail(layout, plan, f"sizes.{dim}", f"mask {mask!r} pads axis {p.dim!r}, which does not hold {dim!r}")
        if p.field.values is None or not set(p.field.values) <= {0, 1}:
            _fail(layout, plan, f"sizes.{dim}", f"mask {mask!r} must declare values: [0, 1] in the schema")
        sizes[dim] = mask
    return sizes


def with_added(layout: Layout, plan: Plan) -> Plan:
    """``plan`` with the fields ``layout`` adds (``adds:``) after its own; ``plan`` itself when it adds none
    or ``plan`` holds them already (a plan a bound layout made).

    Raises:
        LayoutDefinitionError: an added field the schema declares otherwise, or one over a dim the schema lacks.
    """
    if all(plan.fields.get(n) == f for n, f in layout.adds.items()):
        return plan
    from trajschema.check import build_plan

    for name, f in layout.adds.items():
        if name in plan.fields:
            _fail(
                layout,
                plan,
                f"adds.{name}",
                f"the schema declares a field {name!r} already ({plan.fields[name].describe()})",
            )
        for d in (n for e in f.shape or () for n in e.names()):
            if d not in plan.dims:
                hint = did_you_mean(d, list(plan.dims))
                _fail(layout, plan, f"adds.{name}.shape", f"dim {d!r} is not a dim of the schema{hint}")
    return build_plan(**{**plan.declarations, "fields": {**plan.fields, **layout.adds}})


@functools.lru_cache(maxsize=256)
def bind_layout(layout: Layout, plan: Plan) -> BoundLayout:
    """Fit ``layout`` to ``schema`` (cached per pair); the bound plan holds the fields the layout ``adds``.

    Raises:
        LayoutDefinitionError: the layout cannot hold a field of the schema as it says,
            naming the layout file, the key and the schema.
    """
    plan = with_added(layout, plan)
    parts = _per_sample_dims(layout)
    placed = {n: _place(layout, plan, f, parts) for n, f in plan.fields.items()}
    for p in placed.values():
        if p.held in ("slice", "same_as"):
            _check_source(placed, p, layout, plan)
    used = frozenset(p.dim for p in placed.values() if p.dim is not None and p.held != "absent")
    sizes = _check_sizes(placed, layout, plan, used)
    for t in layout.tags:
        if t not in plan.tags:
            _fail(layout, plan, f"tags.{t}", f"the schema has no tag {t!r}")
    bound = BoundLayout(layout=layout, plan=plan, placed=placed, parts=parts, sizes=sizes)
    if layout.pad_token_id is not None:
        check_pad_token(bound, layout.pad_token_id, "layout.with_pad_token(pad_token_id)")
    return bound


def check_pad_token(bound: BoundLayout, pad_token_id: int, argument: str) -> None:
    """Refuse a pad id that a field padded with it cannot hold, when the layout meets the schema.

    Raises:
        ValueError: naming ``argument``, the field and its dtypes (``2**31`` for an int32
            ``responses``), instead of an overflow deep inside padding or a conversion.
    """
    for p in bound.placed.values():
        f = p.field
        if p.entry.pad != PAD_TOKEN or not f.is_tensor or p.held == "absent":
            continue
        if not any(fits_dtype(pad_token_id, d) for d in f.dtype_names):
            raise ValueError(
                f"{argument}: pad id {pad_token_id} fits no dtype of field {f.name!r} "
                f"({', '.join(f.dtype_names)}), which layout {bound.layout.name!r} pads with it"
            )


@functools.lru_cache(maxsize=16)
def sliced_layout(layout: Layout) -> Layout:
    """``layout`` with every block ``length: fixed``: for a slice of a batch (one row, a
    mini- or micro-batch), whose widths are the whole batch's, not its own rows' maximum."""
    axes = {
        dim: dataclasses.replace(axis, blocks=tuple(dataclasses.replace(b, length="fixed") for b in axis.blocks))
        for dim, axis in layout.axes.items()
    }
    return dataclasses.replace(layout, axes=axes)


def per_row_metadata(bound: BoundLayout) -> frozenset[str]:
    """The metadata names the layout reads one entry per row from (fields' and tags' ``metadata.<name>`` keys)."""
    keys = [p.key or "" for p in bound.placed.values()] + list(bound.layout.tags.values())
    return frozenset(k[len(METADATA) :] for k in keys if k.startswith(METADATA))
