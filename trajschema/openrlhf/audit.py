"""The step audit of ``trajschema.openrlhf.install(audit=...)``: what OpenRLHF's experiences show about their padding.

Under ``install()``, ``BasePPOTrainer._compute_rollout_stats`` runs on the step's
experiences once the advantage step has written them, before they go to the actors; it
audits their padding rows there (`audit_experiences`) and adds the ``trajschema/*``
figures to the step's status. A padding row must hold no action token (``action_mask``,
the mask every OpenRLHF loss and token count reads), and zero ``advantages`` and
``returns``. OpenRLHF 0.11.2's ``Experience`` holds no routes, so there is no expert load
to read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trajschema.core import Violation
from trajschema.openrlhf.experience import padding_flags, shown
from trajschema.runtime import StepAudit, audit_step, combine_audits

__all__ = ["MASKS", "OUTPUTS", "audit_experiences"]

#: The mask OpenRLHF's losses and token counts read; padding rows must have none.
MASKS = ("action_mask",)
#: What its advantage step writes; padding rows must hold zeros.
OUTPUTS = ("advantages", "returns")


def audit_experiences(experiences: Sequence[Any], *, violations: Sequence[Violation] | None = None) -> StepAudit:
    """The figures of `trajschema.audit_step` over a step's experiences (their padding rows),
    combined (`trajschema.runtime.combine_audits`) into the step's; ``violations``, what the
    step's rollout check found (``install(mode=)``), count in ``trajschema/violations``.

    Raises:
        TypeError: an experience is no ``Experience``, or a column the audit reads
            (``attention_mask``, ``action_mask``, ``advantages``, ``returns``) is no ``(B, ...)``
            tensor holding its values.
        ValueError: its ``info["is_padding"]`` is not one bool per row (`padding_flags`).
    """
    parts = [audit_step([], violations=violations)] if violations else []
    for exp in experiences:
        flags = padding_flags(exp)
        for name in ("attention_mask", *MASKS, *OUTPUTS):
            _check_column(exp, name, len(flags))
        parts.append(
            audit_step(
                flags,
                token_mask=_tensor(exp, "attention_mask"),
                loss_masks={k: t for k in MASKS if (t := _tensor(exp, k)) is not None},
                advantages={k: t for k in OUTPUTS if (t := _tensor(exp, k)) is not None},
            )
        )
    return combine_audits(parts)


def _check_column(exp: Any, name: str, rows: int) -> None:
    value = getattr(exp, name, None)
    if value is None:
        return
    if (
        not isinstance(value, torch.Tensor)
        or value.is_nested
        or value.is_meta
        or value.layout != torch.strided
        or value.dim() < 1
        or value.shape[0] != rows
    ):
        raise TypeError(
            f"experience.{name} must be a (B, ...) tensor holding its values with one row per sample ({rows}), "
            f"found {shown(value)}"
        )


def _tensor(exp: Any, name: str) -> torch.Tensor | None:
    value = getattr(exp, name, None)
    return value if isinstance(value, torch.Tensor) else None
