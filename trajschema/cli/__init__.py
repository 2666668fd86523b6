"""The `trajschema` command line and its demo.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one. `main` is imported on first use, so that
importing one subcommand's module (or the demo) does not import them all.
"""

from typing import Any

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name == "main":
        from trajschema.cli.app import main

        return main
    raise AttributeError(f"module 'trajschema.cli' has no attribute {name!r}")
