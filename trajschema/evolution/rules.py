"""The set comparisons behind schema compatibility: sizes, values, kinds, dim expressions, dim binding.

Each rule answers one question exactly, for what validation (``depth="values"``) really
accepts: "is every X that ``a`` allows also allowed by ``b``?". The answer is a
*witness* — something ``a`` allows and ``b`` refuses — or ``None`` when there is none.
`trajschema.evolution.changes` turns the answers into `Change` records.

* sizes: a fixed or free dim allows an arithmetic progression of sizes;
* values: a field's ``values``/``min``/``max``/``finite`` over the values its kind or one
  dtype can hold (exact, as :mod:`trajschema.core.values` compares);
* kinds: which kinds accept every value of another (``int`` values are ``float`` values);
* dim expressions: a canonical polynomial over ``+ - *`` (``prompt + response`` equals
  ``response + prompt``), with derived dims expanded;
* binding: whether validation binds a sample's dims under one schema as it did under the
  other (:func:`binding_risk`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import torch

from trajschema.check import Plan
from trajschema.core import DerivedDim, Expr, FixedDim, FreeDim, fits_dtype, float_bound

__all__ = [
    "Poly",
    "ValueSet",
    "axis_key",
    "axis_poly",
    "binding_risk",
    "direct_key",
    "expansions",
    "kind_within",
    "kind_witness",
    "poly",
    "reachable",
    "size_witness",
    "value_set",
    "value_witness",
]

# -- dim sizes ---------------------------------------------------------------------------


def _progression(d: FixedDim | FreeDim) -> tuple[int, int, int | None] | None:
    """``(first, step, last)`` of the sizes ``d`` allows (``last`` ``None``: no end); ``None`` if none."""
    if isinstance(d, FixedDim):
        return d.size, 1, d.size
    step = d.multiple_of or 1
    first = -(-d.min // step) * step
    last = None if d.max is None else (d.max // step) * step
    if last is not None and last < first:
        return None
    return first, step, last


def size_witness(a: FixedDim | FreeDim, b: FixedDim | FreeDim) -> int | None:
    """A size ``a`` allows and ``b`` refuses, or ``None`` when every size ``a`` allows ``b`` allows too.

    Exact for arithmetic progressions: ``a`` fits in ``b`` when ``b`` holds its first and
    last size and (with two or more sizes) ``a``'s step is a multiple of ``b``'s.
    """
    pa = _progression(a)
    if pa is None:
        return None
    first, step, last = pa
    pb = _progression(b)
    if pb is None:
        return first

    def inside(x: int) -> bool:
        return x >= pb[0] and (pb[2] is None or x <= pb[2]) and (x - pb[0]) % pb[1] == 0

    if not inside(first):
        return first
    if last is None:
        if pb[2] is not None:  # b ends, a does not: a's first size past b's end
            return first + step * ((pb[2] - first) // step + 1)
    elif not inside(last):
        return last
    if last != first and step % pb[1] != 0:
        return first + step
    return None


# -- dim expressions as canonical polynomials ---------------------------------------------

#: A polynomial over dim names: ``((monomial, coefficient), ...)``, sorted, no zero terms;
#: a monomial is a sorted tuple of names (``("a", "a", "b")`` is ``a*a*b``).
Poly = tuple[tuple[tuple[str, ...], int], ...]

# Expanding products of derived dims can grow without bound (``a: b*b``, ``b: c*c``, ...):
# past these sizes a comparison gives up and says it cannot prove equality.
_MAX_TERMS = 512
_MAX_DEGREE = 64


class _TooComplex(Exception):
    pass


def _freeze(p: Mapping[tuple[str, ...], int]) -> Poly:
    return tuple(sorted((m, c) for m, c in p.items() if c))


def _mul(a: Poly, b: Poly) -> Poly:
    out: dict[tuple[str, ...], int] = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb))
            if len(m) > _MAX_DEGREE:
                raise _TooComplex
            out[m] = out.get(m, 0) + ca * cb
            if len(out) > _MAX_TERMS:
                raise _TooComplex
    return _freeze(out)


def _add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b:
        out[m] = out.get(m, 0) + sign * c
    if len(out) > _MAX_TERMS:
        raise _TooComplex
    return _freeze(out)


def _poly(e: Expr, subst: Mapping[str, Poly | None]) -> Poly:
    if e.op == "int":
        return _freeze({(): e.args[0]})
    if e.op == "name":
        name = e.args[0]
        if name in subst:
            p = subst[name]
            if p is None:
                raise _TooComplex
            return p
        return (((name,), 1),)
    if e.op == "neg":
        return tuple((m, -c) for m, c in _poly(e.args[0], subst))
    a, b = (_poly(x, subst) for x in e.args)
    if e.op == "+":
        return _add(a, b)
    if e.op == "-":
        return _add(a, b, -1)
    return _mul(a, b)


def poly(e: Expr, subst: Mapping[str, Poly | None] | None = None) -> Poly | None:
    """``e`` as a canonical polynomial, names in ``subst`` replaced; ``None`` when too large to expand."""
    try:
        return _poly(e, subst or {})
    except _TooComplex:
        return None


def direct_key(e: Expr) -> tuple[Poly | None, frozenset[str]]:
    """What validation's binding sees of ``e``: its polynomial and the names it mentions.

    ``a - a + b`` has the polynomial of ``b`` but two names to bind, so the names count too.
    """
    return poly(e), frozenset(e.names())


def expansions(dims: Mapping[str, Any]) -> dict[str, Poly | None]:
    """Every derived dim of ``dims`` as a polynomial over fixed and free dims (``None``: too large)."""
    out: dict[str, Poly | None] = {}

    def visit(name: str) -> Poly | None:
        if name not in out:
            d = dims[name]
            for n in d.expr.names():
                if isinstance(dims[n], DerivedDim):
                    visit(n)
            out[name] = poly(d.expr, out)
        return out[name]

    for name, d in dims.items():
        if isinstance(d, DerivedDim):
            visit(name)
    return out


def reachable(dims: Mapping[str, Any], roots: Iterable[str]) -> set[str]:
    """``roots`` and every dim their derived dims depend on, transitively."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        n = todo.pop()
        if n in seen or n not in dims:
            continue
        seen.add(n)
        if isinstance(dims[n], DerivedDim):
            todo.extend(dims[n].expr.names())
    return seen


# -- kinds -------------------------------------------------------------------------------

# A value of each kind, and values of no kind, to show what one kind accepts and another refuses.
_KIND_EXAMPLES: tuple[Any, ...] = (1, 0.5, True, "x", {}, [1])


def kind_within(a: str | None, b: str | None) -> bool:
    """Whether every value of kind ``a`` is of kind ``b`` (``None``, an unchecked tag, is ``any``).

    ``int`` values are ``float`` values (:func:`trajschema.core.kinds.kind_ok` accepts any
    non-boolean real as a float); ``any`` accepts everything; ``bool`` is not ``int``.
    """
    a, b = a or "any", b or "any"
    return a == b or b == "any" or (a, b) == ("int", "float")


def kind_witness(a: str | None, b: str | None) -> Any:
    """A value of kind ``a`` that kind ``b`` refuses (``a`` must not be within ``b``)."""
    from trajschema.core import kind_ok

    for v in _KIND_EXAMPLES:
        if (a is None or kind_ok(a, v)) and b is not None and not kind_ok(b, v):
            return v
    raise AssertionError((a, b))


# -- values --------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ValueSet:
    """The values a field's checks let through, among those one kind or dtype can hold.

    Numbers are the listed ``members`` (when ``values`` is declared) or the interval
    ``[lo, hi]`` (``None``: unbounded) — integers only when ``integral``, else reals, or
    the values of float ``dtype`` when given; plus the flags for ``-inf``, ``+inf``, NaN
    and ``others`` (values that are not numbers, such as strings, which pass only checks
    without ``values``). ``empty`` marks an interval with no number in it.
    """

    integral: bool
    members: frozenset[Any] | None = None
    lo: Any = None
    hi: Any = None
    empty: bool = False
    neg_inf: bool = False
    pos_inf: bool = False
    nan: bool = False
    others: bool = False
    numbers: bool = True
    dtype: torch.dtype | None = None

    def holds(self, x: Any) -> bool:
        """Whether the number ``x`` (of this set's domain) is in the set."""
        if isinstance(x, float) and math.isnan(x):
            return self.nan
        if self.members is not None:
            return x in self.members
        if isinstance(x, float) and math.isinf(x):
            return self.pos_inf if x > 0 else self.neg_inf
        return not self.empty and (self.lo is None or x >= self.lo) and (self.hi is None or x <= self.hi)


#: Where values come from: a torch dtype, or a non-tensor kind.
Domain = torch.dtype | str


def _passes(v: Any, lo: Any, hi: Any, finite: bool) -> bool:
    if (lo is not None and not v >= lo) or (hi is not None and not v <= hi):
        return False
    return not (finite and isinstance(v, float) and not math.isfinite(v))


def _int_domain(domain: Domain) -> tuple[int | None, int | None] | None:
    """``(lo, hi)`` of an integer domain (``None``: unbounded), or ``None`` for a real one."""
    if domain == "int":
        return None, None
    if domain in ("bool", torch.bool):
        return 0, 1
    if isinstance(domain, torch.dtype) and not domain.is_floating_point:
        info = torch.iinfo(domain)
        return int(info.min), int(info.max)
    return None


def value_set(values: Sequence[Any] | None, lo: Any, hi: Any, finite: bool, domain: Domain) -> ValueSet:
    """What checks ``values``/``lo``/``hi``/``finite`` let through among the values of ``domain``.

    ``domain`` is a torch dtype (a tensor's elements) or a kind (``int``: integers, ``float``:
    reals, ±inf and NaN, ``bool``: 0 and 1, ``any``: reals and non-numbers, ``str`` and
    ``mapping``: non-numbers only). A value that is not a number never equals a listed
    number (an object with an unusual ``__eq__`` is out of scope).
    """
    if domain in ("str", "mapping"):
        return ValueSet(False, numbers=False, others=values is None)
    others = domain == "any" and values is None
    ints = _int_domain(domain)
    dtype = domain if isinstance(domain, torch.dtype) and domain.is_floating_point else None
    if ints is not None:
        dlo, dhi = ints
        if values is not None:
            keep = {
                int(v)
                for v in values
                if (not isinstance(v, float) or v.is_integer())
                and (dlo is None or dlo <= v <= dhi)
                and _passes(v, lo, hi, False)
            }
            return ValueSet(True, members=frozenset(keep))
        a = math.ceil(lo) if lo is not None else None
        b = math.floor(hi) if hi is not None else None
        a = dlo if a is None or (dlo is not None and a < dlo) else a
        b = dhi if b is None or (dhi is not None and b > dhi) else b
        return ValueSet(True, lo=a, hi=b, empty=a is not None and b is not None and a > b)
    return _real_set(values, lo, hi, finite, dtype, others)


def _real_set(values: Any, lo: Any, hi: Any, finite: bool, dtype: torch.dtype | None, others: bool) -> ValueSet:
    if values is not None:
        keep = {
            (float(v) if dtype is not None else int(v) if isinstance(v, bool) else v)
            for v in values
            if (dtype is None or fits_dtype(v, dtype)) and _passes(v, lo, hi, finite)
        }
        return ValueSet(False, members=frozenset(keep), dtype=dtype, others=others)
    a, b = lo, hi
    if dtype is not None:  # the dtype's own values nearest the bounds, as validation compares
        big = torch.finfo(dtype).max
        a = -big if lo is None else float_bound(lo, dtype, True)
        b = big if hi is None else float_bound(hi, dtype, False)
        a, b = max(a, -big), min(b, big)
    checked = lo is not None or hi is not None or finite
    return ValueSet(
        False,
        lo=a,
        hi=b,
        empty=a is not None and b is not None and a > b,
        neg_inf=lo is None and not finite,
        pos_inf=hi is None and not finite,
        nan=not checked,
        others=others,
        dtype=dtype,
    )


def _numbers_in(a: ValueSet, limit: int) -> Iterable[Any]:
    """Up to ``limit`` numbers of ``a``'s interval, from its lower end (or upper, or 0, when unbounded)."""
    if a.empty:
        return
    if a.integral:
        if a.lo is not None:
            start, direction = a.lo, 1
        elif a.hi is not None:
            start, direction = a.hi, -1
        else:
            start, direction = 0, 1
        for k in range(limit):
            x = start + direction * k
            if (a.hi is not None and x > a.hi) or (a.lo is not None and x < a.lo):
                return
            yield x
        return
    if a.dtype is not None:
        x = torch.tensor(a.lo, dtype=a.dtype)
        up = torch.tensor(math.inf, dtype=a.dtype)
        for _ in range(limit):
            if x.item() > a.hi:
                return
            yield x.item()
            x = torch.nextafter(x, up)
        return
    yield from _reals_in(a.lo, a.hi, limit)


def _reals_in(lo: Any, hi: Any, limit: int) -> Iterable[Any]:
    """Distinct reals in ``[lo, hi]`` (``None``: unbounded): the ends, then points between them."""
    if lo is not None and hi is not None:
        yield lo
        if hi == lo:
            return
        yield hi
        left, right = Fraction(lo), Fraction(hi)
        for k in range(2, limit):
            m = left + (right - left) / k
            yield float(m) if float(m) == m else m  # a float where one lies there exactly
        return
    start, sign = (lo, 1) if lo is not None else (hi, -1) if hi is not None else (0, 1)
    for k in range(limit):
        yield start + sign * k


def value_witness(a: ValueSet, b: ValueSet) -> Any:
    """A value of ``a`` that ``b`` refuses, or ``None`` when ``b`` holds all of ``a``.

    Both sets must be built over the same domain. The witness is a number, ``nan``,
    ``±inf``, or the string ``"x"`` standing for any value that is not a number.
    """
    if a.others and not b.others:
        return "x"
    if not a.numbers:
        return None
    for flag, x in ((a.nan, math.nan), (a.neg_inf, -math.inf), (a.pos_inf, math.inf)):
        if flag and not b.holds(x):
            return x
    if a.members is not None:
        return next((x for x in sorted(a.members, key=_order) if not b.holds(x)), None)
    if a.empty:
        return None
    if b.members is None:
        return _interval_witness(a, b)
    # An interval inside a finite set: at most len(b.members) of its numbers can be members.
    return next((x for x in _numbers_in(a, len(b.members) + 1) if not b.holds(x)), None)


def _order(x: Any) -> tuple[int, Any]:
    return (1, 0) if isinstance(x, float) and math.isnan(x) else (0, x)


def _interval_witness(a: ValueSet, b: ValueSet) -> Any:
    """A number of interval ``a`` outside interval ``b``: an end of ``a``, or one just past an end of ``b``.

    An end of ``a`` is ``None`` only for integers and reals (a dtype has a largest value),
    where ``b``'s end minus (plus) one lies outside ``b``.
    """
    if b.empty:
        return a.lo if a.lo is not None else a.hi if a.hi is not None else 0
    if b.lo is not None and (a.lo is None or a.lo < b.lo):
        below = math.floor(b.lo) - 1  # an exact int: b.lo - 1 in floats can round back to b.lo
        return a.lo if a.lo is not None else below if a.hi is None else min(a.hi, below)
    if b.hi is not None and (a.hi is None or a.hi > b.hi):
        above = math.ceil(b.hi) + 1
        return a.hi if a.hi is not None else above if a.lo is None else max(a.lo, above)
    return None


# -- binding --------------------------------------------------------------------------------


def axis_key(plan: Plan, name: str | None, lit: int) -> Any:
    """What one axis of a tensor field observes, as binding sees it (see :func:`binding_risk`).

    An integer literal, a declared dim (by name), or an inline expression (by its
    :func:`direct_key`, so ``p+r`` and ``r + p`` are the same).
    """
    if name is None:
        return ("literal", lit)
    if name in plan.hidden:
        return ("inline", direct_key(plan.dim_plan.dims[name].expr))
    return ("dim", name)


def axis_poly(plan: Plan, exp: Mapping[str, Poly | None], name: str | None, lit: int) -> Poly | None:
    """The size of one axis as a polynomial over fixed and free dims (``exp``: from :func:`expansions`)."""
    if name is None:
        return _freeze({(): lit})
    return exp[name] if isinstance(plan.dim_plan.dims[name], DerivedDim) else (((name,), 1),)


@dataclasses.dataclass(frozen=True)
class _View:
    """One schema's plan, read for binding: the fields a source sample may carry, and their axes."""

    plan: Plan
    axes: Mapping[str, tuple[tuple[str | None, int], ...]]
    reach: frozenset[str]
    exp: Mapping[str, Poly | None]

    def is_derived(self, name: str) -> bool:
        return isinstance(self.plan.dim_plan.dims[name], DerivedDim)

    def ref_key(self, name: str | None, lit: int) -> Any:
        return axis_key(self.plan, name, lit)

    def expanded(self, name: str | None, lit: int) -> Poly | None:
        return axis_poly(self.plan, self.exp, name, lit)

    def base_names(self, name: str) -> frozenset[str]:
        return frozenset(n for n in reachable(self.plan.dim_plan.dims, [name]) if not self.is_derived(n))


def _view(plan: Plan, fields: Sequence[str], tags: Sequence[str]) -> _View:
    axes = {f.name: ax for f, ax in plan.tensors if f.name in fields}
    roots = [n for ax in axes.values() for n, _ in ax if n is not None]
    roots += [n for t in tags if (e := plan.tags[t].equals) is not None for n in e.names()]
    dims = plan.dim_plan.dims
    return _View(plan, axes, frozenset(reachable(dims, roots)), expansions(dims))


def _refs(v: _View) -> dict[str, Any]:
    """How binding tells the reached derived dims apart: by name, an inline expression by its key *and* ordinal.

    Two inline expressions with one key (``p + r`` and ``r + p`` in two fields) are two
    derived dims, bound one after the other: which field observes the first one decides
    what binding solves, so the ordinal belongs to the reference.
    """
    out: dict[str, Any] = {}
    seen: dict[Any, int] = {}
    for d in v.plan.dim_plan.derived:
        if d.name in v.reach:
            key = v.ref_key(d.name, 0)
            out[d.name] = (*key, seen.get(key, 0)) if d.name in v.plan.hidden else key
            seen[key] = seen.get(key, 0) + 1
    return out


def _signature(v: _View, fields: Sequence[str], tags: Sequence[str]) -> tuple[Any, ...]:
    """Everything that decides how validation binds dims, for samples carrying only ``fields``."""
    refs = _refs(v)
    derived = tuple((refs[d.name], direct_key(d.expr)) for d in v.plan.dim_plan.derived if d.name in v.reach)
    axes = tuple(
        tuple((n is not None and refs.get(n)) or v.ref_key(n, lit) for n, lit in v.axes[f]) if f in v.axes else None
        for f in fields
    )
    bases = tuple(sorted((n, type(v.plan.dim_plan.dims[n]).__name__) for n in v.reach if not v.is_derived(n)))
    eq = tuple(direct_key(e) if (e := v.plan.tags[t].equals) is not None else None for t in tags)
    return derived, axes, bases, eq


def binding_risk(source: Plan, target: Plan) -> str | None:
    """Why validation under ``target`` might bind a ``source``-valid sample's dims differently, or ``None``.

    Binding (:mod:`trajschema.check.binding`) works step by step: a derived dim is computed
    when its inputs are bound, *solved* for its one unbound input when a field observes
    it, and left alone otherwise; so two schemas whose shapes say the same sizes can
    still accept different samples (``a: b + c`` with ``b: 2 * x`` accepts a sample
    whose ``b`` is 3, which ``a: 2 * x + c`` refuses). Binding is provably the same when
    both schemas bind the same way (same derived dims in the same order, same axes,
    same fixed/free dims), or when neither ever has to solve: every derived dim a field
    observes is computable from dims that the source's ``required`` fields (or fixed
    sizes) bind directly, in both schemas.
    """
    fields = tuple(source.fields)
    tags = _same_size_tags(source, target)
    s, t = _view(source, fields, tags), _view(target, fields, tags)
    if _signature(s, fields, tags) == _signature(t, fields, tags):
        return None
    for v in (s, t):
        dims = v.plan.dim_plan.dims
        deep = sorted(n for n in v.reach if v.is_derived(n) and any(v.is_derived(m) for m in dims[n].expr.names()))
        if deep:
            return f"derived dims depend on derived dims ({_label(v, deep[0])}), which validation solves step by step"
    required = [f.name for f in source.fields.values() if f.required]
    return _flat_risk(s, t, fields, tags, _sure(s, t, required))


def _same_size_tags(source: Plan, target: Plan) -> tuple[str, ...]:
    """Tags both declare with ``equals`` of the same size: where they differ, only when each is checked can.

    (Tags whose ``equals`` stand for other sizes break anyway; other tags do not bind dims.)
    """
    es, et = expansions(source.dim_plan.dims), expansions(target.dim_plan.dims)
    out = []
    for name, tag in source.tags.items():
        other = target.tags.get(name)
        if tag.equals is None or other is None or other.equals is None:
            continue
        p = poly(tag.equals, es)
        if p is not None and p == poly(other.equals, et):
            out.append(name)
    return tuple(out)


def _label(v: _View, name: str) -> str:
    d = v.plan.dim_plan.dims[name]
    return str(d.expr) if name in v.plan.hidden else f"{name} = {d.expr}"


def _sure(s: _View, t: _View, required: Sequence[str]) -> list[str]:
    """The fields every source-valid sample carries and both schemas observe with the same sizes."""
    out = []
    for f in required:
        if f in s.axes and f in t.axes and len(s.axes[f]) == len(t.axes[f]):
            pairs = zip(s.axes[f], t.axes[f], strict=True)
            if all((p := s.expanded(*a)) is not None and p == t.expanded(*b) for a, b in pairs):
                out.append(f)
    return out


def _bare(v: _View, field: str) -> set[str]:
    return {n for n, _ in v.axes.get(field, ()) if n is not None and not v.is_derived(n)}


def _inputs(v: _View, tags: Sequence[str]) -> set[str]:
    """The fixed and free dims that some derived dim or tag ``equals`` needs bound to be checked."""
    out = {n for d in v.reach if v.is_derived(d) for n in v.base_names(d)}
    for t in tags:
        if (e := v.plan.tags[t].equals) is not None:
            out.update(m for n in e.names() for m in v.base_names(n))
    return out


def _flat_risk(s: _View, t: _View, fields: Sequence[str], tags: Sequence[str], sure: list[str]) -> str | None:
    # A fixed or free dim bound under one schema only matters where something is computed
    # from it: elsewhere binding it only adds its own range check to what the fields say.
    inputs = _inputs(s, tags) | _inputs(t, tags)
    start = []
    for v in (s, t):
        fixed = {n for n in v.reach if n in v.plan.dim_plan.fixed}
        start.append(inputs & fixed.union(*(_bare(v, f) for f in sure)))
    if start[0] != start[1]:
        diff = sorted(start[0] ^ start[1])[0]
        return f"dim {diff} is bound directly (fixed, or by a required field) under one schema only"
    bound = start[0]
    for f in fields:
        if (_bare(s, f) ^ _bare(t, f)) & inputs - bound:
            diff = sorted((_bare(s, f) ^ _bare(t, f)) & inputs - bound)[0]
            return f"field {f} binds dim {diff} under one schema only, and no required field binds it"
    for v in (s, t):
        for f, axes in v.axes.items():
            for n, _ in axes:
                if n is not None and v.is_derived(n) and not v.base_names(n) <= bound:
                    return f"{_label(v, n)} (field {f}) may have to be solved for a dim no required field binds"
    for name in tags:
        es, et = s.plan.tags[name].equals, t.plan.tags[name].equals
        if es is not None and et is not None:
            ns = frozenset().union(*(s.base_names(n) for n in es.names()))
            nt = frozenset().union(*(t.base_names(n) for n in et.names()))
            if ns != nt:
                return f"tag {name} ({es} vs {et}) is checked only when different dims are bound"
    return None
