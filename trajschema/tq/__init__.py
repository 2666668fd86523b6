"""TransferQueue: the validating writer, bounded calls and whole-or-nothing puts, what the wire
carries, the read layout, a local TransferQueue, and an in-memory one.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.

`MemoryTransferQueue` is imported on first use: its module imports TransferQueue's own
`KVBatchMeta` when TransferQueue is installed, which `import trajschema` must not do.
"""

from typing import TYPE_CHECKING, Any

from trajschema.tq.calls import bounded, check_meta, check_timeout
from trajschema.tq.layout import to_tq_fields, tq_layout
from trajschema.tq.local import TransferQueueStartError, import_tq, start_local_transfer_queue
from trajschema.tq.writer import TransferQueueWriter, check_eos_token_id, one_row

if TYPE_CHECKING:  # for type checkers and the docs' static reader; loaded on first use below
    from trajschema.tq.memory import MemoryTransferQueue

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
    "tq_layout",
]


def __getattr__(name: str) -> Any:
    if name == "MemoryTransferQueue":
        from trajschema.tq.memory import MemoryTransferQueue

        return MemoryTransferQueue
    raise AttributeError(f"module 'trajschema.tq' has no attribute {name!r}")
