"""Reading a dense batch, whatever holds it: a mapping (a dict, a `DenseBatch`, SkyRL's
``TensorBatch`` with its ``.metadata``), a TensorDict, or verl's ``DataProto``.

Neither verl nor SkyRL is imported: a ``DataProto`` is anything with ``.batch``,
``.non_tensor_batch`` and ``.meta_info``; a ``TensorList`` anything with a ``.tensors``
list. A column is a ``(B, ...)`` tensor or a per-sample list (a list or tuple, a numpy
array, a ``TensorList``, a tensordict ``NonTensorStack``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, TypeGuard

import torch

from trajschema.check import column_rows, is_tensordict
from trajschema.core import DenseBatch, Violation, describe_value

__all__ = ["METADATA", "DenseView", "is_plain", "one_row", "read_dense"]

#: The prefix of a layout key read from the batch's metadata (``metadata.uids``).
METADATA = "metadata."


class DenseView:
    """The columns and metadata of one dense batch of ``n`` rows.

    Attributes:
        columns: batch key -> column (a tensor or a per-sample list), as the batch holds it.
        metadata: SkyRL's ``batch.metadata`` or verl's ``meta_info`` (``{}`` if none).
        n: the batch size: the first tensor column's ``shape[0]``.
    """

    def __init__(self, columns: Mapping[str, Any], metadata: Mapping[str, Any], n: int) -> None:
        self.columns: dict[str, Any] = dict(columns)  # its own: a check may swap a column for a view of it
        self.metadata = metadata
        self.n = n

    def has(self, key: str) -> bool:
        if key.startswith(METADATA):
            return key[len(METADATA) :] in self.metadata
        return key in self.columns

    def get(self, key: str) -> Any:
        """The value under a layout key (``metadata.<name>`` reads the metadata); ``None`` when absent."""
        if key.startswith(METADATA):
            return self.metadata.get(key[len(METADATA) :])
        return self.columns.get(key)

    def rows(self, key: str) -> list[Any]:
        """One value per row of a column (tensor rows for a tensor column, Python values otherwise)."""
        return per_sample(self.get(key), self.n)

    def tensors(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.columns.items() if isinstance(v, torch.Tensor)}


def is_plain(value: Any) -> TypeGuard[torch.Tensor]:
    """Whether ``value`` is a tensor the dense check can read: strided, not nested (a
    nested tensor has no shape to compare, a sparse one no positions to slice)."""
    return isinstance(value, torch.Tensor) and not value.is_nested and value.layout == torch.strided


def one_row(view: DenseView, row: int, per_row_metadata: Collection[str]) -> DenseBatch:
    """Row ``row`` of ``view`` as a one-row batch: tensors sliced as views, per-sample lists
    cut to their entry, the metadata names in ``per_row_metadata`` cut the same way and the
    rest kept whole. Nothing is copied."""
    columns: dict[str, Any] = {}
    for key, col in view.columns.items():
        if isinstance(col, torch.Tensor) and col.dim():
            columns[key] = col[row : row + 1]
        elif rows_of(col) == view.n:
            columns[key] = [per_sample(col, view.n)[row]]
        else:
            columns[key] = col
    meta = {
        k: ([per_sample(v, view.n)[row]] if k in per_row_metadata and rows_of(v) == view.n else v)
        for k, v in view.metadata.items()
    }
    return DenseBatch(columns, metadata=meta)


def per_sample(value: Any, n: int) -> list[Any]:
    """``value`` (a column) as a list of ``n`` per-sample values."""
    if isinstance(value, torch.Tensor):
        return list(value.unbind(0)) if value.dim() else [value] * n
    tensors = getattr(value, "tensors", None)
    if isinstance(tensors, list):  # SkyRL's TensorList
        return list(tensors)
    if _is_numpy(value) and value.ndim:
        return list(value.tolist()) if value.dtype != object else list(value)
    if _is_numpy(value):  # a 0-d array is one value, as a scalar is
        return [value.item() if value.dtype != object else value[()]] * n
    if isinstance(value, (list, tuple)):
        return list(value)
    return list(column_rows(value, n))


def _is_numpy(value: Any) -> bool:
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and hasattr(value, "tolist")


def rows_of(value: Any) -> int | None:
    """How many rows a column holds; ``None`` for a value that is not per sample."""
    if isinstance(value, torch.Tensor):  # size(0): a nested tensor has no .shape
        return value.size(0) if value.dim() else None
    tensors = getattr(value, "tensors", None)
    if isinstance(tensors, list):
        return len(tensors)
    if _is_numpy(value):
        return len(value) if value.ndim else None
    if isinstance(value, (list, tuple)):
        return len(value)
    if is_tensordict(value):
        return value.batch_size[0] if value.batch_dims else None
    return None


def _parts(batch: Any) -> tuple[dict[str, Any], Mapping[str, Any], Any]:
    """(columns, metadata, the TensorDict's batch_size or None) of any supported batch."""
    if all(hasattr(batch, a) for a in ("batch", "non_tensor_batch", "meta_info")):  # verl's DataProto
        td, others = batch.batch, batch.non_tensor_batch or {}
        columns = {k: td.get(k) for k in td.keys()} if td is not None else {}
        columns.update(others)
        meta = batch.meta_info if isinstance(batch.meta_info, Mapping) else {}
        return columns, meta, (td.batch_size if td is not None else None)
    if is_tensordict(batch):
        return {k: batch.get(k) for k in batch.keys()}, {}, batch.batch_size
    if isinstance(batch, Mapping):
        found = getattr(batch, "metadata", None)
        return dict(batch), (found if isinstance(found, Mapping) else {}), None
    raise TypeError(
        "a dense batch must be a mapping of batch key to (B, ...) tensor or per-sample list "
        "(a dict, a TensorDict, SkyRL's TrainingInputBatch) or verl's DataProto, found " + describe_value(batch)
    )


def read_dense(batch: Any, *, shared: Collection[str] = ()) -> tuple[DenseView, list[Violation]]:
    """The `DenseView` of ``batch``, and a ``batch`` violation (sample ``None``) per column
    whose row count is not the batch size; the keys in ``shared`` (a layout's ``shared:``,
    held once for the batch) are not counted.

    Raises:
        TypeError: ``batch`` is not a mapping, a TensorDict or a ``DataProto``.
    """
    columns, meta, size = _parts(batch)
    if size is not None and len(size) > 1:
        msg = f"a dense batch has one batch dim, found batch_size {list(size)}"
        return DenseView({}, meta, 0), [Violation(None, "<batch>", "batch", "batch_size [B]", str(list(size)), msg)]
    counts = {k: rows_of(v) for k, v in columns.items() if k not in shared}
    first = next((k for k, v in columns.items() if k in counts and isinstance(v, torch.Tensor) and v.dim()), None)
    if first is None:
        first = next((k for k, c in counts.items() if c is not None), None)
    n = int(size[0]) if size is not None and len(size) else (counts[first] or 0) if first is not None else 0
    found = []
    for k, c in counts.items():
        if c is not None and c != n:
            msg = f"{c} rows, but the batch has {n} (from {first!r})"
            found.append(Violation(None, k, "batch", f"{n} rows", f"{c} rows", msg))
    return DenseView(columns, meta, n), found


def rows_violation(key: str, value: Any, n: int) -> Violation | None:
    """A ``batch`` violation when a metadata value is not one entry per row."""
    c = rows_of(value)
    if c == n:
        return None
    found = f"{c} rows" if c is not None else describe_value(value)
    msg = f"needs one entry per row: expected {n}, found {found}"
    return Violation(None, key, "batch", f"{n} rows", found, msg)
