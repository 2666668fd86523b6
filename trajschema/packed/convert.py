"""Samples (or a jagged batch) to a packed batch and back, bit-exact.

``to_packed`` checks the samples first, then lays every ``tokens`` field on one run:
sequence after sequence, each padded to the alignment with the layout's pad value; a
``span`` field's values at its sequence's span tokens, the fill value at the others. The
offsets are int32 ``(B + 1,)``. ``jagged`` fields become jagged nested tensors, ``column``
fields ``(B, ...)`` tensors (tensors of one shape) or lists. ``from_packed`` checks the
batch, then cuts the samples out of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import batch_of, check_batch
from trajschema.core import ANY, MAX_SIZE, PAD_TOKEN, PackedBatch, SchemaError
from trajschema.dense import own
from trajschema.packed.bind import bind_packed
from trajschema.packed.check import check_packed

if TYPE_CHECKING:
    from trajschema.check import BatchView, Plan
    from trajschema.core import PackedLayout
    from trajschema.packed.bind import BoundPacked, PackedPlaced

__all__ = ["from_packed", "to_packed"]


def _checked(plan: Plan, bound: BoundPacked, samples: Any, tags: Sequence[Any] | None) -> BatchView:
    from trajschema.dense import relaxed_plan

    view = batch_of(samples)
    absent = frozenset(p.name for p in bound.placed.values() if p.held == "absent")
    found, bindings = check_batch(relaxed_plan(plan, absent), samples, tags=tags, dims=None, depth="values")
    if found:
        raise SchemaError(found, schema_name=plan.name, bindings=bindings)
    for p in bound.placed.values():
        for i, v in enumerate(view.values_of(p.name) if p.field.is_tensor else ()):
            if isinstance(v, torch.Tensor) and v.device.type == "meta":
                raise ValueError(
                    f"sample {i}, field {p.name!r}: a meta tensor has no values to pack; pack real tensors"
                )
    return view


def _one_dtype(p: PackedPlaced, values: Sequence[torch.Tensor]) -> torch.dtype:
    dtypes = {(v.dtype, v.device) for v in values}
    if len(dtypes) > 1:
        shown = ", ".join(sorted(f"{str(d).removeprefix('torch.')} on {dev}" for d, dev in dtypes))
        raise ValueError(f"field {p.name!r} packs into one tensor, but its samples hold {shown}")
    return values[0].dtype


def _fill_value(rule: Any, pad_token_id: int | None, p: PackedPlaced, what: str) -> Any:
    if rule == ANY:
        return 0
    if rule == PAD_TOKEN:
        if pad_token_id is None:
            raise ValueError(
                f"field {p.name!r} is {what} with the pad token: give pad_token_id= or pin it with with_pad_token"
            )
        return pad_token_id
    return rule


def _run(
    bound: BoundPacked, p: PackedPlaced, values: list[torch.Tensor], lay: dict[str, Any], pad_id: int | None
) -> torch.Tensor:
    """The field's run: one ``torch.cat`` of each sequence's parts (its fill, its values, its
    alignment padding; the constant parts expanded views of one element, no copy before the cat)."""
    dtype = _one_dtype(p, values)
    moved = [v.movedim(p.at, 0) for v in values]
    rest = moved[0].shape[1:]
    device = values[0].device

    def const(rule: Any, what: str) -> torch.Tensor:
        return torch.full((1, *rest), _fill_value(rule, pad_id, p, what), dtype=dtype, device=device)

    seg = lay["seg"]
    extra = (seg.padded - seg.lengths).tolist()
    pad = const(p.entry.pad, "padded") if any(extra) else None
    before = [0] * len(moved)
    fill = None
    if p.entry.span:
        before = [int(n) - m.shape[0] for n, m in zip(seg.lengths.tolist(), moved, strict=True)]
        fill = const(p.entry.fill, "filled") if any(before) else None
    parts: list[torch.Tensor] = []
    for m, b, e in zip(moved, before, extra, strict=True):
        if b:
            parts.append(fill.expand(b, *rest))  # type: ignore[union-attr]
        parts.append(m)
        if e:
            parts.append(pad.expand(e, *rest))  # type: ignore[union-attr]
    return torch.cat(parts).movedim(0, p.at)


def _segments_for(lengths: torch.Tensor, alignment: int) -> Any:
    from trajschema.packed.segments import Segments

    padded = (lengths + alignment - 1) // alignment * alignment
    starts = torch.zeros_like(padded)
    if padded.numel() > 1:
        torch.cumsum(padded[:-1], 0, out=starts[1:])
    total = int(padded.sum()) if padded.numel() else 0
    if total > MAX_SIZE:
        raise ValueError(f"the packed run would hold {total} tokens, more than a tensor can (2**63 - 1)")
    return Segments(lengths=lengths, starts=starts, padded=padded, total=total)


def _offsets(lengths: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(lengths.shape[0] + 1, dtype=torch.int32)
    if lengths.numel():
        torch.cumsum(lengths, 0, out=out[1:], dtype=torch.int32)
    return out


def _column(p: PackedPlaced, values: list[Any]) -> Any:
    if p.held == "jagged":
        try:
            return torch.nested.as_nested_tensor(values, layout=torch.jagged)
        except (RuntimeError, ValueError):
            return list(values)
    tensors = p.field.is_tensor and values and all(isinstance(v, torch.Tensor) for v in values)
    if tensors and len({(v.shape, v.dtype, v.device) for v in values}) == 1:
        return torch.stack(values)
    return list(values)


def to_packed(
    plan: Plan,
    samples: Any,
    *,
    layout: PackedLayout,
    pad_token_id: int | None = None,
    tags: Sequence[Mapping[str, Any]] | None = None,
) -> PackedBatch:
    """Samples (a list, or a jagged TensorDict) as one packed batch in ``layout``.

    Raises:
        SchemaError: the samples break the schema.
        ValueError: no samples; no pad id for a field padded with it; a field whose samples
            differ in dtype or device; a meta tensor; a layout with ``dense:`` (build its
            dense batch with ``to_dense``, then ``pack_dense``).
    """
    bound = bind_packed(layout, plan)
    if bound.dense is not None:
        raise ValueError(
            f"layout {layout.name!r} packs a dense batch: lay the samples out with to_dense, then use pack_dense"
        )
    view = _checked(plan, bound, samples, tags)
    if view.n == 0:
        raise ValueError("to_packed needs at least one sample: an empty batch has no dtypes to pack")
    pad_id = layout.pad_token_id if pad_token_id is None else pad_token_id
    tokens = [p for p in bound.held("tokens") if view.values_of(p.name)[0] is not None]
    first = next((p for p in tokens if not p.entry.span), None)
    if first is None:
        raise ValueError(f"layout {layout.name!r} lays fields of {layout.tokens!r} on the run; the samples have none")
    lengths = torch.tensor([v.shape[first.axis] for v in view.values_of(first.name)], dtype=torch.int64)
    seg = _segments_for(lengths, layout.alignment)
    lay = {"seg": seg}
    out = PackedBatch({layout.offsets: _offsets(lengths)})
    if layout.padded_offsets:
        out[layout.padded_offsets] = _offsets(seg.padded)
    for p in tokens:
        out[p.key] = _run(bound, p, list(view.values_of(p.name)), lay, pad_id)
    for p in bound.held("jagged", "column"):
        values = view.values_of(p.name)
        if all(v is not None for v in values):
            out[p.key] = _column(p, list(values))
    _tags(out, layout, tags)
    return out


def _tags(out: PackedBatch, layout: PackedLayout, tags: Sequence[Mapping[str, Any]] | None) -> None:
    if tags is None:
        return
    for tag, key in layout.tags.items():
        values = [t.get(tag) for t in tags]
        if all(isinstance(v, bool) for v in values):
            out[key] = torch.tensor(values, dtype=torch.bool)
        elif any(v is not None for v in values):
            out[key] = values


def from_packed(
    plan: Plan,
    batch: Any,
    *,
    layout: PackedLayout,
    tags: Sequence[Mapping[str, Any]] | None = None,
    depth: str = "values",
    as_tensordict: bool = False,
) -> Any:
    """The samples of a packed batch, checked first: a list of sample dicts (tensors that
    share no storage with the batch or each other), or with ``as_tensordict=True`` the
    jagged TensorDict laid out as TransferQueue returns one.

    Raises:
        SchemaError: with every violation of the batch; nothing is converted.
    """
    found = check_packed(plan, batch, layout, tags=tags, depth=depth)
    if found.violations:
        raise SchemaError(found.violations, schema_name=plan.name, bindings=found.bindings)
    if found.jagged is None:
        return None if as_tensordict else []
    if as_tensordict:
        return found.tensordict()
    return [{k: own(v) for k, v in row.items()} for row in found.jagged.rows()]
