"""Declarations: what one field, pad rule and tag of a schema say, as the loader compiled them.

These are plain frozen values (no behaviour beyond describing themselves), so every
layer above — the value engine, the dim binding, sample and batch checks, padding and
the [`Schema`][trajschema.Schema] front door — can read them without importing each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from trajschema.core.dims import DerivedDim, Expr, FixedDim, FreeDim

__all__ = [
    "DTYPES_BY_NAME",
    "KINDS",
    "PAD_RULES",
    "SPREAD",
    "Dim",
    "Field",
    "PadRule",
    "Tag",
    "dtype_name",
    "short_dtype",
]

#: Pad rules that are names rather than literals.
PAD_RULES = ("eos", "positions", "uid", "index", "empty", "copy")
#: The pad rule written as a mapping, ``pad: {spread: experts}``: integer ids spread evenly
#: over ``0 .. experts - 1``, distinct along the last axis (see `PadRule.over`).
SPREAD = "spread"
#: Non-tensor kinds a field may declare.
KINDS = ("int", "float", "bool", "str", "mapping", "any")

_SHORT_DTYPE = {
    torch.bool: "b",
    torch.uint8: "u8",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
}


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.int64`` -> ``"int64"``."""
    return str(dtype).removeprefix("torch.")


def short_dtype(dtype: torch.dtype) -> str:
    """``torch.int16`` -> ``"i16"``, as tensors are printed in reports."""
    return _SHORT_DTYPE.get(dtype, dtype_name(dtype))


#: The dtypes a schema file may declare, by name (``"int64"``).
DTYPES_BY_NAME: dict[str, torch.dtype] = {dtype_name(d): d for d in _SHORT_DTYPE}


@dataclasses.dataclass(frozen=True)
class PadRule:
    """How a padding sample fills one field: a named rule or a literal fill value."""

    rule: str  # one of PAD_RULES, "fill", or SPREAD
    value: int | float | bool | None = None
    #: For ``spread``: the dim whose size is the number of ids to spread over (``experts``).
    over: str | None = None

    def __str__(self) -> str:
        if self.rule == SPREAD:
            return f"{{spread: {self.over}}}"
        return repr(self.value) if self.rule == "fill" else self.rule


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a sample: a tensor (``shape`` + ``dtypes``) or a non-tensor ``kind``.

    Attributes:
        name: the field's key in a sample.
        kind: ``"tensor"`` or one of ``int float bool str mapping any``.
        shape: for tensors, one parsed expression per axis.
        dtypes: for tensors, the allowed dtypes; padding uses the first unless a reference
            sample says otherwise.
        required: whether every sample must have it.
        pad: the padding rule.
        values / min / max / finite: value checks (``depth="values"``).
        min_expr / max_expr: bounds written in dims (``max: experts - 1``), checked
            like ``min`` / ``max`` once every dim they name is bound, and skipped before.
        distinct: every slice along the last axis holds distinct values (a token's
            ``topk`` routed experts); a break is the violation code ``repeated``.
    """

    name: str
    kind: str
    shape: tuple[Expr, ...] | None
    dtypes: tuple[torch.dtype, ...]
    required: bool
    pad: PadRule
    values: tuple[int | float | bool, ...] | None = None
    min: int | float | None = None
    max: int | float | None = None
    finite: bool = False
    description: str = ""
    min_expr: Expr | None = None
    max_expr: Expr | None = None
    distinct: bool = False

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    @property
    def has_value_checks(self) -> bool:
        return (
            self.values is not None
            or self.min is not None
            or self.max is not None
            or self.finite
            or self.min_expr is not None
            or self.max_expr is not None
            or self.distinct
        )

    @property
    def has_dim_bounds(self) -> bool:
        return self.min_expr is not None or self.max_expr is not None

    def bounded(self, env: Mapping[str, int]) -> Field:
        """This field with its dim bounds evaluated under ``env`` and folded into ``min`` / ``max``.

        A bound whose dims are not all bound in ``env`` stays a dim bound (it is checked
        once they are); the field itself is returned when nothing changes, so callers may
        cache on it. Literal and dim bounds combine: the tighter one holds. ``env`` holds
        Python ints (one size for every sample).
        """
        if not self.has_dim_bounds:
            return self
        lo = self.min_expr.evaluate(env) if self.min_expr is not None else None
        hi = self.max_expr.evaluate(env) if self.max_expr is not None else None
        if lo is None and hi is None:
            return self
        return dataclasses.replace(
            self,
            min=self.min if lo is None else (lo if self.min is None else max(self.min, lo)),
            max=self.max if hi is None else (hi if self.max is None else min(self.max, hi)),
            min_expr=self.min_expr if lo is None else None,
            max_expr=self.max_expr if hi is None else None,
        )

    def describe(self) -> str:
        """``int64[prompt + response]`` or ``int``."""
        if not self.is_tensor:
            return self.kind
        dt = "|".join(dtype_name(d) for d in self.dtypes)
        return f"{dt}[{', '.join(str(e) for e in self.shape or ())}]"


@dataclasses.dataclass(frozen=True)
class Tag:
    """One declared key of the per-sample tag dict.

    ``equals`` ties a tag to a dim expression (``seq_len: {equals: seq}``); ``kind``
    constrains the value's type; ``default`` is what an absent tag means.
    """

    name: str
    kind: str | None = None
    default: Any = None
    equals: Expr | None = None
    description: str = ""


Dim = FixedDim | FreeDim | DerivedDim
