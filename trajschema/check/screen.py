"""Vectorized screening of a TransferQueue-shaped TensorDict batch.

Per-sample shapes are read from offsets and nested sizes (never by unbinding samples),
and the dims are bound for all samples at once by the same algorithm that binds one
sample (`trajschema.check.binding.bind`, on tensors of sizes). The result is only the
list of rows that need a closer look; `_sample` writes the violation records for
those rows, so the two paths cannot disagree on wording.

Sizes and masks stay on the device of the columns they come from; the one read of
device memory is the final mask of suspicious rows. ``meta`` columns have no sizes to
read: what can be known from their static shapes is checked, the rest is not.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trajschema.check.binding import TensorSizes, bind
from trajschema.check.columns import (
    BatchView,
    column_shapes,
    is_opaque,
    nontensor_values,
    ragged_axis_is_last,
    rows_flagged,
    rows_hit,
)
from trajschema.check.plan import Plan, dtype_overflow
from trajschema.check.sample import tag_problems
from trajschema.core import (
    Expr,
    Field,
    failing_positions,
    has_repeats,
    integer_capacity,
    is_int,
    kind_ok,
    kinds_ok,
    position_extremes,
    repeat_positions,
    scalar_failures,
    tensor_clean,
    tensor_has_failures,
    value_failures,
)

__all__ = ["suspicious_rows"]


class _LookAtAll(Exception):
    """A column-wide problem: every row needs the full check."""


class _Marks:
    """Suspicious rows: host-side marks, and marks on the sizes' device."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.host = torch.zeros(n, dtype=torch.bool)
        self.device: torch.Tensor | None = None

    def mark(self, mask: Any) -> None:
        if not isinstance(mask, torch.Tensor):
            if mask:
                self.host[:] = True
            return
        if mask.device.type == "cpu":
            self.host |= mask
        elif self.device is None:
            self.device = mask.clone()
        else:
            self.device |= mask

    def rows(self) -> list[int]:
        bad = self.host
        if self.device is not None and not self.device.is_meta:
            bad = bad | self.device.cpu()  # the one read of device memory
        return bad.nonzero().flatten().tolist()


def suspicious_rows(
    plan: Plan, view: BatchView, *, tags: Sequence[Any] | None, dims: Mapping[str, int] | None, depth: str
) -> list[int]:
    """Rows of a TensorDict batch that may break the schema; a clean row is never listed."""
    n = view.n
    if n == 0:
        return []
    marks = _Marks(n)
    deferred: list[tuple[Field, torch.Tensor]] = []
    try:
        obs = _observe_tensors(plan, view, depth, marks, deferred)
        _observe_others(plan, view, depth, marks, deferred)
        if plan.extra == "forbid" and any(k not in plan.fields for k in view.keys()):
            raise _LookAtAll
    except _LookAtAll:
        return list(range(n))
    device = _common_device(obs)
    if device is not None:
        obs = {k: [(f, s if s.device == device else s.to(device)) for f, s in v] for k, v in obs.items()}
    b = bind(plan.dim_plan, obs, dims or {}, TensorSizes(n, device or torch.device("cpu")))
    for _, _, bad in b.odd:
        marks.mark(bad)
    for _, _, _, bad in b.relations:
        marks.mark(bad)
    for _, bad in b.ranges:
        marks.mark(bad)
    for f, col in deferred:
        if isinstance(col, list):
            _screen_scalar_dim_bounds(plan, f, col, b.env, dims or {}, marks)
        else:
            _screen_dim_bounds(plan, f, col, b.env, dims or {}, depth, marks)
    if tags is not None:
        _screen_tags(plan, tags, b.env, marks)
    return marks.rows()


def _common_device(obs: Mapping[str, list[tuple[str, torch.Tensor]]]) -> torch.device | None:
    """Where to bind sizes from several devices: ``meta`` if any are (nothing is knowable
    then), else the one accelerator they use (static host sizes are copied to it, which
    reads nothing), else the host (sizes are tiny)."""
    devices = {s.device for seen in obs.values() for _, s in seen}
    if not devices:
        return None
    if any(d.type == "meta" for d in devices):
        return torch.device("meta")
    others = {d for d in devices if d.type != "cpu"}
    return others.pop() if len(others) == 1 else torch.device("cpu")


def _observe_tensors(
    plan: Plan, view: BatchView, depth: str, marks: _Marks, deferred: list[tuple[Field, torch.Tensor]]
) -> dict[str, list[tuple[str, Any]]]:
    """Observe each tensor column's sizes; screen its values, or defer them (to ``deferred``) when
    its bounds are written in dims, which only binding knows."""
    obs: dict[str, list[tuple[str, Any]]] = {}
    keys = view.keys()
    for f, axes in plan.tensors:
        if f.name not in keys:
            if f.required:
                raise _LookAtAll
            continue
        col = view.column(f.name)
        if is_opaque(col):  # sizes unknowable: only what the column as a whole shows
            if col.dtype not in f.dtypes or col.dim() - 1 != len(axes):
                raise _LookAtAll
            continue
        shapes = column_shapes(col, view.n)
        if shapes is None or col.dtype not in f.dtypes or shapes.shape[1] != len(axes):
            raise _LookAtAll
        for i, (name, lit) in enumerate(axes):
            if name is None:
                marks.mark(shapes[:, i] != lit)
            else:
                obs.setdefault(name, []).append((f.name, shapes[:, i]))
        if f.has_dim_bounds:
            deferred.append((f, col))
        elif depth == "values" and f.has_value_checks:
            marks.mark(_bad_value_rows(f, col, view.n))
        if depth == "values" and f.distinct:
            marks.mark(_repeat_rows(col, view.n))
    return obs


def _observe_others(plan: Plan, view: BatchView, depth: str, marks: _Marks, deferred: list[tuple[Field, Any]]) -> None:
    keys = view.keys()
    for f in plan.others:
        if f.name not in keys:
            if f.required:
                raise _LookAtAll
            continue
        col = view.column(f.name)
        values = nontensor_values(col, view.n)
        if values is None:
            if not (isinstance(col, torch.Tensor) and not col.is_nested and col.dim() == 1):
                raise _LookAtAll
            # A dense column of scalars, e.g. num_turns written as an int64 tensor.
            if not kind_ok(f.kind, col[0]):
                raise _LookAtAll
            if depth == "values" and f.has_dim_bounds:
                deferred.append((f, col))
            elif depth == "values" and f.has_value_checks:
                marks.mark(_bad_value_rows(f, col, view.n))
            continue
        if f.required and any(v is None for v in values):
            marks.mark(torch.tensor([v is None for v in values]))
        if not kinds_ok(f.kind, values):
            marks.mark(torch.tensor([v is not None and not kind_ok(f.kind, v) for v in values]))
        if depth == "values" and f.has_value_checks:
            marks.mark(
                torch.tensor([v is not None and kind_ok(f.kind, v) and bool(scalar_failures(f, v)) for v in values])
            )
            if f.has_dim_bounds:
                deferred.append((f, values))


def _bad_value_rows(f: Field, col: torch.Tensor, n: int) -> torch.Tensor:
    """Rows of a tensor column with an element breaking ``f``'s value checks, on the column's device."""
    if not col.is_nested:
        if tensor_clean(f, col):
            return torch.zeros(n, dtype=torch.bool, device=col.device)
        return failing_positions(f, col)
    if col.layout == torch.jagged:
        values = col.values()
        if tensor_clean(f, values):
            return torch.zeros(n, dtype=torch.bool, device=values.device)
        return rows_hit(col, n, functools.partial(failing_positions, f))
    # Strided nested tensors (TransferQueue's rare fallback) have no flat values view.
    return torch.tensor([tensor_has_failures(f, t) for t in col.unbind()])


def _repeat_rows(col: torch.Tensor, n: int) -> torch.Tensor | bool:
    """Rows of a tensor column with a slice along the last axis that repeats a value (``distinct``)."""
    if not col.is_nested:
        return repeat_positions(col, 0) if col.dim() >= 2 else False
    if col.layout == torch.jagged and not ragged_axis_is_last(col):
        return rows_hit(col, n, repeat_positions)
    # The ragged axis is the last (slices would run across samples in the flat values), or a
    # strided nested tensor without flat values: per sample.
    return torch.tensor([has_repeats(t) for t in col.unbind()], dtype=torch.bool)


def _screen_dim_bounds(
    plan: Plan,
    f: Field,
    col: torch.Tensor,
    env: Mapping[str, Any],
    pinned: Mapping[str, int],
    depth: str,
    marks: _Marks,
) -> None:
    """Screen a column whose bounds are written in dims, now that binding has sized them.

    Bounds over fixed and pinned dims only are the same for every row: the literal
    screen, exactly. Bounds over dims sized per sample (``max: response``) are compared
    with each row's extremes.
    """
    static = {**plan.dim_plan.fixed, **pinned}
    exprs = [e for e in (f.min_expr, f.max_expr) if e is not None]
    if all(e.evaluate(static) is not None for e in exprs):
        if dtype_overflow(f, col.dtype, static) is not None:
            marks.mark(True)
        elif depth == "values":
            marks.mark(_bad_value_rows(plan.bounded(f, static), col, marks.n))
        return
    lo, hi = (_per_row(e, env, marks, col) for e in (f.min_expr, f.max_expr))
    cap = integer_capacity(col.dtype)
    if cap is not None:  # rows whose sizes the dtype cannot hold the ids of: the full check says which
        for bound, end, over in ((hi, cap[1], True), (lo, cap[0], False)):
            if bound is not None and -(2**63) <= end < 2**63:  # no int64 size passes uint64's ends
                marks.mark(bound > end if over else bound < end)
    if depth == "values":
        marks.mark(_bad_value_rows(f, col, marks.n))  # the literal checks, the same for every row
        if lo is not None or hi is not None:
            marks.mark(_rows_out_of(col, marks.n, lo, hi))


def _screen_scalar_dim_bounds(
    plan: Plan, f: Field, values: list[Any], env: Mapping[str, Any], pinned: Mapping[str, int], marks: _Marks
) -> None:
    """Screen a non-tensor column's values (already screened against the literal checks) against dim bounds."""
    static = {**plan.dim_plan.fixed, **pinned}
    exprs = [e for e in (f.min_expr, f.max_expr) if e is not None]
    if all(e.evaluate(static) is not None for e in exprs):
        g = plan.bounded(f, static)
        marks.mark(torch.tensor([v is not None and kind_ok(f.kind, v) and bool(scalar_failures(g, v)) for v in values]))
        return
    # Python values, checked one by one anyway: the per-sample sizes are read to the host once.
    lo, hi = (None if e is None else e.evaluate(env) for e in (f.min_expr, f.max_expr))
    if any(isinstance(x, torch.Tensor) and x.is_meta for x in (lo, hi)):
        return
    los = lo.tolist() if isinstance(lo, torch.Tensor) else [lo] * marks.n
    his = hi.tolist() if isinstance(hi, torch.Tensor) else [hi] * marks.n
    marks.mark(
        torch.tensor(
            [
                v is not None and kind_ok(f.kind, v) and bool(value_failures(v, values=None, lo=a, hi=b, finite=False))
                for v, a, b in zip(values, los, his)
            ]
        )
    )


def _per_row(e: Expr | None, env: Mapping[str, Any], marks: _Marks, col: torch.Tensor) -> torch.Tensor | None:
    """A bound's value per row (int64, on the column's device), or ``None`` when a dim it names is unbound.

    int64 arithmetic wraps around; rows where the bound might (``|bound| >= 2**62`` in float64)
    are marked for the full check, which computes in Python ints.
    """
    if e is None:
        return None
    v = e.evaluate(env)
    if v is None or (isinstance(v, torch.Tensor) and v.is_meta):
        return None
    if not isinstance(v, torch.Tensor):
        v = torch.full((marks.n,), int(v), dtype=torch.int64)
    wide = {n: x.to(torch.float64) if isinstance(x, torch.Tensor) else float(x) for n, x in env.items()}
    marks.mark(e.evaluate(wide).abs() >= 2.0**62)
    return v.to(col.device if not col.is_meta else torch.device("cpu"))


def _rows_out_of(col: torch.Tensor, n: int, lo: torch.Tensor | None, hi: torch.Tensor | None) -> Any:
    """Rows of a column with an element below its row's ``lo`` or above its ``hi``, from per-position extremes.

    Exact: integers compare as int64; floats as float64, which holds every float element
    exactly and every bound up to 2**53 (a row with a larger bound is looked at closely).
    """
    if col.is_meta:
        return False
    if col.dtype == torch.uint64 or (col.is_nested and col.layout != torch.jagged):
        return True  # no int64 extremes, or no flat values: every row gets the full check
    if not col.is_nested:
        ext = position_extremes(col, 0)
        return False if ext is None else _outside(*ext, lo, hi, col.dtype.is_floating_point)

    def flag(part: torch.Tensor, axis: int, owner: torch.Tensor) -> torch.Tensor:
        ext = position_extremes(part, axis)
        if ext is None:
            return torch.zeros(part.shape[axis], dtype=torch.bool, device=part.device)
        low = None if lo is None else lo[owner]
        high = None if hi is None else hi[owner]
        return _outside(*ext, low, high, part.dtype.is_floating_point)

    return rows_flagged(col, n, flag)


def _outside(
    small: torch.Tensor, big: torch.Tensor, lo: torch.Tensor | None, hi: torch.Tensor | None, is_float: bool
) -> torch.Tensor:
    bad = torch.zeros(small.shape, dtype=torch.bool, device=small.device)
    for bound, seen, above in ((hi, big, True), (lo, small, False)):
        if bound is None:
            continue
        if is_float:
            bad |= bound.abs() > 2**53  # beyond float64's exact integers
            b = bound.to(torch.float64)
            bad |= ~(seen <= b) if above else ~(seen >= b)  # NaN breaks both
        else:
            bad |= seen > bound if above else seen < bound
    return bad


def _screen_tags(plan: Plan, tags: Sequence[Any], env: Mapping[str, torch.Tensor], marks: _Marks) -> None:
    """Tag dicts are Python objects: kinds are checked per row, length tags against the sizes, vectorized."""
    length_tags = {t.name for t in plan.length_tags}
    for i, tag in enumerate(tags):
        if not isinstance(tag, Mapping) or tag_problems(plan, tag, {}):  # with no dims: kinds only
            marks.host[i] = True
        elif any(t in tag and not _is_int(tag[t]) for t in length_tags):
            marks.host[i] = True  # a length tag the sizes cannot be compared with here
    for t in plan.length_tags:
        want = t.equals.evaluate(env) if t.equals is not None else None
        if want is None:
            continue
        present = [isinstance(g, Mapping) and t.name in g and _is_int(g[t.name]) for g in tags]
        if not any(present):
            continue
        got = [int(g[t.name]) if p else 0 for g, p in zip(tags, present)]
        if any(abs(v) >= 2**63 for v in got):  # cannot be a size; the full check says why
            marks.host |= torch.tensor([p and abs(v) >= 2**63 for v, p in zip(got, present)])
            got = [v if abs(v) < 2**63 else -1 for v in got]
        want = want if isinstance(want, torch.Tensor) else torch.full((marks.n,), int(want), dtype=torch.int64)
        dev = want.device
        marks.mark(torch.tensor(present, device=dev) & (torch.tensor(got, dtype=torch.int64, device=dev) != want))


def _is_int(v: Any) -> bool:
    return is_int(v)
