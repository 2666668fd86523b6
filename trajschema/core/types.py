"""Type aliases of the public API: what a batch is, check depths and violation codes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tensordict import TensorDictBase

__all__ = ["DEPTHS", "MAX_SIZE", "Batch", "Depth", "Sample", "TagDict", "ViolationCode"]

#: The largest size a torch tensor can have (sizes are int64).
MAX_SIZE = 2**63 - 1

Depth = Literal["shapes", "values"]
"""How deep a check goes: ``"shapes"`` reads no tensor values; ``"values"`` also checks
``values``/``min``/``max``/``finite``."""
DEPTHS: tuple[Depth, ...] = ("shapes", "values")

ViolationCode = Literal[
    "missing",
    "kind",
    "dtype",
    "rank",
    "shape",
    "dim_mismatch",
    "dim_range",
    "value",
    "repeated",
    "tag",
    "extra",
    "batch",
    "key",
    "padding",
    "transport",
    "mask",
    "padded",
    "length",
    "offsets",
    "alignment",
    "positions",
    "boundary",
]
"""The stable machine-readable reason of a `Violation` (see its `code`)."""

#: One sample: a mapping of field name to value (a dict, or one row of a TensorDict).
Sample = Mapping[str, Any]
#: The tag dict stored beside a sample in TransferQueue.
TagDict = Mapping[str, Any]
if TYPE_CHECKING:
    Batch = Sequence[Sample] | TensorDictBase
    """A batch: a sequence of samples, or a TensorDict with one batch dim as TransferQueue returns it
    (jagged, strided or dense tensor columns; non-tensor columns)."""


def __getattr__(name: str) -> Any:
    # Batch needs tensordict (a second to import); the command line reads this module's
    # constants (MAX_SIZE, DEPTHS) at start-up, so Batch is made on first use.
    if name == "Batch":
        from tensordict import TensorDictBase

        batch = Sequence[Sample] | TensorDictBase
        globals()["Batch"] = batch
        return batch
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
