"""The vocabulary every other room speaks: dims and their arithmetic, field and tag declarations,
kinds, types, errors, and the value engine.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.core.decl import DTYPES_BY_NAME, KINDS, PAD_RULES, Dim, Field, PadRule, Tag, dtype_name, short_dtype
from trajschema.core.dims import DerivedDim, Expr, ExprError, FixedDim, FreeDim, parse_expr, solve_for, solve_linear
from trajschema.core.errors import SchemaDefinitionError, SchemaError, SchemaMatchError, SchemaNotFoundError, Violation
from trajschema.core.kinds import describe_value, fmt_shape, kind_ok, kinds_ok, shown_value
from trajschema.core.types import DEPTHS, MAX_SIZE, Batch, Depth, Sample, SchemaLike, TagDict, ViolationCode
from trajschema.core.validation import check_int, check_real, is_int, positive_int
from trajschema.core.values import (
    checks_for,
    counts_exactly_to,
    element_failures,
    failing_positions,
    failure_summary,
    fits_dtype,
    float_bound,
    nonzero_per_position,
    number_label,
    scalar_failures,
    tensor_clean,
    tensor_extremes,
    tensor_has_failures,
    value_failures,
    values_label,
)
from trajschema.core.version import VERSION

__all__ = [
    "DEPTHS",
    "DTYPES_BY_NAME",
    "KINDS",
    "MAX_SIZE",
    "PAD_RULES",
    "VERSION",
    "Batch",
    "Depth",
    "DerivedDim",
    "Dim",
    "Expr",
    "ExprError",
    "Field",
    "FixedDim",
    "FreeDim",
    "PadRule",
    "Sample",
    "SchemaDefinitionError",
    "SchemaError",
    "SchemaLike",
    "SchemaMatchError",
    "SchemaNotFoundError",
    "Tag",
    "TagDict",
    "Violation",
    "ViolationCode",
    "check_int",
    "check_real",
    "checks_for",
    "counts_exactly_to",
    "describe_value",
    "dtype_name",
    "element_failures",
    "failing_positions",
    "failure_summary",
    "fits_dtype",
    "float_bound",
    "fmt_shape",
    "is_int",
    "kind_ok",
    "kinds_ok",
    "nonzero_per_position",
    "number_label",
    "parse_expr",
    "positive_int",
    "scalar_failures",
    "short_dtype",
    "shown_value",
    "solve_for",
    "solve_linear",
    "tensor_clean",
    "tensor_extremes",
    "tensor_has_failures",
    "value_failures",
    "values_label",
]
