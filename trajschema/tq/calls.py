"""TransferQueue calls that cannot hang, puts that land whole or not at all, and checked batch metas.

TransferQueue 0.1.11's ``kv_batch_put`` registers the keys with the controller first and
writes the data to the storage units second. When the second step fails (a value the
storage cannot carry, a storage unit that dies, a put that takes too long), the keys stay
listed with no data, and a retry with the same keys is refused as "already in partition".
[put_whole][] closes that gap: when a put fails after it may have registered keys, it
clears the keys it was writing (every one of them new: the writer refuses existing keys),
so the partition is as before and the same call can be retried. A put abandoned on
timeout may still land later; it is cleared when it ends, and a later put of any of its
keys to the same partition first waits for that (up to its own timeout).

Every wait here is bounded: the sync calls run in a daemon thread that is left behind if
it hangs, the async ones use `asyncio.wait_for`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trajschema.core import is_real

__all__ = [
    "MetaView",
    "async_put_whole",
    "bounded",
    "check_meta",
    "check_timeout",
    "put_whole",
    "timeout_message",
]

_MAX_SHOWN = 4


def check_timeout(timeout_s: Any, name: str = "timeout_s", *, none_ok: bool = True) -> float | None:
    """``timeout_s`` if it is a positive, finite number of seconds that threading accepts (or ``None``).

    Raises:
        ValueError: anything else (a bool, a str, zero, a negative number, NaN, infinity,
            more than `threading.TIMEOUT_MAX`), or ``None`` where ``none_ok`` is false.
    """
    if timeout_s is None and none_ok:
        return None
    ok = is_real(timeout_s)
    if ok:
        value = float(timeout_s)
        ok = math.isfinite(value) and 0 < value <= threading.TIMEOUT_MAX
    if not ok:
        forever = ", or None to wait forever" if none_ok else ""
        raise ValueError(
            f"{name} must be a positive, finite number of seconds (at most {threading.TIMEOUT_MAX:g}){forever}; "
            f"found {timeout_s!r}"
        )
    return float(timeout_s)


def timeout_message(name: str, timeout_s: float | None) -> str:
    return (
        f"transfer_queue {name} did not return within timeout_s={timeout_s:g}s; is TransferQueue "
        "initialized and its controller alive?"
    )


class _Call:
    """``fn()`` in a daemon thread; ``on_late`` runs in that thread if the caller gave up before it ended."""

    def __init__(self, fn: Callable[[], Any], name: str, on_late: Callable[[], None] | None = None) -> None:
        self._fn, self._on_late = fn, on_late
        self._lock = threading.Lock()
        self._abandoned = False
        self.box: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, name=f"trajschema-{name}", daemon=True)

    def _run(self) -> None:
        try:
            self.box["value"] = self._fn()
        except BaseException as exc:  # re-raised in the caller's thread
            self.box["exc"] = exc
        with self._lock:
            late = self._abandoned
        if late and self._on_late is not None:
            with contextlib.suppress(Exception):  # nobody is left to tell
                self._on_late()

    def wait(self, timeout_s: float) -> bool:
        """Whether ``fn`` ended within ``timeout_s``; if not, the call is marked abandoned."""
        self.thread.join(timeout_s)
        with self._lock:
            if self.thread.is_alive() and "value" not in self.box and "exc" not in self.box:
                self._abandoned = True
                return False
        self.thread.join()  # it has finished fn; at most the lock release remains
        return True

    def result(self) -> Any:
        if "exc" in self.box:
            raise self.box["exc"]
        return self.box["value"]


def bounded(fn: Callable[[], Any], timeout_s: float | None, name: str) -> Any:
    """``fn()``, given up on with `TimeoutError` after ``timeout_s`` (``None``: wait forever)."""
    if timeout_s is None:
        return fn()
    call = _Call(fn, name)
    call.thread.start()
    if not call.wait(timeout_s):
        raise TimeoutError(timeout_message(name, timeout_s))
    return call.result()


# ---------------------------------------------------------------------------------
# Puts that land whole or not at all


@dataclasses.dataclass
class _Flight:
    """A put given up on after its timeout, still running; its keys are cleared when it ends."""

    keys: frozenset[str]
    done: threading.Event


_flights_lock = threading.Lock()
_flights: dict[tuple[int, str], list[_Flight]] = {}


def _settle(client: Any, partition_id: str, keys: Sequence[str], timeout_s: float | None) -> None:
    """Wait for abandoned puts of any of ``keys`` to ``partition_id`` to end (and be cleared)."""
    wanted = set(keys)
    with _flights_lock:
        pending = [f for f in _flights.get((id(client), partition_id), []) if f.keys & wanted]
    for flight in pending:
        if not flight.done.wait(timeout_s):
            shown = sorted(flight.keys & wanted)[:_MAX_SHOWN]
            raise TimeoutError(
                f"an earlier put of keys {shown} to partition {partition_id!r} timed out and is still running; "
                f"it is cleared when it ends: retry later (waited timeout_s={timeout_s:g}s)"
            )


def _track(client: Any, partition_id: str, keys: Sequence[str]) -> _Flight:
    flight = _Flight(frozenset(keys), threading.Event())
    with _flights_lock:
        _flights.setdefault((id(client), partition_id), []).append(flight)
    return flight


def _untrack(client: Any, partition_id: str, flight: _Flight) -> None:
    with _flights_lock:
        flights = _flights.get((id(client), partition_id), [])
        if flight in flights:
            flights.remove(flight)
        if not flights:
            _flights.pop((id(client), partition_id), None)
    flight.done.set()


def _clear(client: Any, keys: list[str], partition_id: str, timeout_s: float | None) -> BaseException | None:
    """Clear ``keys`` (bounded); the exception if that failed, else ``None``."""
    try:
        bounded(lambda: client.kv_clear(keys, partition_id), timeout_s, "kv_clear")
    except BaseException as exc:
        return exc
    return None


def _undone(exc: BaseException, keys: list[str], partition_id: str, cleanup: BaseException | None) -> str:
    shown = ", ".join(repr(k) for k in keys[:_MAX_SHOWN]) + (", ..." if len(keys) > _MAX_SHOWN else "")
    if cleanup is None:
        return f"the put was undone: none of its {len(keys)} keys stay in partition {partition_id!r}; retry as is"
    return (
        f"undoing the put failed too ({type(cleanup).__name__}: {cleanup}): keys [{shown}] may stay listed "
        f"in partition {partition_id!r} with no data; clear them with kv_clear before retrying"
    )


def _note(exc: BaseException, text: str) -> None:
    """Attach ``text`` to ``exc`` (shown under its traceback; Python 3.11+ only)."""
    add = getattr(exc, "add_note", None)
    if add is not None:
        add(text)


def put_whole(
    client: Any, keys: list[str], partition_id: str, fields: Any, tags: list[dict[str, Any]], timeout_s: float | None
) -> Any:
    """``client.kv_batch_put`` of new ``keys``, all or nothing: a failed put is cleared before it raises.

    Raises:
        TimeoutError: the put (or an earlier abandoned put of these keys) took longer than
            ``timeout_s``; nothing of it is kept, now or when it ends.
        Exception: whatever the put raised, with a note saying whether it was undone.
    """
    _settle(client, partition_id, keys, timeout_s)

    def put() -> Any:
        return client.kv_batch_put(keys, partition_id, fields=fields, tags=tags)

    if timeout_s is None:
        try:
            return put()
        except BaseException as exc:
            _note(exc, _undone(exc, keys, partition_id, _clear(client, keys, partition_id, None)))
            raise
    flight = _track(client, partition_id, keys)

    def late() -> None:  # the abandoned put ended after all: remove whatever it wrote
        try:
            client.kv_clear(keys, partition_id)
        finally:
            _untrack(client, partition_id, flight)

    call = _Call(put, "kv_batch_put", on_late=late)
    call.thread.start()
    if not call.wait(timeout_s):
        _clear(client, keys, partition_id, timeout_s)  # what it registered so far; the rest when it ends
        raise TimeoutError(
            timeout_message("kv_batch_put", timeout_s) + "; nothing of this put is kept: it is cleared now "
            "and again when the abandoned call ends, and a retry of these keys waits for that"
        )
    _untrack(client, partition_id, flight)
    try:
        return call.result()
    except BaseException as exc:
        _note(exc, _undone(exc, keys, partition_id, _clear(client, keys, partition_id, timeout_s)))
        raise


async def async_put_whole(
    client: Any, keys: list[str], partition_id: str, fields: Any, tags: list[dict[str, Any]], timeout_s: float | None
) -> Any:
    """[put_whole][] with ``async_kv_batch_put`` and ``async_kv_clear``; a timed-out put is cancelled."""
    wanted = set(keys)
    with _flights_lock:
        pending = any(f.keys & wanted for f in _flights.get((id(client), partition_id), []))
    if pending:  # wait in a thread: the event loop keeps running meanwhile
        await asyncio.to_thread(_settle, client, partition_id, keys, timeout_s)
    try:
        coro = client.async_kv_batch_put(keys, partition_id, fields=fields, tags=tags)
        return await asyncio.wait_for(coro, timeout_s)
    except BaseException as exc:
        cleanup = await _async_clear(client, keys, partition_id, timeout_s)
        if isinstance(exc, asyncio.TimeoutError):
            raise TimeoutError(
                timeout_message("async_kv_batch_put", timeout_s) + "; " + _undone(exc, keys, partition_id, cleanup)
            ) from None
        _note(exc, _undone(exc, keys, partition_id, cleanup))
        raise


async def _async_clear(client: Any, keys: list[str], partition_id: str, timeout_s: float | None) -> Any:
    try:
        await asyncio.wait_for(client.async_kv_clear(keys, partition_id), timeout_s)
    except BaseException as exc:
        return exc
    return None


# ---------------------------------------------------------------------------------
# Batch metas


@dataclasses.dataclass(frozen=True)
class MetaView:
    """The parts of a ``KVBatchMeta`` that padding reads, checked for consistency."""

    keys: list[str]
    tags: list[Mapping[str, Any] | None]
    partition_id: str | None
    fields: list[str] | None


_META_FIELDS = ("keys", "tags", "partition_id", "fields", "extra_info")


def check_meta(meta: Any, name: str = "meta") -> MetaView:
    """Check that ``meta`` is a consistent ``KVBatchMeta`` before anything is written for it.

    A ``KVBatchMeta`` checks itself when it is built, but its lists can be changed
    afterwards; an object that only looks like one cannot be extended the way padding
    extends it (``dataclasses.replace``).

    Raises:
        TypeError: ``meta`` is not a dataclass with ``KVBatchMeta``'s fields, or holds
            values of the wrong type (keys not str, tags not dicts or ``None``).
        ValueError: tags are not one per key, or a key repeats.
    """
    kind = type(meta).__name__
    if not dataclasses.is_dataclass(meta) or isinstance(meta, type):
        raise TypeError(f"{name} must be a KVBatchMeta (keys, tags, partition_id, fields, extra_info), found {kind}")
    have = {f.name for f in dataclasses.fields(meta)}
    if not have.issuperset(_META_FIELDS):
        missing = [f for f in _META_FIELDS if f not in have]
        raise TypeError(f"{name} must be a KVBatchMeta; this {kind} lacks the fields {missing}")
    obj: Any = meta  # a dataclass with KVBatchMeta's fields, as checked above
    keys, tags = obj.keys, obj.tags
    for what, value in (("keys", keys), ("tags", tags)):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            raise TypeError(f"{name}.{what} must be a list, found {type(value).__name__}")
    bad = [f"keys[{i}]={k!r}" for i, k in enumerate(keys) if not isinstance(k, str)]
    if bad:
        raise TypeError(f"{name}.keys must all be str, found {', '.join(bad[:_MAX_SHOWN])}")
    if len(tags) != len(keys):
        raise ValueError(f"{name} must have one tag dict per key: {len(keys)} keys, {len(tags)} tags")
    bad = [
        f"tags[{i}] is {type(t).__name__}" for i, t in enumerate(tags) if t is not None and not isinstance(t, Mapping)
    ]
    if bad:
        raise TypeError(f"{name}.tags must be dicts (or None), found {', '.join(bad[:_MAX_SHOWN])}")
    seen: set[str] = set()
    repeated = sorted({k for k in keys if k in seen or seen.add(k)})  # type: ignore[func-returns-value]
    if repeated:
        raise ValueError(f"{name}.keys repeat: {repeated[:_MAX_SHOWN]}; a batch holds each sample once")
    partition_id, fields = obj.partition_id, obj.fields
    if partition_id is not None and not isinstance(partition_id, str):
        raise TypeError(f"{name}.partition_id must be a str or None, found {type(partition_id).__name__}")
    if fields is not None and (
        isinstance(fields, (str, bytes))
        or not isinstance(fields, Sequence)
        or not all(isinstance(f, str) for f in fields)
    ):
        raise TypeError(f"{name}.fields must be a list of str or None, found {fields!r:.80}")
    return MetaView(list(keys), list(tags), partition_id, None if fields is None else list(fields))
