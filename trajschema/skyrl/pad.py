"""SkyRL 0.3.0's ``pad_training_input_batch``, schema-driven: padding rows in the ``skyrl`` layout."""

from __future__ import annotations

import contextvars
import copy
import dataclasses
import functools
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trajschema.core import DenseBatch, FieldEntry, Layout, SchemaError, check_int
from trajschema.dense import check_dense, one_row, read_dense
from trajschema.dense import sliced_layout as _sliced
from trajschema.dropin import real_and_padding
from trajschema.files import as_layout, schema_search_path
from trajschema.load import load_schema, schema_names
from trajschema.schema import Schema

__all__ = [
    "PER_ROW_METADATA",
    "checked_with",
    "choose_batch_schema",
    "first_real",
    "is_sft_batch",
    "pad_training_input_batch",
    "padded_metadata",
    "padding_rows",
    "real_rows",
    "rows_of",
    "settings",
    "sft_padding_rows",
    "sliced_layout",
    "staged_layout",
    "token_ids",
]

#: The metadata keys SkyRL keeps one entry per row of (the rest describe the whole batch).
PER_ROW_METADATA = ("uids", "is_last_step", "is_padding")

#: What ``install()`` was given (``schema``, ``eos_token_id``, ``pad_token_id``, ``check``, ``audit``, and
#: ``recorder``: the `trajschema.bundle.Recorder` of ``record=``, or ``None``): process-wide.
settings: dict[str, Any] = {}
#: The ids of the tokenizer of the trainer whose ``convert_to_training_input`` is running.
token_ids: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("trajschema_skyrl_ids", default=None)


def pad_training_input_batch(
    unpadded_batch: Any,
    pad_size: int,
    *,
    schema: Schema | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    layout: Layout | str = "skyrl",
    check: bool | None = None,
) -> Any:
    """Append ``pad_size`` padding rows to a SkyRL ``TrainingInputBatch``: SkyRL 0.3.0's drop-in.

    Takes SkyRL's positional arguments and returns what SkyRL's
    ``skyrl.backends.skyrl_train.training_batch.pad_training_input_batch`` returns: a new
    batch of the input's class, its metadata deep-copied with ``pad_size`` set and the
    per-row lists extended (``uids``, ``is_last_step`` with ``True``, as SkyRL does), and
    ``metadata["is_padding"]``, one bool per row. With ``pad_size == 0`` the batch itself
    comes back with ``pad_size = 0`` (as SkyRL) and ``is_padding`` set.

    Unlike SkyRL's (which clones row 0, images included, and zeroes only ``loss_mask``),
    the rows are the schema's padding in the ``skyrl`` layout
    ([`Schema.dense_padding`][trajschema.Schema.dense_padding]): EOS tokens, zero masks
    and rewards, spread expert routes, an empty ``pixel_values`` / ``image_grid_thw``
    entry per row, and a fresh uid per row, each its own group. Columns no schema field
    gives (``advantages``, ``returns``, ``action_log_probs``, ``values``, ...) get zeros.
    The batch is checked first (schema and layout, at depth ``shapes``); nothing is built
    when it fails. SkyRL's SFT batch (`is_sft_batch`: no ``response_mask``, rewards or
    uids), which no rollout schema describes, gets `sft_padding_rows` instead.

    Examples:
        >>> import trajschema.skyrl
        >>> padded = trajschema.skyrl.pad_training_input_batch(batch, 2)  # doctest: +SKIP
        >>> padded.metadata["is_padding"][-2:]  # doctest: +SKIP
        [True, True]

    Args:
        unpadded_batch: the batch (a SkyRL ``TensorBatch``: a dict of tensors and
            ``TensorList``s with ``.metadata``).
        pad_size: how many rows to append (an int >= 0).
        schema: the batch's schema; by default the one
            [`choose_batch_schema`][trajschema.skyrl.choose_batch_schema] picks.
        eos_token_id: the EOS id of the padding tokens; by default ``install(eos_token_id=)``,
            else the trainer's tokenizer (under ``install()``), else the last token of the
            first real row's sequence.
        pad_token_id: the pad id of the left padding; by default the trainer's tokenizer
            (under ``install()``), else the batch's own (a masked-out token), else the EOS id.
        layout: the layout to check and pad in (default ``skyrl``).
        check: check the whole batch first (default: ``install(check=)``, else ``True``).
            ``False`` checks only the row the padding is shaped on: checking reads every
            mask and padded region of the batch, which costs more than SkyRL's own padding
            of a few rows (see ``benchmarks/README.md``, part 8).

    Raises:
        TypeError: ``unpadded_batch`` is not a batch with ``.metadata``, or an id is not an int.
        ValueError: ``pad_size`` < 0, a per-row metadata list of the wrong length, a
            batch with no rows, or no real row.
        SchemaError: the batch breaks the schema or the layout (every violation), or no
            packaged schema reads it.
    """
    pad_size = check_int("pad_size", pad_size, minimum=0)
    metadata = _metadata_of(unpadded_batch)
    n = _rows(unpadded_batch)
    real = real_rows(metadata, n)
    if pad_size == 0 and n == 0:
        return _no_padding(unpadded_batch, metadata, real)
    first = first_real(real, n)
    rows = padding_rows(
        unpadded_batch,
        pad_size,
        first,
        layout=layout,
        schema=schema,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        check=settings.get("check", True) if check is None else check,
    )
    if pad_size == 0:
        return _no_padding(unpadded_batch, metadata, real)
    out = type(unpadded_batch)(_joined(unpadded_batch, rows, pad_size))
    out.metadata = padded_metadata(metadata, n, pad_size)
    return out


def _metadata_of(batch: Any) -> dict[str, Any]:
    if not isinstance(batch, Mapping) or not hasattr(batch, "metadata"):
        raise TypeError(
            f"pad_training_input_batch expects a SkyRL TrainingInputBatch (a dict with .metadata), "
            f"found {type(batch).__name__}"
        )
    meta = batch.metadata
    if meta is not None and not isinstance(meta, dict):
        raise TypeError(f"batch.metadata must be a dict or None, found {type(meta).__name__}")
    return meta or {}


def _rows(batch: Mapping[str, Any]) -> int:
    sizes = {k: len(v) for k, v in batch.items() if v is not None}
    if not sizes:
        raise ValueError("the batch has no column: there is nothing to pad")
    if len(set(sizes.values())) > 1:
        raise ValueError(f"the batch's columns disagree about its size: {sizes}")
    return next(iter(sizes.values()))


def real_rows(metadata: Mapping[str, Any], n: int) -> list[bool]:
    """Which of the ``n`` rows are real: ``metadata["is_padding"]`` when present, else
    all but SkyRL's trailing ``metadata["pad_size"]`` rows.

    Raises:
        ValueError: a per-row metadata list is not ``n`` long, or ``pad_size`` is not an
            int in ``[0, n]``.
        TypeError: an ``is_padding`` entry is not a bool.
    """
    for key in PER_ROW_METADATA:
        value = metadata.get(key)
        if value is not None and len(value) != n:
            raise ValueError(f"batch.metadata[{key!r}] has {len(value)} entries, expected one per row ({n})")
    flags = metadata.get("is_padding")
    if flags is not None:
        bad = [i for i, f in enumerate(flags) if not isinstance(f, bool)]
        if bad:
            raise TypeError(f"batch.metadata['is_padding'][{bad[0]}] must be a bool, found {flags[bad[0]]!r}")
        return [not f for f in flags]
    pad = metadata.get("pad_size", 0)
    pad = check_int("batch.metadata['pad_size']", pad, maximum=n)
    return [True] * (n - pad) + [False] * pad


def first_real(real: Sequence[bool], n: int) -> int:
    """The index of the first real row of ``n``.

    Raises:
        ValueError: no rows, or none real (`trajschema.dropin.real_and_padding`).
    """
    return real_and_padding([not r for r in real[:n]])[0][0]


def _no_padding(batch: Any, metadata: dict[str, Any], real: list[bool]) -> Any:
    if batch.metadata is None:
        batch.metadata = metadata
    batch.metadata["pad_size"] = 0
    batch.metadata["is_padding"] = [not r for r in real]
    return batch


# -- the schema, the layout and the ids ------------------------------------------------


def sliced_layout(layout: Layout | str = "skyrl") -> Layout:
    """``layout`` with every block ``length: fixed``: for a slice of a batch (a SkyRL
    mini- or micro-batch), whose widths are the whole batch's, not its own rows' maximum."""
    return _sliced(as_layout(layout, argument="sliced_layout(layout)"))


def staged_layout(metadata: Mapping[str, Any], layout: Layout | str = "skyrl") -> Layout:
    """`sliced_layout`, without the uids where the batch holds none.

    ``RayPPOTrainer.train`` removes ``metadata["uids"]`` after the advantage step, before
    ``MeshDispatch.stage_chunks`` pads the mini-batches: the groups are used up by then, and
    SkyRL's own ``pad_training_input_batch`` adds uids only to a batch that has them.
    """
    return _uid_free(sliced_layout(layout)) if "uids" not in metadata else sliced_layout(layout)


def checked_with(batch: Any) -> tuple[Schema, Layout]:
    """The schema and layout the step audit checks a SkyRL batch with (a staged mini-batch, or the
    trainer's batch): ``install(schema=)``, else the one `choose_batch_schema` picks for its first
    row, in its `staged_layout`."""
    layout = staged_layout(_meta(batch))
    return settings.get("schema") or choose_batch_schema(batch, 0, layout=layout), layout


@functools.lru_cache(maxsize=16)
def _uid_free(layout: Layout) -> Layout:
    return dataclasses.replace(layout, fields={**layout.fields, "uid": FieldEntry(held="absent")})


def choose_batch_schema(batch: Any, row: int = 0, *, layout: Layout | str = "skyrl") -> Schema:
    """The packaged schema that reads row ``row`` of a SkyRL batch best.

    Of the schemas on the search path that read the row clean in ``layout`` (at depth
    ``shapes``), the one declaring most of the fields the row holds wins (``moe_routed``
    for a batch with ``rollout_expert_indices``, ``vlm_mrope`` for one with
    ``pixel_values``); a tie goes to the schema declaring fewer fields (the tightest),
    then by name.

    The choice is kept per batch signature (each column's class, dtype, rank and trailing
    sizes, the layout and the schema search path with its directories' modification
    times), so a trainer padding batch after batch of one shape pays for it once; the
    schema is loaded again by name, so an edited file is read again.

    Raises:
        SchemaError: no schema reads the row (with the violations of the closest one).
    """
    key = _signature(batch, layout)
    name = _CHOSEN.get(key) if key is not None else None
    if name is not None:
        return load_schema(name)
    chosen = _choose(batch, row, layout)
    if key is not None:
        if len(_CHOSEN) >= _CHOSEN_MAX:
            _CHOSEN.pop(next(iter(_CHOSEN)))
        _CHOSEN[key] = chosen.name
    return chosen


#: Batch signature -> the name of the schema chosen for it (oldest first, at most `_CHOSEN_MAX`).
_CHOSEN: dict[tuple[Any, ...], str] = {}
_CHOSEN_MAX = 64


def _signature(batch: Any, layout: Layout | str) -> tuple[Any, ...] | None:
    """What the choice of schema depends on, or ``None`` where it cannot be read cheaply."""
    if not isinstance(batch, Mapping):
        return None
    columns: list[tuple[Any, ...]] = []
    for k in sorted(batch, key=str):
        v = batch[k]
        if isinstance(v, torch.Tensor):
            columns.append((k, "tensor", v.dtype, v.dim(), tuple(v.shape[2:]), v.is_nested))
        elif isinstance(v, Sequence) and not isinstance(v, (str, bytes)) and v and isinstance(v[0], torch.Tensor):
            columns.append((k, type(v).__name__, v[0].dtype, v[0].dim(), tuple(v[0].shape[1:])))
        else:
            columns.append((k, type(v).__name__))
    where = layout if isinstance(layout, str) else (layout.name, layout.source, layout.pad_token_id)
    per_row = tuple(k for k in PER_ROW_METADATA if k in _meta(batch))
    return (where, tuple(columns), per_row, _search_stamp())


def _search_stamp() -> tuple[Any, ...]:
    """The schema search path and each directory's modification time (a file added or removed changes it)."""
    out: list[tuple[str, int | None]] = []
    for d in schema_search_path():
        try:
            out.append((str(d), os.stat(d).st_mtime_ns))
        except OSError:
            out.append((str(d), None))
    return tuple(out)


def _choose(batch: Any, row: int, layout: Layout | str) -> Schema:
    one = _row_batch(batch, row)
    layout = sliced_layout(layout)  # one row of a batch keeps the batch's widths
    best: tuple[int, int, str] | None = None
    chosen: Schema | None = None
    closest: tuple[int, Schema, list[Any]] | None = None
    for name in schema_names():
        schema = load_schema(name)
        checked = check_dense(schema.plan, one, layout, depth="shapes", extract=True, rows=True)
        found = checked.violations
        if found or not isinstance(checked.jagged, list):
            if closest is None or len(found) < closest[0]:
                closest = (len(found), schema, found)
            continue
        held = len(set(checked.jagged[0]) & set(schema.fields))
        score = (-held, len(schema.fields), name)
        if best is None or score < best:
            best, chosen = score, schema
    if chosen is None:
        if closest is None:
            raise SchemaError([], schema_name="(no schema on the search path)")
        raise SchemaError(closest[2], schema_name=closest[1].name)
    return chosen


def _row_batch(batch: Any, row: int) -> Any:
    """Row ``row`` of ``batch`` as a one-row dense batch (a plain dict with ``metadata``)."""
    view, _ = read_dense(_row_free(batch))
    return one_row(view, row, PER_ROW_METADATA)


def _meta(batch: Any) -> dict[str, Any]:
    return getattr(batch, "metadata", None) or {}


def _ids(batch: Any, first: int, eos: int | None, pad: int | None) -> tuple[int, int]:
    trainer = token_ids.get() or {}
    for source in (settings, trainer):
        eos = eos if eos is not None else source.get("eos_token_id")
        pad = pad if pad is not None else source.get("pad_token_id")
    seqs = batch.get("sequences")
    if not isinstance(seqs, torch.Tensor) or seqs.dim() != 2:
        found = "missing" if seqs is None else f"{type(seqs).__name__} of shape {tuple(getattr(seqs, 'shape', ()))}"
        raise TypeError(f"batch['sequences'] must be a (B, S) tensor, found {found}")
    if eos is None:
        if seqs.shape[1] == 0 or seqs.is_meta:
            raise ValueError("no EOS id: pass eos_token_id= (the batch has no token to read it from)")
        eos = int(seqs[first, -1])
    if pad is None:
        pad = _masked_token(seqs, batch.get("attention_mask"), first)
        pad = eos if pad is None else pad
    return check_int("eos_token_id", eos, minimum=0), check_int("pad_token_id", pad, minimum=0)


def _masked_token(seqs: torch.Tensor, mask: Any, first: int) -> int | None:
    """A token under ``mask == 0`` (the pad id): in row ``first`` if it has one, else the first row that does."""
    if not isinstance(mask, torch.Tensor) or mask.shape != seqs.shape or seqs.is_meta or mask.is_meta:
        return None
    row = first
    if not bool((mask[first] == 0).any()):
        rows = torch.nonzero((mask == 0).any(1)).flatten()
        if not rows.numel():
            return None
        row = int(rows[0])
    col = int(torch.nonzero(mask[row] == 0).flatten()[0])
    return int(seqs[row, col])


# -- building the rows -------------------------------------------------------------------


def padding_rows(
    batch: Any,
    count: int,
    first: int,
    *,
    layout: Layout | str,
    schema: Schema | None = None,
    eos_token_id: int | None = None,
    pad_token_id: int | None = None,
    check: bool = True,
) -> dict[str, Any]:
    """``count`` padding rows for ``batch`` (whose first real row is ``first``): every key
    of it, ``None`` kept, ready to join. Schema, ids and ``check`` as `pad_training_input_batch` says.

    Raises:
        SchemaError: ``batch`` breaks the schema or the layout.
    """
    if is_sft_batch(batch):
        return sft_padding_rows(batch, count, first, eos_token_id=eos_token_id, pad_token_id=pad_token_id)
    chosen = schema if schema is not None else settings.get("schema")
    chosen = chosen if chosen is not None else choose_batch_schema(batch, first, layout=layout)
    if not isinstance(chosen, Schema):
        raise TypeError(f"schema must be a trajschema.Schema, found {type(chosen).__name__}")
    eos, pad = _ids(batch, first, eos_token_id, pad_token_id)
    like = _row_free(batch)
    rows = chosen.dense_padding(count, layout=layout, like=like, eos_token_id=eos, pad_token_id=pad, check=check)
    return _every_key(batch, rows, count)


def _every_key(batch: Any, rows: Mapping[str, Any], count: int) -> dict[str, Any]:
    """``rows`` for every key of ``batch`` in its dtypes: zeros (empty list entries) where ``rows`` has none."""
    out: dict[str, Any] = {}
    for key, col in batch.items():
        if col is None:
            out[key] = None
        elif key in rows and isinstance(col, torch.Tensor):
            out[key] = rows[key].to(dtype=col.dtype)
        elif key in rows:
            out[key] = [t.to(dtype=col[0].dtype) for t in rows[key]]
        elif isinstance(col, torch.Tensor):  # a column no schema field gives: zeros on padding rows
            out[key] = col.new_zeros((count, *col.shape[1:]))
        else:
            out[key] = [col[0].new_zeros((0, *col[0].shape[1:])) for _ in range(count)]
    return out


def is_sft_batch(batch: Mapping[str, Any]) -> bool:
    """Whether ``batch`` is SkyRL's SFT batch (``collate_sft_batch``: ``sequences``,
    ``attention_mask``, ``loss_mask``, perhaps images; no ``response_mask``, rewards or uids),
    which no rollout schema describes."""
    return batch.get("response_mask") is None and batch.get("loss_mask") is not None and "uids" not in _meta(batch)


def sft_padding_rows(
    batch: Any, count: int, first: int, *, eos_token_id: int | None = None, pad_token_id: int | None = None
) -> dict[str, Any]:
    """``count`` padding rows for SkyRL's SFT batch: each one EOS token at the right end (the
    only 1 of its ``attention_mask``, so no attention row is all masked), pad ids before it,
    a zero ``loss_mask``, zeros in any other tensor column and no images (an empty
    ``pixel_values`` / ``image_grid_thw`` entry), where SkyRL clones row 0, images included.

    Raises:
        TypeError, ValueError: ``sequences``, ``attention_mask`` or ``loss_mask`` is not a
            ``(B, T)`` tensor, the masks are not 0/1 or shaped wrong.
    """
    seqs, mask, loss = batch.get("sequences"), batch.get("attention_mask"), batch.get("loss_mask")
    for key, col in (("sequences", seqs), ("attention_mask", mask), ("loss_mask", loss)):
        if not isinstance(col, torch.Tensor) or col.dim() != 2 or col.is_meta:
            found = "missing" if col is None else f"{type(col).__name__} {tuple(getattr(col, 'shape', ()))}"
            raise TypeError(f"SFT batch[{key!r}] must be a (B, T) tensor with values, found {found}")
    assert isinstance(seqs, torch.Tensor) and isinstance(mask, torch.Tensor) and isinstance(loss, torch.Tensor)
    if mask.shape != seqs.shape or loss.shape[1] > seqs.shape[1] or seqs.shape[1] == 0:
        raise ValueError(
            f"SFT batch: attention_mask {tuple(mask.shape)} must match sequences {tuple(seqs.shape)} "
            f"(at least one column), and loss_mask {tuple(loss.shape)} be no wider"
        )
    for key, col in (("attention_mask", mask), ("loss_mask", loss)):
        if bool(((col != 0) & (col != 1)).any()):
            raise ValueError(f"SFT batch[{key!r}] must hold only 0 and 1")
    eos, pad = _ids(batch, first, eos_token_id, pad_token_id)
    rows = {
        "sequences": seqs.new_full((count, seqs.shape[1]), pad),
        "attention_mask": mask.new_zeros((count, mask.shape[1])),
        "loss_mask": loss.new_zeros((count, loss.shape[1])),
    }
    rows["sequences"][:, -1] = eos
    rows["attention_mask"][:, -1] = 1
    return _every_key(batch, rows, count)


def _row_free(batch: Any) -> Any:
    """``batch`` as the dense check reads it: its tensors and lists, its metadata."""
    cols = {k: (v if isinstance(v, torch.Tensor) else list(v.tensors)) for k, v in batch.items() if v is not None}
    return DenseBatch(cols, metadata=dict(_meta(batch)))


def _joined(batch: Any, rows: Mapping[str, Any], count: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, col in batch.items():
        if col is None:
            out[key] = None
        elif isinstance(col, torch.Tensor):
            out[key] = torch.cat([col, rows[key]], dim=0)
        else:  # a SkyRL TensorList: the same class, the padding rows' (empty) entries appended
            out[key] = type(col)(list(col.tensors) + list(rows[key]))
    return out


def padded_metadata(metadata: Mapping[str, Any], n: int, count: int) -> dict[str, Any]:
    """SkyRL's metadata update for ``count`` padding rows after ``n``: deep copies, the
    per-row lists extended (a fresh uid per padding row), ``is_padding``, ``pad_size``."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if key == "uids":
            stem = uuid.uuid4().hex
            out[key] = list(value) + [f"pad{stem}_{i}" for i in range(count)]
        elif key == "is_last_step":
            out[key] = list(value) + [True] * count
        elif key == "is_padding":
            continue
        else:
            out[key] = copy.deepcopy(value)
    out["is_padding"] = [not r for r in real_rows(metadata, n)] + [True] * count
    out["pad_size"] = count
    return out


def rows_of(batch: Any, start: int, end: int) -> Any:
    """Rows ``start:end`` of a SkyRL batch (SkyRL's own slice), with the per-row metadata
    lists sliced to them (SkyRL's slice keeps the whole batch's)."""
    part = batch.slice(start, end)
    meta = _meta(batch)
    n = len(batch)
    part.metadata = {
        k: (list(v[start:end]) if k in PER_ROW_METADATA and v is not None and len(v) == n else v)
        for k, v in meta.items()
    }
    return part
