"""Packed batches (THD): one flat run of tokens cut into one segment per sample by offsets,
the layout flash-attention's variable-length kernels train on. Fitting a packed layout
(`trajschema.core.PackedLayout`) to a schema, checking such a batch, converting it to and
from samples, packing verl's dense batch, and padding with whole padding sequences.

Rooms it stands on: ``core`` (layouts, violations), ``check`` (the jagged engine each
sequence's real tokens are checked with), ``padding`` (padding samples), ``files`` (a
``dense:`` layout by name) and ``dense`` (verl's packed batch keeps dense columns). The
public names are re-exported by `trajschema` and the `Schema` methods.
"""

from trajschema.packed.bind import BoundPacked, PackedPlaced, bind_packed
from trajschema.packed.check import PackedCheck, check_packed
from trajschema.packed.convert import from_packed, to_packed
from trajschema.packed.nopad import pack_dense
from trajschema.packed.padding import packed_padding, padding_sizes
from trajschema.packed.view import read_packed

__all__ = [
    "BoundPacked",
    "PackedCheck",
    "PackedPlaced",
    "bind_packed",
    "check_packed",
    "from_packed",
    "pack_dense",
    "packed_padding",
    "padding_sizes",
    "read_packed",
    "to_packed",
]
