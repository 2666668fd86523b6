"""Attributes of another library, replaced for a drop-in and put back as they were.

Each trainer drop-in's `DropIn` keeps one `Patches`: the bookkeeping of what it replaced,
so that installing twice never wraps a replacement in another, and uninstalling puts back
the very same objects.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["Patches"]


class Patches:
    """What one drop-in replaced: ``(owner, attribute name, original object)`` triples.

    Hold ``lock`` around a whole install (`restore`, the checks, `replace`), so that two
    threads installing at once cannot interleave; the lock is re-entrant.
    """

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._originals: list[tuple[Any, str, Any]] | None = None

    @property
    def active(self) -> bool:
        """Whether replacements are in effect."""
        return self._originals is not None

    def replace(self, originals: Sequence[tuple[Any, str, Any]], replacements: Sequence[Any]) -> None:
        """Set each ``owner.name`` of ``originals`` to its replacement (same order), after
        putting back what an earlier call replaced."""
        with self.lock:
            self.restore()
            pairs = list(zip(originals, replacements, strict=True))
            for (owner, name, _), new in pairs:
                setattr(owner, name, new)
            self._originals = list(originals)

    def restore(self) -> bool:
        """Put back every replaced attribute (the very same objects); ``False`` if none was replaced."""
        with self.lock:
            if self._originals is None:
                return False
            for owner, name, obj in self._originals:
                setattr(owner, name, obj)
            self._originals = None
            return True
