"""Schema compatibility: what changed between two schemas, and whether it breaks samples.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.evolution.changes import Change, compatibility

__all__ = ["Change", "compatibility"]
