"""The audit of one training step: figures that show whether its padding stayed inert.

A drop-in (``trajschema.verl.install(audit=...)``, ``trajschema.skyrl.install(audit=...)``)
calls `audit_step` once per step, on the step's own batch and its ``is_padding`` tags, and
adds the figures to the step's metrics. Each figure that must be 0 names one way padding
has leaked into training in the field (verl #7771, rllm #508, Miles #2796, TRL #6818):

========================================== =================================================
``trajschema/padding_rows``                 padding rows in the batch
``trajschema/padding_tokens``               their tokens (the token mask over them)
``trajschema/padding_loss_tokens``          padding tokens some loss mask counts: must be 0
``trajschema/padding_advantage_rows``       padding rows with a nonzero advantage: must be 0
``trajschema/padding_expert_load``          the hottest expert's padding slots over the even
                                            share ``ceil(tokens * topk / experts)``, worst
                                            layer: at most 1
``trajschema/seq_mean_scale_min``           the worst mini-batch's seq-mean loss scale
                                            (real rows / rows; 1 where the loss is exact)
``trajschema/violations``                   schema violations of the step's batch: must be 0,
                                            and ``trajschema/violations/<code>`` per code
========================================== =================================================

``audit="strict"`` raises `PaddingAuditError` instead of reporting a broken figure. The
audit reads the padding rows only (and the violations the caller found), so its cost does
not grow with the real rows.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import torch

from trajschema.core import FixedDim, Violation
from trajschema.padding import largest_id

if TYPE_CHECKING:
    from trajschema.schema import Schema

__all__ = [
    "AUDIT_MODES",
    "AuditMode",
    "PaddingAuditError",
    "StepAudit",
    "audit_mode",
    "audit_step",
    "combine_audits",
    "expert_count",
]

AuditMode = Literal["off", "report", "strict"]

#: What ``install(audit=...)`` takes: ``True`` (report, the default), ``False`` (off) or ``"strict"``.
AUDIT_MODES: dict[Any, AuditMode] = {True: "report", False: "off", "strict": "strict"}

_PREFIX = "trajschema/"


class PaddingAuditError(RuntimeError):
    """A step's padding did not stay inert (``install(audit="strict")``); ``figures`` has them all."""

    __module__ = "trajschema"

    def __init__(self, faults: Sequence[str], figures: Mapping[str, float]) -> None:
        self.faults = tuple(faults)
        self.figures = dict(figures)
        super().__init__("padding was not inert in this step: " + "; ".join(self.faults))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.faults, self.figures))


@dataclasses.dataclass(frozen=True)
class StepAudit:
    """The figures of one step (`audit_step`), and what broke among them (empty when inert)."""

    figures: dict[str, float]
    faults: tuple[str, ...]

    def raise_if_broken(self) -> None:
        """Raise `PaddingAuditError` naming every broken figure, if any is."""
        if self.faults:
            raise PaddingAuditError(self.faults, self.figures)


def audit_mode(audit: Any) -> AuditMode:
    """``install(audit=...)`` as a mode; a typed error for anything but ``True``, ``False`` or ``"strict"``."""
    if isinstance(audit, bool) or audit == "strict":
        return AUDIT_MODES[audit]
    raise ValueError(f"audit must be True, False or 'strict', found {audit!r}")


def audit_step(
    padding: Sequence[bool] | torch.Tensor,
    *,
    token_mask: torch.Tensor | None = None,
    loss_masks: Mapping[str, torch.Tensor] | None = None,
    advantages: Mapping[str, torch.Tensor] | None = None,
    routes: torch.Tensor | None = None,
    experts: int | None = None,
    seq_mean_scales: Sequence[float] | None = None,
    violations: Sequence[Violation] | None = None,
) -> StepAudit:
    """The step's figures (see the module), from its per-row ``padding`` tags and its columns.

    Args:
        padding: one bool per row of the batch (its ``is_padding`` tags).
        token_mask: ``(B, T)``, 1 on each row's real tokens (``attention_mask``).
        loss_masks: name -> ``(B, ...)`` mask whose nonzero entries a loss counts
            (``loss_mask``, ``response_mask``).
        advantages: name -> ``(B, ...)`` tensor of per-row (or per-token) advantages.
        routes: ``(B, T, ..., topk)`` routed experts, read on padding rows where
            ``token_mask`` is 1; ``experts`` is the count they spread over.
        seq_mean_scales: one seq-mean loss scale per mini-batch (``None``: no seq-mean loss).
        violations: what a schema check of the step's batch found.
    """
    rows = _padding_rows(padding)
    figures: dict[str, float] = {"padding_rows": float(len(rows))}
    figures["padding_tokens"] = _count(token_mask, rows) if token_mask is not None else 0.0
    figures["padding_loss_tokens"] = sum(_count(m, rows) for m in (loss_masks or {}).values())
    figures["padding_advantage_rows"] = float(sum(_nonzero_rows(a, rows) for a in (advantages or {}).values()))
    figures["padding_expert_load"] = _expert_load(routes, token_mask, rows, experts)
    figures["seq_mean_scale_min"] = min(seq_mean_scales, default=1.0) if seq_mean_scales else 1.0
    codes: Counter[str] = Counter(str(v.code) for v in violations or ())
    figures["violations"] = float(sum(codes.values()))
    figures.update({f"violations/{code}": float(n) for code, n in sorted(codes.items())})
    out = {_PREFIX + k: v for k, v in figures.items()}
    return StepAudit(out, _faults(figures, codes))


def combine_audits(audits: Sequence[StepAudit]) -> StepAudit:
    """One step's figures from the audits of its parts (the padding calls of its mini-batches):
    counts add up, the expert load is the worst part's, the seq-mean scale the smallest.

    Each part's expert load is measured against its own even share: one padding call spreads
    over its own tokens, so two calls each within their share may together exceed the whole's.
    """
    if not audits:
        return audit_step([])
    figures: dict[str, float] = {}
    for found in audits:
        for k, v in found.figures.items():
            if k == _PREFIX + "padding_expert_load":
                figures[k] = max(figures.get(k, 0.0), v)
            elif k == _PREFIX + "seq_mean_scale_min":
                figures[k] = min(figures.get(k, 1.0), v)
            else:
                figures[k] = figures.get(k, 0.0) + v
    plain = {k.removeprefix(_PREFIX): v for k, v in figures.items()}
    codes: Counter[str] = Counter(
        {k.removeprefix("violations/"): int(v) for k, v in plain.items() if k.startswith("violations/")}
    )
    return StepAudit(figures, _faults(plain, codes))


def expert_count(schema: Schema | None, routes: torch.Tensor | None) -> int | None:
    """The number of experts padding routes spread over: the schema's pinned ``experts``, else
    ``routes``' largest id + 1 (`trajschema.padding.largest_id`: any integer dtype, uint16 too);
    ``None`` without routes or ids to read."""
    if routes is None:
        return None
    pinned = schema.dims.get("experts") if schema is not None else None
    if isinstance(pinned, FixedDim):
        return pinned.size
    found = largest_id(routes)
    return None if found is None or found < 0 else found + 1


def _padding_rows(padding: Sequence[bool] | torch.Tensor) -> torch.Tensor:
    if isinstance(padding, torch.Tensor):
        flags = padding.detach().to("cpu", torch.bool).reshape(-1)
    else:
        flags = torch.tensor([bool(p) for p in padding], dtype=torch.bool)
    return flags.nonzero().reshape(-1)


def _on_rows(t: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``t``'s padding rows (the index on ``t``'s own device; nothing moves but the result's size)."""
    return t.detach()[rows.to(t.device)]


def _count(mask: torch.Tensor, rows: torch.Tensor) -> float:
    """The nonzero entries of ``mask`` on the padding rows."""
    if not len(rows):
        return 0.0
    return float(torch.count_nonzero(_on_rows(mask, rows)))


def _nonzero_rows(t: torch.Tensor, rows: torch.Tensor) -> int:
    if not len(rows):
        return 0
    picked = _on_rows(t, rows).reshape(len(rows), -1)
    return int((picked != 0).any(dim=1).sum())


def _expert_load(
    routes: torch.Tensor | None, mask: torch.Tensor | None, rows: torch.Tensor, experts: int | None
) -> float:
    """The hottest expert's share of the padding slots over the even share, worst layer (0 without routes)."""
    if routes is None or not len(rows) or not experts:
        return 0.0
    picked = _on_rows(routes, rows).to(torch.int64)  # the padding rows only; uint16 cannot be masked
    if mask is not None:
        picked = picked[_on_rows(mask, rows).bool()]  # (tokens, ..., topk)
    else:
        picked = picked.reshape(-1, *picked.shape[2:])
    if not picked.numel():
        return 0.0
    tokens, topk = picked.shape[0], picked.shape[-1]
    ids = picked.reshape(tokens, -1, topk).transpose(0, 1).reshape(-1, tokens * topk)  # (layers, slots)
    if int(ids.min()) < 0 or int(ids.max()) >= experts:
        return math.inf  # an id outside 0 .. experts - 1 is no expert the padding may reach
    counts = torch.zeros(ids.shape[0], experts, dtype=torch.int64).scatter_add_(1, ids, torch.ones_like(ids))
    return float(counts.max()) / math.ceil(tokens * topk / experts)


#: The figures that must be 0 (strict raises otherwise), with what a nonzero one means.
_ZERO = {
    "padding_loss_tokens": "padding tokens counted in a loss mask",
    "padding_advantage_rows": "padding rows with a nonzero advantage",
    "violations": "schema violations in the step's batch",
}


def _faults(figures: Mapping[str, float], codes: Counter[str]) -> tuple[str, ...]:
    out = []
    for k, why in _ZERO.items():
        if figures[k]:
            by_code = ": " + ", ".join(f"{c} {n}" for c, n in sorted(codes.items())) if k == "violations" else ""
            out.append(f"{_PREFIX}{k} = {figures[k]:g} ({why}{by_code})")
    if figures["padding_expert_load"] > 1:
        out.append(
            f"{_PREFIX}padding_expert_load = {figures['padding_expert_load']:g} (an expert takes more padding "
            "slots than its even share, or a padding id is no expert)"
        )
    return tuple(out)
