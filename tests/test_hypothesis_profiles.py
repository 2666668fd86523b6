"""The hypothesis profiles of tests/conftest.py: `dev` (quick) and `ci` (thorough), chosen by a variable."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import settings


def _tests_conftest(config: pytest.Config) -> ModuleType:
    """tests/conftest.py as pytest loaded it (it is no importable module)."""
    path = Path(__file__).with_name("conftest.py")
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, ModuleType) and Path(getattr(plugin, "__file__", "") or "") == path:
            return plugin
    raise AssertionError(f"{path} is not loaded")


def test_ci_is_thorough_and_deterministic_and_dev_is_quick() -> None:
    dev, ci = settings.get_profile("dev"), settings.get_profile("ci")
    assert dev.max_examples < ci.max_examples
    assert ci.derandomize and ci.database is None and ci.print_blob
    assert dev.deadline is None and ci.deadline is None
    assert not dev.derandomize  # whatever machine registered it: a CI variable does not leak into dev


def test_the_profile_loaded_is_the_one_asked_for(request: pytest.FixtureRequest) -> None:
    asked = request.config.getoption("hypothesis_profile", None) or os.environ.get("TRAJSCHEMA_HYPOTHESIS_PROFILE")
    if asked:
        assert settings.get_current_profile_name() == asked
    assert settings().max_examples == settings.get_profile(settings.get_current_profile_name()).max_examples


@pytest.mark.parametrize(
    ("value", "detected", "expected"),
    [
        (None, "default", "dev"),
        ("", "default", "dev"),
        (None, "ci", "ci"),  # Hypothesis saw a CI variable (CI=1) and loaded its own ci profile
        ("ci", "default", "ci"),
        ("dev", "ci", "dev"),
        ("x", "default", None),
    ],
    ids=["unset", "empty", "unset-on-a-ci-machine", "ci", "dev-on-a-ci-machine", "unknown"],
)
def test_the_variable_chooses_the_profile(request, value, detected, expected) -> None:
    choose = _tests_conftest(request.config).hypothesis_profile
    environ = {"TRAJSCHEMA_HYPOTHESIS_PROFILE": value} if value is not None else {}
    if expected is None:
        with pytest.raises(
            pytest.UsageError, match=r"^TRAJSCHEMA_HYPOTHESIS_PROFILE must be 'dev' or 'ci', found 'x'$"
        ):
            choose(environ, detected)
    else:
        assert choose(environ, detected) == expected
