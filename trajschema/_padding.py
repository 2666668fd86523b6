"""Padding samples derived from a schema's pad rules."""

from __future__ import annotations

import copy
import dataclasses
import functools
import numbers
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ._dims import DerivedDim, FreeDim
from ._schema import Field, Schema

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
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, found {v!r}")
    return int(v)


def make_padding(
    schema: Schema,
    count: int,
    *,
    eos_token_id: int,
    like: Mapping[str, Any] | None,
    dims: Mapping[str, int] | None,
    include: Sequence[str] | None,
) -> PaddingBatch:
    """See :meth:`trajschema.Schema.padding`."""
    from tensordict import TensorDict

    from ._validate import _as_mapping

    count = _check_int("count", count)
    eos = _check_int("eos_token_id", eos_token_id)
    if like is not None:
        like = _as_mapping(like)
        like_dims = schema.validate(like, depth="shapes")
    else:
        like_dims = {}
    emitted = _emitted_fields(schema, like, include)
    env = _padding_dims(schema, emitted, like_dims, dims)
    uid = new_padding_uid()

    columns: dict[str, Any] = {}
    for f in emitted:
        _check_fill(schema, f, env, eos, like)
        columns[f.name] = _column(f, count, env, eos, uid, like)
    if like is not None and schema.extra == "allow":
        for k, v in like.items():
            if k not in schema.fields and v is not None:
                columns[k] = _copied(v, count)

    tensors = {k: v for k, v in columns.items() if isinstance(v, torch.Tensor)}
    fields = TensorDict(tensors, batch_size=[count])
    for k, v in columns.items():
        if not isinstance(v, torch.Tensor):
            fields[k] = _nontensor_stack(v)
    tag_values = {t.name: t.equals.evaluate(env) for t in schema.tags.values() if t.equals is not None}
    tag = {"is_padding": True, **{k: v for k, v in tag_values.items() if v is not None}}
    return PaddingBatch(
        keys=[f"{uid}_{i}_0" for i in range(count)],
        tags=[dict(tag) for _ in range(count)],
        fields=fields,
        uid=uid,
        dims={n: env[n] for n in schema.dims if n in env},
        _columns=columns,
    )


def _emitted_fields(schema: Schema, like: Mapping[str, Any] | None, include: Sequence[str] | None) -> list[Field]:
    if include is not None:
        if isinstance(include, str):
            include = [include]
        unknown = [n for n in include if n not in schema.fields]
        if unknown:
            raise ValueError(
                f"include= names fields schema {schema.name!r} does not declare: {unknown} "
                f"(its optional fields: {[f.name for f in schema.fields.values() if not f.required]})"
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
    for f in schema.fields.values():
        if f.required:
            out.append(f)
        elif like is not None:
            if like.get(f.name) is not None:
                out.append(f)
        elif f.name in wanted:
            out.append(f)
    return out


def _padding_dims(
    schema: Schema, emitted: list[Field], like_dims: Mapping[str, int], dims: Mapping[str, int] | None
) -> dict[str, int]:
    dims = dict(dims or {})
    for k, v in dims.items():
        if k not in schema.dims:
            raise ValueError(
                f"dims={{{k!r}: ...}}: schema {schema.name!r} has no dim {k!r} (its dims: {', '.join(schema.dims)})"
            )
        _check_int(f"dims[{k!r}]", v)
        d = schema.dims[k]
        if isinstance(d, DerivedDim):
            raise ValueError(f"dims[{k!r}]: {k} is derived ({k} = {d.expr}); set {', '.join(d.expr.names())} instead")
        if not isinstance(d, FreeDim) and v != d.size:
            raise ValueError(f"dims[{k!r}]={v}: {k} is fixed at {d.size} by schema {schema.name!r}")
    # Which dims do the emitted fields and the length tags need?
    needed: list[str] = []

    def need(name: str) -> None:
        if name in needed:
            return
        d = schema.dims[name]
        if isinstance(d, DerivedDim):
            for m in d.expr.names():
                need(m)
        needed.append(name)

    for f in emitted:
        for e in f.shape or ():
            for n in e.names():
                need(n)
    for t in schema.tags.values():
        if t.equals is not None:
            for n in t.equals.names():
                need(n)
    env: dict[str, int] = {}
    for name in needed:
        d = schema.dims[name]
        if isinstance(d, DerivedDim):
            env[name] = d.expr.evaluate(env)
            if env[name] < 0:
                raise ValueError(f"padding sizes give {name} = {d.expr} = {env[name]} < 0")
            continue
        if not isinstance(d, FreeDim):
            env[name] = d.size
            continue
        size = dims.get(name, schema.padding_sizes.get(name, like_dims.get(name)))
        if size is None:
            users = [f.name for f in emitted if any(name in e.names() for e in f.shape or ())]
            raise ValueError(
                f"schema {schema.name!r} has no padding size for dim {name!r} (used by {', '.join(users) or 'tags'}); "
                f"pass like=<a real sample of the batch> or dims={{{name!r}: <size>}}"
            )
        if not d.allows(size):
            raise ValueError(f"padding size {name}={size} breaks the dim's bounds ({d.describe()})")
        env[name] = size
    return env


def _check_fill(schema: Schema, f: Field, env: Mapping[str, int], eos: int, like) -> None:
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
        problem = _fill_problem(f, rule, probe, dtype)  # pure: cached per field, rule, value and dtype
    if problem:
        source = {"eos": f"eos_token_id={eos}", "copy": "the like= sample's value"}.get(rule, f"fill {f.pad}")
        raise ValueError(f"schema {schema.name!r}: padding field {f.name!r} with {source} {problem}")


@functools.lru_cache(maxsize=4096)
def _fill_problem(f: Field, rule: str, value: Any, dtype: torch.dtype | None) -> str | None:
    if dtype is None:
        return _value_problem(f, value)
    if rule == "positions":
        probe = torch.arange(value, dtype=dtype)
        if value and probe[-1].item() != value - 1:
            return f"needs positions up to {value - 1}, which do not fit {dtype}"
    else:
        try:
            probe = torch.tensor(value, dtype=dtype)
        except RuntimeError:  # torch refuses some overflowing conversions outright
            probe = None
        if probe is None or probe.item() != value:
            return f"does not fit dtype {dtype}"
    return _value_problem(f, probe)


def _value_problem(f: Field, probe: Any) -> str | None:
    from ._validate import _has_bad_values

    if probe is None or not f.has_value_checks or not _has_bad_values(f, probe):
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
        if like is None or like.get(f.name) is None:
            raise ValueError(f"field {f.name!r} pads by copying the reference sample; pass like=<a real sample>")
        return _copied(like[f.name], count)
    if f.is_tensor:
        shape = (count, *(e.evaluate(env) for e in f.shape or ()))
        dtype = _dtype(f, like)
        if rule == "fill":
            # zeros skips full's per-element fill loop: about twice as fast for wide columns.
            return torch.zeros(shape, dtype=dtype) if value == 0 else torch.full(shape, value, dtype=dtype)
        if rule == "eos":
            return torch.full(shape, eos, dtype=dtype)
        if rule == "positions":
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


def _copied(v: Any, count: int) -> Any:
    if isinstance(v, torch.Tensor) and not v.is_nested:
        return v.unsqueeze(0).expand(count, *v.shape).clone()
    if isinstance(v, (str, int, float, bool, type(None))):
        return _Same(v, count)
    return [copy.deepcopy(v) for _ in range(count)]


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

    __setitem__ = __delitem__ = __ior__ = _read_only
    update = setdefault = pop = popitem = clear = _read_only

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

    if isinstance(values, _Same):
        # One NonTensorData shared by every row is safe for an immutable value (and the
        # read-only EMPTY_MAPPING) and much cheaper than building `count` of them.
        one = NonTensorData(data=values.value)
        return NonTensorStack(*([one] * len(values))) if len(values) else NonTensorStack.from_list([])
    return NonTensorStack.from_list(list(values))
