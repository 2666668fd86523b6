"""A hypothesis strategy of dense padded batches: valid samples of a schema that a layout
can carry, laid out in it with [`Schema.to_dense`][trajschema.Schema.to_dense].

The samples come from [`samples`][trajschema.testing.samples] and are then made
representable, each change kept valid under the schema: the masks a layout reads sizes
from are all ones over their real region, a ``same_as`` field equals its source (verl's
``loss_mask`` is its ``response_mask``), a ``slice_of`` field is its part of the source
(SkyRL's ``prompts``/``responses`` of ``sequences``), fields the layout holds ``absent``
are dropped, trailing sizes (``layers``, ``topk``, ...) and dtypes are one per batch,
and a ``gather`` mapping holds one tensor per gathered key (``pixel_values`` ``(n_i, D)``,
``image_grid_thw`` ``(m_i, 3)``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from hypothesis import strategies as st

from trajschema.core import FreeDim, Layout, check_int, is_int
from trajschema.dense import BoundLayout, bind_layout
from trajschema.files import as_layout
from trajschema.load import resolve_schema
from trajschema.schema import Schema
from trajschema.testing.strategies import samples

__all__ = ["dense_batches"]


def dense_batches(
    schema: Schema | str,
    layout: Layout | str,
    *,
    size: st.SearchStrategy[int] | int = st.integers(1, 6),  # noqa: B008  # strategies are immutable
    max_len: int = 12,
    pad_token_id: int = 0,
    with_samples: bool = False,
) -> st.SearchStrategy:
    """A strategy of dense batches of ``schema`` in ``layout``; with ``with_samples``, ``(samples, batch)``.

    Examples:
        >>> from trajschema.testing import dense_batches
        >>> batch = dense_batches("text", "skyrl").example()  # doctest: +SKIP
        >>> ts.load_schema("text").validate_batch(batch, layout="skyrl")  # doctest: +SKIP

    Args:
        schema: a Schema or a schema name.
        layout: a [`Layout`][trajschema.Layout] or its name.
        size: rows per batch (an int >= 1 or a strategy of them).
        max_len: free per-sample dims are drawn up to this size.
        pad_token_id: the pad id of ``pad: pad_token`` regions (pinned on the layout).
        with_samples: also return the samples the batch was laid out from (fields the
            layout drops are not in them).

    Raises:
        TypeError: ``schema`` or ``layout`` is neither an object nor a name; ``size`` is
            neither an int nor a strategy; ``with_samples`` is not a bool.
        ValueError: an int ``size`` below 1 or above 4096; ``max_len`` below 1 or above
            4096; ``pad_token_id`` below 0.
        SchemaNotFoundError: an unknown schema or layout name.
    """
    schema = resolve_schema(schema, argument="dense_batches(schema=...)")
    lay = as_layout(layout, argument="dense_batches(layout=...)")
    if is_int(size):
        size = st.just(check_int("dense_batches(size=...)", size, minimum=1, maximum=4096))
    if not isinstance(size, st.SearchStrategy):
        raise TypeError(f"dense_batches(size=...) must be an int or a strategy of ints, found {type(size).__name__}")
    check_int("dense_batches(max_len=...)", max_len, minimum=1, maximum=4096)
    check_int("dense_batches(pad_token_id=...)", pad_token_id, minimum=0, meaning="a token id")
    if not isinstance(with_samples, bool):
        raise TypeError(f"dense_batches(with_samples=...) must be True or False, found {type(with_samples).__name__}")
    bound = bind_layout(lay.with_pad_token(pad_token_id), schema.plan)
    sizes = size
    return st.builds(
        lambda rows: (
            (rows, schema.to_dense(rows, layout=bound.layout))
            if with_samples
            else schema.to_dense(rows, layout=bound.layout)
        ),
        _rows(schema, bound, sizes, max_len),
    )


@st.composite
def _rows(
    draw: Any, schema: Schema, bound: BoundLayout, sizes: st.SearchStrategy[int], max_len: int
) -> list[dict[str, Any]]:
    least = {d: dim.min for d in _trailing_dims(bound) if isinstance(dim := schema.dims[d], FreeDim)}
    pinned = {d: draw(st.integers(lo, lo + 2)) for d, lo in least.items()}
    n = draw(sizes)
    drawn = [draw(samples(schema, dims=pinned, max_len=max_len)) for _ in range(n)]
    width = draw(st.integers(1, 4))  # pixel_values' hidden size, one per batch
    gathered = draw(st.booleans()) or any(p.held == "gather" and p.field.required for p in bound.placed.values())
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    rows = [_representable(bound, s, width if gathered else None, gen) for s in drawn]
    return _one_dtype(bound, _all_or_none(bound, rows))


def _all_or_none(bound: BoundLayout, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An optional field in every row or in none (a dense column is all rows); size masks in all."""
    masks = set(bound.sizes.values())
    for name in bound.placed:
        have = [name in r for r in rows]
        if all(have) or (not any(have) and name not in masks):
            continue
        for r in rows:
            if name in masks and name not in r:
                r[name] = torch.ones(_size(bound, bound.placed[name].dim or "", r) or 0, dtype=torch.int64)
            elif name not in masks:
                r.pop(name, None)
    return rows


def _trailing_dims(bound: BoundLayout) -> list[str]:
    """Free dims in tensor shapes the layout does not pad: one size for the whole batch."""
    found: list[str] = []
    for p in bound.placed.values():
        for e in p.field.shape or ():
            for d in e.names():
                if d not in bound.parts and isinstance(bound.plan.dims.get(d), FreeDim) and d not in found:
                    found.append(d)
    return found


def _representable(
    bound: BoundLayout, sample: Mapping[str, Any], width: int | None, gen: torch.Generator
) -> dict[str, Any]:
    out = {k: v for k, v in sample.items() if bound.placed.get(k) is None or bound.placed[k].held != "absent"}
    for mask in set(bound.sizes.values()):
        if mask in out:
            out[mask] = torch.ones_like(out[mask])
    for name, p in bound.placed.items():
        src = out.get(p.entry.source or "")
        if name not in out or src is None:
            continue
        if p.held == "same_as":
            out[name] = src.to(out[name].dtype).clone()
        elif p.held == "slice":
            out[name] = _part_of(bound, p.name, out).to(out[name].dtype)
    for name, p in bound.placed.items():
        if p.held == "gather":
            out.pop(name, None)
            if width is not None:
                out[name] = _gather_value(p.entry.gather, width, gen)
    return out


def _part_of(bound: BoundLayout, name: str, sample: Mapping[str, Any]) -> torch.Tensor:
    """The part of a slice field's source that the slice is (its offset inside the block)."""
    p = bound.placed[name]
    src = bound.placed[p.entry.source or ""]
    assert p.axis is not None and src.axis is not None and src.dim is not None and p.dim is not None
    size = {d: _size(bound, d, sample) for d in bound.parts}
    at = 0
    for b in bound.axis_of(src.dim).blocks:
        inside = b.holds or (b.dim,)
        if p.dim in inside:
            at += sum(size[d] or 0 for d in inside[: inside.index(p.dim)])
            break
        at += size[b.dim] or 0
    return sample[src.name].narrow(src.axis - 1, at, size[p.dim] or 0).clone()


def _size(bound: BoundLayout, dim: str, sample: Mapping[str, Any]) -> int | None:
    for p in bound.placed.values():
        v = sample.get(p.name)
        if isinstance(v, torch.Tensor) and p.field.shape:
            for k, e in enumerate(p.field.shape):
                if e.is_name and e.args[0] == dim:
                    return int(v.shape[k])
    return None


def _gather_value(keys: tuple[str, ...], width: int, gen: torch.Generator) -> dict[str, torch.Tensor]:
    images = int(torch.randint(0, 3, (), generator=gen))
    value: dict[str, torch.Tensor] = {}
    for k in keys:
        if k == "image_grid_thw":
            value[k] = torch.randint(1, 4, (images, 3), generator=gen)
        else:
            value[k] = torch.randn((images * 4, width), generator=gen)
    return value


def _one_dtype(bound: BoundLayout, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tensor field in one dtype across the batch: the widest one drawn (it holds every value)."""
    for name in bound.placed:
        tensors = [r[name] for r in rows if isinstance(r.get(name), torch.Tensor)]
        if len({t.dtype for t in tensors}) < 2:
            continue
        widest = max((t.dtype for t in tensors), key=lambda d: (d.is_floating_point, d.itemsize, d.is_signed))
        for r in rows:
            if isinstance(r.get(name), torch.Tensor):
                r[name] = r[name].to(widest)
    return rows
