"""One adapter for the shapes a batch comes in.

A batch is a sequence of sample mappings, or a TensorDict with one batch dim as
TransferQueue returns it: tensor columns that are jagged nested tensors (ragged dim
anywhere, e.g. ``(4, S)`` position ids), strided nested tensors (TransferQueue's
fallback), or dense tensors whose first dim is the batch; and non-tensor columns that
are ``NonTensorStack``, ``NonTensorData`` or plain lists, depending on the tensordict
version. Everything that reads a batch — checks, the is_padding contract, metrics, the
writer — goes through `BatchView` and the column functions here, so the private
nested-tensor attributes (``_ragged_idx``, ``offsets()``) are touched in this module only.

Per-sample sizes and masks are computed on the column's own device; nothing here moves
a tensor to another device or reads device memory except where a function says so.
"""

from __future__ import annotations

import contextlib
import logging
import math
import multiprocessing.managers
import multiprocessing.sharedctypes
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from trajschema.core import nonzero_per_position


def _njt_class() -> type | None:
    """The jagged nested tensor's class: every property read on one costs a ``__torch_function__`` round trip."""
    try:
        from torch.nested._internal.nested_tensor import NestedTensor
    except ImportError:  # pragma: no cover - a torch without it has no such columns either
        return None
    return NestedTensor


_NJT = _njt_class()

__all__ = [
    "BatchShapeError",
    "BatchView",
    "as_mapping",
    "batch_view",
    "column_rows",
    "column_shapes",
    "index_rows",
    "is_tensordict",
    "nontensor_column",
    "nontensor_values",
    "nonzero_per_row",
    "ragged_axis_is_last",
    "rows_flagged",
    "rows_hit",
    "without_fx_note",
]


class BatchShapeError(ValueError):
    """A batch TensorDict without exactly one batch dim."""


#: torch's logger of the note, and the note's first words. The first time a process builds a
#: jagged tensor from values and offsets (``torch.nested.nested_tensor_from_jagged``, which
#: tensordict also calls to index, slice or concatenate a jagged column), torch 2.13 logs
#: "W1205 ... is_fx_tracing will return true for both fx.symbolic_trace and torch.export. Please
#: use ..." on stderr. It is addressed to callers of ``torch.fx``'s ``is_fx_tracing``, and the
#: caller is torch's own nested-tensor code: a user of trajschema can do nothing about it.
_FX_NOTE_LOGGER = "torch.fx._symbolic_trace"
_FX_NOTE = "is_fx_tracing will return true"


class _DropFxNote(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_FX_NOTE)


@contextlib.contextmanager
def without_fx_note() -> Iterator[None]:
    """Keep torch's note on ``is_fx_tracing`` (see ``_FX_NOTE``) off stderr while the block builds jagged tensors.

    Only that note, only inside the block: the filter sits on torch's own logger of it and
    is removed on exit, so no other message and no caller's logging configuration is
    touched. torch logs the note once per process, so a block that drops it also keeps it
    from appearing later.

    Examples:
        >>> offsets = torch.tensor([0, 2, 5])
        >>> with without_fx_note():
        ...     column = torch.nested.nested_tensor_from_jagged(torch.arange(5), offsets)
        >>> [len(row) for row in column.unbind()]
        [2, 3]
    """
    logger = logging.getLogger(_FX_NOTE_LOGGER)
    drop = _DropFxNote()  # one per block: a nested block must not remove the outer one's
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def is_tensordict(x: Any) -> bool:
    from tensordict import TensorDictBase

    return isinstance(x, TensorDictBase)


def _is_nontensor(x: Any) -> bool:
    from tensordict import NonTensorData, NonTensorStack

    return isinstance(x, (NonTensorData, NonTensorStack))


def as_mapping(sample: Any) -> Mapping[str, Any]:
    """One sample as a mapping of plain values (a TensorDict row's non-tensor entries unwrapped).

    Raises:
        TypeError: ``sample`` is not a mapping.
    """
    if type(sample) is dict:
        return sample
    if is_tensordict(sample):  # before Mapping: a TensorDict may register as one
        return {k: _unwrap(sample.get(k)) for k in sample.keys()}
    if isinstance(sample, Mapping):
        return sample
    raise TypeError(
        f"a sample must be a mapping of field name to value (a dict or a TensorDict row), found {type(sample).__name__}"
    )


def _unwrap(v: Any) -> Any:
    from tensordict import NonTensorData, NonTensorStack

    if isinstance(v, NonTensorData):
        return v.data
    if isinstance(v, NonTensorStack):
        return v.tolist()
    return v


def nontensor_values(col: Any, n: int) -> list[Any] | None:
    """A non-tensor column as one Python value per sample; ``None`` for a tensor column.

    The values are exactly what ``NonTensorStack.tolist()`` returns, read much faster
    (see `_stacked_data`).
    """
    from tensordict import NonTensorData, NonTensorStack

    if isinstance(col, NonTensorStack):
        if not n:
            return []
        fast = _stacked_data(col)
        return fast if fast is not None else list(col.tolist())
    if isinstance(col, NonTensorData):
        return [col.data] * n
    if isinstance(col, list):  # some tensordict versions hand back plain lists
        return col
    return None


# What tensordict stores for a non-tensor value in shared memory; its public accessors
# unwrap exactly these (and return every other stored value as it is).
_SHARED_TYPES = (
    multiprocessing.managers.BaseProxy,
    multiprocessing.sharedctypes.Synchronized,
    multiprocessing.sharedctypes.SynchronizedArray,
)


def _stacked_data(col: Any) -> list[Any] | None:
    """The values of a one-dim stack of ``NonTensorData``, read from where tensordict keeps them.

    ``NonTensorStack.tolist()`` builds each value through tensordict's attribute
    machinery: ~25 ms for 4096 rows on tensordict 0.10.0 (~1 ms on 0.15), most of a
    whole batch check. The stored values are the same objects; this reads them directly
    (~0.2 ms) and returns ``None`` — use the public path — for anything it does not
    recognise: another stacking layout, a member that is not plain ``NonTensorData``,
    or a value tensordict would unwrap from shared memory. A test holds it to
    ``tolist()`` on every supported tensordict version.
    """
    from tensordict import NonTensorData

    if getattr(col, "stack_dim", None) != 0 or col.batch_dims != 1:
        return None
    members = getattr(col, "tensordicts", None)
    if not isinstance(members, list):
        return None
    try:
        # tensordict's own store of a NonTensorData's value, which its .data property reads
        values = [m._non_tensordict["data"] for m in members if type(m) is NonTensorData]  # type: ignore[attr-defined]
    except (AttributeError, KeyError, TypeError):
        return None
    if len(values) != len(members) or any(issubclass(t, _SHARED_TYPES) for t in set(map(type, values))):
        return None
    return values


def column_rows(col: Any, n: int) -> Sequence[Any]:
    """A batch column as one value per sample: tensors for tensor columns, Python values otherwise.

    Jagged columns are cut from their flat values with ``narrow``: ``unbind`` on a
    nested tensor goes through Python-level dispatch and costs ~0.3 ms a column.
    """
    values = nontensor_values(col, n)
    if values is not None:
        return values
    if is_tensordict(col):
        return col.unbind(0)  # a sub-TensorDict: one row each
    if not isinstance(col, torch.Tensor):
        return [col] * n
    if is_opaque(col):
        return [opaque_row(col)] * n
    if col.is_nested and col.layout == torch.jagged and _lengths(col) is None:
        flat, axis = col.values(), _ragged_axis(col)
        bounds = _offsets(col).tolist()
        return [flat.narrow(axis, bounds[i], bounds[i + 1] - bounds[i]) for i in range(n)]
    return col.unbind(0)


# Jagged nested tensors (NJTs) carry offsets/lengths/_ragged_idx, which torch's stubs do
# not declare on Tensor; these three accessors are the only places that touch them.
def _offsets(col: torch.Tensor) -> torch.Tensor:
    return col.offsets()  # type: ignore[attr-defined]  # NJT-only method


def _lengths(col: torch.Tensor) -> torch.Tensor | None:
    return col.lengths()  # type: ignore[attr-defined]  # NJT-only method; None unless narrowed


def _row_lengths(col: torch.Tensor) -> torch.Tensor:
    lengths = _lengths(col)
    return lengths if lengths is not None else _offsets(col).diff()


def is_opaque(col: Any) -> bool:
    """A nested column whose per-sample shapes cannot be read: its offsets live on the ``meta`` device."""
    if type(col) is _NJT:  # its flat values' device is its own, read without a ~7 us __torch_function__ round trip
        return bool(col._values.is_meta)  # type: ignore[attr-defined]  # NJT-only attribute
    return isinstance(col, torch.Tensor) and col.is_nested and col.is_meta


def opaque_row(col: torch.Tensor) -> torch.Tensor:
    """What a sample of an opaque column is known to be: dtype and rank (a ``meta`` stand-in, 0 on unknown axes).

    The sample check is told (``opaque=``) not to read shapes from it.
    """
    return torch.empty((0,) * (col.dim() - 1), dtype=col.dtype, device="meta")


def _ragged_axis(col: torch.Tensor) -> int:
    """The ragged dim's axis in a jagged column's flat values."""
    return col._ragged_idx - 1  # type: ignore[attr-defined]  # NJT-only attribute, typed nowhere


def column_shapes(col: Any, n: int) -> torch.Tensor | None:
    """Per-sample shapes of a batch column as an ``(n, rank)`` int64 tensor, or ``None``.

    ``None`` means the column is not a tensor laid out per sample (e.g. non-tensor data).
    The result is on the device of the sizes it is read from: a jagged column's offsets
    (so ``meta`` offsets give ``meta`` sizes), or the CPU for static shapes.
    """
    if not isinstance(col, torch.Tensor) or col.layout not in (torch.strided, torch.jagged) or is_opaque(col):
        return None
    if not col.is_nested:
        if col.dim() == 0:
            return None
        return torch.tensor(col.shape[1:], dtype=torch.int64).expand(n, col.dim() - 1)
    if col.layout == torch.jagged:
        ragged = _ragged_axis(col) + 1
        lengths = _row_lengths(col)
        dev = lengths.device
        cols = [
            lengths.to(torch.int64) if d == ragged else torch.full((n,), col.shape[d], dtype=torch.int64, device=dev)
            for d in range(1, col.dim())
        ]
        return torch.stack(cols, dim=1) if cols else torch.zeros((n, 0), dtype=torch.int64, device=dev)
    # A strided nested tensor keeps its sizes on the host.
    return col._nested_tensor_size().to(torch.int64)


def rows_hit(col: torch.Tensor, n: int, hit_at: Callable[[torch.Tensor, int], torch.Tensor]) -> torch.Tensor:
    """Which samples of a jagged column hold a position of the ragged dim that ``hit_at`` marks.

    ``hit_at(part, axis)`` gets a slice of the column's flat values along their ragged
    ``axis`` and answers one bool per position of it (see `_rows_sum` for the slices).
    """
    return _rows_sum(col, n, lambda part, axis: hit_at(part, axis).to(torch.int64)) > 0


# Positions of the ragged dim per pass of _rows_sum: its temporaries take ~20 bytes each.
_ROWS_CHUNK = 1 << 20


def _rows_sum(col: torch.Tensor, n: int, per_part: Callable[[torch.Tensor, int], torch.Tensor]) -> torch.Tensor:
    """Sum per-position counts of a jagged column into the sample owning each position (int64, on the device).

    ``per_part(part, axis)`` answers one int64 count per position of a slice of the flat
    values along their ragged ``axis``. The slices are at most ``_ROWS_CHUNK`` positions
    long, and values repeated along the ragged axis (stride 0) are asked about once, so
    the memory used stays bounded however long the column is. A narrowed column
    (``lengths`` set) leaves gaps between its rows; positions in a gap belong to no sample.
    """
    values, axis = col.values(), _ragged_axis(col)
    starts = _offsets(col)[:n].to(torch.int64)
    lengths = _row_lengths(col)[:n].to(torch.int64)
    total = values.shape[axis]
    if total > 1 and values.stride(axis) == 0:  # every position is the first one
        return per_part(values.narrow(axis, 0, 1), axis) * lengths
    ends = starts + lengths
    found = torch.zeros(n, dtype=torch.int64, device=starts.device)
    for p0 in range(0, total, _ROWS_CHUNK):
        k = min(_ROWS_CHUNK, total - p0)
        below = torch.zeros(k + 1, dtype=torch.int64, device=starts.device)  # the counts before each position
        torch.cumsum(per_part(values.narrow(axis, p0, k), axis), 0, out=below[1:])
        found += below[(ends - p0).clamp(0, k)] - below[(starts - p0).clamp(0, k)]
    return found


def ragged_axis_is_last(col: torch.Tensor) -> bool:
    """Whether a jagged column's ragged dim is its last: its flat values run samples together along that axis."""
    return _ragged_axis(col) == col.values().dim() - 1


def rows_flagged(
    col: torch.Tensor, n: int, flag: Callable[[torch.Tensor, int, torch.Tensor], torch.Tensor]
) -> torch.Tensor:
    """Which samples of a jagged column hold a position of the ragged dim that ``flag`` marks, knowing whose it is.

    ``flag(part, axis, owner)`` gets a slice of the column's flat values along their
    ragged ``axis`` and the sample owning each of its positions (int64; a position in a
    gap of a narrowed column gets some sample's index, and its answer is ignored), and
    answers one bool per position: a per-sample bound compares each position with its
    own sample's. Slices are at most ``_ROWS_CHUNK`` positions long, as in `_rows_sum`.
    """
    values, axis = col.values(), _ragged_axis(col)
    starts = _offsets(col)[:n].to(torch.int64)
    ends = starts + _row_lengths(col)[:n].to(torch.int64)
    total = values.shape[axis]
    found = torch.zeros(n, dtype=torch.int64, device=starts.device)
    for p0 in range(0, total, _ROWS_CHUNK):
        k = min(_ROWS_CHUNK, total - p0)
        at = torch.arange(p0, p0 + k, dtype=torch.int64, device=starts.device)
        # Offsets never decrease, so the owner of a position is the last sample starting at or before it.
        owner = (torch.searchsorted(starts, at, right=True) - 1).clamp(min=0)
        inside = (at >= starts[owner]) & (at < ends[owner])
        hit = flag(values.narrow(axis, p0, k), axis, owner) & inside
        found.index_add_(0, owner, hit.to(torch.int64))
    return found > 0


def nonzero_per_row(col: Any, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(non-zero elements, elements) per sample of a batch column, vectorized over samples.

    Counted in bounded memory: an element repeated by ``expand`` counts once per place it
    appears, without being copied.
    """
    if not isinstance(col, torch.Tensor) or (not col.is_nested and col.dim() == 0):
        return None
    if not col.is_nested:
        width = math.prod(col.shape[1:])
        return nonzero_per_position(col), torch.full((n,), width, dtype=torch.int64, device=col.device)
    if col.layout == torch.jagged:
        values = col.values()
        width = math.prod(d for i, d in enumerate(values.shape) if i != _ragged_axis(col))
        lengths = _row_lengths(col)
        return _rows_sum(col, n, nonzero_per_position), lengths.to(torch.int64) * width
    # A strided nested tensor has no flat values view; count per sample.
    parts = col.unbind(0)
    nonzero = torch.tensor([int((p != 0).sum()) for p in parts], dtype=torch.int64)
    return nonzero, torch.tensor([p.numel() for p in parts], dtype=torch.int64)


class BatchView:
    """A batch of either shape, read the same way: ``n``, column names, per-row values, rows.

    Build one with `batch_view`.
    """

    def __init__(
        self,
        td: Any = None,
        samples: list[Mapping[str, Any]] | None = None,
        lists: Mapping[str, list[Any]] | None = None,
    ) -> None:
        self.td = td
        self.samples = samples
        # Non-tensor columns of a table held as plain lists beside ``td`` (one value per row):
        # a NonTensorStack of 4096 values costs ~15 ms to build, more than the check that reads it.
        self.lists: dict[str, list[Any]] = dict(lists or {})
        self.n: int = td.batch_size[0] if td is not None else len(samples or ())

    @classmethod
    def of_columns(cls, columns: Mapping[str, Any], n: int) -> BatchView:
        """A table of ``n`` rows from ``columns`` (name -> column): the tensors in a TensorDict,
        the per-row lists of ``n`` values as plain lists beside it, anything else set on the
        TensorDict as it comes."""
        from tensordict import TensorDict

        td = TensorDict({k: v for k, v in columns.items() if isinstance(v, torch.Tensor)}, batch_size=[n])
        lists = {k: v for k, v in columns.items() if type(v) is list and len(v) == n}
        for k, v in columns.items():
            if k not in lists and k not in td.keys():
                td[k] = v
        return cls(td=td, lists=lists)

    @property
    def is_table(self) -> bool:
        """Whether the batch is a TensorDict (columns) rather than a list of samples (rows)."""
        return self.td is not None

    def keys(self) -> set[str]:
        """Column names of a TensorDict; the union of the samples' keys for a list."""
        if self.td is not None:
            return set(self.td.keys()) | set(self.lists)
        return set().union(*self.samples) if self.samples else set()

    def column(self, name: str) -> Any:
        """A TensorDict's raw column (``None`` when absent); only for tables."""
        assert self.td is not None
        if name in self.lists:
            return self.lists[name]
        return self.td.get(name) if name in self.td.keys() else None

    def values_of(self, name: str) -> Sequence[Any]:
        """One value per sample (``None`` where a sample lacks it)."""
        if self.td is not None:
            col = self.column(name)
            return [None] * self.n if col is None else column_rows(col, self.n)
        return [s.get(name) for s in self.samples or ()]

    def rows(self) -> list[dict[str, Any]]:
        """Every sample as a plain dict (tensors per sample, Python values); ``None`` values dropped."""
        if self.td is None:
            return [{k: v for k, v in s.items() if v is not None} for s in self.samples or ()]
        columns = {name: column_rows(self.td.get(name), self.n) for name in self.td.keys()}
        columns.update(self.lists)
        return [{k: v[i] for k, v in columns.items() if v[i] is not None} for i in range(self.n)]

    def row(self, i: int) -> Mapping[str, Any]:
        if self.td is None:
            return (self.samples or [])[i]
        if self.opaque():
            return {k: v[i] for k, v in ((k, self.values_of(k)) for k in self.keys())}
        if not self.lists:
            return as_mapping(self.td[i])
        return {**as_mapping(self.td[i]), **{k: v[i] for k, v in self.lists.items()}}

    def opaque(self) -> frozenset[str]:
        """Columns whose per-sample shapes cannot be read (see `is_opaque`)."""
        if self.td is None:
            return frozenset()
        return frozenset(k for k in self.td.keys() if is_opaque(self.td.get(k)))


def batch_view(batch: Any) -> BatchView:
    """Read ``batch`` (a sequence of sample mappings, or a TensorDict with one batch dim).

    Raises:
        TypeError: ``batch`` is neither, or one of its samples is not a mapping.
        BatchShapeError: a TensorDict without exactly one batch dim.
    """
    if is_tensordict(batch):
        if batch.batch_dims != 1:
            raise BatchShapeError(f"a batch TensorDict needs one batch dim, found batch_size {list(batch.batch_size)}")
        rows = _lazy_rows(batch)
        return BatchView(td=batch) if rows is None else BatchView(samples=[as_mapping(r) for r in rows])
    if isinstance(batch, Sequence) and not isinstance(batch, (str, bytes, Mapping)):
        return BatchView(samples=[as_mapping(s) for s in batch])
    raise TypeError(f"a batch must be a list of sample mappings or a TensorDict, found {type(batch).__name__}")


def _lazy_rows(td: Any) -> list[Any] | None:
    """The per-sample TensorDicts of a lazy stack along the batch dim (their shapes may differ), else ``None``."""
    from tensordict import LazyStackedTensorDict

    if isinstance(td, LazyStackedTensorDict) and td.stack_dim == 0 and not _is_nontensor(td):
        return list(td.tensordicts)
    return None


def index_rows(td: Any, rows: torch.Tensor) -> Any:
    """``td[rows]``, also for columns that cannot be indexed by a tensor.

    Where tensordict cannot index a column by a LongTensor — strided nested tensors
    (TransferQueue's fallback layout) on every version, jagged ones on tensordict 0.10.0 —
    the TensorDict is rebuilt column by column.
    """
    try:
        with without_fx_note():  # tensordict indexes a jagged column through nested_tensor_from_jagged
            return td[rows]
    except (NotImplementedError, RuntimeError, IndexError, TypeError):
        pass
    from tensordict import TensorDict, TensorDictBase

    picked = rows.tolist()
    tensors: dict[str, Any] = {}
    others: dict[str, Any] = {}
    for key in list(td.keys()):  # iterating a TensorDict itself yields rows
        col = td.get(key)
        if isinstance(col, torch.Tensor):
            tensors[key] = _index_column(col, rows, picked)
        elif isinstance(col, TensorDictBase) and not _is_nontensor(col):
            tensors[key] = index_rows(col, rows)
        else:
            values = nontensor_values(col, td.batch_size[0])
            others[key] = [values[i] for i in picked] if values is not None else col[rows]
    out = TensorDict(tensors, batch_size=[len(picked)])
    for key, col in others.items():
        out[key] = nontensor_column(col) if isinstance(col, list) else col
    return out


def nontensor_column(values: Sequence[Any]) -> Any:
    """A non-tensor column holding ``values``, one per row, that every tensordict version accepts.

    An empty ``NonTensorStack`` cannot be put into a TensorDict on tensordict 0.10.0 (it
    reads the names of its first member); an empty ``NonTensorData`` can, and reads
    back as no values everywhere.
    """
    from tensordict import NonTensorData, NonTensorStack

    if not len(values):
        return NonTensorData(data=None, batch_size=[0])
    return NonTensorStack.from_list(list(values))


def _index_column(col: torch.Tensor, rows: torch.Tensor, picked: list[int]) -> torch.Tensor:
    try:
        return col[rows]
    except (NotImplementedError, RuntimeError):
        if not col.is_nested:
            raise
    # A nested tensor without tensor indexing: rebuild it, in its own layout, from the
    # picked rows (a copy, but only of the rows kept).
    parts = col.unbind(0)
    return torch.nested.nested_tensor([parts[i] for i in picked], layout=col.layout)
