"""Schema compatibility: what changed between two schemas, and whether the change breaks samples.

``old.compatibility(new, mode)`` lists every difference that matters to validation, each
as a [`Change`][trajschema.Change] saying whether samples (with their tag dicts) that one schema
accepts can fail under the other. The rules are set comparisons, made exactly by
`trajschema.evolution.rules`; see ``docs/compatibility.md`` for the rule table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from trajschema.check import Plan
from trajschema.core import (
    DerivedDim,
    DType,
    Expr,
    Field,
    FixedDim,
    FreeDim,
    Tag,
    describe_value,
    dtype_name,
    integer_capacity,
    number_label,
    shown_value,
)
from trajschema.evolution.rules import (
    axis_key,
    axis_poly,
    binding_risk,
    constant_of,
    dim_span,
    direct_key,
    expansions,
    kind_within,
    kind_witness,
    poly,
    poly_difference,
    reachable,
    size_witness,
    value_set,
    value_witness,
)

__all__ = ["CHANGE_KINDS", "COMPAT_MODES", "Change", "compatibility"]

#: What a [`Change`][trajschema.Change] can be about.
CHANGE_KINDS = (
    "field_added",
    "field_removed",
    "required_changed",
    "kind_changed",
    "dtype_narrowed",
    "dtype_widened",
    "dtype_changed",
    "shape_changed",
    "dim_added",
    "dim_removed",
    "dim_changed",
    "dim_bounds_changed",
    "dim_source_changed",
    "values_changed",
    "pad_changed",
    "tag_added",
    "tag_removed",
    "tag_changed",
    "extra_changed",
    "padding_default_changed",
)

#: ``backward``: samples valid under the old schema stay valid under the new one;
#: ``forward``: samples valid under the new one are valid under the old one; ``full``: both.
COMPAT_MODES = ("backward", "forward", "full")


@dataclasses.dataclass(frozen=True)
class Change:
    """One difference between two schemas and whether it breaks samples.

    Attributes:
        path: where, as a key path of the schema file: ``fields.loss_mask.dtype``,
            ``dims.rope_rows``, ``tags.is_padding``, ``extra``, ``padding.prompt``.
        kind: one of `CHANGE_KINDS`.
        breaking: whether it breaks the mode asked for (``full``: either direction).
        message: one line: old -> new, and why it breaks or not.
        backward_breaking: a sample valid under the old schema can fail under the new one
            (or compatibility cannot be proved).
        forward_breaking: a sample valid under the new schema can fail under the old one.
        what: the change alone, without the path's subject: ``int64 -> int32`` for
            ``fields.input_ids.dtype`` (``message`` is ``input_ids: dtype int64 -> int32; <why>``).
        why: why it breaks, or why it does not (the rest of ``message``).
    """

    path: str
    kind: str
    breaking: bool
    message: str
    backward_breaking: bool = False
    forward_breaking: bool = False
    what: str = ""
    why: str = ""

    def __post_init__(self) -> None:
        if self.kind not in CHANGE_KINDS:
            raise ValueError(f"Change kind must be one of {', '.join(CHANGE_KINDS)}, found {self.kind!r}")

    def __str__(self) -> str:
        return f"{'BREAKING' if self.breaking else 'ok'} {self.kind} {self.path}: {self.message}"


@dataclasses.dataclass
class _Diff:
    """A change being worked out: ``why_b`` / ``why_f`` say how it breaks backward / forward (``None``: it does not).

    ``bind_b`` / ``bind_f`` mark changes to what fields observe, whose effect on dim
    binding `binding_risk` decides for the whole schema.
    """

    path: str
    kind: str
    change: str
    why_b: str | None = None
    why_f: str | None = None
    note: str = ""
    bind_b: bool = False
    bind_f: bool = False

    def message(self, mode: str = "full") -> str:
        """The change and why it breaks (`reason`)."""
        return f"{self.change}; {self.reason(mode)}"

    def what(self) -> str:
        """The change without its subject: ``fields.x.dtype``'s ``x: dtype a -> b`` is ``a -> b``."""
        _, sep, rest = self.change.partition(": ")
        if not sep:
            return self.change
        last = self.path.rpartition(".")[2]
        head, blank, tail = rest.partition(" ")
        return tail if blank and head == last else rest

    def reason(self, mode: str = "full") -> str:
        """Why the change breaks; a break of the other direction only is said to be one.

        In ``backward`` mode a change that only breaks forward is ``ok``: its message says
        so first ("compatible backward; breaks forward only: ..."), so that an ``ok`` line
        never reads as a failure.
        """
        b, f = self.why_b, self.why_f
        if b and f:
            tail = f"samples valid under one can fail under the other: {b}" + ("" if f == b else f"; {f}")
        elif b:
            tail = f"old samples can fail under new: {b}"
            tail = f"compatible forward; breaks backward only: {tail}" if mode == "forward" else tail
        elif f:
            tail = f"new samples can fail under old: {f}"
            tail = f"compatible backward; breaks forward only: {tail}" if mode == "backward" else tail
        else:
            tail = self.note or "samples valid under either stay valid under the other"
        return tail


def compatibility(old: Plan, new: Plan, mode: str = "backward") -> list[Change]:
    """Every difference between the schemas of plans ``old`` and ``new`` that matters to validation.

    Each is a [`Change`][trajschema.Change] record.

    ``backward``: every (sample, tag dict) valid under ``old`` stays valid under ``new``;
    ``forward``: every one valid under ``new`` is valid under ``old``; ``full``: both.
    Validity is [`violations`][trajschema.Schema.violations] at ``depth="values"`` (the
    strictest), without ``dims=``. A change is breaking when a sample valid under one
    side can fail under the other, or when compatibility cannot be proved (the message
    says "cannot prove"). Each change also says both directions (``backward_breaking``,
    ``forward_breaking``). Changes of ``description`` and ``architectures`` are not
    reported; identical schemas give ``[]``.

    Order: dims, fields (in the declaration order of ``old``, then those only ``new``
    declares; per field: presence, kind, dtype, shape, values, pad), tags, extra, padding.

    Examples:
        >>> import trajschema as ts
        >>> old = ts.load_schema("vlm_mrope")
        >>> new = ts.schema_from_dict({"name": "mrope3", "extends": ["vlm_mrope"], "dims": {"rope_rows": 3}})
        >>> [str(c) for c in old.compatibility(new)]  # doctest: +ELLIPSIS
        ['BREAKING dim_bounds_changed dims.rope_rows: rope_rows: 4 -> 3; samples valid under one ...']

    Raises:
        ValueError: ``mode`` is not one of `COMPAT_MODES`.
        TypeError: ``old`` or ``new`` is not a `Plan` (`Schema.compatibility` says which
            was not a [`Schema`][trajschema.Schema]).
    """
    if not isinstance(mode, str) or mode not in COMPAT_MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, COMPAT_MODES))}, found {shown_value(mode)}")
    for side, s in (("old", old), ("new", new)):
        if not isinstance(s, Plan):
            raise TypeError(f"compatibility: {side} must be a schema's plan, found {describe_value(s)}")
    c = _Ctx(old, new)
    dims = list(_dims(c))
    rest = [*_fields(c), *_tags(c), *_extra(c), *_padding(c)]
    _bind(c, dims, rest)
    return [_to_change(d, mode) for d in (*dims, *rest)]


def _to_change(d: _Diff, mode: str) -> Change:
    b, f = d.why_b is not None, d.why_f is not None
    breaking = b if mode == "backward" else f if mode == "forward" else b or f
    # An expression may be written across lines in YAML: every text is made one line.
    one = " ".join  # one line whatever the schema says
    what, why = one(d.what().split()), one(d.reason(mode).split())
    return Change(d.path, d.kind, breaking, one(d.message(mode).split()), b, f, what, why)


class _Ctx:
    """Both schemas, with what the rules need of each: checking plans, expanded dims, dims in use."""

    def __init__(self, old: Plan, new: Plan) -> None:
        self.old, self.new = old, new
        self.plan_old, self.plan_new = old, new
        self.exp_old = expansions(self.plan_old.dim_plan.dims)
        self.exp_new = expansions(self.plan_new.dim_plan.dims)
        self.used_old, self.used_new = _used(self.plan_old), _used(self.plan_new)
        self.axes_old = {f.name: axes for f, axes in self.plan_old.tensors}
        self.axes_new = {f.name: axes for f, axes in self.plan_new.tensors}
        self.const_old, self.const_new = _constants(self.plan_old), _constants(self.plan_new)
        self.span_old = dim_span(self.plan_old.dim_plan.dims)
        self.span_new = dim_span(self.plan_new.dim_plan.dims)


def _constants(plan: Plan) -> dict[str, int]:
    """The sizes a schema decides alone (fixed dims, derived dims over them): its bounds in dims fold over these."""
    out: dict[str, int] = {n: d.size for n, d in plan.dim_plan.dims.items() if isinstance(d, FixedDim)}
    for d in plan.dim_plan.derived:
        size = d.expr.evaluate(out)
        if isinstance(size, int):
            out[d.name] = size
    return out


def _used(plan: Plan) -> set[str]:
    """Dims some field's shape or some tag's ``equals`` depends on: only these are ever checked."""
    roots = [n for _, axes in plan.tensors for n, _ in axes if n is not None]
    roots += [n for t in plan.tags.values() if t.equals is not None for n in t.equals.names()]
    return reachable(plan.dim_plan.dims, roots)


def _bind(c: _Ctx, dims: list[_Diff], rest: list[_Diff]) -> None:
    """Mark changes to what fields observe as breaking where binding the dims may differ."""
    everything = dims + rest
    order = _Diff("dims", "dim_changed", "dims: the same sizes, bound in another order (of dims or fields)")
    for backward, src, tgt in ((True, c.plan_old, c.plan_new), (False, c.plan_new, c.plan_old)):
        risk = binding_risk(src, tgt)
        if risk is None:
            continue
        why = f"cannot prove: validation may bind dims differently ({risk})"
        hit = [d for d in everything if (d.bind_b if backward else d.bind_f)] or [order]
        for d in hit:
            if backward:
                d.why_b = d.why_b or why
            else:
                d.why_f = d.why_f or why
    if order.why_b or order.why_f:  # nothing else changed what fields observe: the order did
        dims.append(order)


# -- dims ---------------------------------------------------------------------------------


def _dim_text(d: Any) -> str:
    if isinstance(d, FixedDim):
        return str(d.size)
    if isinstance(d, DerivedDim):
        return str(d.expr)
    parts = [f"min: {d.min}"] if d.min else []
    parts += [f"max: {d.max}"] if d.max is not None else []
    parts += [f"multiple_of: {d.multiple_of}"] if d.multiple_of is not None else []
    return "{" + ", ".join(parts) + "}"


def _sizes_only(d: Any) -> Any:
    """``d`` without what decides no size: its description, and where a free dim's size is read (``from_config``)."""
    return dataclasses.replace(d, description="", **({"from_config": ()} if isinstance(d, FreeDim) else {}))


def _same_dim(a: Any, b: Any) -> bool:
    return type(a) is type(b) and _sizes_only(a) == _sizes_only(b)


def _from_config(d: Any) -> tuple[Expr, ...]:
    return d.from_config if isinstance(d, FreeDim) else ()


def _source_change(n: str, a: FreeDim, b: FreeDim) -> _Diff:
    def shown(keys: tuple[Expr, ...]) -> str:
        return "[" + ", ".join(map(str, keys)) + "]" if keys else "none"

    return _Diff(
        f"dims.{n}.from_config",
        "dim_source_changed",
        f"{n}: from_config {shown(a.from_config)} -> {shown(b.from_config)}",
        note="from_config says which model-config keys schema_for_config reads the size from, "
        "not which sizes validation allows",
    )


def _dims(c: _Ctx) -> Iterator[_Diff]:
    old, new = c.old.dims, c.new.dims
    alone = "a dim alone accepts or refuses nothing; the fields and tags using it carry any break"
    for n in [*old, *(n for n in new if n not in old)]:
        a, b = old.get(n), new.get(n)
        if a is None:
            yield _Diff(f"dims.{n}", "dim_added", f"{n}: added ({_dim_text(b)})", note=alone)
        elif b is None:
            yield _Diff(f"dims.{n}", "dim_removed", f"{n}: removed (was {_dim_text(a)})", note=alone)
        else:
            if not _same_dim(a, b) and (d := _dim_pair(c, n, a, b)) is not None:
                yield d
            if isinstance(a, FreeDim) and isinstance(b, FreeDim) and _from_config(a) != _from_config(b):
                yield _source_change(n, a, b)


def _dim_pair(c: _Ctx, n: str, a: Any, b: Any) -> _Diff | None:
    d = _Diff(f"dims.{n}", "dim_bounds_changed", f"{n}: {_dim_text(a)} -> {_dim_text(b)}")
    unused = f"no field or tag of {{}} uses {n}, so no size of it is checked there"
    if isinstance(a, DerivedDim) or isinstance(b, DerivedDim):
        d.kind = "dim_changed"
        d.bind_b = d.bind_f = True  # derived dims are computed or solved while binding
        if isinstance(a, DerivedDim) and isinstance(b, DerivedDim):
            if direct_key(a.expr) == direct_key(b.expr):
                return None  # the same expression, spelled another way
            if (p := c.exp_old[n]) is not None and p == c.exp_new[n]:
                d.note = "the same sizes once derived dims are expanded"
                return d
        why = "cannot prove: the sizes it stands for differ"
        d.why_b = why if n in c.used_new else None
        d.why_f = why if n in c.used_old else None
        d.note = unused.format("either schema")
        return d
    wb = size_witness(a, b) if n in c.used_new else None
    wf = size_witness(b, a) if n in c.used_old else None
    d.why_b = None if wb is None else f"old allows {n}={wb}, new does not"
    d.why_f = None if wf is None else f"new allows {n}={wf}, old does not"
    same = size_witness(a, b) is None and size_witness(b, a) is None
    d.note = "the same sizes" if same else unused.format("the schema that would refuse a size")
    if type(a) is not type(b):  # a fixed dim is bound without any field; a free one only by fields
        d.bind_b = n in c.used_new
        d.bind_f = n in c.used_old
    return d


# -- fields ---------------------------------------------------------------------------------


def _field_text(f: Field) -> str:
    return f.describe() + ("" if f.required else " (optional)")


def _fields(c: _Ctx) -> Iterator[_Diff]:
    old, new = c.old.fields, c.new.fields
    for n in [*old, *(n for n in new if n not in old)]:
        a, b = old.get(n), new.get(n)
        if a is None:
            assert b is not None
            yield _field_added(c, b)
        elif b is None:
            yield _field_removed(c, a)
        else:
            yield from _field_pair(c, a, b)


def _field_added(c: _Ctx, f: Field) -> _Diff:
    d = _Diff(f"fields.{f.name}", "field_added", f"{f.name}: added ({_field_text(f)})", bind_f=f.is_tensor)
    if f.required:
        d.why_b = "old samples may lack it, and new requires it"
    if c.old.extra == "forbid":
        d.why_f = "new samples may carry it, and old forbids undeclared fields (extra: forbid)"
    if not f.required and c.old.extra == "allow":
        d.note = f"new checks it only when present (assumes old samples carry no undeclared field {f.name!r})"
    return d


def _field_removed(c: _Ctx, f: Field) -> _Diff:
    d = _Diff(f"fields.{f.name}", "field_removed", f"{f.name}: removed (was {_field_text(f)})", bind_b=f.is_tensor)
    if c.new.extra == "forbid":
        d.why_b = "old samples may carry it, and new forbids undeclared fields (extra: forbid)"
    if f.required:
        d.why_f = "new samples may lack it, and old requires it"
    if not f.required and c.new.extra == "allow":
        d.note = f"old checks it only when present (assumes new samples carry no undeclared field {f.name!r})"
    return d


def _field_pair(c: _Ctx, a: Field, b: Field) -> Iterator[_Diff]:
    path = f"fields.{a.name}"
    if a.required != b.required:
        d = _Diff(f"{path}.required", "required_changed", f"{a.name}: required {a.required} -> {b.required}")
        if b.required:
            d.why_b = "old samples may lack it"
        else:
            d.why_f = "new samples may lack it"
        yield d
    if a.kind != b.kind:
        yield _kind_change(c, a, b)
    else:
        if a.is_tensor:
            yield from _dtype_change(a, b)
            yield from _shape_change(c, a, b)
        doms = [DType(d) for d in a.dtype_names if d in b.dtype_names] if a.is_tensor else [a.kind]
        # With no dtype in common the dtype change breaks already, but a narrowing of the
        # values breaks on its own (revert the dtype and it still would): judge it in the
        # dtypes of the side whose samples are being kept, as if the dtype had not changed.
        back, fwd = (doms, doms) if doms else ([*map(DType, a.dtype_names)], [*map(DType, b.dtype_names)])
        fa, fb = a.bounded(c.const_old), b.bounded(c.const_new)  # bounds over pinned dims are numbers
        yield from _values_change(fa, fb, back, fwd)
        yield from _dim_bounds_change(c, (a, b), (fa, fb), doms)
        if a.is_tensor:
            yield from _distinct_change(c, fa, fb, (back, fwd))
    if repr(a.pad) != repr(b.pad) or a.pad != b.pad:
        note = "pad rules decide what padding samples hold, not what validation accepts"
        yield _Diff(f"{path}.pad", "pad_changed", f"{a.name}: pad {a.pad} -> {b.pad}", note=note)


def _kind_why(src: Field, tgt: Field, s: str, t: str) -> str | None:
    """How a value of field ``src`` (schema ``s``) can fail field ``tgt`` (schema ``t``) of another kind."""
    if src.kind == "tensor":
        if tgt.kind != "any":
            return f"{s} samples hold a tensor there, {t} wants {tgt.kind}"
        return None if tgt.values is None else f"cannot prove: {t} checks the values of tensors {s} holds there"
    if tgt.kind == "tensor":
        return f"{s} samples hold {src.kind} values there, {t} wants a tensor"
    if not kind_within(src.kind, tgt.kind):
        return f"{s} allows {kind_witness(src.kind, tgt.kind)!r}, {t} wants {tgt.kind}"
    w = value_witness(_vset(src, src.kind), _vset(tgt, src.kind))
    return None if w is None else f"{s} allows {_show(w)}, {t} does not (at depth='values')"


def _kind_change(c: _Ctx, a: Field, b: Field) -> _Diff:
    tensor = a.is_tensor or b.is_tensor  # what the field observes of the dims changes
    fa, fb = a.bounded(c.const_old), b.bounded(c.const_new)
    return _Diff(
        f"fields.{a.name}.kind",
        "kind_changed",
        f"{a.name}: {a.describe()} -> {b.describe()}",
        why_b=_kind_why(fa, fb, "old", "new") or _new_dim_bound(fa, fb, "old", "new"),
        why_f=_kind_why(fb, fa, "new", "old") or _new_dim_bound(fb, fa, "new", "old"),
        bind_b=tensor,
        bind_f=tensor,
    )


def _new_dim_bound(src: Field, tgt: Field, s: str, t: str) -> str | None:
    """For a kind change: ``tgt`` checks a bound in dims that ``src`` does not (kind rules compare literals only)."""
    for side, e in (("min", tgt.min_expr), ("max", tgt.max_expr)):
        mine = getattr(src, f"{side}_expr")
        if e is not None and (mine is None or direct_key(mine) != direct_key(e)):
            return f"cannot prove: {t} checks {side} {e}, {s} does not"
    return None


def _dtype_change(a: Field, b: Field) -> Iterator[_Diff]:
    old, new = a.dtype_names, b.dtype_names
    if old == new:
        return
    change = f"{a.name}: dtype {'|'.join(old)} -> {'|'.join(new)}"
    d = _Diff(f"fields.{a.name}.dtype", "dtype_changed", change)
    only_old = [x for x in old if x not in new]
    only_new = [x for x in new if x not in old]
    if only_old:
        d.why_b = f"old allows {', '.join(only_old)}, new does not"
    if only_new:
        d.why_f = f"new allows {', '.join(only_new)}, old does not"
    if not only_old and not only_new:
        d.note = "the same dtypes in another order (padding uses the first listed)"
    elif not only_old:
        d.kind = "dtype_widened"
    elif not only_new:
        d.kind = "dtype_narrowed"
    yield d


def _shape_change(c: _Ctx, a: Field, b: Field) -> Iterator[_Diff]:
    ax_a, ax_b = c.axes_old[a.name], c.axes_new[b.name]
    shown = f"[{', '.join(map(str, a.shape or ()))}] -> [{', '.join(map(str, b.shape or ()))}]"
    d = _Diff(f"fields.{a.name}.shape", "shape_changed", f"{a.name}: shape {shown}")
    if len(ax_a) != len(ax_b):
        d.why_b = d.why_f = f"{len(ax_a)} axes -> {len(ax_b)} axes"
        yield d
        return
    same_sizes = True
    for (na, la), (nb, lb) in zip(ax_a, ax_b, strict=True):
        if axis_key(c.plan_old, na, la) == axis_key(c.plan_new, nb, lb):
            continue
        d.bind_b = d.bind_f = True
        pa = axis_poly(c.plan_old, c.exp_old, na, la)
        same_sizes = same_sizes and pa is not None and pa == axis_poly(c.plan_new, c.exp_new, nb, lb)
    if not same_sizes:
        d.why_b = d.why_f = "cannot prove: an axis stands for other sizes once derived dims are expanded"
    elif d.bind_b:
        d.note = "the same sizes once derived dims are expanded"
    if d.bind_b:
        yield d


# -- values ---------------------------------------------------------------------------------


def _vset(f: Field, domain: Any) -> Any:
    return value_set(f.values, f.min, f.max, f.finite, domain)


def _checks_text(f: Field) -> str:
    parts = []
    if f.values is not None:
        shown = [number_label(v) for v in f.values[:8]]
        more = f", ... ({len(f.values)} values)" if len(f.values) > 8 else ""
        parts.append(f"values [{', '.join(shown)}{more}]")
    parts += [f"min {number_label(f.min)}"] if f.min is not None else []
    parts += [f"max {number_label(f.max)}"] if f.max is not None else []
    parts += ["finite"] if f.finite else []
    return ", ".join(parts) or "no value checks"


def _show(w: Any) -> str:
    return "a non-number such as 'x'" if w == "x" else number_label(w)


def _value_why(src: Field, tgt: Field, domains: Sequence[Any], s: str, t: str) -> str | None:
    for dom in domains:
        w = value_witness(_vset(src, dom), _vset(tgt, dom))
        if w is not None:
            where = f" in {dtype_name(dom)}" if not isinstance(dom, str) else ""
            return f"{s} allows {_show(w)}{where}, {t} does not"
    return None


def _values_change(a: Field, b: Field, back: Sequence[Any], fwd: Sequence[Any]) -> Iterator[_Diff]:
    if (a.values, a.min, a.max, a.finite) == (b.values, b.min, b.max, b.finite):
        return
    d = _Diff(f"fields.{a.name}.values", "values_changed", f"{a.name}: {_checks_text(a)} -> {_checks_text(b)}")
    d.why_b = _value_why(a, b, back, "old", "new")
    d.why_f = _value_why(b, a, fwd, "new", "old")
    if d.why_b or d.why_f:
        d.change += " (value checks run at depth='values' only)"
    else:
        d.note = "the same values pass"
    yield d


# -- bounds written in dims, and distinct ----------------------------------------------------


def _unbound(c: _Ctx, *exprs: Expr | None) -> list[str]:
    """The dims of ``exprs`` that no field or tag binds: a bound in them is checked only once they are given.

    Such a bound (``max: experts - 1``, ``experts`` in no shape) is compared as if its
    dims were known, as they are under ``dims=`` or once pinned: a verdict of "fine" must
    hold for those validations too.
    """
    return sorted({n for e in exprs if e is not None for n in e.names()} - c.used_old - c.used_new)


def _bound_text(literal: Any, e: Expr | None) -> str:
    parts = [number_label(literal)] if literal is not None else []
    parts += [str(e)] if e is not None else []
    return " and ".join(parts) or "none"


def _dim_bounds_change(
    c: _Ctx, declared: tuple[Field, Field], folded: tuple[Field, Field], doms: Sequence[Any]
) -> Iterator[_Diff]:
    """Changes of bounds in dims, per side: the values they let through (``folded``: over the schema's fixed
    dims already numbers) and the dtypes they hold to (``declared``: a fixed dim's bound is held too)."""
    (a, b), (fa, fb) = declared, folded
    for side in ("min", "max"):
        ea, eb = getattr(fa, f"{side}_expr"), getattr(fb, f"{side}_expr")
        pa = None if ea is None else poly(ea, c.exp_old)
        pb = None if eb is None else poly(eb, c.exp_new)
        values_same = (ea is None and eb is None) or (pa is not None and pa == pb)
        if values_same and _same_side(c, a, b, side):
            continue
        why_b = _overflow_why(b, side, c.span_new, doms, "new") if not _same_side(c, a, b, side) else None
        why_f = _overflow_why(a, side, c.span_old, doms, "old") if not _same_side(c, a, b, side) else None
        if values_same and not (why_b or why_f):
            continue
        da, db = getattr(a, f"{side}_expr"), getattr(b, f"{side}_expr")
        change = f"{a.name}: {side} {_bound_text(getattr(a, side), da)} -> {_bound_text(getattr(b, side), db)}"
        d = _Diff(f"fields.{a.name}.{side}", "values_changed", change)
        if not values_same:
            d.why_b, d.why_f = _dim_bound_whys(c, side, fa, fb)
        d.why_b, d.why_f = d.why_b or why_b, d.why_f or why_f
        unbound = _unbound(c, da, db)
        if unbound and (d.why_b or d.why_f):
            d.change += f" (checked once {', '.join(unbound)} {'is' if len(unbound) == 1 else 'are'} known)"
        if not (d.why_b or d.why_f):
            d.note = "the same values pass"
        yield d


def _same_side(c: _Ctx, a: Field, b: Field, side: str) -> bool:
    """Whether ``a`` and ``b`` declare one bound on ``side``: the same literal and the same bound in dims."""
    ea, eb = getattr(a, f"{side}_expr"), getattr(b, f"{side}_expr")
    same_expr = (ea is None and eb is None) or (
        ea is not None and eb is not None and (p := poly(ea, c.exp_old)) is not None and p == poly(eb, c.exp_new)
    )
    return same_expr and repr(getattr(a, side)) == repr(getattr(b, side))


def _dim_bound_whys(c: _Ctx, side: str, fa: Field, fb: Field) -> tuple[str | None, str | None]:
    ea, eb = getattr(fa, f"{side}_expr"), getattr(fb, f"{side}_expr")
    if ea is not None and eb is not None:
        return _compare_dim_bounds(side, ea, eb, poly_difference(poly(ea, c.exp_old), poly(eb, c.exp_new)))
    if eb is not None:
        return _added_bound(side, eb, getattr(fa, side), c.span_new, "old", "new"), None
    assert ea is not None
    return None, _added_bound(side, ea, getattr(fb, side), c.span_old, "new", "old")


def _overflow_why(tgt: Field, side: str, span: Any, doms: Sequence[Any], t: str) -> str | None:
    """Why ``t`` may refuse a dtype outright: validation holds an integer dtype to a bound in dims.

    A sample whose ``uint8`` ids may reach ``max experts - 1`` with ``experts = 300`` fails
    whatever its values (`trajschema.check.dtype_overflow`); ``t`` does so when its bound can
    pass the dtype's range over the sizes its dims allow, and its literal bound on that side
    does not stop short of it first.
    """
    e, literal = getattr(tgt, f"{side}_expr"), getattr(tgt, side)
    if e is None:
        return None
    lo, hi = e.bounds(span)
    for dom in doms:
        cap = integer_capacity(dom) if not isinstance(dom, str) else None
        if cap is None:
            continue
        if side == "max" and hi > cap[1] and not (literal is not None and literal <= cap[1]):
            return f"cannot prove: {t} holds {dtype_name(dom)} to max {e}, which may pass {cap[1]}"
        if side == "min" and lo < cap[0] and not (literal is not None and literal >= cap[0]):
            return f"cannot prove: {t} holds {dtype_name(dom)} to min {e}, which may go below {cap[0]}"
    return None


def _compare_dim_bounds(side: str, ea: Expr, eb: Expr, diff: Any) -> tuple[str | None, str | None]:
    """``(why_b, why_f)`` for two bounds in dims on one side, compared by their canonical polynomials."""
    k = None if diff is None else constant_of(diff)
    if k is None:
        why = f"cannot prove: {side} {ea} and {side} {eb} differ by an amount that depends on the dims"
        return why, why
    up = side == "max"
    if (k > 0) == up:  # new lets more through
        return None, f"new allows values {'up to' if up else 'down to'} {eb}, old {'stops' if up else 'starts'} at {ea}"
    return f"old allows values {'up to' if up else 'down to'} {ea}, new {'stops' if up else 'starts'} at {eb}", None


def _added_bound(side: str, e: Expr, literal: Any, span: Any, s: str, t: str) -> str | None:
    """Why ``s`` samples can fail bound ``e`` that only ``t`` checks (``literal``: ``s``'s own bound on that side)."""
    up = side == "max"
    lo, hi = e.bounds(span)
    if literal is not None and ((up and lo >= literal) or (not up and hi <= literal)):
        return None  # never tighter than the literal s already checks
    if literal is not None:
        return (
            f"cannot prove: {t} checks {side} {e}, {s} {side} {number_label(literal)}; a literal bound and a bound "
            "in dims cannot be compared exactly"
        )
    return f"{s} allows values {'above' if up else 'below'} {e}, which {t} refuses"


def _distinct_change(c: _Ctx, a: Field, b: Field, doms: tuple[Sequence[Any], Sequence[Any]]) -> Iterator[_Diff]:
    """``distinct`` turned on or off; ``doms``: the dtypes to look for a repeat in, (backward, forward)."""
    if a.distinct == b.distinct:
        return
    change = f"{a.name}: distinct {str(a.distinct).lower()} -> {str(b.distinct).lower()}"
    d = _Diff(f"fields.{a.name}.distinct", "values_changed", change)
    if b.distinct:
        d.why_b = _repeat_why(a, c.span_old, doms[0], "old", "new")
    else:
        d.why_f = _repeat_why(b, c.span_new, doms[1], "new", "old")
    if d.why_b or d.why_f:
        d.change += " (value checks run at depth='values' only)"
    else:
        d.note = "no slice along the last axis holds two values (or no value passes), so none can repeat"
    yield d


def _repeat_why(src: Field, span: Any, doms: Sequence[Any], s: str, t: str) -> str | None:
    """A slice along the last axis that ``src`` allows and a ``distinct`` field refuses: ``[v, v]``."""
    if not src.shape or src.shape[-1].bounds(span)[1] < 2:
        return None
    for dom in doms:
        v = _vset(src, dom).example()
        if v is not None:
            pair = f"[{number_label(v)}, {number_label(v)}]"
            return f"{s} allows a value repeated along the last axis ({pair} in {dtype_name(dom)}), {t} does not"
    return None


# -- tags, extra, padding -----------------------------------------------------------------


def _tags(c: _Ctx) -> Iterator[_Diff]:
    old, new = c.old.tags, c.new.tags
    for n in [*old, *(n for n in new if n not in old)]:
        a, b = old.get(n), new.get(n)
        if a is None:
            note = f"new checks a tag only when present (assumes old tag dicts carry no undeclared {n!r})"
            yield _Diff(f"tags.{n}", "tag_added", f"{n}: added ({_tag_text(b)})", note=note)
        elif b is None:
            note = f"new does not check undeclared tags (assumes new tag dicts carry no undeclared {n!r})"
            yield _Diff(f"tags.{n}", "tag_removed", f"{n}: removed (was {_tag_text(a)})", note=note)
        elif (d := _tag_pair(c, a, b)) is not None:
            yield d


def _tag_text(t: Tag | None) -> str:
    assert t is not None
    parts = [f"kind: {t.kind}"] if t.kind else []
    parts += [f"equals: {t.equals}"] if t.equals is not None else []
    parts += [f"default: {t.default!r}"] if t.default is not None else []
    return "{" + ", ".join(parts) + "}"


def _tag_pair(c: _Ctx, a: Tag, b: Tag) -> _Diff | None:
    ka, kb = a.kind or "any", b.kind or "any"
    same_eq = (a.equals is None) == (b.equals is None) and (
        a.equals is None or b.equals is None or direct_key(a.equals) == direct_key(b.equals)
    )
    if ka == kb and same_eq and repr(a.default) == repr(b.default):
        return None
    d = _Diff(f"tags.{a.name}", "tag_changed", f"{a.name}: {_tag_text(a)} -> {_tag_text(b)}")
    why_b = [] if kind_within(ka, kb) else [f"old allows {kind_witness(ka, kb)!r}, new wants {kb}"]
    why_f = [] if kind_within(kb, ka) else [f"new allows {kind_witness(kb, ka)!r}, old wants {ka}"]
    if a.equals is None and b.equals is not None:
        why_b.append(f"new checks it against {b.equals}, old does not")
    elif b.equals is None and a.equals is not None:
        why_f.append(f"old checks it against {a.equals}, new does not")
    elif not same_eq and a.equals is not None and b.equals is not None:
        pa = poly(a.equals, c.exp_old)
        if pa is not None and pa == poly(b.equals, c.exp_new):
            d.bind_b = d.bind_f = True
            d.note = "the same sizes once derived dims are expanded"
        else:
            why = f"cannot prove: {a.equals} and {b.equals} stand for other sizes"
            why_b.append(why)
            why_f.append(why)
    d.why_b, d.why_f = "; ".join(why_b) or None, "; ".join(why_f) or None
    if ka == kb and same_eq:
        d.note = "validation does not check tag defaults"
    return d


def _extra(c: _Ctx) -> Iterator[_Diff]:
    a, b = c.old.extra, c.new.extra
    if a != b:
        d = _Diff("extra", "extra_changed", f"extra: {a} -> {b}")
        if b == "forbid":
            d.why_b = "old samples may carry undeclared fields, which new forbids"
        else:
            d.why_f = "new samples may carry undeclared fields, which old forbids"
        yield d


def _padding(c: _Ctx) -> Iterator[_Diff]:
    old, new = c.old.padding_sizes, c.new.padding_sizes
    note = "padding sizes decide the size of padding samples, not what validation accepts"
    for n in [*old, *(n for n in new if n not in old)]:
        a, b = old.get(n), new.get(n)
        if a != b:
            shown = f"{n}: {'none' if a is None else a} -> {'none' if b is None else b}"
            yield _Diff(f"padding.{n}", "padding_default_changed", shown, note=note)
