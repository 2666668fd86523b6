"""The value engine: which elements of a tensor (or which scalar) break a field's value checks.

One definition, used by sample checks, batch checks, padding proofs and the loader:
for the exact value ``x`` of an element, as Python's int/float arithmetic sees it,

* ``values``: ``x`` breaks it unless ``x == v`` for some listed ``v`` (so ``True == 1``,
  ``-0.0 == 0.0``, and NaN matches nothing);
* ``min`` / ``max``: ``x`` breaks it unless ``x >= min`` / ``x <= max`` (so NaN breaks both);
* ``finite``: a float breaks it unless ``math.isfinite(x)``; integers are finite.

torch compares a tensor with a Python number by first converting the number to the
tensor's dtype, which rounds (``0.5`` becomes ``0`` in int64, ``1e-8`` becomes ``0`` in
float16) or overflows. So the bounds and value sets are never converted as given:
each check is compiled, per dtype, into an equivalent test whose operands the dtype
represents exactly (``x >= 0.5`` on integers is ``x >= 1``; ``x <= 300`` on int8 holds
for every element; ``x >= 1e-8`` on float16 is ``x >= 5.96e-08``, the smallest float16
above 1e-8). Dtypes that torch cannot compare natively (``uint16``-``uint64``, float8)
are mapped order-preservingly onto one it can, without rounding.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from typing import Any

import torch

from ._decl import Field

__all__ = [
    "counts_exactly_to",
    "element_failures",
    "fits_dtype",
    "scalar_failures",
    "tensor_clean",
    "tensor_has_failures",
    "value_failures",
]

_INF = math.inf


@dataclasses.dataclass(frozen=True)
class _Check:
    """One value check compiled for one dtype, in the units of the dtype's operand.

    ``op`` is ``ok`` (no element can break it), ``bad`` (every element does), ``ge`` /
    ``le`` (compare with ``bound``), ``range`` (``bound <= x <= upper``), ``in``
    (membership in ``members``) or ``finite``.
    """

    label: str
    op: str
    bound: int | float = 0
    upper: int | float = 0
    members: tuple[int | float, ...] = ()


@dataclasses.dataclass(frozen=True)
class _Domain:
    """How a dtype's elements are compared: on ``operand(t)``, whose element is ``x - shift``."""

    is_float: bool
    lo: int | float
    hi: int | float
    shift: int = 0
    compute: torch.dtype | None = None  # the operand's dtype when it differs from the tensor's


def _domain(dtype: torch.dtype) -> _Domain:
    if dtype == torch.bool:
        return _Domain(False, 0, 1, compute=torch.uint8)
    if dtype.is_complex:
        raise TypeError(f"value checks do not apply to complex dtype {dtype}")
    if dtype.is_floating_point:
        native = dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
        return _Domain(True, -_INF, _INF, compute=None if native else torch.float64)
    info = torch.iinfo(dtype)
    if dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        return _Domain(False, info.min, info.max)
    if info.max < 2**63:  # uint16, uint32: widen to int64, exactly
        return _Domain(False, info.min, info.max, compute=torch.int64)
    # uint64: flipping the sign bit of its int64 view maps u to u - 2**63, keeping order.
    return _Domain(False, info.min, info.max, shift=2**63, compute=torch.int64)


def _operand(t: torch.Tensor, dom: _Domain) -> torch.Tensor:
    if dom.compute is None:
        return t
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    if dom.shift:
        return t.view(torch.int64) ^ -(2**63)
    return t.to(dom.compute)


# -- exact rounding of a bound onto a dtype ------------------------------------------


def _to_dtype(x: float, dtype: torch.dtype) -> float:
    """``x`` rounded to nearest in ``dtype`` (overflowing to ±inf), as a Python float."""
    return torch.tensor(x, dtype=torch.float64).to(dtype).item()


def _step(x: float, dtype: torch.dtype, up: bool) -> float:
    """The next ``dtype`` value after ``x`` (itself a ``dtype`` value) towards ±inf."""
    t = torch.tensor(x, dtype=dtype)
    return torch.nextafter(t, torch.tensor(_INF if up else -_INF, dtype=dtype)).item()


def _f64_at_least(b: int | float, up: bool) -> float:
    """The smallest float64 >= b (``up``) or the largest float64 <= b, exactly."""
    if isinstance(b, float):
        return b
    try:
        f = float(b)
    except OverflowError:  # beyond float64: the nearest finite float64 is past it only one way
        big = 1.7976931348623157e308
        return (_INF if b > 0 else -big) if up else (big if b > 0 else -_INF)
    if up and f < b:
        return math.nextafter(f, _INF)
    if not up and f > b:
        return math.nextafter(f, -_INF)
    return f


def _float_bound(b: int | float, dtype: torch.dtype, up: bool) -> float:
    """The smallest ``dtype`` value >= b (``up``), or the largest <= b; may be ±inf."""
    f = _f64_at_least(b, up)
    if dtype == torch.float64 or math.isinf(f):
        return f
    d = _to_dtype(f, dtype)
    if (up and d < f) or (not up and d > f):
        d = _step(d, dtype, up)
    return d


def _int_bound(b: int | float, up: bool) -> int | None:
    """``ceil(b)`` (``up``) or ``floor(b)`` as an int; ``None`` for ±inf."""
    if isinstance(b, int):
        return int(b)
    if math.isinf(b):
        return None
    return math.ceil(b) if up else math.floor(b)


def _is_nan(b: Any) -> bool:
    return isinstance(b, float) and math.isnan(b)


# -- compiling a field's checks for one dtype -----------------------------------------


def _bound_check(label: str, b: int | float, up: bool, dom: _Domain, dtype: torch.dtype) -> _Check:
    """``x >= b`` (``up``) or ``x <= b`` as an exact test on the operand."""
    op = "ge" if up else "le"
    if _is_nan(b):
        return _Check(label, "bad")
    if dom.is_float:
        return _Check(label, op, _float_bound(b, dom.compute or dtype, up))
    c = _int_bound(b, up)
    if c is None:  # x >= +inf or x <= -inf: never; x >= -inf or x <= +inf: always
        return _Check(label, "bad" if (b > 0) == up else "ok")
    if (up and c <= dom.lo) or (not up and c >= dom.hi):
        return _Check(label, "ok")
    if (up and c > dom.hi) or (not up and c < dom.lo):
        return _Check(label, "bad")
    return _Check(label, op, c - dom.shift)


def _member_check(label: str, values: Sequence[Any], dom: _Domain, dtype: torch.dtype) -> _Check:
    """Membership in ``values``, keeping only the members the dtype can hold exactly."""
    if dom.is_float:
        compute = dom.compute or dtype
        kept = sorted({float(v) for v in values if not _is_nan(v) and fits_dtype(v, compute)})
        return _Check(label, "in", members=tuple(kept)) if kept else _Check(label, "bad")
    ints = sorted({int(v) for v in values if (not isinstance(v, float) or v.is_integer()) and dom.lo <= v <= dom.hi})
    if not ints:
        return _Check(label, "bad")
    if ints[-1] - ints[0] + 1 == len(ints):  # distinct and sorted, so contiguous
        if ints[0] == dom.lo and ints[-1] == dom.hi:
            return _Check(label, "ok")
        return _Check(label, "range", ints[0] - dom.shift, ints[-1] - dom.shift)
    return _Check(label, "in", members=tuple(i - dom.shift for i in ints))


def number_label(x: Any) -> str:
    """``repr(x)`` for a bound or listed value, but never thousands of digits (nor an error for them)."""
    if isinstance(x, int) and not isinstance(x, bool) and x.bit_length() > 128:
        return f"{'-' if x < 0 else ''}(an integer of {x.bit_length()} bits)"
    return repr(x)


def values_label(values: Sequence[Any]) -> str:
    return "[" + ", ".join(map(number_label, values)) + "]"


def _compile(
    values: tuple[Any, ...] | None, lo: Any, hi: Any, finite: bool, dtype: torch.dtype
) -> tuple[_Domain, tuple[_Check, ...]]:
    dom = _domain(dtype)
    checks = []
    if values is not None:
        checks.append(_member_check(f"in {{{', '.join(map(number_label, values))}}}", values, dom, dtype))
    if lo is not None:
        checks.append(_bound_check(f">= {number_label(lo)}", lo, True, dom, dtype))
    if hi is not None:
        checks.append(_bound_check(f"<= {number_label(hi)}", hi, False, dom, dtype))
    if finite and dom.is_float:
        checks.append(_Check("finite", "finite"))
    return dom, tuple(checks)


# Compiled checks per (field, dtype). Keyed by the field object itself (held, so its id
# stays unique), not by value: 0, 0.0 and False compare equal but label differently.
_COMPILED: dict[tuple[int, torch.dtype], tuple[Field, tuple[_Domain, tuple[_Check, ...]]]] = {}


def _checks_for(f: Field, dtype: torch.dtype) -> tuple[_Domain, tuple[_Check, ...]]:
    hit = _COMPILED.get((id(f), dtype))
    if hit is not None and hit[0] is f:
        return hit[1]
    if len(_COMPILED) > 4096:
        _COMPILED.clear()
    compiled = _compile(f.values, f.min, f.max, f.finite, dtype)
    _COMPILED[(id(f), dtype)] = (f, compiled)
    return compiled


def _mask(c: _Check, x: torch.Tensor) -> torch.Tensor:
    """The elements of operand ``x`` that break ``c``."""
    if c.op == "ge":
        return ~(x >= c.bound)
    if c.op == "le":
        return ~(x <= c.bound)
    if c.op == "range":
        return (x < c.bound) | (x > c.upper)
    if c.op == "in":
        return ~torch.isin(x, torch.tensor(c.members, dtype=x.dtype, device=x.device))
    if c.op == "finite":
        return ~torch.isfinite(x)
    if c.op == "bad":
        return torch.ones_like(x, dtype=torch.bool)
    raise AssertionError(c.op)


# -- the public face of the engine ---------------------------------------------------


def element_failures(f: Field, t: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """``(expected, mask of the elements that break it)`` for each check of ``f`` that ``t`` may break.

    Checks no element of ``t``'s dtype can break are left out; a ``meta`` tensor has no
    values, so nothing is reported for it. The masks have ``t``'s shape and device.
    """
    if t.is_meta or not f.has_value_checks:
        return []
    dom, checks = _checks_for(f, t.dtype)
    x = _operand(t, dom)
    return [(c.label, _mask(c, x)) for c in checks if c.op != "ok"]


def tensor_clean(f: Field, t: torch.Tensor) -> bool:
    """A cheap, sufficient test that no element of ``t`` breaks ``f``'s checks: one min/max pass.

    ``False`` means "look closer" (:func:`element_failures` finds the elements), not "bad".
    """
    if t.is_meta or t.numel() == 0 or not f.has_value_checks:
        return True
    dom, checks = _checks_for(f, t.dtype)
    live = [c for c in checks if c.op != "ok"]
    if not live:
        return True
    if any(c.op in ("bad", "in") for c in live):
        return False
    lo, hi = (v.item() for v in torch.aminmax(_operand(t, dom)))
    for c in live:
        if c.op == "finite":
            ok = math.isfinite(lo) and math.isfinite(hi)  # NaN propagates through aminmax
        elif c.op == "ge":
            ok = lo >= c.bound
        elif c.op == "le":
            ok = hi <= c.bound
        else:  # range
            ok = lo >= c.bound and hi <= c.upper
        if not ok:
            return False
    return True


def tensor_has_failures(f: Field, t: torch.Tensor) -> bool:
    """Whether any element of ``t`` breaks ``f``'s value checks (exactly)."""
    return not tensor_clean(f, t) and any(bool(m.any()) for _, m in element_failures(f, t))


def scalar_failures(f: Field, v: Any) -> list[str]:
    """The value checks a non-tensor value breaks, as labels (``"one of [0, 1]"``, ``">= 0"``, ...).

    ``v`` is a Python value (a 0-d tensor is read with ``.item()``); ordering checks apply
    to real numbers only: anything else is a kind problem, reported elsewhere.
    """
    if isinstance(v, torch.Tensor):
        if v.is_meta or v.dim() != 0 or v.is_complex():
            return []
        v = v.item()
    return value_failures(v, values=f.values, lo=f.min, hi=f.max, finite=f.finite)


def value_failures(v: Any, *, values: Sequence[Any] | None, lo: Any, hi: Any, finite: bool) -> list[str]:
    """:func:`scalar_failures` for checks given one by one (e.g. while a field is being compiled)."""
    out = []
    if values is not None and not any(_equal(v, w) for w in values):
        out.append(f"one of {values_label(values)}")
    if not isinstance(v, numbers.Real):
        return out
    x: Any = v  # any Real: int, float, bool, numpy scalars; compared as Python compares them
    if lo is not None and not x >= lo:
        out.append(f">= {number_label(lo)}")
    if hi is not None and not x <= hi:
        out.append(f"<= {number_label(hi)}")
    if finite and not isinstance(x, numbers.Integral) and not math.isfinite(x):  # numpy floats too
        out.append("finite")
    return out


def _equal(v: Any, w: Any) -> bool:
    try:
        return bool(v == w)
    except Exception:  # an object with an odd __eq__ is simply not a listed value
        return False


def counts_exactly_to(dtype: torch.dtype) -> int:
    """The largest ``n`` such that ``dtype`` holds every integer ``0..n`` exactly (e.g. 256 for bfloat16)."""
    if dtype == torch.bool:
        return 1
    if dtype.is_floating_point:
        precision = 1 - math.frexp(torch.finfo(dtype).eps)[1] + 1  # eps == 2**(1 - precision)
        return 2**precision
    return int(torch.iinfo(dtype).max)


def fits_dtype(value: int | float | bool, dtype: torch.dtype) -> bool:
    """Whether ``dtype`` holds ``value`` exactly (``True`` counts as 1; NaN and ±inf fit float dtypes only).

    Examples:
        >>> from trajschema._values import fits_dtype
        >>> fits_dtype(127, torch.int8), fits_dtype(128, torch.int8), fits_dtype(0.1, torch.float16)
        (True, False, False)
    """
    if not isinstance(value, numbers.Real):
        return False
    if dtype.is_floating_point:
        if isinstance(value, float) and not math.isfinite(value):
            return True
        try:
            f = float(value)
        except OverflowError:
            return False
        return f == value and _to_dtype(f, dtype) == f
    if dtype.is_complex:
        return False
    if isinstance(value, float) and not value.is_integer():
        return False
    dom = _domain(dtype)
    return dom.lo <= value <= dom.hi
