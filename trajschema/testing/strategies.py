"""Hypothesis strategies built from a schema: valid samples, tag dicts, batches and labelled invalid samples.

Everything is generated *constructively*, never by rejection (no ``assume``, no
``.filter``): dim sizes are drawn inside each free dim's ``min``/``max``/``multiple_of``,
derived dims are evaluated from their inputs, and where a derived dim (or an inline
shape expression) must stay a size, the last free input it uses is drawn from the
sizes that keep it one (solved with `trajschema.core.dims.solve_for` when the caller
pins it). Tensor values are drawn from exactly what each dtype can hold under the
field's ``values``/``min``/``max``/``finite``, as the value engine
(`trajschema.core.values`) compiles those checks per dtype; optional fields are present
or absent at random. Bounds written in dims (``max: experts - 1``) are evaluated with the
sizes drawn for the sample, and a ``distinct`` field's slices along the last axis hold
distinct values (see `trajschema.testing.elements.small_distinct_tensor`); where the
sizes leave such a field too few values, one free dim nothing else depends on is drawn
again (``experts >= topk``, or a shorter ``topk``), and a dtype that cannot hold a bound
is not used for that sample.

Small tensors (at most 64 elements, up to 64 elements in one draw) are drawn element by
element through hypothesis, so a failing example shrinks to one whose elements that do
not matter are all the simplest allowed value (``0``, or the bound nearest it); larger
tensors are filled from a seed hypothesis draws (see `trajschema.testing.elements`).

Batch layouts (``batches(layout=...)``):

``"tq"``
    what ``transfer_queue.kv_batch_get`` returns (`trajschema.tq.wire.wire_batch`):
    tensor fields as jagged nested tensors, the strided nested fallback where two dims
    vary between samples, dense ``(B,)`` for 0-dim tensors, ``NonTensorStack`` for
    Python values. Optional fields are present in all samples or in none and each
    tensor field has one dtype per batch, as `to_tq_fields`
    requires of a writer.
``"dense"``
    every sample has the same dims; tensor fields are dense ``(B, ...)`` tensors,
    ``int``/``float``/``bool`` fields dense ``(B,)`` tensors, the rest ``NonTensorStack``.
``"nontensor"``
    every column a ``NonTensorStack`` of the per-sample values (TransferQueue's
    fallback when ranks differ).
``"list"``
    a list of sample dicts, each drawn on its own (presence and dtypes per sample).

Tags: [`tags`][trajschema.testing.tags] draws tag dicts for given ``sizes``; ``samples(..., with_tags=True)``
and ``batches(..., with_tags=True)`` draw each sample's tag dict with it, so length tags
(``seq_len: {equals: seq}``) agree with the sample.

Arguments are checked when a strategy is made, never at the first draw: ``dims=`` (and
``tags(sizes=...)``, by the same function) are refused, with a ``ValueError`` naming the
argument and the dim, when no valid sample can have them: what ``validate`` refuses in
``dims=``, a size outside a free dim's ``min``/``max``/``multiple_of``, a derived dim
(or inline shape expression) that the sizes decide and that is negative or not the size
given, and sizes from which no sample can be constructed. Bools are not ints anywhere
(``max_len``, ``size``, sizes); ``with_tags``, ``padding`` and ``codes`` are type-checked.

Limits: sizes are drawn up to ``max_len`` per free dim (more where a dim's ``min`` or a
derived dim needs it); a schema whose derived dims constrain each other beyond "the
last free input of each derived dim keeps it a size" (``a: x - y`` *and* ``b: y - x``)
raises a ``ValueError`` naming the dim: pin sizes with ``dims=``. A pinned derived dim is
solved for its last free input, so it cannot be pinned when all its inputs are decided by
earlier derived dims (``u: t + 2`` with ``t: s - p``). Validation binds a sample's dims
from the fields it carries, solving a derived dim for one unbound input at a time
(`trajschema.check.Plan.unbindable`), so a sample carries the optional fields that let it
(every optional tensor field when the fields drawn do not, none when those do not either);
a schema none of whose samples validation can bind is refused by ``samples`` and
``batches`` when they are made. One draw (a sample, or a whole
batch) holds at most 2**24 tensor elements and a batch at most 2**16 samples: arguments
whose largest draws would hold more are refused when the strategy is made, and a draw
that would (a ``size=`` strategy drawing a large batch) raises a ``ValueError`` instead of
allocating it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from hypothesis import strategies as st
from tensordict import NonTensorStack, TensorDict

from trajschema.check import Plan, check_args, nontensor_column
from trajschema.core import (
    DTYPES_BY_NAME,
    MAX_SIZE,
    DerivedDim,
    Expr,
    Field,
    FreeDim,
    ValueSet,
    ViolationCode,
    element_failures,
    fits_dtype,
    float_bound,
    is_int,
    kind_ok,
    solve_for,
    value_failures,
)
from trajschema.load import resolve_schema
from trajschema.schema import Schema
from trajschema.testing.elements import (
    ElementBudget,
    distinct_count,
    from_keys,
    small_distinct_tensor,
    small_tensor,
    value_keys,
)
from trajschema.testing.routes import MAX_COUNT, distinct_rows
from trajschema.tq import wire_batch

__all__ = [
    "BATCH_FORMS",
    "LAYOUTS",
    "ExpectedViolation",
    "batches",
    "corruptions",
    "invalid_samples",
    "samples",
    "tags",
]

#: The forms of a batch [`batches`][trajschema.testing.batches] draws (see the module docstring):
#: how its columns are held, not a dense or packed `Layout` (which ``layout=`` of the check names).
BATCH_FORMS = ("tq", "dense", "nontensor", "list")
#: The earlier name of `BATCH_FORMS`, kept for code written against it.
LAYOUTS = BATCH_FORMS

_I64 = (-(2**63), 2**63 - 1)


class _Infeasible(Exception):
    """The drawn sizes leave a derived dim no size (only for schemas beyond the constructive scheme)."""


#: How sizes are chosen: ``pick(lo, hi)`` is a size in ``[lo, hi]``. Drawing uses hypothesis;
#: the eager argument checks use the smallest and the largest choice.
_Pick = Callable[[int, int], int]


def _picker(draw: Callable) -> _Pick:
    return lambda lo, hi: draw(st.integers(lo, hi))


def _smallest(lo: int, hi: int) -> int:
    return lo


def _largest(lo: int, hi: int) -> int:
    return hi


# -- dim sizes ----------------------------------------------------------------------


def _draw_free(pick: _Pick, d: FreeDim, lo: int, hi: int | None, cap: int) -> int:
    """A size of free dim ``d`` in ``[lo, hi]`` (``hi=None``: unbounded), drawn up to about ``cap``."""
    sizes = d.size_range(lo, hi)
    if sizes is None:
        raise _Infeasible(f"dim {d.name} has no size in [{lo}, {'inf' if hi is None else hi}] that is {d.describe()}")
    first, last = sizes
    m = d.step
    top = max(first // m, cap // m)  # counted in steps: the k-th size from 0 is m * k
    return m * pick(first // m, top if last is None else min(top, last // m))


def _at_least(c: int, need: float) -> int:
    """The smallest int ``y`` with ``c * y >= need`` (``c > 0``), exactly for ints."""
    return -(-need // c) if isinstance(need, int) else math.ceil(need / c)


def _solve_draw(
    pick: _Pick, expr: Expr, x: FreeDim, env: dict[str, int], target: int | None, low: tuple[int, int], cap: int
) -> int:
    """A size of ``x`` (at least ``low[1]``) such that ``expr`` is ``target``, or at least ``low[0]``."""
    if target is not None:
        sol = solve_for(expr, x.name, target, env)
        if sol is None or not x.allows(sol) or sol < low[1]:
            raise _Infeasible(f"no size of {x.name} makes {expr} equal {target}")
        return sol
    lin = expr.linear([x.name], env)
    if lin is None or lin[1][x.name] == 0:  # constant or not linear in x: any size, checked after
        return _draw_free(pick, x, low[1], None, cap)
    a, b = lin[0], lin[1][x.name]
    if b > 0:
        lo, hi = max(low[1], _at_least(b, low[0] - a)), None
    else:
        lo, hi = low[1], (a - low[0]) // -b
    return _draw_free(pick, x, lo, hi, max(cap, lo))


def _rest_bounds(rest: Sequence[FreeDim], coef: Mapping[str, int], at_least: Mapping[str, int]) -> tuple[Any, Any]:
    """The values ``sum(coef[r] * r)`` takes over the sizes of each ``r`` in ``rest`` that are at least ``at_least``.

    `Expr.bounds` of that sum (each name used once, so exact) over the box of sizes.
    """
    box: dict[str, tuple[float, float]] = {}
    total: Expr | None = None
    for r in rest:
        lo = at_least.get(r.name, 0)
        sizes = r.size_range(lo) or (lo, lo)  # none from lo: drawing r fails anyway, and says so
        box[r.name] = (sizes[0], math.inf if sizes[1] is None else sizes[1])
        c = coef[r.name]
        term = Expr("*", (Expr("int", (abs(c),)), Expr("name", (r.name,))))
        term = term if c >= 0 else Expr("neg", (term,))
        total = term if total is None else Expr("+", (total, term))
    return (0, 0) if total is None else total.bounds(box)


def _draw_inputs(
    pick: _Pick,
    expr: Expr,
    others: list[FreeDim],
    last: FreeDim | None,
    env: dict[str, int],
    cap: int,
    want: tuple[Any, Any, Mapping[str, int]],
) -> None:
    """Draw every unbound input but the last so that some size of ``last`` can still put ``expr`` in ``[lo, hi]``."""
    lo_want, hi_want, at_least = want
    names = [d.name for d in others] + ([last.name] if last is not None else [])
    lin = expr.linear(names, env) if others else None
    for i, d in enumerate(others):
        ylo, yhi = at_least.get(d.name, 0), None
        if lin is not None:
            a, coef = lin
            a += sum(coef[o.name] * env[o.name] for o in others[:i])
            rlo, rhi = _rest_bounds([r for r in [*others[i + 1 :], last] if r is not None], coef, at_least)
            lo_c, hi_c, c = lo_want - a - rhi, hi_want - a - rlo, coef[d.name]  # c * y within [lo_c, hi_c]
            if c < 0:
                lo_c, hi_c, c = -hi_c, -lo_c, -c
            if c and lo_c > -math.inf:
                ylo = max(ylo, _at_least(c, lo_c))
            if c and hi_c < math.inf:
                yhi = int(hi_c) // c if isinstance(hi_c, int) else math.floor(hi_c / c)
        env[d.name] = _draw_free(pick, d, ylo, yhi, max(cap, ylo))


def _lower_bounds(plan: Plan, env: Mapping[str, int], at_least: Mapping[str, int]) -> dict[str, int]:
    """``at_least``, raised where a derived dim is linear in one free dim alone (``response - 1``: response >= 1).

    Binding such a free dim early (for another derived dim) could otherwise leave this one negative.
    """
    out = dict(at_least)
    for d in plan.dim_plan.derived:
        unbound = [n for n in d.expr.names() if n not in env]
        if len(unbound) != 1 or isinstance(plan.dim_plan.dims[unbound[0]], DerivedDim):
            continue
        lin = d.expr.linear(unbound, env)
        if lin is not None and lin[1][unbound[0]] > 0:
            a, c = lin[0], lin[1][unbound[0]]
            out[unbound[0]] = max(out.get(unbound[0], 0), _at_least(c, out.get(d.name, 0) - a))
    return out


def _draw_env(
    pick: _Pick, plan: Plan, pinned: Mapping[str, int], cap: int, at_least: Mapping[str, int]
) -> dict[str, int]:
    """Every dim's size (hidden inline expressions included), satisfying every dim constraint."""
    dp = plan.dim_plan
    free = {d.name: d for d in dp.free}
    env: dict[str, int] = dict(dp.fixed)
    env.update({k: v for k, v in pinned.items() if k not in env and not isinstance(dp.dims[k], DerivedDim)})
    at_least = _lower_bounds(plan, env, at_least)
    for d in dp.derived:
        names = [n for n in d.expr.names() if n not in env]
        target, low = pinned.get(d.name), at_least.get(d.name, 0)
        _draw_inputs(
            pick,
            d.expr,
            [free[n] for n in names[:-1]],
            free[names[-1]] if names else None,
            env,
            cap,
            (low if target is None else target, math.inf if target is None else target, at_least),
        )
        if names:
            x = free[names[-1]]
            env[x.name] = _solve_draw(pick, d.expr, x, env, target, (low, at_least.get(x.name, 0)), cap)
        value = d.expr.evaluate(env)
        if value < low or (target is not None and value != target):
            raise _Infeasible(f"dim {d.name} = {d.expr} is {value} for the sizes drawn ({env})")
        env[d.name] = value
    for name, fd in free.items():
        if name not in env:
            env[name] = _draw_free(pick, fd, at_least.get(name, 0), None, cap)
    return env


def _env_or_raise(
    draw: Callable, spec: _Spec, choice: _Choice | None = None, at_least: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Sizes for one sample; with ``choice``, sizes its dtypes fit (else `_fitting` picks dtypes that fit them)."""
    pick = _picker(draw)
    try:
        env = _draw_env(pick, spec.plan, spec.pinned, spec.max_len, at_least or {})
        _fit_values(pick, spec, env, _chosen(choice), at_least or {})
    except _Infeasible as exc:
        raise _cannot_construct(spec, exc) from None
    return env


def _chosen(choice: _Choice | None) -> dict[str, torch.dtype]:
    return {} if choice is None else {name: dt for name, (dt, _) in choice.dtypes.items()}


def _fitting(spec: _Spec, env: Mapping[str, int], choice: _Choice) -> _Choice:
    """``choice`` with each field whose dtype cannot hold its values under ``env`` moved to the first dtype that can."""
    dtypes = dict(choice.dtypes)
    for f, axes in spec.plan.tensors:
        if f.name in dtypes and (f.has_dim_bounds or f.distinct) and not _fits(f, axes, dtypes[f.name][0], env):
            dtypes[f.name] = next(u for u in spec.dtypes[f.name] if _fits(f, axes, u[0], env))
    return dataclasses.replace(choice, dtypes=dtypes)


# -- value bounds in dims, distinct slices -------------------------------------------
#
# A bound written in dims (``max: experts - 1``) and ``distinct`` (a slice along the last
# axis holds distinct values) tie the values to the sizes: ``distinct`` needs at least as
# many allowed values as the last axis is long, and a dtype must hold the largest id the
# bound allows (``uint8`` holds no id past 255). The sizes are drawn first; where they
# leave a field too few values, one free dim that nothing else depends on (not pinned,
# in no derived dim) is drawn again within the sizes that fit: a dim of the bound
# (``experts >= topk``), else the last axis (``topk <= experts``).


def _need(f: Field, shape: tuple[int, ...]) -> int:
    """How many distinct values a tensor of ``shape`` in ``f`` needs: none when empty, its last axis when distinct."""
    if not math.prod(shape):
        return 0
    return shape[-1] if f.distinct and shape else 1


def _room(f: Field, dtype: torch.dtype, env: Mapping[str, int]) -> int:
    """How many distinct values ``dtype`` may hold in ``f`` under ``env`` (``-1``: the dtype cannot hold a bound).

    Validation refuses a dtype that cannot hold a bound in dims once it is bound (``uint8``
    for ``max: experts - 1`` with 300 experts), however few elements the tensor has.
    """
    for e in (f.min_expr, f.max_expr):
        end = e.evaluate(env) if e is not None else None
        if end is not None and not fits_dtype(end, dtype):
            return -1
    return distinct_count(_allowed(f.bounded(env), dtype), dtype)


def _fits(f: Field, axes: Sequence[tuple[str | None, int]], dtype: torch.dtype, env: Mapping[str, int]) -> bool:
    return _room(f, dtype, env) >= _need(f, _shape(axes, env))


def _movable(spec: _Spec, name: str) -> FreeDim | None:
    """``name``'s free dim when it may be drawn again: not pinned, and no derived dim (or shape expression) uses it."""
    dp = spec.plan.dim_plan
    d = dp.dims.get(name)
    if not isinstance(d, FreeDim) or name in spec.pinned or name in dp.fixed:
        return None
    return None if any(name in e.expr.names() for e in dp.derived) else d


def _fit_values(
    pick: _Pick, spec: _Spec, env: dict[str, int], dtypes: Mapping[str, torch.dtype], at_least: Mapping[str, int]
) -> None:
    """Make every field's value bounds and ``distinct`` satisfiable under ``env``, moving one free dim if needed.

    ``dtypes`` gives a field's chosen dtype; a field without one may take any it allows.

    Raises:
        _Infeasible: no move fits, naming the field, the sizes and what it needs.
    """
    tied = [(f, axes) for f, axes in spec.plan.tensors if (f.has_dim_bounds or f.distinct) and f.name in spec.dtypes]
    for f, axes in tied:
        cands = [dtypes[f.name]] if f.name in dtypes else [dt for dt, _ in spec.dtypes[f.name]]
        fits = any(_fits(f, axes, dt, env) for dt in cands)
        if not fits and not any(_refit(pick, spec, f, axes, dt, env, at_least) for dt in cands):
            raise _Infeasible(_unfit(f, axes, cands[0], env))
    for f, axes in tied:  # a later move may have undone an earlier fit
        cands = [dtypes[f.name]] if f.name in dtypes else [dt for dt, _ in spec.dtypes[f.name]]
        if not any(_fits(f, axes, dt, env) for dt in cands):
            raise _Infeasible(_unfit(f, axes, cands[0], env))


def _unfit(f: Field, axes: Sequence[tuple[str | None, int]], dtype: torch.dtype, env: Mapping[str, int]) -> str:
    room, need = _room(f, dtype, env), _need(f, _shape(axes, env))
    bounds = ", ".join(f"{side}: {e}" for side, e in (("min", f.min_expr), ("max", f.max_expr)) if e is not None)
    sizes = ", ".join(f"{n}={env[n]}" for n in dict.fromkeys([*_expr_names(f), *(n for n, _ in axes if n)]))
    if room < 0:
        ends = [e.evaluate(env) for e in (f.min_expr, f.max_expr) if e is not None]
        end = next(v for v in ends if not fits_dtype(v, dtype))
        return f"field {f.name}: {dtype} cannot hold id {end} ({bounds}) with {sizes}"
    what = f"{need} distinct values along its last axis" if f.distinct and need > 1 else "a value"
    return f"field {f.name} needs {what}, but {dtype} allows {room} ({bounds or 'its value checks'}) with {sizes}"


def _expr_names(f: Field) -> list[str]:
    return [n for e in (f.min_expr, f.max_expr) if e is not None for n in e.names()]


def _refit(
    pick: _Pick,
    spec: _Spec,
    f: Field,
    axes: Sequence[tuple[str | None, int]],
    dtype: torch.dtype,
    env: dict[str, int],
    at_least: Mapping[str, int],
) -> bool:
    """Draw movable dims again so that ``f`` fits ``dtype``: a dim of a bound, else (or first) the last axis."""
    last = axes[-1][0] if axes and f.distinct else None
    d = _movable(spec, last) if last is not None else None
    loose = dataclasses.replace(f, min_expr=None, max_expr=None)
    cap = distinct_count(_allowed(loose, dtype), dtype)  # the most any bound in dims can leave
    if d is not None and env[d.name] > cap and not _shorten(pick, spec, d, env, at_least, cap):
        return False
    need = max(_need(f, _shape(axes, env)), 1)
    for e, side in ((f.max_expr, "max"), (f.min_expr, "min")):
        if e is None:
            continue
        for name in e.names():
            old = env[name]
            if _move_bound(pick, spec, f, (e, side, name), dtype, env, at_least, need):
                if _fits(f, axes, dtype, env):
                    return True
                env[name] = old
    if d is None:
        return False
    room = _room(f, dtype, env)
    if room >= 0 and _shorten(pick, spec, d, env, at_least, room) and _fits(f, axes, dtype, env):
        return True
    return _shorten_to_fit(pick, spec, d, (f, axes, dtype), env, at_least)


def _shorten_to_fit(
    pick: _Pick, spec: _Spec, d: FreeDim, fit: tuple[Field, Any, torch.dtype], env: dict[str, int], at_least: Any
) -> bool:
    """Draw the last axis ``d`` again among its sizes (up to the one drawn) at which ``f`` fits; whether one does.

    Every size is tried, not just the room the drawn size leaves (`_refit` tries that
    first): a bound may name ``d`` too (``min: topk`` on a ``topk``-wide axis), so a
    shorter axis can leave more room.
    """
    f, axes, dtype = fit
    drawn, ok = env[d.name], []
    for size in range(at_least.get(d.name, 0), drawn + 1):
        env[d.name] = size
        if d.allows(size) and _fits(f, axes, dtype, env):
            ok.append(size)
    env[d.name] = ok[pick(0, len(ok) - 1)] if ok else drawn
    return bool(ok)


def _shorten(pick: _Pick, spec: _Spec, d: FreeDim, env: dict[str, int], at_least: Mapping[str, int], most: int) -> bool:
    """Draw ``d`` again at most ``most``; whether some size of it is."""
    try:
        env[d.name] = _draw_free(pick, d, at_least.get(d.name, 0), most, spec.max_len)
    except _Infeasible:
        return False
    return True


def _move_bound(
    pick: _Pick,
    spec: _Spec,
    f: Field,
    bound: tuple[Expr, str, str],
    dtype: torch.dtype,
    env: dict[str, int],
    at_least: Mapping[str, int],
    need: int,
) -> bool:
    """Draw dim ``name`` of the ``side`` bound ``e`` again where the bound leaves ``need`` values; whether it moved."""
    e, side, name = bound
    d = _movable(spec, name)
    span = None if d is None else _bound_span(f, side, dtype, env, need)
    lin = None if span is None else e.linear([name], env)
    if d is None or span is None or lin is None or not lin[1][name]:
        return False
    xs = _solve_span(lin[0], lin[1][name], span)
    if xs is None:
        return False
    try:
        env[name] = _draw_free(pick, d, max(xs[0], at_least.get(name, 0)), xs[1], spec.max_len)
    except _Infeasible:
        return False
    return True


def _bound_span(f: Field, side: str, dtype: torch.dtype, env: Mapping[str, int], need: int) -> tuple[Any, Any] | None:
    """Where the ``side`` bound in dims must lie for ``dtype`` to hold ``need`` distinct values of ``f``.

    The other bounds stay as ``env`` makes them; ``max`` must also fit ``dtype``.
    """
    loose = dataclasses.replace(f, max_expr=None) if side == "max" else dataclasses.replace(f, min_expr=None)
    other = loose.bounded(env)
    a = _allowed(other, dtype)
    if distinct_count(a, dtype) < need:
        return None
    if a.members is not None:
        ranked = sorted(set(a.members))
        return (
            (ranked[need - 1], _dtype_end(dtype, True)) if side == "max" else (_dtype_end(dtype, False), ranked[-need])
        )
    lo, hi = a.lo, a.hi
    if side == "max":
        return (lo + need - 1 if math.isfinite(lo) else None), _dtype_end(dtype, True)
    return _dtype_end(dtype, False), (hi - need + 1 if math.isfinite(hi) else None)


def _dtype_end(dtype: torch.dtype, top: bool) -> int | float | None:
    if dtype.is_floating_point:
        return None
    if dtype == torch.bool:
        return 1 if top else 0
    info = torch.iinfo(dtype)
    return int(info.max if top else info.min)


def _solve_span(a: int, c: int, span: tuple[Any, Any]) -> tuple[int, int | None] | None:
    """The sizes ``x`` with ``a + c * x`` in ``span`` (an end may be ``None``: unbounded), as ``[lo, hi]``."""
    lo_t, hi_t = span
    if c < 0:
        a, c, lo_t, hi_t = -a, -c, (None if hi_t is None else -hi_t), (None if lo_t is None else -lo_t)
    lo = 0 if lo_t is None else max(0, math.ceil((lo_t - a) / c) if isinstance(lo_t, float) else _at_least(c, lo_t - a))
    hi = None if hi_t is None else (math.floor((hi_t - a) / c) if isinstance(hi_t, float) else (hi_t - a) // c)
    return None if hi is not None and hi < lo else (lo, hi)


def _cannot_construct(spec: _Spec, exc: _Infeasible) -> ValueError:
    return ValueError(
        f"trajschema strategies: cannot construct sizes for schema {spec.plan.name!r}: {exc}; pin sizes with dims="
    )


# -- values -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Allowed:
    """The elements a dtype can hold that pass a field's value checks: listed ``members``, or ``[lo, hi]``.

    A view of the value engine's `ValueSet` for the field and dtype, in the shape the
    element drawing reads (`trajschema.testing.elements.AllowedLike`).
    """

    is_float: bool
    lo: int | float
    hi: int | float
    members: tuple[int | float, ...] | None = None
    nan: bool = False

    @property
    def empty(self) -> bool:
        return (self.members is not None and not self.members) or (self.members is None and not self.lo <= self.hi)


def _allowed(f: Field, dtype: torch.dtype) -> _Allowed:
    """What ``dtype`` may hold in ``f``: the value engine's `ValueSet` of the field's checks over ``dtype``.

    One span is read as ``[lo, hi]`` (its ends are values of the dtype, ±inf included);
    several, which only listed ``values`` make, as their members.
    """
    s = ValueSet.passing(f.values, f.min, f.max, f.finite, dtype)
    is_float = dtype.is_floating_point
    if not s.spans:
        return _Allowed(is_float, 1, 0, nan=s.nan)
    if len(s.spans) == 1:
        lo, _, hi, _ = s.spans[0]
        return _Allowed(is_float, lo, hi, nan=s.nan)
    return _Allowed(is_float, s.spans[0][0], s.spans[-1][2], tuple(s.points(len(f.values or ()))), nan=s.nan)


def _specials(a: _Allowed, dtype: torch.dtype) -> list[float]:
    """Edge values inside ``a``: its ends, zeros, the smallest subnormals, ±1, ±inf, NaN."""
    info = torch.finfo(dtype)
    cands = [a.lo, a.hi, 0.0, -0.0, 1.0, -1.0, info.tiny * info.eps, -info.tiny * info.eps, info.max, -info.max]
    out = [c for c in cands if a.lo <= c <= a.hi and fits_dtype(c, dtype)]
    return [*out, math.nan] if a.nan else out


def _fill(a: _Allowed, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """A tensor of ``shape`` whose every element lies in ``a`` (``a`` is not empty)."""
    n = math.prod(shape)
    if n == 0:
        return torch.empty(shape, dtype=dtype)
    if a.members is not None:
        pool = torch.tensor(a.members, dtype=torch.float64 if a.is_float else torch.int64)
        return pool[torch.randint(len(a.members), (n,), generator=gen)].to(dtype).reshape(shape)
    if not a.is_float:
        span = int(a.hi) - int(a.lo)
        off = torch.randint(0, min(span, 2**62) + 1, (n,), generator=gen, dtype=torch.int64)
        vals = off + int(a.lo)
        edge = torch.rand(n, generator=gen)
        vals[edge < 0.08] = int(a.lo)
        vals[edge > 0.92] = int(a.hi)
        return vals.to(dtype).reshape(shape)
    return _fill_float(a, n, dtype, gen).reshape(shape)


def _fill_distinct(a: _Allowed, shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """A tensor of ``shape`` whose every slice along the last axis holds distinct values of ``a``.

    Each slice is a random subset of the first 2**62 values of ``a`` in ascending order
    (all of them, for any real bound), drawn by `trajschema.testing.routes.distinct_rows`.
    """
    n, k = math.prod(shape), (shape[-1] if shape else 1)
    if n == 0:
        return torch.empty(shape, dtype=dtype)
    count = min(distinct_count(a, dtype), MAX_COUNT)
    offsets = distinct_rows(n // k, k, count, gen).reshape(shape)
    first = 0 if a.members is not None else value_keys(a, dtype)[0]
    return from_keys(offsets + first, a, dtype)


def _fill_float(a: _Allowed, n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    big = torch.finfo(dtype).max
    lo, hi = max(float(a.lo), -big), min(float(a.hi), big)
    if lo > hi:  # only infinities are allowed (e.g. min: +inf on a float16)
        return torch.full((n,), float(a.lo), dtype=dtype)
    r = torch.rand(n, generator=gen, dtype=torch.float64)
    wide = lo * (1 - r) + hi * r
    centre = min(max(0.0, lo), hi)
    near = centre + torch.randn(n, generator=gen, dtype=torch.float64) * 4
    pick = torch.rand(n, generator=gen) < 0.5
    vals = torch.where(pick, near, wide).clamp(lo, hi).to(dtype).clamp(lo, hi)
    specials = _specials(a, dtype)
    if specials:
        at = torch.rand(n, generator=gen) < 0.1
        chosen = torch.tensor(specials, dtype=torch.float64)[torch.randint(len(specials), (n,), generator=gen)]
        vals = torch.where(at, chosen.to(dtype), vals)
    return vals


def _bad_elements(f: Field, dtype: torch.dtype, a: _Allowed) -> list[int | float]:
    """Values ``dtype`` holds exactly that break ``f``'s checks (confirmed by the value engine)."""
    if a.is_float:
        cands: list[Any] = [math.nan, -math.inf, math.inf]
        for end, up in ((a.lo, False), (a.hi, True)):
            if math.isfinite(end):
                cands.append(float_bound(math.nextafter(end, math.inf if up else -math.inf), dtype, up))
    else:
        base = a.members if a.members is not None else (a.lo, a.hi)
        cands = sorted({int(m) + d for m in base for d in (-1, 1)} - set(base))
    out = []
    for c in cands:
        if fits_dtype(c, dtype) and any(bool(m.any()) for _, m in element_failures(f, _scalar(c, dtype))):
            out.append(c)
    return out


def _scalar(c: int | float, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([c], dtype=torch.float64 if isinstance(c, float) else torch.int64).to(dtype)


# -- non-tensor values ----------------------------------------------------------------


def _passes(f: Field, v: Any) -> bool:
    return kind_ok(f.kind, v) and not value_failures(v, values=f.values, lo=f.min, hi=f.max, finite=f.finite)


def _as_kind(v: Any, kind: str) -> Any:
    """A listed value as a value of ``kind`` (``2.0`` on an ``int`` field is ``2``; ``1`` on ``bool`` is ``True``)."""
    if kind == "int" and isinstance(v, float) and v.is_integer():
        return int(v)
    if kind == "bool" and not isinstance(v, bool) and v in (0, 1):
        return bool(v)
    return v


def _scalar_strategy(f: Field) -> st.SearchStrategy | None:
    """Valid values of a non-tensor field, or ``None`` when it has none."""
    if f.values is not None:
        members = [m for m in (_as_kind(v, f.kind) for v in f.values) if _passes(f, m)]
        return st.sampled_from(members) if members else None
    if f.kind == "int":
        lo = math.ceil(f.min) if f.min is not None else _I64[0]
        hi = math.floor(f.max) if f.max is not None else max(_I64[1], lo + 2**16)
        return st.integers(lo, hi) if lo <= hi else None
    if f.kind == "float":
        flo = None if f.min is None else float_bound(f.min, torch.float64, True)
        fhi = None if f.max is None else float_bound(f.max, torch.float64, False)
        if flo is not None and fhi is not None and flo > fhi:
            return None
        return st.floats(flo, fhi, allow_nan=not f.has_value_checks, allow_infinity=None if not f.finite else False)
    return {
        "bool": st.booleans(),
        "str": st.text(max_size=8),
        "mapping": st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2),
        "any": st.one_of(st.integers(-5, 5), st.text(max_size=4), st.booleans()),
    }[f.kind]


#: Tag values of the wrong kind (tags refuse 0-d tensors, which fields accept as scalars).
_WRONG_TAG: dict[str, list[Any]] = {
    "int": ["7", True, 1.5, torch.tensor(1)],
    "float": ["0.5", True, torch.tensor(0.5)],
    "bool": [1, "true", torch.tensor(True)],
    "str": [7, torch.tensor(0)],
    "mapping": ["x", [("a", 1)]],
}

_WRONG_KIND = {
    "int": ("7", 1.5, True),
    "float": ("0.5", True),
    "bool": (1, "true"),
    "str": (7, b"bytes"),
    "mapping": ([("a", 1)], "x"),
}


# -- what a schema generates, derived once -----------------------------------------


@dataclasses.dataclass(frozen=True)
class _Spec:
    plan: Plan
    pinned: Mapping[str, int]
    max_len: int
    dtypes: Mapping[str, tuple[tuple[torch.dtype, _Allowed], ...]]  # tensor field -> usable dtypes
    scalars: Mapping[str, st.SearchStrategy]  # non-tensor field -> its values
    bad: Mapping[str, tuple[tuple[tuple[torch.dtype, _Allowed], tuple[int | float, ...]], ...]] = dataclasses.field(
        default_factory=dict
    )  # tensor field -> ((dtype, allowed), elements breaking its checks) for each dtype that has some

    def fields_possible(self) -> list[Field]:
        return [f for f in self.plan.fields.values() if f.name in self.dtypes or f.name in self.scalars]


def _plan_of(schema: Schema | str) -> Plan:
    """The plan of a Schema or a schema name; anything else is a ``TypeError``."""
    return resolve_schema(schema).plan


def _spec(schema: Schema | str, dims: Mapping[str, int] | None, max_len: Any, call: str) -> _Spec:
    plan = _plan_of(schema)
    if not is_int(max_len) or not 0 <= int(max_len) <= MAX_SIZE:
        raise ValueError(f"{call}(max_len=...) must be an int in 0..2**63-1, found {max_len!r}")
    max_len = int(max_len)
    pinned = _checked_sizes(plan, dims, call, "dims")
    _check_budget(plan, pinned, max_len, 1, call)
    dtypes, scalars = {}, {}
    for f in plan.fields.values():
        if f.is_tensor:
            usable = tuple((dt, a) for dt in f.dtypes if not (a := _allowed(f, dt)).empty)
            if usable:
                dtypes[f.name] = usable
        elif (s := _scalar_strategy(f)) is not None:
            scalars[f.name] = s
        if f.required and f.name not in dtypes and f.name not in scalars:
            raise ValueError(f"trajschema strategies: field {f.name!r} of schema {plan.name!r} admits no value")
    bad = {}
    for name, usable in dtypes.items():
        f = plan.fields[name]
        found = tuple((u, tuple(b)) for u in usable if f.has_value_checks and (b := _bad_elements(f, *u)))
        if found:
            bad[name] = found
    spec = _fit_dtypes(_Spec(plan, pinned, max_len, dtypes, scalars, bad), call)
    if call in ("samples", "batches"):  # what validation cannot bind is a valid sample of neither
        _check_bindable(spec, call)
    return spec


def _fit_dtypes(spec: _Spec, call: str) -> _Spec:
    """``spec`` keeping, for each field whose values are tied to the sizes, the dtypes its values fit.

    A dtype is kept when samples at the smallest and at the largest sizes can use it (a
    ``uint8`` field with ``max: experts - 1`` and ``experts`` pinned at 300 cannot).

    Raises:
        ValueError: a required field left with no dtype, naming the field and why.
    """
    tied = [f for f, _ in spec.plan.tensors if (f.has_dim_bounds or f.distinct) and f.name in spec.dtypes]
    try:
        _draw_env(_smallest, spec.plan, spec.pinned, spec.max_len, {})
    except _Infeasible:
        return spec  # beyond the constructive scheme: the draws say so
    dtypes = dict(spec.dtypes)
    for f in tied:
        keep, why = [], ""
        for u in spec.dtypes[f.name]:
            try:
                for pick in (_smallest, _largest):
                    _fit_values(
                        pick, spec, _draw_env(pick, spec.plan, spec.pinned, spec.max_len, {}), {f.name: u[0]}, {}
                    )
                keep.append(u)
            except _Infeasible as exc:
                why = why or str(exc)
        if keep:
            dtypes[f.name] = tuple(keep)
            continue
        if f.required:
            raise ValueError(f"{call}: schema {spec.plan.name!r} has no valid sample: {why}; pin sizes with dims=")
        del dtypes[f.name]
    return dataclasses.replace(spec, dtypes=dtypes)


# -- arguments no valid sample can have --------------------------------------------------


def _checked_sizes(plan: Plan, sizes: Any, call: str, arg: str) -> dict[str, int]:
    """``dims=`` (or ``tags(sizes=...)``) as plain ints, refusing sizes no valid sample has.

    The one check every strategy applies, at construction: what ``validate`` refuses in
    ``dims=`` (an unknown dim, a size that is not an int in ``0..2**63-1``, a bool, a
    fixed dim's other size); a free dim outside its ``min``/``max``/``multiple_of``;
    a derived dim (or inline shape expression) that the given sizes decide and that is
    then no size, or not the size given for it; and, for a schema the constructive
    scheme covers, sizes from which no sample can be constructed (``d: a - b`` given
    ``d`` beyond what ``a``'s ``max`` allows). Used by every strategy, so ``tags``
    refuses exactly the sizes ``samples`` refuses.

    Raises:
        ValueError: naming ``call(arg=...)``, the dim, what it must be and what was found.
    """
    where = f"{call}({arg}=...)"
    try:
        pinned = check_args(plan, sizes, "values") or {}
    except ValueError as exc:
        note = "" if arg == "dims" else f" ({arg}= is checked as validate checks dims=)"
        raise ValueError(f"{where}: {exc}{note}") from None
    for k, v in pinned.items():
        d = plan.dims[k]
        if isinstance(d, FreeDim) and not d.allows(v):
            raise ValueError(f"{where}: {arg}[{k!r}]={v}: {k} must be {d.describe()} in schema {plan.name!r}")
    _decided_sizes(plan, pinned, where, arg)
    if pinned:
        _check_constructible(plan, pinned, where, arg)
    return pinned


def _decided_sizes(plan: Plan, pinned: Mapping[str, int], where: str, arg: str) -> dict[str, int]:
    """Every dim the sizes decide (fixed dims, derived dims of decided inputs), checked to be the sizes given."""
    dp = plan.dim_plan
    env = {**dp.fixed, **{k: v for k, v in pinned.items() if not isinstance(dp.dims[k], DerivedDim)}}
    for d in dp.derived:
        value = d.expr.evaluate(env)
        if value is None:
            if d.name in pinned:  # later dims may build on it
                env[d.name] = pinned[d.name]
            continue
        what = f"the shape expression {d.expr}" if d.name in plan.hidden else f"{d.name} = {d.expr}"
        inputs = ", ".join(f"{n}={env[n]}" for n in d.expr.names())
        if not 0 <= value <= MAX_SIZE:
            raise ValueError(
                f"{where}: {what} is {value} for {inputs}, not a size (0..2**63-1): no sample has these sizes"
            )
        if d.name in pinned and pinned[d.name] != value:
            raise ValueError(f"{where}: {arg}[{d.name!r}]={pinned[d.name]}, but {what} is {value} for {inputs}")
        env[d.name] = value
    return env


def _check_constructible(plan: Plan, pinned: Mapping[str, int], where: str, arg: str) -> None:
    """Refuse sizes from which even the smallest choice of every other size constructs no sample.

    A construction that succeeds is a witness that samples with these sizes exist, so
    sizes no sample can have are always refused. A failed one is not a proof (``f: d - c``
    pinned with ``d: a - b`` drawn first), but the draws would fail as well. Only where
    the schema itself is constructible: one beyond the scheme (see the module docstring)
    keeps its error for the draw that meets it.
    """
    try:
        _draw_env(_smallest, plan, pinned, 0, {})
    except _Infeasible as exc:
        try:
            _draw_env(_smallest, plan, {}, 0, {})
        except _Infeasible:
            return
        raise ValueError(
            f"{where}: cannot construct a sample of schema {plan.name!r} with {arg}={dict(pinned)}: {exc} (where "
            "such samples exist, pin more sizes: the inputs of the derived dims given)"
        ) from None


#: The most samples [`batches`][trajschema.testing.batches] puts in one batch.
_MAX_BATCH = 2**16

#: A draw (one sample, or a whole batch) holds at most this many tensor elements; larger
#: sizes are refused rather than allocated (an int64 tensor of 2**24 elements is 128 MiB).
_MAX_ELEMENTS = 2**24


def _elements(plan: Plan, env: Mapping[str, int]) -> int:
    """Tensor elements of a sample with every field present."""
    return sum(math.prod(_shape(axes, env)) for _, axes in plan.tensors)


def _check_budget(plan: Plan, pinned: Mapping[str, int], max_len: int, count: int, call: str) -> None:
    """Refuse arguments whose largest draws hold more than ``_MAX_ELEMENTS`` tensor elements."""
    try:
        env = _draw_env(_largest, plan, pinned, max_len, {})
    except _Infeasible:
        return  # beyond the scheme: the draws check their own sizes
    total = count * _elements(plan, env)
    if total > _MAX_ELEMENTS:
        biggest = max(plan.tensors, key=lambda fa: math.prod(_shape(fa[1], env)))
        of = f"{count} samples" if count != 1 else "one sample"
        raise ValueError(
            f"{call}(max_len={max_len}{f', dims={dict(pinned)}' if pinned else ''}): {of} of schema "
            f"{plan.name!r} can hold {total} tensor elements ({biggest[0].name} has shape "
            f"{list(_shape(biggest[1], env))}); the strategies build at most 2**24 per draw: lower max_len= or "
            "pin smaller dims="
        )


def _spend(budget: list[int], plan: Plan, env: Mapping[str, int]) -> None:
    """Take one sample's elements from what a draw may still build (``budget[0]``)."""
    budget[0] -= _elements(plan, env)
    if budget[0] < 0:
        raise ValueError(
            f"trajschema strategies: a draw of schema {plan.name!r} would hold more than 2**24 tensor elements "
            f"(sizes {plan.public_dims(env)}); lower max_len=, size= or dims="
        )


@dataclasses.dataclass(frozen=True)
class _Choice:
    """Which fields a sample has and the dtype of each tensor field."""

    present: frozenset[str]
    dtypes: Mapping[str, tuple[torch.dtype, _Allowed]]


def _draw_choice(draw: Callable, spec: _Spec, force: frozenset[str] = frozenset()) -> _Choice:
    present = set()
    dtypes = {}
    for f in spec.fields_possible():
        if f.required or f.name in force or draw(st.booleans()):
            present.add(f.name)
        if f.name in spec.dtypes:
            dtypes[f.name] = draw(st.sampled_from(spec.dtypes[f.name]))
    return _Choice(frozenset(present), dtypes)


def _bindable(
    spec: _Spec, env: Mapping[str, int], choice: _Choice, keep: frozenset[str] = frozenset(), pinned=None
) -> _Choice:
    """``choice``, or the nearest one whose sample validation can bind the dims of (see `Plan.unbindable`).

    Validation solves a derived dim for one unbound input at a time, so which optional
    fields a sample carries decides whether its sizes can be checked (``a = h * w``
    observed alone never can). Tried in turn: the choice drawn, every optional tensor
    field added (each binds dims directly), every optional tensor field but ``keep``
    dropped (fewer dims to solve).

    Raises:
        _Infeasible: none of the three binds.
    """
    pins = spec.pinned if pinned is None else pinned
    reason = spec.plan.unbindable(env, choice.present, pins)
    if reason is None:
        return choice
    optional = {f.name for f in spec.fields_possible() if f.is_tensor and not f.required}
    for present in (choice.present | optional, choice.present - (optional - keep)):
        if spec.plan.unbindable(env, present, pins) is None:
            return dataclasses.replace(choice, present=frozenset(present))
    raise _Infeasible(f"no choice of optional fields lets validation bind the dims ({reason})")


def _bindable_or_raise(spec: _Spec, env: Mapping[str, int], choice: _Choice) -> _Choice:
    try:
        return _bindable(spec, env, choice)
    except _Infeasible as exc:
        raise _cannot_construct(spec, exc) from None


def _check_bindable(spec: _Spec, call: str) -> None:
    """Refuse a schema none of whose samples validation accepts, when the strategy is made.

    Read at the smallest sizes: a structure validation cannot bind (a derived dim whose
    inputs no field binds, in a required field) fails at every size.
    """
    try:
        env = _draw_env(_smallest, spec.plan, spec.pinned, 0, {})
    except _Infeasible:
        return  # beyond the constructive scheme: the draws say so
    required = frozenset(f.name for f in spec.fields_possible() if f.required)
    try:
        _bindable(spec, env, _Choice(required, {}))
    except _Infeasible as exc:
        raise ValueError(
            f"{call}: schema {spec.plan.name!r} has no sample validation accepts: {exc}; declare a field that "
            "observes the inputs, or make the field observing the derived dim optional"
        ) from None


def _shape(axes: Sequence[tuple[str | None, int]], env: Mapping[str, int]) -> tuple[int, ...]:
    return tuple(lit if name is None else env[name] for name, lit in axes)


class _Tensors:
    """Where one draw's tensors come from: small ones element by element (so they shrink), the rest from a seed.

    One per draw (a sample, or a whole batch), so the elements it takes through
    hypothesis stay within `ElementBudget`'s per-draw limit however many samples it holds.
    """

    def __init__(self, draw: Callable) -> None:
        self.draw = draw
        self.budget = ElementBudget()
        self.gen: torch.Generator | None = None

    def tensor(self, a: _Allowed, shape: tuple[int, ...], dtype: torch.dtype, distinct: bool = False) -> torch.Tensor:
        if self.budget.take(math.prod(shape)):
            return self.draw(small_distinct_tensor(a, shape, dtype) if distinct else small_tensor(a, shape, dtype))
        if self.gen is None:  # drawn on first need: a draw of small tensors only has no seed to shrink
            self.gen = torch.Generator().manual_seed(self.draw(st.integers(0, 2**32 - 1)))
        return _fill_distinct(a, shape, dtype, self.gen) if distinct else _fill(a, shape, dtype, self.gen)


def _build(
    draw: Callable, spec: _Spec, env: Mapping[str, int], choice: _Choice, tensors: _Tensors | None = None
) -> dict[str, Any]:
    tensors = tensors or _Tensors(draw)
    sample: dict[str, Any] = {}
    for f, axes in spec.plan.tensors:
        if f.name in choice.present:
            dtype, allowed = choice.dtypes[f.name]
            if f.has_dim_bounds:
                allowed = _allowed(f.bounded(env), dtype)
            sample[f.name] = tensors.tensor(allowed, _shape(axes, env), dtype, f.distinct)
    for f in spec.plan.others:
        if f.name in choice.present:
            sample[f.name] = draw(spec.scalars[f.name])
    return {name: sample[name] for name in spec.plan.fields if name in sample}  # declaration order


# -- tags -------------------------------------------------------------------------------


def _tag_value(kind: str | None) -> st.SearchStrategy:
    return {
        "int": st.integers(0, 9),
        "float": st.floats(allow_nan=False),
        "bool": st.booleans(),
        "str": st.text(max_size=4),
        "mapping": st.dictionaries(st.text(max_size=3), st.integers(0, 9), max_size=2),
    }.get(kind or "any", st.one_of(st.integers(0, 9), st.text(max_size=4)))


@st.composite
def _tags(draw: Callable, plan: Plan, sizes: Mapping[str, int] | None, padding: bool | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # is_padding whether declared or not: padding's own tag dicts carry it either way.
    if padding or (padding is None and draw(st.booleans())):
        out["is_padding"] = True
    elif draw(st.booleans()):
        out["is_padding"] = False
    for t in plan.tags.values():
        if t.name == "is_padding" or not draw(st.booleans()):
            continue
        if t.equals is not None:
            want = None if sizes is None else t.equals.evaluate(sizes)
            if want is not None:
                out[t.name] = want
        else:
            out[t.name] = draw(_tag_value(t.kind))
    if draw(st.booleans()):  # keys no schema declares (verl adds status, min_global_steps, ...)
        out[_unused("status", {**plan.tags, "is_padding": None})] = draw(st.sampled_from(["ok", "filtered"]))
    return out


def _unused(name: str, taken: Mapping[str, Any]) -> str:
    while name in taken:
        name += "_"
    return name


def tags(
    schema: Schema | str, *, sizes: Mapping[str, int] | None = None, padding: bool | None = False
) -> st.SearchStrategy:
    """A strategy of valid tag dicts for ``schema``.

    Each declared tag is present or absent at random. Length tags (``seq_len: {equals:
    seq}``) are present only when ``sizes`` (the sample's dims, e.g. what
    [`validate`][trajschema.Schema.validate] returns) gives their expression, and then equal
    it; ``sizes`` is completed with the fixed dims and the derived dims it decides
    (``prompt`` and ``response`` give ``seq``). An undeclared key (``status``) is
    sometimes added, as verl does. ``is_padding`` follows ``padding`` even where the
    schema does not declare it, as the tag dicts of ``schema.padding`` carry it.

    ``sizes`` is checked as ``samples(dims=...)`` checks its sizes: sizes no sample of
    the schema can have are refused when the strategy is made.

    Examples:
        >>> from trajschema.testing import tags
        >>> tag = tags("text", sizes={"prompt": 3, "response": 2, "seq": 5}).example()  # doctest: +SKIP
        >>> tag.get("seq_len", 5)  # doctest: +SKIP
        5

    Args:
        schema: a Schema or a schema name.
        sizes: the dims of the sample the tags travel with.
        padding: ``False``: a real sample (``is_padding`` absent or false); ``True``: a
            padding sample (``is_padding: true``); ``None``: either.

    Raises:
        ValueError: ``sizes`` no sample can have: an unknown dim, a size that is not an
            int in ``0..2**63-1`` (a bool, a float, a negative one), a size outside a free
            dim's ``min``/``max``/``multiple_of``, a derived dim that disagrees with its
            definition or would be negative.
        TypeError: ``schema`` is neither a Schema nor a name; ``padding`` is not a bool or ``None``.
    """
    plan = _plan_of(schema)
    if padding is not None and not isinstance(padding, bool):
        raise TypeError(f"tags(padding=...) must be True, False or None, found {padding!r}")
    pinned = _checked_sizes(plan, sizes, "tags", "sizes")
    if sizes is None:
        return _tags(plan, None, padding)
    return _tags(plan, plan.public_dims(_decided_sizes(plan, pinned, "tags(sizes=...)", "sizes")), padding)


# -- samples and batches ---------------------------------------------------------------------


@st.composite
def _samples(draw: Callable, spec: _Spec, with_tags: bool) -> Any:
    env = _env_or_raise(draw, spec)
    _spend([_MAX_ELEMENTS], spec.plan, env)
    choice = _fitting(spec, env, _draw_choice(draw, spec))
    sample = _build(draw, spec, env, _bindable_or_raise(spec, env, choice))
    if with_tags:
        return sample, draw(_tags(spec.plan, spec.plan.public_dims(env), False))
    return sample


def samples(
    schema: Schema | str, *, dims: Mapping[str, int] | None = None, max_len: int = 64, with_tags: bool = False
) -> st.SearchStrategy:
    """A strategy of valid samples (dicts) of ``schema``; with ``with_tags``, ``(sample, tag)`` pairs.

    Examples:
        >>> from trajschema.testing import samples
        >>> sample = samples("text", max_len=8).example()  # doctest: +SKIP
        >>> ts.load_schema("text").validate(sample)  # doctest: +SKIP
        {'prompt': 3, 'response': 0, 'seq': 3}

    Args:
        schema: a Schema or a schema name.
        dims: sizes every sample must have (as for [`validate`][trajschema.Schema.validate]).
        max_len: free dims are drawn up to this size (their ``min`` wins when larger).
        with_tags: draw ``(sample, tag)`` pairs whose length tags agree with the sample.

    Raises:
        ValueError: bad ``dims``: as ``validate`` refuses them, a size a free dim does
            not allow, a derived dim that disagrees with its definition or would be
            negative, sizes no sample can be constructed from; a ``max_len`` that is not
            an int in ``0..2**63-1``; sizes or a ``max_len`` that let one sample hold
            more than 2**24 tensor elements; a required field no value satisfies.
        TypeError: ``schema`` is neither a Schema nor a name; ``with_tags`` is not a bool.
    """
    _check_flag(with_tags, "samples", "with_tags")
    return _samples(_spec(schema, dims, max_len, "samples"), with_tags)


def _check_flag(value: Any, call: str, arg: str) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{call}({arg}=...) must be True or False, found {value!r}")


def _stack_scalars(f: Field, values: list[Any]) -> Any:
    """A dense ``(B,)`` column for ``int``/``float``/``bool`` values when it holds them exactly."""
    dtype = {"int": torch.int64, "float": torch.float64, "bool": torch.bool}.get(f.kind)
    if dtype is not None and values:
        try:
            col = torch.tensor(values, dtype=dtype)
        except (OverflowError, RuntimeError, TypeError):
            col = None
        if col is not None and all(a == b or a != a for a, b in zip(col.tolist(), values)):
            return col
    return nontensor_column(values)


def _table(spec: _Spec, rows: list[dict[str, Any]], layout: str, env: Mapping[str, int], choice: _Choice):
    if layout == "tq":
        return wire_batch(rows) if rows else TensorDict({}, batch_size=[0])
    columns: dict[str, Any] = {}
    for f in spec.plan.fields.values():
        if f.name not in choice.present:
            continue
        values = [r[f.name] for r in rows]
        if layout == "nontensor":
            columns[f.name] = NonTensorStack(*values) if values else nontensor_column([])
        elif f.is_tensor:
            columns[f.name] = torch.stack(values) if values else _empty_column(spec, f, env, choice)
        else:
            columns[f.name] = _stack_scalars(f, values)
    td = TensorDict({k: v for k, v in columns.items() if isinstance(v, torch.Tensor)}, batch_size=[len(rows)])
    for k, v in columns.items():
        if not isinstance(v, torch.Tensor):
            td[k] = v
    return td


def _empty_column(spec: _Spec, f: Field, env: Mapping[str, int], choice: _Choice) -> torch.Tensor:
    axes = next(a for g, a in spec.plan.tensors if g.name == f.name)
    return torch.empty((0, *_shape(axes, env)), dtype=choice.dtypes[f.name][0])


@st.composite
def _batches(draw: Callable, spec: _Spec, size: st.SearchStrategy, layout: str, with_tags: bool) -> Any:
    n = draw(size)
    if not is_int(n) or not 0 <= int(n) <= _MAX_BATCH:
        raise ValueError(f"batches(size=...) must draw ints in 0..{_MAX_BATCH}, drew {n!r}")
    rows: list[Any] = []
    envs: list[Mapping[str, int]] = []
    choice = _draw_choice(draw, spec)
    shared = _env_or_raise(draw, spec, choice) if layout == "dense" else {}
    budget, tensors = [_MAX_ELEMENTS], _Tensors(draw)
    for _ in range(int(n)):
        if layout == "list":
            choice = _draw_choice(draw, spec)
        env = shared or _env_or_raise(draw, spec, choice)
        _spend(budget, spec.plan, env)
        if (fixed := _bindable_or_raise(spec, env, choice)) != choice and rows and layout != "list":
            raise _cannot_construct(spec, _Infeasible("the rows of one batch need other optional fields to bind"))
        choice = fixed
        rows.append(_build(draw, spec, env, choice, tensors))
        envs.append(env)
    batch = rows if layout == "list" else _table(spec, rows, layout, shared, choice)
    if not with_tags:
        return batch
    return batch, [draw(_tags(spec.plan, spec.plan.public_dims(env), False)) for env in envs]


def batches(
    schema: Schema | str,
    *,
    size: st.SearchStrategy[int] | int = st.integers(1, 16),  # noqa: B008  # strategies are immutable
    layout: str = "tq",
    dims: Mapping[str, int] | None = None,
    max_len: int = 64,
    with_tags: bool = False,
) -> st.SearchStrategy:
    """A strategy of valid batches of ``schema``; with ``with_tags``, ``(batch, tags)`` with one tag dict per sample.

    Examples:
        >>> from trajschema.testing import batches
        >>> batch, tags = batches("text", layout="tq", with_tags=True).example()  # doctest: +SKIP
        >>> ts.load_schema("text").validate_batch(batch, tags=tags)  # doctest: +SKIP

    Args:
        schema: a Schema or a schema name.
        size: how many samples (a strategy of ints, or an int).
        layout: the batch's form, one of [`BATCH_FORMS`][trajschema.testing.BATCH_FORMS]:
            ``"tq"`` (as TransferQueue returns it),
            ``"dense"``, ``"nontensor"`` or ``"list"`` (see the module docstring).
        dims: sizes every sample must have.
        max_len: free dims are drawn up to this size.
        with_tags: also draw the samples' tag dicts, length tags agreeing with each sample.

    Raises:
        ValueError: an unknown layout; an int ``size`` outside ``0..65536`` (a strategy
            drawing one fails the draw); bad ``dims`` or ``max_len``, as for
            [`samples`][trajschema.testing.samples]; sizes that let a batch of an int ``size`` hold more than 2**24
            tensor elements (a larger batch drawn from a strategy fails the draw).
        TypeError: ``size`` is neither an int nor a strategy; ``with_tags`` is not a bool;
            ``schema`` is neither a Schema nor a name.
    """
    if not isinstance(layout, str) or layout not in BATCH_FORMS:
        raise ValueError(f"batches(layout=...) must be one of {', '.join(BATCH_FORMS)}; found {layout!r}")
    count = None
    if is_int(size):
        if not 0 <= int(size) <= _MAX_BATCH:
            raise ValueError(f"batches(size=...) must be >= 0 and at most {_MAX_BATCH}, found {size}")
        count = int(size)
        size = st.just(count)
    if not isinstance(size, st.SearchStrategy):
        raise TypeError(f"batches(size=...) must be an int or a strategy of ints, found {type(size).__name__}")
    _check_flag(with_tags, "batches", "with_tags")
    spec = _spec(schema, dims, max_len, "batches")
    if count is not None:
        _check_budget(spec.plan, spec.pinned, spec.max_len, count, "batches")
    return _batches(spec, size, layout, with_tags)


# -- invalid samples --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ExpectedViolation:
    """What [`invalid_samples`][trajschema.testing.invalid_samples] broke.

    ``schema.violations(sample, tag=tag)`` reports ``(field, code)``.

    Other violations may come with it (a field of the wrong kind also leaves its dims
    unobserved); this one is always among them.
    """

    field: str
    code: ViolationCode
    tag: Any = None  # the tag dict to validate with (or, for a "<tag>" case, a non-mapping), or None
    note: str = ""


@dataclasses.dataclass(frozen=True)
class _Corruption:
    code: ViolationCode
    field: str
    axis: int = -1  # shape / dim_mismatch: which axis
    force: frozenset[str] = frozenset()  # fields that must be present
    dim: str = ""  # dim_range: the dim; tag: "kind" or "length"
    size: int = 0  # dim_range: the size it gets


def _observations(plan: Plan) -> dict[str, list[tuple[str, int]]]:
    """Dim -> the (field, axis) observing it, in declaration order (as binding counts them)."""
    obs: dict[str, list[tuple[str, int]]] = {}
    for f, axes in plan.tensors:
        for i, (name, _) in enumerate(axes):
            if name is not None:
                obs.setdefault(name, []).append((f.name, i))
    return obs


def _shape_corruptions(spec: _Spec) -> list[_Corruption]:
    plan, out = spec.plan, []
    obs = _observations(plan)
    for f, axes in plan.tensors:
        if f.name not in spec.dtypes:
            continue
        for i, (name, _) in enumerate(axes):
            if name is None or name in plan.dim_plan.fixed:
                out.append(_Corruption("shape", f.name, i, frozenset({f.name})))
            elif obs[name][0] != (f.name, i) and obs[name][0][0] in spec.dtypes:
                out.append(_Corruption("dim_mismatch", f.name, i, frozenset({f.name, obs[name][0][0]})))
    for d in plan.dim_plan.free:
        first = obs.get(d.name, [("", 0)])[0][0]
        if d.name in spec.pinned or first not in spec.dtypes:
            continue
        lowest = d.first_size()
        bad = [d.min - 1] if d.min > 0 else []
        bad += [d.max + 1] if d.max is not None else []
        bad += [lowest + 1] if d.step > 1 and lowest is not None else []
        out += [
            _Corruption("dim_range", first, force=frozenset({first}), dim=d.name, size=b)
            for b in bad
            if _buildable(plan, {**spec.pinned, d.name: b})
        ]
    return out


def _buildable(plan: Plan, pinned: Mapping[str, int]) -> bool:
    """Whether the smallest sample with these sizes fits a draw (unknown, so true, beyond the scheme)."""
    try:
        return _elements(plan, _draw_env(_smallest, plan, pinned, 0, {})) <= _MAX_ELEMENTS
    except _Infeasible:
        return True  # the draw meets it and falls back to a bad tag dict


def _bad_scalars(f: Field) -> list[Any]:
    cands: list[Any] = [math.nan, math.inf, -math.inf, True, False, "not a listed value"]
    ints = [v for v in (f.values or ()) if isinstance(v, int) or (isinstance(v, float) and v.is_integer())]
    ints += [b for b in (f.min, f.max) if b is not None and math.isfinite(b)]
    cands += sorted({int(b) + d for b in ints for d in (-1, 1)} | {math.ceil(b) - 1 for b in ints})
    return [c for c in cands if kind_ok(f.kind, c) and not _passes(f, c)]


def _value_corruptions(spec: _Spec) -> list[_Corruption]:
    out = []
    seen = _observable(spec)
    for f, axes in spec.plan.tensors:
        sizes = [lit if name is None else spec.plan.dim_plan.fixed.get(name, 1) for name, lit in axes]
        if (f.name in spec.bad or (f.name in spec.dtypes and _seen_bounds(f, seen))) and all(sizes):
            out.append(_Corruption("value", f.name, force=frozenset({f.name})))
        last = axes[-1] if axes else (None, 0)
        if f.distinct and f.name in spec.dtypes and all(sizes[:-1]) and (last[0] is not None or last[1] >= 2):
            out.append(_Corruption("repeated", f.name, force=frozenset({f.name})))
    for f in spec.plan.others:
        if f.name in spec.scalars and _bad_scalars(f):
            out.append(_Corruption("value", f.name, force=frozenset({f.name})))
    return out


def _seen_bounds(f: Field, seen: set[str]) -> bool:
    """Whether a bound of ``f`` in dims names only dims validation binds (so breaking it is reported)."""
    return any(e is not None and set(e.names()) <= seen for e in (f.min_expr, f.max_expr))


def _observable(spec: _Spec) -> set[str]:
    """Dims the validator surely binds when every field is present."""
    dp = spec.plan.dim_plan
    seen = set(dp.fixed) | set(spec.pinned) | set(_observations(spec.plan))
    for d in dp.derived:
        if all(n in seen for n in d.expr.names()):
            seen.add(d.name)
    return seen


def _other_corruptions(spec: _Spec) -> list[_Corruption]:
    plan, out = spec.plan, []
    for f in spec.fields_possible():
        if f.required:
            out.append(_Corruption("missing", f.name))
        if f.is_tensor or f.kind != "any":
            out.append(_Corruption("kind", f.name, force=frozenset({f.name})))
        if f.is_tensor and set(DTYPES_BY_NAME.values()) - set(f.dtypes):
            out.append(_Corruption("dtype", f.name, force=frozenset({f.name})))
        if f.is_tensor:
            out.append(_Corruption("rank", f.name, force=frozenset({f.name})))
    everything = frozenset(f.name for f in spec.fields_possible())
    seen = _observable(spec)
    for t in plan.tags.values():
        if t.kind not in (None, "any"):
            out.append(_Corruption("tag", t.name, dim="kind"))
        if t.equals is not None and all(n in seen for n in t.equals.names()):
            out.append(_Corruption("tag", t.name, force=everything, dim="length"))
    if plan.extra == "forbid":
        out.append(_Corruption("extra", _unused("extra_field", plan.fields)))
    return out


_NOT_A_MAPPING = _Corruption("tag", "<tag>")


def _regrow(draw: Callable, spec: _Spec, choice: _Choice, name: str, shape: tuple[int, ...]) -> torch.Tensor:
    dtype, allowed = choice.dtypes[name]
    return _Tensors(draw).tensor(allowed, shape, dtype)


def _corrupt_tensor(
    draw: Callable, spec: _Spec, c: _Corruption, v: torch.Tensor, choice: _Choice, env: Mapping[str, int]
) -> Any:
    if c.code == "kind":
        return draw(st.sampled_from([v.tolist(), "a tensor", 3, (1, 2)]))
    if c.code == "dtype":
        allowed_dtypes = spec.plan.fields[c.field].dtypes
        return v.to(draw(st.sampled_from([d for d in DTYPES_BY_NAME.values() if d not in allowed_dtypes])))
    if c.code == "rank":
        if v.dim() >= 2 and draw(st.booleans()):
            return v.reshape(*v.shape[:-2], v.shape[-2] * v.shape[-1])
        return v.unsqueeze(draw(st.integers(0, v.dim())))
    if c.code in ("shape", "dim_mismatch"):
        shape = list(v.shape)
        s = shape[c.axis]
        shrink = s > 0 and draw(st.booleans())
        shape[c.axis] = s - draw(st.integers(1, min(s, 3))) if shrink else s + draw(st.integers(1, 3))
        return _regrow(draw, spec, choice, c.field, tuple(shape))
    v = v.clone()
    if c.code == "repeated":  # one slice's second value becomes its first
        rows = v.reshape(-1, v.shape[-1])
        i = draw(st.integers(0, rows.shape[0] - 1))
        rows[i, 1] = rows[i, 0]
        return rows.reshape(v.shape)
    # value: one element breaks the checks
    bads = _bads(spec, spec.plan.fields[c.field], choice.dtypes[c.field], env)
    if not bads:
        raise _Infeasible(f"no {choice.dtypes[c.field][0]} value breaks the checks of {c.field} with these sizes")
    v.reshape(-1)[draw(st.integers(0, v.numel() - 1))] = draw(st.sampled_from(bads))
    return v


def _bads(
    spec: _Spec, f: Field, usable: tuple[torch.dtype, _Allowed], env: Mapping[str, int]
) -> tuple[int | float, ...]:
    """Values of ``usable``'s dtype that break ``f``'s checks, bounds in the dims validation binds included."""
    if not f.has_dim_bounds:
        return dict(spec.bad.get(f.name, ())).get(usable, ())
    seen = _observable(spec)
    bounded = f.bounded({n: v for n, v in env.items() if n in seen})
    return tuple(_bad_elements(bounded, usable[0], _allowed(bounded, usable[0])))


def _corrupt_tag(draw: Callable, spec: _Spec, c: _Corruption, tag: Any, env: Mapping[str, int]) -> Any:
    if c is _NOT_A_MAPPING:
        return draw(st.sampled_from([["is_padding"], "is_padding", 3]))
    t = spec.plan.tags[c.field]
    tag = dict(tag or {})
    if c.dim == "kind":
        tag[t.name] = draw(st.sampled_from(_WRONG_TAG[t.kind or "any"]))
    else:
        assert t.equals is not None
        want = t.equals.evaluate(spec.plan.public_dims(env))
        tag[t.name] = want + draw(st.sampled_from([-1, 1, 2])) if want > 0 else want + 1
    return tag


def _draw_case(draw: Callable, spec: _Spec, c: _Corruption) -> tuple[dict[str, Any], ExpectedViolation]:
    plan = spec.plan
    at_least: dict[str, int] = {}
    pinned = dict(spec.pinned)
    if c.code in ("value", "repeated") and plan.fields[c.field].is_tensor:
        axes = next(a for f, a in plan.tensors if f.name == c.field)
        at_least = {name: 1 for name, _ in axes if name}
        if c.code == "repeated" and axes[-1][0] is not None:
            at_least[axes[-1][0]] = 2
    if c.code == "dim_range":
        pinned[c.dim] = c.size
    pick = _picker(draw)
    env = _draw_env(pick, plan, pinned, spec.max_len, at_least)
    _fit_values(pick, dataclasses.replace(spec, pinned=pinned), env, {}, at_least)
    if c.code == "dim_range" and _elements(plan, env) > _MAX_ELEMENTS:
        raise _Infeasible(f"{c.dim}={c.size} is too large to build")
    _spend([_MAX_ELEMENTS], plan, env)
    choice = _bindable(spec, env, _fitting(spec, env, _draw_choice(draw, spec, c.force)), c.force, pinned)
    if c.code == "value" and plan.fields[c.field].is_tensor:
        f, axes = plan.fields[c.field], next(a for g, a in plan.tensors if g.name == c.field)
        usable = [u for u in spec.dtypes[c.field] if _fits(f, axes, u[0], env) and _bads(spec, f, u, env)]
        if not usable:
            raise _Infeasible(f"no dtype of {c.field} holds a value breaking its checks with these sizes")
        choice = _Choice(choice.present, {**choice.dtypes, c.field: draw(st.sampled_from(usable))})
    sample = _build(draw, spec, env, choice)
    tag = draw(st.none() | _tags(plan, plan.public_dims(env), False))
    if c.code == "missing":
        if draw(st.booleans()):
            sample.pop(c.field, None)
        else:
            sample[c.field] = None
    elif c.code == "extra":
        sample[c.field] = draw(st.sampled_from([torch.zeros(2), 1, "x"]))
    elif c.code == "tag":
        tag = _corrupt_tag(draw, spec, c, tag, env)
    elif c.code == "dim_range":
        pass  # the sizes themselves are out of range
    elif plan.fields[c.field].is_tensor:
        sample[c.field] = _corrupt_tensor(draw, spec, c, sample[c.field], choice, env)
    elif c.code == "kind":
        sample[c.field] = draw(st.sampled_from(_WRONG_KIND[plan.fields[c.field].kind]))
    else:  # value of a non-tensor field
        sample[c.field] = draw(st.sampled_from(_bad_scalars(plan.fields[c.field])))
    note = f"{c.code} on {c.field}" + (f" ({c.dim}={c.size})" if c.code == "dim_range" else "")
    return sample, ExpectedViolation(c.field, c.code, tag, note)


@st.composite
def _invalid(draw: Callable, spec: _Spec, cases: tuple[_Corruption, ...]) -> tuple[dict[str, Any], ExpectedViolation]:
    code = draw(st.sampled_from(sorted({c.code for c in cases})))  # each code as likely as any other
    c = draw(st.sampled_from([c for c in cases if c.code == code]))
    try:
        return _draw_case(draw, spec, c)
    except _Infeasible:  # the sizes this corruption needs do not exist: a bad tag dict always does
        pass
    try:
        return _draw_case(draw, spec, _NOT_A_MAPPING)
    except _Infeasible as exc:  # beyond the constructive scheme: no valid sizes to break a tag dict on either
        raise _cannot_construct(spec, exc) from None


def corruptions(schema: Schema | str, *, dims: Mapping[str, int] | None = None) -> list[tuple[ViolationCode, str]]:
    """The ``(code, field)`` pairs that [`invalid_samples`][trajschema.testing.invalid_samples] may produce."""
    spec = _spec(schema, dims, 0, "corruptions")
    return sorted({(c.code, c.field) for c in _cases(spec)})


def _cases(spec: _Spec) -> tuple[_Corruption, ...]:
    return (*_other_corruptions(spec), *_shape_corruptions(spec), *_value_corruptions(spec), _NOT_A_MAPPING)


def invalid_samples(
    schema: Schema | str,
    *,
    dims: Mapping[str, int] | None = None,
    max_len: int = 64,
    codes: Sequence[str] | None = None,
) -> st.SearchStrategy:
    """A strategy of ``(sample, expected)``: a sample broken in one labelled way.

    ``schema.violations(sample, tag=expected.tag, dims=dims)`` reports a violation with
    ``expected.field`` and ``expected.code`` (possibly among others). The corruptions:
    ``missing`` (a required field absent or ``None``), ``kind`` (a tensor replaced by a
    list, string or number; a scalar of the wrong kind), ``dtype``, ``rank``, ``shape``
    (an axis of a fixed dim or a literal size resized), ``dim_mismatch`` (one field
    disagreeing with the others on a dim), ``dim_range`` (a free dim outside its
    ``min``/``max``/``multiple_of``, every field agreeing), ``value`` (one element or
    scalar breaking ``values``/``min``/``max``/``finite``, or a bound in dims, an expert
    id ``>= experts``, where validation binds those dims: a shape observes them or
    ``dims=`` pins them), ``repeated`` (for a ``distinct`` field: one slice's second value
    copied from its first, a token routed to one expert twice), ``tag`` (a tag of the wrong
    kind, a length tag off by some, or a tag "dict" that is no mapping) and ``extra``
    (an undeclared field, for ``extra: forbid`` schemas). Each code is drawn as often
    as any other. Where the sizes a corruption needs do not exist (a ``dim_range`` size
    that would leave a derived dim negative), the case falls back to a tag "dict" that
    is no mapping (``field="<tag>"``, ``code="tag"``), also under ``codes=``.

    A ``dim_mismatch`` resizes an axis of a dim that an earlier field (or axis) also
    observes, so the majority keeps the true size and the resized field is the one
    blamed; a ``dim_range`` is labelled with the first field observing the dim.

    Examples:
        >>> from trajschema.testing import invalid_samples
        >>> sample, expected = invalid_samples("text", codes=["missing"]).example()  # doctest: +SKIP
        >>> expected.code  # doctest: +SKIP
        'missing'

    Args:
        schema: a Schema or a schema name.
        dims: sizes every sample must have (validate with the same ``dims=``).
        max_len: free dims are drawn up to this size.
        codes: draw only these corruptions (default: every one the schema allows).

    Raises:
        ValueError: ``codes`` names a code that is not one of the corruptions above, or
            none this schema allows; bad ``dims``/``max_len``, as for [`samples`][trajschema.testing.samples].
        TypeError: ``codes`` is a string or not a collection of strings; ``schema`` is
            neither a Schema nor a name.
    """
    wanted = _check_codes(codes)
    spec = _spec(schema, dims, max_len, "invalid_samples")
    cases = _cases(spec)
    if wanted is not None:
        cases = tuple(c for c in cases if c.code in wanted)
        if not cases:
            raise ValueError(f"schema {spec.plan.name!r} allows no corruption with codes {sorted(wanted)}")
    return _invalid(spec, cases)


#: The corruptions [`invalid_samples`][trajschema.testing.invalid_samples] makes, by code.
_CODES = ("missing", "kind", "dtype", "rank", "shape", "dim_mismatch", "dim_range", "value", "repeated", "tag", "extra")


def _check_codes(codes: Any) -> frozenset[str] | None:
    if codes is None:
        return None
    if isinstance(codes, (str, bytes)) or not isinstance(codes, Iterable) or isinstance(codes, Mapping):
        raise TypeError(f"invalid_samples(codes=...) must be a list of code names, found {codes!r}")
    wanted = list(codes)
    for c in wanted:
        if not isinstance(c, str) or c not in _CODES:
            known = ", ".join(_CODES)
            raise ValueError(f"invalid_samples(codes=...): {c!r} is not a corruption invalid_samples makes ({known})")
    return frozenset(wanted)
