"""Runtime: the `@checked` decorator and its check mode, and the `Patches` the trainer drop-ins install through.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.runtime.decorator import check_mode, checked, checks, set_check_mode
from trajschema.runtime.patches import Patches

__all__ = ["Patches", "check_mode", "checked", "checks", "set_check_mode"]
