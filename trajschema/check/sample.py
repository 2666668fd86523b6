"""Checking one sample: the single source of violation records.

The check runs in phases — observe (presence, kinds, dtypes, ranks and what each axis
says about the dims), bind (`trajschema.check.binding.bind` on Python ints), then tags,
extra fields and values (`trajschema.core.values`) — and each phase appends records.
The fast paths (the generated checker, the vectorized batch screen) never write a
message: they only say "clean" or "look closer", and this module writes the records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from trajschema.check.binding import Binding, ScalarSizes, bind
from trajschema.check.plan import Plan, dtype_overflow
from trajschema.core import (
    DISTINCT_LABEL,
    Field,
    Violation,
    ViolationCode,
    describe_value,
    dtype_name,
    failure_summary,
    fmt_shape,
    kind_ok,
    repeat_summary,
    scalar_failures,
)

__all__ = ["check_sample", "tag_problems"]

_SCALAR = ScalarSizes()


@dataclasses.dataclass
class _Report:
    """The records of one sample, and what the observe phase saw."""

    index: int | None
    out: list[Violation] = dataclasses.field(default_factory=list)
    obs: dict[str, list[tuple[str, int]]] = dataclasses.field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    literal_bad: set[str] = dataclasses.field(default_factory=set)

    def add(self, field: str, code: ViolationCode, expected: str, actual: str, message: str) -> None:
        self.out.append(Violation(self.index, field, code, expected, actual, message))


def check_sample(
    plan: Plan,
    sample: Mapping[str, Any],
    *,
    tag: Any = None,
    dims: Mapping[str, int] | None = None,
    depth: str = "values",
    index: int | None = None,
    opaque: frozenset[str] = frozenset(),
) -> tuple[dict[str, int], list[Violation]]:
    """Check one sample (already a mapping); return (dims bound, violations). Never raises for bad data.

    ``opaque`` names fields whose shapes are unknowable (a row of a ``meta`` jagged column):
    their kind, dtype and rank are checked, their sizes are not.
    """
    r = _Report(index)
    _observe_tensors(plan, sample, r, opaque)
    _observe_others(plan, sample, r)
    b = bind(plan.dim_plan, r.obs, dims or {}, _SCALAR)
    _report_shapes(plan, b, r)
    _report_relations(plan, b, r)
    _report_ranges(plan, b, r)
    _report_overflow(plan, sample, b.env, r)
    if tag is not None:
        for field, expected, actual, message in tag_problems(plan, tag, b.env):
            r.add(field, "tag", expected, actual, message)
    if plan.extra == "forbid":
        for k in sample:
            if k not in plan.fields:
                r.add(
                    k if isinstance(k, str) else repr(k),
                    "extra",
                    "no such field",
                    describe_value(sample[k]),
                    f"field is not declared by schema {plan.name!r} (extra: forbid)",
                )
    if depth == "values":
        for f in plan.valued:
            if sample.get(f.name) is not None:
                _report_values(plan.bounded(f, b.env), sample[f.name], r)
    return plan.public_dims(b.env), r.out


def _observe_tensors(plan: Plan, sample: Mapping[str, Any], r: _Report, opaque: frozenset[str]) -> None:
    for f, axes in plan.tensors:
        v = sample.get(f.name)
        if v is None:
            if f.required:
                r.add(f.name, "missing", f.describe(), "absent", f"required field is missing (expected {f.describe()})")
            continue
        if not isinstance(v, torch.Tensor) or v.is_nested or v.layout != torch.strided:
            expected = f"tensor {f.describe()}"
            r.add(f.name, "kind", expected, describe_value(v), f"expected a {expected}, found {describe_value(v)}")
            continue
        if v.dtype not in f.dtypes:
            allowed = " or ".join(dtype_name(d) for d in f.dtypes)
            r.add(f.name, "dtype", allowed, dtype_name(v.dtype), f"dtype {dtype_name(v.dtype)} is not {allowed}")
        shape = tuple(v.shape)
        if len(shape) != len(axes):
            want = f"{len(axes)} dims {_fmt_expected(f, {})}"
            got = f"{len(shape)} dims {fmt_shape(shape)}"
            r.add(f.name, "rank", want, got, f"expected {want}, found {got}")
            continue
        if f.name in opaque:
            continue
        r.shapes[f.name] = shape
        for (name, lit), size in zip(axes, shape, strict=True):
            if name is None:
                if size != lit:
                    r.literal_bad.add(f.name)
            else:
                r.obs.setdefault(name, []).append((f.name, size))


def _observe_others(plan: Plan, sample: Mapping[str, Any], r: _Report) -> None:
    for f in plan.others:
        v = sample.get(f.name)
        if v is None:
            if f.required:
                r.add(f.name, "missing", f.kind, "absent", f"required field is missing (expected {f.kind})")
            continue
        if not kind_ok(f.kind, v):
            r.add(f.name, "kind", f.kind, describe_value(v), f"expected {f.kind}, found {describe_value(v)}")


def _fmt_expected(f: Field, env: Mapping[str, int]) -> str:
    parts = []
    for e in f.shape or ():
        if e.is_int:
            parts.append(str(e.args[0]))
            continue
        val = e.evaluate(env)
        parts.append(f"{e}={val}" if val is not None else str(e))
    return "(" + ", ".join(parts) + ")"


def _report_shapes(plan: Plan, b: Binding[int], r: _Report) -> None:
    """One shape record per field: the first dim it disagrees with decides the code."""
    codes: dict[str, ViolationCode] = {}
    for field, dim, bad in b.odd:
        if bad:
            codes.setdefault(field, "shape" if dim in plan.dim_plan.fixed else "dim_mismatch")
    for field in r.literal_bad:
        codes.setdefault(field, "shape")
    for field in [f.name for f, _ in plan.tensors if f.name in codes]:  # declaration order
        f, shape = plan.fields[field], r.shapes[field]
        want = _fmt_expected(f, b.env)
        r.add(field, codes[field], want, fmt_shape(shape), f"shape {fmt_shape(shape)} does not match {want}")


def _report_relations(plan: Plan, b: Binding[int], r: _Report) -> None:
    for name, target, computed, bad in b.relations:
        if not bad:
            continue
        d = plan.dim_plan.dims[name]
        field, where = _where_bound(plan, b, r, name)
        label = str(d.expr) if name in plan.hidden else f"{name} = {d.expr}"
        inputs = ", ".join(f"{n}={b.env[n]}" for n in d.expr.names() if n in b.env)
        if computed is None:
            shown = d.expr if name in plan.hidden else name
            msg = f"{shown} is {target} {where}, {_unsolved(d.expr, b.env)}" + (f" ({inputs})" if inputs else "")
            r.add(field, "dim_mismatch", label, str(target), msg)
        else:
            msg = f"{where} agree on {target} but {label} = {computed} ({inputs})"
            r.add(field, "dim_mismatch", f"{computed} ({label})", str(target), msg)


def _unsolved(e: Any, env: Mapping[str, int]) -> str:
    """Why binding could not solve ``e`` for its unbound inputs, for a message."""
    unbound = [n for n in e.names() if n not in env]
    if len(unbound) > 1:
        return f"validation solves for one unbound dim at a time, and {', '.join(unbound)} are bound by no field"
    lin = e.linear(unbound, env) if unbound else None
    if lin is not None and lin[1][unbound[0]] == 0:  # x * y with y = 0: every x gives it, none uniquely
        return f"which does not depend on {unbound[0]} at these sizes, so validation cannot solve it for {unbound[0]}"
    return f"which no sizes of {', '.join(unbound or e.names())} satisfy"


def _where_bound(plan: Plan, b: Binding[int], r: _Report, name: str) -> tuple[str, str]:
    """The field to blame for derived dim ``name``'s size, and where that size came from, for a message.

    Its observers; else, for a size solved from another derived dim's relation, the
    fields observing that one (``b`` solved from ``a = b + c`` on field ``z``); else ``dims=``.
    """
    who = [f for f, _ in r.obs.get(name, [])]
    if who:
        return who[0], f"on {', '.join(who)}"
    src, chain = name, list[str]()
    while src in b.solved_from and len(chain) <= len(b.solved_from):  # bounded: the map has no cycle
        src = b.solved_from[src]
        chain.append(src)
    if not chain:
        return name, "on dims="
    top = plan.dim_plan.dims[src]
    via = [f for f, _ in r.obs.get(src, [])]
    shown = str(top.expr) if src in plan.hidden else f"{src} = {top.expr}"
    return (via[0] if via else name), f"(solved from {shown} on {', '.join(via) or 'dims='})"


def _report_ranges(plan: Plan, b: Binding[int], r: _Report) -> None:
    for d, bad in b.ranges:
        if not bad:
            continue
        who = [f for f, _ in r.obs.get(d.name, [])]
        # A dim solved from an expression has no field of its own; name what bound it.
        via = (x.name for x in plan.dim_plan.derived if d.name in x.expr.names() and r.obs.get(x.name))
        if who:
            field = who[0]
        elif d.name in b.solved_from:  # solved down a chain: the field observing its top
            field = _where_bound(plan, b, r, d.name)[0]
        else:
            field = next(via, d.name)
        size = b.env[d.name]
        r.add(
            field,
            "dim_range",
            f"{d.name} {d.describe()}",
            f"{d.name}={size}",
            f"dim {d.name}={size} is not {d.describe()}",
        )


def _same(value: Any, size: Any) -> bool:
    """Whether a tag's ``value`` equals a dim ``size``; a value that cannot say (a tensor of 0 or 2+ elements,
    an object whose ``==`` raises or answers something without a truth value) does not."""
    try:
        return bool(value == size)
    except Exception:
        return False


def tag_problems(plan: Plan, tag: Any, env: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """``(field, expected, actual, message)`` per problem of a tag dict, given the sample's dims."""
    if not isinstance(tag, Mapping):
        return [
            ("<tag>", "a mapping", describe_value(tag), f"a tag dict must be a mapping, found {describe_value(tag)}")
        ]
    out = []
    for t in plan.tags.values():
        if t.name not in tag:
            continue
        v = tag[t.name]
        if t.kind is not None and not kind_ok(t.kind, v, tensors=False):
            out.append((t.name, t.kind, describe_value(v), f"tag must be {t.kind}, found {describe_value(v)}"))
            continue
        if t.equals is not None:
            want = t.equals.evaluate(env)
            if want is not None and not _same(v, want):
                out.append(
                    (t.name, f"{want} ({t.equals})", repr(v), f"tag says {v!r} but the sample's {t.equals} is {want}")
                )
    return out


def _report_overflow(plan: Plan, sample: Mapping[str, Any], env: Mapping[str, int], r: _Report) -> None:
    """A tensor whose dtype is allowed but cannot hold the ids its dim bounds allow at this sample's sizes."""
    for f in plan.dim_bounded:
        v = sample.get(f.name)
        if not isinstance(v, torch.Tensor) or v.dtype not in f.dtypes:
            continue  # absent, or already a kind/dtype problem
        found = dtype_overflow(f, v.dtype, env)
        if found is not None:
            expected, why = found
            r.add(f.name, "dtype", expected, dtype_name(v.dtype), f"dtype {dtype_name(v.dtype)} {why}")


def _report_values(f: Field, v: Any, r: _Report) -> None:
    if not f.is_tensor:
        if not kind_ok(f.kind, v):
            return  # already reported as a kind problem
        for expected in scalar_failures(f, v):
            shown = repr(v.item()) if isinstance(v, torch.Tensor) else repr(v)
            r.add(f.name, "value", expected, shown, f"{shown} is not {expected}")
        return
    if not isinstance(v, torch.Tensor) or v.is_nested or v.layout != torch.strided or v.dtype not in f.dtypes:
        return  # already reported as kind/dtype
    # Counted in bounded memory: an expanded tensor of billions of elements is a few bytes of storage.
    for bad in failure_summary(f, v):
        example = v[bad.first].item()
        where = f"[{','.join(map(str, bad.first))}]"
        found = f"{bad.count} of {v.numel()} elements (first at {where}: {example!r})"
        r.add(
            f.name,
            "value",
            bad.expected,
            found,
            f"{bad.count} of {v.numel()} elements are not {bad.expected} (first at {where}: {example!r})",
        )
    if f.distinct:
        _report_repeats(f, v, r)


def _report_repeats(f: Field, v: torch.Tensor, r: _Report) -> None:
    rep = repeat_summary(v)
    if rep is None:
        return
    at = f"first at [{','.join(map(str, rep.first))}]: " if rep.first else ""
    found = f"{rep.count} of {rep.slices} slices ({at}{rep.value!r} repeats)"
    message = f"{rep.count} of {rep.slices} slices along the last axis are not distinct ({at}{rep.value!r} repeats)"
    r.add(f.name, "repeated", DISTINCT_LABEL, found, message)
