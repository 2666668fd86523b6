"""Shared fixtures: the packaged schemas and realistic verl-shaped samples."""

from __future__ import annotations

import os

import pytest

import trajschema as ts
from trajschema.testing import verl_sample

SCHEMAS = ts.schema_names()


@pytest.fixture(params=SCHEMAS)
def schema(request) -> ts.Schema:
    """Each packaged schema in turn (tests using it run once per model family)."""
    return ts.load_schema(request.param)


@pytest.fixture
def sample_of():
    """Build a realistic sample for a schema: ``sample_of(schema, P, R, **kw)``."""
    return verl_sample


# -- CI: the verl-oracle tests must run, not skip ------------------------------------------

_verl_skipped: list[str] = []
_verl_ran: set[str] = set()


def pytest_runtest_logreport(report):
    if "verl" not in report.keywords:
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


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("TRAJSCHEMA_REQUIRE_VERL") == "1" and (_verl_skipped or not _verl_ran):
        print(
            f"\nTRAJSCHEMA_REQUIRE_VERL=1 but {len(_verl_skipped)} verl-oracle tests skipped and {len(_verl_ran)} ran:"
        )
        for nodeid in _verl_skipped[:20]:
            print(f"  {nodeid}")
        session.exitstatus = 1
