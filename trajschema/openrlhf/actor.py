"""The actors' side of ``install()``: OpenRLHF 0.11.2's ``ActorPPOTrainer.training_step``, with
the metrics it returns read on the real rows.

``ppo_train`` calls ``training_step`` once per micro-batch and merges what it returns: each
metric weighted ``"token"`` (a 0-D tensor, times the micro-batch's action tokens) or
``"sample"`` (a per-row tensor's mean, times ``num_samples``), summed over the ranks, then
over the micro-batches. Padding rows hold no action token, so the token-weighted metrics
and the loss are theirs alone already; the wrapper (`training_step_for`) mends the rest:

- every per-row metric (``reward``, ``return``, ``response_length``, ``total_length``, the
  ``info`` logs) keeps its real rows, and ``num_samples`` counts only those, so the
  sample-weighted means are the real rows' (a micro-batch with none weighs 0);
- ``is_padding`` itself is not logged (it is an ``info`` entry, so OpenRLHF would log the
  padding share as if it were a metric of the samples);
- a sequence-level ``is_filter_ratio`` is the share of the real sequences filtered (in
  OpenRLHF 0.11.2 a padding row's per-sequence statistic is a masked mean over no token,
  0/0, which the ``mask`` gate, the only one it allows per sequence, always drops);
- a token-weighted metric of a micro-batch without action tokens (a masked mean over none:
  NaN) is 0, its weight: a NaN times 0 would make the step's whole figure NaN;
- an optimizer-step window without any action token on any rank (``batch_num_tokens`` or
  ``global_batch_size`` 0) is normalised by 1 instead of 0: its loss is 0 and its gradient
  zero, where OpenRLHF's would be 0/0, a NaN gradient applied to the weights.

The gradient is not otherwise touched. What the wrapper cannot mend (see ``docs/openrlhf.md``):
a step without an action token on any rank still divides by zero when ``ppo_train`` merges
its token-weighted metrics; the policy and entropy losses as logged depend on how the
tokens fall into micro-batches (as they do without padding); a mixture-of-experts router
loss (``actor.aux_loss_coef``) counts padding rows, whose attention masks are ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import torch

from trajschema.openrlhf.experience import IS_PADDING, padding_flags

__all__ = ["guarded_batch_info", "real_metrics", "training_step_for"]

#: ``loss_batch_info``'s denominators, per optimizer-step window over every rank.
DENOMINATORS = ("batch_num_tokens", "global_batch_size")


def training_step_for(original: Callable[..., Any]) -> Callable[..., Any]:
    """``ActorPPOTrainer.training_step``: OpenRLHF's own, with a window of no action token
    normalised by 1 (`guarded_batch_info`) and its metrics read on the real rows (`real_metrics`)."""

    @functools.wraps(original)
    def training_step(
        self: Any, experience: Any, kl_ctl: float, step: int, loss_batch_info: dict[str, Any] | None = None
    ) -> Any:
        status = original(self, experience, kl_ctl, step, guarded_batch_info(loss_batch_info))
        seq_level = getattr(getattr(self, "actor_loss_fn", None), "is_correction_level", None) == "seq"
        return real_metrics(status, padding_flags(experience), seq_level=seq_level)

    return training_step


def guarded_batch_info(info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``loss_batch_info`` with a denominator of 0 (a window without action tokens) made 1.

    Examples:
        >>> guarded_batch_info({"batch_num_tokens": 0, "global_batch_size": 4, "dp_size": 2})
        {'batch_num_tokens': 1, 'global_batch_size': 4, 'dp_size': 2}
    """
    if info is None:
        return None
    out = dict(info)
    for key in DENOMINATORS:
        value = out.get(key)
        if isinstance(value, torch.Tensor) and value.numel() == 1 and float(value) == 0:
            out[key] = torch.ones_like(value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0:
            out[key] = type(value)(1)
    return out


def real_metrics(status: dict[str, Any], padding: list[bool], *, seq_level: bool = False) -> dict[str, Any]:
    """``training_step``'s status with its metrics read on the real rows (module docstring).

    Args:
        status: what ``training_step`` returned (``metrics``, ``weights``, ``num_samples``,
            ``num_action_tokens``); changed in place and returned.
        padding: each row's ``is_padding``.
        seq_level: the policy loss corrects importance sampling per sequence, so its
            ``is_filter_ratio`` is a share of rows.
    """
    metrics, weights = status.get("metrics"), status.get("weights")
    if not isinstance(metrics, dict) or not isinstance(weights, dict):
        return status
    rows = len(padding)
    real = torch.tensor([not p for p in padding], dtype=torch.bool)
    count = int(real.sum())
    no_tokens = float(status.get("num_action_tokens", 1.0)) == 0
    metrics.pop(IS_PADDING, None)
    weights.pop(IS_PADDING, None)
    for key, value in list(metrics.items()):
        if not isinstance(value, torch.Tensor):
            continue
        if key == "is_filter_ratio" and seq_level and value.dim() == 0 and count < rows:
            metrics[key] = (value * rows - (rows - count)) / count if count else torch.zeros_like(value)
        elif weights.get(key) == "sample" and value.dim() >= 1 and value.shape[0] == rows:
            metrics[key] = value[real.to(value.device)] if count else value.new_zeros((1, *value.shape[1:]))
        elif weights.get(key) == "token" and no_tokens:
            metrics[key] = torch.nan_to_num(value, nan=0.0)
    status["num_samples"] = float(count)
    return status
