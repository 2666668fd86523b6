"""trajschema for SkyRL 0.3.0: a drop-in ``pad_training_input_batch`` and ``install()``.

Importable without SkyRL: SkyRL is imported only by [`install`][trajschema.skyrl.install], and
each name is imported when first read. The two-line switch::

    import trajschema.skyrl
    trajschema.skyrl.install()   # in the driver (and the workers), before the trainer runs

See ``docs/skyrl.md`` for what changes, and what cannot be checked on CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.skyrl.pad import (
        choose_batch_schema,
        is_sft_batch,
        pad_training_input_batch,
        real_rows,
        sft_padding_rows,
        sliced_layout,
    )
    from trajschema.skyrl.patch import SKYRL_SIGNATURES, SUPPORTED_SKYRL_VERSIONS, install, installed, uninstall

__all__ = [
    "SKYRL_SIGNATURES",
    "SUPPORTED_SKYRL_VERSIONS",
    "choose_batch_schema",
    "install",
    "installed",
    "is_sft_batch",
    "pad_training_input_batch",
    "real_rows",
    "sft_padding_rows",
    "sliced_layout",
    "uninstall",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.skyrl.pad": (
        "choose_batch_schema",
        "is_sft_batch",
        "pad_training_input_batch",
        "real_rows",
        "sft_padding_rows",
        "sliced_layout",
    ),
    "trajschema.skyrl.patch": ("SKYRL_SIGNATURES", "SUPPORTED_SKYRL_VERSIONS", "install", "installed", "uninstall"),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
