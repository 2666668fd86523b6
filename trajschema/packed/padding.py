"""Padding a packed batch: whole padding sequences appended as segments of their own.

A padding sequence is a padding sample of the schema (`trajschema.padding`: EOS tokens,
zero loss and response masks, spread routes, a fresh uid, tagged ``is_padding``) of the
fewest tokens the layout's alignment allows (at least one prompt and one response token),
packed after the real sequences: it never shares a segment with one, so no real
sequence attends to it and no padding token joins a real sequence (prime-rl's
``pad_micro_batch`` merges its padding into the last sequence).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch

from trajschema.core import FreeDim, PackedBatch
from trajschema.packed.bind import bind_packed
from trajschema.packed.convert import from_packed, to_packed

if TYPE_CHECKING:
    from trajschema.check import Plan
    from trajschema.core import PackedLayout

__all__ = ["packed_padding", "padding_sizes"]


def padding_sizes(layout: PackedLayout) -> dict[str, int]:
    """The parts of a padding sequence: the fewest tokens (at least 2) the alignment allows, one the response's."""
    total = FreeDim("seq", min=2, multiple_of=layout.alignment).first_size(2)
    assert total is not None
    first, *rest = layout.parts or (layout.tokens,)
    sizes = {first: total - len(rest)}
    sizes.update(dict.fromkeys(rest, 1))
    return sizes


def _tags_of(plan: Plan, layout: PackedLayout, like: Any, n: int) -> list[dict[str, Any]]:
    from trajschema.packed.view import read_packed

    cols = read_packed(like)[0]
    out: list[dict[str, Any]] = [{} for _ in range(n)]
    for tag, key in layout.tags.items():
        col = cols.get(key)
        values = (
            col.tolist() if isinstance(col, torch.Tensor) else list(col) if isinstance(col, (list, tuple)) else None
        )
        if values is not None and len(values) == n:
            for t, v in zip(out, values, strict=True):
                t[tag] = v
    for t in out:
        t.setdefault("is_padding", False)
    return out


def packed_padding(
    plan: Plan,
    count: int,
    *,
    layout: PackedLayout,
    like: Any,
    eos_token_id: int,
    pad_token_id: int | None = None,
    dims: Mapping[str, int] | None = None,
) -> PackedBatch:
    """``like`` with ``count`` padding sequences appended (see the module docstring).

    Raises:
        SchemaError: ``like`` breaks the schema or the layout.
        ValueError: as the padding room raises; a layout over a dense one.
    """
    from trajschema.padding import ids_seen, make_padding

    if bind_packed(layout, plan).dense is not None:
        raise ValueError(
            f"layout {layout.name!r} packs a dense batch: pad the dense batch (dense_padding), then pack it"
        )
    real = from_packed(plan, like, layout=layout)
    sizes = {**padding_sizes(layout), **(dims or {})}
    pad = make_padding(
        plan,
        count,
        eos_token_id=eos_token_id,
        like=real[0] if real else None,
        dims=sizes,
        include=None,
        seen=ids_seen(plan, real) if real else None,
    )
    tags = _tags_of(plan, layout, like, len(real)) + [dict(t) for t in pad.tags]
    names = set(real[0]) if real else set(plan.fields)
    padded = [{k: v for k, v in s.items() if k in names} for s in pad.samples]
    pad_id = layout.pad_token_id if pad_token_id is None else pad_token_id
    return to_packed(
        plan, real + padded, layout=layout, pad_token_id=pad_id, tags=[{t: d.get(t) for t in layout.tags} for d in tags]
    )
