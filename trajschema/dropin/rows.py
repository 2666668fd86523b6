"""The real rows of a padded batch, as every drop-in's steps see them, and the padding metrics.

A drop-in runs a trainer's step on the real rows alone and gives the padding rows exact
zeros; `real_and_padding` splits the rows once, with one refusal for a batch that has
nothing real, and `padding_metrics` is the one definition of what every trainer's
metrics gain.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["PADDING_METRICS", "padding_metrics", "real_and_padding", "zeros_on_padding"]

#: What every drop-in adds to its trainer's metrics (see `padding_metrics`).
PADDING_METRICS = ("padding/samples", "padding/tokens", "padding/share")


def real_and_padding(padding: Sequence[bool]) -> tuple[list[int], list[int]]:
    """The indexes of the real rows and of the padding rows, from each row's ``is_padding``.

    Raises:
        ValueError: the batch has no row, or no real row (there is nothing to train on).

    Examples:
        >>> real_and_padding([False, True, False])
        ([0, 2], [1])
    """
    real = [i for i, p in enumerate(padding) if not p]
    if not real:
        if not padding:
            raise ValueError("the batch has no rows: there is nothing to train on or shape the padding on")
        raise ValueError(
            f"the batch has no real row ({len(padding)} rows, all padding): there is nothing to train on "
            "or shape padding on"
        )
    return real, [i for i, p in enumerate(padding) if p]


def padding_metrics(padding: Sequence[bool], tokens: float) -> dict[str, float]:
    """``padding/samples``, ``padding/tokens``, ``padding/share`` of a batch, in every trainer's metrics.

    Args:
        padding: each row's ``is_padding``.
        tokens: the positions the padding rows hold that a forward pass attends to (their
            attention masks' ones), summed; NaN when a trainer cannot know it.

    Examples:
        >>> padding_metrics([False, False, True, True], 256.0)
        {'padding/samples': 2.0, 'padding/tokens': 256.0, 'padding/share': 0.5}
    """
    count = sum(1 for p in padding if p)
    return {
        "padding/samples": float(count),
        "padding/tokens": float(tokens) if count else 0.0,
        "padding/share": count / len(padding) if padding else 0.0,
    }


def zeros_on_padding(values: Any, real: Sequence[int], rows: int) -> Any:
    """A ``(rows, ...)`` tensor: ``values`` (one per real row, in order) at ``real``, exact zeros elsewhere."""
    full = values.new_zeros((rows, *values.shape[1:]))
    full[torch.tensor(list(real), dtype=torch.long, device=values.device)] = values
    return full
