"""A drop-in's batch check: when it is due (its check mode) and the ``trajschema/*`` figures it reports.

``trajschema.trl`` checks every batch TRL builds, ``trajschema.openrlhf`` every rollout
before it is padded; both run in a mode (``always``, ``once``, ``never``, or the process's
check mode, as [`checked`][trajschema.checked] does) and report through their trainer's
metrics what `check_metrics` makes of the violations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from trajschema.core import Violation
from trajschema.runtime.decorator import check_mode

__all__ = ["CHECK_METRICS", "check_metrics", "due_mode"]

#: What every drop-in's batch check adds (``trajschema/violations/<code>`` too, for each code found).
CHECK_METRICS = ("trajschema/violations", "trajschema/bad_samples", "trajschema/check_ms")


def due_mode(settings: Mapping[str, Any]) -> str | None:
    """The mode this call checks in, or ``None`` when it does not check.

    ``settings["mode"]`` is the mode a drop-in was installed with (``None``: the check mode
    in force at each call); ``settings["passed"]``, whether a check made in ``"once"`` mode
    passed. ``"never"`` never checks, ``"once"`` until such a check passed.

    Examples:
        >>> due_mode({"mode": "once", "passed": False}), due_mode({"mode": "once", "passed": True})
        ('once', None)
    """
    mode = settings.get("mode") or check_mode()
    if mode == "always" or (mode == "once" and not settings.get("passed", False)):
        return mode
    return None


def check_metrics(violations: Sequence[Violation], seconds: float) -> dict[str, float]:
    """The ``trajschema/*`` figures of one checked batch.

    Examples:
        >>> v = ts.Violation(3, "advantages", "value", "finite", "nan", "advantages row 3: nan")
        >>> figures = check_metrics([v], 0.002)
        >>> sorted(figures)
        ['trajschema/bad_samples', 'trajschema/check_ms', 'trajschema/violations', 'trajschema/violations/value']
        >>> figures["trajschema/violations"], figures["trajschema/bad_samples"], figures["trajschema/check_ms"]
        (1.0, 1.0, 2.0)

    Args:
        violations: what the check found.
        seconds: what it cost.

    ``trajschema/bad_samples`` counts the rows named by a violation (a violation of a whole
    column, sample ``None``, names none).
    """
    codes = Counter(str(v.code) for v in violations)
    figures = {
        "trajschema/violations": float(len(violations)),
        "trajschema/bad_samples": float(len({v.sample for v in violations if v.sample is not None})),
        "trajschema/check_ms": 1000.0 * seconds,
    }
    figures.update({f"trajschema/violations/{c}": float(n) for c, n in sorted(codes.items())})
    return figures
