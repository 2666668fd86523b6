"""The segments of a packed batch: reading its offsets and checking every invariant they carry.

Each sequence is one segment of the flat run: its real tokens start the segment, the
alignment padding (if any) ends it. The invariants, each with the bug it stops:

- ``offsets``: the real offsets start at 0, never decrease, hold one entry per sample plus
  one, and no segment is empty; the outer offsets (the padded ones when the layout has
  them, else the real ones) end at the run's length (a zero-length segment
  appended, AReaL #1103; ``cu_seqlens`` dropped or miscounted, NeMo-RL #2105);
- ``offsets``: the padded offsets are as many as the real ones, each padded segment at
  least its real length, ending at the run's length (padded and real offsets confused,
  Megatron-Bridge #4507);
- ``alignment``: every padded segment a multiple of the alignment (context-parallel and
  FP8 slices, verl #7449, SkyRL #1828).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from trajschema.core import Violation

__all__ = ["OffsetsError", "Segments", "read_offsets", "segments_of"]


class OffsetsError(Exception):
    """The offsets cannot be read at all: the violations say why, and nothing else is checked."""

    def __init__(self, violations: list[Violation]) -> None:
        super().__init__(violations)
        self.violations = violations


@dataclasses.dataclass
class Segments:
    """Where each sequence sits on the run.

    Attributes:
        lengths: real tokens per sequence, int64 ``(B,)``.
        starts: where each segment starts on the run, int64 ``(B,)``.
        padded: each segment's length on the run (real + alignment padding), int64 ``(B,)``.
        total: the run's length.
        broken: sequences whose segment cannot be trusted (their other checks are skipped).
        violations: what reading them found.
    """

    lengths: torch.Tensor
    starts: torch.Tensor
    padded: torch.Tensor
    total: int
    broken: set[int] = dataclasses.field(default_factory=set)
    violations: list[Violation] = dataclasses.field(default_factory=list)

    @property
    def n(self) -> int:
        return int(self.lengths.shape[0])

    def offsets(self) -> torch.Tensor:
        """The real offsets as int64 ``(B + 1,)``: what a jagged column of the real tokens takes."""
        out = torch.zeros(self.n + 1, dtype=torch.int64, device=self.lengths.device)
        torch.cumsum(self.lengths, 0, out=out[1:])
        return out

    @property
    def unpadded(self) -> bool:
        return bool(torch.equal(self.lengths, self.padded))

    def index(self, skip: torch.Tensor | None = None, count: torch.Tensor | None = None) -> torch.Tensor:
        """Run positions of ``count`` tokens per sequence from ``skip`` into each segment (default: the real tokens)."""
        skip = torch.zeros_like(self.lengths) if skip is None else skip
        count = self.lengths if count is None else count
        base = torch.zeros_like(count)
        if count.numel() > 1:
            torch.cumsum(count[:-1], 0, out=base[1:])
        total = int(count.sum()) if count.numel() else 0
        return torch.arange(total, device=count.device) + torch.repeat_interleave(
            self.starts + skip - base, count, output_size=total
        )

    def labels(self) -> tuple[torch.Tensor, torch.Tensor]:
        """For every run position: its sequence and its place in the segment (int64 ``(T,)`` each)."""
        seq = torch.repeat_interleave(
            torch.arange(self.n, device=self.padded.device), self.padded, output_size=self.total
        )
        return seq, torch.arange(self.total, device=self.padded.device) - self.starts[seq]


def _integer_vector(key: str, t: Any, want: torch.dtype | None) -> list[Violation]:
    if not isinstance(t, torch.Tensor) or t.is_nested:
        found = "a nested tensor" if isinstance(t, torch.Tensor) else type(t).__name__
        return [
            Violation(
                None,
                key,
                "offsets",
                "a 1-D int32 tensor of B + 1 offsets",
                found,
                f"{key} must be a 1-D int tensor, found {found}",
            )
        ]
    if t.device.type == "meta":
        return [
            Violation(
                None,
                key,
                "offsets",
                "offsets with values",
                "a meta tensor",
                f"{key} is a meta tensor: its values are the sequence boundaries, and it has none",
            )
        ]
    if t.dim() != 1 or t.shape[0] < 1 or t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        found = f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)}"
        return [
            Violation(
                None,
                key,
                "offsets",
                "a 1-D int tensor of B + 1 offsets",
                found,
                f"{key} must be a 1-D int tensor of B + 1 offsets, found {found}",
            )
        ]
    if want is not None and t.dtype != want:
        name = str(want).removeprefix("torch.")
        return [
            Violation(
                None,
                key,
                "dtype",
                name,
                str(t.dtype).removeprefix("torch."),
                f"{key} must be {name} (flash-attention's varlen kernels take {name} offsets)",
            )
        ]
    return []


def read_offsets(key: str, t: Any, *, want: torch.dtype | None = torch.int32) -> tuple[torch.Tensor, list[Violation]]:
    """``t`` as int64 offsets, and what is wrong with it (a dtype other than ``want`` is reported, not fatal).

    Raises:
        OffsetsError: ``t`` is no 1-D integer tensor with values.
    """
    found = _integer_vector(key, t, want)
    if found and found[0].code != "dtype":
        raise OffsetsError(found)
    return t.to(torch.int64), found


def _vector_problems(key: str, o: torch.Tensor, what: str) -> list[Violation]:
    out = []
    if int(o[0]) != 0:
        out.append(
            Violation(0, key, "offsets", "0", str(int(o[0])), f"{key}[0] is {int(o[0])}: {what} offsets start at 0")
        )
    d = o.diff()
    for i in torch.nonzero(d < 0).flatten().tolist():
        msg = f"{key} decreases at sequence {i} ({int(o[i])} -> {int(o[i + 1])}): offsets never decrease"
        out.append(Violation(i, key, "offsets", f">= {int(o[i])}", str(int(o[i + 1])), msg))
    return out


def segments_of(
    real: torch.Tensor,
    padded: torch.Tensor | None,
    *,
    keys: tuple[str, str],
    total: int | None,
    alignment: int,
    n: int | None,
) -> Segments:
    """The segments the offsets describe, with every offsets and alignment violation.

    Args:
        real, padded: int64 offsets (``padded`` ``None``: the segments are unpadded).
        keys: the batch keys of the two, for the messages.
        total: the run's length (``None``: not known, e.g. nested columns).
        alignment: every padded segment is a multiple of it.
        n: the samples the batch's per-sample columns hold (``None``: none to compare).

    Raises:
        OffsetsError: the offsets cannot describe the run (they start elsewhere than 0,
            decrease, disagree in count, or end elsewhere than the run).
    """
    found = _vector_problems(keys[0], real, "real")
    if padded is not None:
        found += _vector_problems(keys[1], padded, "padded")
        if padded.shape != real.shape:
            msg = f"{keys[1]} has {padded.shape[0]} entries, {keys[0]} {real.shape[0]}: one padded segment per sequence"
            found.append(Violation(None, keys[1], "offsets", str(real.shape[0]), str(padded.shape[0]), msg))
    if n is not None and real.shape[0] != n + 1:
        got = real.shape[0]
        msg = f"{keys[0]} has {got} entries ({got - 1} sequences) for {n} samples: one offset per sample plus one"
        found.append(Violation(None, keys[0], "offsets", str(n + 1), str(real.shape[0]), msg))
    if found:
        raise OffsetsError(found)
    outer = real if padded is None else padded
    end_key = keys[0] if padded is None else keys[1]
    if total is not None and int(outer[-1]) != total:
        msg = (
            f"{end_key} ends at {int(outer[-1])} but the run holds {total} tokens: the offsets end at the run's length"
        )
        raise OffsetsError([Violation(None, end_key, "offsets", str(total), str(int(outer[-1])), msg)])
    lengths, widths = real.diff(), outer.diff()
    seg = Segments(lengths=lengths, starts=outer[:-1], padded=widths, total=int(outer[-1]))
    _segment_problems(seg, keys, alignment)
    return seg


def _segment_problems(seg: Segments, keys: tuple[str, str], alignment: int) -> None:
    for i in torch.nonzero(seg.lengths == 0).flatten().tolist():
        msg = f"sequence {i} is empty ({keys[0]}[{i}] == {keys[0]}[{i + 1}]): a zero-length segment"
        seg.violations.append(Violation(i, keys[0], "offsets", "at least 1 token", "0 tokens", msg))
        seg.broken.add(i)
    for i in torch.nonzero(seg.padded < seg.lengths).flatten().tolist():
        real, width = int(seg.lengths[i]), int(seg.padded[i])
        msg = f"sequence {i} has {real} real tokens in a padded segment of {width}: {keys[1]} and {keys[0]} confused?"
        seg.violations.append(Violation(i, keys[1], "offsets", f">= {real}", str(width), msg))
        seg.broken.add(i)
    seg.lengths = torch.minimum(seg.lengths, seg.padded)  # a broken segment is cut at its end, never read past it
    if alignment > 1:
        key = keys[1] if keys[1] else keys[0]
        for i in torch.nonzero(seg.padded % alignment).flatten().tolist():
            width = int(seg.padded[i])
            msg = f"sequence {i}'s segment has {width} tokens, not a multiple of the alignment {alignment}"
            seg.violations.append(Violation(i, key, "alignment", f"a multiple of {alignment}", str(width), msg))
