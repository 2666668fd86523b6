"""Spread routes: padding ids laid out so that no id (no expert) gets more than its even share.

A padding token replayed through a mixture-of-experts model goes to the experts its
routes name. Filled with ``0``, every padding token would go to expert 0, ``topk`` times
over: one hot expert, and under expert parallelism one hot rank. ``pad: {spread: experts}``
fills the routes instead with the slot numbers ``0, 1, 2, ...`` of the whole padding batch,
taken modulo the number of experts. The number of experts, when nothing pins it, is the
largest id over the real rows of the batch + 1 (`largest_id`: one reduction per column).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from trajschema.core import tensor_extremes

__all__ = ["largest_id", "spread_ids"]


def spread_ids(shape: tuple[int, ...], ids: int, dtype: torch.dtype) -> torch.Tensor:
    """A ``shape`` tensor of ids in ``0 .. ids - 1``, spread evenly, distinct along the last axis.

    The first axis is the padding samples, the last the slots of one token (its ``topk``
    experts); for a tensor of three axes or more, the second axis is the tokens of a sample
    and the ones between are layers. The tokens of the whole batch, numbered ``t = 0, 1, ...``
    (sample by sample), get ids ``(t * slots + k) % ids`` in slot ``k``, in every layer, so:

    - the slots of a token hold ``slots`` consecutive numbers modulo ``ids``: distinct while
      ``slots <= ids``;
    - over the batch, in every layer, the ``tokens * slots`` slots run through ``0 .. ids - 1``
      in turn: no id gets more than ``ceil(tokens * slots / ids)`` of them;
    - it depends on the sizes alone (deterministic), and costs about as much as filling
      the tensor with zeros: one period of the pattern is built, then copied along.

    Examples:
        >>> spread_ids((1, 4, 1, 2), 3, torch.int64).flatten().tolist()
        [0, 1, 2, 0, 1, 2, 0, 1]

    Raises:
        ValueError: ``slots > ids`` (the ids of a token could not be distinct), or ``ids < 1``
            while there is a slot to fill.
    """
    out = torch.empty(shape, dtype=dtype)
    if not out.numel():
        return out
    slots = shape[-1]
    if ids < 1 or slots > ids:
        raise ValueError(f"cannot spread {slots} distinct ids per token over {ids} ids")
    tokens = shape[0] * (shape[1] if len(shape) > 2 else 1)
    layers = math.prod(shape[2:-1]) if len(shape) > 2 else 1
    flat = out.view(tokens, layers, slots)
    # (t * slots + k) % ids comes back to its start after `period` tokens: build that many, then copy.
    period = min(ids // math.gcd(ids, slots), tokens)
    block = (torch.arange(period * slots, dtype=torch.int64) % ids).to(dtype).view(period, 1, slots)
    block = block.expand(period, layers, slots).contiguous()
    whole = tokens // period * period
    flat[:whole].view(-1, period, layers, slots).copy_(block.unsqueeze(0).expand(whole // period, -1, -1, -1))
    flat[whole:].copy_(block[: tokens - whole])
    return out


def largest_id(value: Any) -> int | None:
    """The largest id in a routes value, or ``None`` where it holds no integer to read.

    ``value`` is one tensor (dense; nested: its values), or a sequence of them (one per
    sample): a reduction per tensor, never a read of the values into Python. Dtypes torch
    cannot reduce (``uint16`` on CPU) are read by `tensor_extremes`, in bounded memory. A meta tensor, a float,
    bool or complex tensor, an empty one and anything else give ``None``.

    Examples:
        >>> largest_id(torch.tensor([[3, 7], [1, 2]])), largest_id([torch.tensor([1]), torch.tensor([9, 0])])
        (7, 9)
    """
    if isinstance(value, torch.Tensor):
        return _tensor_largest(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        found = [_tensor_largest(v) for v in value if isinstance(v, torch.Tensor)]
        return max((n for n in found if n is not None), default=None)
    return None


def _tensor_largest(t: torch.Tensor) -> int | None:
    if t.is_meta or t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        return None
    if t.is_nested:
        parts = [t.values()] if t.layout == torch.jagged else list(t.unbind(0))
        return max((n for n in map(_tensor_largest, parts) if n is not None), default=None)
    if t.layout != torch.strided or not t.numel():
        return None
    if t.dtype in (torch.uint16, torch.uint32, torch.uint64):  # no max kernel: the value checks' exact walk
        found = tensor_extremes(t)
        return None if found is None else int(found[1])
    return int(t.max())
