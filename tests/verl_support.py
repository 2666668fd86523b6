"""verl for the oracle tests: imported when present; a missing verl skips, unless CI requires it.

``.ci/run`` sets ``TRAJSCHEMA_REQUIRE_VERL=1``: then a missing verl fails the test that
needs it, and ``tests/conftest.py`` fails the session if any ``verl`` test skipped. A
``verl`` that is no installed verl (a namespace package, a folder of ``tests/``) counts
as missing (``tests/trainer_import.py``).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest

from tests.trainer_import import import_installed

REQUIRED = os.environ.get("TRAJSCHEMA_REQUIRE_VERL") == "1"


def verl_module(name: str) -> Any:
    """``importlib.import_module(name)`` of an installed verl's module, or skip (fail under CI) naming why."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # verl warns about every engine it cannot load on CPU
            return import_installed(name)
    except ImportError as exc:
        why = (
            f"verl 0.9.1 is not importable ({exc}); install it with pip install --no-deps -r .ci/verl-requirements.txt"
        )
        if REQUIRED:
            pytest.fail(f"TRAJSCHEMA_REQUIRE_VERL=1 but {why}")
        pytest.skip(why)
