"""The ``RayPPOTrainer`` steps [`install`][trajschema.skyrl.install] wraps: SkyRL's own, on the real rows.

Each wrapper calls SkyRL's own method. The steps that compute over the batch
(``apply_reward_kl_penalty``, ``compute_advantages_and_returns``, ``_normalize_advantages``)
run it on the real rows alone (``metadata["is_padding"]``), so the real rows get exactly
what a never-padded run gives them, and the padding rows get exact zeros. When no row is
padding, SkyRL's method runs on the batch itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from trajschema.core import is_int
from trajschema.dropin import padding_metrics as shared_padding_metrics
from trajschema.dropin import zeros_on_padding
from trajschema.skyrl.pad import PER_ROW_METADATA, first_real, real_rows, rows_of, token_ids
from trajschema.skyrl.workers import forward_batch

__all__ = [
    "advantages_for",
    "convert_for",
    "execute_forward_for",
    "forward_pass_for",
    "kl_penalty_for",
    "normalize_for",
    "padding_metrics",
    "real_part",
]


def convert_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``convert_to_training_input``: SkyRL's, with the trainer's tokenizer's EOS and pad ids
    made known to the padding."""

    def convert_to_training_input(self: Any, generator_output: Any, uids: Any) -> Any:
        tok = getattr(self, "tokenizer", None)
        ids = {k: getattr(tok, k, None) for k in ("eos_token_id", "pad_token_id")}
        token = token_ids.set({k: v for k, v in ids.items() if is_int(v)})
        try:
            return original(self, generator_output, uids)
        finally:
            token_ids.reset(token)

    return convert_to_training_input


def forward_pass_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``fwd_logprobs_values_reward``: SkyRL's, with its batch made known to ``stage_chunks``,
    which pads the forward passes' column selections with that batch's padding rows."""

    def fwd_logprobs_values_reward(self: Any, training_input: Any) -> Any:
        token = forward_batch.set(training_input)
        try:
            return original(self, training_input)
        finally:
            forward_batch.reset(token)

    return fwd_logprobs_values_reward


def execute_forward_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``_execute_forward_pass``: SkyRL's, its per-mini-batch outputs put back on their rows.

    With ``recompute_old_logprobs_per_minibatch`` SkyRL concatenates each mini-batch's outputs,
    the padding rows ``stage_chunks`` added included, and the trainer reads the result as one
    row per batch row: every mini-batch after a padded one is shifted onto the wrong rows.
    Here each mini-batch's outputs go to its own rows, and rows outside every mini-batch (the
    trainer's padding) get zeros, unless SkyRL's outputs already lie one per row on their rows.
    """

    def _execute_forward_pass(self: Any, model: str, data_fwd_pass: Any, key: str, mini_batch_boundaries: Any) -> Any:
        out = original(self, model, data_fwd_pass, key, mini_batch_boundaries)
        if not (self.cfg.trainer.recompute_old_logprobs_per_minibatch and mini_batch_boundaries):
            return out
        return realigned(out, mini_batch_boundaries, self.dispatch.dp_size(model), len(data_fwd_pass))

    return _execute_forward_pass


def realigned(out: torch.Tensor, boundaries: Sequence[tuple[int, int]], dp_size: int, rows: int) -> torch.Tensor:
    """``out`` (each mini-batch's rows, then its ``stage_chunks`` padding rows) as ``rows`` rows,
    each mini-batch's outputs on its own rows, zeros elsewhere; ``out`` itself when it already is."""
    spans = []
    at = 0
    for start, end in boundaries:
        spans.append((start, end, at))
        at += end - start + (-(end - start)) % dp_size
    if all(s == a for s, _, a in spans) and len(out) == rows == at:
        return out
    full = out.new_zeros((rows, *out.shape[1:]))
    for start, end, a in spans:
        full[start:end] = out[a : a + end - start]
    return full


def kl_penalty_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``apply_reward_kl_penalty``: SkyRL's on the real rows (its ``avg_kl`` and the KL
    controller's update see no padding row)."""

    def apply_reward_kl_penalty(self: Any, data: Any) -> Any:
        real = _real(data)
        if all(real):
            return original(self, data)
        return on_real_rows(original, self, data, real, ("rewards",))

    return apply_reward_kl_penalty


def advantages_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``compute_advantages_and_returns``: SkyRL's on the real rows, exact zeros on the padding
    rows, and ``padding/samples``, ``padding/tokens``, ``padding/share`` in the trainer's metrics."""

    def compute_advantages_and_returns(self: Any, data: Any) -> Any:
        real = _real(data)
        if all(real):
            out = original(self, data)
        else:
            out = on_real_rows(original, self, data, real, ("advantages", "returns"), to_cpu=True)
        self.all_metrics.update(padding_metrics(out, real))
        return out

    return compute_advantages_and_returns


def normalize_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``_normalize_advantages``: SkyRL's on the real rows, so that the mean and std of
    ``advantage_batch_normalize`` are the real rows'. The mini-batch and prompt boundaries
    SkyRL computed from the uids before padding index exactly those rows."""

    def _normalize_advantages(self: Any, data: Any, mini_batch_boundaries: Any, prompt_boundaries: Any = None) -> Any:
        real = _real(data)
        if all(real):
            return original(self, data, mini_batch_boundaries, prompt_boundaries)
        return on_real_rows(original, self, data, real, ("advantages",), mini_batch_boundaries, prompt_boundaries)

    return _normalize_advantages


def _real(data: Any) -> list[bool]:
    n = len(data)
    real = real_rows(data.metadata or {}, n)
    first_real(real, n)
    return real


def on_real_rows(
    step: Callable[..., Any],
    trainer: Any,
    data: Any,
    real: list[bool],
    outputs: Sequence[str],
    *args: Any,
    to_cpu: bool = False,
) -> Any:
    """SkyRL's ``step`` on the real rows of ``data``, its ``outputs`` written back into ``data``
    (zeros on the padding rows), and the batch-level metadata it set (``metrics``) kept."""
    done = step(trainer, real_part(data, real), *args)
    if to_cpu:
        data = data.to("cpu")  # as SkyRL's advantage step returns it (moved in place)
    index = [i for i, r in enumerate(real) if r]
    for key in outputs:
        data[key] = zeros_on_padding(done[key], index, len(real))
    if data.metadata is None:
        data.metadata = {}
    for key, value in (done.metadata or {}).items():
        if key not in PER_ROW_METADATA and key != "pad_size":
            data.metadata[key] = value
    return data


def real_part(data: Any, real: Sequence[bool]) -> Any:
    """The real rows of ``data``, a view when they come first, their per-row metadata cut, ``pad_size`` 0."""
    n = sum(real)
    if all(real[:n]):
        part = rows_of(data, 0, n)
    else:
        index = torch.tensor([i for i, r in enumerate(real) if r], dtype=torch.long)
        part = type(data)({k: (None if v is None else v[index.to(_device(v))]) for k, v in data.items()})
        part.metadata = {
            k: ([x for x, r in zip(v, real, strict=True) if r] if k in PER_ROW_METADATA and v is not None else v)
            for k, v in (data.metadata or {}).items()
        }
    part.metadata["pad_size"] = 0
    return part


def _device(value: Any) -> Any:
    return getattr(value, "device", None) or torch.device("cpu")


def padding_metrics(batch: Any, real: list[bool]) -> dict[str, float]:
    """The ``padding/*`` metrics of every drop-in (`trajschema.dropin.padding_metrics`); the
    padding rows' tokens are their ``attention_mask``'s ones."""
    pad = [i for i, r in enumerate(real) if not r]
    mask = batch.get("attention_mask")
    tokens = float(mask[pad].sum()) if pad and isinstance(mask, torch.Tensor) else 0.0
    return shared_padding_metrics([not r for r in real], tokens)
