"""trajschema for TRL 1.16.0's GRPO trainer: the ``trl_grpo`` layout fitted to a trainer, and ``install()``.

Importable without TRL: TRL is imported only by [`install`][trajschema.trl.install], and
each name is imported when first read. The two-line switch::

    import trajschema.trl
    trajschema.trl.install()   # before trainer.train()

See ``docs/trl.md`` for what changes, and what cannot be checked on CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.trl.check import CHECK_METRICS, TRL_LAYOUT, check_metrics, grpo_layout
    from trajschema.trl.patch import SUPPORTED_TRL_VERSIONS, TRL_SIGNATURES, install, installed, uninstall

__all__ = [
    "CHECK_METRICS",
    "SUPPORTED_TRL_VERSIONS",
    "TRL_LAYOUT",
    "TRL_SIGNATURES",
    "check_metrics",
    "grpo_layout",
    "install",
    "installed",
    "uninstall",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.trl.check": ("CHECK_METRICS", "TRL_LAYOUT", "check_metrics", "grpo_layout"),
    "trajschema.trl.patch": ("SUPPORTED_TRL_VERSIONS", "TRL_SIGNATURES", "install", "installed", "uninstall"),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
