"""OpenRLHF 0.11.2's rollout, padded: schema-derived padding ``Experience``s and the multiple they fill to.

OpenRLHF hands its rollout around as a list of ``Experience`` dataclasses (one sample each
as the sample generator makes them; batches after ``split_rollout_samples``): the step
fields (``sequences``, ``attention_mask`` over the ``S`` tokens; ``action_mask`` and the
per-action tensors over the ``S - 1`` positions after the first) right-padded to the
longest sample of a batch, the episode fields one value per sample, the per-sample logs in
``info``. A padding experience is one such sample made from the schema's padding sample
([`Schema.padding`][trajschema.Schema.padding]): EOS tokens, an attention mask of ones (a
forward pass sees a non-empty row), a zero ``action_mask`` (no loss token), zero rewards,
scores, advantages and returns, and ``info["is_padding"] = True``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from trajschema.core import check_int
from trajschema.load import load_schema
from trajschema.schema import Schema

__all__ = [
    "EPISODE_FIELDS",
    "STEP_FIELDS",
    "mark_real",
    "pad_multiple",
    "pad_rollout_samples",
    "padding_experiences",
    "padding_flags",
    "real_count",
    "settings",
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
#: The per-sample list fields, and what a padding sample holds in each.
_LIST_FIELDS = {"prompts": "", "labels": "", "images": None, "mm_train_inputs": None}
#: The step fields a padding experience takes from the schema's padding sample (by its field).
_FROM_SAMPLE = {"action_mask": "response_mask", "rollout_log_probs": "rollout_log_probs"}
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
        values = flags.reshape(-1).tolist() if flags.dim() <= 1 else None
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


def mark_real(experiences: Iterable[Any]) -> None:
    """Give each experience without one ``info["is_padding"]``: ``False`` on every row.

    ``make_experience_batch`` keeps only the first experience's ``info`` keys and
    ``concat_experiences`` merges them key by key, so the tag must be on every experience.
    """
    for exp in experiences:
        if IS_PADDING not in exp.info:
            exp.info[IS_PADDING] = torch.zeros(experience_rows(exp), dtype=torch.bool)


def pad_multiple(args: Any, *, groups: Sequence[str] = ("actor",)) -> int:
    """The multiple of samples that gives every actor of ``groups`` the same number of whole
    micro-batches, read from OpenRLHF's ``args`` as its own code reads them.

    A group's effective actors are ``num_nodes * num_gpus_per_node // ring_attn_size //
    tensor_parallel_size`` (``async_run_method_batch`` deals the batches out to them in
    chunks of ``ceil(batches / actors)``). Without ``train.dynamic_batch_enable`` the rollout
    goes out in batches of ``rollout.micro_batch_size`` and each actor trains in micro-batches
    of ``train.micro_batch_size`` (its DataLoader drops a short last one), so a group needs a
    multiple of ``actors * lcm(rollout.micro_batch_size, train.micro_batch_size)``; with it,
    ``balance_experiences`` deals the samples out one by one: a multiple of ``actors``.

    Raises:
        TypeError / ValueError: a size ``args`` gives is no int >= 1.
    """
    ds = args.ds
    split = check_int("ds.ring_attn_size", ds.ring_attn_size, minimum=1) * check_int(
        "ds.tensor_parallel_size", ds.tensor_parallel_size, minimum=1
    )
    per_actor = 1
    if not args.train.dynamic_batch_enable:
        per_actor = math.lcm(
            check_int("rollout.micro_batch_size", args.rollout.micro_batch_size, minimum=1),
            check_int("train.micro_batch_size", args.train.micro_batch_size, minimum=1),
        )
    multiple = 1
    for name in groups:
        group = getattr(args, name)
        gpus = check_int(f"{name}.num_nodes", group.num_nodes, minimum=1) * check_int(
            f"{name}.num_gpus_per_node", group.num_gpus_per_node, minimum=1
        )
        multiple = math.lcm(multiple, max(gpus // split, 1) * per_actor)
    return multiple


def padding_experiences(
    like: Any,
    count: int,
    *,
    schema: Schema | None = None,
    eos_token_id: int | None = None,
) -> list[Any]:
    """``count`` one-sample padding experiences of ``like``'s class, with ``like``'s fields.

    Each is the schema's padding sample laid out as OpenRLHF's sample generator lays out a
    sample (``(1, S)`` step fields, ``(1,)`` episode fields, one-entry lists): ``S`` is row
    0's real length (at least 2), so a padding sample widens no batch it joins; the
    sequence is EOS tokens, ``attention_mask`` ones; ``action_mask`` and every per-action
    tensor ``like`` holds (log-probs, values, advantages, returns, ``kl``) zeros over the
    ``S - 1`` positions; rewards, scores, ``response_length`` and ``truncated`` zero,
    ``total_length`` ``S``; ``info`` ``like``'s keys with zeros and ``is_padding`` ``True``.
    A field ``like`` leaves ``None`` stays ``None``.

    Args:
        like: an experience of the batch being padded (its row 0 real).
        count: how many (an int >= 0).
        schema: the schema of the samples (default: ``install(schema=)``, else ``text``).
        eos_token_id: the EOS id (default: ``install(eos_token_id=)``, else the last real
            token of ``like``'s row 0).

    Raises:
        TypeError: ``like`` is no ``Experience``; a step or episode field is not a tensor
            with one row per sample.
        ValueError: ``count`` < 0; ``like``'s row 0 has no real token.
    """
    count = check_int("count", count)
    rows = experience_rows(like)
    _check_fields(like, rows)
    chosen = schema_of(schema)
    mask = like.attention_mask
    length = int(mask[0].sum()) if isinstance(mask, torch.Tensor) else int(like.sequences.shape[1])
    if length < 1:
        raise ValueError("like's row 0 has no real token (its attention_mask is all 0): nothing to shape padding on")
    eos = _eos(like, length, eos_token_id)
    dims = {"prompt": max(1, length - 1), "response": 1}
    made = chosen.padding(count, eos_token_id=eos, dims=dims).samples if count else []
    return [_experience(like, sample) for sample in made]


def schema_of(schema: Schema | None) -> Schema:
    """``schema``, else ``install(schema=)``'s, else ``text``."""
    chosen = schema if schema is not None else settings.get("schema")
    chosen = chosen if chosen is not None else load_schema("text")
    if not isinstance(chosen, Schema):
        raise TypeError(f"schema must be a trajschema.Schema, found {type(chosen).__name__}")
    return chosen


def _eos(like: Any, length: int, given: int | None) -> int:
    eos = given if given is not None else settings.get("eos_token_id")
    if eos is None:
        eos = int(like.sequences[0, length - 1])
    return check_int("eos_token_id", eos, minimum=0)


def _check_fields(like: Any, rows: int) -> None:
    for name in (*STEP_FIELDS, *EPISODE_FIELDS):
        value = getattr(like, name, None)
        if value is None:
            continue
        ndim = 2 if name in STEP_FIELDS else 1
        if not isinstance(value, torch.Tensor) or value.dim() < ndim or value.shape[0] != rows:
            raise TypeError(
                f"experience.{name} must be a tensor of {ndim}+ dims with one row per sample ({rows}), "
                f"found {shown(value)}"
            )


def _experience(like: Any, sample: Mapping[str, Any]) -> Any:
    """The schema's padding ``sample`` as one experience of ``like``'s class, laid out as
    `trajschema.openrlhf.layout` reads one (the inverse of its table): ``sequences`` the
    prompt then the response; ``attention_mask`` the sample's (ones when the schema has
    none); ``action_mask`` and ``rollout_log_probs`` the sample's ``response_mask`` and
    ``rollout_log_probs`` on the next-token positions of the response, 0 before; every
    other per-action field 0."""
    ids = torch.cat([sample["prompts"], sample["responses"]])
    seq, first = ids.numel(), sample["prompts"].numel() - 1
    out: dict[str, Any] = {}
    for f in dataclasses.fields(like):
        value = getattr(like, f.name)
        if f.name == "sequences":
            out[f.name] = ids.to(value.dtype).reshape(1, seq)
        elif f.name == "attention_mask" and isinstance(value, torch.Tensor):
            mask = sample.get("attention_mask")
            out[f.name] = value.new_ones((1, seq)) if mask is None else mask.to(value.dtype).reshape(1, seq)
        elif f.name in STEP_FIELDS and isinstance(value, torch.Tensor):
            out[f.name] = value.new_zeros((1, seq - 1, *value.shape[2:]))
            held = sample.get(_FROM_SAMPLE.get(f.name, ""))
            if isinstance(held, torch.Tensor) and value.dim() == 2:
                out[f.name][0, first:] = held.to(value.dtype)
        elif f.name == "total_length" and isinstance(value, torch.Tensor):
            out[f.name] = value.new_full((1, *value.shape[1:]), seq)
        elif f.name in EPISODE_FIELDS and isinstance(value, torch.Tensor):
            out[f.name] = value.new_zeros((1, *value.shape[1:]))
        elif f.name == "info":
            out[f.name] = _padding_info(value)
        elif f.name in _LIST_FIELDS and isinstance(value, list):
            out[f.name] = [_LIST_FIELDS[f.name]] if value else []
        elif f.name != "index":
            out[f.name] = None if value is None else type(value)()
    return type(like)(**out)


def _padding_info(info: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, torch.Tensor) and value.dim() >= 1:
            out[key] = value.new_zeros((1, *value.shape[1:]))
        elif isinstance(value, list):
            out[key] = [None]
        else:
            raise TypeError(f"experience.info[{key!r}] must be a (B, ...) tensor or a list, found {shown(value)}")
    out[IS_PADDING] = torch.ones(1, dtype=torch.bool)
    return out


def pad_rollout_samples(
    samples: Sequence[Any],
    multiple: int,
    *,
    schema: Schema | None = None,
    eos_token_id: int | None = None,
) -> list[Any]:
    """``samples`` and, after them, the padding experiences that bring the rows to a multiple of ``multiple``.

    The drop-in's step before OpenRLHF's ``split_rollout_samples``: with the padding samples
    last, OpenRLHF numbers them after every real one (``sample.index``), so the real ones
    keep their order and groups. Every real experience gains ``info["is_padding"] = False``
    (`mark_real`); nothing is changed when an argument is refused.

    Examples:
        >>> padded = pad_rollout_samples(rollout, 4)  # doctest: +SKIP
        >>> [bool(e.info["is_padding"]) for e in padded]  # 5 real samples, 3 padding  # doctest: +SKIP
        [False, False, False, False, False, True, True, True]

    Args:
        samples: OpenRLHF ``Experience``s (the rollout).
        multiple: the multiple (`pad_multiple`), an int >= 1.
        schema: as for `padding_experiences`.
        eos_token_id: as for `padding_experiences`.

    Raises:
        TypeError: ``samples`` is not a list of ``Experience``s of one class.
        ValueError: no sample; ``multiple`` < 1; a sample already tagged all padding leads.
    """
    multiple = check_int("multiple", multiple, minimum=1)
    if isinstance(samples, (str, bytes)) or not isinstance(samples, Sequence):
        raise TypeError(f"samples must be a list of OpenRLHF Experiences, found {type(samples).__name__}")
    if not samples:
        raise ValueError("no rollout samples: there is nothing to pad or to shape padding on")
    rows = [experience_rows(s) for s in samples]
    kinds = {type(s) for s in samples}
    if len(kinds) > 1:
        raise TypeError(f"samples must be Experiences of one class, found {sorted(k.__name__ for k in kinds)}")
    first = padding_flags(samples[0])
    if first and first[0]:
        raise ValueError("samples[0] row 0 is padding: the first sample must be a real one (padding comes last)")
    padding = padding_experiences(samples[0], (-sum(rows)) % multiple, schema=schema, eos_token_id=eos_token_id)
    mark_real(samples)
    return [*samples, *padding]


def real_count(experiences: Iterable[Any]) -> int:
    """How many rows of ``experiences`` are real."""
    return sum(1 for e in experiences for p in padding_flags(e) if not p)
