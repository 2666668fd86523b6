"""Metrics on real samples only: padding rows never dilute a metric.

Padding is known from the ``is_padding`` tag alone ([`is_padding`][trajschema.is_padding]), so a
real sample whose loss mask is all zero stays in the metrics, and a batch made only of
padding yields no metrics (with a [`PaddingOnlyBatchWarning`][trajschema.PaddingOnlyBatchWarning]) instead of numbers
silently computed on synthetic samples.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from trajschema.check import BatchShapeError, batch_view, index_rows, is_tensordict
from trajschema.contract.contract import real_mask
from trajschema.core import Batch, TagDict, describe_value

__all__ = ["PaddingOnlyBatchWarning", "exclude_padding", "select_real"]

_Fn = TypeVar("_Fn", bound=Callable[..., Mapping[str, float]])


class PaddingOnlyBatchWarning(UserWarning):
    """A batch has no real sample (it is empty or all padding), so no metrics were computed."""

    __module__ = "trajschema"


def select_real(batch: Any, tags: Sequence[Mapping[str, Any] | None]) -> Any:
    """The batch restricted to its real samples, in order; ``None`` if it has none.

    A sample is padding only when its tag says ``is_padding=True``; a real sample with an
    all-zero loss mask is kept. When the batch has no padding it is returned as is.

    Examples:
        >>> import trajschema as ts
        >>> ts.select_real(["a", "pad", "b"], [{}, {"is_padding": True}, None])
        ['a', 'b']

    Args:
        batch: a list of samples, or a TensorDict with one batch dim (jagged nested
            columns included), e.g. as TransferQueue returns it.
        tags: one tag dict (or ``None``) per sample.

    Returns:
        A list or TensorDict of the real samples, or ``None`` (with a
        [`PaddingOnlyBatchWarning`][trajschema.PaddingOnlyBatchWarning]) when the batch is empty or all padding.

    Raises:
        ValueError: ``batch`` and ``tags`` differ in length, or a TensorDict has more
            than one batch dim.
        TypeError: ``batch`` is neither a list nor a TensorDict, or a tag is malformed
            (see [`is_padding`][trajschema.is_padding]).
    """
    return _select(batch, tags, stacklevel=3)[0]


def exclude_padding(fn: _Fn) -> _Fn:
    """Decorate a metric function so that it only ever sees real samples.

    The metric is called as ``fn(batch, tags, *args, **kwargs)`` and returns a dict of
    floats; the wrapper passes it only the real samples and their tags. For a batch with
    no real sample it returns ``{}`` and warns instead of calling ``fn``.

    Examples:
        >>> import trajschema as ts
        >>> @ts.exclude_padding
        ... def mean_reward(batch, tags):
        ...     return {"reward/mean": sum(s["reward"] for s in batch) / len(batch)}
        >>> mean_reward([{"reward": 1.0}, {"reward": 0.0}], [{}, {"is_padding": True}])
        {'reward/mean': 1.0}

    Args:
        fn: the metric function.

    Raises:
        TypeError: at decoration, ``fn`` is not callable or cannot take ``batch`` and
            ``tags`` as its first two positional arguments; at a call, the arguments do
            not fit ``fn``'s signature (checked before the batch is read, so a batch of
            padding only cannot hide the mistake).
        ValueError / TypeError: from the wrapped call, as for [`select_real`][trajschema.select_real].
    """
    signature = _metric_signature(fn)

    @functools.wraps(fn)
    def wrapper(batch: Any, tags: Sequence[Mapping[str, Any] | None], *args: Any, **kwargs: Any):
        if signature is not None:
            _check_call(fn, signature, args, kwargs)
        real, real_tags = _select(batch, tags, stacklevel=3)
        if real is None:
            return {}
        return fn(real, real_tags, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _metric_signature(fn: Any) -> inspect.Signature | None:
    """``fn``'s signature, after checking it can be called as ``fn(batch, tags)``; ``None`` when it has none.

    Some callables (builtins, some C types) expose no signature: they are called as they are.
    """
    if not callable(fn):
        raise TypeError(f"exclude_padding decorates a metric function fn(batch, tags, ...), found {_what(fn)}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read: nothing to check up front
        return None
    try:
        signature.bind_partial(None, None)  # further arguments come with each call
    except TypeError as exc:
        raise TypeError(
            f"exclude_padding: metric {_what(fn)} must take the batch and its tags as its first two "
            f"positional arguments, fn(batch, tags, ...); its signature is {signature} ({exc})"
        ) from None
    return signature


def _check_call(fn: Any, signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    try:
        signature.bind(None, None, *args, **kwargs)
    except TypeError as exc:
        raise TypeError(
            f"metric {_what(fn)} cannot be called as fn(batch, tags, *args, **kwargs) here: {exc}"
        ) from None


def _what(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None)
    return f"{name!r}" if isinstance(name, str) else describe_value(fn)


def _select(batch: Batch, tags: Sequence[TagDict | None], *, stacklevel: int) -> tuple[Any, list[Any]]:
    """(real samples, their tags); (None, []) with a warning when there are none."""
    try:
        view = batch_view(batch) if is_tensordict(batch) else None
    except BatchShapeError as exc:
        raise ValueError(str(exc)) from None
    if view is not None:
        n = view.n
    elif isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)):
        n = len(batch)
    else:
        raise TypeError(f"a batch must be a list of samples or a TensorDict, found {type(batch).__name__}")
    if not isinstance(tags, Sequence) or isinstance(tags, (str, bytes)):
        raise TypeError(f"tags must be a sequence of tag dicts, found {type(tags).__name__}")
    if len(tags) != n:
        raise ValueError(f"the batch has {n} samples but tags has {len(tags)} tag dicts; they must pair up")
    keep = real_mask(tags)
    k = int(keep.sum())
    if k == 0:
        what = "the batch is empty" if n == 0 else f"all {n} samples of the batch are padding"
        warnings.warn(
            f"{what}; no metrics computed (a metric of padding would be meaningless)",
            PaddingOnlyBatchWarning,
            stacklevel=stacklevel,
        )
        return None, []
    if k == n:
        return batch, list(tags)
    rows = keep.nonzero().flatten()
    real_tags = [tags[i] for i in rows.tolist()]
    if view is not None:
        return index_rows(batch, rows), real_tags
    return [batch[i] for i in rows.tolist()], real_tags
