"""Runtime checks: the `@checked` decorator and its check mode.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.runtime.decorator import check_mode, checked, checks, set_check_mode

__all__ = ["check_mode", "checked", "checks", "set_check_mode"]
