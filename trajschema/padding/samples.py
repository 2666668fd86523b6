"""Padding samples derived from a schema's pad rules, and the sizes they take before any is built."""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from trajschema.check import Plan, nontensor_column
from trajschema.core import (
    MAX_SIZE,
    SPREAD,
    DerivedDim,
    Field,
    FreeDim,
    SchemaError,
    Violation,
    check_int,
    counts_exactly_to,
    describe_value,
    fits_dtype,
    scalar_failures,
    tensor_has_failures,
)
from trajschema.padding.spread import largest_id, spread_ids

__all__ = [
    "FieldSize",
    "PaddingBatch",
    "PaddingMemoryError",
    "PaddingSizeError",
    "PaddingSizes",
    "format_bytes",
    "ids_seen",
    "make_padding",
    "new_padding_uid",
    "resolve_padding",
]


def new_padding_uid() -> str:
    """A fresh padding uid: ``pad`` + 32 hex digits, never containing ``_``.

    Trainers build keys as ``{uid}_{session_id}_{index}`` and split them on ``_``.
    """
    return "pad" + uuid.uuid4().hex


@dataclasses.dataclass(frozen=True, eq=False)
class PaddingBatch:
    """``count`` padding samples, ready to write to TransferQueue.

    No two samples share anything that can be changed in place: writing into one row
    (`pad.fields[0] = row`, `pad.fields.set_at_("uid", "x", 0)`, an in-place tensor op on
    `pad.samples[0]["input_ids"]`, a tag dict) changes no other row. Each row of a
    non-tensor column is its own `NonTensorData`; values every row shares are
    immutable (a str, an int) or the read-only empty mapping of `pad: empty`, which
    refuses changes with a `TypeError` that says to replace it instead.

    Attributes:
        keys: one distinct key per sample, ``{uid}_{index}_0``.
        tags: one tag dict per sample: ``is_padding=True`` plus the length tags.
        fields: a TensorDict with batch size ``[count]``; tensor fields are dense
            ``(count, ...)`` columns, non-tensor fields ``NonTensorStack`` columns.
        uid: the fresh uid every sample of this batch shares (its own GRPO group).
        dims: the dim sizes the samples were built with.
        sources: where each size of ``dims`` came from (see `PaddingSizes.sources`), e.g.
            ``{"seq": "padding default", "experts": "like"}``: which count of experts a
            ``pad: {spread: experts}`` field was spread over, and how it was found.
        samples: the same samples as a list of dicts (built on first access; its tensors
            are views of ``fields``' columns, so a sample and its row of ``fields`` change
            together).
    """

    keys: list[str]
    tags: list[dict[str, Any]]
    fields: Any
    uid: str
    dims: dict[str, int]
    _columns: dict[str, Any] = dataclasses.field(repr=False)
    sources: dict[str, str] = dataclasses.field(default_factory=dict)

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


# -- the sizes of padding, resolved before anything is built ---------------------------------


@dataclasses.dataclass(frozen=True)
class FieldSize:
    """What one field takes in each padding sample.

    Attributes:
        rule: how the value is made: the field's pad rule (``eos``, ``fill``, ``positions``,
            ``copy``, ``uid``, ...), or ``undeclared`` for a field the schema does not name,
            copied from ``like=``.
        shape: the tensor's shape in one sample; ``None`` for a non-tensor value.
        dtype: the tensor's dtype; ``None`` for a non-tensor value.
        bytes: the tensor bytes of one sample's value (for a copied mapping or list, the
            tensors inside it).
        objects: an upper estimate of the bytes of the Python objects one sample's value
            adds: a non-tensor value's own ``NonTensorData``, and the containers a copy
            duplicates (a list of a million ids is 8 MB of pointers in every sample).
    """

    rule: str
    shape: tuple[int, ...] | None
    dtype: torch.dtype | None
    bytes: int
    objects: int = 0


#: Python objects of one padding sample besides its fields: its key, its tag dict, its
#: row of the TensorDict. An upper bound: measured at ~290 bytes (tests/padding/test_padding.py).
_ROW_OVERHEAD = 512

#: The ``NonTensorData`` a non-tensor value gets in each row (measured at ~550-630 bytes).
_NONTENSOR_OVERHEAD = 1024


@dataclasses.dataclass(frozen=True)
class PaddingSizes:
    """The sizes of ``count`` padding samples, found without allocating any of them.

    `Schema.padding` refuses padding that would not fit in memory from these numbers
    before it builds a column, and ``trajschema pad`` bounds what it writes by them.

    Attributes:
        schema_name: the schema padded.
        count: how many padding samples.
        dims: every dim the padding binds, in the schema's order.
        free_dims: the free ones among them: the sizes ``dims=`` and ``like=`` set.
        fields: every field each sample gets, the declared ones then those copied from
            ``like=``, and what each takes (`FieldSize`).
        sample_bytes: the tensor bytes of one padding sample.
        row_overhead: an upper estimate of the bytes of one sample's Python objects: its
            key, tag dict and row, and each field's ``objects``.
        batch_bytes: the whole batch, ``count * (sample_bytes + row_overhead)``.
        sources: where each size of ``dims`` came from: ``"dims"`` (the ``dims=`` argument),
            ``"schema"`` (a size the schema fixes, or pins with `Schema.with_dims`),
            ``"config"`` (pinned from a model config by `schema_for_config`),
            ``"like"`` (read from the ``like=`` sample: a shape, or for the dim a
            ``pad: {spread: dim}`` field spreads over, its largest id + 1),
            ``"padding default"`` (the schema's ``padding:`` size) or ``"derived"``.
    """

    schema_name: str
    count: int
    dims: Mapping[str, int]
    free_dims: Mapping[str, int]
    fields: Mapping[str, FieldSize]
    sample_bytes: int
    row_overhead: int
    batch_bytes: int
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def largest(self, n: int = 3) -> list[tuple[str, int]]:
        """The ``n`` fields that take most of the batch, as ``(name, bytes in the batch)``, biggest first."""
        sized = [(name, (s.bytes + s.objects) * self.count) for name, s in self.fields.items() if s.bytes + s.objects]
        return sorted(sized, key=lambda item: -item[1])[:n]

    def check_memory(self, limit: int | None = None) -> None:
        """Refuse padding larger than this machine's memory, or than ``limit`` bytes if that is smaller.

        Allocating it would fail inside torch, or worse, succeed lazily and end in the
        kernel's out-of-memory killer with no message at all.

        Raises:
            PaddingMemoryError: ``batch_bytes`` is above the bound.
            ValueError: ``limit`` is not an int >= 1.
        """
        machine = _memory_limit()
        if limit is not None:
            limit = _check_int("limit", limit, 1)
        bound = machine if limit is None else min(limit, machine)
        if self.batch_bytes <= bound:
            return
        raise PaddingMemoryError(
            schema_name=self.schema_name,
            count=self.count,
            dims=dict(self.free_dims),
            needed=self.batch_bytes,
            per_sample=self.sample_bytes,
            limit=bound,
            machine=bound == machine,
            largest=tuple(self.largest()),
        )


def _rebuild_error(cls: type, kwargs: dict[str, Any]) -> Exception:
    return cls(**kwargs)


class PaddingMemoryError(ValueError):
    """Padding that would take more memory than allowed, refused before any of it is allocated.

    The message says how much, why and what to lower; the command line words its own
    from these attributes.

    Attributes:
        schema_name: the schema padded.
        count: how many padding samples were asked for.
        dims: the sizes of the free dims (the ones ``dims=`` and ``like=`` set).
        needed: the bytes the batch would take (`PaddingSizes.batch_bytes`).
        per_sample: the tensor bytes of one padding sample.
        limit: the bound it is above, in bytes.
        machine: whether ``limit`` is this machine's memory (not a smaller limit given).
        largest: the fields that take most, as ``(name, bytes in the batch)``, biggest first.
    """

    def __init__(
        self,
        *,
        schema_name: str,
        count: int,
        dims: Mapping[str, int],
        needed: int,
        per_sample: int,
        limit: int,
        machine: bool,
        largest: Sequence[tuple[str, int]],
    ) -> None:
        self.schema_name = schema_name
        self.count = count
        self.dims = dict(dims)
        self.needed = needed
        self.per_sample = per_sample
        self.limit = limit
        self.machine = machine
        self.largest = tuple((str(n), int(b)) for n, b in largest)
        bound = f"more than this machine has ({format_bytes(limit)})" if machine else f"above {format_bytes(limit)}"
        super().__init__(
            f"count={count}: {self.estimate}, {bound}; lower count or the sizes from dims= or like= (a batch "
            "needs fewer padding samples than its required multiple: see padding_needed)"
        )

    @property
    def estimate(self) -> str:
        """What the padding would take, in words: ``7 padding samples of schema 'text' (...) would take ...``."""
        n = self.count
        sizes = ", ".join(f"{k}={v}" for k, v in self.dims.items())
        most = ", ".join(f"{name} {format_bytes(b)}" for name, b in self.largest)
        return (
            f"{n} padding sample{'s' if n != 1 else ''} of schema {self.schema_name!r}{f' ({sizes})' if sizes else ''}"
            f" would take about {format_bytes(self.needed)} of memory, {format_bytes(self.per_sample)} of tensors "
            f"each{f' (most in {most})' if most else ''}"
        )

    def __reduce__(self):
        fields = ("schema_name", "count", "dims", "needed", "per_sample", "limit", "machine", "largest")
        return (_rebuild_error, (type(self), {k: getattr(self, k) for k in fields}))


class PaddingSizeError(ValueError):
    """Padding cannot be sized: a free dim has no padding size, or a ``pad: copy`` field no reference.

    The message ends with the remedy in Python terms (``pass like=... or dims=...``); the
    command line adds its own from these attributes.

    Attributes:
        schema_name: the schema padded.
        problem: what is missing, without the remedy.
        dim: the free dim without a size (``None`` for a copy field).
        field: the ``pad: copy`` field without a reference value, or the ``pad: {spread: dim}``
            field that has no number of ids to spread over (``None`` for a plain dim).
        remedy: the remedy, when it is not the usual ``pass like=... or dims=...``.
    """

    def __init__(
        self,
        problem: str,
        *,
        schema_name: str,
        dim: str | None = None,
        field: str | None = None,
        remedy: str | None = None,
    ) -> None:
        self.problem = problem
        self.schema_name = schema_name
        self.dim = dim
        self.field = field
        self.remedy = remedy
        if remedy is None:
            remedy = (
                f"pass like=<a real sample of the batch> or dims={{{dim!r}: <size>}}"
                if dim is not None
                else "pass like=<a real sample>"
            )
        super().__init__(f"{problem}; {remedy}")

    def __reduce__(self):
        kwargs = {
            "problem": self.problem,
            "schema_name": self.schema_name,
            "dim": self.dim,
            "field": self.field,
            "remedy": self.remedy,
        }
        return (_rebuild_error, (type(self), kwargs))


def format_bytes(n: int) -> str:
    """``n`` bytes for a reader (``8.0 MiB``, ``2.3 GiB``); from 2**60 as a power of two, which a float would blur."""
    if n >= 2**60:
        return f"2**{n.bit_length() - 1} bytes"
    for unit, size in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


@functools.cache
def _memory_limit() -> int:
    """This machine's physical memory in bytes (1 TiB where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # no sysconf, or these names unknown to it
        return 2**40


def resolve_padding(
    plan: Plan,
    count: int,
    *,
    like: Mapping[str, Any] | None = None,
    dims: Mapping[str, int] | None = None,
    include: Sequence[str] | None = None,
    seen: Mapping[str, int] | None = None,
) -> PaddingSizes:
    """The sizes of ``count`` padding samples (every dim, every field, the whole batch), allocating nothing.

    Takes the arguments of `Schema.padding` (``plan`` is the schema's compiled plan) and
    finds the sizes exactly as it does: ``dims=``, then the schema's padding sizes, then
    ``like=``; fields and dtypes as it emits them. It refuses what it refuses for sizes
    (bad arguments, a ``like=`` that breaks the schema, a dim without a size, a negative
    axis, an undeclared tensor of ``like=`` that seems to follow a resized dim), but not
    what only building would show (fill values, copies of uncopyable values) and not the
    memory: call `PaddingSizes.check_memory` for that. ``seen`` is `ids_seen` of the batch.
    """
    return _resolve(plan, _check_int("count", count), like, dims, include, seen).sizes


@dataclasses.dataclass(frozen=True)
class _Request:
    """A resolved padding request: its sizes, and what building it reads."""

    sizes: PaddingSizes
    emitted: list[Field]
    like: Mapping[str, Any] | None
    env: dict[str, int]
    undeclared: tuple[str, ...]


def _resolve(
    plan: Plan,
    count: int,
    like: Any,
    dims: Mapping[str, int] | None,
    include: Sequence[str] | None,
    seen: Mapping[str, int] | None = None,
) -> _Request:
    names = _include_names(include)
    like_dims: dict[str, int] = {}
    if like is not None:
        like, like_dims = _reference(plan, like)
    emitted = _emitted_fields(plan, like, names)
    env, sources = _padding_dims(plan, emitted, like, like_dims, dims, seen)
    fields = {f.name: _field_size(plan, f, env, like) for f in emitted}
    undeclared: tuple[str, ...] = ()
    if like is not None:
        undeclared = _undeclared(plan, like, like_dims, env)
        fields.update({k: _value_size("undeclared", like[k]) for k in undeclared})
    per_sample = sum(s.bytes for s in fields.values())
    overhead = _ROW_OVERHEAD + sum(s.objects for s in fields.values())
    sizes = PaddingSizes(
        schema_name=plan.name,
        count=count,
        dims={n: env[n] for n in plan.dims if n in env},
        free_dims={n: env[n] for n, d in plan.dims.items() if isinstance(d, FreeDim) and n in env},
        fields=fields,
        sample_bytes=per_sample,
        row_overhead=overhead,
        batch_bytes=count * (per_sample + overhead),
        sources={n: sources[n] for n in plan.dims if n in env},
    )
    return _Request(sizes, emitted, like, env, undeclared)


def _field_size(plan: Plan, f: Field, env: Mapping[str, int], like: Mapping[str, Any] | None) -> FieldSize:
    ref = like.get(f.name) if like is not None else None
    if f.pad.rule == "copy":
        if ref is None:
            raise PaddingSizeError(
                f"field {f.name!r} pads by copying the reference sample", schema_name=plan.name, field=f.name
            )
        return _value_size("copy", ref)
    if not f.is_tensor:
        return FieldSize(f.pad.rule, None, None, 0, _NONTENSOR_OVERHEAD)
    shape = _axes(f, env)
    dtype = _dtype(f, like)
    return FieldSize(f.pad.rule, shape, dtype, math.prod(shape) * dtype.itemsize)


def _value_size(rule: str, value: Any) -> FieldSize:
    tensors, objects = _held_bytes(value)
    if isinstance(value, torch.Tensor) and not value.is_nested:  # a tensor column: no objects per row
        return FieldSize(rule, tuple(value.shape), value.dtype, tensors)
    return FieldSize(rule, None, None, tensors, _NONTENSOR_OVERHEAD + objects)


#: What a deep copy does not copy (it shares them), nor holds anything.
_ATOMS = frozenset({str, int, float, bool, type(None), bytes, complex})

#: The built-in containers a deep copy duplicates, measured by their own ``__sizeof__``
#: (a subclass's override is not called: it could run anything).
_CONTAINERS = (dict, list, tuple, set, frozenset, bytearray)


def _held_bytes(value: Any) -> tuple[int, int]:
    """What a deep copy of ``value`` duplicates: the bytes of its tensors and arrays, and of its containers.

    Walked without recursion and at any depth (a value nested deeper than any real
    sample still holds what it holds); a tensor or container reached twice, or in a
    cycle, counts once, as a deep copy keeps it once. A ``meta`` tensor holds nothing;
    a sparse one counts as dense (an upper bound). Strings and numbers are not copied;
    other objects count as nothing.
    """
    tensors = objects = 0
    seen: set[int] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        if type(v) in _ATOMS or id(v) in seen:  # atoms first: a list of a million ids is walked in 0.1 s
            continue
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            if v.is_nested:
                todo.extend(v.unbind())
            elif not v.is_meta:
                tensors += v.numel() * v.element_size()
            continue
        if type(v).__module__ == "numpy" and isinstance(getattr(v, "nbytes", None), int):  # an ndarray
            tensors += v.nbytes
            continue
        base = next((c for c in _CONTAINERS if isinstance(v, c)), None)
        if base is not None:
            objects += base.__sizeof__(v) + 16  # + the garbage collector's header
        if isinstance(v, Mapping):
            todo.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            todo.extend(v)
    return tensors, objects


# -- building the padding ------------------------------------------------------------------


def _check_int(name: str, v: Any, minimum: int = 0) -> int:
    return check_int(name, v, minimum=minimum, maximum=MAX_SIZE)


def ids_seen(plan: Plan, batch: Any) -> dict[str, int]:
    """How many ids each ``pad: {spread: dim}`` dim reaches over the real rows of ``batch``: its
    largest id + 1, by one reduction per spread column (never the values read into Python).

    ``batch`` is anything `batch_view` reads (a list of samples, a TensorDict, TransferQueue's
    jagged columns), or a mapping of dense columns (field name -> ``(B, ...)`` tensor). A dim no
    column shows (absent, empty, float) is left out: the next source of its size decides.

    Raises:
        TypeError: ``batch`` is none of those (as `batch_view`).
    """
    from trajschema.check import batch_view, is_tensordict

    spread = [f for f in plan.fields.values() if f.pad.rule == SPREAD and f.pad.over is not None]
    if not spread:
        return {}
    if isinstance(batch, Mapping) and not is_tensordict(batch):
        columns = {f.name: batch.get(f.name) for f in spread}
    else:
        view = batch_view(batch)
        columns = {f.name: view.column(f.name) if view.is_table else view.values_of(f.name) for f in spread}
    out: dict[str, int] = {}
    for f in spread:
        found = largest_id(columns[f.name])
        if found is not None and found >= 0:
            over = f.pad.over or ""
            out[over] = max(out.get(over, 0), found + 1)
    return out


def make_padding(
    plan: Plan,
    count: int,
    *,
    eos_token_id: int,
    like: Mapping[str, Any] | None,
    dims: Mapping[str, int] | None,
    include: Sequence[str] | None,
    seen: Mapping[str, int] | None = None,
) -> PaddingBatch:
    """See `trajschema.Schema.padding`: resolve the sizes, check memory and every column, then build.

    ``seen`` is `ids_seen` of the real batch: the ids its spread columns reach.
    """
    count = _check_int("count", count)
    eos = _check_int("eos_token_id", eos_token_id)
    request = _resolve(plan, count, like, dims, include, seen)
    request.sizes.check_memory()
    for f in request.emitted:
        _check_field(plan, f, request.env, eos, request.like, request.sizes.sources)
    for k in request.undeclared:  # a meta or sparse tensor is refused before any column is built
        ref = request.like[k] if request.like is not None else None
        if isinstance(ref, torch.Tensor):
            _copied(ref, 0, k)
    return _build(plan, request, eos)


def _build(plan: Plan, request: _Request, eos: int) -> PaddingBatch:
    count, env, like = request.sizes.count, request.env, request.like
    uid = new_padding_uid()
    columns: dict[str, Any] = {}
    for f in request.emitted:
        columns[f.name] = _like_reference(_column(f, count, env, eos, uid, like), like, f)
    if request.undeclared:  # fields the schema does not name, copied from like=
        assert like is not None  # only a like= sample has them
        columns.update({k: _copied(like[k], count, k) for k in request.undeclared})
    tag_values = {t.name: t.equals.evaluate(env) for t in plan.length_tags if t.equals is not None}
    tag = {"is_padding": True, **{k: v for k, v in tag_values.items() if v is not None}}
    return PaddingBatch(
        keys=[f"{uid}_{i}_0" for i in range(count)],
        tags=[dict(tag) for _ in range(count)],
        fields=_table(columns, count),
        uid=uid,
        dims=dict(request.sizes.dims),
        _columns=columns,
        sources=dict(request.sizes.sources),
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


def _undeclared(
    plan: Plan, like: Mapping[str, Any], like_dims: Mapping[str, int], env: Mapping[str, int]
) -> tuple[str, ...]:
    """The reference's undeclared fields padding copies; refused where a copy would keep a stale length.

    A tensor that has an axis as long as a dim the padding resizes (a ``routed_experts``
    of ``(111, 48, 8)`` beside ``seq=111`` when the schema does not declare it) would be
    copied at the reference's length, not the padding's: that is an error, not a guess.
    Axes of size 0 or 1 say nothing and are not matched.
    """
    if plan.extra != "allow":
        return ()
    resized = {n: v for n, v in like_dims.items() if n in env and env[n] != v and v > 1}
    out = []
    problems = []
    for k, v in like.items():
        if k in plan.fields or v is None:
            continue
        if isinstance(v, torch.Tensor) and not v.is_nested:
            follows = [(n, size) for n, size in resized.items() if size in tuple(v.shape)]
            if follows:
                problems.append(_stale_copy(plan, k, v, follows, env))
                continue
        out.append(k)
    if problems:
        raise SchemaError(problems, schema_name=plan.name)
    return tuple(out)


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
    plan: Plan,
    emitted: list[Field],
    like: Mapping[str, Any] | None,
    like_dims: Mapping[str, int],
    dims: Mapping[str, int] | None,
    seen: Mapping[str, int] | None,
) -> tuple[dict[str, int], dict[str, str]]:
    """The size of every dim the padding needs, and where each came from (see `PaddingSizes.sources`)."""
    from trajschema.check import check_args

    dims = check_args(plan, dims, "shapes") or {}  # unknown dims, bad sizes, a fixed dim re-pinned
    for k in dims:
        d = plan.dims[k]
        if isinstance(d, DerivedDim):
            raise ValueError(f"dims[{k!r}]: {k} is derived ({k} = {d.expr}); set {', '.join(d.expr.names())} instead")
    spread = {f.pad.over for f in emitted if f.pad.rule == SPREAD}
    env: dict[str, int] = {}
    sources: dict[str, str] = {}
    for name in _needed_dims(plan, emitted):
        d = plan.dims[name]
        if isinstance(d, DerivedDim):
            env[name] = d.expr.evaluate(env)
            sources[name] = "derived"
            if env[name] < 0:
                raise ValueError(f"padding sizes give {name} = {d.expr} = {env[name]} < 0")
            continue
        if not isinstance(d, FreeDim):
            env[name] = d.size
            sources[name] = "config" if d.source.startswith("config") else "schema"
            continue
        found = (
            _id_count(plan, name, emitted, like, like_dims, dims, seen or {})
            if name in spread
            else _free_size(plan, name, emitted, like_dims, dims)
        )
        size, sources[name] = found
        if not d.allows(size):
            raise ValueError(
                f"padding size {name}={size} (from {_SOURCE_WORDS[sources[name]]}) breaks the dim's bounds "
                f"({d.describe()})"
            )
        env[name] = size
    return env, sources


#: A source of `PaddingSizes.sources` in the words of a message.
_SOURCE_WORDS = {
    "dims": "dims=",
    "padding default": "the schema's padding sizes",
    "like": "the like= sample",
}
#: The same for the count a spread rule spreads over (from like=, it may be the largest id + 1).
_SPREAD_SOURCE_WORDS = {
    **_SOURCE_WORDS,
    "like": "the like= sample: its shapes, else its largest id + 1",
    "batch": "the largest id over the real rows of the batch + 1",
    "config": "the model config the schema is pinned to",
    "schema": "the schema's pinned size",
}


def _needed_dims(plan: Plan, emitted: list[Field]) -> list[str]:
    """The dims the emitted fields (shapes, spread rules) and the length tags need, each after those it derives from."""
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
        if f.pad.rule == SPREAD and f.pad.over is not None:
            need(f.pad.over)
    for t in plan.tags.values():
        if t.equals is not None:
            for n in t.equals.names():
                need(n)
    return needed


def _free_size(
    plan: Plan, name: str, emitted: list[Field], like_dims: Mapping[str, int], dims: Mapping[str, int]
) -> tuple[int, str]:
    """A free dim's padding size: ``dims=``, then the schema's padding size, then the ``like=`` sample's."""
    if name in dims:
        return dims[name], "dims"
    if name in plan.padding_sizes:
        return plan.padding_sizes[name], "padding default"
    if name in like_dims:
        return like_dims[name], "like"
    users = [f.name for f in emitted if name in _dims_needed_by(plan, f)]
    raise PaddingSizeError(
        f"schema {plan.name!r} has no padding size for dim {name!r} (used by {', '.join(users) or 'tags'})",
        schema_name=plan.name,
        dim=name,
    )


def _dims_needed_by(plan: Plan, f: Field) -> set[str]:
    """The dims ``f``'s padding needs a size for: those of its shape and spread rule, and those they derive from."""
    todo = [n for e in f.shape or () for n in e.names()]
    if f.pad.rule == SPREAD and f.pad.over is not None:
        todo.append(f.pad.over)
    seen: set[str] = set()
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            d = plan.dims.get(n)
            if isinstance(d, DerivedDim):
                todo.extend(d.expr.names())
    return seen


def _id_count(
    plan: Plan,
    name: str,
    emitted: list[Field],
    like: Mapping[str, Any] | None,
    like_dims: Mapping[str, int],
    dims: Mapping[str, int],
    seen: Mapping[str, int],
) -> tuple[int, str]:
    """How many ids a ``pad: {spread: name}`` field spreads over: ``dims=``, then the dim the ``like=``
    sample's shapes bind, then the largest id over the real rows of the batch + 1 (``seen``, from
    `ids_seen`), then the ``like=`` sample's largest id + 1, then the schema's padding size.

    The real count matters (a padding token sent to expert 0 of 128 is the very hot expert
    spreading avoids), so the real batch comes before a schema's default; a schema pinned
    to the model's count (`schema_for_config`, `Schema.with_dims`) fixes the dim and never
    gets here.
    """
    users = [f for f in emitted if f.pad.rule == SPREAD and f.pad.over == name]
    if name in dims:
        return dims[name], "dims"
    if name in like_dims:
        return like_dims[name], "like"
    if name in seen:
        return seen[name], "batch"
    found = [largest_id(like.get(f.name)) for f in users] if like is not None else []
    largest = max((n for n in found if n is not None), default=-1)
    if largest >= 0:
        return largest + 1, "like"
    if name in plan.padding_sizes:
        return plan.padding_sizes[name], "padding default"
    fields = ", ".join(f.name for f in users)
    raise PaddingSizeError(
        f"schema {plan.name!r} does not know how many ids {fields} spreads its padding over (dim {name!r}), "
        "and no real sample shows it",
        schema_name=plan.name,
        dim=name,
        field=users[0].name,
        remedy=(
            f"pass dims={{{name!r}: <count>}}, use the schema pinned from the model config "
            f"(ts.schema_for_config(config), or schema.with_dims({{{name!r}: <count>}})), "
            "or pass like=<a real sample of the batch>"
        ),
    )


def _axes(f: Field, env: Mapping[str, int]) -> tuple[int, ...]:
    """The sizes of a tensor field's axes under ``env``; a negative one is refused."""
    sizes = tuple(e.evaluate(env) for e in f.shape or ())
    if any(n < 0 for n in sizes):
        shown = ", ".join(f"{e}={n}" for e, n in zip(f.shape or (), sizes))
        raise ValueError(f"padding sizes give field {f.name!r} a negative axis ({shown}); pass other dims=")
    return sizes


def _check_field(
    plan: Plan,
    f: Field,
    env: Mapping[str, int],
    eos: int,
    like: Mapping[str, Any] | None,
    sources: Mapping[str, str],
) -> None:
    """Everything that could refuse ``f``'s column beyond its size, checked before any column is built."""
    ref = like.get(f.name) if like is not None else None
    if f.pad.rule == "copy" and isinstance(ref, torch.Tensor):
        _copied(ref, 0, f.name)  # refuses what cannot be copied, at no cost
    f = plan.bounded(f, env)  # a bound written in dims (max: experts - 1), at the padding's sizes
    if f.pad.rule == SPREAD:
        _check_spread(plan, f, env, like, sources.get(f.pad.over or ""))
    else:
        _check_fill(plan, f, env, eos, like)


def _check_spread(
    plan: Plan, f: Field, env: Mapping[str, int], like: Mapping[str, Any] | None, source: str | None
) -> None:
    """Refuse a ``pad: {spread: dim}`` column that could not hold distinct ids in range, or would break the checks."""
    over = f.pad.over or ""
    ids, axes = env[over], _axes(f, env)
    slots = axes[-1]
    dtype = _dtype(f, like)
    where = f"schema {plan.name!r}: padding field {f.name!r} with {f.pad}"
    if slots > ids:
        came = f" (from {_SPREAD_SOURCE_WORDS.get(source or '', source)})" if source else ""
        raise ValueError(
            f"{where}: {over}={ids}{came} ids cannot fill {slots} slots with distinct ids (the last axis, "
            f"{f.shape[-1] if f.shape else '?'}={slots}); {over} must be at least {slots}"
        )
    if not ids or not all(axes):
        return  # no slot to fill
    largest = ids - 1  # the count decides which ids a batch reaches; every one may be
    if not fits_dtype(largest, dtype):
        raise ValueError(f"{where}: id {largest} (of {over}={ids}) does not fit dtype {dtype}")
    problem = _fill_problem(f, SPREAD, largest + 1, dtype)
    if problem:
        raise ValueError(f"{where} ({over}={ids}) {problem}")


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
    if rule == SPREAD:
        # ids 0..value-1, distinct along a slice: as for positions, the two extremes stand for
        # the interval, and len(values) + 1 ids decide a value set.
        n = min(value, len(f.values) + 1) if f.values is not None else value
        probe = torch.arange(n) if f.values is not None else torch.tensor([0, value - 1] if value > 1 else [0])
        return _value_problem(f, probe.to(dtype))
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
        if rule == SPREAD:
            return spread_ids(shape, env[f.pad.over or ""], dtype)
        raise AssertionError(rule)  # the loader only admits the rules above for tensors
    if rule == "fill":
        return _Same(value, count) if _immutable(value) else [copy.deepcopy(value) for _ in range(count)]
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
        # detach: padding is data; a reference's autograd graph would make it unpicklable (non-leaf)
        return v.detach().unsqueeze(0).expand(count, *v.shape).clone()
    if _immutable(v):
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


def _immutable(value: Any) -> bool:
    """Whether every padding row may hold this very object: nothing can change it in place."""
    return type(value) in _SCALARS or value is EMPTY_MAPPING


_SCALARS = (str, int, float, bool, type(None))


def _nontensor_stack(values: Sequence[Any]):
    """A non-tensor column laid out as TransferQueue returns one: each row its own `NonTensorData`.

    One `NonTensorData` shared by every row would be cheaper, but a write into one row
    (`fields[0] = row`, `set_at_`) replaces the value it holds: every row's uid would
    change with it. The value inside may be shared: `_Same` holds only immutable ones.
    Not `NonTensorStack.from_list`: it turns a list value into a stack of its items (a
    `NonTensorData` each, ~600 bytes an item) and refuses a ragged one.
    """
    from tensordict import NonTensorData, NonTensorStack

    if not len(values):
        return nontensor_column(values)  # the empty column every tensordict version accepts
    rows = _nontensor_rows(values)
    if rows is not None:
        return NonTensorStack(*rows)
    # Plain scalars as they are; a TensorDict value wrapped, or the stack would take it for a member.
    return NonTensorStack(
        *(
            v if type(v) in _SCALARS or isinstance(v, (NonTensorData, NonTensorStack)) else NonTensorData(data=v)
            for v in values
        )
    )


#: The value types `_nontensor_rows` wraps: those `NonTensorData` keeps as they are.
_PLAIN_VALUES = (*_SCALARS, dict, list, _EmptyMapping)
#: The instance attributes of a `NonTensorData` and of the empty TensorDict inside it, on
#: every tensordict this package supports (0.10 to 0.15); anything else: the public path.
_NTD_ATTRS = frozenset({"_tensordict", "_non_tensordict", "_is_initialized"})
_TD_ATTRS = frozenset({"_device", "_tensordict", "_batch_size", "_td_dim_names"})


def _nontensor_rows(values: Sequence[Any]) -> list[Any] | None:
    """One fresh `NonTensorData` per value, 3-8x cheaper than its constructor; ``None`` where unsure.

    The constructor validates and converts every value (~4 µs a row on tensordict 0.15,
    ~10 µs on 0.10: most of a padding call; this copy takes ~1.2 µs). One row per
    distinct value type is built by it as a template; every row is then a copy of the
    template's instance attributes with its own containers (the inner TensorDict's dict,
    the dict holding the value), so rows share nothing a write could reach. Only when
    the template shows the layout this copy knows, and that the value is held as given;
    otherwise (another tensordict, another value type) ``None``, and the caller takes
    the public path.
    """
    from tensordict import NonTensorData, TensorDict

    templates: dict[type, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
    for v in values[:1] if isinstance(values, _Same) else values:
        kind = type(v)
        if kind in templates:
            continue
        if kind not in _PLAIN_VALUES:
            return None
        outer = getattr(NonTensorData(data=v), "__dict__", {})
        td, held = outer.get("_tensordict"), outer.get("_non_tensordict")
        inner = getattr(td, "__dict__", {})
        if (
            set(outer) != _NTD_ATTRS
            or type(td) is not TensorDict
            or set(inner) != _TD_ATTRS
            or inner["_tensordict"] != {}
            or not isinstance(held, dict)
            or held.get("data") is not v
        ):
            return None
        templates[kind] = (outer, inner, held)
    # One __dict__ per object, set whole: half the cost of setting its attributes one by one.
    new, put = object.__new__, object.__setattr__
    rows = []
    for v in values:
        outer, inner, held = templates[type(v)]
        td = new(TensorDict)
        put(td, "__dict__", {**inner, "_tensordict": {}})
        row = new(NonTensorData)
        put(row, "__dict__", {**outer, "_tensordict": td, "_non_tensordict": {**held, "data": v}})
        rows.append(row)
    return rows
