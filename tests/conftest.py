"""Shared fixtures: the packaged schemas and realistic verl-shaped samples."""

from __future__ import annotations

import os
from collections.abc import Mapping

import pytest
from hypothesis import settings

import trajschema as ts
from tests import early
from trajschema.testing import verl_sample

SCHEMAS = ts.schema_names()

# The loading tests' shared checks assert, as a test does: rewritten, their failures show the values.
pytest.register_assert_rewrite("tests.loading_support")

# -- hypothesis profiles -------------------------------------------------------------------
#
# Registered here, before any test module is imported, so a test's own `@settings(...)`
# inherits the profile's values. `dev` is quick (the default on a laptop); `ci` is thorough
# and deterministic (derandomized, no example database), sized so the whole suite still fits
# the CI budget (.ci/run sets TRAJSCHEMA_HYPOTHESIS_PROFILE=ci). Hypothesis's own CI
# detection (the CI variable) also selects `ci`; `pytest --hypothesis-profile NAME` wins
# over both. No deadline in either: a shared 2-core machine makes timings meaningless.
#
# CI_EXAMPLES is measured, not guessed. At issue 15 the hypothesis-heavy test files took 197 s
# of CPU with the counts each test hard-coded before, 160 s at ci's 100 and 107 s at dev's 25.
# Issue 16 added property tests over distinct routes, bounds in dims and spread padding, and
# moved the strategy tests' own counts onto the profile. Measured beside the floor run, as
# .ci/run runs them: the newest run took ~430 s at dev's 25, ~750 s at 100 (past .ci/run's
# 660 s limit) and 566 s at 50 (a fresh-clone .ci/run of 12 min 21 s, past its 12 minutes),
# about 5.5 s per example of the profile; 35 keeps .ci/run near 11 minutes, still derandomized
# and so drawing other examples than a local dev run. A test that needs more examples than
# the profile to find its bug class asks for a multiple of it (`settings().max_examples`),
# saying why.

PROFILE_VARIABLE = "TRAJSCHEMA_HYPOTHESIS_PROFILE"
DEV_EXAMPLES = 25
CI_EXAMPLES = 35
settings.register_profile("dev", settings.get_profile("default"), max_examples=DEV_EXAMPLES, deadline=None)
settings.register_profile("ci", settings.get_profile("ci"), max_examples=CI_EXAMPLES, deadline=None)


def hypothesis_profile(environ: Mapping[str, str], detected: str) -> str:
    """The profile to load: the variable's, else `ci` where Hypothesis detected a CI machine, else `dev`."""
    name = environ.get(PROFILE_VARIABLE, "") or ("ci" if detected == "ci" else "dev")
    if name not in ("dev", "ci"):
        raise pytest.UsageError(f"{PROFILE_VARIABLE} must be 'dev' or 'ci', found {name!r}")
    return name


settings.load_profile(hypothesis_profile(os.environ, settings.get_current_profile_name()))


@pytest.fixture(params=SCHEMAS)
def schema(request) -> ts.Schema:
    """Each packaged schema in turn (tests using it run once per model family)."""
    return ts.load_schema(request.param)


@pytest.fixture
def sample_of():
    """Build a realistic sample for a schema: ``sample_of(schema, P, R, **kw)``."""
    return verl_sample


# -- CI: the verl-oracle tests must run, not skip ------------------------------------------

_verl_marked: set[str] = set()
_verl_skipped: list[str] = []
_verl_ran: set[str] = set()


def pytest_collection_modifyitems(items):
    # By the marker itself: a report's keywords also hold its folders' names, so "verl" in
    # them would count every test under tests/verl/.
    _verl_marked.update(item.nodeid for item in items if item.get_closest_marker("verl") is not None)


def pytest_runtest_logreport(report):
    if report.nodeid not in _verl_marked:
        return
    # An xfail reports as skipped too; it ran, so it does not count.
    if report.skipped and not hasattr(report, "wasxfail"):
        _verl_skipped.append(report.nodeid)
    elif report.when == "call":
        _verl_ran.add(report.nodeid)


def pytest_terminal_summary(terminalreporter):
    if _verl_ran or _verl_skipped:
        terminalreporter.write_line(
            f"verl-oracle tests (marked verl): {len(_verl_ran)} ran, {len(_verl_skipped)} skipped"
        )


def pytest_collection_finish(session):
    early.start_selected(session)  # slow subprocesses a module only reads: beside the whole run (tests/early.py)


def pytest_sessionfinish(session, exitstatus):
    early.stop_all(session)
    if os.environ.get("TRAJSCHEMA_REQUIRE_VERL") == "1" and (_verl_skipped or not _verl_ran):
        print(
            f"\nTRAJSCHEMA_REQUIRE_VERL=1 but {len(_verl_skipped)} verl-oracle tests skipped and {len(_verl_ran)} ran:"
        )
        for nodeid in _verl_skipped[:20]:
            print(f"  {nodeid}")
        session.exitstatus = 1
