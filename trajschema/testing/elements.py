"""The element values of small tensors, drawn one by one through hypothesis, so that failures shrink.

A tensor filled from a seed shrinks only as far as its seed: the failing example
hypothesis reports still holds arbitrary numbers. A tensor whose every element is a
hypothesis choice shrinks element by element, so a failing example comes back with
every element that does not matter at the simplest allowed value (``0``, or the
bound nearest ``0`` when ``0`` is not allowed; the listed value nearest ``0`` for a
``values:`` field; ``False`` for a bool) and the one that matters at the smallest
value that still fails.

Each element is drawn from exactly what the field allows in its dtype, with no
filtering: ``st.integers`` within the integer bounds (exact at ``int64``'s ends),
``st.booleans`` for a bool, ``st.sampled_from`` for listed values, finite ``st.floats``
at the dtype's own width for ``float16``/``float32``/``float64`` (so every draw is a
value of the dtype), and for ``bfloat16`` a ``float32`` rounded to the nearest
``bfloat16`` (which never passes a bound that is a ``bfloat16`` value). The ends of
the range, infinities and NaN, where the field allows them, are put at up to two
places of a tensor by a list of their own, which shrinks to empty.

Only small tensors are drawn this way (see `SMALL` and `PER_DRAW`); the strategies
fill larger ones from a seed, as before.

A field declaring ``distinct`` (every slice along the last axis holds distinct values, a
token's routed experts) is drawn constructively too (`small_distinct_tensor`): the
allowed values are put in one order, simplest first, and each slot of a slice draws the
rank of one of the values its slice has not used yet, so a slice shrinks towards the
simplest distinct values (``0, 1, 2, ...`` for ``min: 0``). Floats are ranked by their
bit patterns (``-0.0`` and ``0.0`` are one value), so every float dtype has a finite,
ordered value set; NaN is never drawn in a distinct field.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Literal, Protocol

import torch
from hypothesis import strategies as st

from trajschema.core import is_int

__all__ = [
    "PER_DRAW",
    "SMALL",
    "AllowedLike",
    "ElementBudget",
    "distinct_count",
    "element_values",
    "from_keys",
    "small_distinct_tensor",
    "small_tensor",
    "value_keys",
]

#: The most elements a tensor may have to be drawn element by element. Each element is a
#: hypothesis choice, which costs time (tens of microseconds) and room (a test case holds
#: about 8 KiB of choices, a float takes 9 bytes), so large tensors keep their seed. 64
#: covers the tensors of a shrunk failing example (a few tokens, a 4 x 8 position grid),
#: and a tensor this small is one a reader can still take in when hypothesis prints it.
SMALL = 64

#: The most elements one draw (a sample, or a whole batch) takes through hypothesis; the
#: tensors beyond it come from a seed. A shrunk failing example of a packaged schema
#: holds far fewer (its smallest sample has about ten), so they all shrink; a draw of
#: larger sizes pays for at most 64 choices (about 0.6 KiB: a test drawing several
#: samples still fits hypothesis's buffer, and 200 small samples take about twice as
#: long to draw as from seeds alone).
PER_DRAW = 64


class AllowedLike(Protocol):
    """What a dtype may hold in a field: the ``members`` listed, or ``[lo, hi]`` (NaN too when ``nan``)."""

    @property
    def is_float(self) -> bool: ...

    @property
    def lo(self) -> int | float: ...

    @property
    def hi(self) -> int | float: ...

    @property
    def members(self) -> tuple[int | float, ...] | None: ...

    @property
    def nan(self) -> bool: ...


class ElementBudget:
    """How many more elements one draw may take through hypothesis (``PER_DRAW`` to start with)."""

    def __init__(self, left: int = PER_DRAW) -> None:
        self.left = left

    def take(self, n: int) -> bool:
        """Whether a tensor of ``n`` elements is drawn element by element; if so, its elements are spent."""
        if n > SMALL or n > self.left:
            return False
        self.left -= n
        return True


def small_tensor(a: AllowedLike, shape: tuple[int, ...], dtype: torch.dtype) -> st.SearchStrategy[torch.Tensor]:
    """A strategy of tensors of ``shape`` and ``dtype`` whose every element is a hypothesis choice within ``a``.

    Meant for small shapes (at most `SMALL` elements): the choices grow with the element count.

    Raises:
        ValueError: ``a`` allows no value (no members, or ``lo > hi``) while ``shape``
            has elements; ``shape`` is not a tuple of sizes (ints >= 0).
    """
    if not all(is_int(n) and n >= 0 for n in shape):
        raise ValueError(f"small_tensor(shape=...) must be sizes (ints >= 0), found {shape!r}")
    if not math.prod(shape):  # no element to draw: a bound that allows nothing at these sizes is kept
        return st.builds(lambda: torch.empty(tuple(shape), dtype=dtype))
    empty = not a.members if a.members is not None else not a.lo <= a.hi
    if empty:
        raise ValueError(f"small_tensor: no {dtype} value is allowed (lo={a.lo}, hi={a.hi}, members={a.members})")
    return _small_strategy(a.is_float, a.lo, a.hi, a.members, a.nan, tuple(shape), dtype)


@functools.lru_cache(maxsize=4096)
def _small_strategy(
    is_float: bool,
    lo: int | float,
    hi: int | float,
    members: tuple[int | float, ...] | None,
    nan: bool,
    shape: tuple[int, ...],
    dtype: torch.dtype,
) -> st.SearchStrategy[torch.Tensor]:
    # Cached: hypothesis validates a strategy object on its first draw, which costs more
    # than the draw; a schema has few (field, dtype) pairs and few small shapes.
    n = math.prod(shape)
    values = element_values(is_float, lo, hi, members, nan, dtype)
    ends = () if members is not None or dtype == torch.bool or not n else (*dict.fromkeys((lo, hi)), *[math.nan] * nan)
    # The ends of the range (infinite ones too) and NaN where allowed, which a range's own
    # draws seldom reach, put at up to two places, as a list of its own: it shrinks to
    # empty, leaving each element its own, simpler, value.
    moves = st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from(ends)), max_size=2) if ends else st.just(())
    return _small(values, moves, shape, dtype)


@st.composite
def _small(
    draw: Callable, values: st.SearchStrategy, moves: st.SearchStrategy, shape: tuple[int, ...], dtype: torch.dtype
) -> torch.Tensor:
    drawn = [draw(values) for _ in range(math.prod(shape))]  # a fixed count: a loop is cheaper than st.lists
    for i, end in draw(moves):
        drawn[i] = end
    return _as_tensor(drawn, shape, dtype)


#: How each float dtype is drawn: ``st.floats``'s width, and the dtype of that width.
_WIDTH: dict[torch.dtype, tuple[Literal[16, 32, 64], torch.dtype]] = {
    torch.float16: (16, torch.float16),
    torch.bfloat16: (32, torch.float32),  # no width of its own: rounded from float32
    torch.float32: (32, torch.float32),
    torch.float64: (64, torch.float64),
}


@functools.lru_cache(maxsize=1024)
def element_values(
    is_float: bool,
    lo: int | float,
    hi: int | float,
    members: tuple[int | float, ...] | None,
    nan: bool,
    dtype: torch.dtype,
) -> st.SearchStrategy[int | float | bool]:
    """One element's values (the fields of an `AllowedLike`): what ``dtype`` holds in ``[lo, hi]`` or ``members``.

    Cached: a schema has few (field, dtype) pairs, and a strategy is immutable.
    """
    if members is not None:
        # sampled_from shrinks toward its first member: put the simplest first.
        return st.sampled_from(sorted(members, key=lambda m: (abs(m), m < 0)))
    if dtype == torch.bool:
        return st.booleans() if lo < hi else st.just(bool(lo))
    if not is_float:
        return st.integers(int(lo), int(hi))
    # Finite bounds always: hypothesis draws a narrower float as a float64 and rejects
    # what overflows it (most of an unbounded range); infinities and NaN come as ends.
    width, drawn_as = _WIDTH[dtype]
    big = torch.finfo(drawn_as).max
    flo, fhi = max(float(lo), -big), min(float(hi), big)
    if flo > fhi:  # only an infinity allowed (``min: .inf``)
        return st.just(float(lo))
    # -0.0 == 0.0 to the value checks, but not to hypothesis: ``min: 0, max: -0.0`` allows both zeros.
    flo, fhi = (-0.0 if flo == 0 else flo), (0.0 if fhi == 0 else fhi)
    return st.floats(flo, fhi, allow_nan=False, allow_infinity=False, width=width)


def _as_tensor(values: list[int | float | bool], shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """The drawn values as a tensor of ``dtype``.

    Every value is one of ``dtype``'s but bfloat16's (drawn as float32s), and rounding to
    nearest never passes a bound that is itself a ``dtype`` value, so each stays allowed.
    """
    if dtype == torch.bool:
        return torch.tensor([bool(v) for v in values], dtype=torch.bool).reshape(shape)
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    return torch.tensor(values, dtype=wide).to(dtype).reshape(shape)


# -- distinct slices ------------------------------------------------------------------

#: The signed integer dtype of each float dtype's width, whose view orders its bit patterns.
_BITS = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}


def _key(x: float, dtype: torch.dtype) -> int:
    """The rank key of float ``x`` (a value of ``dtype``, ±inf included): ordered as the floats, ``-0.0`` is ``0``."""
    bits = int(torch.tensor(x, dtype=dtype).view(_BITS[dtype]).item())
    return bits if bits >= 0 else -(bits - torch.iinfo(_BITS[dtype]).min)


def value_keys(a: AllowedLike, dtype: torch.dtype) -> tuple[int, int]:
    """``(first, last)``: the allowed values of ``a`` (a range) as a range of int keys, ordered as the values.

    Integers (and bools) are their own keys; a float's key orders its bit pattern, so the
    values between two floats are exactly the keys between theirs.
    """
    if not a.is_float:
        return int(a.lo), int(a.hi)
    return _key(float(a.lo), dtype), _key(float(a.hi), dtype)


def distinct_count(a: AllowedLike, dtype: torch.dtype) -> int:
    """How many distinct values ``a`` allows in ``dtype`` (NaN not counted): the most a distinct slice may hold."""
    if a.members is not None:
        return len(set(a.members))
    first, last = value_keys(a, dtype)
    return max(0, last - first + 1)


def from_keys(keys: torch.Tensor, a: AllowedLike, dtype: torch.dtype) -> torch.Tensor:
    """The values of int64 ``keys`` (member indices when ``a`` lists ``members``) as a tensor of ``dtype``."""
    if a.members is not None:
        pool = sorted(set(a.members), key=_simplest)
        wide = torch.float64 if dtype.is_floating_point else torch.int64
        return torch.tensor(pool, dtype=wide)[keys].to(dtype)
    if not dtype.is_floating_point:
        return keys.to(dtype)
    bits = _BITS[dtype]
    sign = torch.iinfo(bits).min
    pattern = torch.where(keys >= 0, keys, (-keys) | sign)
    return pattern.to(bits).view(dtype)


def _simplest(m: int | float) -> tuple[float, bool]:
    return abs(m), m < 0


def _zigzag(r: int, first: int, last: int) -> int:
    """The ``r``-th key of ``first..last`` in the order ``0, 1, -1, 2, -2, ...`` (nearest 0 first)."""
    if first >= 0:
        return first + r
    if last <= 0:
        return last - r
    both = min(last, -first)  # keys on each side of 0 that alternate
    if r <= 2 * both:
        return (r + 1) // 2 if r % 2 else -(r // 2)
    beyond = both + r - 2 * both
    return beyond if last > -first else -beyond


def small_distinct_tensor(
    a: AllowedLike, shape: tuple[int, ...], dtype: torch.dtype
) -> st.SearchStrategy[torch.Tensor]:
    """Like `small_tensor`, but every slice along the last axis holds distinct values.

    Each slot draws the rank of a value its slice has not used (no filtering); a slice
    shrinks towards the simplest values. A 0-d shape is one slice of one element.

    Raises:
        ValueError: the last axis is longer than the number of values ``a`` allows;
            ``shape`` is not a tuple of sizes.
    """
    if not all(is_int(n) and n >= 0 for n in shape):
        raise ValueError(f"small_distinct_tensor(shape=...) must be sizes (ints >= 0), found {shape!r}")
    count, k = distinct_count(a, dtype), (shape[-1] if shape else 1)
    if math.prod(shape) and k > count:
        raise ValueError(f"small_distinct_tensor: a slice of {k} distinct {dtype} values, but only {count} are allowed")
    members = None if a.members is None else tuple(sorted(set(a.members), key=_simplest))
    first, last = (0, count - 1) if members is not None else value_keys(a, dtype)
    return _small_distinct(a, members, first, last, count, tuple(shape), dtype)


@st.composite
def _small_distinct(
    draw: Callable,
    a: AllowedLike,
    members: tuple[int | float, ...] | None,
    first: int,
    last: int,
    count: int,
    shape: tuple[int, ...],
    dtype: torch.dtype,
) -> torch.Tensor:
    k = shape[-1] if shape else 1
    keys: list[int] = []
    for _ in range(math.prod(shape) // k if k else 0):
        used: list[int] = []
        for j in range(k):
            r = draw(st.integers(0, count - 1 - j))
            for u in sorted(used):  # the r-th rank the slice has not used
                if u <= r:
                    r += 1
            used.append(r)
            keys.append(r if members is not None else _zigzag(r, first, last))
    return from_keys(torch.tensor(keys, dtype=torch.int64), a, dtype).reshape(shape)
