"""The is_padding contract: which samples are padding, and what padding may not do.

A trainer that grows a batch to the multiple a PPO/GRPO step needs adds synthetic
samples and marks each one ``is_padding=True`` in its tag dict (the dict that travels
beside the sample in TransferQueue). That tag is the *only* way to know a sample is
padding. Inferring padding from a zero loss mask is a bug: a real sample whose mask is
all zero (a truncated or filtered response) is still real, and dropping it from metrics
skews them. So [`is_padding`][trajschema.is_padding] reads the tag and nothing else, and refuses to guess
when the tag holds something other than a bool.

[`check_padding_contract`][trajschema.check_padding_contract] then checks that padding is inert: its loss and response
masks are zero, it has a GRPO group (uid) of its own, its length tags match its fields,
and a sample with a padding uid is tagged as padding.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trajschema.check import (
    BatchShapeError,
    BatchView,
    Plan,
    batch_of,
    check_batch,
    nonzero_per_row,
    tags_length_violation,
)
from trajschema.core import Batch, SchemaError, TagDict, Violation, describe_value
from trajschema.schema import Schema

__all__ = [
    "check_padding_contract",
    "is_padding",
    "padding_contract_violations",
    "real_count",
    "real_mask",
]

#: What [`new_padding_uid`][trajschema.new_padding_uid] makes: ``pad`` + 32 hex digits.
_PADDING_UID = re.compile(r"pad[0-9a-f]{32}")


def is_padding(tag: Mapping[str, Any] | None) -> bool:
    """Whether a sample's tag dict marks it as padding.

    Only ``is_padding`` exactly ``True`` does; a missing tag dict or key means a real
    sample. Masks are never consulted: a real sample whose loss mask is all zero is
    still real.

    Examples:
        >>> import trajschema as ts
        >>> ts.is_padding({"is_padding": True}), ts.is_padding({"seq_len": 9}), ts.is_padding(None)
        (True, False, False)

    Args:
        tag: the sample's tag dict, or ``None``.

    Raises:
        TypeError: ``tag`` is not a mapping, or its ``is_padding`` is not a bool (``1``,
            ``"true"``, ``None``, a tensor): the value is named rather than guessed at.
    """
    if tag is None:
        return False
    if not isinstance(tag, Mapping):
        raise TypeError(f"a tag dict must be a mapping or None, found {describe_value(tag)}")
    if "is_padding" not in tag:
        return False
    v = tag["is_padding"]
    if type(v) is not bool:
        raise TypeError(
            f"is_padding must be True or False, found {describe_value(v)}; "
            "trajschema does not guess whether a sample is padding"
        )
    return v


def real_mask(tags: Sequence[Mapping[str, Any] | None]) -> torch.Tensor:
    """A bool tensor of shape ``[len(tags)]``, True for the real (non-padding) samples.

    Examples:
        >>> import trajschema as ts
        >>> ts.real_mask([{}, {"is_padding": True}, {"is_padding": False}])
        tensor([ True, False,  True])

    Args:
        tags: one tag dict (or ``None``) per sample.

    Raises:
        TypeError: ``tags`` is not a sequence, or a tag is malformed (the message names
            its index), as for [`is_padding`][trajschema.is_padding].
    """
    return torch.tensor([not p for p in _padding_flags(tags)], dtype=torch.bool)


def real_count(tags: Sequence[Mapping[str, Any] | None]) -> int:
    """How many samples are real (not tagged ``is_padding=True``).

    Examples:
        >>> import trajschema as ts
        >>> ts.real_count([{}, {"is_padding": True}, None])
        2

    Args:
        tags: one tag dict (or ``None``) per sample.

    Raises:
        TypeError: as for [`real_mask`][trajschema.real_mask].
    """
    return sum(not p for p in _padding_flags(tags))


def _padding_flags(tags: Any) -> list[bool]:
    if not isinstance(tags, Sequence) or isinstance(tags, (str, bytes)):
        raise TypeError(f"tags must be a sequence of tag dicts, found {describe_value(tags)}")
    flags = []
    for i, tag in enumerate(tags):
        try:
            flags.append(is_padding(tag))
        except TypeError as e:
            raise TypeError(f"tags[{i}]: {e}") from None
    return flags


def padding_contract_violations(
    samples_or_batch: Batch,
    tags: Sequence[TagDict | None] | None,
    schema: Schema | str,
) -> list[Violation]:
    """Every way a batch breaks the is_padding contract; never raises for bad data.

    Like [`check_padding_contract`][trajschema.check_padding_contract], but returns the violations (in sample order)
    instead of raising.

    Examples:
        >>> import trajschema as ts
        >>> from trajschema.testing import verl_sample
        >>> schema = ts.load_schema("text")
        >>> real = verl_sample(schema, 5, 4, uid="q0")
        >>> pad = schema.padding(1, eos_token_id=2, like=real)
        >>> ts.padding_contract_violations([real, *pad.samples], [{}, *pad.tags], schema)
        []

    Args: as for [`check_padding_contract`][trajschema.check_padding_contract].

    Raises:
        TypeError: ``samples_or_batch`` is neither a list of samples nor a TensorDict
            (``batch[i]`` names a sample that is not a mapping), or ``schema`` is neither
            a Schema nor a name.
        SchemaNotFoundError: no schema has the name ``schema``.
    """
    from trajschema.load import resolve_schema

    plan = resolve_schema(schema).plan
    try:
        view = batch_of(samples_or_batch)
    except BatchShapeError as exc:
        size = list(samples_or_batch.batch_size)  # type: ignore[union-attr]  # only a TensorDict raises this
        return [Violation(None, "<batch>", "batch", "batch_size [B]", f"batch_size {size}", str(exc))]
    tag_list: list[Any] = [None] * view.n if tags is None else tags  # type: ignore[assignment]
    found = tags_length_violation(tag_list, view.n)
    if found:
        return found
    status = _padding_status(plan, tag_list, found)
    padding = [i for i, s in enumerate(status) if s]
    found += _mask_violations(plan, view, padding)
    found += _uid_violations(plan, view, tag_list, status)
    found += _length_tag_violations(plan, samples_or_batch, view, tag_list, padding)
    order = {name: k for k, name in enumerate([*plan.fields, *plan.tags])}
    found.sort(key=lambda v: (-1 if v.sample is None else v.sample, order.get(v.field, len(order))))
    return found


def _padding_status(plan: Plan, tags: Sequence[Any], found: list[Violation]) -> list[bool | None]:
    """Per sample: padding (True), real (False) or unknown (None: a malformed tag, reported in ``found``)."""
    status: list[bool | None] = []
    for i, tag in enumerate(tags):
        if isinstance(tag, Mapping) and "is_padding" not in tag:
            status.append(plan.padding_default)
            continue
        try:
            status.append(is_padding(tag))
        except TypeError:
            bad = tag["is_padding"] if isinstance(tag, Mapping) else tag
            field = "is_padding" if isinstance(tag, Mapping) else "<tag>"
            expected = "True or False" if isinstance(tag, Mapping) else "a mapping or None"
            found.append(
                Violation(
                    i,
                    field,
                    "tag",
                    expected,
                    describe_value(bad),
                    f"{field} must be {expected}, found {describe_value(bad)}; "
                    "trajschema does not guess whether a sample is padding",
                )
            )
            status.append(None)
    return status


def _mask_violations(plan: Plan, view: BatchView, padding: list[int]) -> list[Violation]:
    """A padding sample must add nothing to the loss or the response stats."""
    found = []
    columns = view.keys()
    for name in _zeroed_masks(plan):
        if name not in columns or not padding:
            continue
        rows: list[tuple[int, int, int]] = []
        if view.is_table:
            if view.column(name).is_meta:
                continue  # no values to read
            counts = nonzero_per_row(view.column(name), view.n)
            if counts is None:
                continue  # not a per-sample tensor column: validate_batch reports that
            nonzero: list[int] = counts[0].tolist()
            total: list[int] = counts[1].tolist()
            rows = [(i, nonzero[i], total[i]) for i in padding if nonzero[i]]
        else:
            for i in padding:
                v = view.row(i).get(name)
                if isinstance(v, torch.Tensor) and v.layout == torch.strided and not v.is_meta:
                    k = int(v.count_nonzero())
                    if k:
                        rows.append((i, k, v.numel()))
        for i, k, size in rows:
            found.append(
                Violation(
                    i,
                    name,
                    "padding",
                    "all zeros (padding sample)",
                    f"{k} of {size} elements non-zero",
                    f"padding sample (is_padding=True) has {k} non-zero {name} elements of {size}; "
                    "padding must add nothing to the loss or metrics",
                )
            )
    return found


def _uid_violations(plan: Plan, view: BatchView, tags: Sequence[Any], status: list[bool | None]) -> list[Violation]:
    """Padding must not join a real GRPO group, and a padding uid must be tagged as padding."""
    name = plan.uid_field
    if name is None or name not in view.keys():
        return []
    uids = view.values_of(name)
    # An untagged sample with a padding uid is reported below as the root cause; its uid
    # is not a real group, or every sibling padding sample would be reported too.
    real_uid_at: dict[Any, int] = {}
    for i, (u, s) in enumerate(zip(uids, status)):
        if s is False and isinstance(u, str) and not _PADDING_UID.fullmatch(u):
            real_uid_at.setdefault(u, i)
    found = []
    for i, (u, s) in enumerate(zip(uids, status)):
        if s and isinstance(u, str) and u in real_uid_at:
            j = real_uid_at[u]
            found.append(
                Violation(
                    i,
                    name,
                    "padding",
                    "a uid no real sample has",
                    f"{u!r}, as real sample {j}",
                    f"padding sample reuses real sample {j}'s uid {u!r}; it would join that GRPO "
                    "group and shift its advantages (use trajschema.new_padding_uid())",
                )
            )
        elif s is False and isinstance(u, str) and _PADDING_UID.fullmatch(u):
            tag = tags[i]
            actual = (
                "no tag dict"
                if tag is None
                else "tag without is_padding"
                if "is_padding" not in tag
                else "is_padding=False"
            )
            found.append(
                Violation(
                    i,
                    "is_padding",
                    "padding",
                    "is_padding=True",
                    actual,
                    f"uid {u!r} is a padding uid but the sample has {actual}; a padding sample "
                    "must be tagged is_padding=True or metrics count it as real",
                )
            )
    return found


def _length_tag_violations(
    plan: Plan, batch: Any, view: BatchView, tags: Sequence[Any], padding: list[int]
) -> list[Violation]:
    """Length tags of padding samples, through the batch check (one wording, column-wise screening)."""
    wanted = {t.name for t in plan.length_tags}
    if not padding or not wanted:
        return []
    screened: list[Any] = [{}] * view.n
    for i in padding:
        screened[i] = {k: v for k, v in tags[i].items() if k in wanted}
    on_padding = set(padding)
    source = batch if view.is_table else view.samples
    found, _ = check_batch(plan, source, tags=screened, dims=None, depth="shapes")
    return [v for v in found if v.code == "tag" and v.field in wanted and v.sample in on_padding]


def check_padding_contract(
    samples_or_batch: Batch,
    tags: Sequence[TagDict | None] | None,
    schema: Schema | str,
) -> None:
    """Check that the padding samples of a batch are inert; report every violation.

    A sample is padding exactly when its tag says ``is_padding=True`` (see
    [`is_padding`][trajschema.is_padding]). The contract:

    - a padding sample's zero-padded mask fields (``loss_mask`` and ``response_mask`` in
      the packaged schemas: every 0/1 field the schema pads with 0) are all zero
      (code ``padding``);
    - no padding sample shares a uid with a real sample, or it joins that GRPO group and
      shifts its advantages (code ``padding``, field ``uid``);
    - a padding sample's length tags (``prompt_len``, ``response_len``, ``seq_len``: the
      schema's tags with ``equals:``) match its fields (code ``tag``);
    - a sample whose uid is a padding uid (``pad`` + 32 hex digits) is tagged
      ``is_padding=True``, not untagged or ``False`` (code ``padding``, field ``is_padding``);
    - an ``is_padding`` that is not a bool is reported, never guessed at (code ``tag``).

    A real sample is never flagged for its masks: an all-zero loss mask is legitimate.
    Shapes and dtypes are [`Schema.validate_batch`][trajschema.Schema.validate_batch]'s job and are not reported here.

    Examples:
        >>> import trajschema as ts
        >>> from trajschema.testing import verl_sample
        >>> schema = ts.load_schema("text")
        >>> real = verl_sample(schema, 5, 4, uid="q0")
        >>> pad = schema.padding(2, eos_token_id=2, like=real)
        >>> pad.samples[0]["uid"] = "q0"  # joins the real sample's GRPO group
        >>> try:
        ...     ts.check_padding_contract([real, *pad.samples], [{}, *pad.tags], schema)
        ... except ts.SchemaError as e:
        ...     print([(v.sample, v.field, v.code) for v in e.violations])
        [(1, 'uid', 'padding')]

    Args:
        samples_or_batch: a list of sample mappings, or a TensorDict laid out as
            TransferQueue returns it (jagged nested tensor columns, ``NonTensorStack``
            uids). Masks of a TensorDict are read column-wise from the nested values
            and offsets, without a Python loop over samples.
        tags: one tag dict (or ``None``) per sample; ``None`` means no sample is tagged.
        schema: the schema (or its name) the batch follows.

    Raises:
        SchemaError: with every violation found (and a ``batch`` violation when
            ``tags`` is not a sequence with one entry per sample).
        TypeError: ``samples_or_batch`` is neither a list of samples nor a TensorDict
            (``batch[i]`` names a sample that is not a mapping), or ``schema`` is neither
            a Schema nor a name.
        SchemaNotFoundError: no schema has the name ``schema``.
    """
    from trajschema.load import resolve_schema

    resolved = resolve_schema(schema)  # the error names the schema, also when given by name or path
    found = padding_contract_violations(samples_or_batch, tags, resolved)
    if found:
        raise SchemaError(found, schema_name=resolved.name)


def _zeroed_masks(plan: Plan) -> list[str]:
    """The 0/1 tensor fields the schema pads with 0: padding must leave them all zero.

    Derived from the declaration rather than listed, so a schema that adds a mask
    (``values: [0, 1]``, ``pad: 0``) gets it checked too; ``attention_mask`` pads with 1
    (padding stays attendable) and is rightly left out.
    """
    return [
        f.name
        for f in plan.fields.values()
        if f.is_tensor
        and f.values is not None
        and set(f.values) <= {0, 1}
        and f.pad.rule == "fill"
        and f.pad.value == 0
    ]
