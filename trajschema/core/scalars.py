"""What counts as a number: an int or a real that is not a bool (a bool is an ``int`` to Python, never to us).

The one home of that predicate: argument checks (`trajschema.core.validation`), value kinds
(`trajschema.core.kinds`) and the loader read a number through it.
"""

from __future__ import annotations

import numbers
from typing import TypeGuard

__all__ = ["is_int", "is_real"]


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an integer that is not a bool (numpy and torch ints count).

    Examples:
        >>> is_int(3), is_int(True), is_int(3.0)
        (True, False, False)
    """
    if type(value) is int:  # the common case, before the ABC check (slow once torch made subclasses)
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a real number that is not a bool (ints, floats, numpy and torch scalars).

    Examples:
        >>> is_real(0.5), is_real(2), is_real(False), is_real("1")
        (True, True, False, False)
    """
    if type(value) in (int, float):
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
