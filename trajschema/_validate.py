"""Checking samples and batches against a schema.

There is one source of violation records, :func:`check_sample`. Two fast paths sit in
front of it and never write a message themselves: :func:`validate_sample` first tries a
straight-line check that only says "clean" or "look closer", and :func:`check_batch`
checks a TransferQueue-shaped TensorDict column by column, vectorized over samples,
and hands only the suspicious rows to :func:`check_sample`. So fast and slow paths
cannot disagree on wording, and a clean batch never loops over samples in Python.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ._dims import DerivedDim, FixedDim, FreeDim, solve_for
from ._errors import SchemaError, Violation
from ._schema import Field, Schema, short_dtype

__all__ = ["check_batch", "check_sample", "describe_value", "validate_sample"]

_DEPTHS = ("shapes", "values")


# ---------------------------------------------------------------------------
# The plan: everything about a schema that checking needs, derived once.


@dataclasses.dataclass(frozen=True)
class _Plan:
    tensors: tuple[tuple[Field, tuple[tuple[str | None, int], ...]], ...]
    others: tuple[Field, ...]
    dims: dict[str, Any]  # schema dims plus one hidden derived dim per inline expression
    derived: tuple[DerivedDim, ...]  # topological order
    hidden: frozenset[str]
    fixed: dict[str, int]
    free: tuple[FreeDim, ...]
    # The generated straight-line checker (see _fastpath).
    fast: Any = None


def _plan(schema: Schema) -> _Plan:
    if schema._plan is not None:
        return schema._plan
    dims: dict[str, Any] = dict(schema.dims)
    hidden: set[str] = set()
    tensors = []
    for f in schema.fields.values():
        if not f.is_tensor:
            continue
        axes: list[tuple[str | None, int]] = []
        for e in f.shape or ():
            if e.is_int:
                axes.append((None, e.args[0]))
                continue
            name = e.args[0] if e.is_name else f"({e})"
            if not e.is_name and name not in dims:
                dims[name] = DerivedDim(name, e)
                hidden.add(name)
            axes.append((name, -1))
        tensors.append((f, tuple(axes)))
    order: list[DerivedDim] = []
    seen: set[str] = set()

    def visit(n: str) -> None:
        if n in seen:
            return
        seen.add(n)
        d = dims[n]
        if isinstance(d, DerivedDim):
            for m in d.expr.names():
                visit(m)
            order.append(d)

    for n in dims:
        visit(n)
    plan = _Plan(
        tensors=tuple(tensors),
        others=tuple(f for f in schema.fields.values() if not f.is_tensor),
        dims=dims,
        derived=tuple(order),
        hidden=frozenset(hidden),
        fixed={n: d.size for n, d in dims.items() if isinstance(d, FixedDim)},
        free=tuple(d for d in dims.values() if isinstance(d, FreeDim)),
    )
    from ._fastpath import compile_fast_checker

    plan = dataclasses.replace(plan, fast=compile_fast_checker(plan, _kind_ok))
    schema._plan = plan
    return plan


# ---------------------------------------------------------------------------
# Describing values without printing their contents


def describe_value(v: Any) -> str:
    """``i16[41,4,2]`` for a tensor, the type name (and a short repr) otherwise."""
    if isinstance(v, torch.Tensor):
        if v.is_nested:
            layout = "jagged" if v.layout == torch.jagged else "strided"
            return f"{short_dtype(v.dtype)} {layout} nested tensor of {v.size(0)}"
        layout = "" if v.layout == torch.strided else f" {str(v.layout).removeprefix('torch.')}"
        return f"{short_dtype(v.dtype)}[{','.join(str(s) for s in v.shape)}]{layout}"
    if isinstance(v, (bool, numbers.Number)):
        return f"{type(v).__name__} {v!r}"
    if isinstance(v, str):
        return f"str {_clip_repr(v)}"
    if isinstance(v, Mapping):
        return f"{type(v).__name__} with {len(v)} keys"
    if isinstance(v, (list, tuple)):
        return f"{type(v).__name__} of {len(v)}"
    return type(v).__name__


def _clip_repr(v: Any, n: int = 40) -> str:
    r = repr(v)
    return r if len(r) <= n else r[: n - 4] + "...'"


def _fmt_shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _fmt_expected(f: Field, env: Mapping[str, int]) -> str:
    parts = []
    for e in f.shape or ():
        if e.is_int:
            parts.append(str(e.args[0]))
            continue
        val = e.evaluate(env)
        parts.append(f"{e}={val}" if val is not None else str(e))
    return "(" + ", ".join(parts) + ")"


# Exact types accepted without the (slower) abstract-class checks below.
_PLAIN_TYPES = {"int": {int}, "float": {float, int}, "bool": {bool}, "str": {str}, "mapping": {dict}}


def kinds_ok(kind: str, values: Sequence[Any]) -> bool:
    """Whether every value is of ``kind`` (``None`` counts as absent), fast for plain types."""
    plain = _PLAIN_TYPES.get(kind)
    if kind == "any" or (plain is not None and set(map(type, values)) <= plain | {type(None)}):
        return True
    return all(v is None or _kind_ok(kind, v) for v in values)


def _kind_ok(kind: str, v: Any, *, tensors: bool = True) -> bool:
    """Whether ``v`` is of ``kind``; ``tensors=False`` refuses 0-d tensors (for tag dicts)."""
    if kind == "any":
        return True
    if isinstance(v, torch.Tensor):
        if not tensors:
            return False
        # A 0-d tensor is a scalar: what a dense (B,) column yields per row.
        if v.is_nested or v.dim() != 0:
            return False
        if kind == "int":
            return not v.is_floating_point() and not v.is_complex() and v.dtype != torch.bool
        if kind == "float":
            return v.dtype != torch.bool and not v.is_complex()
        return kind == "bool" and v.dtype == torch.bool
    if kind == "int":
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)
    if kind == "float":
        return isinstance(v, numbers.Real) and not isinstance(v, bool)
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "str":
        return isinstance(v, str)
    if kind == "mapping":
        return isinstance(v, Mapping)
    raise AssertionError(kind)


def _as_mapping(sample: Any) -> Mapping[str, Any]:
    if type(sample) is dict:
        return sample
    if _is_tensordict(sample):  # before Mapping: a TensorDict may register as one
        return {k: _unwrap(sample.get(k)) for k in sample.keys()}
    if isinstance(sample, Mapping):
        return sample
    raise TypeError(
        f"a sample must be a mapping of field name to value (a dict or a TensorDict row), found {type(sample).__name__}"
    )


def _unwrap(v: Any) -> Any:
    """A TensorDict row's non-tensor entry as the plain Python value."""
    from tensordict import NonTensorData, NonTensorStack

    if isinstance(v, NonTensorData):
        return v.data
    if isinstance(v, NonTensorStack):
        return v.tolist()
    return v


def _is_tensordict(x: Any) -> bool:
    from tensordict import TensorDictBase

    return isinstance(x, TensorDictBase)


def _check_args(schema: Schema, dims: Mapping[str, int] | None, depth: str) -> None:
    if depth not in _DEPTHS:
        raise ValueError(f"depth must be 'shapes' or 'values', found {depth!r}")
    if dims:
        for k, v in dims.items():
            if k not in schema.dims:
                raise ValueError(
                    f"dims={{{k!r}: ...}}: schema {schema.name!r} has no dim {k!r} (its dims: {', '.join(schema.dims)})"
                )
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
                raise ValueError(f"dims[{k!r}] must be a non-negative int, found {v!r}")


# ---------------------------------------------------------------------------
# One sample: the single source of violation records


def check_sample(
    schema: Schema,
    sample: Any,
    *,
    tag: Mapping[str, Any] | None = None,
    dims: Mapping[str, int] | None = None,
    depth: str = "values",
    index: int | None = None,
) -> tuple[dict[str, int], list[Violation]]:
    """Check one sample; return (dims bound, violations). Never raises for bad data."""
    _check_args(schema, dims, depth)
    sample = _as_mapping(sample)
    plan = _plan(schema)
    out: list[Violation] = []

    def add(field: str, code: str, expected: str, actual: str, message: str) -> None:
        out.append(Violation(index, field, code, expected, actual, message))

    # 1. presence, kinds, dtypes, ranks; collect what each axis says about the dims
    obs: dict[str, list[tuple[str, int]]] = {}
    literal_bad: dict[str, bool] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    for f, axes in plan.tensors:
        v = sample.get(f.name)
        if v is None:
            if f.required:
                add(f.name, "missing", f.describe(), "absent", f"required field is missing (expected {f.describe()})")
            continue
        if not isinstance(v, torch.Tensor) or v.is_nested or v.layout != torch.strided:
            add(
                f.name,
                "kind",
                f"tensor {f.describe()}",
                describe_value(v),
                f"expected a tensor {f.describe()}, found {describe_value(v)}",
            )
            continue
        if v.dtype not in f.dtypes:
            allowed = " or ".join(str(d).removeprefix("torch.") for d in f.dtypes)
            add(
                f.name,
                "dtype",
                allowed,
                str(v.dtype).removeprefix("torch."),
                f"dtype {str(v.dtype).removeprefix('torch.')} is not {allowed}",
            )
        shape = tuple(v.shape)
        if len(shape) != len(axes):
            add(
                f.name,
                "rank",
                f"{len(axes)} dims {_fmt_expected(f, {})}",
                f"{len(shape)} dims {_fmt_shape(shape)}",
                f"expected {len(axes)} dims {_fmt_expected(f, {})}, found {len(shape)} dims {_fmt_shape(shape)}",
            )
            continue
        shapes[f.name] = shape
        for (name, lit), size in zip(axes, shape, strict=True):
            if name is None:
                literal_bad[f.name] = literal_bad.get(f.name, False) or size != lit
            else:
                obs.setdefault(name, []).append((f.name, size))
    for f in plan.others:
        v = sample.get(f.name)
        if v is None:
            if f.required:
                add(f.name, "missing", f.kind, "absent", f"required field is missing (expected {f.kind})")
            continue
        if not _kind_ok(f.kind, v):
            add(f.name, "kind", f.kind, describe_value(v), f"expected {f.kind}, found {describe_value(v)}")

    # 2. bind dims: majority vote, pinned and fixed sizes win; derived dims vote too
    env: dict[str, int] = {}
    bad_fields: dict[str, str] = {}  # field -> code, for one shape report per field
    relation: list[tuple[str, int, int | None]] = []
    pinned = dict(dims or {})
    for name, d in plan.dims.items():
        if isinstance(d, DerivedDim):
            continue
        seen = obs.get(name, [])
        ref = pinned.get(name, plan.fixed.get(name))
        if ref is None and seen:
            ref = _majority([s for _, s in seen], None)
        if ref is None:
            continue
        env[name] = ref
        for fname, size in seen:
            if size != ref:
                bad_fields.setdefault(fname, "shape" if name in plan.fixed else "dim_mismatch")
    for d in plan.derived:
        computed = d.expr.evaluate(env)
        seen = obs.get(d.name, [])
        target = pinned.get(d.name)
        sizes = [s for _, s in seen]
        if target is None and sizes:
            target = _majority(sizes, computed)
        if target is None:
            if computed is not None:
                env[d.name] = computed
            continue
        env[d.name] = target
        for fname, size in seen:
            if size != target:
                bad_fields.setdefault(fname, "dim_mismatch")
        if computed is None:
            unbound = [n for n in d.expr.names() if n not in env]
            if len(unbound) == 1:
                sol = solve_for(d.expr, unbound[0], target, env)
                if sol is not None and sol >= 0:
                    env[unbound[0]] = sol
                    continue
            relation.append((d.name, target, None))
        elif computed != target:
            relation.append((d.name, target, computed))

    for fname, code in bad_fields.items():
        f = schema.fields[fname]
        shape = shapes[fname]
        add(
            fname,
            code,
            _fmt_expected(f, env),
            _fmt_shape(shape),
            f"shape {_fmt_shape(shape)} does not match {_fmt_expected(f, env)}",
        )
    for fname, bad in literal_bad.items():
        if bad and fname not in bad_fields:
            f = schema.fields[fname]
            add(
                fname,
                "shape",
                _fmt_expected(f, env),
                _fmt_shape(shapes[fname]),
                f"shape {_fmt_shape(shapes[fname])} does not match {_fmt_expected(f, env)}",
            )
    for name, target, computed in relation:
        d = plan.dims[name]
        who = [f for f, _ in obs.get(name, [])]
        field = who[0] if who else name
        label = str(d.expr) if name in plan.hidden else f"{name} = {d.expr}"
        inputs = ", ".join(f"{n}={env[n]}" for n in d.expr.names() if n in env)
        if computed is None:
            shown = d.expr if name in plan.hidden else name
            msg = (
                f"{shown} is {target} on {', '.join(who) or 'dims='}, "
                f"which no sizes of {', '.join(d.expr.names())} satisfy ({inputs})"
            )
            expected = label
        else:
            msg = f"{'/'.join(who) or 'dims='} agree on {target} but {label} = {computed} ({inputs})"
            expected = f"{computed} ({label})"
        add(field, "dim_mismatch", expected, str(target), msg)
    for d in plan.free:
        if d.name in env and not d.allows(env[d.name]):
            who = [f for f, _ in obs.get(d.name, [])]
            # A dim solved from an expression has no field of its own; name what bound it.
            field = (
                who[0]
                if who
                else next((x.name for x in plan.derived if d.name in x.expr.names() and obs.get(x.name)), d.name)
            )
            add(
                field,
                "dim_range",
                f"{d.name} {d.describe()}",
                f"{d.name}={env[d.name]}",
                f"dim {d.name}={env[d.name]} is not {d.describe()}",
            )

    # 3. tags, extra fields, values
    if tag is not None:
        _check_tag(schema, tag, env, add)
    if schema.extra == "forbid":
        for k in sample:
            if k not in schema.fields:
                add(
                    k,
                    "extra",
                    "no such field",
                    describe_value(sample[k]),
                    f"field is not declared by schema {schema.name!r} (extra: forbid)",
                )
    if depth == "values":
        for f in schema.fields.values():
            if f.has_value_checks and sample.get(f.name) is not None:
                _check_values(f, sample[f.name], add)
    bound = {n: env[n] for n in plan.dims if n in env and n not in plan.hidden}
    return bound, out


def _majority(sizes: list[int], preferred: int | None) -> int:
    """The size most observers agree on; ties go to ``preferred``, then to the first seen."""
    counts: dict[int, int] = {}
    for s in sizes:
        counts[s] = counts.get(s, 0) + 1
    if preferred is not None:
        counts[preferred] = counts.get(preferred, 0) + 1
        best = max(counts.values())
        if counts[preferred] == best:
            return preferred
    best = max(counts.values())
    return next(s for s in sizes if counts[s] == best)


def _check_tag(schema: Schema, tag: Any, env: Mapping[str, int], add) -> None:
    if not isinstance(tag, Mapping):
        add(
            "<tag>",
            "tag",
            "a mapping",
            describe_value(tag),
            f"a tag dict must be a mapping, found {describe_value(tag)}",
        )
        return
    for t in schema.tags.values():
        if t.name not in tag:
            continue
        v = tag[t.name]
        if t.kind is not None and not _kind_ok(t.kind, v, tensors=False):
            add(t.name, "tag", t.kind, describe_value(v), f"tag must be {t.kind}, found {describe_value(v)}")
            continue
        if t.equals is not None:
            want = t.equals.evaluate(env)
            if want is not None and v != want:
                add(
                    t.name, "tag", f"{want} ({t.equals})", str(v), f"tag says {v} but the sample's {t.equals} is {want}"
                )


def _check_values(f: Field, v: Any, add) -> None:
    if f.is_tensor:
        if not isinstance(v, torch.Tensor) or v.is_nested or v.layout != torch.strided or v.dtype not in f.dtypes:
            return  # already reported as kind/dtype
        if v.is_meta:
            return  # shapes without data: there are no values to check
        for code_expected, bad in _bad_elements(f, v):
            n_bad = int(bad.sum())
            if n_bad:
                flat = int(bad.reshape(-1).nonzero()[0])
                pos = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), v.shape)) if v.dim() else ()
                example = v.reshape(-1)[flat].item()
                where = f"[{','.join(map(str, pos))}]"
                add(
                    f.name,
                    "value",
                    code_expected,
                    f"{n_bad} of {v.numel()} elements (first at {where}: {example!r})",
                    f"{n_bad} of {v.numel()} elements are not {code_expected} (first at {where}: {example!r})",
                )
        return
    if isinstance(v, torch.Tensor) and _kind_ok(f.kind, v):
        if v.is_meta:
            return  # a scalar without data
        v = v.item()
    if not _kind_ok(f.kind, v) or not isinstance(v, (numbers.Real,)):
        if f.values is not None and _kind_ok(f.kind, v) and v not in f.values:
            add(f.name, "value", f"one of {list(f.values)}", repr(v), f"{v!r} is not one of {list(f.values)}")
        return
    problems = []
    if f.values is not None and v not in f.values:
        problems.append(f"one of {list(f.values)}")
    if f.min is not None and v < f.min:
        problems.append(f">= {f.min}")
    if f.max is not None and v > f.max:
        problems.append(f"<= {f.max}")
    if f.finite and not math.isfinite(v):
        problems.append("finite")
    for p in problems:
        add(f.name, "value", p, repr(v), f"{v!r} is not {p}")


def _bad_elements(f: Field, v: torch.Tensor):
    """(description, boolean mask of bad elements) per value check of a field."""
    if f.values is not None:
        allowed = torch.tensor(f.values, dtype=v.dtype)
        yield f"in {{{', '.join(map(repr, f.values))}}}", ~torch.isin(v, allowed)
    if f.min is not None:
        yield f">= {f.min}", v < f.min
    if f.max is not None:
        yield f"<= {f.max}", v > f.max
    if f.finite and v.is_floating_point():
        yield "finite", ~torch.isfinite(v)


# ---------------------------------------------------------------------------
# One sample, fast: a straight-line check that only answers "clean" or "look closer"


def _fast_bindings(schema: Schema, sample: Mapping[str, Any], tag, dims, depth) -> dict[str, int] | None:
    plan = schema._plan or _plan(schema)
    env = plan.fast(sample)
    if env is None:
        return None
    get = sample.get
    if dims:
        for k, n in dims.items():
            if env.get(k) != n:
                return None
    if schema.extra == "forbid" and any(k not in schema.fields for k in sample):
        return None
    if tag is not None:
        if not isinstance(tag, Mapping):
            return None
        for t in schema.tags.values():
            if t.name in tag:
                tv = tag[t.name]
                if t.kind is not None and not _kind_ok(t.kind, tv, tensors=False):
                    return None
                if t.equals is not None and tv != t.equals.evaluate(env):
                    return None
    if depth == "values":
        for f in schema.fields.values():
            if f.has_value_checks:
                v = get(f.name)
                if v is not None and _has_bad_values(f, v):
                    return None
    return env


def values_clean(f: Field, v: torch.Tensor) -> bool:
    """A cheap sufficient test that a tensor passes its value checks: one min/max reduction.

    ``False`` means "look closer" (``_bad_elements`` finds the elements), not "bad".
    """
    if v.numel() == 0 or v.is_meta:
        return True
    if v.dtype == torch.bool or v.is_complex():
        return False
    lo, hi = (x.item() for x in torch.aminmax(v))
    if f.finite and not (math.isfinite(lo) and math.isfinite(hi)):
        return False  # NaN propagates through aminmax, so NaNs land here too
    if f.min is not None and not lo >= f.min:
        return False
    if f.max is not None and not hi <= f.max:
        return False
    if f.values is not None:
        ints = sorted({int(x) for x in f.values if float(x).is_integer()})
        contiguous = ints and len(ints) == len(f.values) and ints == list(range(ints[0], ints[-1] + 1))
        if v.is_floating_point() or not contiguous or lo < ints[0] or hi > ints[-1]:
            return False
    return True


def _has_bad_values(f: Field, v: Any) -> bool:
    if f.is_tensor:
        if values_clean(f, v):
            return False
        return any(bool(bad.any()) for _, bad in _bad_elements(f, v))
    found: list[Violation] = []
    _check_values(f, v, lambda *a: found.append(a))  # type: ignore[arg-type]
    return bool(found)


def validate_sample(schema: Schema, sample: Any, *, tag, dims, depth) -> dict[str, int]:
    """Check one sample; return its dims or raise :class:`SchemaError` with every violation."""
    _check_args(schema, dims, depth)
    mapping = _as_mapping(sample)
    try:
        fast = _fast_bindings(schema, mapping, tag, dims, depth)
    except Exception:  # odd objects (e.g. a tensor subclass without .shape): look closer
        fast = None
    if fast is not None:
        return fast
    bound, found = check_sample(schema, mapping, tag=tag, dims=dims, depth=depth)
    if found:
        raise SchemaError(found, schema_name=schema.name, bindings={None: bound})
    return bound


# ---------------------------------------------------------------------------
# Batches


def check_batch(
    schema: Schema,
    batch: Any,
    *,
    tags: Sequence[Mapping[str, Any]] | None,
    dims: Mapping[str, int] | None,
    depth: str,
    raise_errors: bool,
    bound_out: list[dict[str, int]] | None = None,
) -> list[Violation]:
    """Check a list of samples or a TransferQueue-shaped TensorDict; see ``Schema.validate_batch``.

    For a list of samples, ``bound_out`` (if given) receives the dims each sample binds,
    in order, so a caller needs no second pass to learn them.
    """
    _check_args(schema, dims, depth)
    if bound_out is not None and _is_tensordict(batch):
        raise ValueError("bound_out is only collected for a list of samples")
    if _is_tensordict(batch):
        from ._batch import RowSource, suspicious_rows

        found: list[Violation] = []
        if batch.batch_dims != 1:
            found.append(
                Violation(
                    None,
                    "<batch>",
                    "batch",
                    "batch_size [B]",
                    f"batch_size {list(batch.batch_size)}",
                    f"a batch TensorDict needs one batch dim, found batch_size {list(batch.batch_size)}",
                )
            )
            rows: Sequence[int] = []
        else:
            found.extend(_check_tags_len(tags, batch.batch_size[0]))
            rows = suspicious_rows(schema, _plan(schema), batch, tags=None if found else tags, dims=dims, depth=depth)
        get_row = RowSource(batch, rows)
        screened = True
    elif isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)):
        found = _check_tags_len(tags, len(batch))
        rows = range(len(batch))
        get_row = batch.__getitem__
        screened = False
    else:
        raise TypeError(f"a batch must be a list of sample mappings or a TensorDict, found {type(batch).__name__}")
    tag_list = tags if tags is not None and not found else None
    bindings: dict[int | None, dict[str, int]] = {}
    for i in rows:
        row = _as_mapping(get_row(i))
        tag = tag_list[i] if tag_list is not None else None
        if not screened:
            try:
                fast = _fast_bindings(schema, row, tag, dims, depth)
            except Exception:  # odd values: let the full check describe them
                fast = None
            if fast is not None:
                if bound_out is not None:
                    bound_out.append(fast)
                continue
        bound, vs = check_sample(schema, row, tag=tag, dims=dims, depth=depth, index=i)
        if bound_out is not None:
            bound_out.append(bound)
        if vs:
            found.extend(vs)
            bindings[i] = bound
    if found and raise_errors:
        raise SchemaError(found, schema_name=schema.name, bindings=bindings)
    return found


def _check_tags_len(tags, n: int) -> list[Violation]:
    if tags is None:
        return []
    if not isinstance(tags, Sequence) or len(tags) != n:
        found = f"{len(tags)} tag dicts" if isinstance(tags, Sequence) else describe_value(tags)
        return [
            Violation(
                None,
                "<tags>",
                "batch",
                f"{n} tag dicts",
                found,
                f"tags= needs one tag dict per sample: expected {n}, found {found}",
            )
        ]
    return []
