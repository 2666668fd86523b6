"""Declarations: what one field, pad rule and tag of a schema say, as the loader compiled them.

These are plain frozen values (no behaviour beyond describing themselves), so every
layer above — the value engine, the dim binding, sample and batch checks, padding and
the [`Schema`][trajschema.Schema] front door — can read them without importing each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trajschema.core.dims import DerivedDim, Expr, FixedDim, FreeDim
from trajschema.core.dtypes import DType, dtype_name, is_dtype, torch_dtype

if TYPE_CHECKING:
    import torch

__all__ = [
    "KINDS",
    "PAD_RULES",
    "SPREAD",
    "Dim",
    "Field",
    "PadRule",
    "Tag",
]

#: Pad rules that are names rather than literals.
PAD_RULES = ("eos", "positions", "uid", "index", "empty", "copy")
#: The pad rule written as a mapping, ``pad: {spread: experts}``: integer ids spread evenly
#: over ``0 .. experts - 1``, distinct along the last axis (see `PadRule.over`).
SPREAD = "spread"
#: Non-tensor kinds a field may declare.
KINDS = ("int", "float", "bool", "str", "mapping", "any")


class _DTypes:
    r"""A `Field`'s ``dtypes``: stored by name, so a schema is read without torch, and read as torch dtypes.

    ``Field(..., dtypes=(torch.int64,))``, ``Field(..., dtypes=("int64",))`` (or `DType`\ s) store the
    same names (`Field.dtype_names`, set by ``Field.__post_init__``); the first read of
    ``field.dtypes`` imports torch and leaves the ``torch.dtype`` tuple in the instance, where
    later reads find it as a plain attribute (this is a non-data descriptor: checks read
    ``dtypes`` on every sample). Anything else given is kept as it is, for the schema's own
    checks to report.
    """

    def __get__(self, obj: Any, owner: Any = None) -> tuple[torch.dtype, ...]:
        if obj is None:
            raise AttributeError("dtypes")  # a dataclass field without a default
        names = obj.__dict__["dtype_names"]
        found = tuple(torch_dtype(n) for n in names) if _known_names(names) else names
        obj.__dict__["dtypes"] = found
        return found


def _as_names(value: Any) -> Any:
    if isinstance(value, (tuple, list)) and all(isinstance(d, (str, DType)) or is_dtype(d) for d in value):
        return tuple(dtype_name(d) for d in value)
    return value


def _known_names(names: Any) -> bool:
    from trajschema.core.dtypes import DTYPE_NAMES, integer_capacity

    return isinstance(names, tuple) and all(
        isinstance(n, str) and (n in DTYPE_NAMES or integer_capacity(n) is not None) for n in names
    )


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


# eq, hash and repr are written below: the generated ones would read `dtypes`, and so import torch.
@dataclasses.dataclass(frozen=True, eq=False, repr=False)
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
    if TYPE_CHECKING:  # a descriptor without a default: torch dtypes read, torch dtypes or names given
        dtypes: tuple[Any, ...]
    else:
        dtypes: tuple[torch.dtype, ...] = _DTypes()
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
    def dtype_names(self) -> tuple[str, ...]:
        """The allowed dtypes by name (``("int64",)``): what reading a schema needs, without torch."""
        return self.__dict__["dtype_names"]

    def __post_init__(self) -> None:
        # __init__ left what was given under "dtypes"; it is kept by name (see `_DTypes`)
        self.__dict__["dtype_names"] = _as_names(self.__dict__.pop("dtypes"))

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "dtypes"}  # the torch dtypes are made again

    def _key(self) -> tuple[Any, ...]:
        return tuple(self.__dict__["dtype_names" if f.name == "dtypes" else f.name] for f in dataclasses.fields(self))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Field) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        shown = (f"{f.name}={v!r}" for f, v in zip(dataclasses.fields(self), self._key()) if f.repr)
        return f"{type(self).__name__}({', '.join(shown)})"

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
            dtypes=self.dtype_names,  # as stored: reading `dtypes` would import torch
            min=self.min if lo is None else (lo if self.min is None else max(self.min, lo)),
            max=self.max if hi is None else (hi if self.max is None else min(self.max, hi)),
            min_expr=self.min_expr if lo is None else None,
            max_expr=self.max_expr if hi is None else None,
        )

    def describe(self) -> str:
        """``int64[prompt + response]`` or ``int``."""
        if not self.is_tensor:
            return self.kind
        dt = "|".join(map(str, self.dtype_names))
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
