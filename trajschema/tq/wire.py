"""Build, without Ray or TransferQueue, the TensorDicts TransferQueue 0.1.11 reads and writes.

TransferQueue packs each column of a ``kv_batch_get`` from the per-sample values alone,
whatever layout the writer used: 0-dim tensors stack densely, other tensors come back as
jagged nested tensors (strided nested, or a ``NonTensorStack``, when that fails), Python
values as a ``NonTensorStack``, and a field some samples lack is dropped. The exact rules
are in ``docs/transferqueue-notes.md`` ("What kv_batch_get returns").

`wire_batch` reproduces exactly that, so tests and benchmarks can validate the
batches a trainer will see without starting Ray. `to_tq_fields` packs samples
the same way for writing (``kv_batch_put`` stores the per-sample values unchanged, so
reading them back gives the same TensorDict), but refuses inputs TransferQueue would
silently change on the way back: a field missing from some samples, mixed dtypes, or
tensors mixed with non-tensor values in one field. `wire_fields` re-views such a
TensorDict, without copying, in the layout TransferQueue's put handles fastest.

This module imports only torch and tensordict.
"""

from __future__ import annotations

import math
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from tensordict import NonTensorStack, TensorDict, TensorDictBase

__all__ = ["to_tq_fields", "wire_batch", "wire_fields"]


def _pack_column(values: list[Any]) -> torch.Tensor | NonTensorStack:
    """Pack one field's per-sample values the way TransferQueue 0.1.11 does on read."""
    if all(isinstance(v, torch.Tensor) for v in values):
        if all(v.dim() == 0 for v in values):
            return torch.stack(values)
        try:
            return torch.nested.as_nested_tensor(values, layout=torch.jagged)
        except (RuntimeError, TypeError):
            try:
                return torch.nested.as_nested_tensor(values, layout=torch.strided)
            except (RuntimeError, TypeError):
                return NonTensorStack(*values)
    return NonTensorStack(*values)


def wire_batch(samples: Sequence[Mapping[str, Any]]) -> TensorDict:
    """Lay out samples exactly as ``transfer_queue.kv_batch_get`` returns them.

    Each sample is a mapping of field name to value, as it was written to
    TransferQueue (tensors per sample, without a batch dim; Python objects for
    non-tensor fields). Fields are ordered by name, like TransferQueue orders them.

    Examples:
        >>> import torch
        >>> td = wire_batch([{"responses": torch.arange(3)}, {"responses": torch.arange(5)}])
        >>> td["responses"].layout, td["responses"].offsets().tolist()
        (torch.jagged, [0, 3, 8])

    Args:
        samples: the samples, in the order of the keys passed to ``kv_batch_get``.

    Returns:
        A ``TensorDict`` of batch size ``len(samples)`` with one column per field
        that every sample has. Like TransferQueue, a field missing from some samples
        is left out silently, and mixed dtypes in one field are promoted (0-dim
        values) or cast to the first sample's dtype (strided fallback).

    Raises:
        ValueError: if ``samples`` is empty (``kv_batch_get`` raises for no keys too), or a
            field holds a TensorDict (the writer refuses those: `to_tq_fields`).
    """
    if len(samples) == 0:
        raise ValueError("wire_batch needs at least one sample; kv_batch_get finds nothing for no keys")
    common = set(samples[0]).intersection(*samples[1:])
    nested = sorted(n for n in common if any(isinstance(s[n], TensorDictBase) for s in samples))
    if nested:
        raise ValueError(f"fields {nested[:8]!r} hold TensorDicts; store their entries as fields of their own")
    columns = {name: _pack_column([s[name] for s in samples]) for name in sorted(common)}
    return TensorDict(columns, batch_size=[len(samples)])


def to_tq_fields(samples: Sequence[Mapping[str, Any]]) -> TensorDict:
    """Build the ``fields`` TensorDict to pass to ``transfer_queue.kv_batch_put``.

    The columns are packed as `wire_batch` packs them (jagged nested tensors,
    a strided nested fallback, dense for 0-dim tensors, ``NonTensorStack`` for
    Python values), so a later ``kv_batch_get`` of these keys returns a TensorDict
    equal to this one. Unlike `wire_batch` it refuses samples whose data
    TransferQueue would return changed or incomplete.

    Examples:
        >>> import torch
        >>> samples = [{"responses": torch.arange(3), "uid": "a"}, {"responses": torch.arange(5), "uid": "b"}]
        >>> fields = to_tq_fields(samples)
        >>> # tq.kv_batch_put(["k0", "k1"], "train", fields=fields)
        >>> fields.get("uid").tolist()
        ['a', 'b']

    Args:
        samples: one mapping of field name to value per key, in key order.

    Returns:
        A ``TensorDict`` of batch size ``len(samples)``, columns ordered by name.

    Raises:
        ValueError: if ``samples`` is empty; if a field is missing from some samples
            (TransferQueue would drop it from any read that includes them); if a
            tensor field mixes dtypes (it would be promoted or cast on read); or if
            a field mixes tensors with other values such as ``None`` (it would be
            read back as a ``NonTensorStack`` instead of a tensor).
    """
    if len(samples) == 0:
        raise ValueError("to_tq_fields needs at least one sample")
    names = set().union(*samples)
    problems = []
    for name in sorted(names):
        lacking = [i for i, s in enumerate(samples) if name not in s]
        if lacking:
            problems.append(f"field {name!r} is missing from samples {_short(lacking)}")
            continue
        values = [s[name] for s in samples]
        if any(isinstance(v, TensorDictBase) for v in values):
            problems.append(f"field {name!r} holds TensorDicts; store its entries as fields of their own")
            continue
        is_tensor = [isinstance(v, torch.Tensor) for v in values]
        if any(is_tensor) and not all(is_tensor):
            others = [i for i, t in enumerate(is_tensor) if not t]
            problems.append(
                f"field {name!r} mixes tensors with non-tensor values (samples {_short(others)}); "
                "it would be read back as a NonTensorStack"
            )
        elif all(is_tensor):
            dtypes = {v.dtype for v in values}
            if len(dtypes) > 1:
                listed = ", ".join(sorted(str(d).removeprefix("torch.") for d in dtypes))
                problems.append(f"field {name!r} mixes dtypes ({listed}); TransferQueue would cast them on read")
    if problems:
        raise ValueError("samples cannot be written to TransferQueue unchanged: " + "; ".join(problems))
    return wire_batch(samples)


def wire_fields(fields: TensorDict) -> TensorDict:
    """``fields`` (as `to_tq_fields` packs them) made ready for ``kv_batch_put``, in place; returns ``fields``.

    TransferQueue 0.1.11 stores each sample's value on its own, and its reads pack them
    again whatever layout was written, but its put unbinds every nested column five times
    (the field schema, twice, before and after the write, and the routing to storage
    units). A jagged column unbinds through Python dispatch, about 1.1 ms for 377 samples;
    a strided nested one natively, about 0.15 ms. So each jagged column whose samples lie
    one after the other in its flat values (the ragged axis first, as for ``input_ids`` or
    ``routed_experts``) is replaced by a strided nested tensor viewing the same memory,
    without a copy; every other column is kept as it is. What is stored, and read back,
    is the same.
    """
    for name in list(fields.keys()):
        col = fields.get(name)
        if isinstance(col, torch.Tensor) and col.layout == torch.jagged:
            view = _strided_view(col)
            if view is not None:
                fields.set(name, view)
    return fields


_quiet = threading.Lock()
_warned: list[bool] = []


def _strided_view(col: torch.Tensor) -> torch.Tensor | None:
    """A strided nested tensor viewing the samples of jagged ``col`` in place, or ``None`` when they are not contiguous.

    ``torch._nested_view_from_buffer`` is private: where it is missing or refuses, the
    column stays jagged (TransferQueue takes both).
    """
    values = col.values()
    view_from_buffer = getattr(torch, "_nested_view_from_buffer", None)
    ragged_first = getattr(col, "_ragged_idx", None) == 1 and col.lengths() is None  # type: ignore[attr-defined]
    if view_from_buffer is None or not ragged_first or values.device.type != "cpu":
        return None  # on an accelerator, the sizes would be read from device memory first
    if not values.is_contiguous() or values.storage_offset() != 0:
        return None
    offsets = col.offsets()  # type: ignore[attr-defined]  # NJT-only method
    n, rest = offsets.shape[0] - 1, list(values.shape[1:])
    inner = math.prod(rest)
    try:
        sizes = torch.cat([offsets.diff()[:, None], torch.tensor(rest, dtype=torch.int64).expand(n, -1)], 1)
        strides = torch.tensor([inner, *values.stride()[1:]], dtype=torch.int64).expand(n, -1).contiguous()
        view = view_from_buffer(values.reshape(-1), sizes, strides, offsets[:-1] * inner)
    except RuntimeError:
        return None
    # Detached, its samples unbind as fast as those of a strided nested tensor of its own
    # (a view keeps autograd's view records: 2-4x slower to unbind).
    if _warned:
        return view.detach()
    with _quiet:  # torch warns once per process that strided nested tensors are a prototype
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "The PyTorch API of nested tensors is in prototype", UserWarning)
            view = view.detach()
        _warned.append(True)
    return view


def _short(indexes: list[int], limit: int = 8) -> str:
    shown = ", ".join(map(str, indexes[:limit]))
    return f"[{shown}, ... ({len(indexes)} in all)]" if len(indexes) > limit else f"[{shown}]"
