"""The trainer base: what every drop-in (``trajschema.verl``, ``.skyrl``, ``.openrlhf``, ``.trl``) stands on.

`DropIn` holds a trainer's version gate, the signature of each attribute a drop-in
replaces, the modules that bind a replaced function by name, and install / uninstall /
installed over `Patches`. `real_and_padding`, `zeros_on_padding` and `padding_metrics` are
the real-rows step every drop-in runs and the one definition of the ``padding/*`` metrics.
Adding a trainer is then a `DropIn`, its replacements and the layout of its batches.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.skyrl`); this
front lists what the other rooms take from this one.
"""

from trajschema.dropin.base import DropIn, Target, parameters
from trajschema.dropin.patches import Patches
from trajschema.dropin.rows import PADDING_METRICS, padding_metrics, real_and_padding, zeros_on_padding

__all__ = [
    "PADDING_METRICS",
    "DropIn",
    "Patches",
    "Target",
    "padding_metrics",
    "parameters",
    "real_and_padding",
    "zeros_on_padding",
]
