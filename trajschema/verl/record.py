"""Recording the verl drop-in's steps (``install(record=DIR, keep=N, every=K)``): a step's whole batch as a bundle.

Under ``install(record=DIR)``, ``_compute_metrics`` hands each step to `record_step` once
the step audit (`trajschema.verl.audit`) has its figures, before ``audit="strict"`` raises.
A step whose audit found a fault, or with ``every=K`` every K-th ``global_steps``, is read
whole from TransferQueue (one ``kv_batch_get`` of every row, real and padding, every
field, bounded like every read of the drop-in) and written with the ``is_padding`` tags
TransferQueue keeps beside each sample, jagged as TransferQueue holds it, by the
install's [`Recorder`][trajschema.bundle.Recorder] (``DIR/step-00000012``, the last
``keep`` kept). Its schema is the one the step's padding was made with (pinned to the
model's config when verl's config names one), or, in a step without padding, the schema
of its first real row. A clean step that is not due reads nothing. Recording never
breaks the step: what fails is logged (logger ``trajschema.bundle``) and the step goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trajschema.bundle import broken_reason
from trajschema.contract import is_padding
from trajschema.core import is_int
from trajschema.load import load_schema, schema_for_sample, schema_names
from trajschema.tq import bounded

if TYPE_CHECKING:
    from trajschema.bundle import Recorder
    from trajschema.runtime import StepAudit
    from trajschema.schema import Schema

__all__ = ["record_step"]

_LOG = logging.getLogger("trajschema.bundle")


def record_step(
    recorder: Recorder,
    client: Any,
    batch: Any,
    found: StepAudit,
    *,
    step: Any,
    schema: Schema | None,
    timeout_s: float | None,
) -> Path | None:
    """Write the step's whole ``batch`` (a ``KVBatchMeta``) as a bundle when ``recorder`` says it is due.

    Args:
        recorder: the install's recorder.
        client: the TransferQueue client (verl's ``tq``).
        batch: the step's batch, as ``_compute_metrics`` gets it.
        found: the step's audit: its faults make the step broken.
        step: verl's ``global_steps`` (the bundle's number; anything but an int >= 0 is
            read as no step number, and the recorder counts instead).
        schema: the schema the step's padding was made with (``None``: no padding).
        timeout_s: how long the read may take.

    Returns:
        The bundle's path, or ``None``: not due, or it failed (logged).
    """
    at = step if is_int(step) and step >= 0 else None
    broken = broken_reason(found.faults)
    if recorder.reason(at, broken) is None:
        return None  # not due: nothing is read
    try:
        rows = bounded(
            lambda: client.kv_batch_get(keys=list(batch.keys), partition_id=batch.partition_id, select_fields=None),
            timeout_s,
            "kv_batch_get",
        )
        if rows.batch_size[0] != len(batch.keys):
            raise ValueError(f"kv_batch_get returned {rows.batch_size[0]} of the step's {len(batch.keys)} rows")
        chosen = schema if schema is not None else _first_real_schema(rows, batch.tags)
    except Exception:
        _LOG.warning(
            "trajschema.verl: reading step %s to record it in %s failed", step, recorder.directory, exc_info=True
        )
        return None
    return recorder.record(rows, schema=chosen, layout=None, tags=list(batch.tags), step=at, broken=broken)


def _first_real_schema(rows: Any, tags: Sequence[Any]) -> Schema:
    """The schema of the batch's first real row, for a step without padding: chosen as the padding
    chooses one, from the fields some schema declares (not the ``advantages``, ``returns``, ...
    that verl's steps added after the padding, which no schema declares)."""
    declared = {f for name in schema_names() for f in load_schema(name).fields}
    first = next(i for i, tag in enumerate(tags) if not is_padding(tag))
    sample = {
        k: col.unbind()[first] if isinstance(col, torch.Tensor) else col.tolist()[first]
        for k, col in rows.items()
        if k in declared
    }
    return schema_for_sample(sample, tags[first])
