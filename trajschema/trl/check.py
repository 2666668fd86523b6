"""The ``trl_grpo`` layout as one GRPO trainer's settings shape it, and the metrics of one check.

TRL pads with its tokenizer's pad id, and with ``mask_truncated_completions=True`` it keeps
a truncated completion's tokens, tool mask and sampling log-probs under an all-zero
``completion_mask``:
[`grpo_layout`][trajschema.trl.grpo_layout] pins the one and lets those two fields' padded
regions hold anything for the other. [`check_metrics`][trajschema.trl.check_metrics] (the
trainer base's, shared with ``trajschema.openrlhf``) turns what a check found into the
``trajschema/*`` figures the drop-in adds to TRL's metrics.
"""

from __future__ import annotations

import dataclasses
import functools

from trajschema.core import ANY, Layout, check_bool, check_int
from trajschema.files import as_layout
from trajschema.runtime import CHECK_METRICS, check_metrics

__all__ = ["CHECK_METRICS", "TRL_LAYOUT", "check_metrics", "grpo_layout"]

#: The packaged layout of the dict ``GRPOTrainer._generate_and_score_completions`` returns.
TRL_LAYOUT = "trl_grpo"

#: The fields whose padded region a row truncated under ``mask_truncated_completions`` fills
#: with its tokens, its sampling log-probs, or zeros (``tool_mask``): TRL masks the row, not the tensors.
_TRUNCATION_KEEPS = ("responses", "sampling_per_token_logps", "tool_mask")


def grpo_layout(*, pad_token_id: int | None = None, mask_truncated_completions: bool = False) -> Layout:
    """The ``trl_grpo`` layout fitted to a ``GRPOTrainer``'s settings.

    Examples:
        >>> import trajschema.trl
        >>> lay = trajschema.trl.grpo_layout(pad_token_id=0, mask_truncated_completions=True)
        >>> lay.name, lay.pad_token_id, lay.fields["responses"].pad
        ('trl_grpo', 0, 'any')

    Args:
        pad_token_id: the trainer's tokenizer's pad id (``trainer.processing_class.pad_token_id``):
            ``prompt_ids`` and ``completion_ids`` must hold it in their padding. ``None``:
            one value throughout each, whichever it is.
        mask_truncated_completions: the trainer's ``GRPOConfig.mask_truncated_completions``.
            A truncated row then keeps its completion under an all-zero ``completion_mask``,
            so ``completion_ids``, ``sampling_per_token_logps`` and ``tool_mask`` are not
            checked past each row's mask.

    Raises:
        TypeError / ValueError: a bad argument.
        SchemaNotFoundError / LayoutDefinitionError: the packaged layout cannot be read.
    """
    check_bool("mask_truncated_completions", mask_truncated_completions)
    if pad_token_id is not None:
        check_int("pad_token_id", pad_token_id, minimum=0, maximum=2**63 - 1)
    return _fitted(pad_token_id, mask_truncated_completions)


@functools.lru_cache(maxsize=16)
def _fitted(pad_token_id: int | None, truncation: bool) -> Layout:
    layout = as_layout(TRL_LAYOUT)
    if truncation:
        kept = {n: dataclasses.replace(layout.fields[n], pad=ANY) for n in _TRUNCATION_KEEPS}
        layout = dataclasses.replace(layout, fields={**layout.fields, **kept})
    return layout if pad_token_id is None else layout.with_pad_token(pad_token_id)
