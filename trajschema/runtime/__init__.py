"""Runtime: the `@checked` decorator and its check mode, the schedule and figures of a drop-in's
batch check (`due_mode`, `check_metrics`), and the audit of a training step's padding (`audit_step`).

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.runtime.audit import (
    AUDIT_MODES,
    AuditMode,
    PaddingAuditError,
    StepAudit,
    audit_mode,
    audit_step,
    combine_audits,
    expert_count,
)
from trajschema.runtime.checking import CHECK_METRICS, check_metrics, due_mode
from trajschema.runtime.decorator import check_mode, checked, checks, set_check_mode

__all__ = [
    "AUDIT_MODES",
    "CHECK_METRICS",
    "AuditMode",
    "PaddingAuditError",
    "StepAudit",
    "audit_mode",
    "audit_step",
    "check_metrics",
    "check_mode",
    "checked",
    "checks",
    "combine_audits",
    "due_mode",
    "expert_count",
    "set_check_mode",
]
