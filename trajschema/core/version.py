"""The package version, in one place (the front door and the command line both show it)."""

__all__ = ["VERSION"]

VERSION = "0.1.0"
