"""The value engine on tensors: which elements of a tensor break a field's value checks.

Each check of a field compiles, per dtype, to the `ValueSet` of the values it lets
through (`trajschema.core.values`), and its tensor test is read off that set.

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

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch

from trajschema.core.decl import Field
from trajschema.core.values import ValueSet, number_label

__all__ = [
    "DISTINCT_LABEL",
    "Failures",
    "Repeats",
    "any_per_row",
    "checks_for",
    "element_failures",
    "failing_positions",
    "failure_summary",
    "first_true",
    "has_repeats",
    "nonzero_per_position",
    "position_extremes",
    "repeat_positions",
    "repeat_summary",
    "same_bits",
    "tensor_clean",
    "tensor_extremes",
    "tensor_has_failures",
]

_INF = math.inf

#: The signed dtype of the same width as each unsigned one torch implements few ops for on CPU.
_SIGNED_TWIN = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def same_bits(t: torch.Tensor) -> torch.Tensor:
    """``t``, or a view of its bits as the signed dtype of its width where torch cannot index,
    fill or copy into the unsigned one (``uint16``: ``index_put``, ``masked_fill``). Moving
    values through the view keeps them bit for bit; comparing or ordering through it does not.

    Examples:
        >>> same_bits(torch.tensor([65535], dtype=torch.uint16)).tolist()
        [-1]
    """
    signed = _SIGNED_TWIN.get(t.dtype)
    return t if signed is None else t.view(signed)


def any_per_row(hit: torch.Tensor) -> torch.Tensor:
    """``(N,)`` bool: whether anything is set in each leading position of the bool tensor ``hit``.

    ``hit.flatten(1).any(1)``, read as bytes: torch's CPU ``any`` over a dim is ~20x slower
    than ``amax`` over the same bytes (4.4 ms against 0.24 ms on a (4096, 1529) mask), and
    rows of whole 8-byte words are read a word at a time (another 2-6x: 14 us against 84
    us for a (2730, 48) mask, a block of the ``distinct`` check on routed experts).

    Examples:
        >>> any_per_row(torch.tensor([[False, True], [False, False]])).tolist()
        [True, False]
    """
    if hit.dim() < 2:
        return hit
    if hit.numel() == 0:
        return torch.zeros(hit.shape[0], dtype=torch.bool, device=hit.device)
    flat = hit.reshape(hit.shape[0], -1)
    if flat.dtype != torch.bool or flat.is_meta:
        return flat.any(1)
    if flat.shape[1] % 8 == 0 and flat.is_contiguous() and flat.storage_offset() % 8 == 0:
        return flat.view(torch.uint8).view(torch.int64).amax(1) != 0  # words of 0/1 bytes: never negative
    return flat.view(torch.uint8).amax(1).view(torch.bool)


def first_true(hit: torch.Tensor) -> torch.Tensor:
    """``(N,)`` int64: the index of the first ``True`` in each row of the ``(N, T)`` bool ``hit`` (0 for none).

    ``torch.max`` over the bytes, which returns the first maximal index: an ``argmax``
    over a (4096, 1529) mask in int8 costs ~11 ms on CPU, this ~0.9 ms.

    Examples:
        >>> first_true(torch.tensor([[False, True, True], [False, False, False]])).tolist()
        [1, 0]
    """
    if hit.shape[1] == 0:
        return torch.zeros(hit.shape[0], dtype=torch.int64, device=hit.device)
    as_bytes = hit.view(torch.uint8) if hit.dtype == torch.bool else hit.to(torch.uint8)
    return as_bytes.max(1).indices


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


# -- distinct along the last axis ------------------------------------------------------

#: The ``expected`` of a ``repeated`` violation.
DISTINCT_LABEL = "distinct along the last axis"

# Up to this many slots per slice, repeats are found by comparing every pair of slots:
# k(k-1)/2 elementwise comparisons over the slots laid out as contiguous columns (one
# copy of the block; about 2x faster than sorting 8 slots, 20% faster than comparing
# strided views); above it by sorting each slice, which also costs an int64 index per element.
_PAIRWISE_UP_TO = 16
# Above this share of slices flagged by the one-byte screen, a block is compared exactly whole.
_SCREEN_REFINE_UP_TO = 0.25


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


def _byte_screened(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """`_repeated` of an integer operand of at most ``_PAIRWISE_UP_TO`` slots, screened on low bytes.

    Every value is first cut to its low byte (one narrowing copy, half of int16's bytes
    to compare, and torch's uint8 comparison is vectorized): equal values have equal
    low bytes, so a slice the screen passes holds no repeat, and the few it flags (a
    repeat, or values equal modulo 256) are compared exactly. The flag says whether the
    screen paid off: ``False`` when it flagged so many slices (values spread over more
    than 256) that the block was compared exactly whole.
    """
    hit = ~_all_differ(x.to(torch.uint8).movedim(-1, 0).contiguous().unbind(0), one_byte=True)
    flat = hit.reshape(-1)
    if x.element_size() == 1 or not _any_set(flat):
        return hit, True
    flagged = flat.nonzero().flatten()
    if flagged.numel() > _SCREEN_REFINE_UP_TO * flat.numel():
        return _repeated(x), False
    suspects = x.reshape(-1, x.shape[-1]).index_select(0, flagged)
    flat[flagged] = ~_all_differ(suspects.t().contiguous().unbind(0))
    return hit, True


def _any_set(m: torch.Tensor) -> bool:
    """``bool(m.any())`` of a bool tensor, reading eight flags a word where it can.

    torch's reduction of bool tensors is not vectorized: a block's mask of 131k flags
    takes ~80 us, its 16k words ~5 us.
    """
    flat = m.reshape(-1)
    whole = flat.numel() // 8 * 8
    if whole and flat.is_contiguous() and flat.storage_offset() % 8 == 0:
        return bool(flat[:whole].view(torch.uint8).view(torch.int64).any()) or bool(flat[whole:].any())
    return bool(flat.any())


def _repeat_masks(v: torch.Tensor, dom: _Domain) -> Iterator[_Block]:
    """``(lead, start, mask)`` per block of a `_sliced` view: `_repeated` of the block's operand.

    Integer blocks go through the byte screen until it stops paying off for this tensor.
    """
    screen = not dom.is_float and v.shape[-1] <= _PAIRWISE_UP_TO
    for lead, start, block in _slice_pieces(v):
        x = _operand(block, dom)
        if screen:
            m, screen = _byte_screened(x)
        else:
            m = _repeated(x)
        yield lead, start, m


def _all_differ(cols: Sequence[torch.Tensor], *, one_byte: bool = False) -> torch.Tensor:
    """Whether every pair of the integer columns differs, per position.

    One-byte columns compare with ``!=`` (vectorized for uint8); wider ones as ``a ^ b``
    cast to bool, the same answer without torch's comparison kernel, which is not
    vectorized for int16 on CPU (measured ~5x slower than ``^`` plus a cast to bool: the
    cost of ``distinct`` on routed experts before the one-byte screen).
    """
    if one_byte:
        out = cols[0] != cols[1]
        hit = torch.empty_like(out)
        for i in range(len(cols) - 1):
            for j in range(i + 1, len(cols)):
                if (i, j) != (0, 1):
                    torch.ne(cols[i], cols[j], out=hit)
                    out &= hit
        return out
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
    count, first = 0, None
    for lead, start, m in _repeat_masks(v, _domain(v.dtype)):
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
    return any(_any_set(m) for _, _, m in _repeat_masks(found[0], _domain(found[0].dtype)))


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
    if v.shape[axis] != size:
        out = out[:1]
    for lead, start, m in _repeat_masks(v, _domain(v.dtype)):
        inner = axis - len(lead)
        if inner < 0:
            out[lead[axis]] |= m.any()
            continue
        other = tuple(d for d in range(m.dim()) if d != inner)
        if not other:
            hit = m
        elif inner == 0:  # the trailing axes: one row of the mask per position
            hit = any_per_row(m)
        else:
            hit = m.any(dim=other)
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
