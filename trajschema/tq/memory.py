"""An in-memory stand-in for TransferQueue 0.1.11's KV API, for tests that should not start Ray.

[`MemoryTransferQueue`][trajschema.testing.MemoryTransferQueue] has the functions of the ``transfer_queue`` module's KV
interface (``kv_batch_put``, ``kv_batch_get``, ``kv_batch_get_by_meta``, ``kv_list``,
``kv_clear`` and their ``async_`` versions, plus ``KVBatchMeta``) with the same
signatures, and reproduces what a real TransferQueue with the ``SimpleStorage`` backend
observably does (``docs/transferqueue-notes.md``); ``tests/integration/test_tq_contract.py``
holds it and the real one to the same tests.

This module imports only torch and tensordict (and ``transfer_queue``'s own
``KVBatchMeta`` when TransferQueue is installed).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import pickle
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from trajschema.check import column_rows
from trajschema.tq.wire import wire_batch

__all__ = ["MemoryTransferQueue"]


@dataclasses.dataclass
class _KVBatchMeta:
    """TransferQueue's ``KVBatchMeta`` (same fields and checks), for when TransferQueue is not installed.

    Examples:
        >>> _KVBatchMeta(keys=["a"], tags=[{}], partition_id="p", fields=["x"]).size
        1
    """

    keys: list[str] = dataclasses.field(default_factory=list)
    tags: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    partition_id: str | None = None
    fields: list[str] | None = None
    extra_info: dict[str, Any] | None = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.keys) != len(self.tags):
            raise ValueError(f"KVBatchMeta needs one tag dict per key: {len(self.keys)} keys, {len(self.tags)} tags")
        if len(set(self.keys)) != len(self.keys):
            raise ValueError(f"KVBatchMeta keys repeat: {_repeats(self.keys)}")
        if self.fields is not None and len(set(self.fields)) != len(self.fields):
            raise ValueError(f"KVBatchMeta fields repeat: {_repeats(self.fields)}")
        self.tags = copy.deepcopy(self.tags)
        self.extra_info = copy.deepcopy(self.extra_info)

    @property
    def size(self) -> int:
        """The number of samples."""
        return len(self.keys)

    def __len__(self) -> int:
        return len(self.keys)


try:  # TransferQueue's own class when it is installed, so isinstance checks in user code hold
    from transfer_queue import KVBatchMeta as _TQKVBatchMeta
except ImportError:  # pragma: no cover - exercised by the no-tq environment
    _TQKVBatchMeta = None

KVBatchMeta: Any = _TQKVBatchMeta if _TQKVBatchMeta is not None else _KVBatchMeta


def _repeats(items: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    repeated: set[str] = set()
    for x in items:
        (repeated if x in seen else seen).add(x)
    return sorted(repeated)


# ---------------------------------------------------------------------------------
# What crosses TransferQueue's wire (msgpack, pickle for the rest) comes back as


def _wire(value: Any) -> Any:
    """``value`` as it comes back from TransferQueue's msgpack wire: a fresh copy.

    Tensors are copied (contiguous, detached); dicts (and dict subclasses) become
    dicts, lists, tuples and sets become lists, dataclasses become dicts, enums their
    value, ``bytearray`` bytes; anything else is copied by a pickle round trip, so what
    pickle refuses (e.g. a ``MappingProxyType``) raises ``TypeError`` as it does there.
    """
    try:
        return _convert(value)
    except RecursionError:  # a self-referential container: TransferQueue pickles the whole message
        return pickle.loads(pickle.dumps(value))


def _convert(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_meta:
            raise TypeError(f"a meta tensor {tuple(value.shape)} holds no data to send")
        if value.is_nested:
            return pickle.loads(pickle.dumps(value.detach()))
        return value.detach().clone(memory_format=torch.contiguous_format)
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    if isinstance(value, enum.Enum):
        return _convert(value.value)
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, dict):
        return {_convert(k): _convert(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_convert(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _convert(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


# ---------------------------------------------------------------------------------
# Argument checks


def _key_list(keys: Any, where: str) -> list[str]:
    """``keys`` as a list of str (a single str is one key), as TransferQueue accepts them."""
    if isinstance(keys, str):
        return [keys]
    if not isinstance(keys, list):
        raise TypeError(f"{where}: keys must be a str or a list of str, found {type(keys).__name__}")
    bad = [f"keys[{i}]={k!r}" for i, k in enumerate(keys) if not isinstance(k, str)]
    if bad:
        raise TypeError(f"{where}: every key must be a str, found {', '.join(bad[:4])}")
    if not keys:
        raise ValueError(f"{where}: keys is an empty list")
    return keys


def _put_args(keys: Any, fields: Any, tags: Any) -> list[str]:
    """The checks a real ``kv_batch_put`` makes before it registers any key."""
    from tensordict import TensorDictBase

    if fields is None and tags is None:
        raise ValueError("kv_batch_put needs fields or tags (or both); both are None")
    if isinstance(keys, str):
        raise TypeError(f"kv_batch_put: keys must be a list of str, found the str {keys!r}")
    if fields is not None:
        if not isinstance(fields, TensorDictBase):
            raise TypeError(f"kv_batch_put: fields must be a TensorDict, found {type(fields).__name__}")
        if fields.batch_dims != 1:
            raise ValueError(
                f"kv_batch_put: fields must have one batch dim, found batch_size {list(fields.batch_size)}"
            )
        if isinstance(keys, Sequence) and fields.batch_size[0] != len(keys):
            raise ValueError(
                f"kv_batch_put: {len(keys)} keys but fields has batch_size {fields.batch_size[0]}; they must match"
            )
    return _key_list(keys, "kv_batch_put")


def _field_names(select_fields: list[str] | str | None) -> list[str] | None:
    if select_fields is None or isinstance(select_fields, str):
        return None if select_fields is None else [select_fields]
    if not isinstance(select_fields, (list, tuple)) or not all(isinstance(f, str) for f in select_fields):
        raise TypeError(f"select_fields must be a str, a list of str or None, found {select_fields!r}")
    return list(select_fields)


def _rows_of(fields: Any, n: int, data_parser: Callable[[Any], Any] | None) -> list[dict[str, Any]]:
    """One ``{field: value}`` per sample, each value a wire copy (what the storage keeps)."""
    from tensordict import NonTensorData

    columns: dict[str, Any] = {}
    for name in fields.keys():
        col = fields.get(name)
        if isinstance(col, NonTensorData):
            raise TypeError(
                f"kv_batch_put: field {name!r} is a NonTensorData (one value for every row); TransferQueue "
                "cannot split it per sample: pass a NonTensorStack with one value per row"
            )
        rows = list(column_rows(col, n))
        plain = isinstance(col, torch.Tensor) and not col.is_nested
        columns[name] = torch.stack(rows) if plain and data_parser is not None else rows
    if data_parser is not None:
        data_parser(columns)
    try:
        return [{name: _wire(values[i]) for name, values in columns.items()} for i in range(n)]
    except (TypeError, pickle.PicklingError, AttributeError) as exc:
        raise RuntimeError(
            f"kv_batch_put: a field value cannot be sent to storage: {type(exc).__name__}: {exc}"
        ) from exc


def _tag_copies(tags: Any, n: int) -> list[dict[str, Any]]:
    if not isinstance(tags, Sequence) or isinstance(tags, (str, bytes)) or len(tags) != n:
        got = f"{len(tags)} tags" if isinstance(tags, Sequence) else type(tags).__name__
        raise ValueError(f"kv_batch_put: tags must be one dict per key ({n}), found {got}")
    bad = [f"tags[{i}] is {type(t).__name__}" for i, t in enumerate(tags) if not isinstance(t, Mapping)]
    if bad:
        raise TypeError(f"kv_batch_put: every tag must be a dict, found {', '.join(bad[:4])}")
    return [_wire(dict(t)) for t in tags]


@dataclasses.dataclass
class _Sample:
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    tags: dict[str, Any] = dataclasses.field(default_factory=dict)


class MemoryTransferQueue:
    """An in-memory TransferQueue client: the KV API of ``transfer_queue`` 0.1.11, without Ray.

    Pass it wherever trajschema takes a ``client`` (``TransferQueueWriter(..., client=)``,
    ``trajschema.verl.upsample_batch_to_divisible_size(..., client=)``) or use it
    directly in place of the ``transfer_queue`` module. Behaviour held to the real one
    by ``tests/integration/test_tq_contract.py``:

    * reads are laid out by `trajschema.tq.wire.wire_batch`: jagged nested
      tensors even for equal shapes, the strided nested fallback (cast to the first
      sample's dtype) when two dims vary or dtypes differ, dense ``(B,)`` columns for
      0-dim values, ``NonTensorStack`` for everything else; fields ordered by name,
      samples in key order (a key asked twice comes twice, unknown keys are dropped);
    * only the fields every fetched sample has are returned; ``select_fields`` narrows
      those (names not among them are ignored; nothing left gives an empty
      ``TensorDict`` of batch size 0); no common field at all raises ``ValueError``;
    * writing an existing key replaces the fields written and keeps the others; tags
      merge (``dict.update``); a tags-only put (``fields=None``) creates or updates tags;
    * a key repeated within one put is written, its last occurrence alone counting
      (for data and tags), then ``ValueError`` is raised;
    * keys are registered before tags and data are checked, so a put failing on its
      tags or data leaves its new keys listed with empty tags and no data;
    * values are stored by value: tensors are copied, non-tensor values come back as
      from msgpack (tuples and sets as lists, dataclasses as dicts, enums as their
      values); what pickle refuses fails the put; every read returns fresh objects;
    * ``kv_list`` gives ``{partition: {key: tags}}`` in key creation order;
      ``kv_clear`` ignores unknown keys and partitions and leaves the partition listed.

    Examples:
        >>> from trajschema.testing import MemoryTransferQueue
        >>> from trajschema.tq.wire import to_tq_fields
        >>> tq = MemoryTransferQueue()
        >>> meta = tq.kv_batch_put(["a", "b"], "train", fields=to_tq_fields(
        ...     [{"responses": torch.arange(3)}, {"responses": torch.arange(2)}]), tags=[{"i": 0}, {"i": 1}])
        >>> meta.fields, tq.kv_list("train")
        (['responses'], {'train': {'a': {'i': 0}, 'b': {'i': 1}}})
        >>> tq.kv_batch_get(["b"], "train")["responses"].layout
        torch.jagged

    It does not model TransferQueue's controller and storage actors (nothing runs in
    another process; a ``MemoryTransferQueue`` is not shared between processes),
    ZMQ (no serialization cost, no msgpack-to-pickle fallback for values msgpack cannot
    carry: they are converted value by value), timing (calls return at once; no
    timeouts, no blocking ``init``), capacity (no storage-unit limits, no memory
    reclamation; the orphaned slot a repeated key leaves in the real one is not kept),
    multiple storage units (a failed data put writes none of its samples), other
    backends, ``kv_put``, ``init``/``close``, checkpoints or the logged warnings. Where
    the real client crashes on malformed arguments (e.g. ``fields`` given as a dict,
    keys given as a str to ``kv_batch_put``), this one raises ``TypeError`` first.

    It is thread-safe: every call holds one lock while it reads or changes the store.
    """

    #: TransferQueue's ``KVBatchMeta`` when it is installed, else an equivalent dataclass.
    KVBatchMeta = KVBatchMeta

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._partitions: dict[str, dict[str, _Sample]] = {}

    def __repr__(self) -> str:
        with self._lock:
            sizes = {p: len(keys) for p, keys in self._partitions.items()}
        return f"<MemoryTransferQueue partitions={sizes}>"

    def __getstate__(self) -> dict[str, Any]:
        with self._lock:
            return {"_partitions": pickle.loads(pickle.dumps(self._partitions))}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._lock = threading.RLock()
        self._partitions = state["_partitions"]

    # -- writing ----------------------------------------------------------------------

    def kv_batch_put(
        self,
        keys: list[str],
        partition_id: str,
        fields: Any = None,
        tags: list[dict[str, Any]] | None = None,
        data_parser: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Write ``fields`` (a ``TensorDict`` of batch size ``len(keys)``) and/or ``tags`` for ``keys``.

        Examples:
            >>> tq = MemoryTransferQueue()
            >>> tq.kv_batch_put(["a"], "p", tags=[{"score": 1.0}]).tags
            [{'score': 1.0}]

        Args:
            keys: one str key per row.
            partition_id: the partition to write to (created on first use).
            fields: the data, or ``None`` to update tags only.
            tags: one dict per key, merged into the key's tags, or ``None``.
            data_parser: called with ``{field: per-row values}`` (a batched tensor for a
                dense column, a list otherwise) and may change the values in place.

        Returns:
            A ``KVBatchMeta`` with the keys, their merged tags, the partition, the
            sorted fields every written sample now has, and ``extra_info={}``.

        Raises:
            ValueError: neither ``fields`` nor ``tags``; no keys; ``fields`` or ``tags``
                not one per key; a key repeated (after writing, as TransferQueue does).
            TypeError: keys not a list of str, ``fields`` not a TensorDict, a tag not
                a dict or holding a value pickle refuses, a ``NonTensorData`` column.
            RuntimeError: a field value pickle refuses (TransferQueue's storage fails so).
        """
        keys = _put_args(keys, fields, tags)
        with self._lock:
            partition = self._partitions.setdefault(partition_id, {})
            for k in keys:
                partition.setdefault(k, _Sample())
        new_tags = _tag_copies(tags, len(keys)) if tags is not None else None
        rows = _rows_of(fields, len(keys), data_parser) if fields is not None else None
        with self._lock:
            partition = self._partitions.setdefault(partition_id, {})
            self._commit(partition, keys, rows, new_tags)
            if len(set(keys)) != len(keys):
                raise ValueError(f"kv_batch_put: keys repeat within the put: {_repeats(keys)} (written, last wins)")
            stored = [partition[k] for k in keys]
            common = set(stored[0].fields).intersection(*(s.fields for s in stored[1:]))
            out_tags = [_wire(s.tags) for s in stored]
        if tags is not None:  # like the real client: the caller's new tag values, not their wire copies
            for out, given in zip(out_tags, tags, strict=True):
                out.update(given)
        return KVBatchMeta(
            keys=list(keys), tags=out_tags, partition_id=partition_id, fields=sorted(common), extra_info={}
        )

    @staticmethod
    def _commit(
        partition: dict[str, _Sample],
        keys: list[str],
        rows: list[dict[str, Any]] | None,
        tags: list[dict[str, Any]] | None,
    ) -> None:
        """Apply the put; of a key repeated within it only the last occurrence counts (as in the real one)."""
        last = {k: i for i, k in enumerate(keys)}
        for k, i in last.items():
            sample = partition.setdefault(k, _Sample())
            if rows is not None:
                sample.fields.update(rows[i])
            if tags is not None:
                sample.tags.update(tags[i])

    # -- reading ----------------------------------------------------------------------

    def kv_batch_get(
        self, keys: list[str] | str, partition_id: str, select_fields: list[str] | str | None = None
    ) -> Any:
        """Read ``keys`` of ``partition_id`` as one ``TensorDict``, laid out as TransferQueue lays it out.

        Examples:
            >>> tq = MemoryTransferQueue()
            >>> from tensordict import TensorDict
            >>> _ = tq.kv_batch_put(["a", "b"], "p", fields=TensorDict({"x": torch.ones(2, 3)}, batch_size=[2]))
            >>> td = tq.kv_batch_get(["a", "b"], "p")
            >>> td["x"].is_nested, td.batch_size
            (True, torch.Size([2]))

        Args:
            keys: a key or a list of keys; unknown ones are dropped, repeated ones repeated.
            partition_id: the partition to read.
            select_fields: a field name or list of names to narrow the read to, or ``None``.

        Returns:
            A ``TensorDict`` of the fields every found sample has (and ``select_fields``
            names), batch size = the number of found keys; batch size 0 if no field is left.

        Raises:
            ValueError: no keys; no key found (or no such partition); the found samples
                have no field in common (e.g. a key written with tags only).
            TypeError: keys or ``select_fields`` of the wrong type.
        """
        from tensordict import TensorDict

        keys = _key_list(keys, "kv_batch_get")
        wanted = _field_names(select_fields)
        with self._lock:
            partition = self._partitions.get(partition_id, {})
            found = [partition[k] for k in keys if k in partition]
            if not found:
                raise ValueError(f"kv_batch_get: none of the keys were found in partition {partition_id!r}")
            common = set(found[0].fields).intersection(*(s.fields for s in found[1:]))
            if not common:
                raise ValueError(
                    f"kv_batch_get: the {len(found)} samples found in partition {partition_id!r} have no field "
                    "in common (a key written with tags only has no data yet)"
                )
            names = sorted(common if wanted is None else common.intersection(wanted))
            samples = [{n: _wire(s.fields[n]) for n in names} for s in found]
        if not names:
            return TensorDict({}, batch_size=[0])
        return wire_batch(samples)

    def kv_batch_get_by_meta(self, meta: Any, select_fields: list[str] | str | None = None) -> Any:
        """Read the keys of ``meta`` (its ``fields``, or ``select_fields``, which must be among them).

        Examples:
            >>> tq = MemoryTransferQueue()
            >>> from tensordict import TensorDict
            >>> meta = tq.kv_batch_put(["a"], "p", fields=TensorDict({"x": torch.ones(1, 2)}, batch_size=[1]))
            >>> list(tq.kv_batch_get_by_meta(meta).keys())
            ['x']

        Raises:
            ValueError: ``meta.partition_id`` is ``None``, ``select_fields`` names a field
                not in ``meta.fields``, or as for [`kv_batch_get`][trajschema.testing.MemoryTransferQueue.kv_batch_get].
        """
        if meta.partition_id is None:
            raise ValueError("kv_batch_get_by_meta: meta.partition_id is None; it must name the partition")
        wanted = _field_names(select_fields)
        if wanted is not None:
            if meta.fields is None or any(f not in meta.fields for f in wanted):
                raise ValueError(
                    f"kv_batch_get_by_meta: select_fields {wanted} are not all among meta.fields {meta.fields}"
                )
        else:
            wanted = meta.fields
        return self.kv_batch_get(list(meta.keys), meta.partition_id, select_fields=wanted)

    def kv_list(self, partition_id: str | None = None) -> dict[str, dict[str, Any]]:
        """``{partition: {key: tags}}`` for one partition (``{}`` if unknown) or, with ``None``, all.

        Examples:
            >>> tq = MemoryTransferQueue()
            >>> _ = tq.kv_batch_put(["a"], "p", tags=[{"t": (1, 2)}])
            >>> tq.kv_list(), tq.kv_list("other")
            ({'p': {'a': {'t': [1, 2]}}}, {})
        """
        with self._lock:
            pids = list(self._partitions) if partition_id is None else [partition_id]
            return {
                p: {k: _wire(s.tags) for k, s in self._partitions[p].items()} for p in pids if p in self._partitions
            }

    def kv_clear(self, keys: list[str] | str, partition_id: str) -> None:
        """Remove ``keys`` (data and tags) from ``partition_id``; unknown keys and partitions are ignored.

        Examples:
            >>> tq = MemoryTransferQueue()
            >>> _ = tq.kv_batch_put(["a"], "p", tags=[{}])
            >>> tq.kv_clear("a", "p"); tq.kv_list("p")
            {'p': {}}

        Raises:
            ValueError: an empty list of keys.
            TypeError: keys not a str or a list of str.
        """
        keys = _key_list(keys, "kv_clear")
        with self._lock:
            partition = self._partitions.get(partition_id)
            for k in keys if partition is not None else ():
                partition.pop(k, None)  # type: ignore[union-attr]

    # -- async API: the same calls as coroutines ----------------------------------------

    async def async_kv_batch_put(
        self,
        keys: list[str],
        partition_id: str,
        fields: Any = None,
        tags: list[dict[str, Any]] | None = None,
        data_parser: Callable[[Any], Any] | None = None,
    ) -> Any:
        """[`kv_batch_put`][trajschema.testing.MemoryTransferQueue.kv_batch_put] as a coroutine."""
        return self.kv_batch_put(keys, partition_id, fields=fields, tags=tags, data_parser=data_parser)

    async def async_kv_batch_get(
        self, keys: list[str] | str, partition_id: str, select_fields: list[str] | str | None = None
    ) -> Any:
        """[`kv_batch_get`][trajschema.testing.MemoryTransferQueue.kv_batch_get] as a coroutine."""
        return self.kv_batch_get(keys, partition_id, select_fields=select_fields)

    async def async_kv_batch_get_by_meta(self, meta: Any, select_fields: list[str] | str | None = None) -> Any:
        """[`kv_batch_get_by_meta`][trajschema.testing.MemoryTransferQueue.kv_batch_get_by_meta] as a coroutine."""
        return self.kv_batch_get_by_meta(meta, select_fields=select_fields)

    async def async_kv_list(self, partition_id: str | None = None) -> dict[str, dict[str, Any]]:
        """[`kv_list`][trajschema.testing.MemoryTransferQueue.kv_list] as a coroutine."""
        return self.kv_list(partition_id)

    async def async_kv_clear(self, keys: list[str] | str, partition_id: str) -> None:
        """[`kv_clear`][trajschema.testing.MemoryTransferQueue.kv_clear] as a coroutine."""
        self.kv_clear(keys, partition_id)
