"""Padding samples derived from a schema, their sizes, spread routes, and the batch multiple a PPO/GRPO step needs.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one. Each name is imported when first read:
the batch multiple (`trajschema plan`) needs no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.padding.multiple import padding_needed, required_multiple
    from trajschema.padding.samples import (
        FieldSize,
        PaddingBatch,
        PaddingMemoryError,
        PaddingSizeError,
        PaddingSizes,
        format_bytes,
        ids_seen,
        make_padding,
        new_padding_uid,
        resolve_padding,
    )
    from trajschema.padding.spread import largest_id, spread_ids

__all__ = [
    "FieldSize",
    "PaddingBatch",
    "PaddingMemoryError",
    "PaddingSizeError",
    "PaddingSizes",
    "format_bytes",
    "ids_seen",
    "largest_id",
    "make_padding",
    "new_padding_uid",
    "padding_needed",
    "required_multiple",
    "resolve_padding",
    "spread_ids",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.padding.multiple": ("padding_needed", "required_multiple"),
    "trajschema.padding.samples": (
        "FieldSize",
        "PaddingBatch",
        "PaddingMemoryError",
        "PaddingSizeError",
        "PaddingSizes",
        "format_bytes",
        "ids_seen",
        "make_padding",
        "new_padding_uid",
        "resolve_padding",
    ),
    "trajschema.padding.spread": ("largest_id", "spread_ids"),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
