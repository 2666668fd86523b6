"""The `trajschema` command line and its demo.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one. `main` is imported on first use, so that
importing one subcommand's module (or the demo) does not import them all.
"""

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.cli.app import main

__all__ = ["main"]

__getattr__, __dir__ = lazy_front(__name__, {"trajschema.cli.app": ("main",)})
