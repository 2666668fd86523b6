"""trajschema for OpenRLHF 0.11.2: padding experiences where the rollout is split, and ``install()``.

Importable without OpenRLHF: OpenRLHF is imported only by [`install`][trajschema.openrlhf.install],
and each name is imported when first read. The two-line switch::

    import trajschema.openrlhf
    trajschema.openrlhf.install()   # in the PPO trainer's process, before fit()

See ``docs/openrlhf.md`` for what changes, and what cannot be checked on CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.openrlhf.audit import audit_experiences
    from trajschema.openrlhf.experience import padding_flags
    from trajschema.openrlhf.layout import experience_samples, experience_violations
    from trajschema.openrlhf.pad import pad_multiple, pad_rollout_samples, padding_experiences
    from trajschema.openrlhf.patch import (
        OPENRLHF_SIGNATURES,
        SUPPORTED_OPENRLHF_VERSIONS,
        install,
        installed,
        uninstall,
    )

__all__ = [
    "OPENRLHF_SIGNATURES",
    "SUPPORTED_OPENRLHF_VERSIONS",
    "audit_experiences",
    "experience_samples",
    "experience_violations",
    "install",
    "installed",
    "pad_multiple",
    "pad_rollout_samples",
    "padding_experiences",
    "padding_flags",
    "uninstall",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.openrlhf.audit": ("audit_experiences",),
    "trajschema.openrlhf.layout": ("experience_samples", "experience_violations"),
    "trajschema.openrlhf.experience": ("padding_flags",),
    "trajschema.openrlhf.pad": ("pad_multiple", "pad_rollout_samples", "padding_experiences"),
    "trajschema.openrlhf.patch": (
        "OPENRLHF_SIGNATURES",
        "SUPPORTED_OPENRLHF_VERSIONS",
        "install",
        "installed",
        "uninstall",
    ),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
