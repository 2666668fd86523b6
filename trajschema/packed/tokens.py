"""The flat run's fields: their shapes, their padding and fill, and their real tokens cut out
as jagged columns (what the jagged engine checks and `from_packed` hands back).

Invariants checked here, each with the bug it stops:

- ``padded``: the alignment padding after each sequence holds the layout's pad value, so no
  real value sits in it (padding merged into a real sequence, prime-rl ``pad_micro_batch``);
- ``boundary``: a response-level field laid on the run (``span: response``) holds its fill
  value at every prompt token: a loss mask or label rolled by one across a sequence
  boundary puts a response value on a prompt token (rolled back, the sequence's own first
  response value lands on its last prompt token; rolled forward, the previous sequence's
  last value lands on this one's first token) (verl #6564, #6475, #5797);
- ``positions``: the positions field restarts at every sequence: one row is exactly
  ``0..len-1``, every row of a multi-row (mrope) field is 0 at the first token (a
  one-token sequence merged into its neighbour, ms-swift #9904).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import without_fx_note
from trajschema.core import ANY, PAD_TOKEN, Violation

if TYPE_CHECKING:
    from trajschema.packed.bind import BoundPacked, PackedPlaced
    from trajschema.packed.segments import Segments

__all__ = [
    "as_jagged",
    "fill_violations",
    "jagged_lengths",
    "nested",
    "offsets_of",
    "position_violations",
    "run_length",
]


def offsets_of(col: torch.Tensor) -> torch.Tensor:
    """A jagged nested tensor's offsets."""
    return col.offsets()  # type: ignore[attr-defined]  # NJT-only method


def nested(values: torch.Tensor, offsets: torch.Tensor, axis: int) -> torch.Tensor:
    """A jagged nested tensor of ``values`` (``(N, ...)``, ragged first), ragged at ``axis`` of a sample."""
    with without_fx_note():
        if axis == 0:
            return torch.nested.nested_tensor_from_jagged(values, offsets)
        return torch.nested.nested_tensor_from_jagged(values.movedim(0, axis), offsets, jagged_dim=axis + 1)


def run_length(
    bound: BoundPacked, cols: Mapping[str, Any], device: torch.device, expected: int
) -> tuple[int | None, set[str], list[Violation]]:
    """The run's length, the ``tokens`` fields left out, and why.

    The offsets say how long the run is (``expected``); a field of another length is a
    ``shape`` violation, unless every present field agrees on another length: then the
    run is that long (and the offsets are what is wrong).
    """
    skip, found, lengths = set(), [], {}
    for p in bound.held("tokens"):
        col = cols.get(p.key)
        if col is None:
            continue
        problem = _run_problem(p, col, len(p.field.shape or ()), device)
        if problem is not None:
            found.append(problem)
            skip.add(p.name)
        else:
            lengths[p.name] = int(col.shape[p.axis])
    if not lengths:
        return None, skip, found
    if len(set(lengths.values())) == 1:
        return next(iter(lengths.values())), skip, found
    for name, n in lengths.items():
        if n != expected:
            key = bound.placed[name].key
            msg = f"{key} holds {n} tokens along the run, the offsets {expected}"
            found.append(Violation(None, key, "shape", f"{expected} tokens", str(n), msg))
            skip.add(name)
    return expected, skip, found


def _run_problem(p: PackedPlaced, col: Any, rank: int, device: torch.device) -> Violation | None:
    key = p.key
    if not isinstance(col, torch.Tensor) or col.is_nested:
        found = "a nested tensor" if isinstance(col, torch.Tensor) else type(col).__name__
        return Violation(
            None,
            key,
            "kind",
            "a tensor (the flat run)",
            found,
            f"{key} must be one tensor along the run, found {found}",
        )
    if col.dim() != rank:
        along = p.entry.span or "the tokens"
        msg = f"{key} has {col.dim()} dims, {rank} expected ({p.field.describe()} with {along} laid along the run)"
        return Violation(None, key, "rank", str(rank), str(col.dim()), msg)
    if col.device != device:
        msg = f"{key} is on {col.device}, the offsets on {device}: a packed batch lives on one device"
        return Violation(None, key, "kind", str(device), str(col.device), msg)
    return None


def jagged_lengths(col: Any, axis: int) -> torch.Tensor | None:
    """Per-sample sizes of the ragged ``axis`` of a jagged column (a nested tensor or a list of tensors)."""
    if isinstance(col, torch.Tensor) and col.is_nested and col.layout == torch.jagged:
        return offsets_of(col).diff().to(torch.int64)
    if isinstance(col, (list, tuple)) and all(isinstance(t, torch.Tensor) and t.dim() > axis for t in col):
        return torch.tensor([t.shape[axis] for t in col], dtype=torch.int64)
    return None


def as_jagged(col: Any) -> Any:
    """A per-sample list as a jagged nested tensor when it can be one, else a plain list."""
    if isinstance(col, (list, tuple)):
        tensors = col and all(isinstance(t, torch.Tensor) and t.dim() for t in col)
        if tensors and len({(t.shape[1:], t.dtype, t.device) for t in col}) == 1:
            return torch.nested.as_nested_tensor(list(col), layout=torch.jagged)
        return list(col)
    return col


def _pad_of(rule: Any, pad_token_id: int | None) -> Any:
    if rule == ANY:
        return None
    if rule == PAD_TOKEN:
        return pad_token_id
    return rule


def _first_hits(hit: torch.Tensor, seq: torch.Tensor, where: torch.Tensor) -> list[tuple[int, int]]:
    """``(sequence, place)`` of the first hit in each sequence that has one."""
    at = torch.nonzero(hit).flatten()
    if not at.numel():
        return []
    rows = seq[at]
    first = torch.ones_like(rows, dtype=torch.bool)
    first[1:] = rows[1:] != rows[:-1]
    return [(int(s), int(w)) for s, w in zip(rows[first].tolist(), where[at[first]].tolist(), strict=True)]


def _stretch(seg: Segments, skip: torch.Tensor, count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Run positions of ``count`` tokens from ``skip`` into each segment, with each one's sequence and place."""
    index = seg.index(skip=skip, count=count)
    seq = torch.repeat_interleave(torch.arange(seg.n, device=count.device), count, output_size=index.shape[0])
    return index, seq, index - seg.starts[seq]


def _first_off(run: torch.Tensor, stretch: tuple[torch.Tensor, ...], value: Any) -> list[tuple[int, int, Any]]:
    """``(sequence, place, found)`` of the first position of each sequence in ``stretch`` not holding ``value``."""
    index, seq, place = stretch
    if not index.numel():
        return []
    part = run.index_select(0, index)
    hit = (part != value).reshape(part.shape[0], -1).any(1) if part.dim() > 1 else part != value
    at = torch.nonzero(hit).flatten()
    if not at.numel():
        return []
    rows = seq[at]
    first = torch.ones_like(rows, dtype=torch.bool)
    first[1:] = rows[1:] != rows[:-1]
    found = part[at[first]].reshape(int(first.sum()), -1)[:, 0].tolist()
    return list(zip(rows[first].tolist(), place[at[first]].tolist(), found, strict=True))


def fill_violations(
    bound: BoundPacked, cols: Mapping[str, Any], seg: Segments, spans: Mapping[str, torch.Tensor], skip: set[str]
) -> list[Violation]:
    """``padded`` (alignment padding) and ``boundary`` (fill at a span field's other tokens) per sequence.

    Only those positions are read (one gather each), not the whole run.
    """
    found: list[Violation] = []
    padding = _stretch(seg, seg.lengths, seg.padded - seg.lengths)
    others = {d: _stretch(seg, torch.zeros_like(n), seg.lengths - n) for d, n in spans.items()}
    for p in bound.held("tokens"):
        col = cols.get(p.key)
        if col is None or p.name in skip:
            continue
        run = col.movedim(p.at, 0)
        pad = _pad_of(p.entry.pad, bound.layout.pad_token_id)
        for s, w, value in _first_off(run, padding, pad) if pad is not None else ():
            msg = f"{p.key}: {value} at token {w} of sequence {s}'s alignment padding; the layout pads with {pad}"
            found.append(Violation(s, p.key, "padded", str(pad), f"{value} at {w}", msg))
        fill = _pad_of(p.entry.fill, bound.layout.pad_token_id)
        if not p.entry.span or fill is None or p.entry.span not in others:
            continue
        for s, w, value in _first_off(run, others[p.entry.span], fill):
            msg = (
                f"{p.key}: {value} at token {w} of sequence {s}, outside its {p.entry.span} (which holds "
                f"{fill} there): a value rolled across a sequence boundary?"
            )
            found.append(Violation(s, p.key, "boundary", f"{fill} outside the {p.entry.span}", f"{value} at {w}", msg))
    return found


def position_violations(key: str, col: Any, axis: int, broken: set[int]) -> list[Violation]:
    """``positions``: each sequence's positions restart (see the module docstring)."""
    if not (isinstance(col, torch.Tensor) and col.is_nested and col.layout == torch.jagged) or col.is_floating_point():
        return []  # not a jagged integer column: the engine reports its kind
    offsets = offsets_of(col).to(torch.int64)
    values = col.values().movedim(axis, 0)
    total = values.shape[0]
    if total == 0 or values.device.type == "meta":
        return []
    lengths = offsets.diff()
    seq = torch.repeat_interleave(torch.arange(lengths.shape[0], device=offsets.device), lengths, output_size=total)
    place = torch.arange(total, device=offsets.device) - offsets[:-1][seq]
    rows = values.reshape(total, -1)
    if rows.shape[1] == 1:
        hit = rows[:, 0] != place
        what = "0..len-1"
    else:
        hit = (rows != 0).any(1) & (place == 0)
        what = "0 in every row at the first token"
    found = []
    for s, w in _first_hits(hit, seq, place):
        if s in broken:
            continue
        value = rows[int(offsets[s]) + w].tolist()
        shown = value[0] if len(value) == 1 else value
        msg = f"{key}: {shown} at token {w} of sequence {s}; positions restart per sequence ({what}): merged sequences?"
        found.append(Violation(s, key, "positions", what, f"{shown} at {w}", msg))
    return found


def tagged_padding(tags: Sequence[Any] | None) -> list[int]:
    """The samples tagged ``is_padding``."""
    if tags is None:
        return []
    return [i for i, t in enumerate(tags) if isinstance(t, Mapping) and t.get("is_padding") is True]
