"""Validation: the compiled checking plan, one binding of dims over ints and tensors, the generated
fast path, the sample check, the vectorized batch screen, and the column reader.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.check.batch import batch_of, check_args, check_batch, one_sample, tags_length_violation, validate_sample
from trajschema.check.columns import (
    BatchShapeError,
    BatchView,
    as_mapping,
    batch_view,
    column_rows,
    column_shapes,
    index_rows,
    is_tensordict,
    nontensor_column,
    nonzero_per_row,
    without_fx_note,
)
from trajschema.check.plan import Plan, build_plan, dtype_overflow

__all__ = [
    "BatchShapeError",
    "BatchView",
    "Plan",
    "as_mapping",
    "batch_of",
    "batch_view",
    "build_plan",
    "check_args",
    "check_batch",
    "column_rows",
    "column_shapes",
    "dtype_overflow",
    "index_rows",
    "is_tensordict",
    "nontensor_column",
    "nonzero_per_row",
    "one_sample",
    "tags_length_violation",
    "validate_sample",
    "without_fx_note",
]
