"""Bundles: one recorded batch with its schema, layout, tags and provenance, checked and replayed anywhere.

[`record_batch`][trajschema.record_batch] writes one (`trajschema.bundle.store`),
[`load_bundle`][trajschema.load_bundle] reads it back as a [`Bundle`][trajschema.Bundle]
(`trajschema.bundle.bundle`); `trajschema.bundle.codec` turns a batch into tensors and a
JSON tree and back, `trajschema.bundle.recorder` keeps the last bundles of a live run.

Internal: the public API is `trajschema`; this front lists what the other rooms take from
this one. Importing it imports nothing: each name is imported when first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.bundle.bundle import Bundle, load_bundle
    from trajschema.bundle.codec import RecordedDataProto
    from trajschema.bundle.recorder import REASON_WIDTH, Recorder, broken_reason, record_options
    from trajschema.bundle.store import FORMAT_VERSION, record_batch

__all__ = [
    "FORMAT_VERSION",
    "REASON_WIDTH",
    "Bundle",
    "RecordedDataProto",
    "Recorder",
    "broken_reason",
    "load_bundle",
    "record_batch",
    "record_options",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.bundle.bundle": ("Bundle", "load_bundle"),
    "trajschema.bundle.codec": ("RecordedDataProto",),
    "trajschema.bundle.recorder": ("REASON_WIDTH", "Recorder", "broken_reason", "record_options"),
    "trajschema.bundle.store": ("FORMAT_VERSION", "record_batch"),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
