"""A TransferQueue-shaped batch moved to the meta device: shapes and dtypes kept, no values to read."""

from __future__ import annotations

import torch
from tensordict import TensorDict


def _jagged_on_meta(col: torch.Tensor) -> torch.Tensor:
    return torch.nested.nested_tensor_from_jagged(
        col.values().to("meta"), col.offsets().to("meta"), jagged_dim=col._ragged_idx
    )


def on_meta(td: TensorDict, only: set[str] | None = None) -> TensorDict:
    """``td`` with its tensor columns (or only the ``only`` ones) on the meta device; other columns as they are."""
    out = TensorDict({}, batch_size=td.batch_size)
    for k in td.keys():
        col = td.get(k)
        if only is not None and k not in only:
            out[k] = col
        elif isinstance(col, torch.Tensor) and col.is_nested and col.layout == torch.jagged:
            out[k] = _jagged_on_meta(col)
        elif isinstance(col, torch.Tensor):
            out[k] = col.to("meta")
        else:
            out[k] = col
    return out
