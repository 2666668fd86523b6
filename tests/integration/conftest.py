"""Fixtures for tests against a real local TransferQueue (one Ray + TransferQueue per session)."""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("ray")
pytest.importorskip("transfer_queue")

from trajschema._tq_local import start_local_transfer_queue


@pytest.fixture(scope="session")
def tq_client():
    """The ``transfer_queue`` module, backed by a local Ray + TransferQueue for the whole session."""
    with start_local_transfer_queue(timeout_s=120) as tq:
        yield tq


@pytest.fixture
def partition(tq_client):
    """A partition id unique to the test; its keys are cleared afterwards."""
    pid = f"test-{uuid.uuid4().hex[:12]}"
    yield pid
    keys = list(tq_client.kv_list(pid).get(pid, {}))
    if keys:
        tq_client.kv_clear(keys, pid)
