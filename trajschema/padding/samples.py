"""Padding samples derived from a schema's pad rules."""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import numbers
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from trajschema.check import Plan, nontensor_column
from trajschema.core import (
    MAX_SIZE,
    DerivedDim,
    Field,
    FreeDim,
    SchemaError,
    Violation,
    counts_exactly_to,
    describe_value,
    fits_dtype,
    scalar_failures,
    shown_value,
    tensor_has_failures,
)

__all__ = ["PaddingBatch", "make_padding", "new_padding_uid"]


def new_padding_uid() -> str:
    """A fresh padding uid: ``pad`` + 32 hex digits, never containing ``_``.

    Trainers build keys as ``{uid}_{session_id}_{index}`` and split them on ``_``.
    """
    return "pad" + uuid.uuid4().hex


@dataclasses.dataclass(frozen=True, eq=False)
class PaddingBatch:
    """``count`` padding samples, ready to write to TransferQueue.

    Attributes:
        keys: one distinct key per sample, ``{uid}_{index}_0``.
        tags: one tag dict per sample: ``is_padding=True`` plus the length tags.
        fields: a TensorDict with batch size ``[count]``; tensor fields are dense
            ``(count, ...)`` columns, non-tensor fields ``NonTensorStack`` columns.
        uid: the fresh uid every sample of this batch shares (its own GRPO group).
        dims: the dim sizes the samples were built with.
        samples: the same samples as a list of dicts (built on first access; its tensors
            are views of ``fields``' columns).
    """

    keys: list[str]
    tags: list[dict[str, Any]]
    fields: Any
    uid: str
    dims: dict[str, int]
    _columns: dict[str, Any] = dataclasses.field(repr=False)

    def __len__(self) -> int:
        return len(self.keys)

    @functools.cached_property
    def samples(self) -> list[dict[str, Any]]:
        n = len(self.keys)
        names = list(self._columns)
        cols = [c.unbind(0) if isinstance(c, torch.Tensor) else c for c in self._columns.values()]
        return (
            [dict(zip(names, row, strict=True)) for row in zip(*cols, strict=True)] if names else [{} for _ in range(n)]
        )


def _check_int(name: str, v: Any, minimum: int = 0) -> int:
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or not minimum <= int(v) <= MAX_SIZE:
        raise ValueError(f"{name} must be an int in {minimum}..2**63-1, found {shown_value(v)}")
    return int(v)


def make_padding(
    plan: Plan,
    count: int,
    *,
    eos_token_id: int,
    like: Mapping[str, Any] | None,
    dims: Mapping[str, int] | None,
    include: Sequence[str] | None,
) -> PaddingBatch:
    """See :meth:`trajschema.Schema.padding`."""
    count = _check_int("count", count)
    eos = _check_int("eos_token_id", eos_token_id)
    names = _include_names(include)
    like_dims: dict[str, int] = {}
    if like is not None:
        like, like_dims = _reference(plan, like)
    emitted = _emitted_fields(plan, like, names)
    env = _padding_dims(plan, emitted, like_dims, dims)
    _check_memory(plan, emitted, env, count, like)
    for f in emitted:
        _check_field(plan, f, env, eos, like)
    uid = new_padding_uid()
    columns: dict[str, Any] = {}
    for f in emitted:
        columns[f.name] = _like_reference(_column(f, count, env, eos, uid, like), like, f)
    if like is not None and plan.extra == "allow":
        columns.update(_undeclared_copies(plan, like, like_dims, env, count))
    tag_values = {t.name: t.equals.evaluate(env) for t in plan.length_tags if t.equals is not None}
    tag = {"is_padding": True, **{k: v for k, v in tag_values.items() if v is not None}}
    return PaddingBatch(
        keys=[f"{uid}_{i}_0" for i in range(count)],
        tags=[dict(tag) for _ in range(count)],
        fields=_table(columns, count),
        uid=uid,
        dims={n: env[n] for n in plan.dims if n in env},
        _columns=columns,
    )


def _include_names(include: Any) -> tuple[str, ...] | None:
    """``include=`` as a tuple of names, read once (an iterator would be used up by a second pass)."""
    if include is None:
        return None
    if isinstance(include, str):
        return (include,)
    if isinstance(include, (bytes, Mapping)) or not isinstance(include, Iterable):
        raise ValueError(f"include= must be a list of optional field names, found {describe_value(include)}")
    names = tuple(include)
    for i, n in enumerate(names):
        if not isinstance(n, str):
            raise ValueError(f"include[{i}] must be a field name (str), found {describe_value(n)}")
    return names


def _reference(plan: Plan, like: Any) -> tuple[Mapping[str, Any], dict[str, int]]:
    """The ``like=`` sample as a mapping, and the dims it binds; it must itself follow the schema (at depth shapes)."""
    from trajschema.check import one_sample, validate_sample

    like = one_sample(like, "like=")
    bad = [k for k in like if not isinstance(k, str)]
    if bad:
        raise TypeError(f"like= has keys that are not field names (str): {bad[:8]!r}")
    try:
        return like, validate_sample(plan, like, tag=None, dims=None, depth="shapes")
    except SchemaError as exc:
        found = [dataclasses.replace(v, message=f"like= sample: {v.message}") for v in exc.violations]
        raise SchemaError(found, schema_name=exc.schema_name, bindings=exc.bindings) from None


#: Python objects of one padding sample besides its tensor data: its key, tag dict and
#: row entries, an upper bound measured at ~330 bytes (tests/padding/test_padding.py).
_ROW_OVERHEAD = 1024


@functools.cache
def _memory_limit() -> int:
    """This machine's physical memory in bytes (1 TiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf, or these names unknown to it
        return 2**40


def _check_memory(
    plan: Plan, emitted: list[Field], env: Mapping[str, int], count: int, like: Mapping[str, Any] | None
) -> None:
    """Refuse padding that could not fit in this machine's memory, before allocating any of it.

    Allocating it would fail inside torch, or worse, succeed lazily and end in the
    kernel's out-of-memory killer with no message at all.
    """
    per_sample = _sample_bytes(plan, emitted, env, like)
    total = count * (per_sample + _ROW_OVERHEAD)
    limit = _memory_limit()
    if total <= limit:
        return
    sizes = ", ".join(f"{n}={env[n]}" for n in plan.dims if n in env)
    raise ValueError(
        f"count={count}: {count} padding sample{'s' if count != 1 else ''} of schema {plan.name!r}"
        f"{f' ({sizes})' if sizes else ''} "
        f"would take about {_bytes(total)} of memory ({_bytes(per_sample)} of tensors each), more than this "
        f"machine has ({_bytes(limit)}); lower count or the sizes from dims= or like= (a batch needs fewer "
        "padding samples than its required multiple: see padding_needed)"
    )


def _sample_bytes(plan: Plan, emitted: list[Field], env: Mapping[str, int], like: Mapping[str, Any] | None) -> int:
    """The tensor bytes of one padding sample, from the sizes alone: nothing is allocated."""
    total = 0
    for f in emitted:
        if f.pad.rule == "copy":
            total += _held_bytes(like.get(f.name) if like is not None else None)
        elif f.is_tensor:
            numel = math.prod(max(e.evaluate(env), 0) for e in f.shape or ())
            total += numel * _dtype(f, like).itemsize
    if like is not None and plan.extra == "allow":  # undeclared values are copied into every sample
        total += sum(_held_bytes(v) for k, v in like.items() if k not in plan.fields)
    return total


def _held_bytes(value: Any, depth: int = 0) -> int:
    """The bytes of the tensors in ``value``, inside mappings and lists too (a deep copy duplicates them)."""
    if isinstance(value, torch.Tensor):
        return 0 if value.is_nested or value.is_meta else value.numel() * value.element_size()
    if depth > 16:  # deeper than any real sample; copying refuses what is nested too deeply
        return 0
    if isinstance(value, Mapping):
        return sum(_held_bytes(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_held_bytes(v, depth + 1) for v in value)
    return 0


def _bytes(n: int) -> str:
    if n >= 2**60:  # sizes up to 2**63 each multiply past what a float shows readably
        return f"2**{n.bit_length() - 1} bytes"
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def _like_reference(col: Any, like: Mapping[str, Any] | None, f: Field) -> Any:
    """A non-tensor column as 0-d tensors where the reference wrote 0-d tensors (a dense ``(B,)`` column).

    TransferQueue packs a column of 0-d tensors densely; mixing in Python values would
    turn the whole column into a ``NonTensorStack`` on read.
    """
    ref = like.get(f.name) if like is not None else None
    if f.is_tensor or isinstance(col, torch.Tensor) or not isinstance(ref, torch.Tensor) or ref.dim() != 0:
        return col
    return torch.tensor(list(col), dtype=ref.dtype)


def _table(columns: Mapping[str, Any], count: int) -> Any:
    """The padding as a TensorDict: dense tensor columns, non-tensor columns as stacks."""
    from tensordict import TensorDict

    fields = TensorDict({k: v for k, v in columns.items() if isinstance(v, torch.Tensor)}, batch_size=[count])
    for k, v in columns.items():
        if not isinstance(v, torch.Tensor):
            fields[k] = _nontensor_stack(v)
    return fields


def _undeclared_copies(
    plan: Plan, like: Mapping[str, Any], like_dims: Mapping[str, int], env: Mapping[str, int], count: int
) -> dict[str, Any]:
    """The reference's undeclared fields, copied; refused where a copy would keep a stale length.

    A tensor that has an axis as long as a dim the padding resizes (a ``routed_experts``
    of ``(111, 48, 8)`` beside ``seq=111`` when the schema does not declare it) would be
    copied at the reference's length, not the padding's: that is an error, not a guess.
    Axes of size 0 or 1 say nothing and are not matched.
    """
    resized = {n: v for n, v in like_dims.items() if n in env and env[n] != v and v > 1}
    out: dict[str, Any] = {}
    problems = []
    for k, v in like.items():
        if k in plan.fields or v is None:
            continue
        if isinstance(v, torch.Tensor) and not v.is_nested:
            follows = [(n, size) for n, size in resized.items() if size in tuple(v.shape)]
            if follows:
                problems.append(_stale_copy(plan, k, v, follows, env))
                continue
        out[k] = _copied(v, count, k)
    if problems:
        raise SchemaError(problems, schema_name=plan.name)
    return out


def _stale_copy(plan: Plan, name: str, v: torch.Tensor, follows: list[tuple[str, int]], env: Mapping[str, int]):
    dim, size = follows[0]
    msg = (
        f"undeclared field {name!r} ({describe_value(v)}) has an axis of {size}, like the reference's "
        f"{dim}={size}; padding would copy it at that length while the padding's {dim} is {env[dim]}. "
        f"Declare {name!r} in schema {plan.name!r}, or use the schema that declares it (ts.schema_for_sample)"
    )
    return Violation(None, name, "extra", f"declared (it seems to follow {dim})", describe_value(v), msg)


def _emitted_fields(plan: Plan, like: Mapping[str, Any] | None, include: Sequence[str] | None) -> list[Field]:
    if include is not None:
        unknown = [n for n in include if n not in plan.fields]
        if unknown:
            raise ValueError(
                f"include= names fields schema {plan.name!r} does not declare: {unknown} "
                f"(its optional fields: {[f.name for f in plan.fields.values() if not f.required]})"
            )
        if like is not None:
            lacking = [n for n in include if like.get(n) is None]
            if lacking:
                raise ValueError(
                    f"include= asks for {lacking}, which the like= sample lacks; padding must have "
                    "exactly the reference sample's fields (TransferQueue drops fields not every "
                    "sample has)"
                )
    wanted = set(include or ())
    out = []
    for f in plan.fields.values():
        if f.required:
            out.append(f)
        elif like is not None:
            if like.get(f.name) is not None:
                out.append(f)
        elif f.name in wanted:
            out.append(f)
    return out


def _padding_dims(
    plan: Plan, emitted: list[Field], like_dims: Mapping[str, int], dims: Mapping[str, int] | None
) -> dict[str, int]:
    from trajschema.check import check_args

    dims = check_args(plan, dims, "shapes") or {}  # unknown dims, bad sizes, a fixed dim re-pinned
    for k in dims:
        d = plan.dims[k]
        if isinstance(d, DerivedDim):
            raise ValueError(f"dims[{k!r}]: {k} is derived ({k} = {d.expr}); set {', '.join(d.expr.names())} instead")
    # Which dims do the emitted fields and the length tags need?
    needed: list[str] = []

    def need(name: str) -> None:
        if name in needed:
            return
        d = plan.dims[name]
        if isinstance(d, DerivedDim):
            for m in d.expr.names():
                need(m)
        needed.append(name)

    for f in emitted:
        for e in f.shape or ():
            for n in e.names():
                need(n)
    for t in plan.tags.values():
        if t.equals is not None:
            for n in t.equals.names():
                need(n)
    env: dict[str, int] = {}
    for name in needed:
        d = plan.dims[name]
        if isinstance(d, DerivedDim):
            env[name] = d.expr.evaluate(env)
            if env[name] < 0:
                raise ValueError(f"padding sizes give {name} = {d.expr} = {env[name]} < 0")
            continue
        if not isinstance(d, FreeDim):
            env[name] = d.size
            continue
        size = dims.get(name, plan.padding_sizes.get(name, like_dims.get(name)))
        if size is None:
            users = [f.name for f in emitted if any(name in e.names() for e in f.shape or ())]
            raise ValueError(
                f"schema {plan.name!r} has no padding size for dim {name!r} (used by {', '.join(users) or 'tags'}); "
                f"pass like=<a real sample of the batch> or dims={{{name!r}: <size>}}"
            )
        if not d.allows(size):
            raise ValueError(f"padding size {name}={size} breaks the dim's bounds ({d.describe()})")
        env[name] = size
    return env


def _axes(f: Field, env: Mapping[str, int]) -> tuple[int, ...]:
    """The sizes of a tensor field's axes under ``env``; a negative one is refused."""
    sizes = tuple(e.evaluate(env) for e in f.shape or ())
    if any(n < 0 for n in sizes):
        shown = ", ".join(f"{e}={n}" for e, n in zip(f.shape or (), sizes))
        raise ValueError(f"padding sizes give field {f.name!r} a negative axis ({shown}); pass other dims=")
    return sizes


def _check_field(plan: Plan, f: Field, env: Mapping[str, int], eos: int, like: Mapping[str, Any] | None) -> None:
    """Everything that could refuse ``f``'s column, checked before any column is built."""
    if f.pad.rule == "copy":
        if like is None or like.get(f.name) is None:
            raise ValueError(f"field {f.name!r} pads by copying the reference sample; pass like=<a real sample>")
        ref = like[f.name]
        if isinstance(ref, torch.Tensor):
            _copied(ref, 0, f.name)  # refuses what cannot be copied, at no cost
    elif f.is_tensor:
        _axes(f, env)
    _check_fill(plan, f, env, eos, like)


def _check_fill(plan: Plan, f: Field, env: Mapping[str, int], eos: int, like: Mapping[str, Any] | None) -> None:
    """Prove, on one scalar per field, that the column will pass the field's value checks.

    A column is one value broadcast (a fill, EOS), ``0..n-1`` (positions) or a copy of
    the reference; checking that one value (or the one copied tensor) suffices, so
    padding is valid at ``depth="values"`` by construction and nobody has to scan
    megabytes of zeros to find out.
    """
    rule = f.pad.rule
    if rule in ("uid", "index", "empty") or (rule != "copy" and not f.is_tensor and not f.has_value_checks):
        return
    if rule == "copy":
        problem = _value_problem(f, like.get(f.name) if like is not None else None)
    else:
        dtype = _dtype(f, like) if f.is_tensor else None
        if rule == "positions":
            probe: Any = f.shape[-1].evaluate(env) if f.shape else 0
        else:
            probe = eos if rule == "eos" else f.pad.value
        problem = _fill_problem(f, rule, probe, dtype)
    if problem:
        source = {"eos": f"eos_token_id={eos}", "copy": "the like= sample's value"}.get(rule, f"fill {f.pad}")
        raise ValueError(f"schema {plan.name!r}: padding field {f.name!r} with {source} {problem}")


# Keyed by the field object itself (held, so its id stays unique): hashing a Field walks
# its expression trees, which cost more than the check it would save.
_FILL_PROBLEMS: dict[tuple[Any, ...], tuple[Field, str | None]] = {}


def _fill_problem(f: Field, rule: str, value: Any, dtype: torch.dtype | None) -> str | None:
    """What is wrong with filling ``f`` (of ``dtype``) by ``value``, or ``None``; pure, so cached."""
    key = (id(f), rule, type(value), value, dtype)
    hit = _FILL_PROBLEMS.get(key)
    if hit is not None and hit[0] is f:
        return hit[1]
    if len(_FILL_PROBLEMS) > 4096:
        _FILL_PROBLEMS.clear()
    problem = _find_fill_problem(f, rule, value, dtype)
    _FILL_PROBLEMS[key] = (f, problem)
    return problem


def _find_fill_problem(f: Field, rule: str, value: Any, dtype: torch.dtype | None) -> str | None:
    if dtype is None:
        return _value_problem(f, value)
    if rule == "positions":
        if value and value - 1 > counts_exactly_to(dtype):
            return f"needs positions up to {value - 1}, but {dtype} counts exactly only to {counts_exactly_to(dtype)}"
        # min/max/finite are intervals: the two extremes stand for 0..value-1; a value set may not.
        # A set of k values cannot hold k + 1 distinct positions: probing that many decides it.
        probe = (
            torch.arange(min(value, len(f.values) + 1), dtype=dtype)
            if f.values is not None
            else torch.tensor([0, value - 1] if value else [])
        )
        return _value_problem(f, probe.to(dtype))
    if not fits_dtype(value, dtype):
        return f"does not fit dtype {dtype}"
    return _value_problem(f, torch.tensor(value, dtype=dtype))


def _value_problem(f: Field, probe: Any) -> str | None:
    if probe is None or not f.has_value_checks:
        return None
    if isinstance(probe, torch.Tensor) and f.is_tensor:
        bad = tensor_has_failures(f, probe)
    else:
        bad = bool(scalar_failures(f, probe))
    if not bad:
        return None
    return (
        f"breaks its value checks (values {list(f.values) if f.values is not None else 'any'}, "
        f"min {f.min}, max {f.max}, finite {f.finite})"
    )


def _dtype(f: Field, like: Mapping[str, Any] | None) -> torch.dtype:
    ref = like.get(f.name) if like is not None else None
    if isinstance(ref, torch.Tensor) and ref.dtype in f.dtypes:
        return ref.dtype
    return f.dtypes[0]


def _column(f: Field, count: int, env: Mapping[str, int], eos: int, uid: str, like) -> Any:
    rule, value = f.pad.rule, f.pad.value
    if rule == "copy":
        assert like is not None  # _check_field made sure like has the field
        return _copied(like[f.name], count, f.name)
    if f.is_tensor:
        shape = (count, *_axes(f, env))
        dtype = _dtype(f, like)
        if rule == "fill" and value is not None:
            # zeros skips full's per-element fill loop: about twice as fast for wide columns.
            return torch.zeros(shape, dtype=dtype) if value == 0 else torch.full(shape, value, dtype=dtype)
        if rule == "eos":
            return torch.full(shape, eos, dtype=dtype)
        if rule == "positions":
            if not count:  # no rows: no 0..n-1 row to build (n may be huge)
                return torch.empty(shape, dtype=dtype)
            return torch.arange(shape[-1], dtype=dtype).expand(shape).contiguous()
        raise AssertionError(rule)  # the loader only admits the rules above for tensors
    if rule == "fill":
        return _Same(value, count)
    if rule == "eos":
        return _Same(eos, count)
    if rule == "uid":
        return _Same(uid, count)
    if rule == "index":
        return list(range(count))
    if rule == "empty":
        return _Same(EMPTY_MAPPING, count)
    raise AssertionError(rule)


def _copied(v: Any, count: int, name: str) -> Any:
    if isinstance(v, torch.Tensor):
        if v.is_nested or v.layout != torch.strided or v.is_meta:
            what = "a meta tensor, which has no values to copy" if v.is_meta else "not a dense tensor"
            raise ValueError(
                f"field {name!r} of like= is a {describe_value(v)}: {what}; padding cannot copy it"
                + ("" if v.is_meta else " (declare it in the schema)")
            )
        return v.unsqueeze(0).expand(count, *v.shape).clone()
    if isinstance(v, (str, int, float, bool, type(None))):
        return _Same(v, count)
    try:
        return [copy.deepcopy(v) for _ in range(count)]
    except RecursionError:
        raise ValueError(f"field {name!r} of like= is nested too deeply to copy into padding") from None
    except Exception as exc:  # the value's own copy protocol (pickling, __deepcopy__) refused
        raise ValueError(
            f"field {name!r} of like= ({describe_value(v)}) cannot be copied into padding: {type(exc).__name__}: {exc}"
        ) from None


class _EmptyMapping(dict):
    """A read-only empty dict: one instance stands for every padding sample's ``{}``.

    Sharing one value is what makes wide padding cheap (a ``NonTensorStack`` of ``count``
    distinct dicts costs ~6 µs a row); refusing mutation is what makes sharing safe.
    It pickles (e.g. through TransferQueue) and copies as a plain, mutable ``{}``.
    """

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError(
            "this empty mapping is shared by all samples of a padding batch and is read-only; "
            "replace it (sample[key] = {}) instead of changing it"
        )

    # Every mutator refuses; their signatures differ from dict's on purpose.
    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]
    update = setdefault = pop = popitem = clear = _read_only  # type: ignore[assignment]

    def __reduce__(self):
        return (dict, ())

    def __copy__(self) -> dict:
        return {}

    def __deepcopy__(self, memo: Any) -> dict:
        return {}


#: What ``pad: empty`` fills: a read-only ``{}`` that unpickles as a plain ``{}``.
EMPTY_MAPPING = _EmptyMapping()


class _Same(Sequence):
    """``count`` copies of one immutable value, without building them one by one."""

    def __init__(self, value: Any, count: int) -> None:
        self.value = value
        self.size = count  # not `count`: that would shadow Sequence.count()

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.value] * len(range(*i.indices(self.size)))
        if not -self.size <= i < self.size:
            raise IndexError(i)
        return self.value


def _nontensor_stack(values: Sequence[Any]):
    from tensordict import NonTensorData, NonTensorStack

    if isinstance(values, _Same) and len(values):
        # One NonTensorData shared by every row is safe for an immutable value (and the
        # read-only EMPTY_MAPPING) and much cheaper than building `count` of them.
        one = NonTensorData(data=values.value)
        return NonTensorStack(*([one] * len(values)))
    return nontensor_column(values)
