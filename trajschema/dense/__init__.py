"""Dense padded batches: fitting a layout (how a trainer pads the samples of a schema into
one batch, `trajschema.core.Layout`) to a schema, checking such a batch, converting it to
and from samples, and padding rows in it.

Rooms it stands on: ``core`` (layouts, violations), ``check`` (the jagged engine a dense
batch's real regions are checked with) and ``padding`` (padding samples). Layout files are
read by ``load``. The public names are re-exported by `trajschema` and the `Schema` methods.
"""

from trajschema.dense.bind import BoundLayout, Placed, bind_layout, per_row_metadata, sliced_layout
from trajschema.dense.check import DenseCheck, check_dense, relaxed_plan
from trajschema.dense.convert import from_dense, own, to_dense
from trajschema.dense.extract import jagged_column
from trajschema.dense.geometry import Geometry
from trajschema.dense.padding import dense_padding
from trajschema.dense.view import one_row, read_dense

__all__ = [
    "BoundLayout",
    "DenseCheck",
    "Geometry",
    "Placed",
    "bind_layout",
    "check_dense",
    "dense_padding",
    "from_dense",
    "jagged_column",
    "one_row",
    "own",
    "per_row_metadata",
    "read_dense",
    "relaxed_plan",
    "sliced_layout",
    "to_dense",
]
