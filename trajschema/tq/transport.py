"""Which values and tags TransferQueue can carry: transportability as part of validation.

A put whose data passes the schema can still fail inside ``kv_batch_put``, after the
controller registered its keys: a value the wire cannot serialize (an object pickle
refuses, a ``meta`` tensor with no data, a sparse or quantized tensor), or a tag that
does not pickle. [transport_violations][] finds those before anything is written, with
TransferQueue's own serialization (``transfer_queue.utils.serial_utils.encode`` and
``decode``: msgpack with zero-copy tensors, pickle for the rest) when it is installed,
and a pickle round trip otherwise. Plain values (str, int, float, bool, None) and
ordinary tensors (strided, on a real device, of a dtype the wire reads back) are
known to travel and are not serialized twice.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trajschema.core import Violation, describe_value

__all__ = ["carry_problem", "transport_violations"]

#: dtypes TransferQueue's wire sends as raw bytes and reads back with torch.frombuffer.
_PLAIN_DTYPES = frozenset(
    {
        torch.bool,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
    }
)
_INT64_RANGE = (-(2**63), 2**64 - 1)  # msgpack's ints; others take the pickle fallback, which is fine


@functools.lru_cache(maxsize=1)
def _wire() -> Any:
    """TransferQueue's serializer module, or ``None`` when TransferQueue is not installed."""
    try:
        from transfer_queue.utils import serial_utils
    except ImportError:
        return None
    return serial_utils if hasattr(serial_utils, "encode") and hasattr(serial_utils, "decode") else None


def _round_trip(value: Any) -> None:
    """Send ``value`` through the wire and back; raises what the wire raises."""
    wire = _wire()
    if wire is not None:
        wire.decode(wire.encode(value))
        return
    if callable(value):  # TransferQueue sends callables with cloudpickle
        import cloudpickle  # type: ignore[import-untyped]

        cloudpickle.loads(cloudpickle.dumps(value))
        return
    pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


def _exactly_plain(value: Any) -> bool:
    """`_plain` for the common exact types alone, without isinstance chains: the per-value fast path."""
    t = type(value)
    if t is torch.Tensor:
        return value.dtype in _PLAIN_DTYPES and value.layout == torch.strided and (value.is_cpu or value.is_cuda)
    if t is int:
        return _INT64_RANGE[0] <= value <= _INT64_RANGE[1]
    return t is str or t is float or t is bool or value is None


def _plain(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, float)):
        return True
    if isinstance(value, int):
        return _INT64_RANGE[0] <= value <= _INT64_RANGE[1]
    if isinstance(value, torch.Tensor):
        return (
            type(value) is torch.Tensor
            and value.layout == torch.strided
            and value.device.type in ("cpu", "cuda")
            and value.dtype in _PLAIN_DTYPES
        )
    return False


def carry_problem(value: Any) -> str | None:
    """Why TransferQueue cannot carry ``value``, or ``None`` if it can.

    Examples:
        >>> carry_problem(torch.zeros(3)) is None
        True
        >>> carry_problem(torch.zeros(3, device="meta"))
        'a meta tensor holds no data to send'
    """
    if _plain(value):
        return None
    if isinstance(value, torch.Tensor) and value.is_meta:
        return "a meta tensor holds no data to send"
    if isinstance(value, Mapping) and all(isinstance(k, str) and _plain(v) for k, v in value.items()):
        return None
    try:
        _round_trip(value)
    except RecursionError:
        return "it nests too deeply to serialize"
    except Exception as exc:
        return f"serializing it fails: {type(exc).__name__}: {_short(str(exc))}"
    return None


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def transport_violations(
    rows: Sequence[Mapping[str, Any]], tags: Sequence[Any] | None = None, *, first_sample: int = 0
) -> list[Violation]:
    """A ``transport`` violation for every field value and tag value TransferQueue cannot carry.

    Args:
        rows: one ``{field: value}`` mapping per sample, as it will be put.
        tags: one tag dict per sample (or ``None``).
        first_sample: the batch index of ``rows[0]``, for the violations' ``sample``.
    """
    found = []
    for i, row in enumerate(rows):
        for name, value in row.items():
            if type(name) is str and _exactly_plain(value):
                continue
            if not isinstance(name, str):  # a TensorDict, and so a put, keys its columns by str
                label = repr(name)
                found.append(_violation(first_sample + i, label, type(name).__name__, "a field name must be a str"))
                continue
            problem = carry_problem(value)
            if problem is not None:
                found.append(_violation(first_sample + i, name, describe_value(value), problem))
    for i, tag in enumerate(tags or ()):
        if not isinstance(tag, Mapping):
            continue  # the schema check reports tags that are not dicts
        for name, value in tag.items():
            if type(name) is str and _exactly_plain(value):
                continue
            problem = carry_problem(name) or carry_problem(value)
            if problem is not None:
                label = name if isinstance(name, str) else repr(name)
                found.append(_violation(first_sample + i, label, describe_value(value), problem, tag=True))
    return found


def _violation(sample: int, field: str, actual: str, problem: str, *, tag: bool = False) -> Violation:
    what = f"tag {field!r}" if tag else "this value"
    return Violation(
        sample,
        field,
        "transport",
        "a value TransferQueue can send and read back",
        actual,
        f"TransferQueue cannot carry {what}: {problem}",
    )
