"""Reading a packed batch: a mapping (a `PackedBatch`, a dict) or a ``TensorDict`` as verl
builds one (nested columns, ``NonTensorData`` entries), as one key -> value table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from trajschema.check import is_tensordict
from trajschema.core import Violation

__all__ = ["read_packed", "rows_of"]


def _plain(v: Any) -> Any:
    """A ``NonTensorData``'s value, a ``NonTensorStack``'s list; anything else as it is."""
    kind = type(v).__name__
    if kind == "NonTensorData":
        return v.data
    if kind == "NonTensorStack":
        return v.tolist()
    return v


def read_packed(batch: Any) -> tuple[dict[str, Any], list[Violation]]:
    """``{key: value}`` of ``batch`` (a `PackedBatch`'s ``metadata`` entries included), and
    a ``batch`` violation when it is no mapping or TensorDict.

    Raises:
        TypeError: ``batch`` is neither a mapping nor a TensorDict.
    """
    if is_tensordict(batch):
        return {k: v for k in batch.keys() if (v := _plain(batch.get(k))) is not None}, []
    if not isinstance(batch, Mapping):
        raise TypeError(
            f"a packed batch is a mapping of batch key to value or a TensorDict, found {type(batch).__name__}"
        )
    out = {k: _plain(v) for k, v in batch.items() if isinstance(k, str) and v is not None}  # None: absent
    bad = [k for k in batch if not isinstance(k, str)]
    found = [
        Violation(None, repr(k), "key", "a str batch key", type(k).__name__, f"batch key {k!r} is not a str")
        for k in bad
    ]
    for k, v in getattr(batch, "metadata", {}).items():
        if v is not None:
            out.setdefault(k, _plain(v))
    return out, found


def rows_of(value: Any) -> int | None:
    """How many samples a per-sample column holds (``None``: not a per-sample column)."""
    if isinstance(value, torch.Tensor):
        if value.is_nested:
            return int(value.size(0))
        return int(value.shape[0]) if value.dim() else None
    if isinstance(value, (list, tuple)):
        return len(value)
    return None
