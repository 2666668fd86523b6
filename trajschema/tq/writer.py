"""The TransferQueue writer: validate a whole batch, then write it with one put, or not at all.

TransferQueue 0.1.11 accepts almost anything and changes some of it silently (see
``docs/transferqueue-notes.md``). [`TransferQueueWriter`][trajschema.TransferQueueWriter] checks everything it
can before the single ``kv_batch_put`` of a call, so a put either lands whole and
valid or writes nothing; and
[`TransferQueueWriter.pad_to_multiple`][trajschema.TransferQueueWriter.pad_to_multiple]
grows a written batch to the size a PPO/GRPO step needs with padding derived from the schema.

Ray and TransferQueue are imported only when a writer without a ``client`` first
talks to TransferQueue.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trajschema.check import (
    BatchShapeError,
    as_mapping,
    batch_view,
    check_args,
    check_batch,
    check_packed_batch,
    is_tensordict,
)
from trajschema.contract import is_padding
from trajschema.core import MAX_SIZE, Depth, SchemaError, Violation, check_int, describe_value
from trajschema.padding import padding_needed
from trajschema.schema import Schema, short_dtype
from trajschema.tq.calls import (
    MetaView,
    async_put_whole,
    bounded,
    check_meta,
    check_timeout,
    put_whole,
    timeout_message,
)
from trajschema.tq.transport import transport_violations
from trajschema.tq.wire import to_tq_fields, wire_batch, wire_fields

__all__ = ["TransferQueueWriter", "check_eos_token_id", "one_row"]

_MAX_LISTED = 8


@dataclasses.dataclass(frozen=True)
class _Write:
    """What one ``kv_batch_put`` writes, and what the writer learns once it succeeded."""

    keys: list[str]
    fields: Any  # TensorDict
    tags: list[dict[str, Any]]
    dtypes: dict[str, torch.dtype]
    field_names: frozenset[str]
    # (key, sample) of the last real sample written, to shape later padding on.
    reference: tuple[str, dict[str, Any]] | None = None


class TransferQueueWriter:
    """Write schema-checked samples to one TransferQueue partition, all or nothing.

    Every call validates the whole batch (fields, dims, values and tags) before it
    writes, reports every problem in one [`SchemaError`][trajschema.SchemaError], and then
    writes with exactly one ``kv_batch_put``. It fills the tags a trainer relies on
    (``is_padding=False`` and the length tags such as ``prompt_len``/``seq_len``) and
    refuses what TransferQueue would accept but silently change: duplicate keys,
    keys already in the partition (TransferQueue overwrites them), a field whose dtype
    differs within the batch or from earlier puts of this writer (TransferQueue casts
    on read), and a field set that differs between samples or from earlier puts (a
    field not every sample has is dropped from reads).

    Examples:
        >>> import trajschema as ts
        >>> from trajschema.testing import verl_sample
        >>> schema = ts.load_schema("text")
        >>> writer = ts.TransferQueueWriter(schema, partition_id="train", eos_token_id=2)  # doctest: +SKIP
        >>> meta = writer.put(["q0_0_0"], [verl_sample(schema, 5, 3)])  # doctest: +SKIP
        >>> meta = writer.pad_to_multiple(meta, 4)  # doctest: +SKIP
        >>> len(meta.keys), meta.tags[-1]["is_padding"]  # doctest: +SKIP
        (4, True)

    The key checks read the partition once (``kv_list``) and then write; they are not
    atomic against *other* writers putting the same keys at the same moment. The
    dtype and field-set memory is per writer instance (one writer per partition and
    process is the intended use).

    Args:
        schema: the schema every sample must satisfy.
        partition_id: the TransferQueue partition to write to.
        eos_token_id: the tokenizer's EOS id, for ``pad: eos`` fields of padding.
        dims: dim sizes every sample must have (e.g. ``{"layers": 48, "topk": 8}``);
            also used for the padding's sizes.
        client: the TransferQueue API to call: any object with ``kv_batch_put``,
            ``kv_batch_get``, ``kv_list`` and their ``async_`` versions. Defaults to the
            ``transfer_queue`` module (imported on first use; already initialized with
            ``transfer_queue.init()``).
        depth: ``"values"`` (default) or ``"shapes"``, as for [`Schema.validate`][trajschema.Schema.validate].
        timeout_s: how long one TransferQueue call may take before `TimeoutError`
            (``None``: wait forever). TransferQueue's own calls have no timeout, so the
            sync methods run each call in a daemon thread and stop waiting after
            ``timeout_s``; the async methods use `asyncio.wait_for`. A put that fails or
            times out is undone (see the docs page "TransferQueue"), so the same call can
            be retried.

    Raises:
        TypeError: ``schema`` is not a [`Schema`][trajschema.Schema].
        ValueError: ``partition_id`` is empty, ``eos_token_id`` is not an int >= 0,
            ``timeout_s`` is not positive, or ``dims``/``depth`` are invalid.
    """

    def __init__(
        self,
        schema: Schema,
        *,
        partition_id: str,
        eos_token_id: int,
        dims: Mapping[str, int] | None = None,
        client: Any = None,
        depth: Depth = "values",
        timeout_s: float | None = 60,
    ) -> None:
        if not isinstance(schema, Schema):
            raise TypeError(f"schema must be a trajschema.Schema, found {type(schema).__name__}")
        if not isinstance(partition_id, str) or not partition_id:
            raise ValueError(f"partition_id must be a non-empty str, found {partition_id!r}")
        check_eos_token_id(eos_token_id)
        timeout_s = check_timeout(timeout_s)
        dims = check_args(schema.plan, dims, depth)
        self.schema: Schema = schema
        self.partition_id: str = partition_id
        self.eos_token_id: int = int(eos_token_id)
        self.dims: dict[str, int] | None = dict(dims) if dims else None
        self.depth: Depth = depth
        self.timeout_s: float | None = timeout_s
        self._client: Any = client
        #: dtype of every tensor field this writer has written to the partition.
        self._dtypes: dict[str, torch.dtype] = {}
        #: the field set of this writer's earlier puts (``None`` before the first).
        self._fields: frozenset[str] | None = None
        #: (key, sample) of the last sample this writer put: padding for a batch holding
        #: it needs no kv_batch_get.
        self._reference: tuple[str, dict[str, Any]] | None = None

    def __repr__(self) -> str:
        return f"<TransferQueueWriter {self.schema.name!r} -> partition {self.partition_id!r}>"

    @property
    def client(self) -> Any:
        """The TransferQueue API this writer calls (the ``transfer_queue`` module by default)."""
        if self._client is None:
            try:
                import transfer_queue
            except ImportError as exc:
                raise ImportError(
                    "TransferQueueWriter needs TransferQueue: install the tq extra "
                    "(pip install -e '.[tq]' in a trajschema checkout), or pass client="
                ) from exc
            self._client = transfer_queue
        return self._client

    # -- sync API -------------------------------------------------------------------

    def put(self, keys: Sequence[str], samples: Any, tags: Sequence[Mapping[str, Any]] | None = None) -> Any:
        """Validate ``samples`` and their tags, then write them with one ``kv_batch_put``.

        Nothing is written unless every sample, tag and key passes. Missing
        ``is_padding`` tags are set to ``False`` and missing length tags (every schema
        tag with ``equals:``, e.g. ``seq_len``) are computed from the sample; present
        ones must agree with it. A field whose value is ``None`` counts as absent.

        Examples:
            >>> meta = writer.put(["q0_0_0", "q0_1_0"], [s0, s1])  # doctest: +SKIP
            >>> meta.tags[0]  # doctest: +SKIP
            {'is_padding': False, 'prompt_len': 5, 'response_len': 3, 'seq_len': 8}

        Args:
            keys: one new key per sample.
            samples: a list of sample mappings, or a batch ``TensorDict`` (e.g. as
                ``kv_batch_get`` returns it).
            tags: one tag dict per sample (copied, never modified), or ``None``.

        Returns:
            The ``KVBatchMeta`` returned by ``kv_batch_put``.

        Raises:
            SchemaError: with every violation: of the schema (codes as in
                [`Violation`][trajschema.Violation]), ``key`` (a key that is not a str, repeats within
                the call, or is already in the partition), ``dtype`` (a field's dtype
                differs within the batch or from this writer's earlier puts),
                ``missing`` (a field some samples of the batch lack), ``batch`` (a
                field set differing from this writer's earlier puts) or ``transport``
                (a field or tag value TransferQueue cannot send and read back).
            ValueError: no samples, or ``keys``/``tags`` not one per sample.
            TimeoutError: a TransferQueue call took longer than ``timeout_s``.
            Exception: whatever ``kv_batch_put`` itself raises; the keys it registered are
                cleared first, and a note on the exception says so.
        """
        rows, keys, tags = self._normalize(keys, samples, tags)
        listing = self._call("kv_list", self.partition_id)
        write = self._prepare_put(rows, keys, tags, _existing_keys(listing, self.partition_id))
        meta = put_whole(self.client, write.keys, self.partition_id, write.fields, write.tags, self.timeout_s)
        self._remember(write)
        return meta

    def pad_to_multiple(
        self, meta: Any, multiple: int, *, reference: tuple[str, Mapping[str, Any]] | None = None
    ) -> Any:
        """Add padding samples so the batch ``meta`` describes has a multiple of ``multiple`` samples.

        The schema-driven replacement for verl's ``upsample_batch_to_divisible_size``:
        the padding is derived from the schema's pad rules, shaped and typed like a
        real sample of the batch, tagged ``is_padding=True``, given a fresh uid of its
        own, validated, and written with one ``kv_batch_put``. The real sample is read
        with one ``kv_batch_get`` — unless it is the last sample this writer put (a
        writer that wrote the batch pads it without reading anything back). Routes
        padded ``pad: {spread: experts}`` spread over the experts of a schema pinned to
        the model (`schema_for_config`), else of the writer's ``dims``, else over the
        real sample's largest expert id + 1 (see the padding guide).

        Examples:
            >>> multiple = ts.required_multiple(2, actor_mini_batch_size=15, rollout_n=8)
            >>> meta = writer.pad_to_multiple(meta, multiple)  # doctest: +SKIP
            >>> len(meta.keys) % 120  # doctest: +SKIP
            0

        Args:
            meta: the ``KVBatchMeta`` of the batch (e.g. from [`put`][trajschema.TransferQueueWriter.put]); its
                ``partition_id`` must be this writer's (or ``None``).
            multiple: the size the batch must be a multiple of (see
                [`required_multiple`][trajschema.required_multiple]).
            reference: ``(key, sample)`` of a real sample of the batch the caller has
                already read (as ``kv_batch_get`` returned it), to shape the padding on
                instead of reading one.

        Returns:
            ``meta`` itself when no padding is needed; otherwise a new ``KVBatchMeta``
            with the padding keys and tags appended and ``partition_id``, ``fields``
            and ``extra_info`` kept.

        Raises:
            TypeError: ``meta`` is not a ``KVBatchMeta`` (a dataclass with its fields,
                keys of str, tags of dicts or ``None``), a tag's ``is_padding`` is not a
                bool, or ``reference`` is not a ``(key, mapping)`` pair.
            ValueError: ``meta`` is empty, has no real sample (every tag says
                ``is_padding=True``), has tags not one per key or repeated keys, belongs
                to another partition, or ``multiple`` is not a positive int; or the
                padding would not have exactly the fields of the real sample (and of
                ``meta.fields``).
            SchemaError: the padding breaks the schema, cannot be carried by
                TransferQueue, or its dtypes differ from the real sample's or this
                writer's earlier puts.
            TimeoutError: a TransferQueue call took longer than ``timeout_s``.
        """
        view, count, ref_key, ref = self._padding_plan(meta, multiple, reference)
        if count == 0:
            return meta
        if ref is None:
            ref = one_row(self._call("kv_batch_get", [ref_key], self.partition_id), ref_key)
        write = self._prepare_padding(view, count, ref_key, ref)
        written = put_whole(self.client, write.keys, self.partition_id, write.fields, write.tags, self.timeout_s)
        self._remember(write)
        return _extended(meta, written, write)

    # -- async API ------------------------------------------------------------------

    async def async_put(
        self, keys: Sequence[str], samples: Any, tags: Sequence[Mapping[str, Any]] | None = None
    ) -> Any:
        """[`put`][trajschema.TransferQueueWriter.put] with the ``async_kv_*`` calls.

        Each call is bounded by ``timeout_s``.

        Validation and packing run on the event loop's thread: CPU work of roughly
        0.1-0.5 ms per sample (more for long MoE samples, whose routing tensors are copied).

        Args:
            keys: one new key per sample.
            samples: a list of sample mappings, or a batch ``TensorDict``.
            tags: one tag dict per sample, or ``None``.

        Returns:
            The ``KVBatchMeta`` returned by ``async_kv_batch_put``.

        Raises:
            SchemaError: as for [`put`][trajschema.TransferQueueWriter.put].
            ValueError: as for [`put`][trajschema.TransferQueueWriter.put].
            TimeoutError: a TransferQueue call took longer than ``timeout_s``.
        """
        rows, keys, tags = self._normalize(keys, samples, tags)
        listing = await self._acall("async_kv_list", self.partition_id)
        write = self._prepare_put(rows, keys, tags, _existing_keys(listing, self.partition_id))
        meta = await async_put_whole(
            self.client, write.keys, self.partition_id, write.fields, write.tags, self.timeout_s
        )
        self._remember(write)
        return meta

    async def async_pad_to_multiple(self, meta: Any, multiple: int) -> Any:
        """[`pad_to_multiple`][trajschema.TransferQueueWriter.pad_to_multiple] with the ``async_kv_*`` calls.

        Each call is bounded by ``timeout_s``.

        Args:
            meta: the ``KVBatchMeta`` of the batch.
            multiple: the size the batch must be a multiple of.

        Returns:
            ``meta`` itself, or a new ``KVBatchMeta`` with the padding appended.

        Raises:
            ValueError: as for [`pad_to_multiple`][trajschema.TransferQueueWriter.pad_to_multiple].
            SchemaError: as for [`pad_to_multiple`][trajschema.TransferQueueWriter.pad_to_multiple].
            TimeoutError: a TransferQueue call took longer than ``timeout_s``.
        """
        view, count, ref_key, ref = self._padding_plan(meta, multiple)
        if count == 0:
            return meta
        if ref is None:
            ref = one_row(await self._acall("async_kv_batch_get", [ref_key], self.partition_id), ref_key)
        write = self._prepare_padding(view, count, ref_key, ref)
        written = await async_put_whole(
            self.client, write.keys, self.partition_id, write.fields, write.tags, self.timeout_s
        )
        self._remember(write)
        return _extended(meta, written, write)

    # -- TransferQueue calls, bounded -----------------------------------------------

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.client, name)
        return bounded(lambda: fn(*args, **kwargs), self.timeout_s, name)

    async def _acall(self, name: str, *args: Any, **kwargs: Any) -> Any:
        fn = getattr(self.client, name)
        try:
            return await asyncio.wait_for(fn(*args, **kwargs), self.timeout_s)
        except asyncio.TimeoutError:
            raise TimeoutError(timeout_message(name, self.timeout_s)) from None

    # -- the shared, I/O-free part ---------------------------------------------------

    def _normalize(
        self, keys: Sequence[str], samples: Any, tags: Sequence[Mapping[str, Any]] | None
    ) -> tuple[list[dict[str, Any]], list[Any], list[Any]]:
        rows = _rows(samples)
        if not rows:
            raise ValueError("put needs at least one sample")
        if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence):
            raise ValueError(f"keys must be a list of str, one per sample, found {type(keys).__name__}")
        keys = list(keys)
        if len(keys) != len(rows):
            raise ValueError(f"put got {len(keys)} keys for {len(rows)} samples; pass one key per sample")
        if tags is None:
            tag_list: list[Any] = [{} for _ in rows]
        else:
            if isinstance(tags, (str, bytes, Mapping)) or not isinstance(tags, Sequence):
                raise ValueError(f"tags must be a list of tag dicts, one per sample, found {type(tags).__name__}")
            if len(tags) != len(rows):
                raise ValueError(f"put got {len(tags)} tag dicts for {len(rows)} samples; pass one per sample")
            # None is an empty tag dict, as for is_padding and real_mask.
            tag_list = [dict(t) if isinstance(t, Mapping) else {} if t is None else t for t in tags]
        return rows, keys, tag_list

    def _prepare_put(self, rows: list[dict[str, Any]], keys: list[Any], tags: list[Any], existing: Any) -> _Write:
        """Check a put completely; return what to write or raise with every problem."""
        plan = self.schema.plan
        found = _key_violations(keys, existing, self.partition_id)
        found += _field_set_violations(rows, self._fields)
        found += transport_violations(rows, tags)
        dtypes, column_found = _column_violations(rows, self._dtypes)
        # Samples that will travel as they are get packed first: the schema's value checks
        # then screen whole columns of the very TensorDict that is put, not sample by sample.
        fields = None if found or column_found else _packed(rows)
        # The dims each sample binds, for the length tags a tag dict leaves out (the check
        # proves those it states); with none left out, the screened samples need no binding.
        names = [t.name for t in plan.length_tags]
        bound: list[dict[str, int]] | None = [] if any(n not in tag for tag in tags for n in names) else None
        if fields is None:
            schema_found, _ = check_batch(plan, rows, tags=tags, dims=self.dims, depth=self.depth, bound_out=bound)
        else:
            schema_found = check_packed_batch(
                plan, rows, fields, tags=tags, dims=self.dims, depth=self.depth, bound_out=bound
            )
        found = schema_found + found
        # A dtype or kind the schema forbids is already reported; do not report it twice.
        reported = {(v.sample, v.field) for v in found}
        found += [v for v in column_found if (v.sample, v.field) not in reported]
        if found:
            raise SchemaError(_by_sample(found), schema_name=self.schema.name)
        for tag in tags:
            tag.setdefault("is_padding", plan.padding_default)
        for dims, tag in zip(bound if bound is not None else (), tags):  # the dims the check above bound
            for t in plan.length_tags:
                value = t.equals.evaluate(dims) if t.equals is not None else None
                if value is not None:
                    tag.setdefault(t.name, value)
        if fields is None:
            fields = to_tq_fields(rows)
        return _Write(keys, wire_fields(fields), tags, dtypes, frozenset(rows[0]), reference=(keys[-1], rows[-1]))

    def _padding_plan(
        self, meta: Any, multiple: int, reference: tuple[str, Mapping[str, Any]] | None = None
    ) -> tuple[MetaView, int, str, dict[str, Any] | None]:
        """How many padding samples ``meta`` needs, and a real sample to shape them on.

        Every argument is checked here, before anything is read or written. The sample
        is the last one this writer put, when that one is in the batch (it is stored
        exactly as written: the writer refuses whatever TransferQueue would change);
        otherwise only its key is known and the caller reads it (``None``).
        """
        view = check_meta(meta)
        count = padding_needed(len(view.keys), multiple)
        if view.partition_id is not None and view.partition_id != self.partition_id:
            raise ValueError(
                f"meta belongs to partition {view.partition_id!r} but this writer writes to {self.partition_id!r}"
            )
        if not view.keys:
            raise ValueError(
                "cannot pad an empty batch: meta has no keys (there is no real sample to shape padding on)"
            )
        real = [k for k, t in zip(view.keys, view.tags) if not is_padding(t)]
        if not real:
            raise ValueError(
                f"no real sample in meta: all {len(view.keys)} tags say is_padding=True; "
                "padding is shaped on a real sample of the batch"
            )
        if reference is not None:
            if not isinstance(reference, tuple) or len(reference) != 2:
                raise TypeError(f"reference must be a (key, sample) pair, found {type(reference).__name__}")
            key, sample = reference
            if key not in real:
                raise ValueError(f"reference key {key!r} is not a real sample of meta")
            if not isinstance(sample, Mapping):
                raise TypeError(f"reference's sample must be a mapping, found {type(sample).__name__}")
            return view, count, key, dict(as_mapping(sample))
        if self._reference is not None and self._reference[0] in real:
            return view, count, *self._reference
        return view, count, real[0], None

    def _prepare_padding(self, view: MetaView, count: int, ref_key: str, ref: dict[str, Any]) -> _Write:
        """Build and check ``count`` padding samples shaped on the real sample ``ref`` (stored at ``ref_key``)."""
        pad = self.schema.padding(count, eos_token_id=self.eos_token_id, like=ref, dims=self.dims)
        _check_padding_fields(set(pad.fields.keys()), set(ref), view.fields, ref_key)
        ref_tag = view.tags[view.keys.index(ref_key)]
        tags, found = _inherited_tags(ref_tag, pad.tags, self.schema.tags)
        # Every padding row has the same shapes and values but for the uid/index columns
        # and spread routes (Schema.padding builds broadcast columns and proves the fill
        # values; spread ids are distinct per token and below the expert count by
        # construction, the count proven against the checks), so the first and last rows,
        # checked in full, stand for all: the batch-wide screen would cost a fixed ~2 ms
        # here, a tenth of a whole put.
        for i in sorted({0, count - 1}):
            row = pad.fields[i]
            found += [
                dataclasses.replace(v, sample=i)
                for v in self.schema.violations(row, tag=pad.tags[i], dims=self.dims, depth=self.depth)
            ]
            found += transport_violations([dict(row.items())], first_sample=i)
        # The padding must read back with the real samples' dtypes, whoever wrote them.
        known = dict(self._dtypes)
        for name, v in ref.items():
            if isinstance(v, torch.Tensor):
                known.setdefault(name, v.dtype)
        dtypes = {k: v.dtype for k, v in pad.fields.items() if isinstance(v, torch.Tensor)}
        for name, dtype in dtypes.items():
            if name in known and known[name] != dtype:
                found.append(_dtype_violation(None, name, known[name], dtype, "the batch's samples"))
        if found:
            raise SchemaError(found, schema_name=self.schema.name)
        return _Write(list(pad.keys), pad.fields, tags, dtypes, frozenset(pad.fields.keys()))

    def _remember(self, write: _Write) -> None:
        self._dtypes.update(write.dtypes)
        if write.reference is not None:
            self._reference = write.reference
        if self._fields is None:
            self._fields = write.field_names


# ---------------------------------------------------------------------------------
# Helpers


def _rows(samples: Any) -> list[dict[str, Any]]:
    """Samples as a list of plain dicts (tensors per sample, Python values), ``None`` values dropped."""
    if isinstance(samples, Mapping) and not is_tensordict(samples):
        raise TypeError("samples must be a list of sample mappings or a batch TensorDict, found a single mapping")
    try:
        return batch_view(samples).rows()
    except BatchShapeError as exc:
        raise ValueError(str(exc)) from None


def _packed(rows: list[dict[str, Any]]) -> Any:
    """The samples packed for the put, or ``None`` if they cannot be.

    Called once the field set, kinds and dtypes passed, which is what `to_tq_fields`
    checks besides `wire_batch`'s packing. Whatever the packing refuses, the per-sample
    check reports, or the put raises again (`to_tq_fields`).
    """
    try:
        return wire_batch(rows)
    except Exception:
        return None


def check_eos_token_id(eos_token_id: Any) -> int:
    """``eos_token_id`` as an int, if it is one (not a bool) in int64's range and ``>= 0``; else ``ValueError``."""
    return check_int("eos_token_id", eos_token_id, maximum=MAX_SIZE, meaning="a token id")


def one_row(batch: Any, key: str) -> dict[str, Any]:
    """The single sample a ``kv_batch_get([key])`` returned, as a plain dict."""
    n = batch.batch_size[0] if getattr(batch, "batch_dims", 0) else 0
    if n != 1:
        raise ValueError(f"kv_batch_get([{key!r}]) returned {n} rows; expected the one real sample")
    return _rows(batch)[0]


def _existing_keys(listing: Any, partition_id: str) -> Any:
    return listing.get(partition_id, {}) if isinstance(listing, Mapping) else {}


def _key_violations(keys: list[Any], existing: Any, partition_id: str) -> list[Violation]:
    found = []
    first: dict[str, int] = {}
    for i, k in enumerate(keys):
        if not isinstance(k, str):
            found.append(Violation(i, "<key>", "key", "a str key", type(k).__name__, f"key must be a str, found {k!r}"))
            continue
        if k in first:
            found.append(
                Violation(
                    i,
                    "<key>",
                    "key",
                    "a key unique within the put",
                    repr(k),
                    f"key {k!r} repeats sample {first[k]}'s key; TransferQueue would write both, "
                    "keep the last and then fail",
                )
            )
            continue
        first[k] = i
        if k in existing:
            found.append(
                Violation(
                    i,
                    "<key>",
                    "key",
                    f"a key not yet in partition {partition_id!r}",
                    repr(k),
                    f"key {k!r} is already in partition {partition_id!r}; TransferQueue would silently overwrite it",
                )
            )
    return found


def _field_set_violations(rows: list[dict[str, Any]], earlier: frozenset[str] | None) -> list[Violation]:
    found = []
    names = set().union(*rows)
    for name in sorted(names, key=str):  # a name that is not a str is a transport violation
        lacking = [i for i, r in enumerate(rows) if name not in r]
        for i in lacking:
            found.append(
                Violation(
                    i,
                    name,
                    "missing",
                    "every sample of the put has it",
                    "absent",
                    f"{len(rows) - len(lacking)} other samples of this put have field {name!r} but this one "
                    "lacks it; TransferQueue would drop the field from reads that include this sample",
                )
            )
    if earlier is not None and names != earlier:
        for name in sorted(earlier - names, key=str):
            found.append(
                Violation(
                    None,
                    name,
                    "batch",
                    "present, as in this writer's earlier puts",
                    "absent",
                    f"earlier puts to this partition have field {name!r} but this put does not; "
                    "TransferQueue would drop it from reads mixing both",
                )
            )
        for name in sorted(names - earlier, key=str):
            found.append(
                Violation(
                    None,
                    name,
                    "batch",
                    "absent, as in this writer's earlier puts",
                    "present",
                    f"this put has field {name!r} but earlier puts to this partition do not; "
                    "TransferQueue would drop it from reads mixing both",
                )
            )
    return found


def _column_violations(
    rows: list[dict[str, Any]], earlier: Mapping[str, torch.dtype]
) -> tuple[dict[str, torch.dtype], list[Violation]]:
    """The dtype of each tensor field, and a violation per sample that would not read back as written.

    A field must be a tensor in every sample or in none (TransferQueue reads a mix back
    as a ``NonTensorStack``), and a tensor field must have one dtype, the one this
    writer's earlier puts used (TransferQueue casts mixed dtypes on read).
    """
    dtypes: dict[str, torch.dtype] = {}
    first: dict[str, tuple[int, bool]] = {}  # field -> (first sample having it, is it a tensor there)
    found = []
    for i, row in enumerate(rows):
        for name, v in row.items():
            is_tensor = isinstance(v, torch.Tensor)
            if name not in first:
                first[name] = (i, is_tensor)
                if is_tensor:
                    dtypes[name] = v.dtype
                    if name in earlier and earlier[name] != v.dtype:
                        found.append(_dtype_violation(i, name, earlier[name], v.dtype, "this writer's earlier puts"))
                continue
            j, was_tensor = first[name]
            if is_tensor != was_tensor:
                was = "a tensor" if was_tensor else "not a tensor"
                found.append(
                    Violation(
                        i,
                        name,
                        "kind",
                        f"{was}, as in sample {j}",
                        describe_value(v),
                        f"field {name!r} is {was} in sample {j} but {describe_value(v)} here; "
                        "TransferQueue would read the column back as a NonTensorStack",
                    )
                )
            elif is_tensor and v.dtype != dtypes[name]:
                found.append(_dtype_violation(i, name, dtypes[name], v.dtype, f"sample {j} of this put"))
    return dtypes, found


def _dtype_violation(i: int | None, name: str, want: torch.dtype, got: torch.dtype, source: str) -> Violation:
    return Violation(
        i,
        name,
        "dtype",
        short_dtype(want),
        short_dtype(got),
        f"dtype {short_dtype(got)} differs from {short_dtype(want)} in {source}; "
        "TransferQueue would cast mixed dtypes on read",
    )


def _by_sample(found: list[Violation]) -> list[Violation]:
    """Violations in sample order (batch-wide ones last), keeping the order within a sample."""
    return sorted(found, key=lambda v: (v.sample is None, v.sample or 0))


def _listed(names: set[str]) -> str:
    shown = sorted(names)
    if not shown:
        return "none"
    more = f", ... ({len(shown)} in all)" if len(shown) > _MAX_LISTED else ""
    return "[" + ", ".join(shown[:_MAX_LISTED]) + more + "]"


def _check_padding_fields(
    pad_names: set[str], ref_names: set[str], meta_fields: list[str] | None, ref_key: str
) -> None:
    """Padding must store exactly the real sample's fields, and ``meta.fields`` only fields it stores."""
    problems = []
    if pad_names != ref_names:
        problems.append(
            f"the padding has fields {_listed(pad_names - ref_names)} the real sample {ref_key!r} lacks "
            f"and lacks {_listed(ref_names - pad_names)}"
        )
    # meta.fields may name a subset of what is stored (a trainer selecting the fields it
    # reads), but never a field the batch's samples lack.
    if meta_fields is not None and not set(meta_fields) <= ref_names:
        problems.append(
            f"meta.fields names {_listed(set(meta_fields) - ref_names)}, "
            f"which the real sample {ref_key!r} does not store"
        )
    if problems:
        raise ValueError(
            "padding must have exactly the batch's fields (TransferQueue drops a field from reads "
            "of any batch where some sample lacks it): " + "; ".join(problems)
        )


def _inherited_tags(
    ref_tag: Mapping[str, Any] | None, pad_tags: list[dict[str, Any]], own: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[Violation]]:
    """The padding's tags: the real sample's other tags, then the schema's own; violations if they cannot travel.

    Like verl, padding inherits the real sample's other tags (``status``,
    ``min_global_steps``, ...) so tag-based samplers treat it alike; the schema's own
    tags (is_padding and the lengths) are the padding's.
    """
    inherited = {k: v for k, v in (ref_tag or {}).items() if k not in own and k != "is_padding"}
    if not inherited:
        return list(pad_tags), []
    found = [
        dataclasses.replace(v, sample=None, message=f"the real sample's tag, inherited by the padding: {v.message}")
        for v in transport_violations([], [inherited])
    ]
    if found:
        return list(pad_tags), found
    try:
        return [{**copy.deepcopy(inherited), **t} for t in pad_tags], []
    except Exception as exc:  # copy refuses what pickle took (a custom __deepcopy__)
        return list(pad_tags), [
            Violation(
                None,
                "<tags>",
                "transport",
                "tags that can be copied to every padding sample",
                type(exc).__name__,
                f"the real sample's tags, inherited by the padding, cannot be copied: {exc}",
            )
        ]


def _extended(meta: Any, written: Any, write: _Write) -> Any:
    """``meta`` with the padding keys and tags appended; other attributes kept."""
    tags = list(getattr(written, "tags", None) or write.tags)
    return dataclasses.replace(meta, keys=[*meta.keys, *write.keys], tags=[*meta.tags, *tags])
