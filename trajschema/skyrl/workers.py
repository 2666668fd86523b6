"""SkyRL's mini-batches on the DP ranks and its workers' micro-batches, weighed as if never padded.

SkyRL 0.3.0 pads twice after the advantages: ``MeshDispatch.stage_chunks`` pads each
mini-batch to a multiple of the DP size, and ``TokenBasedBatchIterator`` adds padding
micro-batches so that every rank runs as many. Its workers weigh each micro-batch by
``len(micro) / len(chunk)`` and average per-micro-batch means over every micro-batch, the
padding ones included: the KL and entropy terms lose weight, ``clip_ratio``, the entropy and
the log-prob diffs are scaled down, ``importance_ratio`` of a padding micro-batch is NaN.

Under [`install`][trajschema.skyrl.install]:

- `stage_chunks` records in each chunk's metadata (``STAGING``) how it laid the mini-batch
  out over the ranks: each rank's padding flags and token counts.
- The micro-batch iterators tag every micro-batch with a `MicroPlan` (``MICRO``): which of
  its rows are real, its weight and the scale of its mean metrics.
- ``_forward_backward_micro`` runs SkyRL's own on the real rows of the micro-batch with
  weight ``dp * real rows / real rows of the mini-batch`` (SkyRL's ``len(micro) /
  len(chunk)`` exactly, when nothing is padded), and scales each metric SkyRL averages by
  ``dp * micro-batches per rank / micro-batches holding a real row``, so that SkyRL's mean
  over a rank's micro-batches and over the ranks is the mean over the real micro-batches. A
  micro-batch without a real row still runs (FSDP needs the same number of forward and
  backward passes on every rank) with weight 0, and reports neutral metrics: 0 for a mean
  or a sum, ``-inf`` for a maximum, ``inf`` for a minimum.
"""

from __future__ import annotations

import contextvars
import dataclasses
import importlib
import math
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from trajschema.skyrl.audit import collect
from trajschema.skyrl.pad import (
    PER_ROW_METADATA,
    first_real,
    pad_training_input_batch,
    padded_metadata,
    padding_rows,
    real_rows,
    rows_of,
    staged_layout,
)

__all__ = [
    "MICRO",
    "STAGING",
    "MicroPlan",
    "create_padding_microbatch",
    "forward_batch",
    "micro_for",
    "microbatch_indices_for",
    "real_microbatches",
    "reduction",
    "sample_iter_for",
    "stage_chunks_for",
    "staging",
]

#: The chunk metadata key of `staging`: how `stage_chunks` laid the mini-batch out over the ranks.
STAGING = "trajschema_staging"
#: The micro-batch metadata key of its `MicroPlan`.
MICRO = "trajschema_micro"

#: The batch ``RayPPOTrainer.fwd_logprobs_values_reward`` runs on: its forward passes stage a
#: selection of its columns, whose padding rows are taken from it.
forward_batch: contextvars.ContextVar[Any] = contextvars.ContextVar("trajschema_skyrl_forward", default=None)

_WORKER_UTILS = "skyrl.backends.skyrl_train.workers.worker_utils"
_PACKING = "skyrl.train.dataset.bin_packing"

#: What a micro-batch without a real row reports, by how SkyRL reduces the metric.
_NEUTRAL = {"mean": 0.0, "sum": 0.0, "max": -math.inf, "min": math.inf}


# -- staging: the mini-batch over the ranks ----------------------------------------------------


def stage_chunks_for(dispatch: Any) -> Callable[..., list[list[Any]]]:
    """``MeshDispatch.stage_chunks``: SkyRL's slicing and chunking, with per-row metadata cut to
    each chunk's rows, schema padding rows, and the `staging` record in every chunk."""

    def stage_chunks(cls: Any, dp_size: int, data: Any, mini_batch_boundaries: Any) -> list[list[Any]]:
        refs = []
        for start, end in mini_batch_boundaries:
            mini = staged_mini_batch(data, start, end, dp_size)
            size = len(mini) // dp_size
            refs.append([dispatch.ray.put(rows_of(mini, i, i + size)) for i in range(0, len(mini), size)])
        return refs

    return stage_chunks


def staged_mini_batch(data: Any, start: int, end: int, dp_size: int) -> Any:
    """Rows ``start:end`` of ``data``, padded to a multiple of ``dp_size``, with `staging` in its metadata."""
    mini = rows_of(data, start, end)
    pad = (-(end - start)) % dp_size
    if pad > 0:
        mini = _padded(mini, data, start, end, pad)
    mini.metadata["is_padding"] = [not r for r in real_rows(mini.metadata, len(mini))]
    mini.metadata[STAGING] = staging(mini, dp_size)
    if pad > 0:
        collect(mini, start, end)
    return mini


def _padded(mini: Any, data: Any, start: int, end: int, pad: int) -> Any:
    parent = forward_batch.get()
    if parent is None or not _selected_from(data, parent):
        return pad_training_input_batch(mini, pad, layout=staged_layout(mini.metadata))
    # a forward pass's selection of columns: the padding rows of the whole batch, those columns
    whole = pad_training_input_batch(rows_of(parent, start, end), pad, layout=staged_layout(parent.metadata))
    out = type(mini)({k: whole[k] for k in mini})
    out.metadata = padded_metadata(mini.metadata, len(mini), pad)
    return out


def _selected_from(data: Any, parent: Any) -> bool:
    seqs = data.get("sequences")
    return seqs is not None and seqs is parent.get("sequences") and set(data) <= set(parent)


def staging(mini: Any, dp_size: int) -> dict[str, list[list[Any]]]:
    """How a padded mini-batch lies over ``dp_size`` ranks: per rank, each row's padding flag
    and its token count (the ``attention_mask`` ones ``TokenBasedBatchIterator`` packs by)."""
    n = len(mini)
    size = n // dp_size
    flags = [not r for r in real_rows(mini.metadata or {}, n)]
    mask = mini.get("attention_mask")
    tokens = mask.sum(1).tolist() if isinstance(mask, torch.Tensor) else [0] * n
    return {
        "is_padding": [flags[i : i + size] for i in range(0, n, size)],
        "tokens": [tokens[i : i + size] for i in range(0, n, size)],
    }


def real_microbatches(
    stage: Mapping[str, Sequence[Sequence[Any]]], *, sample_batch_size: int = 0, max_tokens: int = 0
) -> int:
    """How many micro-batches of the mini-batch hold a real row, over all ranks: SkyRL's
    sample-based split (``sample_batch_size``) or its token-based packing (``max_tokens``)."""
    packer = None
    if max_tokens > 0:
        packer = importlib.import_module(_PACKING).make_seq_packer("balanced", bin_capacity=max_tokens)
    count = 0
    for flags, tokens in zip(stage["is_padding"], stage["tokens"], strict=True):
        if packer is not None:
            groups: list[Sequence[int]] = packer.pack(list(tokens))
        else:
            groups = [range(i, min(i + sample_batch_size, len(flags))) for i in range(0, len(flags), sample_batch_size)]
        count += sum(1 for g in groups if any(not flags[i] for i in g))
    return count


# -- the micro-batches' plans --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MicroPlan:
    """How one micro-batch counts: its real rows, its weight, the scale of its mean metrics.

    Attributes:
        real: the indices of its real rows.
        rows: how many rows it holds.
        weight: ``dp * len(real) / real rows of the mini-batch``.
        scale: ``dp * micro-batches per rank / micro-batches holding a real row``.
    """

    real: tuple[int, ...]
    rows: int
    weight: float
    scale: float

    def real_part(self, experience: Any) -> Any:
        """``experience`` (SkyRL's ``Experience``) cut to the real rows (itself when all are, or none)."""
        if len(self.real) in (0, self.rows):
            return experience
        index = list(self.real)
        changes: dict[str, Any] = {}
        for f in dataclasses.fields(experience):
            value = getattr(experience, f.name)
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == self.rows:
                changes[f.name] = value[torch.tensor(index, device=value.device)]
            elif hasattr(value, "tensors") and len(value) == self.rows:  # a TensorList
                changes[f.name] = type(value)([value.tensors[i] for i in index])
        return dataclasses.replace(experience, **changes)

    def reported(self, metrics: Mapping[str, Any], *, summed: bool) -> dict[str, Any]:
        """``metrics`` as the micro-batch reports them: means scaled, neutral without a real
        row, and the per-row ``loss_fn_outputs`` back to one per row."""
        out: dict[str, Any] = {}
        for key, value in metrics.items():
            if key == "loss_fn_outputs":
                out[key] = self._outputs(value)
            elif not isinstance(value, (int, float)) or isinstance(value, bool):
                out[key] = value
            elif not self.real:
                out[key] = _NEUTRAL[reduction(key, summed=summed)]
            elif reduction(key, summed=summed) == "mean":
                out[key] = value * self.scale
            else:
                out[key] = value
        return out

    def _outputs(self, outputs: Sequence[Mapping[str, Any]]) -> list[Any]:
        if len(self.real) in (0, self.rows):
            return list(outputs)
        # a padding row's output, as SkyRL builds it for a row with no response mask
        empty: dict[str, list[Any]] = {k: [] for k in (outputs[0] if outputs else {"logprobs": []})}
        given = iter(outputs)
        real = set(self.real)
        return [next(given) if i in real else dict(empty) for i in range(self.rows)]


def reduction(key: str, *, summed: bool) -> str:
    """How SkyRL's ``reduce_metrics`` (and ``all_reduce_metrics``) reduce ``key``: ``max``,
    ``min``, ``sum`` (a pre-scaled loss, when ``summed``), else ``mean``."""
    if key.endswith("_max"):
        return "max"
    if key.endswith("_min"):
        return "min"
    mean_losses = importlib.import_module(_WORKER_UTILS).MEAN_LOSS_METRICS
    if summed and (key == "loss" or key.endswith("_loss")) and key not in mean_losses:
        return "sum"
    return "mean"


def _micro_metadata(chunk_meta: Mapping[str, Any], rows: Sequence[int], count: int, real_micros: int) -> dict[str, Any]:
    """The metadata of the micro-batch of chunk rows ``rows``: per-row lists cut, its `MicroPlan`."""
    n = len(chunk_meta["is_padding"])
    meta = {
        k: ([v[i] for i in rows] if k in PER_ROW_METADATA and v is not None and len(v) == n else v)
        for k, v in chunk_meta.items()
    }
    stage = chunk_meta[STAGING]
    dp = len(stage["is_padding"])
    total = sum(1 for flags in stage["is_padding"] for f in flags if not f)
    real = tuple(j for j, i in enumerate(rows) if not chunk_meta["is_padding"][i])
    meta[MICRO] = MicroPlan(real, len(rows), (dp * len(real)) / total, (dp * count) / real_micros)
    return meta


def _stage_of(data: Any) -> Mapping[str, Any] | None:
    meta = getattr(data, "metadata", None) or {}
    return meta.get(STAGING) if "is_padding" in meta else None


def sample_iter_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``SampleBasedBatchIterator.__iter__``: SkyRL's micro-batches, each tagged with its `MicroPlan`."""

    def __iter__(self: Any) -> Iterator[Any]:
        chunks = original(self)
        if _stage_of(self.data) is None:
            return chunks
        return _tagged(self, chunks)

    return __iter__


def _tagged(it: Any, chunks: Iterator[Any]) -> Iterator[Any]:
    size, n = it.sample_batch_size, len(it.data)
    real_micros = real_microbatches(_stage_of(it.data) or {}, sample_batch_size=size)
    for j, micro in enumerate(chunks):
        rows = range(j * size, min(n, (j + 1) * size))
        micro.metadata = _micro_metadata(it.data.metadata, rows, len(it), real_micros)
        yield micro


#: Per token-based iterator, its real micro-batch count (computed at its first micro-batch).
_real_micros: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def microbatch_indices_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``TokenBasedBatchIterator._create_microbatch_from_indices``: SkyRL's, tagged with its `MicroPlan`."""

    def _create_microbatch_from_indices(self: Any, indices: list[int]) -> Any:
        micro = original(self, indices)
        stage = _stage_of(self.data)
        if stage is not None:
            if self not in _real_micros:
                _real_micros[self] = real_microbatches(stage, max_tokens=self._max_tokens_per_microbatch)
            micro.metadata = _micro_metadata(self.data.metadata, indices, len(self), _real_micros[self])
        return micro

    return _create_microbatch_from_indices


def create_padding_microbatch(self: Any) -> Any:
    """``TokenBasedBatchIterator._create_padding_microbatch``: one schema padding row (zero masks,
    EOS tokens, spread routes) instead of random tokens, a response mask of ones and every
    token on expert 0; a `MicroPlan` without real rows when the chunk was staged."""
    data = self.data
    meta = dict(data.metadata or {})
    n = len(data)
    first = first_real(real_rows(meta, n), n)
    rows = padding_rows(data, 1, first, layout=staged_layout(meta))
    lists = {k: type(data[k]) for k, v in rows.items() if v is not None and not isinstance(v, torch.Tensor)}
    out = type(data)({k: lists[k](v) if k in lists else v for k, v in rows.items()})
    # SkyRL's padding micro-batch carries the data's metadata; its per-row lists are the padding row's
    per_row: dict[str, list[Any]] = {k: [] for k in PER_ROW_METADATA if k in meta}
    out.metadata = padded_metadata({**meta, **per_row}, 0, 1)
    out.metadata["pad_size"] = meta.get("pad_size", 0)
    out.metadata["is_padding_batch"] = True
    if STAGING in meta:
        out.metadata[MICRO] = MicroPlan((), 1, 0.0, 1.0)
    return out


# -- the workers' micro-batch step ---------------------------------------------------------------


def micro_for(original: Callable[..., Any], *, critic: bool) -> Callable[..., Any]:
    """``PolicyWorkerBase._forward_backward_micro`` (``critic=False``) or ``CriticWorkerBase``'s:
    SkyRL's own on the real rows of a planned micro-batch, weighted and reported by its `MicroPlan`."""
    if critic:

        def critic_micro(self: Any, experience: Any, microbatch_weight: float | None = None) -> Any:
            plan = _plan_of(experience)
            if plan is None:
                return _unplanned(original(self, experience, microbatch_weight), experience)
            weight = plan.weight if microbatch_weight is not None else (None if plan.real else 0.0)
            if microbatch_weight is None:
                # sample-based: optim_step divides the summed gradient by the micro-batches counted
                # (SkyRL adds 1 per micro-batch); 1 / scale each makes that the real ones per rank
                counted = getattr(self, "_micro_batches_accumulated", 0)
                self._micro_batches_accumulated = counted + 1 / plan.scale - 1
            metrics = original(self, plan.real_part(experience), weight)
            return plan.reported(metrics, summed=False)

        critic_micro.__name__ = "_forward_backward_micro"
        return critic_micro

    def _forward_backward_micro(
        self: Any, experience: Any, microbatch_weight: float, loss_fn: Any = None, loss_fn_config: Any = None
    ) -> Any:
        plan = _plan_of(experience)
        if plan is None:
            metrics = original(self, experience, microbatch_weight, loss_fn=loss_fn, loss_fn_config=loss_fn_config)
            return _unplanned(metrics, experience)
        part = plan.real_part(experience)
        metrics = original(self, part, plan.weight, loss_fn=loss_fn, loss_fn_config=loss_fn_config)
        return plan.reported(metrics, summed=True)

    return _forward_backward_micro


def _plan_of(experience: Any) -> MicroPlan | None:
    plan = (getattr(experience, "metadata", None) or {}).get(MICRO)
    return plan if isinstance(plan, MicroPlan) else None


def _unplanned(metrics: Any, experience: Any) -> Any:
    """A micro-batch of a chunk `stage_chunks` did not stage: SkyRL's metrics, but a padding
    micro-batch's scalars dropped (as SkyRL's Megatron worker does)."""
    meta = getattr(experience, "metadata", None) or {}
    if meta.get("is_padding_batch") is True and isinstance(metrics, dict):
        return {k: v for k, v in metrics.items() if k == "loss_fn_outputs"}
    return metrics
