"""Validation: the compiled checking plan, one binding of dims over ints and tensors, the generated
fast path, the sample check, the vectorized batch screen, and the column reader.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one. Importing it imports nothing: each name
is imported from its module when first read, so a schema is read without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.check.batch import (
        batch_of,
        check_args,
        check_batch,
        check_packed_batch,
        one_sample,
        sample_violations,
        tags_length_violation,
        validate_sample,
    )
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
    from trajschema.check.plan import DECLARED, Plan, build_plan, dtype_overflow

__all__ = [
    "DECLARED",
    "BatchShapeError",
    "BatchView",
    "Plan",
    "as_mapping",
    "batch_of",
    "batch_view",
    "build_plan",
    "check_args",
    "check_batch",
    "check_packed_batch",
    "column_rows",
    "column_shapes",
    "dtype_overflow",
    "index_rows",
    "is_tensordict",
    "nontensor_column",
    "nonzero_per_row",
    "one_sample",
    "sample_violations",
    "tags_length_violation",
    "validate_sample",
    "without_fx_note",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.check.batch": (
        "batch_of",
        "check_args",
        "check_batch",
        "check_packed_batch",
        "one_sample",
        "sample_violations",
        "tags_length_violation",
        "validate_sample",
    ),
    "trajschema.check.columns": (
        "BatchShapeError",
        "BatchView",
        "as_mapping",
        "batch_view",
        "column_rows",
        "column_shapes",
        "index_rows",
        "is_tensordict",
        "nontensor_column",
        "nonzero_per_row",
        "without_fx_note",
    ),
    "trajschema.check.plan": ("DECLARED", "Plan", "build_plan", "dtype_overflow"),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
