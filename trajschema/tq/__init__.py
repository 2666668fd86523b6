"""TransferQueue: the validating writer, bounded calls and whole-or-nothing puts, what the wire
carries, the wire form (what kv_batch_get returns, `wire`), a local TransferQueue, and an in-memory one.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.

Each name is imported on first use: `MemoryTransferQueue`'s module imports TransferQueue's
own `KVBatchMeta` when TransferQueue is installed, which `import trajschema` must not do.
"""

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.tq.calls import bounded, check_meta, check_timeout
    from trajschema.tq.local import TransferQueueStartError, import_tq, start_local_transfer_queue
    from trajschema.tq.memory import MemoryTransferQueue
    from trajschema.tq.wire import to_tq_fields, wire_batch
    from trajschema.tq.writer import TransferQueueWriter, check_eos_token_id, one_row

__all__ = [
    "MemoryTransferQueue",
    "TransferQueueStartError",
    "TransferQueueWriter",
    "bounded",
    "check_eos_token_id",
    "check_meta",
    "check_timeout",
    "import_tq",
    "one_row",
    "start_local_transfer_queue",
    "to_tq_fields",
    "wire_batch",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.tq.calls": ("bounded", "check_meta", "check_timeout"),
    "trajschema.tq.wire": ("to_tq_fields", "wire_batch"),
    "trajschema.tq.local": ("TransferQueueStartError", "import_tq", "start_local_transfer_queue"),
    "trajschema.tq.memory": ("MemoryTransferQueue",),
    "trajschema.tq.writer": ("TransferQueueWriter", "check_eos_token_id", "one_row"),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
