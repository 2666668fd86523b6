"""Padding rows in a layout, shaped like the dense batch they pad.

The rows are the schema's own padding samples (`Schema.padding`), sized to fit the
batch's padded lengths, then laid out by the same code as `to_dense` at exactly those
lengths, so ``torch.cat`` along the batch axis joins them to the batch key by key.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import batch_of
from trajschema.core import MAX, SPREAD, DenseBatch, FreeDim, SchemaError, check_int, same_bits
from trajschema.dense.bind import BoundLayout, bind_layout, per_row_metadata, sliced_layout
from trajschema.dense.check import check_dense, relaxed_plan
from trajschema.dense.convert import lay_out, refuse_memory
from trajschema.dense.geometry import axis_widths
from trajschema.dense.view import METADATA, DenseView, one_row, read_dense
from trajschema.padding import PaddingBatch, ids_seen, make_padding, spread_ids

if TYPE_CHECKING:
    from trajschema.check import Plan
    from trajschema.core import Layout

__all__ = ["dense_padding"]


def dense_padding(
    plan: Plan,  # Schema.plan: the dense room sits below the front door
    count: int,
    *,
    layout: Layout,
    like: Any,
    eos_token_id: int,
    pad_token_id: int | None = None,
    dims: Mapping[str, int] | None = None,
    check: bool = True,
) -> DenseBatch:
    """``count`` padding rows in ``layout``, ready to concatenate to the dense batch ``like``.

    ``like`` is checked first. Each row is a padding sample of the schema (see
    [`padding`][trajschema.Schema.padding]; dtypes, trailing sizes such as ``layers``
    and ``topk`` and the number of experts come from ``like``'s first row) whose
    per-sample sizes fit ``like``'s padded lengths: the schema's padding sizes cut to
    what fits, a ``length: max`` block filled exactly (so the padding checks clean on
    its own too), and 0 for a dim whose size mask padding fills with 0 (SkyRL's
    ``response_mask``: its padding rows have no response). The result has ``like``'s
    keys, padded lengths and dtypes; ``is_padding`` is true in the layout's tag key and
    in ``DenseBatch.metadata["is_padding"]``; the rows share a fresh uid. A ``gather``
    column gets an empty tensor per row, with the first row's trailing shape and dtype
    (``pixel_values`` ``(0, D)``), never a copy of real images. ``like`` is checked at
    depth ``shapes`` (its masks and padded regions, not its real values); a key of
    ``like`` that no schema field gives (a trainer's own extra column) is not in the result.

    Args:
        plan: the plan of the batch's schema (`Schema.plan`).
        count: how many rows (0 gives ``like``'s keys with no rows).
        layout: the batch's layout.
        like: the dense batch being padded (at least one row).
        eos_token_id: the EOS id (``pad: eos`` fields of the padding samples).
        pad_token_id: the pad id of ``pad: pad_token`` regions (default: the layout's pinned one).
        dims: padding sizes, as for [`padding`][trajschema.Schema.padding]; a per-sample
            dim the layout pads must fit ``like``'s padded lengths.
        check: check all of ``like`` first (default). ``False`` reads only its first row
            (checked; the padding is shaped on it) and its padded widths: for a hot path
            whose batches were checked upstream. A batch that breaks the layout elsewhere
            then gets padding rows as if it did not.

    Raises:
        SchemaError: ``like`` breaks the schema or the layout.
        ValueError: bad arguments, an empty ``like``, no per-sample sizes that fit
            (naming the dim, its bounds and the room left), or as for ``padding``.
        PaddingMemoryError: the rows would not fit in this machine's memory (refused before
            any of them is allocated).
    """
    count = check_int("count", count)
    bound = bind_layout(layout, plan)
    if check:
        found = check_dense(plan, like, layout, depth="shapes")
        if found.violations:
            raise SchemaError(found.violations, schema_name=plan.name, bindings=found.bindings)
    view, _ = read_dense(like)
    first = _first_row(bound, view)
    blocks = _block_widths(bound, view)
    sizes = fitting_sizes(bound, blocks, dict(dims or {}))
    # the plan without the fields the layout drops: padding emits them only if like has them
    plan = relaxed_plan(plan, frozenset(n for n, p in bound.placed.items() if p.held == "absent"))
    # two padding rows, laid out once, then repeated: every padding row is the same sample
    # (one shared uid) but for `pad: index` fields and spread routes (row 1 shows where they
    # sit), and count rows of per-sample dicts would take ~50x the memory of the dense rows
    # (refused below before any is allocated)
    pad = make_padding(
        plan,
        min(count, 2),
        eos_token_id=eos_token_id,
        like=first,
        dims={**(dims or {}), **sizes},
        include=None,
        seen=_ids_seen(plan, bound, view),
    )
    if count == 0:
        return _no_rows(like, pad.sources)
    samples = [_smallest_gather(bound, s, first) for s in pad.samples]
    two = lay_out(
        bound,
        batch_of(samples),
        pad_token_id=pad_token_id,
        lengths=blocks,
        tags={"is_padding": [True] * len(samples)},
        exact=True,
    )
    one = DenseBatch({k: v[:1] for k, v in two.items()}, metadata={k: v[:1] for k, v in two.metadata.items()})
    refuse_memory(bound, _repeated_bytes(one, count), f"{count} padding rows", padding=count)
    out = DenseBatch({k: _repeat(v, count) for k, v in one.items()})
    out.metadata.update({k: _repeat(v, count) for k, v in one.metadata.items()})
    out.sources = dict(pad.sources)
    for p in bound.columns():
        key = p.key or p.name
        if (
            p.field.pad.rule == "index"
            and not p.field.is_tensor
            and key.removeprefix(METADATA) in (out.metadata if key.startswith(METADATA) else out)
        ):
            _put_index(out, key, count)
    _spread_rows(bound, out, two, pad, count)
    out.metadata["is_padding"] = [True] * count
    return out


def _first_row(bound: BoundLayout, view: DenseView) -> dict[str, Any]:
    """``like``'s first row as a sample of schema field names, its values read (``like`` checked clean).

    Only that row is extracted (in the layout with every block ``fixed``: one row keeps the
    batch's widths), so the cost does not grow with the batch or its other rows' images.
    """
    if view.n == 0:
        raise ValueError("dense_padding needs a like= batch with at least one row (dtypes and trailing sizes)")
    one = one_row(view, 0, per_row_metadata(bound))
    found = check_dense(bound.plan, one, sliced_layout(bound.layout), depth="shapes", extract=True, rows=True)
    if found.violations or not isinstance(found.jagged, list):  # only with check=False: a checked batch's row is clean
        raise SchemaError(found.violations, schema_name=bound.plan.name, bindings=found.bindings)
    return found.jagged[0]


def _repeated_bytes(one: DenseBatch, count: int) -> dict[str, int]:
    """The bytes ``count`` copies of the one laid-out padding row take, by key."""
    out = {}
    for k, v in [*one.items(), *one.metadata.items()]:
        if isinstance(v, torch.Tensor):
            out[k] = count * v.nbytes
        elif isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
            out[k] = count * (v[0].nbytes + _TENSOR_OBJECT)
        else:
            out[k] = count * 8  # a list entry: one pointer to a shared immutable value
    return out


#: The Python object of one small tensor in a per-row list column (measured at ~200 bytes; an upper bound).
_TENSOR_OBJECT = 512


def _repeat(value: Any, count: int) -> Any:
    """A one-row column as ``count`` rows that share nothing that can change in place."""
    if isinstance(value, torch.Tensor):
        return value.expand(count, *value.shape[1:]).contiguous()
    first = value[0]
    if isinstance(first, torch.Tensor):
        return [first.clone() for _ in range(count)]
    if first is None or isinstance(first, (str, int, float, bool, bytes)):
        return [first] * count
    return [copy.deepcopy(first) for _ in range(count)]


def _put_index(out: DenseBatch, key: str, count: int) -> None:
    """A ``pad: index`` field: padding row ``i`` holds ``i``, as `Schema.padding` gives it."""
    if key.startswith(METADATA):
        out.metadata[key[len(METADATA) :]] = list(range(count))
    else:
        out[key] = list(range(count))


def _block_widths(bound: BoundLayout, view: DenseView) -> dict[str, int]:
    widths, _ = axis_widths(bound, view)
    out = {}
    for axis in bound.layout.axes.values():
        for b in axis.blocks:
            w = widths.get(b.dim) if axis.concat else widths.get(axis.dim)
            if w is not None:
                out[b.dim] = w
    return out


def fitting_sizes(bound: BoundLayout, blocks: Mapping[str, int], asked: Mapping[str, int]) -> dict[str, int]:
    """The per-sample sizes of a padding row: every free dim a block holds, fitting ``blocks``' lengths."""
    plan = bound.plan
    sizes: dict[str, int] = {}
    for axis in bound.layout.axes.values():
        for b in axis.blocks:
            if b.dim not in blocks:
                continue
            free = [d for d in (b.holds or (b.dim,)) if hasattr(plan.dims.get(d), "min")]
            if not free:
                continue
            for d in free:
                sizes.setdefault(d, _first_size(bound, d, asked))
            _fit_block(bound, b.dim, free, sizes, blocks[b.dim], exact=b.length == MAX, asked=asked)
    return sizes


def _first_size(bound: BoundLayout, d: str, asked: Mapping[str, int]) -> int:
    if _zero_mask(bound, d):
        return 0
    if d in asked:
        return check_int(f"dims[{d!r}]", asked[d])
    return int(bound.plan.padding_sizes.get(d, _least(bound, d)))


def _least(bound: BoundLayout, d: str) -> int:
    """The least size of ``d``, a free dim (a padded block holds free dims only)."""
    dim = bound.plan.dims[d]
    return dim.min if isinstance(dim, FreeDim) else 0


def _zero_mask(bound: BoundLayout, d: str) -> bool:
    """Whether the mask that counts ``d`` is all 0 in padding (then a padding row has no ``d``)."""
    mask = bound.sizes.get(d)
    f = bound.plan.fields.get(mask or "")
    return f is not None and f.pad.rule == "fill" and f.pad.value == 0


def _fit_block(
    bound: BoundLayout, block: str, free: list[str], sizes: dict[str, int], width: int, *, exact: bool, asked: Any
) -> None:
    """Resize the dims of one block so they sum to ``width`` (``exact``) or at most ``width``."""
    fixed = [d for d in free if _zero_mask(bound, d) or d in asked]
    movable = [d for d in free if d not in fixed]
    rest = width - sum(sizes[d] for d in fixed)
    if not movable:  # e.g. SkyRL's response: padding rows have none, shorter than the block
        if rest < 0:
            raise _unfit(bound, block, width, sizes, free, exact=False)
        return
    # the largest default (the prompt) absorbs the room; the others keep theirs, down to their min
    movable.sort(key=lambda d: sizes[d])
    big, small = movable[-1], movable[:-1]
    for d in small:
        sizes[d] = max(_least(bound, d), min(sizes[d], rest - _least(bound, big)))
        rest -= sizes[d]
    want = rest if exact else min(sizes[big], rest)
    if want < max(_least(bound, big), 1 if big == "prompt" else 0) or rest < 0:
        raise _unfit(bound, block, width, sizes, free, exact)
    sizes[big] = want


def _unfit(
    bound: BoundLayout, block: str, width: int, sizes: Mapping[str, int], free: list[str], exact: bool
) -> ValueError:
    mins = {d: _least(bound, d) for d in free}
    now = {d: sizes[d] for d in free}
    how = "exactly" if exact else "at most"
    return ValueError(
        f"no padding row fits layout {bound.layout.name!r}: block {block!r} is {width} long and its dims "
        f"{free!r} must sum to {how} that (schema mins {mins}, padding sizes {now})"
    )


def _smallest_gather(bound: BoundLayout, sample: Mapping[str, Any], first: Mapping[str, Any]) -> dict[str, Any]:
    """A padding sample whose gathered mappings hold empty tensors shaped like the first real row's."""
    out = dict(sample)
    for p in bound.placed.values():
        ref = first.get(p.name)
        if p.held == "gather" and isinstance(ref, Mapping) and p.name in out:
            out[p.name] = {
                k: ref[k].new_empty((0, *ref[k].shape[1:])) if ref[k].dim() else ref[k].new_empty(0)
                for k in p.entry.gather
                if isinstance(ref.get(k), torch.Tensor)
            }
    return out


def _no_rows(like: Any, sources: Mapping[str, str]) -> DenseBatch:
    """No padding: ``like``'s tensor keys with zero rows (nothing was laid out to read shapes from)."""
    view, _ = read_dense(like)
    empty = DenseBatch({k: v[:0].clone() if isinstance(v, torch.Tensor) else [] for k, v in view.columns.items()})
    empty.metadata.update({k: [] for k in view.metadata if isinstance(view.metadata[k], list)})
    empty.metadata["is_padding"] = []
    empty.sources = dict(sources)
    return empty


def _ids_seen(plan: Plan, bound: BoundLayout, view: DenseView) -> dict[str, int]:
    """How many ids each spread dim reaches over all rows of the batch ``view`` reads (`ids_seen` of its dense columns).

    A dense column's padded region holds the layout's fill (0 for routes), never above a real id.
    """
    columns = {}
    for p in bound.placed.values():
        if p.field.pad.rule == SPREAD and p.held != "absent":
            key = p.key or p.name
            columns[p.name] = view.columns.get(key)
    return ids_seen(plan, columns) if columns else {}


# -- spread routes over all the padding rows ------------------------------------------------


def _spread_rows(bound: BoundLayout, out: DenseBatch, two: DenseBatch, pad: PaddingBatch, count: int) -> None:
    """Number the spread routes of ``out``'s repeated rows once over all of them, as `Schema.padding` does.

    ``two`` is the first two padding rows laid out: where they differ, a spread column holds
    the padding's tokens (row ``r``'s ids are row 0's shifted by ``r * tokens * topk``
    modulo the experts, which moves every id, so every such slot differs). Those slots of
    every row get `spread_ids` of the whole call at once; where the layout orders them
    otherwise than the sample (checked on the two rows), each row is shifted instead.
    """
    for p in bound.placed.values():
        key = p.key or p.name
        col = out.get(key)
        if p.field.pad.rule != SPREAD or p.name not in pad.fields.keys() or not isinstance(col, torch.Tensor):
            continue
        ids = pad.dims[p.field.pad.over or ""]
        sample = pad.fields[p.name]
        per_row = (sample.shape[1] if sample.dim() > 2 else 1) * sample.shape[-1]  # tokens * topk of a row
        if count < 2 or len(two.get(key, ())) < 2 or per_row % ids == 0:
            continue  # one row, or every row the same ids: the repeated rows are the spread
        slots = two[key][0] != two[key][1]
        spread = spread_ids((count, *sample.shape[1:]), ids, col.dtype).reshape(count, -1)
        if int(slots.sum()) == spread.shape[1]:
            same_bits(col)[:, slots] = same_bits(spread)
            if torch.equal(same_bits(col[:2]), same_bits(two[key][:2])):
                continue
        _shift_rows(col, two[key][0], slots, per_row % ids, ids)


def _shift_rows(col: torch.Tensor, first: torch.Tensor, slots: torch.Tensor, step: int, ids: int) -> None:
    """Row ``r`` of ``col``: ``first`` with its ``slots`` moved by ``r * step`` modulo ``ids``, in bounded chunks."""
    wide = first.to(torch.int64)
    chunk = max(1, _SHIFT_CHUNK // max(1, wide.numel()))
    for start in range(0, col.shape[0], chunk):
        rows = torch.arange(start, min(start + chunk, col.shape[0]), dtype=torch.int64)
        shift = (rows * step % ids).view(-1, *([1] * wide.dim()))
        moved = torch.where(slots, (wide + shift) % ids, wide)
        same_bits(col[start : start + len(rows)]).copy_(same_bits(moved.to(col.dtype)))


#: Elements shifted at a time by `_shift_rows` (64 MB of int64).
_SHIFT_CHUNK = 1 << 23
