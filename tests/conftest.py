"""Shared fixtures: the packaged schemas and realistic verl-shaped samples."""

from __future__ import annotations

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
