"""verl 0.9.1's padding entry point, schema-driven: ``upsample_batch_to_divisible_size`` and the padding mask."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from trajschema.contract import is_padding, real_mask
from trajschema.core import positive_int
from trajschema.load import schema_for_sample
from trajschema.padding import padding_needed
from trajschema.schema import Schema
from trajschema.tq import TransferQueueWriter, bounded, check_eos_token_id, check_meta, check_timeout, one_row

__all__ = ["non_padding_mask", "upsample_batch_to_divisible_size"]


def upsample_batch_to_divisible_size(
    batch: Any,
    batch_multiple: int,
    eos_token_id: int,
    *,
    schema: Schema | None = None,
    client: Any = None,
    dims: Mapping[str, int] | None = None,
    timeout_s: float | None = 60,
) -> Any:
    """Append padding samples so ``len(batch)`` becomes a multiple of ``batch_multiple``: verl's drop-in.

    verl 0.9.1's ``verl.trainer.ppo.padding_utils.upsample_batch_to_divisible_size``,
    positional signature and all, with the padding derived from a schema: every field
    the real samples store, padded by its schema rule, validated, tagged
    ``is_padding=True`` and written with one ``kv_batch_put`` through
    [`TransferQueueWriter`][trajschema.TransferQueueWriter]. It reads exactly one sample: the first
    *real* one of the batch (verl reads the first, padding or not). The padding tags
    carry that sample's other tags (``status``, ``global_steps``,
    ``min_global_steps``/``max_global_steps``, ...) as verl's do, and the schema's own
    (``is_padding``, ``prompt_len``/``response_len``/``seq_len``).

    Unlike verl (whose ``build_padding_routed_experts`` fills zeros: every padding token
    on expert 0), routes a schema pads ``{spread: experts}`` are spread evenly over the
    experts: those of the schema when it is pinned (``install()`` pins it to the actor
    model's config), else the real sample's largest expert id + 1.

    Unlike verl, it refuses to pad a batch with no real sample in it (every tag says
    ``is_padding=True``): there is nothing to shape padding on, and a step over only
    padding trains on nothing. It writes nothing then.

    Examples:
        >>> from trajschema.verl import padding_dims, upsample_batch_to_divisible_size
        >>> meta = upsample_batch_to_divisible_size(meta, 120, tokenizer.eos_token_id)  # doctest: +SKIP
        >>> meta = upsample_batch_to_divisible_size(  # doctest: +SKIP
        ...     meta, 120, tokenizer.eos_token_id, dims=padding_dims(tp_size=8, cp_size=16))

    Args:
        batch: the batch's ``KVBatchMeta``.
        batch_multiple: the size the batch must be a multiple of (see
            [`required_batch_multiple`][trajschema.verl.required_batch_multiple]).
        eos_token_id: the tokenizer's EOS id, for the ``pad: eos`` fields.
        schema: the schema of the batch's samples; by default the one
            [`schema_for_sample`][trajschema.schema_for_sample] picks for the sample read.
        client: the TransferQueue API (default: the ``transfer_queue`` module, as verl uses).
        dims: sizes for the padding, e.g. [`padding_dims`][trajschema.verl.padding_dims] for the parallel layout
            (default: the schema's padding defaults, 127 prompt + 1 response token).
        timeout_s: how long each TransferQueue call may take (``None``: forever).

    Returns:
        ``batch`` itself when its size is already a multiple; otherwise a new
        ``KVBatchMeta`` with the padding keys and tags appended, and ``partition_id``,
        ``fields`` (which may name a subset of the stored fields) and ``extra_info`` kept.

    Raises:
        TypeError: ``batch`` is not a ``KVBatchMeta`` (a dataclass with its fields; keys
            of str, tags of dicts), ``schema`` is not a ``Schema``, or a tag's
            ``is_padding`` is not a bool.
        ValueError: ``batch_multiple``, ``eos_token_id`` or ``timeout_s`` is not valid,
            ``batch``'s tags are not one per key or its keys repeat, ``batch`` has no
            partition, or no real sample needs padding.
        SchemaError: the padding breaks the schema (or cannot be carried by
            TransferQueue), or no packaged schema fits the sample.
        TimeoutError: a TransferQueue call took longer than ``timeout_s``.

    Every argument is checked before anything is read or written; a put that fails
    inside TransferQueue is undone (see ``TransferQueueWriter.put``).
    """
    multiple = positive_int("batch_multiple", batch_multiple)
    check_eos_token_id(eos_token_id)
    timeout_s = check_timeout(timeout_s)
    view = check_meta(batch, "batch")
    if padding_needed(len(view.keys), multiple) == 0:
        return batch
    if not isinstance(view.partition_id, str) or not view.partition_id:
        raise ValueError(f"batch.partition_id must name the batch's partition, found {view.partition_id!r}")
    ref = next(((k, t) for k, t in zip(view.keys, view.tags) if not is_padding(t)), None)
    if ref is None:
        raise ValueError(
            f"refusing to pad a batch of {len(view.keys)} padding samples and no real one: there is no sample "
            "to shape the padding on, and a step over padding alone trains on nothing (verl would pad it)"
        )
    # The writer checks these too, but only after the read below.
    if schema is not None and not isinstance(schema, Schema):
        raise TypeError(f"schema must be a trajschema.Schema or None, found {type(schema).__name__}")
    if client is None:
        try:
            import transfer_queue
        except ImportError as exc:
            raise ImportError("upsample_batch_to_divisible_size needs TransferQueue (or pass client=)") from exc
        client = transfer_queue
    ref_key, ref_tag = ref
    partition = view.partition_id
    got = bounded(lambda: client.kv_batch_get(keys=[ref_key], partition_id=partition), timeout_s, "kv_batch_get")
    sample = one_row(got, ref_key)
    if schema is None:
        schema = schema_for_sample(sample, ref_tag)
    writer = TransferQueueWriter(
        schema,
        partition_id=partition,
        eos_token_id=eos_token_id,
        dims=dims,
        client=client,
        timeout_s=timeout_s,
    )
    return writer.pad_to_multiple(batch, multiple, reference=(ref_key, sample))


def non_padding_mask(tags: Sequence[Mapping[str, Any] | None], *, strict: bool = True) -> Any:
    """A numpy bool array, ``True`` for each real sample of ``tags``: the mask verl's metrics filter on.

    ``strict=True`` applies trajschema's contract: ``is_padding`` is a bool or absent
    (absent, or a ``None`` tag, is real); anything else raises, as
    [`real_mask`][trajschema.real_mask] does. ``strict=False`` reads the tags exactly as verl's
    ``_compute_metrics`` does: ``not tag.get("is_padding", False)``, by truthiness (so
    ``"false"`` counts as padding).

    Examples:
        >>> from trajschema.verl import non_padding_mask
        >>> non_padding_mask([{"is_padding": False}, {"is_padding": True}, {}])
        array([ True, False,  True])

    Raises:
        TypeError: ``strict=True`` and a tag's ``is_padding`` is not a bool, or a tag
            is not a mapping (with ``strict=False`` too: verl would fail on it).
    """
    import numpy as np

    if strict:
        return real_mask(tags).numpy()
    flags = []
    for i, tag in enumerate(tags):
        if not isinstance(tag, Mapping):
            raise TypeError(f"tags[{i}] must be a tag dict, found {type(tag).__name__}")
        flags.append(not tag.get("is_padding", False))
    return np.array(flags, dtype=bool)
