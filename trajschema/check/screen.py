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
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trajschema.check.binding import TensorSizes, bind
from trajschema.check.columns import BatchView, column_shapes, is_opaque, nontensor_values, rows_hit
from trajschema.check.plan import Plan
from trajschema.check.sample import tag_problems
from trajschema.core import (
    Field,
    failing_positions,
    kind_ok,
    kinds_ok,
    scalar_failures,
    tensor_clean,
    tensor_has_failures,
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
    try:
        obs = _observe_tensors(plan, view, depth, marks)
        _observe_others(plan, view, depth, marks)
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


def _observe_tensors(plan: Plan, view: BatchView, depth: str, marks: _Marks) -> dict[str, list[tuple[str, Any]]]:
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
        if depth == "values" and f.has_value_checks:
            marks.mark(_bad_value_rows(f, col, view.n))
    return obs


def _observe_others(plan: Plan, view: BatchView, depth: str, marks: _Marks) -> None:
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
            if depth == "values" and f.has_value_checks:
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
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)
