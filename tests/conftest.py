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


def pytest_runtest_logreport(report):
    # An xfail reports as skipped too; it ran, so it does not count.
    if report.skipped and "verl" in report.keywords and not hasattr(report, "wasxfail"):
        _verl_skipped.append(report.nodeid)


def pytest_sessionfinish(session, exitstatus):
    if os.environ.get("TRAJSCHEMA_REQUIRE_VERL") == "1" and _verl_skipped:
        print(f"\nTRAJSCHEMA_REQUIRE_VERL=1 but {len(_verl_skipped)} verl-oracle tests skipped:")
        for nodeid in _verl_skipped[:20]:
            print(f"  {nodeid}")
        session.exitstatus = 1
