"""The fixtures of the OpenRLHF oracle tests: OpenRLHF's modules (``tests/openrlhf_support.py``)
and an uninstalled drop-in around every test."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest

import trajschema.openrlhf as to
from tests.openrlhf_support import load


@pytest.fixture
def openrlhf() -> Iterator[SimpleNamespace]:
    mods = load()
    to.uninstall()
    yield mods
    to.uninstall()
