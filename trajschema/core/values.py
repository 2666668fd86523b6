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
each check becomes, per dtype, the `ValueSet` of the dtype's values it lets through,
and its test is read off that set, with operands the dtype represents exactly
(``x >= 0.5`` on integers is ``x >= 1``; ``x <= 300`` on int8 holds
for every element; ``x >= 1e-8`` on float16 is ``x >= 5.96e-08``, the smallest float16
above 1e-8). Dtypes that torch cannot compare natively (``uint16``-``uint64``, float8)
are mapped order-preservingly onto one it can, without rounding.

`ValueSet` is the package's one description of "which values": compatibility takes
differences of two for a witness, the strategies draw from one, the loader asks one
whether a bound leaves a dtype any value.

Checks run in bounded memory, whatever a tensor's logical size: an axis of stride 0
(``expand``) repeats one element, so it is checked once and its repeats are counted;
the rest is walked in blocks of at most ``_BUDGET`` elements in row-major order, so
every temporary (the operand's copy, a mask) stays a few MB. Only
`element_failures` still returns full-size masks, for small tensors.
"""

from __future__ import annotations

import bisect
import dataclasses
import fractions
import functools
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch

from trajschema.core.decl import Field

__all__ = [
    "Domain",
    "Failures",
    "ValueSet",
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


# -- the one value set ----------------------------------------------------------------

#: Where values come from: a torch dtype (a tensor's elements), or a kind (``int float bool
#: str mapping any``: a non-tensor field's values).
Domain = torch.dtype | str

#: One end of a span: ``(value, closed)``; value may be ±inf (an unbounded end, or the
#: infinity itself when closed and the domain holds it).
_End = tuple[Any, bool]
#: A span: ``(lo, lo_closed, hi, hi_closed)``.
_Span = tuple[Any, bool, Any, bool]

_NATIVE_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class _Line:
    """The numbers a domain holds, and how a span's ends snap onto them.

    Three kinds: integers (``lo..hi``, or unbounded), the values of a float dtype (with
    ±inf), and the reals (what Python's int/float arithmetic compares: any int, any
    float). On the first two every span is stored closed, its ends on the line, so equal
    sets have equal spans.
    """

    discrete = True
    full: _Span

    def snap(self, s: _Span) -> _Span | None:
        """``s`` as a span of this line's numbers, or ``None`` when it holds none."""
        raise NotImplementedError

    def after(self, p: Any) -> Any:
        """The next number of the line after ``p`` (itself one), or ``None``."""
        raise NotImplementedError

    def has(self, x: Any) -> bool:
        """Whether the real number ``x`` is a number of the line."""
        raise NotImplementedError


class _Ints(_Line):
    def __init__(self, lo: int | None, hi: int | None) -> None:
        self.lo, self.hi = lo, hi
        self.full = (-_INF if lo is None else lo, lo is not None, _INF if hi is None else hi, hi is not None)

    def _end(self, v: Any, closed: bool, up: bool) -> Any:
        """The first integer at or past ``v`` going ``up`` (or down); ±inf for an unbounded end."""
        if isinstance(v, float) and math.isinf(v):
            return v
        if up:
            return math.ceil(v) if closed else math.floor(v) + 1
        return math.floor(v) if closed else math.ceil(v) - 1

    def snap(self, s: _Span) -> _Span | None:
        lo, hi = self._end(s[0], s[1], True), self._end(s[2], s[3], False)
        if lo == _INF or hi == -_INF:
            return None
        if self.lo is not None:
            lo = max(lo, self.lo)
        if self.hi is not None:
            hi = min(hi, self.hi)
        if lo > hi:
            return None
        return lo, not math.isinf(lo), hi, not math.isinf(hi)

    def after(self, p: Any) -> Any:
        return None if math.isinf(p) else p + 1

    def has(self, x: Any) -> bool:
        if isinstance(x, float) and not x.is_integer():
            return False
        if not isinstance(x, (int, float)) and x != math.floor(x):  # a Fraction, a NumPy number
            return False
        return (self.lo is None or x >= self.lo) and (self.hi is None or x <= self.hi)


class _Floats(_Line):
    """The values of one float dtype, and ±inf (which `fits_dtype` counts for every float dtype)."""

    def __init__(self, dtype: torch.dtype) -> None:
        self.dtype = dtype
        self.big = float(torch.finfo(dtype).max)
        self.full = (-_INF, True, _INF, True)
        self.table: list[float] | None = None
        if dtype not in _NATIVE_FLOATS:  # float8: 256 bit patterns, read once (torch cannot step them)
            every = torch.arange(256, dtype=torch.uint8).view(dtype).to(torch.float64).tolist()
            self.table = sorted({v for v in every if math.isfinite(v)})

    def _up(self, x: Any) -> float:
        """The smallest value >= x."""
        if isinstance(x, float) and math.isinf(x):
            return x
        if self.table is not None:
            i = bisect.bisect_left(self.table, x)
            return self.table[i] if i < len(self.table) else _INF
        return float_bound(x, self.dtype, True) + 0.0  # + 0.0: -0.0 is 0.0

    def _down(self, x: Any) -> float:
        if isinstance(x, float) and math.isinf(x):
            return x
        if self.table is not None:
            i = bisect.bisect_right(self.table, x)
            return self.table[i - 1] if i else -_INF
        return float_bound(x, self.dtype, False) + 0.0

    def after(self, p: Any) -> Any:
        if p == _INF:
            return None
        if p == -_INF:
            return -self.big
        if self.table is not None:
            return self._up(math.nextafter(p, _INF))
        return _step(p, self.dtype, True) + 0.0

    def _before(self, p: Any) -> Any:
        if p == -_INF:
            return None
        if p == _INF:
            return self.big
        if self.table is not None:
            return self._down(math.nextafter(p, -_INF))
        return _step(p, self.dtype, False) + 0.0

    def snap(self, s: _Span) -> _Span | None:
        lo = self._up(s[0])
        if not s[1] and lo == s[0]:
            lo = self.after(lo)
        hi = self._down(s[2])
        if not s[3] and hi == s[2]:
            hi = self._before(hi)
        if lo is None or hi is None or lo > hi:
            return None
        return lo, True, hi, True

    def has(self, x: Any) -> bool:
        if isinstance(x, float) and math.isinf(x):
            return True
        try:
            f = float(x)
        except OverflowError:
            return False
        if f != x or math.isinf(f):
            return False
        return self._up(f) == f


class _Reals(_Line):
    """Every number Python compares: spans keep open and closed ends as given."""

    discrete = False
    full = (-_INF, True, _INF, True)

    def snap(self, s: _Span) -> _Span | None:
        lo, lc, hi, hc = s
        return s if lo < hi or (lo == hi and lc and hc) else None

    def after(self, p: Any) -> Any:
        raise AssertionError("the reals have no next number")

    def has(self, x: Any) -> bool:
        return True


@functools.lru_cache(maxsize=64)
def _line(domain: Domain) -> _Line | None:
    """The numbers ``domain`` holds (``None``: none, for ``str`` and ``mapping``)."""
    if isinstance(domain, torch.dtype):
        if domain.is_complex:
            raise TypeError(f"value sets do not apply to complex dtype {domain}")
        if domain == torch.bool:
            return _Ints(0, 1)
        if domain.is_floating_point:
            return _Floats(domain)
        info = torch.iinfo(domain)
        return _Ints(int(info.min), int(info.max))
    lines: dict[str, _Line | None] = {"int": _Ints(None, None), "bool": _Ints(0, 1), "float": _Reals(), "any": _Reals()}
    if domain in ("str", "mapping"):
        return None
    if domain not in lines:
        kinds = "int, float, bool, any, str, mapping"
        raise ValueError(f"a value set's domain is a torch dtype or a kind ({kinds}), found {domain!r}")
    return lines[domain]


def _lower_key(s: _Span) -> tuple[Any, int]:
    return s[0], 0 if s[1] else 1


def _touch(line: _Line, a: _Span, b: _Span) -> bool:
    """Whether span ``b`` (starting at or after ``a``'s start) overlaps ``a`` or continues it with no number between."""
    if line.discrete:
        nxt = line.after(a[2])
        return nxt is None or b[0] <= nxt
    return b[0] < a[2] or (b[0] == a[2] and (a[3] or b[1]))


def _normal(line: _Line, spans: Iterable[_Span]) -> tuple[_Span, ...]:
    """Spans snapped onto the line, sorted and merged: the one form of a set."""
    snapped = sorted((s for s in (line.snap(s) for s in spans) if s is not None), key=_lower_key)
    out: list[_Span] = []
    for s in snapped:
        if out and _touch(line, out[-1], s):
            last = out[-1]
            if (s[2], s[3]) > (last[2], last[3]):  # a closed end reaches past an open one at the same value
                out[-1] = (last[0], last[1], s[2], s[3])
        else:
            out.append(s)
    return tuple(out)


def _overlap(a: _Span, b: _Span) -> _Span:
    lo = max((a[0], not a[1]), (b[0], not b[1]))  # the later start; an open one starts later
    hi = min((a[2], a[3]), (b[2], b[3]))  # the earlier end; an open one ends earlier
    return lo[0], not lo[1], hi[0], hi[1]


def _intersect(line: _Line, a: Sequence[_Span], b: Sequence[_Span]) -> tuple[_Span, ...]:
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):  # both sorted and disjoint: one sweep
        out.append(_overlap(a[i], b[j]))
        if (a[i][2], a[i][3]) <= (b[j][2], b[j][3]):
            i += 1
        else:
            j += 1
    return _normal(line, out)


def _complement(line: _Line, spans: Sequence[_Span]) -> tuple[_Span, ...]:
    """The domain's numbers outside ``spans``."""
    lo, lc = line.full[0], line.full[1]
    out = []
    for s in spans:
        out.append((lo, lc, s[0], not s[1]))
        lo, lc = s[2], not s[3]
    out.append((lo, lc, line.full[2], line.full[3]))
    return _normal(line, out)


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


@dataclasses.dataclass(frozen=True)
class ValueSet:
    """A set of values of one domain, exactly: membership, union, intersection, difference.

    The one description of "which values" in the package. A field's checks compile to
    it per dtype (`ValueSet.passing`): validation reads its tensor tests off it,
    compatibility takes differences of two of them for a witness, the strategies draw
    from it, the loader asks it whether a bound leaves a dtype any value. Like
    hypothesis's ``IntervalSet``, it is a sorted tuple of disjoint spans, here over the
    numbers of its ``domain`` (see `Domain`): integers of an int dtype or kind, the values
    of a float dtype (with ±inf; ``0.1`` is no ``float32`` value, ``-0.0`` is ``0.0``), or
    the reals; plus ``nan`` (NaN is in the set) and ``others`` (values that are not
    numbers, such as strings: in the set for the kinds ``any``, ``str`` and ``mapping``
    unless ``values`` is checked). On the discrete domains spans are stored closed, so
    two sets are equal exactly when they hold the same values.

    Examples:
        >>> s = ValueSet.at_least(0.5, torch.int64)
        >>> 0 in s, 1 in s, s.spans[0][:1]
        (False, True, (1,))
        >>> (ValueSet.everything("int") - ValueSet.listed([1, 2, 3], "int")).example()
        0
    """

    domain: Domain
    spans: tuple[_Span, ...] = ()
    nan: bool = False
    others: bool = False

    # -- construction

    @classmethod
    def _make(cls, domain: Domain, spans: Iterable[_Span], nan: bool, others: bool) -> ValueSet:
        line = _line(domain)
        if line is None:
            return cls(domain, (), False, others)
        return cls(domain, _normal(line, spans), nan and not isinstance(line, _Ints), others)  # ints hold no NaN

    @classmethod
    def everything(cls, domain: Domain) -> ValueSet:
        """Every value of ``domain``: NaN with the floats, non-numbers with ``any``, ``str``, ``mapping``."""
        return _everything(domain)

    @classmethod
    def nothing(cls, domain: Domain) -> ValueSet:
        _line(domain)
        return cls(domain)

    @classmethod
    def listed(cls, values: Iterable[Any], domain: Domain) -> ValueSet:
        """The values of ``domain`` equal to a listed one (``values``): ``True == 1``, and NaN equals nothing."""
        line = _line(domain)
        if line is None:
            return cls(domain)
        points = [v for v in values if isinstance(v, numbers.Real) and not _is_nan(v) and line.has(v)]
        return cls._make(domain, [(_plain(v), True, _plain(v), True) for v in points], False, False)

    @classmethod
    def at_least(cls, bound: Any, domain: Domain) -> ValueSet:
        """The values ``x`` of ``domain`` with ``x >= bound`` as Python compares (NaN passes nothing)."""
        return cls._bounded(bound, domain, True)

    @classmethod
    def at_most(cls, bound: Any, domain: Domain) -> ValueSet:
        """The values ``x`` of ``domain`` with ``x <= bound``."""
        return cls._bounded(bound, domain, False)

    @classmethod
    def _bounded(cls, bound: Any, domain: Domain, up: bool) -> ValueSet:
        line = _line(domain)
        others = domain in ("any", "str", "mapping")  # the ordering checks pass what is no number
        if line is None or _is_nan(bound):
            return cls(domain, (), False, others)
        full = line.full
        span = (bound, True, full[2], full[3]) if up else (full[0], full[1], bound, True)
        return cls._make(domain, [span], False, others)

    @classmethod
    def finite(cls, domain: Domain) -> ValueSet:
        """The values that pass ``finite``: no ±inf, no NaN (integers are finite; non-numbers pass)."""
        line = _line(domain)
        others = domain in ("any", "str", "mapping")
        spans = [] if line is None else [(-_INF, False, _INF, False)]
        return cls._make(domain, spans, False, others)

    @classmethod
    def passing(cls, values: Iterable[Any] | None, lo: Any, hi: Any, finite: bool, domain: Domain) -> ValueSet:
        """What a field's checks (``values``, ``min``, ``max``, ``finite``) let through among ``domain``'s values."""
        out = cls.everything(domain)
        if values is not None:
            out &= cls.listed(values, domain)
        if lo is not None:
            out &= cls.at_least(lo, domain)
        if hi is not None:
            out &= cls.at_most(hi, domain)
        if finite:
            out &= cls.finite(domain)
        return out

    # -- the set operations

    def _same(self, other: ValueSet) -> _Line | None:
        if not isinstance(other, ValueSet):
            raise TypeError(f"a ValueSet combines with a ValueSet, found {type(other).__name__}")
        if other.domain != self.domain:
            raise ValueError(f"value sets of domains {self.domain} and {other.domain} do not combine")
        return _line(self.domain)

    def __and__(self, other: ValueSet) -> ValueSet:
        line = self._same(other)
        spans = () if line is None else _intersect(line, self.spans, other.spans)
        return ValueSet(self.domain, spans, self.nan and other.nan, self.others and other.others)

    def __or__(self, other: ValueSet) -> ValueSet:
        line = self._same(other)
        spans = () if line is None else _normal(line, (*self.spans, *other.spans))
        return ValueSet(self.domain, spans, self.nan or other.nan, self.others or other.others)

    def __sub__(self, other: ValueSet) -> ValueSet:
        line = self._same(other)
        spans = () if line is None else _intersect(line, self.spans, _complement(line, other.spans))
        return ValueSet(self.domain, spans, self.nan and not other.nan, self.others and not other.others)

    intersection = __and__
    union = __or__
    difference = __sub__

    def __contains__(self, x: Any) -> bool:
        if _is_nan(x):
            return self.nan
        if not isinstance(x, numbers.Real):
            return self.others
        line = _line(self.domain)
        if line is None or not line.has(x):
            return False
        return any(_holds(s, x) for s in self.spans)

    @property
    def empty(self) -> bool:
        """Whether the set holds no value at all."""
        return not (self.spans or self.nan or self.others)

    # -- reading it

    def points(self, limit: int) -> list[Any]:
        """Up to ``limit`` numbers of the set, smallest first (of a discrete domain; its spans' ends on the reals)."""
        line = _line(self.domain)
        out: list[Any] = []
        for lo, lc, hi, hc in self.spans:
            if line is None or not line.discrete:
                out += [v for v, closed in ((lo, lc), (hi, hc)) if closed and (not out or out[-1] != v)]
                continue
            p = lo if lc else None  # an integer span unbounded below has no smallest number
            while p is not None and len(out) < limit and p <= hi:
                out.append(p)
                p = line.after(p)
            if len(out) >= limit:
                break
        return out[:limit]

    def example(self) -> Any:
        """A simple number of the set: the one nearest 0, finite when it holds one; ``None`` when it holds none."""
        picks = [_simplest(s) for s in self.spans]
        return min(picks, key=lambda v: (math.isinf(v), abs(v)), default=None)


@functools.lru_cache(maxsize=64)
def _everything(domain: Domain) -> ValueSet:
    line = _line(domain)
    return ValueSet._make(domain, [line.full] if line else [], True, domain in ("any", "str", "mapping"))


def _plain(v: Any) -> Any:
    """A listed value as a number: ``True`` is 1, and a float 0 has no sign."""
    return int(v) if isinstance(v, bool) else v + 0.0 if isinstance(v, float) else v


def _holds(s: _Span, x: Any) -> bool:
    lo, lc, hi, hc = s
    return (x > lo or (lc and x == lo)) and (x < hi or (hc and x == hi))


def _simplest(s: _Span) -> Any:
    """The number of span ``s`` nearest 0 (or just inside an open end), exactly."""
    lo, lc, hi, hc = s
    if _holds(s, 0):
        return 0
    end, closed, toward = (lo, lc, 1) if lo >= 0 else (hi, hc, -1)
    if closed:
        return end
    if math.isinf(end):  # an unbounded end towards 0 cannot be: 0 would be inside
        raise AssertionError(s)
    inside = math.floor(end) + 1 if toward == 1 else math.ceil(end) - 1
    if _holds(s, inside):
        return inside
    other = hi if toward == 1 else lo
    mid = (fractions.Fraction(end) + fractions.Fraction(other)) / 2 if not math.isinf(other) else None
    if mid is None:
        return end + toward
    return float(mid) if _holds(s, float(mid)) else mid


# -- compiling a field's checks for one dtype -----------------------------------------


def _read(label: str, s: ValueSet, dom: _Domain, listed: int = 0) -> _Check:
    """The test on a dtype's operand that passes exactly the elements in ``s``, one check's value set.

    The set already holds only values of the dtype (a bound rounded inwards, a listed
    value no element can equal left out), so each bound below is a value of the dtype
    and compares exactly. ``listed``: how many values the check lists (its set's most numbers).
    """
    full = ValueSet.everything(s.domain)
    if not s.spans:
        return _Check(label, "bad")
    if s.spans == full.spans and not full.nan:  # every element passes: there is no NaN to fail
        return _Check(label, "ok")
    if len(s.spans) > 1:  # only a values list has gaps
        return _Check(label, "in", members=tuple(m - dom.shift for m in s.points(listed)))
    (lo, _, hi, _), (first, _, last, _) = s.spans[0], full.spans[0]
    if lo == first:
        return _Check(label, "le", hi - dom.shift)
    if hi == last:
        return _Check(label, "ge", lo - dom.shift)
    return _Check(label, "range", lo - dom.shift, hi - dom.shift)


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
    """Each check as the test of its `ValueSet` over ``dtype`` (``finite`` as ``isfinite``, which is faster)."""
    dom = _domain(dtype)
    checks = []
    if values is not None:
        label = f"in {{{', '.join(map(number_label, values))}}}"
        checks.append(_read(label, ValueSet.listed(values, dtype), dom, len(values)))
    if lo is not None:
        checks.append(_read(f">= {number_label(lo)}", ValueSet.at_least(lo, dtype), dom))
    if hi is not None:
        checks.append(_read(f"<= {number_label(hi)}", ValueSet.at_most(hi, dtype), dom))
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
    if c.op == "range":  # on floats written so that NaN breaks it (only listed values make a float range)
        return ~((x >= c.bound) & (x <= c.upper)) if x.is_floating_point() else (x < c.bound) | (x > c.upper)
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
    """`scalar_failures` for checks given one by one (e.g. while a field is being compiled)."""
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
    if not isinstance(value, numbers.Real) or dtype.is_complex:
        return False
    return value in ValueSet.everything(dtype)


# -- dtype capacity: can a dtype hold every integer a bound allows? -------------------


def integer_capacity(dtype: torch.dtype) -> tuple[int, int] | None:
    """``(smallest, largest)`` integer ``dtype`` holds, for integer and bool dtypes; ``None`` for float dtypes.

    A bound written in dims (``max: experts - 1``) allows ids up to a size the schema
    does not know in advance, so the dtype must be checked against it once the size is
    known: a ``uint8`` column cannot hold expert 256 (prime-rl #3051).

    Examples:
        >>> integer_capacity(torch.uint8), integer_capacity(torch.bool), integer_capacity(torch.float16)
        ((0, 255), (0, 1), None)
    """
    if dtype == torch.bool:
        return 0, 1
    if dtype.is_floating_point or dtype.is_complex:
        return None
    info = torch.iinfo(dtype)
    return int(info.min), int(info.max)


# -- distinct along the last axis ------------------------------------------------------

#: The ``expected`` of a ``repeated`` violation.
DISTINCT_LABEL = "distinct along the last axis"

# Up to this many slots per slice, repeats are found by comparing every pair of slots:
# k(k-1)/2 elementwise comparisons over the slots laid out as contiguous columns (one
# copy of the block; about 2x faster than sorting 8 slots, 20% faster than comparing
# strided views); above it by sorting each slice, which also costs an int64 index per element.
_PAIRWISE_UP_TO = 16


@dataclasses.dataclass(frozen=True)
class Repeats:
    """The slices along the last axis of one tensor that hold some value twice (``distinct: true``).

    ``count`` counts logical slices (a slice repeated by ``expand`` counts once per place
    it appears) out of ``slices``; ``first`` indexes the first of them over the leading
    axes, in row-major order, and ``value`` is a value it holds twice. Values compare as
    the value checks compare them, by ``==``: ``-0.0`` repeats ``0.0``, and NaN equals
    nothing, so NaNs never repeat (``finite: true`` refuses them).
    """

    count: int
    slices: int
    first: tuple[int, ...]
    value: int | float | bool


def _sliced(t: torch.Tensor) -> tuple[torch.Tensor, int] | None:
    """The view whose slices along the last axis are checked, and how many slices each stands for.

    ``None`` when no slice can repeat a value (no values, a 0-d tensor, slices of one slot
    or none). Large tensors have their stride-0 leading axes cut to one position, as
    `_walked` does; the last axis is never cut.
    """
    if t.is_meta or t.dim() == 0 or t.numel() == 0 or t.shape[-1] < 2:
        return None
    v = t.detach() if t.requires_grad else t
    rep = 1
    if v.numel() > _BUDGET:
        for d in range(v.dim() - 1):
            if v.stride(d) == 0 and v.shape[d] > 1:
                rep *= v.shape[d]
                v = v.narrow(d, 0, 1)
    return v, rep


def _slice_blocks(t: torch.Tensor, lead: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], int, torch.Tensor]]:
    """Like `_blocks`, for a tensor of two or more axes, but never splitting the last axis."""
    row = t[0].numel()
    if row <= _BUDGET or t.dim() == 2:
        step = max(1, _BUDGET // max(row, 1))
        for start in range(0, t.shape[0], step):
            yield lead, start, t[start : start + step]
    else:
        for i in range(t.shape[0]):
            yield from _slice_blocks(t[i], (*lead, i))


def _slice_pieces(v: torch.Tensor) -> Iterator[_Block]:
    if v.dim() == 1 or v.numel() <= _BUDGET:
        yield (), None, v
        return
    yield from _slice_blocks(v)


def _repeated(x: torch.Tensor) -> torch.Tensor:
    """Which slices along the last axis of operand ``x`` hold some value twice: a bool per slice."""
    k = x.shape[-1]
    if k > _PAIRWISE_UP_TO:
        s = x.sort(dim=-1).values
        return (s[..., 1:] == s[..., :-1]).any(dim=-1)
    cols = x.movedim(-1, 0).contiguous().unbind(0)
    if not x.dtype.is_floating_point:
        return ~_all_differ(cols)
    out = cols[0] == cols[1]
    hit = torch.empty_like(out)
    for i in range(k - 1):
        for j in range(i + 1, k):
            if (i, j) != (0, 1):
                torch.eq(cols[i], cols[j], out=hit)
                out |= hit
    return out


def _all_differ(cols: Sequence[torch.Tensor]) -> torch.Tensor:
    """Whether every pair of the integer columns differs, per position: ``a ^ b`` is nonzero.

    The same answer as ``a != b`` for integers, without torch's comparison kernel, which is
    not vectorized for small integer dtypes on CPU (measured ~5x slower than ``^`` plus a
    cast to bool for int16 columns: the cost of ``distinct`` on routed experts).
    """
    out = (cols[0] ^ cols[1]).bool()
    for i in range(len(cols) - 1):
        for j in range(i + 1, len(cols)):
            if (i, j) != (0, 1):
                out &= (cols[i] ^ cols[j]).bool()
    return out


def _repeated_value(row: torch.Tensor) -> int | float | bool:
    """A value one slice (a 1-d tensor known to repeat one) holds twice."""
    dom = _domain(row.dtype)
    s = _operand(row, dom).sort().values
    at = int((s[1:] == s[:-1]).to(torch.uint8).argmax())
    v = s[at].item()
    return v + dom.shift if dom.shift else (bool(v) if row.dtype == torch.bool else v)


def repeat_summary(t: torch.Tensor) -> Repeats | None:
    """How the slices along the last axis of ``t`` break ``distinct``, or ``None`` when none does.

    Bounded memory, like `failure_summary`: blocks of whole slices, stride-0 leading axes
    checked once. A ``meta`` tensor has no values: ``None``.

    Examples:
        >>> r = repeat_summary(torch.tensor([[0, 1], [2, 2], [3, 4], [5, 5]]))
        >>> r.count, r.slices, r.first, r.value
        (2, 4, (1,), 2)
    """
    found = _sliced(t)
    if found is None:
        return None
    v, rep = found
    dom = _domain(v.dtype)
    count, first = 0, None
    for lead, start, block in _slice_pieces(v):
        m = _repeated(_operand(block, dom))
        n = int(m.sum())
        if n and first is None:
            at = _unravel(int(m.reshape(-1).view(torch.uint8).argmax()), m.shape)
            first = _index(lead, start, at)
        count += n
    if first is None:
        return None
    return Repeats(count * rep, t.numel() // t.shape[-1], first, _repeated_value(v[first]))


def has_repeats(t: torch.Tensor) -> bool:
    """Whether some slice along the last axis of ``t`` holds a value twice (``distinct``), stopping at the first."""
    found = _sliced(t)
    if found is None:
        return False
    dom = _domain(found[0].dtype)
    return any(bool(_repeated(_operand(block, dom)).any()) for _, _, block in _slice_pieces(found[0]))


def repeat_positions(t: torch.Tensor, axis: int = 0) -> torch.Tensor:
    """Which positions along ``axis`` (a leading axis, not the last) of ``t`` lie in a slice that repeats a value.

    A new bool tensor of length ``t.shape[axis]`` on ``t``'s device, computed there
    without reading device memory (the rows of a batch column, the ragged positions of
    a jagged one); all ``False`` for a ``meta`` tensor.

    Raises:
        ValueError: ``axis`` is the last axis (its positions are the slots of the slices).
    """
    if t.dim() < 2 or axis % t.dim() == t.dim() - 1:
        raise ValueError(
            f"repeat_positions needs a leading axis of a tensor of 2+ axes, found axis {axis} of {t.dim()}"
        )
    size = t.shape[axis]
    axis %= t.dim()
    out = torch.zeros(size, dtype=torch.bool, device=t.device)
    found = _sliced(t)
    if found is None:
        return out
    v = found[0]
    dom = _domain(v.dtype)
    if v.shape[axis] != size:
        out = out[:1]
    for lead, start, block in _slice_pieces(v):
        m = _repeated(_operand(block, dom))
        inner = axis - len(lead)
        if inner < 0:
            out[lead[axis]] |= m.any()
            continue
        other = tuple(d for d in range(m.dim()) if d != inner)
        hit = m.any(dim=other) if other else m
        if inner == 0 and start is not None:
            out[start : start + hit.shape[0]] |= hit
        else:
            out |= hit
    return out if out.shape[0] == size else out.expand(size).contiguous()


# -- per-position extremes (bounds that differ per sample) -----------------------------


def position_extremes(t: torch.Tensor, axis: int = 0) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``(smallest, largest)`` element at each position along ``axis`` of ``t``, exactly, in bounded memory.

    For checking bounds that differ from position to position (``max: response`` over
    the rows of a batch): int64 tensors for integer and bool dtypes, float64 for float
    ones (a NaN anywhere at a position makes both NaN), on ``t``'s device. ``None`` when
    there is nothing to compare: a ``meta`` or empty tensor, or ``uint64``, whose values
    int64 cannot hold.
    """
    if t.dim() == 0:
        raise ValueError("position_extremes needs a tensor with at least one axis, found a 0-d tensor")
    if t.is_meta or t.numel() == 0 or t.dtype == torch.uint64 or t.dtype.is_complex:
        return None
    size = t.shape[axis]
    axis %= t.dim()
    dom = _domain(t.dtype)
    wide = torch.float64 if dom.is_float else torch.int64
    v, _ = _walked(t)
    n = v.shape[axis]
    lo_init, hi_init = (_INF, -_INF) if dom.is_float else (2**63 - 1, -(2**63))
    lo = torch.full((n,), lo_init, dtype=wide, device=t.device)
    hi = torch.full((n,), hi_init, dtype=wide, device=t.device)
    for lead, start, block in _pieces(v):
        x = _operand(block, dom)  # reduced in its own dtype (exact), widened after
        inner = axis - len(lead)
        if inner < 0:
            small, big = torch.aminmax(x)
            at = slice(lead[axis], lead[axis] + 1)
        else:
            other = tuple(d for d in range(x.dim()) if d != inner)
            small, big = (x.amin(dim=other), x.amax(dim=other)) if other else (x, x)
            at = slice(start, start + small.shape[0]) if inner == 0 and start is not None else slice(None)
        lo[at] = torch.minimum(lo[at], small.to(wide))
        hi[at] = torch.maximum(hi[at], big.to(wide))
    if n != size:
        lo, hi = lo.expand(size).contiguous(), hi.expand(size).contiguous()
    return lo, hi
