"""Fixtures for tests against a real local TransferQueue (one Ray + TransferQueue per session)."""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("ray")
pytest.importorskip("transfer_queue")


@pytest.fixture(scope="session")
def tq_client(trajschema_tq_session):
    """The ``transfer_queue`` module, backed by the plugin's one local Ray + TransferQueue for the session."""
    return trajschema_tq_session.client


@pytest.fixture
def partition(tq_client):
    """A partition id unique to the test; its keys are cleared afterwards."""
    pid = f"test-{uuid.uuid4().hex[:12]}"
    yield pid
    keys = list(tq_client.kv_list(pid).get(pid, {}))
    if keys:
        tq_client.kv_clear(keys, pid)
