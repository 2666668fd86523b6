"""Argument checks shared by every public entry point: one wording for one mistake.

A bool is an ``int`` to Python, never to us: ``padding(True)`` is a mistake, not one row.
Every check names the argument, says what was expected and shows what was found (capped,
so a 5,000-character string does not flood the message).
"""

from __future__ import annotations

import math

from trajschema.core.scalars import is_int, is_real
from trajschema.core.types import MAX_SIZE

__all__ = ["check_bool", "check_int", "check_real", "is_int", "is_real", "positive_int"]


def check_bool(name: str, value: object) -> bool:
    """``value`` if it is a bool (``0``, ``1`` and ``"true"`` are not); else ``TypeError`` naming ``name``.

    Examples:
        >>> check_bool("check", 1)
        Traceback (most recent call last):
        ...
        TypeError: check must be a bool (True or False), found int 1
    """
    if not isinstance(value, bool):
        from trajschema.core.kinds import shown_value

        raise TypeError(f"{name} must be a bool (True or False), found {type(value).__name__} {shown_value(value)}")
    return value


def _bound(n: int) -> str:
    return "2**63-1" if n == MAX_SIZE else str(n)


def _int_wanted(minimum: int, maximum: int | None, meaning: str) -> str:
    if maximum is not None:
        wanted = f"an int in {_bound(minimum)}..{_bound(maximum)}"
    elif minimum == 1:
        wanted = "a positive int"
    else:
        wanted = f"an int >= {minimum}"
    return f"{wanted} ({meaning})" if meaning else wanted


def check_int(name: str, value: object, *, minimum: int = 0, maximum: int | None = None, meaning: str = "") -> int:
    """``value`` as an int if it is one (not a bool) in ``minimum..maximum``; else ``ValueError`` naming ``name``.

    Examples:
        >>> check_int("count", 3)
        3
        >>> check_int("eos_token_id", -1, maximum=MAX_SIZE, meaning="a token id")
        Traceback (most recent call last):
        ...
        ValueError: eos_token_id must be an int in 0..2**63-1 (a token id), found -1
    """
    if not is_int(value) or not minimum <= int(value) <= (math.inf if maximum is None else maximum):
        from trajschema.core.kinds import shown_value  # imports torch: only for the message

        raise ValueError(f"{name} must be {_int_wanted(minimum, maximum, meaning)}, found {shown_value(value)}")
    return int(value)


def positive_int(name: str, value: object) -> int:
    """``value`` as an int if it is a positive int (a bool is not); else ``ValueError`` naming ``name``.

    Examples:
        >>> positive_int("multiple", 8)
        8
    """
    return check_int(name, value, minimum=1)


def check_real(name: str, value: object, *, positive: bool = False, maximum: float = math.inf) -> float:
    """``value`` as a finite float if it is a real number (not a bool) ``>= 0`` (``> 0`` when ``positive``).

    An int too large for a float is refused as not finite, not with an ``OverflowError``.

    Examples:
        >>> check_real("rtol", 0.5)
        0.5
        >>> check_real("timeout_s", 0, positive=True)
        Traceback (most recent call last):
        ...
        ValueError: timeout_s must be a finite number > 0, found 0
    """
    ok = is_real(value)
    if ok:
        try:
            number = float(value)  # type: ignore[arg-type]
        except OverflowError:
            ok = False
        else:
            ok = math.isfinite(number) and (number > 0 if positive else number >= 0) and number <= maximum
    if not ok:
        from trajschema.core.kinds import shown_value

        limit = "" if maximum == math.inf else f" and <= {maximum:g}"
        raise ValueError(
            f"{name} must be a finite number {'> 0' if positive else '>= 0'}{limit}, found {shown_value(value)}"
        )
    return number
