"""OpenRLHF 0.11.2's rollout, padded: schema-derived padding ``Experience``s and the multiple they fill to.

A padding experience is one such sample made from the schema's padding sample
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

from trajschema.core import SchemaError, check_bool, check_int, fits_dtype
from trajschema.openrlhf.experience import (
    EPISODE_FIELDS,
    IS_PADDING,
    STEP_FIELDS,
    experience_rows,
    padding_flags,
    schema_of,
    settings,
    shown,
)
from trajschema.openrlhf.layout import read_layout
from trajschema.schema import Schema

__all__ = ["mark_real", "pad_multiple", "pad_rollout_samples", "padding_experiences", "real_count"]

#: The per-sample list fields, and what a padding sample holds in each.
_LIST_FIELDS = {"prompts": "", "labels": "", "images": None, "mm_train_inputs": None}
#: The step fields a padding experience takes from the schema's padding sample (by its field).
_FROM_SAMPLE = {"action_mask": "response_mask", "rollout_log_probs": "rollout_log_probs"}


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
    if isinstance(groups, str) or not isinstance(groups, Sequence):
        raise TypeError(f"groups must be a sequence of args section names, found {type(groups).__name__} {groups!r}")
    split = _size(args, "ds.ring_attn_size") * _size(args, "ds.tensor_parallel_size")
    per_actor = 1
    if not check_bool("train.dynamic_batch_enable", _setting(args, "train.dynamic_batch_enable")):
        per_actor = math.lcm(_size(args, "rollout.micro_batch_size"), _size(args, "train.micro_batch_size"))
    multiple = 1
    for name in groups:
        gpus = _size(args, f"{name}.num_nodes") * _size(args, f"{name}.num_gpus_per_node")
        multiple = math.lcm(multiple, max(gpus // split, 1) * per_actor)
    return multiple


def _setting(args: Any, path: str) -> Any:
    """``args.<path>`` (dotted), or a ``TypeError`` naming the missing part."""
    value = args
    for part in path.split("."):
        value = getattr(value, part, _MISSING)
        if value is _MISSING:
            raise TypeError(f"args has no {path} (OpenRLHF's args, as cli/train_ppo_ray.py builds them)")
    return value


def _size(args: Any, path: str) -> int:
    return check_int(path, _setting(args, path), minimum=1)


_MISSING = object()


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
    chosen = schema_of(schema)
    length = _real_length(like, chosen)
    eos = _eos(like, length, eos_token_id)
    dims = {"prompt": max(1, length - 1), "response": 1}
    made = chosen.padding(count, eos_token_id=eos, dims=dims).samples if count else []
    return [_experience(like, sample) for sample in made]


def _eos(like: Any, length: int, given: int | None) -> int:
    eos = given if given is not None else settings.get("eos_token_id")
    if eos is None:
        eos = int(like.sequences[0, length - 1])
    eos = check_int("eos_token_id", eos, minimum=0)
    if not fits_dtype(eos, like.sequences.dtype):
        raise ValueError(
            f"eos_token_id {eos} does not fit experience.sequences' dtype "
            f"({str(like.sequences.dtype).removeprefix('torch.')}): padding tokens would wrap"
        )
    return eos


def _real_length(like: Any, schema: Schema) -> int:
    """Row 0's real tokens, once ``like``'s layout (`trajschema.openrlhf.layout.read_layout`)
    is sound where padding is shaped on it: every field's shape, row 0's masks."""
    rows = read_layout(like)
    if not rows.lengths:
        raise ValueError("like has no row: padding experiences are shaped on its row 0")
    bad = [v for v in rows.found if v.code in ("mask", "shape") and v.sample in (None, 0)]
    if bad:
        error = SchemaError(bad, schema_name=schema.name)
        error.add_note("trajschema.openrlhf: padding experiences are shaped on the first real sample (row 0)")
        raise error
    return rows.lengths[0]


def _experience(like: Any, sample: Mapping[str, Any]) -> Any:
    """The schema's padding ``sample`` as one experience of ``like``'s class, laid out as
    `trajschema.openrlhf.layout` reads one (the inverse of its table): ``sequences`` the
    prompt then the response; ``attention_mask`` the sample's (ones when the schema has
    none); ``action_mask`` and ``rollout_log_probs`` the sample's ``response_mask`` and
    ``rollout_log_probs`` on the next-token positions of the response, 0 before; every
    other per-action field 0."""
    ids, first = _ids(sample)
    seq = ids.numel()
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


def _ids(sample: Mapping[str, Any]) -> tuple[torch.Tensor, int]:
    """The padding sample's tokens and the position its response starts after (``prompts`` then
    ``responses``; a schema with only ``input_ids`` gets a response-less row)."""
    if isinstance(sample.get("prompts"), torch.Tensor) and isinstance(sample.get("responses"), torch.Tensor):
        return torch.cat([sample["prompts"], sample["responses"]]), sample["prompts"].numel() - 1
    if isinstance(sample.get("input_ids"), torch.Tensor):
        return sample["input_ids"], sample["input_ids"].numel() - 1
    raise TypeError(
        "the schema's padding sample has no prompts and responses, nor input_ids: "
        f"OpenRLHF's sequences cannot be made from its fields ({', '.join(sorted(sample))})"
    )


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
    _padding_last(samples)
    padding = padding_experiences(samples[0], (-sum(rows)) % multiple, schema=schema, eos_token_id=eos_token_id)
    mark_real(samples)
    return [*samples, *padding]


def _padding_last(samples: Sequence[Any]) -> None:
    """Refuse a rollout that leads with a padding row, or has a real row after one."""
    rows = [(i, row, flag) for i, sample in enumerate(samples) for row, flag in enumerate(padding_flags(sample))]
    if rows and rows[0][2]:
        raise ValueError("samples[0] row 0 is padding: the first sample must be a real one (padding comes last)")
    first = next(((i, row) for i, row, flag in rows if flag), None)
    late = next(((i, row) for i, row, flag in rows if first and not flag and (i, row) > first), None)
    if first and late:
        raise ValueError(
            f"samples[{late[0]}] row {late[1]} is real but comes after padding (samples[{first[0]}] row "
            f"{first[1]}): padding comes last, after every real row"
        )


def real_count(experiences: Iterable[Any]) -> int:
    """How many rows of ``experiences`` are real."""
    return sum(1 for e in experiences for p in padding_flags(e) if not p)
