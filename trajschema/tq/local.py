"""Start a small local TransferQueue (on a local Ray) that cannot hang, for tests and examples.

TransferQueue 0.1.11 places its controller and each ``SimpleStorage`` unit on Ray as
actors that each reserve one CPU. With too few CPUs, ``transfer_queue.init()`` does
not fail: it waits forever for a storage unit Ray can never schedule (a bare
``tq.init()`` on a 2-core machine asks for 1 + 2 CPUs and hangs). This module checks
the CPU budget before starting anything and bounds start-up with a timeout.

Ray and TransferQueue are imported only when [`start_local_transfer_queue`][trajschema.start_local_transfer_queue] runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from typing import Any

from trajschema.core import positive_int
from trajschema.tq.calls import check_timeout

__all__ = ["TransferQueueStartError", "start_local_transfer_queue"]

# Ray CPUs reserved by TransferQueue 0.1.11 actors (``@ray.remote(num_cpus=1)``).
_CONTROLLER_CPUS = 1
_STORAGE_UNIT_CPUS = 1
_STOP_TIMEOUT_S = 30.0
_CONTROLLER_NAME = "TransferQueueController"
_TQ_NAMESPACE = "transfer_queue"


class TransferQueueStartError(RuntimeError):
    """A local TransferQueue could not be started (too few CPUs, a timeout, or a failed init)."""

    __module__ = "trajschema"


def _cpus_needed(storage_units: int) -> int:
    return _CONTROLLER_CPUS + _STORAGE_UNIT_CPUS * storage_units


def _run_with_timeout(fn: Any, timeout_s: float, name: str) -> tuple[threading.Thread, bool, BaseException | None]:
    """Run ``fn`` in a daemon thread; return (thread, finished, exception raised or None)."""
    outcome: dict[str, BaseException] = {}

    def target() -> None:
        try:
            fn()
        except BaseException as exc:
            outcome["exc"] = exc

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return thread, not thread.is_alive(), outcome.get("exc")


@contextlib.contextmanager
def start_local_transfer_queue(
    *, num_cpus: int | None = None, storage_units: int = 1, timeout_s: float = 60
) -> Iterator[Any]:
    """Start a local Ray plus TransferQueue for the ``with`` block, and stop both after it.

    Sizes Ray so the TransferQueue controller and ``storage_units`` SimpleStorage units
    (one CPU each) fit, refuses a ``num_cpus`` too small for them before starting
    anything, and bounds ``transfer_queue.init`` by ``timeout_s``. Yields the
    ``transfer_queue`` module, ready for ``kv_batch_put`` / ``kv_batch_get``. On exit
    it calls ``tq.close()`` and then ``ray.shutdown()``, each bounded by a timeout, so
    no Ray process is left behind.

    If Ray is already initialized in this process, that Ray is used as it is (its
    address and CPUs; ``num_cpus`` must then be ``None``), it must have enough free
    CPUs, and it is left running on exit: only TransferQueue is started and closed.

    All CPUs are reserved by TransferQueue by default; Ray actors of your own need
    ``num_cpus=0`` or a larger ``num_cpus`` here. Such actors may attach with
    ``tq.init()`` but must not call ``tq.close()``: in TransferQueue 0.1.11 that
    kills the shared controller.

    Examples:
        >>> with start_local_transfer_queue() as tq:  # doctest: +SKIP
        ...     tq.kv_batch_put(["k0"], "train", fields=to_tq_fields([sample]))
        ...     batch = tq.kv_batch_get(["k0"], "train")

    Args:
        num_cpus: CPUs for the new local Ray; defaults to
            ``max(2, 1 + storage_units)``. Must be at least ``1 + storage_units``.
        storage_units: number of SimpleStorage units (``num_data_storage_units``).
        timeout_s: seconds to wait for ``transfer_queue.init`` before giving up.

    Raises:
        ImportError: if ray or transfer_queue is not installed
            (the ``tq`` extra: ``pip install -e '.[tq]'`` in a trajschema checkout).
        TransferQueueStartError: if ``num_cpus`` (or an existing Ray's free CPUs) is
            below what the controller plus storage units need, if a TransferQueue
            controller is already running in this Ray, if ``transfer_queue.init``
            raises, or if it has not finished within ``timeout_s``.
        ValueError: if ``storage_units`` or ``num_cpus`` is not a positive int, or
            ``timeout_s`` is not a positive, finite number of seconds.
    """
    needed = _check_budget(num_cpus, storage_units, timeout_s)
    ray, tq = import_tq()
    own_ray = _start_ray(ray, num_cpus, needed, storage_units)

    def stop() -> None:
        _stop(ray, tq, own_ray=own_ray, storage_units=storage_units)

    _init_tq(tq, storage_units, timeout_s, stop, own_ray=own_ray, needed=needed)
    try:
        yield tq
    finally:
        stop()


def _check_budget(num_cpus: int | None, storage_units: int, timeout_s: float) -> int:
    """The CPUs TransferQueue reserves; refuses arguments that could only hang."""
    storage_units = positive_int("storage_units", storage_units)
    if num_cpus is not None:
        num_cpus = positive_int("num_cpus", num_cpus)
    check_timeout(timeout_s, none_ok=False)
    needed = _cpus_needed(storage_units)
    if num_cpus is not None and num_cpus < needed:
        raise TransferQueueStartError(
            f"num_cpus={num_cpus} is too small: the TransferQueue controller and {storage_units} storage "
            f"unit(s) reserve {needed} CPUs (1 + {storage_units}), so transfer_queue.init would hang; "
            f"pass num_cpus>={needed} or fewer storage_units"
        )
    return needed


def import_tq() -> tuple[Any, Any]:
    try:
        # Client-side puts and gets warn on every call when TQ_NUM_THREADS (default 8)
        # exceeds the physical cores; a matching default keeps small machines quiet.
        os.environ.setdefault("TQ_NUM_THREADS", str(max(1, min(8, os.cpu_count() or 1))))
        import ray
        import transfer_queue as tq
    except ImportError as exc:
        raise ImportError(
            "start_local_transfer_queue needs Ray and TransferQueue: install the tq extra "
            "(pip install -e '.[tq]' in a trajschema checkout)"
        ) from exc
    return ray, tq


def _start_ray(ray: Any, num_cpus: int | None, needed: int, storage_units: int) -> bool:
    """Start a local Ray, or check the running one has room; whether we started it."""
    if not ray.is_initialized():
        ray.init(
            address="local",
            num_cpus=num_cpus if num_cpus is not None else max(2, needed),
            include_dashboard=False,
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
        return True
    if num_cpus is not None:
        raise TransferQueueStartError(
            f"num_cpus={num_cpus} was given but Ray is already initialized in this process; "
            "pass num_cpus=None to use the running Ray as it is"
        )
    free = ray.available_resources().get("CPU", 0.0)
    if free < needed:
        raise TransferQueueStartError(
            f"the running Ray has {free:g} free CPUs but the TransferQueue controller and "
            f"{storage_units} storage unit(s) need {needed}; transfer_queue.init would hang"
        )
    try:
        ray.get_actor(_CONTROLLER_NAME, namespace=_TQ_NAMESPACE)
    except ValueError:
        return False
    raise TransferQueueStartError(
        "a TransferQueue controller is already running in this Ray; attach to it with "
        "transfer_queue.init() instead (closing it from here would kill it for everyone)"
    )


def _init_tq(tq: Any, storage_units: int, timeout_s: float, stop: Any, *, own_ray: bool, needed: int) -> None:
    """``tq.init``, bounded by ``timeout_s``; on any failure everything started is stopped."""
    conf = {"backend": {"storage_backend": "SimpleStorage", "SimpleStorage": {"num_data_storage_units": storage_units}}}
    try:
        init_thread, finished, exc = _run_with_timeout(lambda: tq.init(conf), timeout_s, "transfer_queue.init")
    except BaseException:
        stop()
        raise
    if not finished:
        stop()
        # Killing the actors it waits on (or stopping Ray) ends the stuck init thread.
        init_thread.join(_STOP_TIMEOUT_S)
        stopped = "Ray and TransferQueue were shut down" if own_ray else "TransferQueue was closed"
        raise TransferQueueStartError(
            f"transfer_queue.init did not finish within timeout_s={timeout_s:g}s; most likely Ray could not "
            f"schedule the controller and {storage_units} storage unit(s) ({needed} CPUs), e.g. because "
            f"other actors hold CPUs; {stopped}"
        )
    if exc is not None:
        stop()
        raise TransferQueueStartError(f"transfer_queue.init failed: {type(exc).__name__}: {exc}") from exc


def _stop(ray: Any, tq: Any, *, own_ray: bool, storage_units: int) -> None:
    """Close TransferQueue, free storage units stuck in scheduling, and stop Ray if we started it."""

    def close_tq() -> None:
        tq.close()
        # Storage units still waiting to be scheduled (a timed-out start) are unknown to
        # tq.close(); kill them by name so they neither wait for CPUs forever nor keep
        # the init thread blocked. After a normal close they are already gone.
        for rank in range(storage_units):
            with contextlib.suppress(Exception):
                ray.kill(ray.get_actor(f"TransferQueueStorageUnit#{rank}"))

    _, finished, exc = _run_with_timeout(close_tq, _STOP_TIMEOUT_S, "transfer_queue.close")
    if not finished or exc is not None:
        why = f"did not finish within {_STOP_TIMEOUT_S:g}s" if not finished else f"raised {exc!r}"
        warnings.warn(f"transfer_queue.close() {why}", RuntimeWarning, stacklevel=3)
    if own_ray:
        _, finished, exc = _run_with_timeout(ray.shutdown, _STOP_TIMEOUT_S, "ray.shutdown")
        if not finished or exc is not None:
            why = f"did not finish within {_STOP_TIMEOUT_S:g}s" if not finished else f"raised {exc!r}"
            warnings.warn(f"ray.shutdown() {why}; run `ray stop --force`", RuntimeWarning, stacklevel=3)
