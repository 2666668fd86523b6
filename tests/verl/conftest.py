"""The fixtures of verl's trainer step under install(): verl's ``trainer_base`` and the in-memory TransferQueue."""

from __future__ import annotations

import sys

import pytest

import trajschema.verl as tv
from tests.verl_support import verl_module
from trajschema.testing import MemoryTransferQueue


@pytest.fixture(scope="module")
def tb():
    return verl_module("verl.trainer.ppo.v1.trainer_base")


@pytest.fixture
def tq(tb, monkeypatch):
    """The in-memory TransferQueue as the module verl's trainer_base and trajschema's padding both call."""
    client = MemoryTransferQueue()
    monkeypatch.setattr(tb, "tq", client)
    monkeypatch.setitem(sys.modules, "transfer_queue", client)
    yield client
    tv.uninstall()
