"""Recording a live run's batches: what each drop-in's ``install(record=DIR, keep=N, every=K)`` holds.

A [`Recorder`][trajschema.bundle.Recorder] writes a step's batch as a bundle
(``DIR/step-00000012``) when the step's check or audit found something wrong, and, with
``every=K``, every K-th step too; it keeps the last ``keep`` bundles it wrote and deletes
the older ones it wrote (never a folder it did not write; a folder in the way that is no
bundle is not replaced: that recording is logged and skipped). Recording never breaks the
step it watches: a batch that cannot be recorded is logged (logger ``trajschema.bundle``)
and the step goes on.
"""

from __future__ import annotations

import logging
import os
import shutil
import textwrap
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trajschema.bundle.store import is_bundle
from trajschema.core import Layout, PackedLayout, check_int
from trajschema.schema import Schema

__all__ = ["REASON_WIDTH", "Recorder", "broken_reason", "record_options"]

#: The longest reason a bundle's manifest gets (what broke, joined).
REASON_WIDTH = 400

_LOG = logging.getLogger("trajschema.bundle")


def broken_reason(faults: Sequence[str], *, where: str | None = None) -> str | None:
    """What broke, as a bundle's reason: ``where`` (if given), then the faults joined and
    shortened to `REASON_WIDTH`; ``None`` when there is none (every drop-in words it so).

    Examples:
        >>> broken_reason(["trajschema/padding_loss_tokens = 3 (...)"], where="the mini-batch of rows 0:8")
        'the mini-batch of rows 0:8: trajschema/padding_loss_tokens = 3 (...)'
    """
    if not faults:
        return None
    text = "; ".join(faults)
    return textwrap.shorten(f"{where}: {text}" if where else text, REASON_WIDTH, placeholder=" ...")


class Recorder:
    """Bundles of a live run's batches in one directory, the last ``keep`` kept.

    Args:
        directory: where the bundles go (made if missing).
        keep: how many of its bundles to keep (an int >= 1); older ones are deleted.
        every: also record every ``every``-th step (``None``: only broken steps).
        trainer: the trainer's name, and ``trainer_version`` its version, for the manifests.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep: int = 5,
        every: int | None = None,
        trainer: str | None = None,
        trainer_version: str | None = None,
    ) -> None:
        self.directory = Path(os.fspath(directory))
        self.keep = check_int("keep", keep, minimum=1)
        self.every = None if every is None else check_int("every", every, minimum=1)
        self.trainer, self.trainer_version = trainer, trainer_version
        self.calls = 0
        self.written: list[Path] = []
        self._lock = threading.Lock()

    def reason(self, step: int | None, broken: str | None) -> str | None:
        """Why this step is recorded (``broken`` says what was found wrong), or ``None``: it is not."""
        if broken:
            return broken
        at = self.calls if step is None else step
        if self.every is not None and at % self.every == 0:
            return f"every {self.every} steps"
        return None

    def record(
        self,
        batch: Any,
        *,
        schema: Schema,
        layout: Layout | PackedLayout | None = None,
        tags: Sequence[Mapping[str, Any]] | None = None,
        step: int | None = None,
        broken: str | None = None,
        extras: Mapping[str, Any] | None = None,
    ) -> Path | None:
        """Write ``batch`` when `reason` says so; the bundle's path, or ``None`` (not due, or it failed: logged)."""
        from trajschema.bundle.store import record_batch

        with self._lock:
            self.calls += 1
            at = step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None
            why = self.reason(at, broken)
            if why is None:
                return None
            path = self.directory / f"step-{(self.calls if at is None else at):08d}"
            try:
                made = record_batch(
                    batch,
                    path,
                    schema=schema,
                    layout=layout,
                    tags=tags,
                    step=at,
                    trainer=self.trainer,
                    trainer_version=self.trainer_version,
                    reason=why,
                    extras=extras,
                    overwrite=True,
                )
            except Exception:
                _LOG.warning("trajschema: recording the batch of step %s to %s failed", step, path, exc_info=True)
                return None
            self.written = [p for p in self.written if p != made] + [made]
            self._prune()
            return made

    def _prune(self) -> None:
        """Delete the oldest bundles this recorder wrote beyond ``keep`` (never another folder,
        nor one it did not write, nor the newest, whatever their step numbers)."""
        while len(self.written) > self.keep:
            old = self.written.pop(0)
            if is_bundle(old):
                shutil.rmtree(old, ignore_errors=True)


def record_options(
    record: str | os.PathLike[str] | None,
    keep: int,
    every: int | None,
    *,
    trainer: str,
    version: str | None,
    audit: str | None = None,
) -> Recorder | None:
    """The `Recorder` a drop-in's ``install(record=, keep=, every=)`` asks for (``None``: no recording).

    ``audit``: the install's audit mode, for a drop-in whose audit finds the broken steps
    (``"off"`` with ``record`` is refused).

    Raises:
        TypeError / ValueError: ``record`` is no path, ``keep`` or ``every`` no int >= 1;
            ``record`` with ``audit="off"``.
    """
    if record is None:
        if every is not None:
            raise ValueError("every= needs record= (the directory the bundles go to)")
        check_int("keep", keep, minimum=1)
        return None
    if not isinstance(record, (str, os.PathLike)) or not os.fspath(record):
        raise TypeError(f"record must be a directory path or None, found {type(record).__name__} {record!r}")
    made = Recorder(record, keep=keep, every=every, trainer=trainer, trainer_version=version)
    if audit == "off":
        raise ValueError(
            "record= records the steps the audit finds broken (and every= steps after the audit): "
            "it needs audit=True or audit='strict', not audit=False"
        )
    return made
