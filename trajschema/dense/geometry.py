"""Per-row lengths and real regions of a dense batch, read from its masks.

Every ``sizes:`` dim is counted from its mask (the ones of the mask's block of its axis),
vectorized over the rows; the other per-sample dims are solved from those (a concatenated
axis is the sum of its blocks; a block that ``holds`` ``[prompt, response]`` leaves
``prompt = seq - response``). A mask must be exactly the real region its count gives:
one contiguous run of ones, on the side the layout does not pad. Regions are ``(B, T)``
bool tensors built by comparing an ``arange`` with each row's bounds, on the masks'
device. The loops here run over axes, blocks and broken rows, never over clean rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

import torch

from trajschema.core import LEFT, MAX, Axis, Block, LayoutDefinitionError, Violation, any_per_row, describe_value
from trajschema.dense.view import DenseView, is_plain

if TYPE_CHECKING:
    from trajschema.dense.bind import BoundLayout

__all__ = ["Geometry", "GeometryError", "check_max", "measure"]


class GeometryError(Exception):
    """The lengths cannot be read at all; ``violations`` say why (nothing per row was checked)."""

    def __init__(self, violations: list[Violation]) -> None:
        super().__init__(violations)
        self.violations = violations


@dataclasses.dataclass
class Geometry:
    """What the masks of a batch say.

    Attributes:
        n: rows.
        widths: the padded length of each axis (by its dim), and of each block's dim.
        lengths: per-row length (int64 ``(B,)``, on the masks' device) of every per-sample dim
            (0 on a broken row).
        broken: rows whose masks are broken (their other checks are skipped).
        violations: ``mask`` and ``length`` violations.
    """

    bound: BoundLayout
    n: int
    widths: dict[str, int]
    lengths: dict[str, torch.Tensor]
    broken: set[int]
    violations: list[Violation]
    device: torch.device
    _regions: dict[tuple[str, str | None], torch.Tensor] = dataclasses.field(default_factory=dict)
    #: each dim's row offsets, as the extraction makes them (`trajschema.dense.extract.row_offsets`)
    offsets: dict[str, torch.Tensor] = dataclasses.field(default_factory=dict)

    def spans(self, axis: Axis) -> list[tuple[Block, int, int]]:
        """(block, first column, width) of each block of ``axis``."""
        out, at = [], 0
        for b in axis.blocks:
            w = self.widths[b.dim] if axis.concat else self.widths[axis.dim]
            out.append((b, at, w))
            at += w
        return out

    def bounds(self, axis_dim: str, part: str | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per-row ``(start, end)`` of the real region of ``part`` (default: every block) on the axis ``axis_dim``."""
        found = []
        for b, at, w in self.spans(self.bound.axis_of(axis_dim)):
            length = self.lengths[b.dim]
            start = at + (w - length if b.pad_side == LEFT else torch.zeros_like(length))
            if part is None or part == b.dim or (part == axis_dim and not b.holds):
                found.append((start, start + length))
            elif part in b.holds:
                for h in b.holds:
                    if h == part:
                        found.append((start, start + self.lengths[h]))
                        break
                    start = start + self.lengths[h]
        return found

    def region(self, axis_dim: str, part: str | None = None) -> torch.Tensor:
        """The ``(B, T)`` bool mask of the real positions of ``part`` (default: all) on axis ``axis_dim``."""
        key = (axis_dim, part)
        hit = self._regions.get(key)
        if hit is None:
            width = sum(w for _, _, w in self.spans(self.bound.axis_of(axis_dim)))
            t = torch.arange(width, device=self.device)
            hit = torch.zeros((self.n, width), dtype=torch.bool, device=self.device)
            for start, end in self.bounds(axis_dim, part):
                hit |= _between(t, start, end, width)
            self._regions[key] = hit
        return hit

    def padded(self, axis_dim: str) -> torch.Tensor:
        """``~region(axis_dim)`` on the rows that are not broken, kept: every padded-region check
        of the axis reads it. A broken row has no known region, so no known padding either."""
        key = (axis_dim, "<padded>")
        hit = self._regions.get(key)
        if hit is None:
            hit = ~self.region(axis_dim)
            if self.broken:
                hit.index_fill_(0, self._rows(self.broken), False)
            self._regions[key] = hit
        return hit

    def discard(self, rows: Collection[int]) -> None:
        """Mark ``rows`` broken: their lengths become 0, so every region fits them and holds none of them."""
        if not rows:
            return
        self.broken.update(rows)
        at = self._rows(rows)
        for dim, length in self.lengths.items():
            self.lengths[dim] = length.index_fill(0, at, 0)
        self._regions.clear()
        self.offsets.clear()

    def _rows(self, rows: Collection[int]) -> torch.Tensor:
        return torch.tensor(sorted(rows), dtype=torch.int64, device=self.device)


def _between(t: torch.Tensor, start: torch.Tensor, end: torch.Tensor, width: int) -> torch.Tensor:
    """``start <= t < end`` per row, one comparison when a run starts every row at 0 or ends it at ``width``."""
    if start.numel() and bool((end == width).all()):
        return t >= start[:, None]
    if start.numel() and bool((start == 0).all()):
        return t < end[:, None]
    return (t >= start[:, None]) & (t < end[:, None])


def axis_widths(bound: BoundLayout, view: DenseView) -> tuple[dict[str, int], list[Violation]]:
    """The padded length of every axis and block, from the columns padded along it; a
    concatenated axis whose blocks are all known is as wide as they are together (the masks
    are cut there), whatever its own columns say (`check_dense` holds those to it)."""
    widths: dict[str, int] = {}
    for p in bound.columns():
        col = view.get(p.key or "")
        if p.dim is None or p.axis is None or not is_plain(col) or col.dim() <= p.axis:
            continue
        if p.entry.broadcast and col.shape[p.axis] == 1:  # one value a row, spread over the axis
            continue
        widths.setdefault(p.dim, col.shape[p.axis])
    problems = []
    for axis in bound.layout.axes.values():
        if not axis.concat:
            continue
        known = [widths.get(b.dim) for b in axis.blocks]
        total = widths.get(axis.dim)
        if None not in known:  # the masks are cut at the blocks: a column along the axis is as wide as they are
            widths[axis.dim] = sum(w for w in known if w is not None)
            continue
        if None in known and total is not None and known.count(None) == 1:
            i = known.index(None)
            rest = total - sum(w for w in known if w is not None)
            if rest >= 0:
                widths[axis.blocks[i].dim] = rest
                continue
        if None in known and any(p.dim == axis.dim for p in bound.columns() if view.has(p.key or "")):
            missing = axis.blocks[known.index(None)].dim
            msg = (
                f"cannot split axis {axis.dim!r} into its blocks {[b.dim for b in axis.blocks]}: "
                f"no column of the batch is padded along {missing!r} alone, so its padded length is unknown"
            )
            problems.append(Violation(None, f"<{axis.dim}>", "shape", f"a column padded along {missing}", "none", msg))
    return widths, problems


def _mask_problem(values: torch.Tensor, want: torch.Tensor, block: Block) -> tuple[str, str]:
    """(found, message) for one broken row of a mask block (the defect path: one row at a time)."""
    odd = values[(values != 0) & (values != 1)]
    if odd.numel():
        v = odd[0].item()
        return f"value {v}", f"values other than 0 and 1 (found {v})"
    o = (values != 0).to(torch.int8)
    runs = int(((o[1:] - o[:-1]) == 1).sum().item() + o[0].item()) if o.numel() else 0
    if runs > 1:
        return f"{runs} runs", f"ones are not one contiguous run ({runs} runs)"
    other = "right" if block.pad_side == LEFT else "left"
    return (
        f"padding on the {other}",
        f"padding on the {other} of a block the layout pads on the {block.pad_side} "
        f"(ones at {_run(o)}, expected {_run(want.to(torch.int8))})",
    )


def _run(o: torch.Tensor) -> str:
    at = torch.nonzero(o).flatten()
    return "none" if not at.numel() else f"[{int(at[0])}, {int(at[-1]) + 1})"


def count_mask(
    key: str, col: torch.Tensor, start: int, width: int, block: Block, dim: str
) -> tuple[torch.Tensor, dict[int, Violation]]:
    """Per-row ones of ``col[:, start:start + width]`` and a ``mask`` violation per row where
    they are not exactly the block's real region."""
    seg = col.narrow(1, start, width)
    exact = seg.dtype == torch.bool or not (seg.is_floating_point() or seg.is_complex())
    lengths = seg.sum(1, dtype=torch.int64) if exact else (seg != 0).sum(1, dtype=torch.int64)
    t = torch.arange(width, device=col.device)
    bad = _broken_rows(seg, lengths, t, block.pad_side == LEFT, exact)
    found = {}
    for row in torch.nonzero(bad).flatten().tolist():
        ones = int((seg[row] != 0).sum())
        lengths[row] = ones
        t_row = t >= width - ones if block.pad_side == LEFT else t < ones
        actual, problem = _mask_problem(seg[row], t_row, block)
        where = f" (columns [{start}, {start + width}))" if start or width != col.shape[1] else ""
        msg = f"{key} row {row}: {problem} in the {dim} block{where}"
        found[row] = Violation(row, key, "mask", f"one run of ones, padded on the {block.pad_side}", actual, msg)
    return lengths, found


def _broken_rows(seg: torch.Tensor, lengths: torch.Tensor, t: torch.Tensor, left: bool, exact: bool) -> torch.Tensor:
    """``(B,)`` bool: the rows of the mask ``seg`` that are not one run of ones against their padding side.

    An integer or bool row is clean when it never rises (right padding) or falls (left
    padding) along the row and its ends, then its extremes, lie in [0, 1]: one one-dtype
    pass, where comparing with the wanted region in bool costs ~10x as much (a mixed-dtype
    comparison). A float row (0.5 is not a mask value) is compared with the region of its count.
    """
    if seg.shape[1] == 0:
        return torch.zeros(seg.shape[0], dtype=torch.bool, device=seg.device)
    if not exact:
        want = t >= (t.numel() - lengths)[:, None] if left else t < lengths[:, None]
        return any_per_row(seg != want)
    a, b = seg[:, :-1], seg[:, 1:]
    bad = any_per_row(b < a if left else b > a)
    if seg.dtype != torch.bool:  # monotone: the row's max and min are its ends
        low, high = (seg[:, 0], seg[:, -1]) if left else (seg[:, -1], seg[:, 0])
        bad |= (low < 0) | (high > 1)
    return bad


def _mask_block(bound: BoundLayout, dim: str, mask_dim: str) -> Block:
    for b in bound.axis_of(mask_dim).blocks:
        if b.dim == dim or (not bound.axis_of(mask_dim).concat and mask_dim == dim):
            return b
    raise LayoutDefinitionError(
        bound.layout.source, f"sizes.{dim}", f"a mask counts a block's dim; {dim!r} is only held inside a block"
    )


def mask_dtype_problem(key: str, col: torch.Tensor, layout_dtype: torch.dtype | None) -> Violation | None:
    """A ``mask`` violation for a mask of a dtype that is neither bool/integer nor the layout's ``dtype:``."""
    if col.dtype == torch.bool or not (col.is_floating_point() or col.is_complex()) or col.dtype == layout_dtype:
        return None
    dt = str(col.dtype).removeprefix("torch.")
    msg = f"dtype {dt}: a mask is bool or an integer dtype (the layout gives it no dtype:)"
    return Violation(None, key, "mask", "bool or integer dtype", str(col.dtype).removeprefix("torch."), msg)


def count_sizes(bound: BoundLayout, view: DenseView, widths: Mapping[str, int]) -> Geometry:
    """Count every ``sizes:`` dim from its mask (raises `GeometryError` when a mask cannot be read)."""
    found: list[Violation] = []
    lengths: dict[str, torch.Tensor] = {}
    broken: dict[int, Violation] = {}
    device = None
    for dim, mask in bound.sizes.items():
        p = bound.placed[mask]
        key, col = p.key or mask, view.get(p.key or mask)
        if not is_plain(col) or col.dim() != 2 or p.dim is None:
            shown = "nothing" if col is None else _shape_of(col)
            msg = f"the layout reads the per-row sizes of {dim!r} from {key!r}, a (B, T) mask; found {shown}"
            raise GeometryError([Violation(None, key, "mask", "a (B, T) tensor", shown, msg)])
        if col.is_meta:
            msg = (
                f"{key} is a meta tensor: it holds no values, so the per-row sizes of {dim!r} cannot be read "
                "and nothing per row was checked (check a batch on a real device)"
            )
            raise GeometryError([Violation(None, key, "mask", "a mask with values", "meta tensor", msg)])
        device = col.device
        dtype_problem = mask_dtype_problem(key, col, p.entry.dtype)
        if dtype_problem is not None and dtype_problem not in found:
            found.append(dtype_problem)
        start = next((at for b, at, _ in _spans(bound, widths, p.dim) if b.dim == dim), 0)
        width = widths.get(dim, col.shape[1]) if bound.axis_of(p.dim).concat else col.shape[1]
        if start + width > col.shape[1]:
            msg = f"{key} has {col.shape[1]} columns; its {dim} block needs columns [{start}, {start + width})"
            raise GeometryError([Violation(None, key, "shape", f"{start + width} columns", _shape_of(col), msg)])
        lengths[dim], bad = count_mask(key, col, start, width, _mask_block(bound, dim, p.dim), dim)
        for row, v in bad.items():
            broken.setdefault(row, v)
    found.extend(broken[r] for r in sorted(broken))
    return Geometry(bound, view.n, dict(widths), lengths, set(broken), found, device or torch.device("cpu"))


def _spans(bound: BoundLayout, widths: Mapping[str, int], axis_dim: str) -> list[tuple[Block, int, int]]:
    axis, out, at = bound.axis_of(axis_dim), [], 0
    for b in axis.blocks:
        w = widths.get(b.dim if axis.concat else axis.dim, 0)
        out.append((b, at, w))
        at += w
    return out


def _shape_of(x: Any) -> str:
    if is_plain(x):
        return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"
    return describe_value(x)  # a nested tensor has no shape; a sparse one is named as such


def solve(geo: Geometry) -> None:
    """Fill in the lengths no mask counts: sums of blocks, and the one unknown part a block holds."""
    bound, lengths = geo.bound, geo.lengths
    changed = True
    while changed:
        changed = False
        for axis in bound.layout.axes.values():
            if axis.concat and axis.dim not in lengths and all(b.dim in lengths for b in axis.blocks):
                lengths[axis.dim] = sum(
                    (lengths[b.dim] for b in axis.blocks), torch.zeros_like(lengths[axis.blocks[0].dim])
                )
                changed = True
            for b in axis.blocks:
                changed |= _solve_block(geo, b)


def _solve_block(geo: Geometry, b: Block) -> bool:
    lengths = geo.lengths
    unknown = [h for h in b.holds if h not in lengths]
    if not b.holds or len(unknown) > 1:
        return False
    if not unknown and b.dim in lengths:  # every part counted: they must add up
        rest = lengths[b.dim] - sum((lengths[h] for h in b.holds[1:]), torch.zeros_like(lengths[b.dim]))
        for row in torch.nonzero(rest != lengths[b.holds[0]]).flatten().tolist():
            _disagree(geo, b, b.holds[0], row, rest)
        return False
    if not unknown:
        lengths[b.dim] = sum((lengths[h] for h in b.holds), torch.zeros_like(lengths[b.holds[0]]))
        return True
    if b.dim not in lengths:
        return False
    rest = lengths[b.dim] - sum((lengths[h] for h in b.holds if h != unknown[0]), torch.zeros_like(lengths[b.dim]))
    for row in torch.nonzero(rest < 0).flatten().tolist():
        _disagree(geo, b, unknown[0], row, rest)
    lengths[unknown[0]] = rest.clamp(min=0)
    return True


def _disagree(geo: Geometry, b: Block, part: str, row: int, rest: torch.Tensor) -> None:
    """Two masks disagree: the other parts of a block hold more than the block's real length."""
    sizes = geo.bound.sizes
    others = [h for h in b.holds if h != part]
    key = geo.bound.placed[sizes[others[0]]].key if others and others[0] in sizes else sizes.get(b.dim, b.dim)
    block_mask = geo.bound.placed[sizes[b.dim]].key if b.dim in sizes else b.dim
    total, used = int(geo.lengths[b.dim][row]), int(geo.lengths[b.dim][row] - rest[row])
    msg = (
        f"{key} row {row}: {used} ones, more than the {total} real positions {block_mask} gives its "
        f"{b.dim} block ({part} would be {int(rest[row])})"
    )
    if row not in geo.broken:
        geo.broken.add(row)
        geo.violations.append(Violation(row, str(key), "mask", f"at most {total} ones", f"{used} ones", msg))


def check_max(geo: Geometry, view: DenseView) -> None:
    """``length: max`` blocks: the padded length is the longest row's (a ``length`` violation).

    Call it once every broken row is known: a broken row's length is unknown, so while the
    batch has one, its longest row (and so its padded length) cannot be judged.
    """
    if not geo.n or geo.broken:
        return
    for axis in geo.bound.layout.axes.values():
        for b, _, w in geo.spans(axis):
            if b.length != MAX or b.dim not in geo.lengths or (axis.concat and b.dim in geo.bound.layout.axes):
                continue
            longest = int(geo.lengths[b.dim].max())
            if w != longest:
                key = _axis_key(geo, axis.dim, view)
                msg = (
                    f"padded to {w} along {axis.dim!r}, but the longest row has {longest}: "
                    "the layout pads to the batch maximum"
                )
                geo.violations.append(Violation(None, key, "length", f"length {longest}", f"length {w}", msg))


def _axis_key(geo: Geometry, axis_dim: str, view: DenseView) -> str:
    mask = geo.bound.sizes.get(axis_dim)
    if mask is not None:
        return geo.bound.placed[mask].key or mask
    for p in geo.bound.columns():
        if p.dim == axis_dim and view.has(p.key or ""):
            return p.key or p.name
    return f"<{axis_dim}>"


def measure(bound: BoundLayout, view: DenseView) -> Geometry:
    """Widths, lengths and ``mask`` violations of a batch (`check_max` adds the ``length`` ones).

    Raises:
        GeometryError: a mask is missing, not ``(B, T)``, or on the ``meta`` device.
    """
    widths, problems = axis_widths(bound, view)
    if problems:
        raise GeometryError(problems)
    geo = count_sizes(bound, view, widths)
    solve(geo)
    missing = sorted(d for d in bound.parts if d not in geo.lengths and _used(bound, d))
    if missing:
        msg = f"the layout gives no mask for the per-row sizes of {missing}"
        raise GeometryError([Violation(None, f"<{missing[0]}>", "mask", "a sizes: mask", "none", msg)])
    geo.discard(set(geo.broken))  # a broken row's counts are not its lengths
    return geo


def _used(bound: BoundLayout, dim: str) -> bool:
    return any(p.dim == dim and p.held != "absent" for p in bound.placed.values())
