"""trajschema's pytest plugin, loaded by pytest on every run once trajschema is installed (entry point ``pytest11``).

It provides:

* ``trajschema_tq``: a function-scoped fixture with a real local TransferQueue
  (``.client``, the ``transfer_queue`` module) and a fresh partition id per test
  (``.partition_id``), whose keys are cleared after the test. It skips, saying why,
  when the ``tq`` extra (ray, transfer_queue) is not installed.
* ``trajschema_tq_session``: the one Ray + TransferQueue behind it, started on first
  request and stopped at the end of the session (``.client``). If a TransferQueue is
  already running in this process's Ray, it is reused and left running.
* ``trajschema_bundle``: a function that reads a recorded batch's bundle, a path taken
  relative to the test's own file (`trajschema.testing.recorded_batch`), so a batch
  recorded in a real run (``install(record=...)``) becomes a regression test with
  `trajschema.testing.assert_bundle_valid`.
* assertion rewriting and hidden traceback frames for ``trajschema.testing.assert_valid``
  and ``assert_padding_invariant``.

Loading the plugin imports neither torch nor trajschema: they are imported when a
fixture is first used.

Examples:
    A test using the fixture (``pytest -m tq`` selects such tests when marked)::

        def test_roundtrip(trajschema_tq):
            tq, pid = trajschema_tq.client, trajschema_tq.partition_id
            tq.kv_batch_put(["k0"], pid, fields=to_tq_fields([sample]))
            assert tq.kv_batch_get(["k0"], pid)["responses"].shape[0] == 1
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

__all__ = ["TransferQueuePartition", "TransferQueueSession"]

# Seconds to wait for transfer_queue.init; a busy 2-core machine needs well over 30.
START_TIMEOUT_S = 120.0

# Only records the name: the module is rewritten when a test first imports it.
pytest.register_assert_rewrite("trajschema.testing.assertions")


@pytest.fixture
def trajschema_bundle(request: pytest.FixtureRequest) -> Any:
    """``read(path)``: the bundle at ``path`` (relative to the test's file), its payloads verified."""
    from pathlib import Path

    from trajschema.testing import recorded_batch

    here = Path(str(request.node.path)).parent

    def read(path: Any) -> Any:
        where = Path(path)
        return recorded_batch(where if where.is_absolute() else here / where)

    return read


@dataclasses.dataclass(frozen=True)
class TransferQueueSession:
    """The session's TransferQueue: ``client`` is the ``transfer_queue`` module, ready for ``kv_*`` calls."""

    client: Any


@dataclasses.dataclass(frozen=True)
class TransferQueuePartition:
    """What ``trajschema_tq`` yields: the TransferQueue ``client`` and a ``partition_id`` of the test's own."""

    client: Any
    partition_id: str


def _import_tq_or_skip() -> None:
    try:
        import ray  # noqa: F401
        import transfer_queue  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"trajschema_tq needs the tq extra (ray and transfer_queue): pip install 'trajschema[tq]' ({exc})")


def _running_transfer_queue() -> Any:
    """The ``transfer_queue`` module attached to a TransferQueue already running in this process's Ray, or None."""
    import ray

    if not ray.is_initialized():
        return None
    from trajschema.tq.local import _CONTROLLER_NAME, _TQ_NAMESPACE

    try:
        ray.get_actor(_CONTROLLER_NAME, namespace=_TQ_NAMESPACE)
    except ValueError:
        return None
    import transfer_queue

    transfer_queue.init()  # attaches a client to the running controller (conf is ignored)
    return transfer_queue


@pytest.fixture(scope="session")
def trajschema_tq_session() -> Iterator[TransferQueueSession]:
    """One local Ray + TransferQueue for the whole session, started on first request."""
    _import_tq_or_skip()
    running = _running_transfer_queue()
    if running is not None:
        yield TransferQueueSession(client=running)  # someone else's: not ours to close
        return
    from trajschema.tq.local import start_local_transfer_queue

    with start_local_transfer_queue(timeout_s=START_TIMEOUT_S) as tq:
        yield TransferQueueSession(client=tq)


def _partition_id(test_name: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", test_name).strip("-")[:40]
    return f"{readable or 'test'}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def trajschema_tq(
    trajschema_tq_session: TransferQueueSession, request: pytest.FixtureRequest
) -> Iterator[TransferQueuePartition]:
    """The session's TransferQueue with a partition id unique to this test; its keys are cleared afterwards."""
    client = trajschema_tq_session.client
    partition_id = _partition_id(request.node.name)
    yield TransferQueuePartition(client=client, partition_id=partition_id)
    keys = list(client.kv_list(partition_id).get(partition_id, {}))
    if keys:
        client.kv_clear(keys, partition_id)
