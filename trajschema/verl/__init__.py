"""trajschema for verl 0.9.1's TransferQueue trainer: a drop-in padding, the batch multiple, and ``install()``.

Importable without verl: verl is imported only by [`install`][trajschema.verl.install], and
each name is imported when first read (`padding_dims`, which `trajschema plan` uses, needs
no torch). The two-line switch::

    import trajschema.verl
    trajschema.verl.install()   # in the driver, before trainer.fit()

See ``docs/verl.md`` for what changes, and what cannot be checked on CPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.verl.config import (
        CP_LAYOUTS,
        VerlConfigError,
        padding_dims,
        required_batch_multiple,
        sequence_alignment,
    )
    from trajschema.verl.loss import LOSS_AGG_MODES, agg_loss_real
    from trajschema.verl.patch import SUPPORTED_VERL_VERSIONS, VERL_SIGNATURES, install, installed, uninstall
    from trajschema.verl.upsample import non_padding_mask, upsample_batch_to_divisible_size

__all__ = [
    "CP_LAYOUTS",
    "LOSS_AGG_MODES",
    "SUPPORTED_VERL_VERSIONS",
    "VERL_SIGNATURES",
    "VerlConfigError",
    "agg_loss_real",
    "install",
    "installed",
    "non_padding_mask",
    "padding_dims",
    "required_batch_multiple",
    "sequence_alignment",
    "uninstall",
    "upsample_batch_to_divisible_size",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.verl.config": (
        "CP_LAYOUTS",
        "VerlConfigError",
        "padding_dims",
        "required_batch_multiple",
        "sequence_alignment",
    ),
    "trajschema.verl.loss": ("LOSS_AGG_MODES", "agg_loss_real"),
    "trajschema.verl.patch": ("SUPPORTED_VERL_VERSIONS", "VERL_SIGNATURES", "install", "installed", "uninstall"),
    "trajschema.verl.upsample": ("non_padding_mask", "upsample_batch_to_divisible_size"),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
