"""Fitting a packed layout to a schema: where each field sits in a packed batch.

Binding refuses what the layout cannot hold (a ``tokens`` field without the token dim, a
``span`` the field does not have, a token dim that is not the sum of the layout's parts)
with a `LayoutDefinitionError` naming the layout, the key path and the schema.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn

from trajschema.core import DerivedDim, FixedDim, LayoutDefinitionError, PackedEntry, PackedLayout

if TYPE_CHECKING:
    from trajschema.check import Plan
    from trajschema.core import Field, Layout

__all__ = ["BoundPacked", "PackedPlaced", "bind_packed"]


@dataclasses.dataclass(frozen=True)
class PackedPlaced:
    """One schema field as a bound packed layout holds it.

    Attributes:
        field, entry: the schema's declaration and the layout's entry (after ``overrides``).
        held: resolved (``tokens``, ``nested``, ``jagged``, ``dense``, ``column``, ``alias``, ``absent``).
        key: the batch key.
        axis: ``tokens``/``nested``/``jagged``: the index in the field's shape of the dim
            laid along the run (the token dim, or ``span``) or that is ragged.
    """

    field: Field
    entry: PackedEntry
    held: str
    key: str
    axis: int | None

    @property
    def name(self) -> str:
        return self.field.name

    @property
    def at(self) -> int:
        """``axis`` of a ``tokens``, ``nested`` or ``jagged`` field (binding sets it for those)."""
        assert self.axis is not None, f"{self.name} is held {self.held}: it has no axis on the run"
        return self.axis


@dataclasses.dataclass(frozen=True)
class BoundPacked:
    """A packed layout fitted to a schema (see `bind_packed`).

    Attributes:
        layout, plan: the two.
        placed: every schema field, in the schema's order.
        dense: the dense layout of the ``dense`` fields, its packed fields marked absent, or ``None``.
    """

    layout: PackedLayout
    plan: Plan
    placed: Mapping[str, PackedPlaced]
    dense: Layout | None

    def held(self, *kinds: str) -> list[PackedPlaced]:
        return [p for p in self.placed.values() if p.held in kinds]

    @property
    def positions(self) -> PackedPlaced | None:
        return self.placed.get(self.layout.positions) if self.layout.positions else None


def _fail(layout: PackedLayout, plan: Plan, path: str, problem: str) -> NoReturn:
    raise LayoutDefinitionError(layout.source, path, f"{problem} (with schema {plan.name!r})")


def _axis_of(f: Field, dim: str) -> int | None:
    found = [i for i, e in enumerate(f.shape or ()) if e.is_name and e.args[0] == dim]
    return found[0] if len(found) == 1 else None


def _per_sample(plan: Plan, f: Field) -> int | None:
    """The index of the first axis of ``f`` whose size varies per sample (a free or derived dim)."""
    for i, e in enumerate(f.shape or ()):
        if any(not isinstance(plan.dims.get(n), FixedDim) for n in e.names()):
            return i
    return None


def _default(layout: PackedLayout, plan: Plan, f: Field) -> tuple[str, int | None]:
    if layout.dense:
        return "dense", None
    token_axis = _axis_of(f, layout.tokens) if f.is_tensor else None
    if token_axis is not None:
        return "tokens", token_axis
    ragged = _per_sample(plan, f) if f.is_tensor else None
    return ("jagged", ragged) if ragged is not None else ("column", None)


def _resolve(layout: PackedLayout, plan: Plan, f: Field) -> PackedPlaced:
    entry = layout.entry(f.name, plan.lineage)
    path = f"fields.{f.name}"
    if entry.held is None and entry.span is not None:
        held, axis = "tokens", None
    elif entry.held is None:
        held, axis = _default(layout, plan, f)
    else:
        held, axis = entry.held, None
    if held == "nested" and not all(n in plan.fields for n in entry.nested_with):
        held = "dense"  # verl nests the teacher fields only as a pair
    if held in ("tokens", "nested"):
        dim = entry.span or layout.tokens
        axis = _axis_of(f, dim) if f.is_tensor else None
        if axis is None:
            _fail(
                layout,
                plan,
                path,
                f"{held} field {f.name!r} ({f.describe()}) has no single {dim!r} axis to lay on the run",
            )
    if held == "jagged":
        axis = _per_sample(plan, f) if f.is_tensor else None
        if axis is None:
            _fail(layout, plan, path, f"jagged field {f.name!r} ({f.describe()}) has no per-sample dim")
    if entry.span is not None and held != "tokens":
        _fail(layout, plan, path, f"span: applies to tokens fields; {f.name!r} is held {held}")
    return PackedPlaced(field=f, entry=entry, held=held, key=entry.key or f.name, axis=axis)


def _check_tokens_dim(layout: PackedLayout, plan: Plan) -> None:
    d = plan.dims.get(layout.tokens)
    if d is None:
        _fail(layout, plan, "tokens", f"the schema has no dim {layout.tokens!r}")
    if layout.parts:
        want = " + ".join(layout.parts)
        if not isinstance(d, DerivedDim) or str(d.expr).replace(" ", "") != want.replace(" ", ""):
            found = f"{layout.tokens}: {d.expr}" if isinstance(d, DerivedDim) else f"a {type(d).__name__}"
            _fail(layout, plan, "parts", f"the schema's {layout.tokens!r} is not {want} (found {found})")


def _dense_part(layout: PackedLayout, placed: Mapping[str, PackedPlaced]) -> Layout | None:
    if not layout.dense:
        return None
    from trajschema.core import FieldEntry
    from trajschema.files import as_layout

    dense = as_layout(layout.dense, argument=f"{layout.name}: dense:")
    gone = {n: FieldEntry(held="absent") for n, p in placed.items() if p.held != "dense"}
    overrides = {fam: {n: e for n, e in sec.items() if n not in gone} for fam, sec in dense.overrides.items()}
    return dataclasses.replace(
        dense, fields={**dense.fields, **gone}, overrides=overrides, pad_token_id=layout.pad_token_id
    )


@functools.lru_cache(maxsize=256)
def bind_packed(layout: PackedLayout, plan: Plan) -> BoundPacked:
    """``layout`` fitted to the schema of ``plan`` (cached: both are immutable).

    Raises:
        LayoutDefinitionError: the layout cannot hold the schema, naming the key path.
    """
    _check_tokens_dim(layout, plan)
    placed = {n: _resolve(layout, plan, f) for n, f in plan.fields.items()}
    for n, p in placed.items():
        if p.held == "alias" and p.entry.source not in {q.key for q in placed.values()}:
            _fail(layout, plan, f"fields.{n}.alias", f"{p.entry.source!r} is no batch key of this layout")
    if layout.positions and layout.positions in placed and placed[layout.positions].held == "column":
        _fail(layout, plan, "positions", f"{layout.positions!r} is not laid along the tokens")
    return BoundPacked(layout=layout, plan=plan, placed=placed, dense=_dense_part(layout, placed))
