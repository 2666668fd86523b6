"""Converting between samples (a list, or a jagged TensorDict) and a dense batch in a layout.

`to_dense` reads every per-sample size from the samples' shapes, pads each axis to the
batch maximum (or a configured length) and scatters each column's real values with one
``torch.cat`` and one boolean-mask assignment. `from_dense` is the dense check with its
extraction: a batch that breaks the schema or the layout converts to nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import BatchView, batch_of, check_batch
from trajschema.core import (
    ANY,
    EDGE,
    FIXED,
    LEFT,
    PAD_TOKEN,
    DenseBatch,
    SchemaError,
    Violation,
    any_per_row,
    check_int,
    describe_value,
    first_true,
    same_bits,
)
from trajschema.dense.bind import BoundLayout, Placed, bind_layout, check_pad_token
from trajschema.dense.check import check_dense, relaxed_plan
from trajschema.dense.view import METADATA
from trajschema.padding import PaddingMemoryError, PaddingSizes, format_bytes

if TYPE_CHECKING:
    from trajschema.check import Plan
    from trajschema.core import Layout

__all__ = ["from_dense", "lay_out", "to_dense"]


def to_dense(
    plan: Plan,  # Schema.plan: the dense room sits below the front door
    samples: Any,
    *,
    layout: Layout,
    pad_token_id: int | None = None,
    lengths: Mapping[str, int] | None = None,
) -> DenseBatch:
    """Lay ``samples`` out as one dense padded batch in ``layout``.

    The samples are checked against the schema first (a `SchemaError` with every
    violation, as [`batch_violations`][trajschema.Schema.batch_violations] finds them;
    nothing is built; a field the layout holds ``absent`` may be missing), then against
    what the layout can carry: a mask the layout reads sizes from must be all ones over
    its real region, a ``same_as`` field must equal its source and a ``slice_of`` field
    its part of the source, a layout ``dtype:`` must hold every value exactly, a field
    stored as one ``(B, ...)`` column must have one shape and dtype in every sample.

    Each padded block is as long as the batch maximum of its real lengths; a
    ``length: fixed`` block (verl's ``rollout.prompt_length``) can be made longer with
    ``lengths=``. Fields the layout holds ``absent`` are dropped, ``slice_of`` and
    ``same_as`` fields are not written (their sources carry them), a ``gather`` mapping
    field becomes one per-sample list column per key (wrap it in a ``TensorList`` for
    SkyRL; an empty mapping in every sample gives no column, as SkyRL has no
    ``pixel_values`` in a batch without images), non-tensor fields become lists, and ``metadata.<name>`` keys go to
    `DenseBatch.metadata`. Every tensor is contiguous and owns its storage.

    Examples:
        >>> from trajschema.testing import verl_sample
        >>> s = ts.load_schema("text")
        >>> rows = [verl_sample(s, 3, 2, seed=0), verl_sample(s, 5, 1, seed=1)]
        >>> batch = s.to_dense(rows, layout="skyrl", pad_token_id=0)
        >>> batch["sequences"].shape, batch["response_mask"].tolist(), batch.metadata["uids"]
        (torch.Size([2, 6]), [[1, 1], [0, 1]], ['q0', 'q0'])

    Args:
        plan: the plan of the schema the samples follow (`Schema.plan`).
        samples: a list of sample mappings, or a jagged TensorDict as TransferQueue returns one.
        layout: the layout.
        pad_token_id: the pad id of ``pad: pad_token`` regions (default: the layout's pinned one).
        lengths: padded lengths of ``length: fixed`` blocks by their dim, e.g.
            ``{"prompt": 1024, "response": 2048}`` for verl's configured lengths.

    Raises:
        SchemaError: the samples break the plan, or hold what the layout cannot carry.
        ValueError: no samples (an empty batch has no dtypes or trailing sizes to lay
            out), no pad id where one is needed, a meta tensor, a bad ``lengths=``.
    """
    bound = bind_layout(layout, plan)
    view = _checked_view(plan, bound, samples)
    return lay_out(bound, view, pad_token_id=pad_token_id, lengths=lengths)


def _checked_view(plan: Plan, bound: BoundLayout, samples: Any) -> BatchView:
    view = batch_of(samples)
    if view.n == 0:
        raise ValueError(
            "to_dense needs at least one sample: an empty batch has no dtypes or trailing sizes "
            "(layers, topk, ...) to lay out"
        )
    # the fields the layout drops may be missing (from_dense leaves them out)
    absent = frozenset(p.name for p in bound.placed.values() if p.held == "absent")
    found, bindings = check_batch(relaxed_plan(plan, absent), samples, tags=None, dims=None, depth="values")
    if found:
        raise SchemaError(found, schema_name=plan.name, bindings=bindings)
    _refuse_meta(bound, view)
    return view


def _refuse_meta(bound: BoundLayout, view: BatchView) -> None:
    for p in bound.placed.values():
        if p.held == "absent" or not p.field.is_tensor:
            continue
        for i, v in enumerate(view.values_of(p.name)):
            if isinstance(v, torch.Tensor) and v.device.type == "meta":
                raise ValueError(
                    f"sample {i}, field {p.name!r}: a meta tensor ({describe_value(v)}) has no values to lay "
                    "out; build the dense batch from real tensors"
                )


@dataclasses.dataclass
class _Rows:
    """The samples as a layout reads them: per-sample values and every padded dim's sizes."""

    view: BatchView
    n: int
    sizes: dict[str, torch.Tensor]  # dim -> int64 (B,) on the CPU
    blocks: dict[str, int]  # block dim -> padded length
    found: list[Violation]

    def values(self, name: str) -> Sequence[Any] | None:
        vals = self.view.values_of(name)
        return None if all(v is None for v in vals) else vals


def lay_out(
    bound: BoundLayout,
    view: BatchView,
    *,
    pad_token_id: int | None,
    lengths: Mapping[str, int] | None,
    tags: Mapping[str, Sequence[Any]] | None = None,
    exact: bool = False,
) -> DenseBatch:
    """The dense batch of checked samples (`to_dense` after its schema check; `dense_padding`).

    ``tags``: a tag name -> one value per row, written to the layout's key for that tag.
    ``exact``: ``lengths`` may set ``length: max`` blocks too (padding rows shaped like a batch).
    """
    rows = _Rows(view=view, n=view.n, sizes=_sizes(bound, view), blocks={}, found=[])
    rows.blocks = _block_lengths(bound, rows, lengths, exact=exact)
    pad_id = _pad_id(bound, pad_token_id)
    refuse_memory(bound, _dense_bytes(bound, rows), f"{rows.n} dense rows")
    out = DenseBatch()
    for p in bound.placed.values():
        if p.held == "column":
            values = rows.values(p.name)
            if values is not None:
                _put(out, p.key or p.name, _column(bound, rows, p, values, pad_id))
        elif p.held == "gather":
            _gather(out, rows, p)
        elif p.held in ("same_as", "slice"):
            _compare_to_source(bound, rows, p)
    for tag, key in bound.layout.tags.items():
        if tags is not None and tag in tags:
            _put(out, key, list(tags[tag]))
    if rows.found:
        raise SchemaError(rows.found, schema_name=bound.plan.name)
    return out


def _dense_bytes(bound: BoundLayout, rows: _Rows) -> dict[str, int]:
    """The bytes of every tensor column the layout will write, by batch key, from the first
    sample's trailing shape and dtype and the padded lengths (nothing allocated yet)."""
    out: dict[str, int] = {}
    for p in bound.columns():
        values = rows.values(p.name)
        first = values[0] if values else None
        if not isinstance(first, torch.Tensor):
            continue
        cells = first.numel()
        if p.dim is not None and p.axis is not None:
            width = sum(rows.blocks.get(b.dim, 0) for b in bound.axis_of(p.dim).blocks)
            along = first.shape[p.axis - 1]
            cells = cells // along * width if along else _trailing(first, p.axis - 1) * width
        item = (p.entry.dtype or first.dtype).itemsize
        out[p.key or p.name] = rows.n * cells * item
    return out


def _trailing(t: torch.Tensor, skip: int) -> int:
    n = 1
    for k, s in enumerate(t.shape):
        n *= s if k != skip else 1
    return n


def refuse_memory(bound: BoundLayout, columns: Mapping[str, int], what: str, *, padding: int | None = None) -> None:
    """Refuse a dense batch larger than this machine's memory before any of it is allocated.

    Raises:
        ValueError: naming the size, the bound and the largest columns; for ``padding``
            rows, the `PaddingMemoryError` `Schema.padding` raises.
    """
    total = sum(columns.values())
    largest = tuple(sorted(columns.items(), key=lambda kv: -kv[1])[:3])
    sizes = PaddingSizes(bound.plan.name, 0, {}, {}, {}, total, 0, total)
    try:
        sizes.check_memory()
    except PaddingMemoryError as exc:
        if padding:
            raise PaddingMemoryError(
                schema_name=bound.plan.name,
                count=padding,
                dims={},
                needed=total,
                per_sample=total // padding,
                limit=exc.limit,
                machine=True,
                largest=largest,
            ) from None
        most = ", ".join(f"{k} {format_bytes(b)}" for k, b in largest)
        raise ValueError(
            f"{what} in layout {bound.layout.name!r} would take {format_bytes(total)} ({most}), more than "
            f"this machine has ({format_bytes(exc.limit)}); nothing was allocated: lower the lengths or the rows"
        ) from None


def _put(out: DenseBatch, key: str, value: Any) -> None:
    if key.startswith(METADATA):
        out.metadata[key[len(METADATA) :]] = value
    else:
        out[key] = value


def _sizes(bound: BoundLayout, view: BatchView) -> dict[str, torch.Tensor]:
    """Every per-sample dim's size in each sample, read from the first field whose shape names it."""
    sizes: dict[str, torch.Tensor] = {}
    for p in bound.placed.values():
        if not p.field.is_tensor or not p.field.shape:
            continue
        named = [(k, e.args[0]) for k, e in enumerate(p.field.shape) if e.is_name and e.args[0] in bound.parts]
        todo = [(k, d) for k, d in named if d not in sizes]
        if not todo:
            continue
        vals = view.values_of(p.name)
        if any(not isinstance(v, torch.Tensor) for v in vals):
            continue
        for k, d in todo:
            sizes[d] = torch.tensor([v.shape[k] for v in vals], dtype=torch.int64)
    for d in sorted(bound.parts - set(sizes)):  # a dim no field names on its own: a derived one
        dim = bound.plan.dims.get(d)
        expr = getattr(dim, "expr", None)
        value = expr.evaluate(sizes) if expr is not None else None
        if isinstance(value, torch.Tensor):
            sizes[d] = value
    return sizes


def _block_lengths(
    bound: BoundLayout, rows: _Rows, lengths: Mapping[str, int] | None, *, exact: bool = False
) -> dict[str, int]:
    if lengths is not None and not isinstance(lengths, Mapping):
        raise TypeError(f"lengths= must be a mapping of block dim to padded length, found {describe_value(lengths)}")
    asked = dict(lengths or {})
    out: dict[str, int] = {}
    for axis in bound.layout.axes.values():
        for b in axis.blocks:
            if b.dim in out:  # a block dim on two axes (verl's prompt: its own axis, and part of seq)
                continue
            real = rows.sizes.get(b.dim)
            longest = int(real.max()) if real is not None and real.numel() else 0
            if b.dim not in asked:
                out[b.dim] = longest
                continue
            want = check_int(f"lengths[{b.dim!r}]", asked.pop(b.dim))
            if b.length != FIXED and not exact:
                raise ValueError(
                    f"lengths[{b.dim!r}]: layout {bound.layout.name!r} pads {b.dim!r} to exactly the batch "
                    f"maximum (length: max); only length: fixed blocks take a length"
                )
            if want < longest:
                raise ValueError(f"lengths[{b.dim!r}] = {want} is below the longest {b.dim} of the batch, {longest}")
            out[b.dim] = want
    if asked:
        raise ValueError(
            f"lengths= names {sorted(asked)!r}, which are not blocks of layout {bound.layout.name!r} "
            f"(its blocks: {sorted(b.dim for a in bound.layout.axes.values() for b in a.blocks)!r})"
        )
    return out


def _pad_id(bound: BoundLayout, pad_token_id: int | None) -> int | None:
    needs = [p.name for p in bound.columns() if p.entry.pad == PAD_TOKEN and p.dim is not None]
    if pad_token_id is not None:
        check_pad_token(bound, check_int("pad_token_id", pad_token_id, minimum=0), "pad_token_id")
        return pad_token_id
    if bound.layout.pad_token_id is not None or not needs:
        return bound.layout.pad_token_id
    raise ValueError(
        f"layout {bound.layout.name!r} pads {needs[:4]!r} with the tokenizer's pad id: pass "
        f"pad_token_id=, or pin it with layout.with_pad_token(pad_token_id)"
    )


# -- one column ----------------------------------------------------------------------------


def _bad(rows: _Rows, samples: Any, field: str, code: str, expected: str, actual: str, message: str) -> None:
    for i in sorted({int(i) for i in samples})[:64]:
        rows.found.append(Violation(i, field, code, expected, actual, message))  # type: ignore[arg-type]


def _one_form(rows: _Rows, p: Placed, values: Sequence[Any], padded: bool) -> bool:
    """Whether the values share one dtype, and (past the padded axis) one shape; else violations."""
    lacking = [i for i, v in enumerate(values) if v is None]
    if lacking:
        _bad(
            rows,
            lacking,
            p.name,
            "missing",
            "in every sample",
            "missing",
            f"the layout holds {p.name!r} as one column; it is in some samples and not in these",
        )
        return False
    if not p.field.is_tensor:
        return True
    first = values[0]
    skip = p.axis - 1 if padded and p.axis is not None else None
    form = (first.dtype, [s for k, s in enumerate(first.shape) if k != skip])
    odd = [i for i, v in enumerate(values) if (v.dtype, [s for k, s in enumerate(v.shape) if k != skip]) != form]
    if odd:
        _bad(
            rows,
            odd,
            p.name,
            "shape",
            f"{describe_value(first)} as sample 0",
            "another dtype or shape",
            f"one column of {p.name!r} needs one dtype and one shape (past its padded axis) in every sample, "
            f"like sample 0's {describe_value(first)}",
        )
        return False
    return True


def _column(bound: BoundLayout, rows: _Rows, p: Placed, values: Sequence[Any], pad_id: int | None) -> Any:
    if not _one_form(rows, p, values, padded=p.dim is not None):
        return None
    if not p.field.is_tensor:
        return list(values)
    target = p.entry.dtype or values[0].dtype
    if p.dim is None:
        stacked = torch.stack(list(values))
        _check_cast(rows, p, stacked, torch.arange(rows.n), target)
        return stacked.to(target)
    flat = _jagged_values(rows, p)
    flat = flat_values(values, p.axis) if flat is None else flat
    row_of = row_index(rows.sizes[p.dim]).to(flat.device)
    _check_cast(rows, p, flat, row_of, target)
    if p.name in bound.sizes.values():
        _check_mask_ones(rows, p, flat, row_of)
    return _scatter(bound, rows, p, flat, target, pad_id)


def _jagged_values(rows: _Rows, p: Placed) -> torch.Tensor | None:
    """A TransferQueue column's joined values as they are (no per-sample cut and re-join):
    a jagged nested tensor ragged along the padded axis, its rows back to back."""
    col = rows.view.column(p.name) if rows.view.is_table else None
    if not isinstance(col, torch.Tensor) or not col.is_nested or col.layout != torch.jagged or p.axis != 1:
        return None
    if col.lengths() is not None or int(col.offsets()[0]) != 0:  # type: ignore[attr-defined]  # NJT-only
        return None
    return col.values()


def flat_values(values: Sequence[torch.Tensor], axis: int | None) -> torch.Tensor:
    """The per-sample tensors cut along their padded axis and joined: ``(sum n_i, *rest)``."""
    k = (axis or 1) - 1
    values = list(values)
    if len(values) == 1:
        return values[0].movedim(k, 0)
    return torch.cat([v.movedim(k, 0) for v in values])


def row_index(counts: torch.Tensor) -> torch.Tensor:
    """The row of each joined value when row ``i`` holds ``counts[i]`` of them (``repeat_interleave``,
    which costs ~1 ms a call on CPU where this costs ~10 us)."""
    ends = torch.cumsum(counts, 0)
    total = int(ends[-1]) if ends.numel() else 0
    return torch.searchsorted(ends, torch.arange(total, device=counts.device), right=True)


def _check_cast(rows: _Rows, p: Placed, flat: torch.Tensor, row_of: torch.Tensor, target: torch.dtype) -> None:
    if flat.dtype == target or flat.numel() == 0:
        return
    back = flat.to(target).to(flat.dtype)
    lost = back != flat
    if flat.is_floating_point():
        lost &= ~(back.isnan() & flat.isnan())
    lost = any_per_row(lost)
    if bool(lost.any()):
        _bad(
            rows,
            row_of[lost].tolist(),
            p.name,
            "value",
            f"values {target} holds exactly",
            "a value it changes",
            f"the layout stores {p.name!r} as {target}; a value of this sample does not survive the cast",
        )


def _check_mask_ones(rows: _Rows, p: Placed, flat: torch.Tensor, row_of: torch.Tensor) -> None:
    off = any_per_row(flat != 1)
    if bool(off.any()):
        _bad(
            rows,
            row_of[off].tolist(),
            p.name,
            "mask",
            "1 over the whole real region",
            "a 0 inside it",
            f"the layout reads per-sample sizes from {p.name!r}, so it must be 1 over every real position",
        )


def block_masks(bound: BoundLayout, rows: _Rows, dim: str, device: torch.device) -> torch.Tensor:
    """``(B, L)`` bool: the real positions of axis ``dim``, block after block."""
    parts = []
    for b in bound.axis_of(dim).blocks:
        length = rows.blocks[b.dim]
        real = rows.sizes[b.dim].to(device)[:, None]
        at = torch.arange(length, device=device)[None, :]
        parts.append(at >= length - real if b.pad_side == LEFT else at < real)
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def _scatter(
    bound: BoundLayout, rows: _Rows, p: Placed, flat: torch.Tensor, target: torch.dtype, pad_id: int | None
) -> torch.Tensor:
    assert p.dim is not None and p.axis is not None
    mask = block_masks(bound, rows, p.dim, flat.device)
    pad = p.entry.pad
    fill = pad_id if pad == PAD_TOKEN else 0 if pad in (ANY, EDGE) else pad
    if not isinstance(fill, (int, float)) or not _fits(fill, target):
        raise ValueError(f"field {p.name!r}: its pad value {fill!r} does not fit its dtype {target}")
    out = torch.full((rows.n, mask.shape[1], *flat.shape[1:]), fill, dtype=target, device=flat.device)
    same_bits(out)[mask] = same_bits(flat.to(target))
    if pad == EDGE:
        out = _edge(out, mask)
    return out.movedim(1, p.axis).contiguous()


def _fits(fill: Any, dtype: torch.dtype) -> bool:
    """Whether ``fill`` is exactly a value of ``dtype`` (a pad id of 2**70 is not an int64)."""
    if dtype == torch.bool:
        return fill in (0, 1)
    if dtype.is_floating_point or dtype.is_complex:
        return bool(torch.tensor(float(fill), dtype=torch.float64).to(dtype).item() == fill)
    info = torch.iinfo(dtype)
    return float(fill).is_integer() and info.min <= fill <= info.max


def _edge(out: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Every padded position takes the nearest real value of its row (a row's real region is one run)."""
    length = mask.shape[1]
    if length == 0:
        return out
    at = torch.arange(length, device=mask.device)
    first = first_true(mask)[:, None]
    last = length - 1 - first_true(mask.flip(1))[:, None]
    nearest = torch.maximum(torch.minimum(at[None, :], last), first)
    index = nearest.reshape(*nearest.shape, *([1] * (out.dim() - 2))).expand_as(out)
    edged = torch.gather(out, 1, index)
    empty = ~mask.any(dim=1)
    edged[empty] = 0
    return edged


# -- the fields the layout does not write as columns -----------------------------------------


def _compare_to_source(bound: BoundLayout, rows: _Rows, p: Placed) -> None:
    """A ``same_as`` field must equal its source; a ``slice`` its part of the source's real region."""
    mine, theirs = rows.values(p.name), rows.values(p.entry.source or "")
    if mine is None or theirs is None or any(v is None for v in mine) or any(v is None for v in theirs):
        return
    src = bound.placed[p.entry.source or ""]
    a, b = flat_values(mine, p.axis), flat_values(theirs, src.axis)
    row_a = (row_index(rows.sizes[p.dim]) if p.dim else torch.arange(rows.n)).to(a.device)
    if p.held == "slice":
        b, row_b = _part(bound, rows, p, src, b)
        if row_b.shape != row_a.shape or a.shape[1:] != b.shape[1:]:
            raise AssertionError("a slice and its source disagree on sizes the schema binds")
    same = (a == b.to(a.dtype)) | (
        a.isnan() & b.isnan() if a.is_floating_point() else torch.zeros_like(a, dtype=torch.bool)
    )
    off = any_per_row(~same)
    if bool(off.any()):
        how = f"same_as {src.name!r}" if p.held == "same_as" else f"the {p.dim} part of {src.name!r}"
        _bad(
            rows,
            row_a[off].tolist(),
            p.name,
            "value",
            how,
            "other values",
            f"layout {bound.layout.name!r} does not store {p.name!r}: it must equal {how}",
        )


def _part(
    bound: BoundLayout, rows: _Rows, p: Placed, src: Placed, flat: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The positions of the source's joined values that fall in dim ``p.dim`` of its block."""
    assert src.dim is not None and p.dim is not None
    n_src = rows.sizes[src.dim]
    row_of = row_index(n_src)
    start = torch.cumsum(n_src, 0) - n_src
    at = torch.arange(int(n_src.sum())) - start[row_of]
    before = torch.zeros(rows.n, dtype=torch.int64)
    for b in bound.axis_of(src.dim).blocks:
        inside = b.holds or (b.dim,)
        if p.dim in inside:
            for d in inside[: inside.index(p.dim)]:
                before = before + rows.sizes[d]
            break
        before = before + rows.sizes[b.dim]
    lo = before[row_of]
    keep = (at >= lo) & (at < lo + rows.sizes[p.dim][row_of])
    return flat[keep.to(flat.device)], row_of[keep]


def _gather(out: DenseBatch, rows: _Rows, p: Placed) -> None:
    """A mapping field as one per-sample list column per key of the layout's ``gather``."""
    values = rows.values(p.name)
    if values is None:
        return
    keys = p.entry.gather
    for i, v in enumerate(values):
        have = set(v or {})
        if not have <= set(keys) or (i and have != set(values[0] or {})):
            _bad(
                rows,
                [i],
                p.name,
                "value",
                f"the same keys in every sample, among {list(keys)!r}",
                f"keys {sorted(have)!r}",
                f"layout gathers {p.name!r} into the columns {list(keys)!r}, one "
                f"tensor per sample each; sample 0 has keys {sorted(values[0] or {})!r}",
            )
        elif any(not isinstance(v[k], torch.Tensor) for k in have):
            _bad(
                rows,
                [i],
                p.name,
                "value",
                "tensor values",
                "a value that is not a tensor",
                f"layout gathers {p.name!r} into tensor list columns",
            )
    if rows.found:
        return
    for k in keys:
        if values[0] and k in values[0]:
            out[k] = [v[k].clone() for v in values]


def from_dense(
    plan: Plan,
    batch: Any,
    *,
    layout: Layout,
    tags: Sequence[Mapping[str, Any]] | None = None,
    depth: str = "values",
    as_tensordict: bool = False,
) -> Any:
    """The samples of a dense batch: checked first, then cut out of their rows.

    Returns a list of sample dicts whose tensors are contiguous copies (no two samples,
    and no sample and the batch, share storage: changing one changes nothing else) and
    whose non-tensor values are Python values; or, with ``as_tensordict=True``, the
    jagged TensorDict laid out as TransferQueue returns one. Fields the layout holds
    ``absent`` are not in the samples; ``slice_of`` and ``same_as`` fields are rebuilt
    from their sources; layout ``dtype:`` columns come back in the schema's dtype.

    Raises:
        SchemaError: with every violation of the batch (the schema's and the layout's,
            as `Schema.batch_violations` with ``layout=`` reports them); nothing is converted.
    """
    found = check_dense(plan, batch, layout, tags=tags, depth=depth, extract=True)
    if found.violations:
        raise SchemaError(found.violations, schema_name=plan.name, bindings=found.bindings)
    jagged = found.jagged
    assert jagged is not None and not isinstance(jagged, list)  # a clean check extracts a TensorDict
    if as_tensordict:
        return jagged
    return [{k: own(v) for k, v in row.items()} for row in batch_of(jagged).rows()]


def own(value: Any) -> Any:
    """A value no other sample shares: tensors copied contiguous, mappings and lists rebuilt."""
    if isinstance(value, torch.Tensor):
        return value.clone(memory_format=torch.contiguous_format)
    if isinstance(value, Mapping):
        return {k: own(v) for k, v in value.items()}
    if isinstance(value, list):
        return [own(v) for v in value]
    return value
