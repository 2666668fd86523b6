"""The set comparisons behind schema compatibility: sizes, values, kinds, dim expressions, dim binding.

Each rule answers one question exactly, for what validation (``depth="values"``) really
accepts: "is every X that ``a`` allows also allowed by ``b``?". The answer is a
*witness* — something ``a`` allows and ``b`` refuses — or ``None`` when there is none.
`trajschema.evolution.changes` turns the answers into `Change` records.

* sizes: a fixed or free dim allows an arithmetic progression of sizes;
* values: a field's ``values``/``min``/``max``/``finite`` over the values its kind or one
  dtype can hold: the value engine's `ValueSet`, whose difference gives the witness;
* kinds: which kinds accept every value of another (``int`` values are ``float`` values);
* dim expressions: a canonical polynomial over ``+ - *`` (``prompt + response`` equals
  ``response + prompt``), with derived dims expanded;
* binding: whether validation binds a sample's dims under one schema as it did under the
  other (`binding_risk`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trajschema.check import Plan
from trajschema.core import (
    MAX_SIZE,
    DerivedDim,
    Domain,
    Expr,
    FixedDim,
    FreeDim,
    Poly,
    ValueSet,
    depends_on,
    derived_order,
    dim_spans,
)

__all__ = [
    "Poly",
    "ValueSet",
    "axis_key",
    "axis_poly",
    "binding_risk",
    "constant_of",
    "dim_span",
    "direct_key",
    "expansions",
    "kind_within",
    "kind_witness",
    "poly",
    "poly_difference",
    "reachable",
    "size_witness",
    "value_set",
    "value_witness",
]

# -- dim sizes ---------------------------------------------------------------------------


def _progression(d: FixedDim | FreeDim) -> tuple[int, int, int | None] | None:
    """``(first, step, last)`` of the sizes ``d`` allows (``last`` ``None``: no end); ``None`` if none."""
    sizes = d.size_range()
    return None if sizes is None else (sizes[0], d.step, sizes[1])


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


def poly_difference(a: Poly | None, b: Poly | None) -> Poly | None:
    """``b - a`` as a canonical polynomial; ``None`` when either is ``None`` (too large to expand)."""
    if a is None or b is None:
        return None
    out = dict(b)
    for m, c in a:
        out[m] = out.get(m, 0) - c
    return tuple(sorted((m, c) for m, c in out.items() if c))


def constant_of(p: Poly) -> int | None:
    """The value of a polynomial without names (``()`` is 0), ``None`` when it names a dim."""
    if any(m for m, _ in p):
        return None
    return sum(c for _, c in p)


def dim_span(dims: Mapping[str, Any]) -> dict[str, tuple[float, float]]:
    """``{dim: (lo, hi)}``: the sizes every dim allows, a free dim without ``max`` up to the largest size (2**63-1).

    A derived dim's box comes from its expression's (`Expr.bounds`): never narrower than
    the sizes it can take, so a rule reading "this bound never passes X" off it is sound.
    """

    def clipped(d: DerivedDim, spans: Mapping[str, tuple[float, float]]) -> tuple[float, float]:
        lo, hi = d.expr.bounds(spans)
        return (max(lo, 0), min(hi, MAX_SIZE))

    return dim_spans(dims, clipped, top=MAX_SIZE)


def poly(e: Expr, subst: Mapping[str, Poly | None] | None = None) -> Poly | None:
    """``e`` as a canonical polynomial, names in ``subst`` replaced; ``None`` when too large to expand."""
    return e.poly(subst)


def direct_key(e: Expr) -> tuple[Poly | None, frozenset[str]]:
    """What validation's binding sees of ``e``: its polynomial and the names it mentions.

    ``a - a + b`` has the polynomial of ``b`` but two names to bind, so the names count too.
    """
    return poly(e), frozenset(e.names())


def expansions(dims: Mapping[str, Any]) -> dict[str, Poly | None]:
    """Every derived dim of ``dims`` as a polynomial over fixed and free dims (``None``: too large)."""
    out: dict[str, Poly | None] = {}
    for d in derived_order(dims):  # each after the derived dims it uses, so ``out`` holds them
        out[d.name] = d.expr.poly(out)
    return out


def reachable(dims: Mapping[str, Any], roots: Iterable[str]) -> set[str]:
    """``roots`` and every dim their derived dims depend on, transitively."""
    return set(depends_on(dims, roots))


# -- kinds -------------------------------------------------------------------------------

# A value of each kind, and values of no kind, to show what one kind accepts and another refuses.
_KIND_EXAMPLES: tuple[Any, ...] = (1, 0.5, True, "x", {}, [1])


def kind_within(a: str | None, b: str | None) -> bool:
    """Whether every value of kind ``a`` is of kind ``b`` (``None``, an unchecked tag, is ``any``).

    ``int`` values are ``float`` values (`trajschema.core.kinds.kind_ok` accepts any
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


def value_set(values: Sequence[Any] | None, lo: Any, hi: Any, finite: bool, domain: Domain) -> ValueSet:
    """What checks ``values``/``lo``/``hi``/``finite`` let through among the values of ``domain``.

    ``domain`` is a torch dtype (a tensor's elements) or a kind (``int``: integers, ``float``:
    reals, ±inf and NaN, ``bool``: 0 and 1, ``any``: reals and non-numbers, ``str`` and
    ``mapping``: non-numbers only): the value engine's own set (`ValueSet.passing`), so
    compatibility rounds a bound onto a dtype exactly as validation does. A value that is
    not a number never equals a listed number (an object with an unusual ``__eq__`` is
    out of scope).
    """
    return ValueSet.passing(values, lo, hi, finite, domain)


def value_witness(a: ValueSet, b: ValueSet) -> Any:
    """A value of ``a`` that ``b`` refuses, or ``None`` when ``b`` holds all of ``a``.

    Both sets must be built over the same domain. The witness is taken from ``a - b``: the
    string ``"x"`` standing for any value that is not a number, else NaN, else its
    simplest number (the one nearest 0, finite where one is; ``±inf`` otherwise).
    """
    d = a - b
    if d.others:
        return "x"
    if d.nan:
        return math.nan
    return d.example()


# -- binding --------------------------------------------------------------------------------


def axis_key(plan: Plan, name: str | None, lit: int) -> Any:
    """What one axis of a tensor field observes, as binding sees it (see `binding_risk`).

    An integer literal, a declared dim (by name), or an inline expression (by its
    `direct_key`, so ``p+r`` and ``r + p`` are the same).
    """
    if name is None:
        return ("literal", lit)
    if name in plan.hidden:
        return ("inline", direct_key(plan.dim_plan.dims[name].expr))
    return ("dim", name)


def axis_poly(plan: Plan, exp: Mapping[str, Poly | None], name: str | None, lit: int) -> Poly | None:
    """The size of one axis as a polynomial over fixed and free dims (``exp``: from `expansions`)."""
    if name is None:
        return (((), lit),) if lit else ()  # the constant's canonical polynomial
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

    Binding (`trajschema.check.binding`) works step by step: a derived dim is computed
    when its inputs are bound, *solved* for its one unbound input when a field observes
    it (and a derived input solved so is held to its own definition in turn), and left
    alone otherwise; so two schemas whose shapes say the same sizes can still accept
    different samples (a majority vote, or a solve for one unbound input, can land on
    another dim when the expressions are grouped otherwise). Binding is provably the same when
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
