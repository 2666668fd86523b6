"""What every packed layout shares after its own checks: the result type, the jagged engine
run once on the real tokens of every field, and the padding rows' loss masks."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import check_batch
from trajschema.core import Violation
from trajschema.packed.tokens import tagged_padding

if TYPE_CHECKING:
    from tensordict import TensorDict

    from trajschema.check import Plan
    from trajschema.packed.bind import BoundPacked

__all__ = ["PackedCheck", "engine_check", "padding_masks"]


@dataclasses.dataclass
class PackedCheck:
    """What checking a packed batch found.

    Attributes:
        violations: every violation, with the sample index, the batch key and a code.
        bindings: the dims each sample with a violation bound.
        jagged: the real tokens as a jagged TensorDict of schema field names (only when
            asked with ``extract=True`` and the layout itself holds; else ``None``).
        lengths: real tokens per sequence, int64 ``(B,)`` (``None`` when unreadable).
    """

    violations: list[Violation]
    bindings: dict[int | None, dict[str, int]]
    jagged: TensorDict | None = None
    lengths: torch.Tensor | None = None


def engine_check(
    plan: Plan, columns: Mapping[str, Any], n: int, optional: frozenset[str], **kw: Any
) -> tuple[list[Violation], dict[int | None, dict[str, int]], TensorDict | None]:
    """The jagged engine on ``columns`` (schema field -> jagged column), ``optional`` fields not required."""
    from tensordict import TensorDict

    from trajschema.dense import relaxed_plan

    if n == 0:
        return [], {}, None
    tensors = {k: v for k, v in columns.items() if isinstance(v, torch.Tensor)}
    td = TensorDict(tensors, batch_size=[n])
    for k, v in columns.items():
        if k not in tensors:
            td[k] = v
    found, bindings = check_batch(relaxed_plan(plan, optional), td, **kw)
    return found, bindings, td


def padding_masks(bound: BoundPacked, jagged: Mapping[str, Any], tags: Sequence[Any] | None) -> list[Violation]:
    """A sample tagged ``is_padding`` whose loss mask holds a nonzero value (``padding``)."""
    col = jagged.get("loss_mask")
    p = bound.placed.get("loss_mask")
    if not isinstance(col, torch.Tensor) or p is None:
        return []
    found = []
    for i in tagged_padding(tags):
        if i < col.size(0) and bool((col[i] != 0).any()):
            msg = f"{p.key}: sample {i} is padding (is_padding) and must have an all-zero loss mask, found ones"
            found.append(Violation(i, p.key, "padding", "an all-zero loss mask", "nonzero", msg))
    return found
