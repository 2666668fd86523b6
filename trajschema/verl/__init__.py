"""trajschema for verl 0.9.1's TransferQueue trainer: a drop-in padding, the batch multiple, and ``install()``.

Importable without verl: verl is imported only by [`install`][trajschema.verl.install]. The two-line switch::

    import trajschema.verl
    trajschema.verl.install()   # in the driver, before trainer.fit()

See ``docs/verl.md`` for what changes, and what cannot be checked on CPU.
"""

from __future__ import annotations

from trajschema.verl.config import VerlConfigError, padding_dims, required_batch_multiple
from trajschema.verl.loss import LOSS_AGG_MODES, agg_loss_real
from trajschema.verl.patch import SUPPORTED_VERL_VERSIONS, VERL_SIGNATURES, install, installed, uninstall
from trajschema.verl.upsample import non_padding_mask, upsample_batch_to_divisible_size

__all__ = [
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
    "uninstall",
    "upsample_batch_to_divisible_size",
]
