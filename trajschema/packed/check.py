"""Checking a packed batch against a schema in a packed layout.

In order: the batch is read (`trajschema.packed.view`); the per-sample columns give the
number of samples; the offsets give the segments (`trajschema.packed.segments`: every
``offsets`` and ``alignment`` invariant); the run's fields are checked for their padding
and fill (``padded``, ``boundary``); the real tokens of each sequence are cut out as a
jagged TensorDict and go through the jagged engine, so every schema rule applies to each
sequence as for a jagged batch (``seq = prompt + response``, mrope rows, routes,
``distinct``); the positions restart at each sequence (``positions``); a sample tagged
``is_padding`` has an all-zero loss mask (``padding``).

A layout with ``dense:`` (verl's ``verl_nopad``) checks its dense fields with that dense
layout and its nested fields against the dense masks (`trajschema.packed.nopad`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import check_args
from trajschema.core import Violation
from trajschema.packed.bind import bind_packed
from trajschema.packed.engine import PackedCheck, engine_check, padding_masks
from trajschema.packed.nopad import check_nopad
from trajschema.packed.segments import OffsetsError, Segments, read_offsets, segments_of
from trajschema.packed.tokens import (
    as_jagged,
    fill_violations,
    jagged_lengths,
    nested,
    position_violations,
    run_length,
)
from trajschema.packed.view import read_packed, rows_of

if TYPE_CHECKING:
    from trajschema.check import Plan
    from trajschema.core import PackedLayout
    from trajschema.packed.bind import BoundPacked

__all__ = ["PackedCheck", "check_packed", "sample_count"]


def sample_count(
    bound: BoundPacked, cols: Mapping[str, Any], tag_keys: Sequence[str]
) -> tuple[int | None, list[Violation], set[str]]:
    """The samples the per-sample columns hold, a ``batch`` violation per column that
    disagrees or holds no rows, and those columns' keys (left out of every other check)."""
    counts: dict[str, int | None] = {}
    for key in [p.key for p in bound.held("jagged", "column", "nested")] + list(tag_keys):
        if key in cols:
            counts[key] = rows_of(cols[key])
    known = [c for c in counts.values() if c is not None]
    if not known:
        n = None
    else:
        n = max(set(known), key=known.count)
    found, bad = [], set()
    for k, c in counts.items():
        if isinstance(cols[k], torch.Tensor) and cols[k].device.type == "meta":
            msg = f"{k} is a meta tensor: it holds no value per sample"
            found.append(Violation(None, k, "batch", "values per sample", "a meta tensor", msg))
            bad.add(k)
        elif c is None or (n is not None and c != n):
            found.append(
                Violation(
                    None,
                    k,
                    "batch",
                    f"{n} rows",
                    "no rows" if c is None else f"{c} rows",
                    f"{k} must hold one entry per sample ({n}), found {'one value' if c is None else f'{c} rows'}",
                )
            )
            bad.add(k)
    return n, found, bad


def _layout_tags(bound: BoundPacked, cols: Mapping[str, Any], n: int) -> list[dict[str, Any]] | None:
    columns = {t: cols[k] for t, k in bound.layout.tags.items() if k in cols and rows_of(cols[k]) == n}
    if not columns:
        return None
    rows = {t: v.tolist() if isinstance(v, torch.Tensor) else list(v) for t, v in columns.items()}
    return [{t: vs[i] for t, vs in rows.items()} for i in range(n)]


def _offsets(bound: BoundPacked, cols: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None, list[Violation]]:
    """The real and padded offsets as int64, and their dtype violations.

    Raises:
        OffsetsError: missing or unreadable offsets.
    """
    lay = bound.layout
    keys = [lay.offsets] + ([lay.padded_offsets] if lay.padded_offsets else [])
    for key in keys:
        if key not in cols:
            what = "the real offsets" if key == lay.offsets else "the padded offsets"
            raise OffsetsError([Violation(None, key, "missing", what, "nothing", f"the batch has no {key}")])
    real, found = read_offsets(lay.offsets, cols[lay.offsets])
    padded = None
    if lay.padded_offsets:
        padded, more = read_offsets(lay.padded_offsets, cols[lay.padded_offsets])
        found += more
    return real, padded, found


def _span_lengths(bound: BoundPacked, cols: Mapping[str, Any], seg: Segments) -> dict[str, torch.Tensor]:
    """For each span dim, its per-sample size read from a jagged column of that dim (clipped to the sequence)."""
    out = {}
    for p in bound.held("jagged"):
        dim = (p.field.shape or ())[p.at]
        name = dim.args[0] if dim.is_name else None
        if name is None or name in out or p.key not in cols:
            continue
        lengths = jagged_lengths(cols[p.key], p.at)
        if lengths is not None and lengths.shape == seg.lengths.shape:
            out[name] = torch.minimum(lengths.to(seg.lengths.device), seg.lengths)
    return out


def extract(
    bound: BoundPacked, cols: Mapping[str, Any], seg: Segments, spans: Mapping[str, torch.Tensor], skip: set[str]
) -> dict[str, Any]:
    """The real tokens of every field as jagged columns of schema field names."""
    out: dict[str, Any] = {}
    real_index = None if seg.unpadded else seg.index()
    offsets = seg.offsets()
    for p in bound.held("tokens"):
        if p.key not in cols or p.name in skip or (p.entry.span and p.entry.span not in spans):
            continue
        moved = cols[p.key].movedim(p.at, 0)
        index: torch.Tensor | None
        if p.entry.span:
            count = spans[p.entry.span]
            index = seg.index(skip=seg.lengths - count, count=count)
            offs = torch.zeros_like(offsets)
            torch.cumsum(count, 0, out=offs[1:])
        else:
            index, offs = real_index, offsets
        out[p.name] = nested(moved if index is None else moved.index_select(0, index), offs, p.at)
    for p in bound.held("jagged", "column", "nested"):
        if p.key in cols and p.name not in skip:
            out[p.name] = as_jagged(cols[p.key])
    for p in bound.held("alias"):
        src = next((q for q in bound.placed.values() if q.key == p.entry.source), None)
        if src is not None and src.name in out:
            out[p.name] = out[src.name]
    return out


def _translate(bound: BoundPacked, found: list[Violation], broken: set[int]) -> list[Violation]:
    out = []
    for v in found:
        if v.sample is not None and v.sample in broken:
            continue
        p = bound.placed.get(v.field)
        key = p.key if p is not None and p.held != "alias" else v.field
        if key != v.field:
            v = dataclasses.replace(v, field=key, message=f"{v.message} (schema field {v.field})")
        out.append(v)
    return out


def _check_run(plan: Plan, bound: BoundPacked, cols: dict[str, Any], tags: Any, kw: dict[str, Any]) -> PackedCheck:
    lay = bound.layout
    n, found, bad = sample_count(bound, cols, list(lay.tags.values()))
    cols = {k: v for k, v in cols.items() if k not in bad}
    try:
        real, padded, more = _offsets(bound, cols)
        outer = real if padded is None else padded
        total, skip, problems = run_length(bound, cols, real.device, int(outer[-1]) if outer.numel() else 0)
        found += more + problems
        skip |= {p.name for p in bound.placed.values() if p.key in bad}
        seg = segments_of(
            real, padded, keys=(lay.offsets, lay.padded_offsets), total=total, alignment=lay.alignment, n=n
        )
    except OffsetsError as exc:
        return PackedCheck(found + exc.violations, {})
    found += seg.violations
    tags = _layout_tags(bound, cols, seg.n) if tags is None else tags
    spans = _span_lengths(bound, cols, seg)
    if total is not None:
        found += fill_violations(bound, cols, seg, spans, skip)
    columns = extract(bound, cols, seg, spans, skip)
    optional = frozenset(skip | {n for n, p in bound.placed.items() if p.held == "absent"})
    engine, bindings, td = engine_check(plan, columns, seg.n, optional, tags=tags, **kw)
    found += _translate(bound, engine, seg.broken)
    pos = bound.positions
    if pos is not None and pos.name in columns and pos.axis is not None:
        found += position_violations(pos.key, columns[pos.name], pos.axis, seg.broken)
    found += padding_masks(bound, columns, tags)
    return PackedCheck(found, {k: v for k, v in bindings.items() if k not in seg.broken}, td, seg.lengths)


def check_packed(
    plan: Plan,  # Schema.plan: the packed room sits below the front door
    batch: Any,
    layout: PackedLayout,
    *,
    tags: Sequence[Mapping[str, Any]] | None = None,
    dims: Mapping[str, int] | None = None,
    depth: str = "values",
) -> PackedCheck:
    """Every violation of a packed ``batch`` of the schema of ``plan`` laid out as ``layout``.

    Args:
        plan, batch, layout: see [`Schema.validate_batch`][trajschema.Schema.validate_batch].
        tags: one tag dict per sample; by default read where the layout's ``tags:`` say.
        dims, depth: as for a jagged batch. At ``depth="shapes"`` the offsets, the
            padding and the positions are still read (they are the layout).

    Raises:
        TypeError: ``batch`` is not a mapping or a TensorDict.
        ValueError: a bad ``depth`` or ``dims``.
        LayoutDefinitionError: the layout cannot hold the schema.
    """
    dims = check_args(plan, dims, depth)
    bound = bind_packed(layout, plan)
    cols, found = read_packed(batch)
    if found:
        return PackedCheck(found, {})
    if bound.dense is not None:
        return check_nopad(plan, bound, cols, tags=tags, dims=dims, depth=depth)
    return _check_run(plan, bound, cols, tags, {"dims": dims, "depth": depth})
