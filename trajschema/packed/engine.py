"""What every packed layout shares after its own checks: the result type, the jagged engine
run once on the real tokens of every field, and the padding rows' loss masks."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import BatchView, check_batch, nontensor_column
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
        jagged: the real tokens by schema field name, as the engine read them: tensor
            columns in a TensorDict, per-sample lists beside it (``None`` when the offsets
            could not be read); `tensordict` makes one jagged TensorDict of them.
        lengths: real tokens per sequence, int64 ``(B,)`` (``None`` when unreadable).
    """

    violations: list[Violation]
    bindings: dict[int | None, dict[str, int]]
    jagged: BatchView | None = None
    lengths: torch.Tensor | None = None

    def tensordict(self) -> TensorDict | None:
        """The real tokens as one jagged TensorDict, list columns as ``NonTensorStack`` (built once)."""
        view = self.jagged
        if view is None:
            return None
        for k, v in view.lists.items():
            view.td[k] = nontensor_column(v)
        view.lists.clear()
        return view.td


def engine_check(
    plan: Plan, columns: Mapping[str, Any], n: int, optional: frozenset[str], **kw: Any
) -> tuple[list[Violation], dict[int | None, dict[str, int]], BatchView | None]:
    """The jagged engine on ``columns`` (schema field -> jagged column), ``optional`` fields not required.

    Per-sample lists stay plain lists beside the TensorDict of tensor columns: a
    ``NonTensorStack`` of 4096 values costs more to build than the check that reads it.
    """
    from trajschema.dense import relaxed_plan

    if n == 0:
        return [], {}, None
    view = BatchView.of_columns(columns, n)
    found, bindings = check_batch(relaxed_plan(plan, optional), view, **kw)
    return found, bindings, view


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
