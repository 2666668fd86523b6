"""The step audit of ``trajschema.skyrl.install(audit=...)``: what SkyRL's batches show about their padding.

SkyRL pads in two places: the trainer's batch (step-wise training; ``convert_to_training_input``)
and each mini-batch ``MeshDispatch.stage_chunks`` stages for the workers. The audit wraps
``RayPPOTrainer.train_critic_and_policy``: while it runs, every mini-batch staged is audited
as it is padded, and at its end the trainer's batch is audited too; the parts are combined
(`trajschema.runtime.combine_audits`) into the step's ``trajschema/*`` metrics. Each part
reads its padding rows: masks (``attention_mask``, ``loss_mask``, ``response_mask``),
``advantages`` and ``returns``, the routes they replay (``rollout_expert_indices``), and a
schema check of those rows in the sliced ``skyrl`` layout; the real rows were checked when
the batch was padded (under ``install(check=True)``, the default). The loss is weighed on
real rows only inside the workers (`trajschema.skyrl.workers`), so no mini-batch's
seq-mean scale departs from 1 and none is reported. Under ``install(record=DIR)`` the part
that broke is written as a bundle before a strict audit raises (`trajschema.skyrl.record`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import torch

from trajschema.core import Violation
from trajschema.runtime import StepAudit, audit_step, combine_audits, expert_count
from trajschema.skyrl.pad import checked_with, real_rows, rows_of, settings
from trajschema.skyrl.record import Part, part_of, record_step

__all__ = ["MASKS", "ROUTES", "collect", "skyrl_step_audit", "train_step_for"]

#: The masks a SkyRL loss counts tokens by; padding rows must have none.
MASKS = ("loss_mask", "response_mask")
#: The per-token outputs of SkyRL's advantage step; padding rows must hold zeros.
OUTPUTS = ("advantages", "returns")
#: SkyRL's routes key.
ROUTES = "rollout_expert_indices"


#: The audited mini-batches staged in the running ``train_critic_and_policy`` (``None`` outside it).
_staged: contextvars.ContextVar[list[Part] | None] = contextvars.ContextVar("trajschema_skyrl_audit", default=None)


def train_step_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``train_critic_and_policy``: SkyRL's own, then the step audit in the trainer's metrics and,
    under ``install(record=)``, the batch that broke as a bundle (`trajschema.skyrl.record`)
    (``install(audit=False)`` leaves SkyRL's own in place instead)."""

    def train_critic_and_policy(self: Any, data: Any) -> Any:
        if settings.get("audit", "report") == "off":
            return original(self, data)
        token = _staged.set([])
        try:
            status = original(self, data)
            own = Part(skyrl_step_audit(data, real_rows(data.metadata or {}, len(data))), "the trainer's batch", data)
            parts = [*(_staged.get() or []), own]
        finally:
            _staged.reset(token)
        found = combine_audits([p.audit for p in parts])
        self.all_metrics.update(found.figures)
        record_step(self, data, parts, found)  # before strict raises: a failing step leaves its bundle
        if settings.get("audit") == "strict":
            found.raise_if_broken()
        return status

    return train_critic_and_policy


def collect(mini: Any, start: int, end: int) -> None:
    """Audit a mini-batch ``stage_chunks`` padded (rows ``start:end`` of the batch it staged),
    when a training step is being audited."""
    staged = _staged.get()
    if staged is not None:
        found = skyrl_step_audit(mini, real_rows(mini.metadata or {}, len(mini)))
        where = f"the mini-batch of rows {start}:{end}, padded to {len(mini)} rows"
        staged.append(part_of(mini, found, where, kept=staged))


def skyrl_step_audit(batch: Any, real: list[bool]) -> StepAudit:
    """The figures of `trajschema.audit_step` for one SkyRL step's padded batch."""
    tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
    routes = tensors.get(ROUTES)
    return audit_step(
        [not r for r in real],
        token_mask=tensors.get("attention_mask"),
        loss_masks={k: tensors[k] for k in MASKS if k in tensors},
        advantages={k: tensors[k] for k in OUTPUTS if k in tensors},
        routes=routes,
        experts=expert_count(settings.get("schema"), routes),
        violations=_padding_violations(batch, real),
    )


def _padding_violations(batch: Any, real: list[bool]) -> list[Violation]:
    """The padding rows, checked against the batch's schema at depth ``values`` (they come last)."""
    n = sum(real)
    if n == len(real) or not all(real[:n]):
        return []  # no padding, or padding that SkyRL's own steps placed elsewhere: not trajschema's rows
    schema, layout = checked_with(batch)
    return schema.batch_violations(rows_of(batch, n, len(real)), layout=layout, depth="values")
