"""Tensor dtypes by name: what a schema may declare and the arithmetic of each, without torch.

A schema is read, shown, compared and exported by commands that touch no tensor
(``trajschema list``, ``show``, ``diff``, ``export``), so declarations name their dtypes
(``"int64"``) and everything the loader and the value engine need to know about a
dtype lives here as plain numbers: the integers it holds, how a float rounds onto it and
steps to its neighbour. torch is imported only to turn a name into a ``torch.dtype``
(`torch_dtype`), which happens when a tensor is checked or built.

The float arithmetic reproduces torch's own conversions bit for bit (a property test
holds it to torch): a Python float becomes a ``float16`` or ``bfloat16`` through
``float32``, rounding to nearest-even at each step, as ``tensor.to(dtype)`` does.
"""

from __future__ import annotations

import dataclasses
import math
import struct
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = [
    "DTYPES_BY_NAME",  # noqa: F822 (built by the module's __getattr__ when first read: it imports torch)
    "DTYPE_NAMES",
    "DType",
    "as_dtype",
    "counts_exactly_to",
    "dtype_name",
    "float_max",
    "integer_capacity",
    "is_dtype",
    "is_tensor",
    "round_to",
    "short_dtype",
    "step",
    "torch_dtype",
]

#: The dtypes a schema file may declare, in the order they are listed.
DTYPE_NAMES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "float16",
    "bfloat16",
    "float32",
    "float64",
)

_SHORT = {
    "bool": "b",
    "uint8": "u8",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint16": "u16",
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
}

#: ``(smallest, largest)`` of each integer dtype torch has (bool holds 0 and 1).
_INTEGER_RANGE = {
    "bool": (0, 1),
    "uint8": (0, 2**8 - 1),
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}

#: The float dtypes stepped here: (bits of precision, largest finite value).
_FLOATS = {
    "float16": (11, 65504.0),
    "bfloat16": (8, 3.3895313892515355e38),
    "float32": (24, 3.4028234663852886e38),
    "float64": (53, sys.float_info.max),
}


@dataclasses.dataclass(frozen=True)
class DType:
    """A tensor dtype known by its name (``DType("int64")``), for arithmetic that needs no tensor.

    The value engine's domains are `DType`s or kinds (``"int"``, ``"bool"``, ...), so a
    dtype's ``bool`` and the kind ``bool`` stay two domains.
    """

    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @property
    def is_complex(self) -> bool:
        return self.name.startswith("complex")

    @property
    def is_floating_point(self) -> bool:
        return self.name.startswith(("float", "bfloat"))


def dtype_name(dtype: Any) -> str:
    """``torch.int64``, ``DType("int64")`` or ``"int64"`` -> ``"int64"`` (torch is not imported)."""
    return dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")


def short_dtype(dtype: Any) -> str:
    """``torch.int16`` -> ``"i16"``, as tensors are printed in reports."""
    name = dtype_name(dtype)
    return _SHORT.get(name, name)


def as_dtype(dtype: Any) -> DType:
    """A `DType` for a ``torch.dtype``, a `DType` or a dtype name."""
    return dtype if isinstance(dtype, DType) else DType(dtype_name(dtype))


def is_dtype(value: Any) -> bool:
    """Whether ``value`` is a ``torch.dtype``, without importing torch (none exists before it is imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.dtype)


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is a ``torch.Tensor``, without importing torch (none exists before it is imported)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def torch_dtype(name: str) -> torch.dtype:
    """The ``torch.dtype`` named ``name`` (imports torch)."""
    import torch

    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    # an alias (torch.int is int32, torch.float float32) is refused: a name stands for one dtype
    if not isinstance(dtype, torch.dtype) or dtype_name(dtype) != name:
        raise ValueError(f"torch has no dtype named {name!r}")
    return dtype


def __getattr__(name: str) -> Any:
    # DTYPES_BY_NAME holds torch dtypes: built (importing torch) when first read.
    if name == "DTYPES_BY_NAME":
        table = {n: torch_dtype(n) for n in DTYPE_NAMES}
        globals()[name] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -- integers ----------------------------------------------------------------------------


def integer_capacity(dtype: Any) -> tuple[int, int] | None:
    """``(smallest, largest)`` integer ``dtype`` holds, for integer and bool dtypes; ``None`` for the others.

    A bound written in dims (``max: experts - 1``) allows ids up to a size the schema
    does not know in advance, so the dtype must be checked against it once the size is
    known: a ``uint8`` column cannot hold expert 256 (prime-rl #3051).

    Examples:
        >>> integer_capacity("uint8"), integer_capacity("bool"), integer_capacity("float16")
        ((0, 255), (0, 1), None)
    """
    return _INTEGER_RANGE.get(dtype_name(dtype))


def counts_exactly_to(dtype: Any) -> int:
    """The largest ``n`` such that ``dtype`` holds every integer ``0..n`` exactly (e.g. 256 for bfloat16)."""
    name = dtype_name(dtype)
    if name in _FLOATS:
        return 2 ** _FLOATS[name][0]
    capacity = _INTEGER_RANGE.get(name)
    if capacity is None:
        raise ValueError(f"counts_exactly_to: no integer count is known for dtype {name}")
    return capacity[1]


# -- floats ------------------------------------------------------------------------------


def float_max(dtype: Any) -> float:
    """The largest finite value of a float dtype this module steps (float16, bfloat16, float32, float64)."""
    return _FLOATS[dtype_name(dtype)][1]


def _f32(x: float) -> float:
    """``x`` rounded to nearest-even in float32 (±inf past its range)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def _f32_bits(x: float) -> int:
    return struct.unpack("<I", struct.pack("<f", x))[0]


def round_to(x: float, dtype: Any) -> float:
    """``x`` rounded to nearest in ``dtype``, overflowing to ±inf, as ``torch.tensor(x, dtype=float64).to(dtype)``.

    Examples:
        >>> round_to(0.1, "float16"), round_to(1e6, "float16"), round_to(1.00390625, "bfloat16")
        (0.0999755859375, inf, 1.0)
    """
    name = dtype_name(dtype)
    if name == "float64" or math.isnan(x) or math.isinf(x):
        return x
    f = _f32(x)
    if name == "float32" or math.isinf(f):
        return f
    if name == "float16":
        try:
            return struct.unpack("<e", struct.pack("<e", f))[0]
        except OverflowError:
            return math.copysign(math.inf, f)
    if name == "bfloat16":
        bits = _f32_bits(f)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16  # nearest, ties to even
        return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]
    raise ValueError(f"round_to: dtype {name} is not one of {', '.join(_FLOATS)}")


_WIDTH = {"float16": 16, "bfloat16": 16, "float32": 32}


def _bits(x: float, name: str) -> int:
    if name == "float16":
        return struct.unpack("<H", struct.pack("<e", x))[0]
    bits = _f32_bits(x)
    return bits >> 16 if name == "bfloat16" else bits


def _value(bits: int, name: str) -> float:
    if name == "float16":
        return struct.unpack("<e", struct.pack("<H", bits))[0]
    return struct.unpack("<f", struct.pack("<I", bits << 16 if name == "bfloat16" else bits))[0]


def step(x: float, dtype: Any, up: bool) -> float:
    """The next ``dtype`` value after ``x`` (itself a finite ``dtype`` value) towards ±inf, as ``torch.nextafter``.

    Examples:
        >>> step(1.0, "float16", True), step(0.0, "bfloat16", False) < 0, step(65504.0, "float16", True)
        (1.0009765625, True, inf)
    """
    name = dtype_name(dtype)
    if name == "float64":
        return math.nextafter(x, math.inf if up else -math.inf)
    if name not in _WIDTH:
        raise ValueError(f"step: dtype {name} is not one of {', '.join(_FLOATS)}")
    sign = 1 << (_WIDTH[name] - 1)
    bits = _bits(x, name)
    ordered = -(bits & (sign - 1)) if bits & sign else bits  # -0.0 and 0.0 are both 0
    ordered += 1 if up else -1
    return _value(ordered if ordered >= 0 else sign | -ordered, name)
