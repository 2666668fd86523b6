"""Spread routes: padding ids laid out so that no id (no expert) gets more than its even share.

A padding token replayed through a mixture-of-experts model goes to the experts its
routes name. Filled with ``0``, every padding token would go to expert 0, ``topk`` times
over: one hot expert, and under expert parallelism one hot rank. ``pad: {spread: experts}``
fills the routes instead with the slot numbers ``0, 1, 2, ...`` of the whole padding batch,
taken modulo the number of experts.
"""

from __future__ import annotations

import math

import torch

__all__ = ["spread_ids"]


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
