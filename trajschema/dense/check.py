"""Checking a dense batch against a schema in a layout.

In order: the batch is read (`trajschema.dense.view`); every column's dense shape and
dtype is compared with the layout's (``shape``, ``dtype``, sample ``None``: a dense column
is one shape for all rows; a nested or sparse tensor, which has no dense shape to compare,
is ``kind``; a column along a concatenated axis is as wide as its blocks together), and a
mask of the wrong kind or shape stops the check there (it gives no lengths); the masks
give each row's lengths (`trajschema.dense.geometry`: ``mask`` and ``length``
violations); the padded regions hold the layout's pad values (``padded``; a 0/1 field's
ones outside its region are ``mask``); a row tagged ``is_padding`` has zero loss and
response masks (``padding``); then the real regions, as a jagged TensorDict
(`trajschema.dense.extract`), go through the jagged engine, so every schema rule applies
to each row as for a jagged batch.

Violations name the batch key (``rewards``, not ``rm_scores``; the message names the
schema field when it differs). A row with a broken mask (a size mask that is not one run,
or a response or loss mask with ones outside the region the size masks give) reports the
mask only: its lengths, and so everything else about it, including the batch's padded
length, cannot be trusted. A ``meta`` batch is a ``mask`` violation (a mask's values are
the sizes, and a ``meta`` tensor has none). A column left out of the rest (absent, or of
the wrong type, kind, shape or dtype) is reported once, under its key: the fields the layout
derives from it (``slice_of``, ``same_as``: verl's ``loss_mask``) are not ``missing``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import BatchView, build_plan, check_args, check_batch
from trajschema.core import ANY, EDGE, PAD_TOKEN, FixedDim, Violation, any_per_row, describe_value, first_true
from trajschema.dense.bind import bind_layout
from trajschema.dense.extract import dense_to_jagged, dense_to_rows, dense_to_view
from trajschema.dense.geometry import Geometry, GeometryError, axis_widths, check_max, measure
from trajschema.dense.view import is_plain, read_dense, rows_violation

if TYPE_CHECKING:
    from tensordict import TensorDict

    from trajschema.check import Plan
    from trajschema.core import Layout
    from trajschema.dense.bind import BoundLayout, Placed
    from trajschema.dense.view import DenseView

__all__ = ["DenseCheck", "check_dense"]


@dataclasses.dataclass
class DenseCheck:
    """What checking a dense batch found.

    Attributes:
        violations: every violation, with the sample index, the batch key and a code.
        bindings: the dims each sample with a violation bound, as for a jagged batch.
        lengths: the per-sample length of every per-sample dim (int64 ``(B,)`` tensors).
        jagged: the real regions as a jagged TensorDict of schema field names (only when
            asked with ``extract=True``; ``None`` when the layout itself is broken), or
            with ``rows=True`` as a list of per-row samples, or with ``engine=False`` as
            the `BatchView` the engine would read (list columns as plain lists).
        geometry: what the masks say (``None`` when the layout itself is unreadable).
        tags: the tag dicts the check used (given, or read where the layout's ``tags:`` say).
    """

    violations: list[Violation]
    bindings: dict[int | None, dict[str, int]]
    lengths: dict[str, torch.Tensor]
    jagged: TensorDict | BatchView | list[dict[str, Any]] | None = None
    geometry: Geometry | None = None
    tags: Any = None


def _dt(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _expected_shape(p: Placed, n: int, widths: Mapping[str, int], fixed: Mapping[str, int]) -> list[int | str]:
    want: list[int | str] = [n]
    for e in p.field.shape or ():
        name = e.args[0] if e.is_name else None
        if name is not None and name == p.dim:
            want.append(widths.get(name, name))
        elif name is not None and name in fixed:
            want.append(fixed[name])
        else:
            want.append(str(e))
    return want


def _shape_problem(p: Placed, col: Any, n: int, widths: Mapping[str, int], fixed: Mapping[str, int]) -> str | None:
    """Why a tensor column's dense shape is not the layout's (``None``: it is)."""
    want = _expected_shape(p, n, widths, fixed)
    shown = "(" + ", ".join(map(str, want)) + ")"
    if not isinstance(col, torch.Tensor):
        return f"a (B, ...) tensor {shown}" if p.dim is not None else None
    if not is_plain(col) or col.dim() != len(want):
        return shown
    for want_i, got in zip(want, col.shape):
        if isinstance(want_i, int) and want_i != got:
            return shown
    return None


def _field_violations(
    bound: BoundLayout, view: DenseView, widths: Mapping[str, int], fixed: Mapping[str, int]
) -> tuple[list[Violation], set[str]]:
    """Dense shape, dtype and presence of every column field; the fields left out of the rest."""
    found, skip = [], set()
    masks = set(bound.sizes.values())
    for p in bound.columns():
        key, f = p.key or p.name, p.field
        col = view.get(key)
        named = "" if key == p.name else f" (schema field {p.name})"
        if col is None:
            skip.add(p.name)
            missing = _missing(bound, p, view)
            if missing is not None:
                found.append(missing)
            continue
        if not f.is_tensor or not isinstance(col, torch.Tensor):
            per_row = rows_violation(key, col, view.n)
            if per_row is not None:  # one value per row, or nothing can be said of any row
                skip.add(p.name)
                found.append(dataclasses.replace(per_row, message=f"{key}: {per_row.message}{named}"))
                continue
        if not f.is_tensor:
            continue
        problem = _shape_violation(bound, p, col, widths, fixed, view.n)
        if problem is not None:
            skip.add(p.name)
            found.append(dataclasses.replace(problem, message=problem.message + named))
            continue
        if not isinstance(col, torch.Tensor):
            continue
        allowed = (p.entry.dtype,) if p.entry.dtype is not None else f.dtypes
        if allowed and col.dtype not in allowed:
            skip.add(p.name)
            if p.name in masks and (col.is_floating_point() or col.is_complex()):
                continue  # a mask that is not 0/1 integers: the geometry's `mask` violation says it
            want = " or ".join(_dt(d) for d in allowed)
            msg = f"dtype {_dt(col.dtype)} is not {want}{named}"
            found.append(Violation(None, key, "dtype", want, _dt(col.dtype), msg))
    return found, skip


def _shape_violation(
    bound: BoundLayout, p: Placed, col: Any, widths: Mapping[str, int], fixed: Mapping[str, int], n: int
) -> Violation | None:
    """A ``kind`` violation for a tensor the check cannot read (nested, sparse), a ``shape``
    one for a dense shape that is not the layout's; ``None`` when the column is as laid out."""
    problem = _shape_problem(p, col, n, widths, fixed)
    if problem is None:
        return None
    key, got = p.key or p.name, describe(col)
    if isinstance(col, torch.Tensor) and not is_plain(col):
        want = f"a dense (strided) tensor {problem}"
        return Violation(None, key, "kind", want, got, f"expected {want}, found {got}")
    axis = bound.layout.axes.get(p.dim or "")
    made = ""
    if axis is not None and axis.concat and all(b.dim in widths for b in axis.blocks):
        made = f"; {p.dim} = " + " + ".join(f"{b.dim} {widths[b.dim]}" for b in axis.blocks)
    return Violation(None, key, "shape", problem, got, f"shape {got} is not {problem}{made}")


def _missing(bound: BoundLayout, p: Placed, view: DenseView) -> Violation | None:
    """A ``missing`` violation for the column ``p`` the batch lacks (or holds ``None`` under its
    key), when the schema requires it or a field the layout derives from it (verl's
    ``loss_mask``, its ``response_mask``): one for the batch, however many fields it carries."""
    key = p.key or p.name
    derived = sorted(n for n in bound.derived({p.name}) if bound.placed[n].field.required)
    needs = [p.name] if p.field.required else derived
    if not needs:
        return None
    names = [n for n in needs if n != key]
    named = f" (schema field {', '.join(names)})" if names else ""
    where, actual = ("has no key", "absent") if not view.has(key) else ("holds None under the key", "None")
    return Violation(None, key, "missing", "present", actual, f"the batch {where} {key!r}{named}")


def describe(x: Any) -> str:
    if is_plain(x):
        return f"{_dt(x.dtype)}{list(x.shape)}".replace(" ", "")
    if isinstance(x, torch.Tensor):  # nested (no shape) or sparse: said as such
        return describe_value(x)
    return type(x).__name__


def _device_violation(view: DenseView) -> Violation | None:
    devices = {str(v.device): k for k, v in view.tensors().items()}
    if len(devices) < 2:
        return None
    (d0, k0), (d1, k1) = list(devices.items())[:2]
    msg = f"columns on different devices ({k0!r} on {d0}, {k1!r} on {d1}); a dense batch lives on one device"
    return Violation(None, k1, "batch", d0, d1, msg)


def _off_pad(
    x: torch.Tensor, real: torch.Tensor, padded: torch.Tensor, pad: Any, pad_token: int | None
) -> torch.Tensor | None:
    """``(B, T)``: positions of the padded region (``padded``, ``~real``) whose value is not the pad value.

    ``x`` has its padded axis at 1. ``None``: nothing to compare (no padded position).
    """
    if pad == EDGE:
        t = torch.arange(real.shape[1], device=real.device)
        first = first_true(real)
        last = real.shape[1] - 1 - first_true(real.flip(1))
        idx = torch.minimum(torch.maximum(t, first[:, None]), last[:, None])
        idx = idx.view(*idx.shape, *([1] * (x.dim() - 2))).expand_as(x)
        diff = x != x.gather(1, idx)
        padded = padded & real.any(1, keepdim=True)
    else:
        if pad == PAD_TOKEN and pad_token is None:
            if not bool(any_per_row(padded).any()):
                return None
            pad = _common_pad(x, padded).item()
        elif pad == PAD_TOKEN:
            pad = pad_token
        diff = x != pad
    if diff.dim() > 2:
        diff = diff.flatten(2).any(2)
    return diff.logical_and_(padded)


def _common_pad(x: torch.Tensor, padded: torch.Tensor) -> torch.Tensor:
    """The pad token of a field whose layout does not pin one: the most common first padded value of a row."""
    rows = any_per_row(padded)
    first = first_true(padded)
    at = x[torch.arange(x.shape[0], device=x.device), first].reshape(x.shape[0], -1)[:, 0]
    return at[rows].mode().values


def _pad_text(p: Placed, pad_token: int | None, x: torch.Tensor, padded: torch.Tensor) -> str:
    pad = p.entry.pad
    if pad == EDGE:
        return "the nearest real value of the row"
    if pad == PAD_TOKEN and pad_token is None:
        return f"one pad token throughout the batch ({_common_pad(x, padded).item()} in most rows)"
    return str(pad_token if pad == PAD_TOKEN else pad)


def _pad_violations(bound: BoundLayout, view: DenseView, geo: Geometry, skip: set[str]) -> list[Violation]:
    """``padded`` (or, for a 0/1 field, ``mask``) violations: a value other than the pad value in a padded region.

    The 0/1 fields go first: a row whose response or loss mask strays outside the region the
    size masks give has masks that disagree, so its lengths are unknown; it is marked broken
    (`Geometry.discard`) and the other fields say nothing of it.
    """
    proven = _counted_masks(bound)
    checked = [
        p
        for p in bound.columns()
        if p.name not in skip and p.name not in proven and p.dim is not None and p.axis is not None
        if p.entry.pad != ANY and isinstance(view.get(p.key or p.name), torch.Tensor)
    ]
    found = [v for p in checked if _zero_one(p) for v in _off_pad_rows(bound, view, geo, p)]
    geo.discard({v.sample for v in found if v.sample is not None})
    return found + [v for p in checked if not _zero_one(p) for v in _off_pad_rows(bound, view, geo, p)]


def _zero_one(p: Placed) -> bool:
    return p.field.values is not None and set(p.field.values) <= {0, 1}


def _off_pad_rows(bound: BoundLayout, view: DenseView, geo: Geometry, p: Placed) -> list[Violation]:
    """One violation per row of ``p`` (a tensor column padded along ``p.dim``) with a value
    other than its pad value in its padded region; broken rows have none."""
    assert p.dim is not None and p.axis is not None
    token = bound.layout.pad_token_id
    x, padded = view.get(p.key or p.name).movedim(p.axis, 1), geo.padded(p.dim)
    bad = _off_pad(x, geo.region(p.dim), padded, p.entry.pad, token)
    if bad is None:
        return []
    found = []
    for row in torch.nonzero(any_per_row(bad)).flatten().tolist():
        pos = int(bad[row].to(torch.int8).argmax())
        found.append(_pad_violation(p, row, pos, x, _pad_text(p, token, x, padded)))
    return found


def _counted_masks(bound: BoundLayout) -> frozenset[str]:
    """The masks padded with 0 whose padded regions the size count already read: a ``sizes:``
    mask counted over every block of its axis (`count_mask` passes a row only when it is
    exactly its real region, so its padded positions are 0; a broken row is reported there)."""
    out = set()
    for name, p in bound.placed.items():
        if p.dim is None or p.entry.pad != 0 or isinstance(p.entry.pad, bool):
            continue
        axis = bound.axis_of(p.dim)
        counted = {dim for dim, mask in bound.sizes.items() if mask == name}
        if ({b.dim for b in axis.blocks} if axis.concat else {p.dim}) <= counted:
            out.add(name)
    return frozenset(out)


def _pad_violation(p: Placed, row: int, pos: int, x: torch.Tensor, pad: str) -> Violation:
    key = p.key or p.name
    value = x[row, pos].flatten()
    shown = value[0].item() if value.numel() == 1 else value.tolist()
    if _zero_one(p):
        msg = f"{key} row {row}: {shown} at position {pos}, outside the row's {p.dim} region (padded with {pad})"
        return Violation(row, key, "mask", f"{pad} outside the {p.dim} region", f"{shown} at {pos}", msg)
    msg = f"{key} row {row}: {shown} at position {pos} of the padded region along {p.dim!r}; the layout pads with {pad}"
    return Violation(row, key, "padded", str(pad), f"{shown} at {pos}", msg)


def _layout_tags(bound: BoundLayout, view: DenseView) -> tuple[list[dict[str, Any]] | None, list[Violation]]:
    """Tag dicts read from the batch where the layout's ``tags:`` say (``None``: no tag there)."""
    columns = {}
    for tag, key in bound.layout.tags.items():
        if not view.has(key):
            continue
        problem = rows_violation(key, view.get(key), view.n)
        if problem is not None:
            return None, [problem]
        columns[tag] = [v.item() if isinstance(v, torch.Tensor) and not v.dim() else v for v in view.rows(key)]
    if not columns:
        return None, []
    return [{t: vs[i] for t, vs in columns.items()} for i in range(view.n)], []


def _padding_rows(
    bound: BoundLayout, view: DenseView, tags: Sequence[Mapping[str, Any]] | None, skip: set[str], broken: set[int]
) -> list[Violation]:
    """A row tagged ``is_padding`` whose loss mask is not all zero (``padding``); a broken row reports its mask only.

    The loss mask is ``loss_mask``, or the field the layout holds it as (verl's ``response_mask``).
    """
    if tags is None or len(tags) != view.n:
        return []
    flags = [isinstance(t, Mapping) and t.get("is_padding") is True and i not in broken for i, t in enumerate(tags)]
    if not any(flags):
        return []
    p = bound.placed.get("loss_mask")
    if p is not None and p.held == "same_as":  # verl: its response_mask is the loss mask
        p = bound.placed.get(p.entry.source or "")
    if p is None or p.name in skip or p.held != "column":
        return []
    key = p.key or p.name
    col = view.get(key)
    if not isinstance(col, torch.Tensor) or not col.dim():
        return []
    on = any_per_row((col != 0).reshape(view.n, -1))
    found = []
    for row in torch.nonzero(on).flatten().tolist():
        if flags[row]:
            msg = f"{key} row {row}: a padding row (is_padding) must have an all-zero loss mask, found ones"
            found.append(Violation(row, key, "padding", "an all-zero loss mask", "nonzero", msg))
    return found


@functools.lru_cache(maxsize=256)
def relaxed_plan(plan: Plan, optional: frozenset[str]) -> Plan:
    """The schema's plan with the fields in ``optional`` not required (absent in the layout, or reported already)."""
    if not optional:
        return plan
    fields = {n: dataclasses.replace(f, required=False) if n in optional else f for n, f in plan.fields.items()}
    return build_plan(**{**plan.declarations, "fields": fields})


def _batch_key(bound: BoundLayout, name: str) -> str:
    p = bound.placed.get(name)
    if p is None:
        return name
    if p.held in ("slice", "same_as"):
        src = bound.placed[p.entry.source or ""]
        return src.key or src.name
    return p.key or name


def _translate(bound: BoundLayout, found: list[Violation], broken: set[int]) -> list[Violation]:
    """The engine's violations with the batch keys the user holds; broken rows' left out, and
    a ``same_as`` field's that repeats its source's (one tensor, one defect)."""
    said = {(v.sample, v.field, v.code, v.expected, v.actual) for v in found}
    out = []
    for v in found:
        if v.sample is not None and v.sample in broken:
            continue
        p = bound.placed.get(v.field)
        if p is not None and p.held == "same_as" and (v.sample, p.entry.source, v.code, v.expected, v.actual) in said:
            continue
        key = _batch_key(bound, v.field)
        if key != v.field:
            v = dataclasses.replace(v, field=key, message=f"{v.message} (schema field {v.field})")
        out.append(v)
    return out


def _inexact_casts(bound: BoundLayout, view: DenseView, geo: Geometry, skip: set[str]) -> list[Violation]:
    """A ``value`` violation per row of a field the trainer stores in another dtype (layout ``dtype:``)
    whose real values do not convert exactly to the schema's dtype (SkyRL's float loss mask holding 0.5)."""
    found: list[Violation] = []
    for p in bound.columns() if view.n else ():
        col = view.get(p.key or p.name)
        if p.entry.dtype is None or p.name in skip or not isinstance(col, torch.Tensor) or not p.field.dtypes:
            continue
        target = p.field.dtypes[0]
        back = col.to(target).to(col.dtype)
        off = (back != col) & ~(torch.isnan(col) & torch.isnan(back)) if col.is_floating_point() else back != col
        if p.axis is not None and p.dim is not None:
            off = off.movedim(p.axis, 1)
            off = (off.flatten(2).any(2) if off.dim() > 2 else off) & geo.region(p.dim)
        for row in torch.nonzero(off.reshape(off.shape[0], -1).any(1)).flatten().tolist():
            if row in geo.broken:
                continue
            wrong = col[row][(col[row].to(target).to(col.dtype) != col[row])]
            value = wrong.reshape(-1)[0].item() if wrong.numel() else "?"
            key, want = p.key or p.name, str(target).removeprefix("torch.")
            msg = f"{key} row {row}: {value} does not convert exactly to {want}, the schema's dtype of {p.name}"
            found.append(Violation(row, key, "value", f"values exact in {want}", repr(value), msg))
    return found


def _broadcast(bound: BoundLayout, view: DenseView, widths: Mapping[str, int]) -> set[str]:
    """Expand, in ``view``, every ``broadcast:`` column held with size 1 along its padded axis
    to the axis's width (a view, no copy), so its rows are read as any other's; the fields
    expanded, whose padded region holds the row's value rather than the pad."""
    found = set()
    for p in bound.columns():
        key = p.key or p.name
        col = view.get(key)
        if not p.entry.broadcast or p.dim is None or p.axis is None or not is_plain(col):
            continue
        width = widths.get(p.dim)
        if width is None or width == 1 or col.dim() <= p.axis or col.shape[p.axis] != 1:
            continue
        shape = list(col.shape)
        shape[p.axis] = width
        view.columns[key] = col.expand(shape)
        found.add(p.name)
    return found


def _fixed_sizes(plan: Plan, dims: Mapping[str, int] | None) -> dict[str, int]:
    fixed = {n: d.size for n, d in plan.dims.items() if isinstance(d, FixedDim)}
    fixed.update(dims or {})
    return fixed


def _layout_checks(
    bound: BoundLayout, view: DenseView, plan: Plan, dims: Mapping[str, int] | None, tags: Any
) -> tuple[list[Violation], set[str], Geometry | None, Any]:
    """Everything the layout itself says: (violations, fields left out, geometry or None, tags)."""
    device = _device_violation(view)
    if device is not None:
        return [device], set(), None, tags
    widths, problems = axis_widths(bound, view)
    spread = _broadcast(bound, view, widths)
    found, skip = _field_violations(bound, view, widths, _fixed_sizes(plan, dims))
    skip |= bound.derived(skip)  # a slice or copy of a column left out goes with it (its problem is said once)
    unread = {v.field for v in found if v.code in ("kind", "shape")}
    if problems or unread & {bound.placed[m].key or m for m in bound.sizes.values()}:
        return found + problems, skip, None, tags  # a mask of the wrong kind or shape gives no lengths
    try:
        geo = measure(bound, view)
    except GeometryError as exc:
        return found + exc.violations, skip, None, tags
    pads = _pad_violations(bound, view, geo, skip | spread)
    check_max(geo, view)  # once the pad pass has found every broken row
    found += geo.violations + pads
    if tags is None:
        tags, tag_problems = _layout_tags(bound, view)
        found += tag_problems
    found += _padding_rows(bound, view, tags, skip, geo.broken)
    return found, skip, geo, tags


def _gathers(p: Placed, view: DenseView) -> bool:
    """Whether the batch holds a key the gathered field ``p`` reads."""
    return any(view.has(k) for k in p.entry.gather)


def check_dense(
    plan: Plan,  # Schema.plan: the dense room sits below the front door
    batch: Any,
    layout: Layout,
    *,
    tags: Sequence[Mapping[str, Any]] | None = None,
    dims: Mapping[str, int] | None = None,
    depth: str = "values",
    extract: bool = False,
    rows: bool = False,
    engine: bool = True,
) -> DenseCheck:
    """Every violation of a dense padded ``batch`` of ``schema`` laid out as ``layout``.

    Args:
        plan, batch, layout: see [`Schema.validate_batch`][trajschema.Schema.validate_batch].
        tags: one tag dict per row; by default read where the layout's ``tags:`` say
            (SkyRL's ``metadata.is_padding``).
        dims, depth: as for a jagged batch. At ``depth="shapes"`` the masks and the
            padded regions are still read (they are the layout), the real values are not.
        extract: also return the real regions as a jagged TensorDict (`DenseCheck.jagged`).
        rows: cut and check the real regions as a list of per-row samples, not a jagged
            TensorDict (the same violations; cheaper for a batch of a few rows, such as
            the one row padding is shaped on); ``extract`` then returns that list.
        engine: run the jagged engine on the real regions. ``False`` checks the layout
            alone and, with ``extract``, returns the real regions even when some rows are
            broken (`DenseCheck.geometry` says which): for a caller that adds columns of
            its own before running the engine once (a packed layout over this one).

    Raises:
        TypeError: ``batch`` is not a mapping, a TensorDict or a ``DataProto``.
        ValueError: a bad ``depth`` or ``dims``.
        LayoutDefinitionError: the layout cannot hold the schema.
    """
    dims = check_args(plan, dims, depth)
    bound = bind_layout(layout, plan)
    plan = bound.plan  # with the fields the layout adds
    view, found = read_dense(batch, shared=layout.shared)
    if found:
        return DenseCheck(found, {}, {})
    found, skip, geo, tags = _layout_checks(bound, view, plan, dims, tags)
    if geo is None:
        return DenseCheck(found, {}, {})
    layout_ok = not found
    values = extract or depth == "values"
    # A gathered mapping's kind is all a shapes check reads, and gathering builds a dict per
    # row: a present one is left out (a whole batch of images costs ~0.1 ms a row), an absent one stays missing.
    gathered = set() if values else {n for n, p in bound.placed.items() if p.held == "gather" and _gathers(p, view)}
    cut = dense_to_rows if rows else dense_to_jagged if extract and engine else dense_to_view
    td = cut(bound, view, geo, skip=skip | gathered, values=values)
    if not engine:
        return DenseCheck(found, {}, dict(geo.lengths), td if extract else None, geo, tags)
    optional = frozenset(skip | gathered | {n for n, p in bound.placed.items() if p.held == "absent"})
    seen, bindings = check_batch(relaxed_plan(plan, optional), td, tags=tags, dims=dims, depth=depth)
    casts = _inexact_casts(bound, view, geo, skip) if extract or depth == "values" else []
    told = {(v.sample, v.field) for v in casts}  # the engine saw the cast's value, not the batch's
    found += [v for v in _translate(bound, seen, geo.broken) if (v.sample, v.field) not in told] + casts
    bindings = {k: v for k, v in bindings.items() if k not in geo.broken}
    jagged = td if extract and layout_ok and not isinstance(td, BatchView) else None
    return DenseCheck(found, bindings, dict(geo.lengths), jagged, geo, tags)
