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

Checks run in bounded memory, whatever a tensor's logical size: an axis of stride 0
(``expand``) repeats one element, so it is checked once and its repeats are counted;
the rest is walked in blocks of at most ``_BUDGET`` elements in row-major order, so
every temporary (the operand's copy, a mask) stays a few MB. Only
`element_failures` still returns full-size masks, for small tensors.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from trajschema.core.decl import Field

__all__ = [
    "Failures",
    "counts_exactly_to",
    "element_failures",
    "failing_positions",
    "failure_summary",
    "fits_dtype",
    "nonzero_per_position",
    "scalar_failures",
    "tensor_clean",
    "tensor_extremes",
    "tensor_has_failures",
    "value_failures",
]

_INF = math.inf

# Elements per block of a value check. Each block makes a few temporaries of its size
# (the operand when it is converted, one mask per check), so 2**20 keeps the extra
# memory of a check near 10 MB for any tensor, while a typical sample is one block.
_BUDGET = 1 << 20


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


def float_bound(b: int | float, dtype: torch.dtype, up: bool) -> float:
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
        return _Check(label, op, float_bound(b, dom.compute or dtype, up))
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


def checks_for(f: Field, dtype: torch.dtype) -> tuple[_Domain, tuple[_Check, ...]]:
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


# -- walking a tensor in bounded memory -----------------------------------------------


def _distinct(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``t`` with every stride-0 axis cut to length 1, and how many elements of ``t`` each element stands for.

    Along an axis of stride 0 every element is the same one, so each check answers the
    same on the cut view; the first element of ``t`` to break a check has index 0 on
    those axes, so the cut view also keeps the first failing index.
    """
    rep = 1
    for d in range(t.dim()):
        if t.stride(d) == 0 and t.shape[d] > 1:
            rep *= t.shape[d]
            t = t.narrow(d, 0, 1)
    return t, rep


def _blocks(t: torch.Tensor, lead: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], int, torch.Tensor]]:
    """Views covering a non-empty ``t`` (1-d or more) in row-major order, each of at most ``_BUDGET`` elements.

    Yields ``(lead, start, block)``: ``block`` is ``t[lead][start:start + len(block)]``
    (``lead`` indexes the leading axes of the top-level ``t``). A row bigger than the
    budget is split along its own first axis, and so on down.
    """
    row = t[0].numel()
    if row <= _BUDGET or t.dim() == 1:
        step = max(1, _BUDGET // row)
        for start in range(0, t.shape[0], step):
            yield lead, start, t[start : start + step]
    else:
        for i in range(t.shape[0]):
            yield from _blocks(t[i], (*lead, i))


def _live(f: Field, t: torch.Tensor) -> tuple[_Domain, list[_Check]] | None:
    """The checks elements of ``t`` may break, or ``None`` when there is nothing to look at."""
    if t.is_meta or t.numel() == 0 or not f.has_value_checks:
        return None
    dom, checks = checks_for(f, t.dtype)
    live = [c for c in checks if c.op != "ok"]
    return (dom, live) if live else None


def _walked(t: torch.Tensor) -> tuple[torch.Tensor, int]:
    """The view of ``t`` a check walks, and how many elements of ``t`` each of its elements stands for.

    ``t`` itself when it fits in one block (repeats and all: cheap either way), else
    ``t``'s distinct part.
    """
    v = t.detach() if t.requires_grad else t
    return (v, 1) if v.numel() <= _BUDGET else _distinct(v)


# A block of a walked view: (lead, start, block or its operand). ``start`` is None when
# the block is the whole view; else the block is view[lead][start:start + len(block)].
_Block = tuple[tuple[int, ...], int | None, torch.Tensor]


def _pieces(v: torch.Tensor) -> Iterator[_Block]:
    if v.numel() <= _BUDGET:  # the common case, without the cost of slicing (microseconds a check)
        yield (), None, v
        return
    yield from _blocks(v)  # v has an axis: a 0-d tensor fits any budget


def _operand_blocks(v: torch.Tensor, dom: _Domain) -> Iterator[_Block]:
    for lead, start, block in _pieces(v):
        yield lead, start, _operand(block, dom)


def _operands(v: torch.Tensor, dom: _Domain) -> Sequence[torch.Tensor] | Iterator[torch.Tensor]:
    """The blocks' operands alone; the common one-block case without a generator's cost."""
    return (_operand(v, dom),) if v.numel() <= _BUDGET else (x for _, _, x in _operand_blocks(v, dom))


def _index(lead: tuple[int, ...], start: int | None, at: list[int]) -> tuple[int, ...]:
    """The index in the walked view of element ``at`` of a block."""
    return tuple(at) if start is None else (*lead, start + at[0], *at[1:])


def _unravel(flat: int, shape: Sequence[int]) -> list[int]:
    out = []
    for size in reversed(shape):
        flat, i = divmod(flat, size)
        out.append(i)
    return out[::-1]


# -- the public face of the engine ---------------------------------------------------


def element_failures(f: Field, t: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """``(expected, mask of the elements that break it)`` for each check of ``f`` that ``t`` may break.

    Checks no element of ``t``'s dtype can break are left out; a ``meta`` tensor has no
    values, so nothing is reported for it. The masks have ``t``'s shape and device, so
    they take one byte per logical element: meant for small tensors (probes, tests).
    Real data goes through `failure_summary`, `failing_positions` and
    `tensor_has_failures`, which give the same answers in bounded memory.
    """
    if t.is_meta or not f.has_value_checks:
        return []
    dom, checks = checks_for(f, t.dtype)
    x = _operand(t, dom)
    return [(c.label, _mask(c, x)) for c in checks if c.op != "ok"]


@dataclasses.dataclass(frozen=True)
class Failures:
    """How the elements of one tensor break one value check.

    ``count`` counts logical elements: an element repeated by ``expand`` counts once per
    place it appears. ``first`` is the index of the first of them in row-major order.
    """

    expected: str
    count: int
    first: tuple[int, ...]


def failure_summary(f: Field, t: torch.Tensor) -> list[Failures]:
    """One `Failures` per check of ``f`` that some element of ``t`` breaks, in the checks' order.

    Exactly what counting the masks of `element_failures` gives, in bounded memory.
    """
    found = _live(f, t)
    if found is None:
        return []
    dom, live = found
    v, rep = _walked(t)
    counts = [0] * len(live)
    first: list[tuple[int, ...] | None] = [None] * len(live)
    for lead, start, x in _operand_blocks(v, dom):
        for i, c in enumerate(live):
            m = _mask(c, x)
            n = int(m.sum())
            if not n:
                continue
            counts[i] += n
            if first[i] is None:
                first[i] = _index(lead, start, _unravel(int(m.reshape(-1).view(torch.uint8).argmax()), m.shape))
    return [Failures(c.label, n * rep, at) for c, n, at in zip(live, counts, first) if at is not None]


def _per_position(v: torch.Tensor, axis: int, marks: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """How many elements ``marks`` sets at each position along ``axis`` of a walked view (int64, on its device).

    ``marks(block)`` answers a bool per element of a block of ``v``.
    """
    out = torch.zeros(v.shape[axis], dtype=torch.int64, device=v.device)
    for lead, start, block in _pieces(v):
        m = marks(block)
        inner = axis - len(lead)  # the axis among the block's own, if it is one of them
        if inner < 0:
            out[lead[axis]] += m.sum()
            continue
        other = tuple(d for d in range(m.dim()) if d != inner)
        counts = m.sum(dim=other) if other else m.to(torch.int64)
        if inner == 0 and start is not None:
            out[start : start + counts.shape[0]] += counts
        else:  # the block spans the whole axis
            out += counts
    return out


def failing_positions(f: Field, t: torch.Tensor, axis: int = 0) -> torch.Tensor:
    """Which positions along ``axis`` of ``t`` hold an element breaking any of ``f``'s checks.

    A new bool tensor of length ``t.shape[axis]`` on ``t``'s device (e.g. the rows of a
    batch column), computed there without reading device memory; all ``False`` for a
    ``meta`` tensor.
    """
    if t.dim() == 0:
        raise ValueError("failing_positions needs a tensor with at least one axis, found a 0-d tensor")
    size = t.shape[axis]
    axis %= t.dim()
    found = _live(f, t)
    if found is None:
        return torch.zeros(size, dtype=torch.bool, device=t.device)
    dom, live = found
    v, _ = _walked(t)

    def marks(block: torch.Tensor) -> torch.Tensor:
        x = _operand(block, dom)
        return functools.reduce(torch.logical_or, (_mask(c, x) for c in live))

    out = _per_position(v, axis, marks) > 0
    return out if out.shape[0] == size else out.expand(size).contiguous()


def nonzero_per_position(t: torch.Tensor, axis: int = 0) -> torch.Tensor:
    """How many elements at each position along ``axis`` of ``t`` are non-zero: int64, on ``t``'s device.

    An element repeated by ``expand`` counts once per place it appears; read in blocks,
    in bounded memory, without reading device memory. A ``meta`` tensor gives a ``meta``
    result.
    """
    if t.dim() == 0:
        raise ValueError("nonzero_per_position needs a tensor with at least one axis, found a 0-d tensor")
    size = t.shape[axis]
    axis %= t.dim()
    if t.is_meta or t.numel() == 0:
        return torch.zeros(size, dtype=torch.int64, device=t.device)
    v, rep = _walked(t)
    if v.shape[axis] != size:  # the axis itself was cut to one position: its repeats are positions, not counts
        rep //= size
    out = _per_position(v, axis, lambda block: block != 0) * rep
    return out if out.shape[0] == size else out.expand(size).contiguous()


def _range(v: torch.Tensor, dom: _Domain) -> tuple[int | float, int | float] | None:
    """``(min, max)`` of the operand over a walked view, one block at a time; ``None`` if it holds a NaN."""
    if v.numel() <= _BUDGET:  # one block, the common case: kept lean, it runs for every checked field
        small, big = torch.aminmax(_operand(v, dom))
        lo, hi = small.item(), big.item()
        return None if lo != lo or hi != hi else (lo, hi)  # aminmax propagates NaN
    lo, hi = _INF, -_INF
    for _, _, x in _operand_blocks(v, dom):
        small, big = torch.aminmax(x)
        a, b = small.item(), big.item()
        if a != a or b != b:
            return None
        lo, hi = min(lo, a), max(hi, b)
    return lo, hi


def _clean(v: torch.Tensor, dom: _Domain, live: list[_Check]) -> bool:
    if any(c.op in ("bad", "in") for c in live):
        return False
    seen = _range(v, dom)
    if seen is None:  # NaN breaks every check left: ordering and finite
        return False
    lo, hi = seen
    for c in live:
        if c.op == "finite":
            ok = math.isfinite(lo) and math.isfinite(hi)
        elif c.op == "ge":
            ok = lo >= c.bound
        elif c.op == "le":
            ok = hi <= c.bound
        else:  # range
            ok = lo >= c.bound and hi <= c.upper
        if not ok:
            return False
    return True


def tensor_clean(f: Field, t: torch.Tensor) -> bool:
    """A cheap, sufficient test that no element of ``t`` breaks ``f``'s checks: one min/max pass.

    ``False`` means "look closer" (`failure_summary` finds the elements), not "bad".
    """
    found = _live(f, t)
    return found is None or _clean(_walked(t)[0], *found)


def tensor_has_failures(f: Field, t: torch.Tensor) -> bool:
    """Whether any element of ``t`` breaks ``f``'s value checks (exactly)."""
    found = _live(f, t)
    if found is None:
        return False
    dom, live = found
    v, _ = _walked(t)
    if _clean(v, dom, live):
        return False
    return any(any(bool(_mask(c, x).any()) for c in live) for x in _operands(v, dom))


def tensor_extremes(t: torch.Tensor) -> tuple[int | float, int | float, bool] | None:
    """``(min, max, every element finite)`` of a real tensor, exactly, in bounded memory; ``None`` if it has no values.

    Integers come back as Python ints; a NaN anywhere gives ``(nan, nan, False)``. Bool
    tensors count as 0 and 1.
    """
    if t.is_meta or t.numel() == 0:
        return None
    dom = _domain(t.dtype)
    seen = _range(_walked(t)[0], dom)
    if seen is None:
        return math.nan, math.nan, False
    lo, hi = seen[0] + dom.shift, seen[1] + dom.shift
    return lo, hi, math.isfinite(lo) and math.isfinite(hi)


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
        >>> from trajschema.core.values import fits_dtype
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
