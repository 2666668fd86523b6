"""The real regions of a dense batch as a jagged TensorDict of schema field names, laid out
as TransferQueue returns a batch: what the jagged checking engine reads, and what
[`Schema.from_dense`][trajschema.Schema.from_dense] hands back.

A padded column's real region is cut with one boolean-mask select over its padded axis
(moved next to the batch axis) and wrapped as a jagged nested tensor with the row offsets
of the lengths; the ragged axis goes back where the schema puts it (mrope
``position_ids`` ``(B, 4, S)`` -> ragged index 2). Slices are cut from their source's
region, ``same_as`` fields copy their source, ``dtype:`` fields convert to the schema's
dtype, ``gather`` fields become one dict per row, per-sample lists a ``NonTensorStack``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import BatchView, nontensor_column, without_fx_note

if TYPE_CHECKING:
    from tensordict import TensorDict

    from trajschema.dense.bind import BoundLayout, Placed
    from trajschema.dense.geometry import Geometry
    from trajschema.dense.view import DenseView

__all__ = ["dense_to_jagged", "dense_to_rows", "dense_to_view", "jagged_column", "row_offsets"]


def jagged_column(
    dense: torch.Tensor,
    axis: int,
    region: torch.Tensor | None,
    lengths: torch.Tensor,
    *,
    values: bool = True,
    rows: bool = False,
    offsets: torch.Tensor | None = None,
) -> Any:
    """The real region (``region``, ``(B, T)`` bool) of ``dense`` along ``axis`` as a jagged nested tensor.

    With ``values=False`` the result has the right shapes and dtype but no values read
    (one zero, expanded): enough for a shapes-only check, at no copy. With ``rows=True``
    it is a list of one tensor per row instead (views of the same cut). ``offsets``: the
    row offsets of ``lengths``, when the caller has them (`row_offsets`); columns that share
    one offsets tensor share its nested int, which torch then makes once.
    """
    if offsets is None:
        offsets = row_offsets(lengths)
    moved = dense.movedim(axis, 1)
    if values and region is not None:
        flat = moved[region]  # (N, *rest), rows in order, positions in order
    else:
        total = int(offsets[-1]) if lengths.numel() else 0
        flat = torch.zeros((), dtype=dense.dtype, device=dense.device).expand(total, *moved.shape[2:])
    if rows:
        return [part.movedim(0, axis - 1) for part in flat.split(lengths.tolist())]
    with without_fx_note():
        if axis == 1:
            return torch.nested.nested_tensor_from_jagged(flat, offsets)
        return torch.nested.nested_tensor_from_jagged(flat.movedim(0, axis - 1), offsets, jagged_dim=axis)


def row_offsets(lengths: torch.Tensor) -> torch.Tensor:
    """``[0, l0, l0 + l1, ...]`` (int64, on ``lengths``' device): the offsets of a jagged column."""
    offsets = torch.zeros(lengths.shape[0] + 1, dtype=torch.int64, device=lengths.device)
    torch.cumsum(lengths, 0, out=offsets[1:])
    return offsets


def _stacked(parts: list[Any]) -> Any:
    """Per-sample tensors of a list column: a jagged nested tensor when only the first dim varies."""
    if parts and all(isinstance(t, torch.Tensor) and t.dim() for t in parts):
        if len({(t.shape[1:], t.dtype, t.device) for t in parts}) == 1:
            return torch.nested.as_nested_tensor(parts, layout=torch.jagged)
        return torch.nested.as_nested_tensor(parts, layout=torch.strided)
    return nontensor_column(parts)


def _column(p: Placed, view: DenseView, geo: Geometry, values: bool, rows: bool, lists: bool) -> Any:
    col = view.get(p.key or p.name)
    if isinstance(col, torch.Tensor) and p.dim is not None and p.axis is not None:
        region = geo.region(p.dim) if values else None
        lengths = geo.lengths[p.dim]
        out = jagged_column(col, p.axis, region, lengths, values=values, rows=rows, offsets=_offsets(geo, p.dim))
    elif isinstance(col, torch.Tensor) and col.dim():
        out = list(col.unbind(0)) if rows else col
    else:
        per_row = view.rows(p.key or p.name)
        if rows or (lists and not p.field.is_tensor):
            return list(per_row)
        return _stacked(per_row) if p.field.is_tensor else nontensor_column(per_row)
    return _as_schema_dtype(p, out)


def _as_schema_dtype(p: Placed, out: Any) -> Any:
    """``out`` (a column, or a list of per-row tensors) in the schema's dtype where the layout stores another."""
    want = p.field.dtypes[0] if p.entry.dtype is not None and p.field.dtypes else None
    if want is None:
        return out
    if isinstance(out, list):
        return [t.to(want) for t in out]
    return out if out.dtype == want else out.to(want)


def _slice(p: Placed, view: DenseView, geo: Geometry, values: bool, rows: bool) -> Any:
    src = geo.bound.placed[p.entry.source or ""]
    col = view.get(src.key or src.name)
    assert src.dim is not None and src.axis is not None and p.dim is not None
    region = geo.region(src.dim, p.dim) if values else None
    cut = jagged_column(
        col, src.axis, region, geo.lengths[p.dim], values=values, rows=rows, offsets=_offsets(geo, p.dim)
    )
    return _as_schema_dtype(src, cut)


def _offsets(geo: Geometry, dim: str) -> torch.Tensor:
    """The row offsets of ``dim``'s lengths, made once per geometry (and so per check)."""
    made = geo.offsets.get(dim)
    if made is None:
        made = geo.offsets[dim] = row_offsets(geo.lengths[dim])
    return made


def _gather(p: Placed, view: DenseView, rows: bool, lists: bool) -> Any | None:
    keys = [k for k in p.entry.gather if view.has(k)]
    if not keys:
        return None
    columns = {k: view.rows(k) for k in keys}
    dicts = [{k: columns[k][i] for k in keys} for i in range(view.n)]
    return dicts if rows or lists else nontensor_column(dicts)


def dense_to_jagged(
    bound: BoundLayout, view: DenseView, geo: Geometry, *, skip: Collection[str] = (), values: bool = True
) -> TensorDict:
    """The batch's real regions as a jagged TensorDict of schema field names (``batch_size [B]``).

    Fields in ``skip``, ``absent`` fields and columns the batch lacks are left out.
    ``values=False`` reads no values (see `jagged_column`).
    """
    from tensordict import TensorDict

    out = _extracted(bound, view, geo, skip, values, rows=False, lists=False)
    tensors = {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}
    td = TensorDict(tensors, batch_size=[view.n])
    for k, v in out.items():
        if k not in tensors:
            td[k] = v
    return td


def dense_to_view(
    bound: BoundLayout, view: DenseView, geo: Geometry, *, skip: Collection[str] = (), values: bool = True
) -> BatchView:
    """`dense_to_jagged` as the checking engine reads it: the tensor columns in a TensorDict,
    the non-tensor ones (``uid``) as plain lists beside it, not a ``NonTensorStack``, which
    costs ~4 us a row to build (15 ms for 4096 uids, a third of a whole shapes check)."""
    return BatchView.of_columns(_extracted(bound, view, geo, skip, values, rows=False, lists=True), view.n)


def dense_to_rows(
    bound: BoundLayout, view: DenseView, geo: Geometry, *, skip: Collection[str] = (), values: bool = True
) -> list[dict[str, Any]]:
    """`dense_to_jagged` as a list of per-row samples (``None`` values left out): no nested
    tensors, which cost ~0.25 ms a column to build and read, so a batch of a few rows
    (the row padding is shaped on) is cut and checked in a fraction of the time."""
    out = _extracted(bound, view, geo, skip, values, rows=True, lists=True)
    return [{k: v[i] for k, v in out.items() if v[i] is not None} for i in range(view.n)]


def _extracted(
    bound: BoundLayout, view: DenseView, geo: Geometry, skip: Collection[str], values: bool, rows: bool, lists: bool
) -> dict[str, Any]:
    """Every extracted field's column (``rows``: one list entry per row; ``lists``: non-tensor
    columns as plain lists), by schema field name."""
    out: dict[str, Any] = {}
    for name, p in bound.placed.items():
        if name in skip or p.held == "absent":
            continue
        if p.held == "column" and view.has(p.key or name):
            out[name] = _column(p, view, geo, values, rows, lists)
        elif p.held == "slice" and view.has(bound.placed[p.entry.source or ""].key or ""):
            if (p.entry.source or "") not in skip:
                out[name] = _slice(p, view, geo, values, rows)
        elif p.held == "gather":
            got = _gather(p, view, rows, lists)
            if got is not None:
                out[name] = got
    for name, p in bound.placed.items():
        if p.held == "same_as" and name not in skip and (p.entry.source or "") in out:
            out[name] = out[p.entry.source or ""]
    return out
