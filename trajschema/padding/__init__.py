"""Padding samples derived from a schema, and the batch multiple a PPO/GRPO step needs.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.padding.multiple import padding_needed, required_multiple
from trajschema.padding.samples import PaddingBatch, new_padding_uid

__all__ = ["PaddingBatch", "new_padding_uid", "padding_needed", "required_multiple"]
