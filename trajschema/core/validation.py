"""Argument checks shared by every public entry point: one wording for one mistake."""

from __future__ import annotations

import numbers

from trajschema.core.kinds import shown_value

__all__ = ["positive_int"]


def positive_int(name: str, value: object) -> int:
    """``value`` as an int if it is a positive int (a bool is not); else ``ValueError`` naming ``name``.

    Examples:
        >>> positive_int("multiple", 8)
        8
    """
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive int, found {shown_value(value)}")
    return int(value)
