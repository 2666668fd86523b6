"""Recording the SkyRL drop-in's steps (``install(record=DIR, keep=N, every=K)``): the batch that broke, as a bundle.

The step audit (`trajschema.skyrl.audit`) audits each part of a training step: every
mini-batch ``stage_chunks`` pads as it is staged, then the trainer's batch. Under
``install(record=DIR)`` the first part whose audit finds a fault is kept (a mini-batch is
copied as it is staged, so what the workers then do to its tensors cannot change it: a
`Part`), and at the end of ``train_critic_and_policy``, before ``audit="strict"`` raises,
`record_step` writes the batch that broke: the trainer's batch when its own padding broke,
else that padded mini-batch. Outside step-wise training SkyRL pads only the mini-batches,
so the trainer's batch holds no padding row and would show nothing; the mini-batch holds
the step's rows it was cut from and the padding rows that broke. A clean step is recorded
with ``every=K`` on every K-th ``global_step``: the trainer's batch. Each is written as a
``TrainingInputBatch`` with the schema and sliced ``skyrl`` layout the audit checks it with
(`trajschema.skyrl.checked_with`; ``is_padding`` in its metadata, so no tags), by the
install's [`Recorder`][trajschema.bundle.Recorder] (``DIR/step-00000012``, the last
``keep`` kept). Recording never breaks the step: what fails is logged (logger
``trajschema.bundle``) and the step goes on.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from trajschema.bundle import broken_reason
from trajschema.core import is_int
from trajschema.runtime import StepAudit
from trajschema.skyrl.pad import checked_with, settings

__all__ = ["Part", "part_of", "record_step"]

_LOG = logging.getLogger("trajschema.bundle")


@dataclasses.dataclass(frozen=True)
class Part:
    """One audited part of a training step: its audit, where it lies in the step, and the batch
    to record if it is the part that broke (``None``: not kept)."""

    audit: StepAudit
    where: str
    batch: Any = None


def part_of(batch: Any, found: StepAudit, where: str, *, kept: Sequence[Part]) -> Part:
    """``batch``'s `Part`, with a copy of ``batch`` when recording is on, its audit found a fault
    and no part of the step is kept yet."""
    keep = found.faults and settings.get("recorder") is not None and not any(p.batch is not None for p in kept)
    return Part(found, where, _snapshot(batch) if keep else None)


def _snapshot(batch: Any) -> Any:
    """A copy of a SkyRL batch: its tensors cloned, its metadata deep-copied (a ``TensorList`` kept as it is)."""
    out = type(batch)({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()})
    out.metadata = copy.deepcopy(batch.metadata)
    return out


def record_step(trainer: Any, data: Any, parts: Sequence[Part], found: StepAudit) -> Path | None:
    """Write the step's broken batch (or, when due, its clean ``data``) as a bundle.

    Args:
        trainer: SkyRL's ``RayPPOTrainer`` (its ``global_step`` numbers the bundle; without
            one, the recorder counts).
        data: the trainer's batch ``train_critic_and_policy`` was given.
        parts: the step's audited parts, the trainer's batch among them.
        found: the step's audit (the parts combined).

    Returns:
        The bundle's path, or ``None``: not recording, not due, or it failed (logged).
    """
    recorder = settings.get("recorder")
    if recorder is None:
        return None
    step = getattr(trainer, "global_step", None)
    step = step if is_int(step) and step >= 0 else None
    batch, broken = _broken_part(data, parts, found)
    if step is not None and recorder.reason(step, broken) is None:
        return None  # not due: not even its schema is chosen
    try:
        schema, layout = checked_with(batch)
    except Exception:
        _LOG.warning(
            "trajschema.skyrl: no schema to record step %s with in %s", step, recorder.directory, exc_info=True
        )
        return None
    return recorder.record(batch, schema=schema, layout=layout, tags=None, step=step, broken=broken)


def _broken_part(data: Any, parts: Sequence[Part], found: StepAudit) -> tuple[Any, str | None]:
    """The batch to record and why: the trainer's batch first, else the first kept part, when broken."""
    kept = sorted((p for p in parts if p.audit.faults and p.batch is not None), key=lambda p: p.batch is not data)
    if kept:
        return kept[0].batch, broken_reason(kept[0].audit.faults, where=kept[0].where)
    return data, broken_reason(found.faults, where="the step")
