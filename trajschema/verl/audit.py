"""The step audit of the verl drop-in (``install(audit=...)``): each step's figures, from its padding rows alone.

Under ``install()`` verl's ``_balance_batch`` records each local step it balances
(`LocalStep`): the schema its padding was made with, the padding keys it wrote, and the
actor's seq-mean scale per mini-batch. ``_compute_metrics`` then takes what was
recorded for its batch (`Ledger`) and calls `audit_padding`, which reads from
TransferQueue the padding rows of the step's batch, never a real row (the real rows
were checked when the batch was padded), and passes them to
`trajschema.runtime.audit_step`. With ``parameter_sync_step`` > 1 the step's batch holds
one padding call per local step: each call's routes are spread on their own, so the
hottest expert is measured per call and the worst call reported.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trajschema.contract import is_padding
from trajschema.runtime import StepAudit, audit_step, expert_count
from trajschema.tq import bounded

if TYPE_CHECKING:
    from trajschema.schema import Schema  # annotations only: the audit reads no Schema at import

__all__ = ["ADVANTAGE_FIELDS", "LOSS_MASK_FIELDS", "ROUTES_FIELD", "Ledger", "LocalStep", "audit_padding"]

#: The per-token masks a loss counts, read on padding rows when stored.
LOSS_MASK_FIELDS = ("response_mask", "loss_mask")
#: What verl's ``_compute_advantage`` writes that must be 0 on padding rows.
ADVANTAGE_FIELDS = ("advantages", "returns")
#: The routes a routing-replay sample stores.
ROUTES_FIELD = "routed_experts"
_LOAD = "trajschema/padding_expert_load"


@dataclasses.dataclass(frozen=True)
class LocalStep:
    """What one ``_balance_batch`` call did: its batch's first key, the actor's scales, and its padding.

    ``schema`` is the schema the padding was made with (``None`` when no padding was
    written, or the padding chose it where install() could not see it).
    """

    anchor: str | None
    scales: tuple[float, ...]
    schema: Schema | None = None
    padding: tuple[str, ...] = ()


class Ledger:
    """Per trainer, the local steps balanced since its last ``_compute_metrics`` (the trainer is held weakly)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._steps: weakref.WeakKeyDictionary[Any, list[LocalStep]] = weakref.WeakKeyDictionary()

    def add(self, trainer: Any, step: LocalStep) -> None:
        with self._lock:
            self._steps.setdefault(trainer, []).append(step)

    def take(self, trainer: Any, keys: Collection[str]) -> list[LocalStep]:
        """The trainer's local steps whose rows ``keys`` holds; the rest (a step that never reached here) dropped."""
        with self._lock:
            steps = self._steps.pop(trainer, [])
        return [s for s in steps if s.anchor in keys]

    def clear(self) -> None:
        with self._lock:
            self._steps.clear()


def audit_padding(client: Any, batch: Any, steps: Sequence[LocalStep], *, timeout_s: float | None) -> StepAudit:
    """The audit of one step's batch (a ``KVBatchMeta``), from its padding rows and its ``steps``' records.

    One ``kv_batch_get`` of the padding rows (every field: the schema check needs them);
    nothing when the batch has none.

    Raises:
        TimeoutError: the read took longer than ``timeout_s``.
    """
    scales = [s for step in steps for s in step.scales]
    at = [i for i, tag in enumerate(batch.tags) if is_padding(tag)]
    if not at:
        return audit_step([], seq_mean_scales=scales)
    keys = [batch.keys[i] for i in at]
    tags = [batch.tags[i] for i in at]
    rows = bounded(lambda: client.kv_batch_get(keys=keys, partition_id=batch.partition_id), timeout_s, "kv_batch_get")
    calls = _padding_calls(keys, steps)
    violations = [
        v
        for schema, where in calls
        if schema is not None
        for v in schema.batch_violations(_rows_at(rows, where), tags=[tags[i] for i in where], depth="values")
    ]
    columns = {name: _dense(rows.get(name)) for name in (*LOSS_MASK_FIELDS, *ADVANTAGE_FIELDS, ROUTES_FIELD)}
    mask = _token_mask(rows)
    whole = audit_step(
        [True] * len(keys),
        token_mask=mask,
        loss_masks=_present(columns, LOSS_MASK_FIELDS),
        advantages=_present(columns, ADVANTAGE_FIELDS),
        seq_mean_scales=scales,
        violations=violations,
    )
    routes = columns[ROUTES_FIELD]
    if routes is None:
        return whole
    loads = [_call_load(len(keys), where, schema, routes, mask) for schema, where in calls]
    worst = max(loads, key=lambda a: a.figures[_LOAD])
    return StepAudit({**whole.figures, _LOAD: worst.figures[_LOAD]}, whole.faults + worst.faults)


def _padding_calls(keys: Sequence[str], steps: Sequence[LocalStep]) -> list[tuple[Schema | None, list[int]]]:
    """Each padding call's positions among ``keys``, with its schema; rows no call recorded last, schema ``None``."""
    where = {k: i for i, k in enumerate(keys)}
    calls = []
    for step in steps:
        found = [where.pop(k) for k in step.padding if k in where]
        if found:
            calls.append((step.schema, found))
    if where:
        calls.append((None, sorted(where.values())))
    return calls


def _rows_at(rows: Any, where: list[int]) -> Any:
    """The rows at ``where`` (all of ``rows``, or a list of samples: indexing jagged columns needs newer torch)."""
    if len(where) == rows.batch_size[0]:
        return rows
    columns = {name: col.unbind() if isinstance(col, torch.Tensor) else col.tolist() for name, col in rows.items()}
    return [{name: values[i] for name, values in columns.items()} for i in where]


def _call_load(n: int, where: list[int], schema: Schema | None, routes: torch.Tensor, mask: Any) -> StepAudit:
    """The hottest expert of one padding call's routes, over the experts it spread over."""
    flags = torch.zeros(n, dtype=torch.bool)
    flags[where] = True
    return audit_step(flags, token_mask=mask, routes=routes, experts=_experts(schema, routes[flags], mask, flags))


def _experts(schema: Schema | None, routes: torch.Tensor, mask: Any, flags: torch.Tensor) -> int | None:
    """The pinned schema's expert count, else the largest id on the call's padding tokens + 1."""
    return expert_count(schema, routes[mask[flags].bool()] if mask is not None else routes)


def _dense(col: Any) -> torch.Tensor | None:
    """A per-row column as a dense ``(B, ...)`` tensor, zero-filled past each row's length; ``None`` if not one.

    Row by row (``pad_sequence``): jagged ``uint16`` routes have no padded-tensor kernel.
    """
    if not isinstance(col, torch.Tensor):
        return None
    if not col.is_nested:
        return col
    return torch.nn.utils.rnn.pad_sequence(list(col.unbind()), batch_first=True)


def _token_mask(rows: Any) -> torch.Tensor | None:
    """``attention_mask`` when stored, else 1 over each row's ``input_ids``."""
    mask = _dense(rows.get("attention_mask"))
    if mask is not None:
        return mask
    ids = rows.get("input_ids")
    if not isinstance(ids, torch.Tensor):
        return None
    if not ids.is_nested:
        return torch.ones(ids.shape[:2], dtype=torch.int64)
    lengths = torch.tensor([len(r) for r in ids.unbind()], dtype=torch.int64)
    return (torch.arange(int(lengths.max())) < lengths[:, None]).to(torch.int64)


def _present(columns: Mapping[str, torch.Tensor | None], names: Sequence[str]) -> dict[str, torch.Tensor]:
    return {n: t for n in names if (t := columns[n]) is not None}
