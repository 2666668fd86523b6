"""The is_padding contract: which samples are padding, and what padding may not do.

A trainer that grows a batch to the multiple a PPO/GRPO step needs adds synthetic
samples and marks each one ``is_padding=True`` in its tag dict (the dict that travels
beside the sample in TransferQueue). That tag is the *only* way to know a sample is
padding. Inferring padding from a zero loss mask is a bug: a real sample whose mask is
all zero (a truncated or filtered response) is still real, and dropping it from metrics
skews them. So :func:`is_padding` reads the tag and nothing else, and refuses to guess
when the tag holds something other than a bool.

:func:`check_padding_contract` then checks that padding is inert: its loss and response
masks are zero, it has a GRPO group (uid) of its own, its length tags match its fields,
and a sample with a padding uid is tagged as padding.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ._errors import SchemaError, Violation
from ._schema import Schema

__all__ = [
    "check_padding_contract",
    "is_padding",
    "padding_contract_violations",
    "real_count",
    "real_mask",
]

#: What :func:`trajschema.new_padding_uid` makes: ``pad`` + 32 hex digits.
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
        raise TypeError(f"a tag dict must be a mapping or None, found {_describe(tag)}")
    if "is_padding" not in tag:
        return False
    v = tag["is_padding"]
    if type(v) is not bool:
        raise TypeError(
            f"is_padding must be True or False, found {_describe(v)}; "
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
            its index), as for :func:`is_padding`.
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
        TypeError: as for :func:`real_mask`.
    """
    return sum(not p for p in _padding_flags(tags))


def _padding_flags(tags: Any) -> list[bool]:
    if not isinstance(tags, Sequence) or isinstance(tags, (str, bytes)):
        raise TypeError(f"tags must be a sequence of tag dicts, found {_describe(tags)}")
    flags = []
    for i, tag in enumerate(tags):
        try:
            flags.append(is_padding(tag))
        except TypeError as e:
            raise TypeError(f"tags[{i}]: {e}") from None
    return flags


def padding_contract_violations(
    samples_or_batch: Any,
    tags: Sequence[Mapping[str, Any] | None] | None,
    schema: Schema | str,
) -> list[Violation]:
    """Every way a batch breaks the is_padding contract; never raises for bad data.

    Like :func:`check_padding_contract`, but returns the violations (in sample order)
    instead of raising.

    Examples:
        >>> import trajschema as ts
        >>> from trajschema.testing import verl_sample
        >>> schema = ts.load_schema("text")
        >>> real = verl_sample(schema, 5, 4, uid="q0")
        >>> pad = schema.padding(1, eos_token_id=2, like=real)
        >>> ts.padding_contract_violations([real, *pad.samples], [{}, *pad.tags], schema)
        []

    Args: as for :func:`check_padding_contract`.

    Raises:
        TypeError: ``samples_or_batch`` is neither a list of samples nor a TensorDict.
    """
    from ._validate import _as_mapping, _check_tags_len, _is_tensordict, describe_value

    if isinstance(schema, str):
        from ._loading import load_schema

        schema = load_schema(schema)
    if _is_tensordict(samples_or_batch):
        td = samples_or_batch
        if td.batch_dims != 1:
            size = list(td.batch_size)
            return [
                Violation(
                    sample=None,
                    field="<batch>",
                    code="batch",
                    expected="batch_size [B]",
                    actual=f"batch_size {size}",
                    message=f"a batch TensorDict needs one batch dim, found batch_size {size}",
                )
            ]
        n = td.batch_size[0]
        samples = None
    elif isinstance(samples_or_batch, Sequence) and not isinstance(samples_or_batch, (str, bytes)):
        samples = [_as_mapping(s) for s in samples_or_batch]
        td = None
        n = len(samples)
    else:
        raise TypeError(
            f"a batch must be a list of sample mappings or a TensorDict, found {type(samples_or_batch).__name__}"
        )
    if tags is None:
        tags = [None] * n
    found = _check_tags_len(tags, n)
    if found:
        return found

    # Each sample is padding (True), real (False) or unknown (None: a malformed tag,
    # reported here and then left out of the padding and uid checks).
    status: list[bool | None] = []
    for i, tag in enumerate(tags):
        try:
            status.append(is_padding(tag))
        except TypeError:
            bad = tag["is_padding"] if isinstance(tag, Mapping) else tag
            field = "is_padding" if isinstance(tag, Mapping) else "<tag>"
            expected = "True or False" if isinstance(tag, Mapping) else "a mapping or None"
            found.append(
                Violation(
                    sample=i,
                    field=field,
                    code="tag",
                    expected=expected,
                    actual=describe_value(bad),
                    message=(
                        f"{field} must be {expected}, found {describe_value(bad)}; "
                        "trajschema does not guess whether a sample is padding"
                    ),
                )
            )
            status.append(None)
    padding = [i for i, s in enumerate(status) if s]

    # 1. masks: a padding sample must add nothing to the loss or the response stats.
    # (A TensorDict's `in` and iteration are about rows, hence the explicit key set.)
    columns = set(td.keys()) if td is not None else set()
    for name in _zeroed_masks(schema):
        if td is not None:
            if name not in columns:
                continue
            counts = _nonzero_per_row(td.get(name), n)
            if counts is None:
                continue  # not a per-sample tensor column: validate_batch reports that
            nonzero, total = (c.tolist() for c in counts)
            rows = [(i, nonzero[i], total[i]) for i in padding if nonzero[i]]
        else:
            rows = []
            for i in padding:
                v = samples[i].get(name)
                if isinstance(v, torch.Tensor) and not v.is_nested:
                    k = int(v.count_nonzero())
                    if k:
                        rows.append((i, k, v.numel()))
        for i, k, total in rows:
            found.append(
                Violation(
                    sample=i,
                    field=name,
                    code="padding",
                    expected="all zeros (padding sample)",
                    actual=f"{k} of {total} elements non-zero",
                    message=(
                        f"padding sample (is_padding=True) has {k} non-zero {name} elements of {total}; "
                        f"padding must add nothing to the loss or metrics"
                    ),
                )
            )

    # 2. uids: padding must not join a real GRPO group; a padding uid must be tagged
    uids = _uids(td, samples, n)
    if uids is not None:
        # An untagged sample with a padding uid is reported below as the root cause; its
        # uid is not a real group, or every sibling padding sample would be reported too.
        real_uid_at: dict[Any, int] = {}
        for i, (u, s) in enumerate(zip(uids, status)):
            if s is False and isinstance(u, str) and not _PADDING_UID.fullmatch(u):
                real_uid_at.setdefault(u, i)
        for i in padding:
            u = uids[i]
            if isinstance(u, str) and u in real_uid_at:
                j = real_uid_at[u]
                found.append(
                    Violation(
                        sample=i,
                        field="uid",
                        code="padding",
                        expected="a uid no real sample has",
                        actual=f"{u!r}, as real sample {j}",
                        message=(
                            f"padding sample reuses real sample {j}'s uid {u!r}; it would join that GRPO "
                            f"group and shift its advantages (use trajschema.new_padding_uid())"
                        ),
                    )
                )
        for i, (u, s) in enumerate(zip(uids, status)):
            if s is False and isinstance(u, str) and _PADDING_UID.fullmatch(u):
                tag = tags[i]
                if tag is None:
                    actual = "no tag dict"
                elif "is_padding" not in tag:
                    actual = "tag without is_padding"
                else:
                    actual = "is_padding=False"
                found.append(
                    Violation(
                        sample=i,
                        field="is_padding",
                        code="padding",
                        expected="is_padding=True",
                        actual=actual,
                        message=(
                            f"uid {u!r} is a padding uid but the sample has {actual}; a padding sample "
                            f"must be tagged is_padding=True or metrics count it as real"
                        ),
                    )
                )

    # 3. length tags of padding samples: one code path with validate_batch, so the
    # wording is the same and a TensorDict is screened column-wise, not per row.
    length_tags = [t.name for t in schema.tags.values() if t.equals is not None]
    if padding and length_tags:
        from ._validate import check_batch

        wanted = set(length_tags)
        screened = [{}] * n
        for i in padding:
            screened[i] = {k: v for k, v in tags[i].items() if k in wanted}
        on_padding = set(padding)
        found.extend(
            v
            for v in check_batch(
                schema,
                samples_or_batch if td is not None else samples,
                tags=screened,
                dims=None,
                depth="shapes",
                raise_errors=False,
            )
            if v.code == "tag" and v.field in wanted and v.sample in on_padding
        )

    order = {name: k for k, name in enumerate([*schema.fields, *schema.tags])}
    found.sort(key=lambda v: (-1 if v.sample is None else v.sample, order.get(v.field, len(order))))
    return found


def check_padding_contract(
    samples_or_batch: Any,
    tags: Sequence[Mapping[str, Any] | None] | None,
    schema: Schema | str,
) -> None:
    """Check that the padding samples of a batch are inert; report every violation.

    A sample is padding exactly when its tag says ``is_padding=True`` (see
    :func:`is_padding`). The contract:

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
    Shapes and dtypes are :meth:`Schema.validate_batch`'s job and are not reported here.

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
            ``tags`` does not have one entry per sample).
        TypeError: ``samples_or_batch`` is neither a list of samples nor a TensorDict.
    """
    found = padding_contract_violations(samples_or_batch, tags, schema)
    if found:
        name = schema if isinstance(schema, str) else schema.name
        raise SchemaError(found, schema_name=name)


def _zeroed_masks(schema: Schema) -> list[str]:
    """The 0/1 tensor fields the schema pads with 0: padding must leave them all zero.

    Derived from the declaration rather than listed, so a schema that adds a mask
    (``values: [0, 1]``, ``pad: 0``) gets it checked too; ``attention_mask`` pads with 1
    (padding stays attendable) and is rightly left out.
    """
    return [
        f.name
        for f in schema.fields.values()
        if f.is_tensor
        and f.values is not None
        and set(f.values) <= {0, 1}
        and f.pad.rule == "fill"
        and f.pad.value == 0
    ]


def _nonzero_per_row(col: Any, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(non-zero elements, elements) per sample of a batch column, vectorized over samples."""
    if not isinstance(col, torch.Tensor) or (not col.is_nested and col.dim() == 0):
        return None
    if not col.is_nested:
        flat = col.reshape(n, -1)
        return (flat != 0).sum(1), torch.full((n,), flat.shape[1], dtype=torch.int64)
    if col.layout == torch.jagged:
        values = col.values()
        axis = col._ragged_idx - 1  # the ragged dim's place in the flat values
        other = [d for d in range(values.dim()) if d != axis]
        nonzero_at = (values != 0).sum(dim=other) if other else (values != 0).to(torch.int64)
        width = 1  # elements per ragged position, e.g. 4 rope rows
        for d in other:
            width *= values.shape[d]
        offsets = col.offsets()
        lengths = col.lengths() if col.lengths() is not None else offsets.diff()
        # Map each flat position to its row; a narrowed NJT leaves gaps between rows
        # (lengths shorter than the offsets' steps), so keep only positions inside one.
        pos = torch.arange(nonzero_at.shape[0])
        row = (torch.searchsorted(offsets[:n].contiguous(), pos, right=True) - 1).clamp(min=0)
        inside = (pos >= offsets[row]) & (pos < offsets[row] + lengths[row])
        nonzero = torch.zeros(n, dtype=torch.int64).index_add_(0, row[inside], nonzero_at[inside])
        return nonzero, lengths.to(torch.int64) * width
    # A strided nested tensor (TransferQueue's fallback) has no flat values view; its
    # zero-padded dense form counts the same non-zero elements.
    dense = torch.nested.to_padded_tensor(col, 0)
    sizes = col._nested_tensor_size().to(torch.int64)
    return (dense.reshape(n, -1) != 0).sum(1), sizes.prod(1)


def _uids(td: Any, samples: list[Mapping[str, Any]] | None, n: int) -> list[Any] | None:
    if td is None:
        return [s.get("uid") for s in samples]
    if "uid" not in set(td.keys()):
        return None
    from ._batch import _nontensor_values

    return _nontensor_values(td.get("uid"), n)


def _describe(v: Any) -> str:
    from ._validate import describe_value

    return describe_value(v)
