"""The entry points of checking: one sample (fast path first) and whole batches.

`validate_sample` first runs the generated straight-line checker, which only says
"clean" or "look closer"; `check_batch` screens a TensorDict column by column
(`_screen`) and a list sample by sample. Either way only the rows that need a
closer look reach `trajschema.check.sample.check_sample`, the one writer of records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trajschema.check.columns import BatchShapeError, BatchView, as_mapping, batch_view, is_tensordict
from trajschema.check.plan import Plan, dtype_overflow
from trajschema.check.sample import check_sample, tag_problems
from trajschema.check.screen import suspicious_rows
from trajschema.core import (
    DEPTHS,
    MAX_SIZE,
    FixedDim,
    FreeDim,
    SchemaError,
    Violation,
    check_int,
    describe_value,
    has_repeats,
    kind_ok,
    scalar_failures,
    shown_value,
    tensor_has_failures,
)

__all__ = [
    "batch_of",
    "check_args",
    "check_batch",
    "check_packed_batch",
    "fast_bindings",
    "one_sample",
    "sample_violations",
    "tags_length_violation",
    "validate_sample",
]


def check_args(plan: Plan, dims: Mapping[str, int] | None, depth: str) -> dict[str, int] | None:
    """Refuse a bad ``depth`` or ``dims=`` before looking at any data; return ``dims`` as plain ints.

    Raises:
        ValueError: an unknown depth; a dim the schema lacks, a size that is not an int
            >= 0, or a size for a fixed dim other than its own.
    """
    if not isinstance(depth, str) or depth not in DEPTHS:  # str first: `in` would compare an array elementwise
        raise ValueError(f"depth must be 'shapes' or 'values', found {shown_value(depth)}")
    if dims is None:
        return None
    if not isinstance(dims, Mapping):
        raise ValueError(f"dims= must be a mapping of dim name to size, found {describe_value(dims)}")
    declared = plan.dims
    for k, v in dims.items():
        if k not in declared:
            raise ValueError(
                f"dims={{{k!r}: ...}}: schema {plan.name!r} has no dim {k!r} (its dims: {', '.join(declared)})"
            )
        check_int(f"dims[{k!r}]", v, maximum=MAX_SIZE, meaning="a torch size")
        d = declared[k]
        if isinstance(d, FixedDim) and v != d.size:
            raise ValueError(f"dims[{k!r}]={v}: {k} is fixed at {d.size} by schema {plan.name!r}")
    return {k: int(v) for k, v in dims.items()}  # numpy ints and the like become ints


def one_sample(sample: Any, what: str = "sample") -> Mapping[str, Any]:
    """``sample`` as a mapping, refusing what is not one sample; ``what`` names the argument in messages.

    Raises:
        TypeError: ``sample`` is not a mapping, or is a TensorDict with batch dims (a
            batch, not one of its rows).
    """
    if type(sample) is dict:
        return sample
    if is_tensordict(sample) and sample.batch_dims:
        raise TypeError(
            f"{what} must be one sample, found a TensorDict with batch_size {list(sample.batch_size)} (a batch); "
            "pass one row of it (batch[i]), or check the whole batch with validate_batch"
        )
    try:
        return as_mapping(sample)
    except TypeError:
        raise TypeError(
            f"{what} must be a mapping of field name to value (a dict or a TensorDict row), "
            f"found {describe_value(sample)}"
        ) from None


def batch_of(batch: Any) -> BatchView:
    """The `BatchView` of ``batch``; a sample that is not a mapping is named by its index.

    Raises:
        TypeError: ``batch`` is neither a sequence of sample mappings nor a TensorDict
            (``batch[i]`` names the first sample that is not a mapping).
        BatchShapeError: a TensorDict without exactly one batch dim.
    """
    if isinstance(batch, BatchView):
        return batch
    try:
        return batch_view(batch)
    except TypeError:
        if is_tensordict(batch) or not isinstance(batch, Sequence) or isinstance(batch, (str, bytes, Mapping)):
            raise TypeError(
                "a batch must be a list of sample mappings or a TensorDict, found " + describe_value(batch)
            ) from None
        for i, sample in enumerate(batch):
            if type(sample) is not dict and not is_tensordict(sample) and not isinstance(sample, Mapping):
                raise TypeError(
                    f"batch[{i}]: a sample must be a mapping of field name to value (a dict or a TensorDict row), "
                    f"found {describe_value(sample)}"
                ) from None
        raise


def fast_bindings(
    plan: Plan, sample: Mapping[str, Any], tag: Any, dims: Mapping[str, int] | None, depth: str
) -> dict[str, int] | None:
    """The sample's dims when it is certainly clean; ``None`` means "look closer"."""
    env = plan.fast(sample)
    if env is None:
        return None
    if dims and not _pinned_agree(plan, env, dims):
        return None
    if plan.extra == "forbid" and any(k not in plan.fields for k in sample):
        return None
    if tag is not None and tag_problems(plan, tag, env):
        return None
    for f in plan.dim_bounded:
        v = sample.get(f.name)
        # the names check first: with none bound (experts not pinned) no bound holds a dtype to anything;
        # with one bound, its own end does (min: k - 2 on uint8 while max: experts - 1 waits)
        names = plan.bound_names[f.name]
        if v is not None and not names.isdisjoint(env) and dtype_overflow(f, v.dtype, env) is not None:
            return None
    if depth == "values":
        for f in plan.valued:
            v = sample.get(f.name)
            if v is None:
                continue
            if f.min_expr is not None or f.max_expr is not None:  # inline: this loop runs per sample
                f = plan.bounded(f, env)
            if f.is_tensor:
                if tensor_has_failures(f, v) or (f.distinct and has_repeats(v)):
                    return None
            elif kind_ok(f.kind, v) and scalar_failures(f, v):
                return None
    return env


def _pinned_agree(plan: Plan, env: dict[str, int], dims: Mapping[str, int]) -> bool:
    """Whether the sizes ``dims=`` pins agree with the fast checker's, binding those no field observed.

    A free dim no tensor observes (``experts``, named only by a value bound) is bound by
    ``dims=`` alone; within its bounds that is what the full check binds too, with nothing
    to disagree with. ``env`` gains it, in declaration order.
    """
    added = False
    for k, n in dims.items():
        got = env.get(k)
        if got is None:
            d = plan.dims[k]
            if not isinstance(d, FreeDim) or not d.allows(n):
                return False
            env[k], added = n, True
        elif got != n:
            return False
    if added:
        ordered = {k: env[k] for k in plan.dims if k in env}
        env.clear()
        env.update(ordered)
    return True


def sample_violations(
    plan: Plan, sample: Any, *, tag: Any, dims: Mapping[str, int] | None, depth: str
) -> tuple[dict[str, int], list[Violation]]:
    """(dims bound, violations) of one sample; raises only for bad arguments."""
    dims = check_args(plan, dims, depth)
    return check_sample(plan, one_sample(sample), tag=tag, dims=dims, depth=depth)


def validate_sample(plan: Plan, sample: Any, *, tag: Any, dims: Mapping[str, int] | None, depth: str) -> dict[str, int]:
    """Check one sample; return its dims or raise [`SchemaError`][trajschema.SchemaError] with every violation."""
    dims = check_args(plan, dims, depth)
    mapping = one_sample(sample)
    fast = fast_bindings(plan, mapping, tag, dims, depth)
    if fast is not None:
        return fast
    bound, found = check_sample(plan, mapping, tag=tag, dims=dims, depth=depth)
    if found:
        raise SchemaError(found, schema_name=plan.name, bindings={None: bound})
    return bound


def tags_length_violation(tags: Any, n: int) -> list[Violation]:
    """A ``batch`` violation when ``tags`` is not one tag dict per sample."""
    if tags is None:
        return []
    if isinstance(tags, Sequence) and not isinstance(tags, (str, bytes)) and len(tags) == n:
        return []
    is_list = isinstance(tags, Sequence) and not isinstance(tags, (str, bytes))
    found = f"{len(tags)} tag dicts" if is_list else describe_value(tags)
    msg = f"tags= needs one tag dict per sample: expected {n}, found {found}"
    return [Violation(None, "<tags>", "batch", f"{n} tag dicts", found, msg)]


def check_batch(
    plan: Plan,
    batch: Any,
    *,
    tags: Sequence[Any] | None,
    dims: Mapping[str, int] | None,
    depth: str,
    bound_out: list[dict[str, int]] | None = None,
) -> tuple[list[Violation], dict[int | None, dict[str, int]]]:
    """Every violation of a batch, and the dims bound by each sample that has one.

    For a list of samples, ``bound_out`` (if given) receives the dims each sample binds,
    in order, so a caller needs no second pass to learn them.
    """
    dims = check_args(plan, dims, depth)
    try:
        view = batch_of(batch)
    except BatchShapeError as exc:
        size = list(batch.batch_size)  # only a TensorDict raises this
        return [Violation(None, "<batch>", "batch", "batch_size [B]", f"batch_size {size}", str(exc))], {}
    if bound_out is not None and view.is_table:
        raise ValueError("bound_out is only collected for a list of samples")
    found = tags_length_violation(tags, view.n)
    tag_list = None if found else tags
    get: Callable[[int], Mapping[str, Any]]
    if view.is_table:
        rows: Sequence[int] = suspicious_rows(plan, view, tags=tag_list, dims=dims, depth=depth)
        get = _RowSource(view, rows)
    else:
        rows = range(view.n)
        get = view.row
    bindings: dict[int | None, dict[str, int]] = {}
    opaque = view.opaque()
    for i in rows:
        row = get(i)
        tag = tag_list[i] if tag_list is not None else None
        fast = None if view.is_table else fast_bindings(plan, row, tag, dims, depth)
        if fast is None:
            bound, vs = check_sample(plan, row, tag=tag, dims=dims, depth=depth, index=i, opaque=opaque)
        else:
            bound, vs = fast, []
        if bound_out is not None:
            bound_out.append(bound)
        if vs:
            found.extend(vs)
            bindings[i] = bound
    return found, bindings


def check_packed_batch(
    plan: Plan,
    rows: Sequence[Mapping[str, Any]],
    packed: Any,
    *,
    tags: Sequence[Any] | None,
    dims: Mapping[str, int] | None,
    depth: str,
    bound_out: list[dict[str, int]] | None = None,
) -> list[Violation]:
    """`check_batch` of the samples ``rows``, screened on ``packed``: the same samples as one TensorDict.

    The same violations as `check_batch` of ``rows``, for less: the values and tags are
    screened a column at a time on ``packed`` (`suspicious_rows`, which never passes a row
    with a problem) instead of sample by sample, and a sample it flags gets the full check,
    on ``rows`` itself. ``bound_out`` (if given) receives the dims each sample binds, in
    order: the shapes-only fast path binds those of the samples the screen passed (a
    sample it cannot bind gets the full check too).
    """
    dims = check_args(plan, dims, depth)
    found = tags_length_violation(tags, len(rows))
    tag_list = None if found else tags
    view = batch_of(packed)
    suspects = set(suspicious_rows(plan, view, tags=tag_list, dims=dims, depth=depth)) if view.is_table else None
    for i, row in enumerate(rows):
        passed = suspects is not None and i not in suspects
        if passed and bound_out is None:
            continue
        # The screen checked the tags: binding the dims needs no second look at them.
        fast = fast_bindings(plan, row, None, dims, "shapes") if passed else None
        if fast is None:
            tag = tag_list[i] if tag_list is not None else None
            fast, vs = check_sample(plan, row, tag=tag, dims=dims, depth=depth, index=i)
            found.extend(vs)
        if bound_out is not None:
            bound_out.append(fast)
    return found


class _RowSource:
    """Rows of a TensorDict batch for the rows that need a closer look.

    A few rows are cut out one at a time; many rows (a column-wide problem) unbind each
    column once instead, which is far cheaper than indexing the TensorDict per row.
    """

    _UNBIND_ABOVE = 32

    def __init__(self, view: BatchView, rows: Sequence[int]) -> None:
        self.view = view
        self.columns: dict[str, Sequence[Any]] | None = None
        if len(rows) > self._UNBIND_ABOVE:
            self.columns = {k: view.values_of(k) for k in view.keys()}

    def __call__(self, i: int) -> Mapping[str, Any]:
        if self.columns is not None:
            return {k: v[i] for k, v in self.columns.items()}
        return self.view.row(i)
