"""Padding samples derived from a schema, their sizes, spread routes, and the batch multiple a PPO/GRPO step needs.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.padding.multiple import padding_needed, required_multiple
from trajschema.padding.samples import (
    FieldSize,
    PaddingBatch,
    PaddingMemoryError,
    PaddingSizeError,
    PaddingSizes,
    format_bytes,
    make_padding,
    new_padding_uid,
    resolve_padding,
)
from trajschema.padding.spread import spread_ids

__all__ = [
    "FieldSize",
    "PaddingBatch",
    "PaddingMemoryError",
    "PaddingSizeError",
    "PaddingSizes",
    "format_bytes",
    "make_padding",
    "new_padding_uid",
    "padding_needed",
    "required_multiple",
    "resolve_padding",
    "spread_ids",
]
