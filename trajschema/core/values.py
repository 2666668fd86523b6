"""The value engine's sets: which values of a dtype or a kind a field's checks let through, exactly.

One definition, used by sample checks, batch checks, padding proofs, compatibility and the loader:
for the exact value ``x`` of an element, as Python's int/float arithmetic sees it,

* ``values``: ``x`` breaks it unless ``x == v`` for some listed ``v`` (so ``True == 1``,
  ``-0.0 == 0.0``, and NaN matches nothing);
* ``min`` / ``max``: ``x`` breaks it unless ``x >= min`` / ``x <= max`` (so NaN breaks both);
* ``finite``: a float breaks it unless ``math.isfinite(x)``; integers are finite.

`ValueSet` is the package's one description of "which values": compatibility takes
differences of two for a witness, the strategies draw from one, the loader asks one
whether a bound leaves a dtype any value, and `trajschema.core.elements` reads a
tensor test off one per check. This module needs no torch: a dtype is known by its name
(`trajschema.core.dtypes` rounds and steps floats as torch does), so a schema is read
and compared without it.
"""

from __future__ import annotations

import bisect
import dataclasses
import fractions
import functools
import math
import numbers
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from trajschema.core.dtypes import DType, as_dtype, float_max, integer_capacity, is_tensor, round_to, step
from trajschema.core.scalars import is_int

if TYPE_CHECKING:
    import torch

    from trajschema.core.decl import Field

__all__ = [
    "Domain",
    "ValueSet",
    "fits_dtype",
    "float_bound",
    "number_label",
    "scalar_failures",
    "value_failures",
    "values_label",
]

_INF = math.inf


# -- exact rounding of a bound onto a dtype ------------------------------------------


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


def float_bound(b: int | float, dtype: Any, up: bool) -> float:
    """The smallest ``dtype`` value >= b (``up``), or the largest <= b; may be ±inf.

    ``dtype`` is float16, bfloat16, float32 or float64 (a name, a `DType` or a ``torch.dtype``).
    """
    f = _f64_at_least(b, up)
    if as_dtype(dtype).name == "float64" or math.isinf(f):
        return f
    d = round_to(f, dtype)
    if (up and d < f) or (not up and d > f):
        d = step(d, dtype, up)
    return d


# -- the one value set ----------------------------------------------------------------

#: Where values come from: a dtype (a tensor's elements; a ``torch.dtype`` or a dtype name
#: given to a `ValueSet` becomes a `DType`), or a kind (``int float bool str mapping any``:
#: a non-tensor field's values).
Domain = DType | str

#: One end of a span: ``(value, closed)``; value may be ±inf (an unbounded end, or the
#: infinity itself when closed and the domain holds it).
_End = tuple[Any, bool]
#: A span: ``(lo, lo_closed, hi, hi_closed)``.
_Span = tuple[Any, bool, Any, bool]

_NATIVE_FLOATS = ("float16", "bfloat16", "float32", "float64")


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

    def __init__(self, dtype: DType) -> None:
        self.dtype = dtype
        self.full = (-_INF, True, _INF, True)
        self.table: list[float] | None = None
        if dtype.name in _NATIVE_FLOATS:
            self.big = float_max(dtype)
        else:  # float8: 256 bit patterns, read once (only a tensor of that dtype leads here, so torch is loaded)
            import torch

            every = torch.arange(256, dtype=torch.uint8).view(getattr(torch, dtype.name)).to(torch.float64).tolist()
            self.table = sorted({v for v in every if math.isfinite(v)})
            self.big = self.table[-1]

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
        return step(p, self.dtype, True) + 0.0

    def _before(self, p: Any) -> Any:
        if p == -_INF:
            return None
        if p == _INF:
            return self.big
        if self.table is not None:
            return self._down(math.nextafter(p, -_INF))
        return step(p, self.dtype, False) + 0.0

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


def _domain(domain: Any) -> Domain:
    """A kind stays itself; a ``torch.dtype``, a dtype name given as a `DType`, or a `DType` is a `DType`."""
    return domain if isinstance(domain, (str, DType)) else as_dtype(domain)


def _line(domain: Any) -> _Line | None:
    """The numbers ``domain`` holds (``None``: none, for ``str`` and ``mapping``)."""
    return _line_of(_domain(domain))


@functools.lru_cache(maxsize=64)
def _line_of(domain: Domain) -> _Line | None:
    if isinstance(domain, DType):
        if domain.is_complex:
            raise TypeError(f"value sets do not apply to complex dtype {domain}")
        if domain.is_floating_point:
            return _Floats(domain)
        capacity = integer_capacity(domain)
        if capacity is None:
            raise TypeError(f"value sets do not apply to dtype {domain}")
        return _Ints(*capacity)
    lines: dict[str, _Line | None] = {"int": _Ints(None, None), "bool": _Ints(0, 1), "float": _Reals(), "any": _Reals()}
    if domain in ("str", "mapping"):
        return None
    if domain not in lines:
        kinds = "int, float, bool, any, str, mapping"
        raise ValueError(f"a value set's domain is a dtype or a kind ({kinds}), found {domain!r}")
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

    def __post_init__(self) -> None:
        if not isinstance(self.domain, (str, DType)):
            object.__setattr__(self, "domain", _domain(self.domain))

    # -- construction

    @classmethod
    def _make(cls, domain: Domain, spans: Iterable[_Span], nan: bool, others: bool) -> ValueSet:
        line = _line(domain)
        if line is None:
            return cls(domain, (), False, others)
        return cls(domain, _normal(line, spans), nan and not isinstance(line, _Ints), others)  # ints hold no NaN

    @classmethod
    def everything(cls, domain: Domain | torch.dtype) -> ValueSet:
        """Every value of ``domain``: NaN with the floats, non-numbers with ``any``, ``str``, ``mapping``."""
        return _everything(domain)

    @classmethod
    def nothing(cls, domain: Domain | torch.dtype) -> ValueSet:
        _line(domain)
        return cls(_domain(domain))

    @classmethod
    def listed(cls, values: Iterable[Any], domain: Domain | torch.dtype) -> ValueSet:
        """The values of ``domain`` equal to a listed one (``values``): ``True == 1``, and NaN equals nothing."""
        dom = _domain(domain)
        line = _line_of(dom)
        if line is None:
            return cls(dom)
        points = [v for v in values if isinstance(v, numbers.Real) and not _is_nan(v) and line.has(v)]
        return cls._make(dom, [(_plain(v), True, _plain(v), True) for v in points], False, False)

    @classmethod
    def at_least(cls, bound: Any, domain: Domain | torch.dtype) -> ValueSet:
        """The values ``x`` of ``domain`` with ``x >= bound`` as Python compares (NaN passes nothing)."""
        return cls._bounded(bound, _domain(domain), True)

    @classmethod
    def at_most(cls, bound: Any, domain: Domain | torch.dtype) -> ValueSet:
        """The values ``x`` of ``domain`` with ``x <= bound``."""
        return cls._bounded(bound, _domain(domain), False)

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
    def finite(cls, domain: Domain | torch.dtype) -> ValueSet:
        """The values that pass ``finite``: no ±inf, no NaN (integers are finite; non-numbers pass)."""
        dom = _domain(domain)
        line = _line_of(dom)
        others = dom in ("any", "str", "mapping")
        spans = [] if line is None else [(-_INF, False, _INF, False)]
        return cls._make(dom, spans, False, others)

    @classmethod
    def passing(
        cls, values: Iterable[Any] | None, lo: Any, hi: Any, finite: bool, domain: Domain | torch.dtype
    ) -> ValueSet:
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


def number_label(x: Any) -> str:
    """``repr(x)`` for a bound or listed value, but never thousands of digits (nor an error for them)."""
    if is_int(x) and x.bit_length() > 128:
        return f"{'-' if x < 0 else ''}(an integer of {x.bit_length()} bits)"
    return repr(x)


def values_label(values: Sequence[Any]) -> str:
    return "[" + ", ".join(map(number_label, values)) + "]"


def scalar_failures(f: Field, v: Any) -> list[str]:
    """The value checks a non-tensor value breaks, as labels (``"one of [0, 1]"``, ``">= 0"``, ...).

    ``v`` is a Python value (a 0-d tensor is read with ``.item()``); ordering checks apply
    to real numbers only: anything else is a kind problem, reported elsewhere.
    """
    if is_tensor(v):
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


def fits_dtype(value: int | float | bool, dtype: Any) -> bool:
    """Whether ``dtype`` holds ``value`` exactly (``True`` counts as 1; NaN and ±inf fit float dtypes only).

    Examples:
        >>> from trajschema.core.values import fits_dtype
        >>> fits_dtype(127, torch.int8), fits_dtype(128, "int8"), fits_dtype(0.1, "float16")
        (True, False, False)
    """
    dtype = as_dtype(dtype)  # a name here is a dtype's, never a kind
    if not isinstance(value, numbers.Real) or dtype.is_complex:
        return False
    return value in ValueSet.everything(dtype)
