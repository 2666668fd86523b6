"""OpenRLHF 0.11.2's ``Experience`` as a schema's samples: where each field sits, and the checks of that layout.

OpenRLHF keeps no prompt/response split. A row holds its real tokens from column 0
(``sequences``, ``attention_mask``: one run of ones, right-padded to the batch's longest);
``action_mask`` and every per-action tensor sit on the ``S - 1`` next-token positions
(position ``j`` describes token ``j + 1``: what the model predicts there). A row's response
starts at the token after its first action position, so for a row of ``L`` real tokens
whose first action position is ``f``:

| schema field | read from |
|---|---|
| ``input_ids`` | ``sequences[:L]`` |
| ``prompts``, ``responses`` | ``sequences[:f + 1]``, ``sequences[f + 1:L]`` |
| ``attention_mask`` | ``attention_mask[:L]`` |
| ``response_mask``, ``loss_mask`` | ``action_mask[f:L - 1]`` (holes: a multi-turn row's tool tokens) |
| ``rollout_log_probs`` | ``rollout_log_probs[f:L - 1]`` |

A row without an action token has an empty response. The other fields of a schema
(``uid``, ``num_turns``, ``position_ids``, ...) are not in an ``Experience``: they are not
required here. The layout's own rules (codes as in a dense batch): ``mask``, the attention
mask one run of ones from column 0 with at least one, ``action_mask`` 0/1 and no action
past the last real token; ``shape``, every step field ``(B, S)`` or ``(B, S - 1, ...)`` and
every episode field ``(B, ...)``; ``boundary``, ``rollout_log_probs`` 0 on the prompt's
positions (OpenRLHF's agent scores the prompt 0); ``padded``, the per-action fields 0 past
the last real token; ``length``, ``total_length`` the real tokens and ``response_length``
the span of the actions, as OpenRLHF's sample generator writes them.

This is code rather than a layout file: the dense layout language places a field on an
axis of blocks with a padding side, and an ``Experience`` shifts half its fields by one
position and marks its prompt/response split only by where the actions start.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import torch

from trajschema.check import BatchView, check_batch
from trajschema.core import DEPTHS, Violation, ViolationCode
from trajschema.dense import jagged_column, relaxed_plan
from trajschema.openrlhf.experience import (
    EPISODE_FIELDS,
    IS_PADDING,
    STEP_FIELDS,
    experience_rows,
    padding_flags,
    schema_of,
    shown,
)
from trajschema.schema import Schema

__all__ = [
    "HELD",
    "Rows",
    "experience_samples",
    "experience_violations",
    "held_schema",
    "merge_experiences",
    "read_layout",
    "readable_samples",
]

#: Each schema field an ``Experience`` holds, and the ``Experience`` field it is read from.
HELD = {
    "input_ids": "sequences",
    "prompts": "sequences",
    "responses": "sequences",
    "attention_mask": "attention_mask",
    "response_mask": "action_mask",
    "loss_mask": "action_mask",
    "rollout_log_probs": "rollout_log_probs",
}
#: The step fields on the next-token positions (all but ``sequences`` and ``attention_mask``).
ACTION_FIELDS = STEP_FIELDS[2:]


@dataclasses.dataclass
class Rows:
    """What the layout checks of one ``Experience`` read: per row its real tokens ``L`` and
    first action position ``f`` (``L - 1`` when it has none), and the rows too broken to read."""

    lengths: list[int]
    firsts: list[int]
    broken: set[int]
    found: list[Violation]


def experience_violations(experiences: Any, *, schema: Schema | None = None, depth: str = "values") -> list[Violation]:
    """Every way ``experiences`` (one ``Experience`` or a list, OpenRLHF's rollout or its
    batches) break ``schema`` in OpenRLHF's layout: its own rules (module docstring), then
    each row's fields through the schema's checks. ``sample`` counts rows across the list.

    Examples:
        >>> [v.code for v in experience_violations(rollout)]  # doctest: +SKIP
        []

    Args:
        experiences: an OpenRLHF ``Experience`` or a sequence of them.
        schema: default ``install(schema=)``'s, else ``text``.
        depth: ``"shapes"`` or ``"values"``, as for [`Schema.violations`][trajschema.Schema.violations].

    Raises:
        TypeError: an item is no ``Experience`` (no ``(B, S)`` ``sequences`` tensor or no ``info`` dict).
        ValueError: an unknown ``depth``.
    """
    if depth not in DEPTHS:
        raise ValueError(f"depth must be one of {', '.join(map(repr, DEPTHS))}, found {depth!r}")
    items = [experiences] if dataclasses.is_dataclass(experiences) else experiences
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise TypeError(f"experiences must be an OpenRLHF Experience or a list of them, found {type(items).__name__}")
    chosen = schema_of(schema)
    merged = merge_experiences(items)
    if merged is not None:  # one table: the layout's rules and the schema's checks vectorized over every row
        items = [merged]
    found, samples, tags, rows = _read_all(items, chosen, depth, table=merged is not None)
    if not rows:
        return found
    plan = chosen.plan
    optional = frozenset(n for n, f in plan.fields.items() if n not in HELD and f.required)
    seen, _ = check_batch(relaxed_plan(plan, optional), samples, tags=tags, dims=None, depth=depth)
    return found + _translate(seen, rows)


def experience_samples(experience: Any, *, schema: Schema | None = None) -> list[dict[str, torch.Tensor]]:
    """Each row of one ``Experience`` as the schema's sample (the fields in `HELD` it holds), as views.

    Raises:
        TypeError: ``experience`` is no ``Experience``.
        SchemaError: a row cannot be read (the layout's ``mask`` or ``shape`` rules), with every such violation.
    """
    from trajschema.core import SchemaError

    chosen = schema_of(schema)
    rows = read_layout(experience, 0)
    broken = [v for v in rows.found if v.code in ("mask", "shape")]
    if broken:
        raise SchemaError(broken, schema_name=chosen.name)
    return [_sample(experience, i, rows, frozenset(chosen.plan.fields)) for i in range(len(rows.lengths))]


@functools.lru_cache(maxsize=16)
def held_schema(schema: Schema) -> Schema:
    """``schema`` as an ``Experience`` holds it: ``<name>_openrlhf``, extending it, with the
    fields an ``Experience`` does not hold (`HELD`) not required. A bundle of an OpenRLHF step
    is recorded with it, so its samples check clean wherever the bundle is read."""
    from trajschema.export import schema_sections
    from trajschema.load import schema_from_dict

    doc = schema_sections(schema.plan)
    doc["name"] = f"{schema.name}_openrlhf"
    doc["extends"] = list(schema.plan.lineage)
    doc["description"] = f"{schema.name} as an OpenRLHF Experience holds it: the fields it lacks are not required."
    for name, f in schema.plan.fields.items():
        if name not in HELD and f.required:
            doc["fields"][name] = {**doc["fields"][name], "required": False}
    return schema_from_dict(doc)


def readable_samples(
    experiences: Sequence[Any], *, schema: Schema | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every row of ``experiences`` the layout can read, as the schema's sample (views), and its
    ``is_padding`` tag: what a bundle of an OpenRLHF step holds as its batch (rows the layout
    cannot read are left out; the raw experiences go beside them)."""
    names = frozenset(schema_of(schema).plan.fields)
    samples: list[dict[str, Any]] = []
    tags: list[dict[str, Any]] = []
    for exp in experiences:
        rows = read_layout(exp)
        flags = _flags(exp, 0, [])
        for i in range(len(rows.lengths)):
            if i not in rows.broken:
                samples.append(_sample(exp, i, rows, names))
                tags.append({IS_PADDING: flags[i]} if flags is not None else {})
    return samples, tags


def _read_all(
    items: Sequence[Any], schema: Schema, depth: str, *, table: bool
) -> tuple[list[Violation], Any, list[dict[str, Any]], list[int]]:
    """The layout's violations, what the schema's checks read (per-row samples, or with
    ``table`` the one experience's readable rows as jagged columns), their tags and global rows."""
    names = frozenset(schema.plan.fields)
    found: list[Violation] = []
    samples: list[dict[str, Any]] = []
    tags: list[dict[str, Any]] = []
    at: list[int] = []  # the global row of each sample
    base = 0
    for exp in items:
        rows = read_layout(exp, base)
        found += rows.found
        flags = _flags(exp, base, found)
        found += _padding_actions(exp, flags, rows.broken, base)
        if table:
            kept = [i for i in range(len(rows.lengths)) if i not in rows.broken]
            tags = [{IS_PADDING: flags[i]} if flags is not None else {} for i in kept]
            return found, _columns(exp, rows, kept, names, values=depth == "values"), tags, kept
        for i in range(len(rows.lengths)):
            if i not in rows.broken:
                samples.append(_sample(exp, i, rows, names))
                tags.append({IS_PADDING: flags[i]} if flags is not None else {})
                at.append(base + i)
        base += len(rows.lengths)
    return found, samples, tags, at


def _flags(exp: Any, base: int, found: list[Violation]) -> list[bool] | None:
    try:
        return padding_flags(exp)
    except ValueError as exc:
        found.append(Violation(None, f"info.{IS_PADDING}", "tag", "one bool per row", "other", f"rows {base}+: {exc}"))
        return None


def _padding_actions(exp: Any, flags: list[bool] | None, broken: set[int], base: int) -> list[Violation]:
    """``padding``: a row tagged ``is_padding`` with an action (a loss token) in its ``action_mask``."""
    actions = exp.action_mask
    if not flags or not any(flags) or not isinstance(actions, torch.Tensor) or actions.dim() < 2:
        return []
    on = (actions != 0).reshape(actions.shape[0], -1).any(1).tolist()
    what = "is a padding row (is_padding) with an action: it must train on nothing"
    return [
        _row_violation(base, row, "action_mask", "padding", "no action", "actions", what)
        for row, (flag, acts) in enumerate(zip(flags, on, strict=False))
        if flag and acts and row not in broken
    ]


def _translate(seen: list[Violation], rows: list[int]) -> list[Violation]:
    """The engine's violations at the global rows, named by the ``Experience`` field (once per
    field: ``response_mask`` and ``loss_mask`` are one ``action_mask``)."""
    out, said = [], set()
    for v in seen:
        key = HELD.get(v.field, v.field)
        row = rows[v.sample] if v.sample is not None and v.sample < len(rows) else v.sample
        what = (row, key, v.code, v.expected, v.actual)
        if key != v.field and what in said:
            continue
        said.add(what)
        message = v.message if key == v.field else f"{v.message} (experience.{key}; schema field {v.field})"
        out.append(dataclasses.replace(v, sample=row, field=key, message=message))
    return out


def _sample(exp: Any, i: int, rows: Rows, names: frozenset[str]) -> dict[str, Any]:
    """Row ``i`` as the schema's fields (views of the experience's tensors; a bool mask as int64)."""
    length, first = rows.lengths[i], rows.firsts[i]
    ids = exp.sequences[i, :length]
    out: dict[str, Any] = {"input_ids": ids, "prompts": ids[: first + 1], "responses": ids[first + 1 :]}
    if isinstance(exp.attention_mask, torch.Tensor):
        out["attention_mask"] = _ints(exp.attention_mask[i, :length])
    if isinstance(exp.action_mask, torch.Tensor):
        out["response_mask"] = out["loss_mask"] = _ints(exp.action_mask[i, first : length - 1])
    if isinstance(exp.rollout_log_probs, torch.Tensor):
        out["rollout_log_probs"] = exp.rollout_log_probs[i, first : length - 1]
    return {k: v for k, v in out.items() if k in names}


def _columns(exp: Any, rows: Rows, kept: list[int], names: frozenset[str], *, values: bool) -> BatchView:
    """The rows ``kept`` of one experience as the schema's jagged columns (cut as a dense
    layout's regions are, `trajschema.dense.jagged_column`): what `_sample` gives row by row."""
    at = torch.tensor(kept, dtype=torch.int64, device=exp.sequences.device)
    lengths = torch.tensor(rows.lengths, dtype=torch.int64, device=at.device)[at]
    starts = torch.tensor(rows.firsts, dtype=torch.int64, device=at.device)[at] + 1  # the response's first token
    seqs = exp.sequences[at]
    t = torch.arange(seqs.shape[1], device=at.device)[None, :]
    real, prompt = t < lengths[:, None], t < starts[:, None]
    out: dict[str, Any] = {
        "input_ids": jagged_column(seqs, 1, real, lengths, values=values),
        "prompts": jagged_column(seqs, 1, prompt, starts, values=values),
        "responses": jagged_column(seqs, 1, real & ~prompt, lengths - starts, values=values),
    }
    if isinstance(exp.attention_mask, torch.Tensor):
        out["attention_mask"] = jagged_column(_ints(exp.attention_mask[at]), 1, real, lengths, values=values)
    acted = (t[:, :-1] >= starts[:, None] - 1) & (t[:, :-1] < lengths[:, None] - 1)
    if isinstance(exp.action_mask, torch.Tensor):
        mask = jagged_column(_ints(exp.action_mask[at]), 1, acted, lengths - starts, values=values)
        out["response_mask"] = out["loss_mask"] = mask
    if isinstance(exp.rollout_log_probs, torch.Tensor):
        out["rollout_log_probs"] = jagged_column(exp.rollout_log_probs[at], 1, acted, lengths - starts, values=values)
    return BatchView.of_columns({k: v for k, v in out.items() if k in names}, len(kept))


def merge_experiences(items: Sequence[Any]) -> Any | None:
    """``items`` as one experience of the first's class: every row, each step field
    right-padded with zeros to the widest, each episode field and ``info["is_padding"]``
    concatenated; ``None`` when they cannot be one table (not all experiences of one class
    holding the same fields in the same dtypes and shapes by role, or a field misshapen),
    and the caller reads them one by one."""
    if not items or not all(dataclasses.is_dataclass(e) for e in items) or len({type(e) for e in items}) > 1:
        return None
    try:
        widths = [experience_rows(e) and int(e.sequences.shape[1]) for e in items]
        flags = [padding_flags(e) for e in items]
    except (TypeError, ValueError):
        return None
    if any(_shapes(e, experience_rows(e), int(e.sequences.shape[1]), 0) for e in items) or not all(widths):
        return None
    kw: dict[str, Any] = {}
    for name in (*STEP_FIELDS, *EPISODE_FIELDS):
        got = [getattr(e, name, None) for e in items]
        if all(v is None for v in got):
            continue
        tensors = [v for v in got if isinstance(v, torch.Tensor)]
        step = name in STEP_FIELDS
        kinds = {(v.dtype, v.device, tuple(v.shape[2:] if step else v.shape[1:])) for v in tensors}
        if len(tensors) < len(got) or len(kinds) > 1:
            return None
        rows = [r for v in tensors for r in v.unbind(0)] if step else []
        kw[name] = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True) if rows else torch.cat(tensors)
    kw["info"] = {IS_PADDING: torch.tensor([f for fs in flags for f in fs], dtype=torch.bool)}
    return type(items[0])(**kw)


def _ints(mask: torch.Tensor) -> torch.Tensor:
    return mask.to(torch.int64) if mask.dtype == torch.bool else mask


def read_layout(exp: Any, base: int = 0) -> Rows:
    """The layout's rules on one experience (module docstring), and each readable row's ``L`` and ``f``."""
    experience_rows(exp)
    n, width = exp.sequences.shape
    found = _shapes(exp, n, width, base)
    lengths, broken = _lengths(exp, n, width, base, found)
    firsts = _firsts(exp, lengths, broken, base, found)
    if not any(v.code == "shape" for v in found):
        found += _zeros(exp, lengths, firsts, broken, base)
        found += _episode(exp, lengths, firsts, broken, base)
    return Rows(lengths, firsts, broken, found)


def _shapes(exp: Any, n: int, width: int, base: int) -> list[Violation]:
    """A ``shape`` violation for each step or episode field that is no ``(B, S)``,
    ``(B, S - 1, ...)`` or ``(B, ...)`` tensor as its role asks."""
    found = []
    for name in (*STEP_FIELDS[1:], *EPISODE_FIELDS):
        value = getattr(exp, name, None)
        if value is None:
            continue
        want = [n, width] if name == "attention_mask" else [n, width - 1] if name in ACTION_FIELDS else [n]
        ok = isinstance(value, torch.Tensor) and not value.is_nested and not value.is_meta
        ok = ok and value.dim() >= len(want) and list(value.shape[: len(want)]) == want
        ok = ok and (name != "attention_mask" or value.dim() == 2)
        if not ok:
            lead = "(" + ", ".join(map(str, want)) + (", ...)" if name != "attention_mask" else ")")
            msg = f"experience.{name} (rows {base}..{base + n - 1}) must be {lead}, found {shown(value)}"
            found.append(Violation(None, name, "shape", lead, shown(value), msg))
    return found


#: The per-action fields OpenRLHF leaves 0 past a row's last real token (log-probs are
#: multiplied by ``action_mask``; ``zero_pad_sequences`` pads the rest with 0).
ZERO_PAST_END = ("action_log_probs", "base_action_log_probs", "rollout_log_probs")


def _row_violation(base: int, row: int, name: str, code: ViolationCode, want: str, got: str, what: str) -> Violation:
    return Violation(base + row, name, code, want, got, f"experience.{name} row {base + row}: {what}")


def _lengths(exp: Any, n: int, width: int, base: int, found: list[Violation]) -> tuple[list[int], set[int]]:
    """Each row's real tokens (``attention_mask``'s one run of ones from column 0), and the rows
    it cannot give: every row when a step field is misshapen, else the rows whose mask is broken."""
    if any(v.code == "shape" and v.field in STEP_FIELDS for v in found):
        return [0] * n, set(range(n))
    mask = exp.attention_mask
    if mask is None:
        return [width] * n, set()
    if mask.is_floating_point() or mask.is_complex():
        msg = f"experience.attention_mask (rows {base}..{base + n - 1}) must be 0/1 integers, found {shown(mask)}"
        found.append(Violation(None, "attention_mask", "mask", "0/1 integers", shown(mask), msg))
        return [0] * n, set(range(n))
    ints = mask.to(torch.int64)
    lengths = ints.sum(1)
    run = torch.arange(width, device=mask.device)[None, :] < lengths[:, None]
    odd = ((ints != 0) & (ints != 1)).any(1)
    gaps = (ints != run.to(torch.int64)).any(1) & ~odd
    broken = set()
    for row in torch.nonzero(odd | gaps | (lengths == 0)).flatten().tolist():
        broken.add(row)
        if odd[row]:
            what = ("values 0/1", "other values", "holds values other than 0 and 1")
        elif gaps[row]:
            what = ("one run of ones from column 0", "gaps", "is not one run of ones from column 0 (right padding)")
        else:
            what = ("at least one real token", "none", "has no real token")
        found.append(_row_violation(base, row, "attention_mask", "mask", *what))
    return lengths.tolist(), broken


def _firsts(exp: Any, lengths: list[int], broken: set[int], base: int, found: list[Violation]) -> list[int]:
    """Each row's first action position (``L - 1``: none); ``mask`` violations for an action
    mask that is not 0/1 (the row is then unreadable) or marks a position past the last real token."""
    ends = [max(length - 1, 0) for length in lengths]
    actions = exp.action_mask
    if not isinstance(actions, torch.Tensor) or len(broken) == len(lengths):
        return ends
    if actions.is_floating_point() or actions.is_complex():
        msg = f"experience.action_mask must be 0/1 integers or bools, found {shown(actions)}"
        found.append(Violation(None, "action_mask", "mask", "0/1 integers or bools", shown(actions), msg))
        broken.update(range(len(lengths)))
        return ends
    ints = actions.to(torch.int64)
    end = torch.tensor(ends, dtype=torch.int64, device=actions.device)
    inside = torch.arange(ints.shape[1], device=actions.device)[None, :] < end[:, None]
    odd = ((ints != 0) & (ints != 1)).any(1)
    past = ((ints != 0) & ~inside).any(1) & ~odd
    for row in torch.nonzero(odd | past).flatten().tolist():
        if row in broken:
            continue
        if odd[row]:
            broken.add(row)
            found.append(
                _row_violation(
                    base, row, "action_mask", "mask", "values 0/1", "other values", "holds values other than 0 and 1"
                )
            )
        else:
            what = f"marks an action past its last real token (position {ends[row] - 1}): a loss on padding"
            found.append(
                _row_violation(
                    base, row, "action_mask", "mask", "no action past the real tokens", "actions in padding", what
                )
            )
    acted = (ints != 0) & inside
    first = torch.where(acted.any(1), acted.to(torch.int8).argmax(1), end)
    return first.tolist()


def _zeros(exp: Any, lengths: list[int], firsts: list[int], broken: set[int], base: int) -> list[Violation]:
    """``padded``: a log-prob field nonzero past a row's last real token; ``boundary``:
    ``rollout_log_probs`` nonzero on its prompt's positions."""
    found = []
    for name in ZERO_PAST_END:
        value = getattr(exp, name, None)
        if not isinstance(value, torch.Tensor) or value.numel() == 0:
            continue
        on = (value != 0).reshape(value.shape[0], value.shape[1], -1).any(2)
        at = torch.arange(on.shape[1], device=on.device)[None, :]
        end = torch.tensor([max(n - 1, 0) for n in lengths], dtype=torch.int64, device=on.device)[:, None]
        past = (on & (at >= end)).any(1)
        before = torch.zeros_like(past)
        if name == "rollout_log_probs":
            before = (on & (at < torch.tensor(firsts, dtype=torch.int64, device=on.device)[:, None])).any(1)
        for row in torch.nonzero(past | before).flatten().tolist():
            if row in broken:
                continue
            if past[row]:
                what = "is nonzero past the row's last real token (OpenRLHF pads per-action fields with 0)"
                found.append(_row_violation(base, row, name, "padded", "0 in padding", "nonzero", what))
            if before[row]:
                what = (
                    "is nonzero on a prompt position (before the first action): a response value rolled onto the prompt"
                )
                found.append(_row_violation(base, row, name, "boundary", "0 on the prompt", "nonzero", what))
    return found


def _episode(exp: Any, lengths: list[int], firsts: list[int], broken: set[int], base: int) -> list[Violation]:
    """``length``: ``total_length`` other than the real tokens, ``response_length`` other than
    the span from the first to the last action (OpenRLHF's sample generator's definitions)."""
    found = []
    spans = _spans(exp, lengths, firsts)
    for name, want in (("total_length", lengths), ("response_length", spans)):
        value = getattr(exp, name, None)
        if not isinstance(value, torch.Tensor) or value.dim() != 1 or want is None:
            continue
        expected = torch.tensor(want, dtype=torch.float64, device=value.device)
        off = value.to(torch.float64) != expected
        for row in torch.nonzero(off).flatten().tolist():
            if row in broken:
                continue
            got = value[row].item()
            what = f"is {got}, the row's {'real tokens' if name == 'total_length' else 'action span'} are {want[row]}"
            found.append(_row_violation(base, row, name, "length", str(want[row]), repr(got), what))
    return found


def _spans(exp: Any, lengths: list[int], firsts: list[int]) -> list[int] | None:
    actions = exp.action_mask
    if not isinstance(actions, torch.Tensor) or actions.is_floating_point() or actions.is_complex():
        return None
    width = actions.shape[1]
    end = torch.tensor([max(n - 1, 0) for n in lengths], dtype=torch.int64, device=actions.device)
    acted = (actions != 0) & (torch.arange(width, device=actions.device)[None, :] < end[:, None])
    last = width - 1 - acted.flip(1).to(torch.int8).argmax(1)
    first = torch.tensor(firsts, dtype=torch.int64, device=actions.device)
    return torch.where(acted.any(1), last - first + 1, torch.zeros_like(last)).tolist()
