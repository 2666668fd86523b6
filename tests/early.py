"""Slow subprocesses that a test module only reads, started when collection ends.

A test module that defines ``start_early(items)`` (``items``: its selected tests) gets it called
by ``tests/conftest.py`` once collection ends; what it returns (an object with ``stop()``, or
``None``) the module's fixture takes back with `take`. Started then, the subprocess runs beside
the whole session instead of holding up its module: the TransferQueue pages of the docs, which
start a Ray of their own, were the longest wait of a CI run. What no module took is stopped
when the session ends.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

_STARTED = pytest.StashKey[dict[str, Any]]()


def start_selected(session: pytest.Session) -> None:
    """Call ``start_early`` of every module with selected tests that defines one, keeping what it returns."""
    started = session.config.stash.setdefault(_STARTED, {})
    if session.config.option.collectonly:
        return
    chosen: dict[str, tuple[Any, list[pytest.Item]]] = {}
    for item in session.items:
        module = getattr(item, "module", None)
        if module is not None and callable(getattr(module, "start_early", None)):
            chosen.setdefault(module.__name__, (module, []))[1].append(item)
    for name, (module, items) in chosen.items():
        started[name] = module.start_early(items)


def take(config: pytest.Config, module: str) -> Any | None:
    """What ``module``'s ``start_early`` returned (once; ``None`` if it was not called or returned none)."""
    return config.stash.get(_STARTED, {}).pop(module, None)


def stop_all(session: pytest.Session) -> None:
    """Stop what no module took (a session cut short, or its tests skipped)."""
    for handle in session.config.stash.get(_STARTED, {}).values():
        if handle is not None:
            with contextlib.suppress(Exception):
                handle.stop()
    session.config.stash[_STARTED] = {}
