"""An OpenRLHF 0.11.2 ``Experience`` as every part of ``trajschema.openrlhf`` reads it: its
fields by role, its rows, its ``is_padding`` tags, and what ``install()`` was given.

OpenRLHF hands its rollout around as a list of ``Experience`` dataclasses (one sample each
as the sample generator makes them; batches after ``split_rollout_samples``): the step
fields (``sequences``, ``attention_mask`` over the ``S`` tokens; ``action_mask`` and the
per-action tensors over the ``S - 1`` positions after the first) right-padded to the
longest sample of a batch, the episode fields one value per sample, the per-sample logs in
``info``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from trajschema.load import load_schema
from trajschema.schema import Schema

__all__ = [
    "EPISODE_FIELDS",
    "IS_PADDING",
    "STEP_FIELDS",
    "experience_rows",
    "padding_flags",
    "schema_of",
    "settings",
    "shown",
]

#: What ``install()`` was given (``schema``, ``eos_token_id``, ``audit``): process-wide.
settings: dict[str, Any] = {}

#: ``Experience``'s fields over the tokens (``sequences``, ``attention_mask``) or the
#: actions, right-padded by OpenRLHF (``tensor_field("step")``).
STEP_FIELDS = (
    "sequences",
    "attention_mask",
    "action_mask",
    "action_log_probs",
    "base_action_log_probs",
    "rollout_log_probs",
    "values",
    "returns",
    "advantages",
    "kl",
)
#: ``Experience``'s per-sample fields (``tensor_field("episode")``).
EPISODE_FIELDS = ("rewards", "scores", "response_length", "truncated", "total_length")
#: The info key every experience carries under ``install()``.
IS_PADDING = "is_padding"


def padding_flags(experience: Any) -> list[bool]:
    """Each row's ``info["is_padding"]`` (all ``False`` when the experience has none).

    Raises:
        TypeError: ``experience`` is no OpenRLHF ``Experience`` (no ``sequences`` tensor, no ``info`` dict).
        ValueError: ``info["is_padding"]`` does not hold one bool per row.

    Examples:
        >>> padding_flags(experience)  # doctest: +SKIP
        [False, False, True]
    """
    rows = experience_rows(experience)
    flags = experience.info.get(IS_PADDING)
    if flags is None:
        return [False] * rows
    if isinstance(flags, torch.Tensor):
        readable = not flags.is_meta and not flags.is_nested and flags.layout == torch.strided and flags.dim() <= 1
        values = flags.reshape(-1).tolist() if readable else None
    elif isinstance(flags, (list, tuple)):
        values = [bool(f) if isinstance(f, torch.Tensor) and f.numel() == 1 else f for f in flags]
    else:
        values = None
    if values is None or len(values) != rows or not all(isinstance(v, bool) for v in values):
        raise ValueError(f"experience.info['is_padding'] must hold one bool per row ({rows}), found {shown(flags)}")
    return values


def experience_rows(experience: Any) -> int:
    """The rows of an ``Experience`` (its ``(B, S)`` ``sequences``), refusing anything else with a ``TypeError``."""
    seqs = getattr(experience, "sequences", None)
    if not dataclasses.is_dataclass(experience) or not isinstance(seqs, torch.Tensor) or seqs.dim() != 2:
        raise TypeError(
            "expected an OpenRLHF Experience with a (B, S) sequences tensor, found "
            f"{type(experience).__name__} with sequences {shown(seqs)}"
        )
    if seqs.is_nested or seqs.is_meta:
        raise TypeError(f"experience.sequences must hold its values (a strided tensor), found {shown(seqs)}")
    if not isinstance(getattr(experience, "info", None), dict):
        raise TypeError(f"experience.info must be a dict, found {shown(getattr(experience, 'info', None))}")
    return int(seqs.shape[0])


def shown(value: Any) -> str:
    """A value as a message shows it: a tensor's dtype and shape (``nested``/``meta`` said), else its type."""
    if isinstance(value, torch.Tensor):
        kind = " nested" if value.is_nested else " meta" if value.is_meta else ""
        shape = "" if value.is_nested else str(list(value.shape))
        return f"{str(value.dtype).removeprefix('torch.')}{shape}{kind}"
    return type(value).__name__ if not isinstance(value, (bool, int, float, str)) else repr(value)


def schema_of(schema: Schema | None) -> Schema:
    """``schema``, else ``install(schema=)``'s, else ``text``."""
    chosen = schema if schema is not None else settings.get("schema")
    chosen = chosen if chosen is not None else load_schema("text")
    if not isinstance(chosen, Schema):
        raise TypeError(f"schema must be a trajschema.Schema, found {type(chosen).__name__}")
    return chosen
