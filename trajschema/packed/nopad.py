"""A packed layout over a dense one (``dense:``): verl's no-padding batch.

verl 0.9.1's ``left_right_2_no_padding`` keeps a ``verl_dataproto`` batch's dense columns
and replaces the token fields by nested tensors of their real tokens: the layout's
``nested`` fields take the int32 offsets the attention mask counts, ``jagged`` fields
(``position_ids``) their own, ``alias`` keys are the very tensor of another key, and
``metadata`` entries describe the dense grid (``index``: the flat positions of the real
tokens in it; ``width:<dim>``: its padded width along a dim).

`pack_dense` builds such a batch from a dense one; `check_nopad` checks one: the dense
columns with the dense layout (masks, padded regions), each nested column's offsets
against the mask's counts (``offsets``), the alias and the metadata, then every sample's
real tokens with the jagged engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trajschema.check import BatchView
from trajschema.core import DenseBatch, PackedBatch, SchemaError, Violation
from trajschema.dense import bind_layout, check_dense
from trajschema.packed.bind import bind_packed
from trajschema.packed.engine import PackedCheck, engine_check, padding_masks
from trajschema.packed.tokens import nested, offsets_of, position_violations

if TYPE_CHECKING:
    from trajschema.check import Plan
    from trajschema.core import PackedLayout
    from trajschema.dense import Geometry
    from trajschema.packed.bind import BoundPacked, PackedPlaced

__all__ = ["check_nopad", "pack_dense"]


def _dense_axis(bound: BoundPacked, name: str) -> int | None:
    """The dense batch axis (counting the batch) of the token dim in field ``name``, or ``None``."""
    assert bound.dense is not None
    placed = bind_layout(bound.dense, bound.plan).placed.get(name)
    f = bound.plan.fields[name]
    for i, e in enumerate(f.shape or ()):
        if e.is_name and e.args[0] == bound.layout.tokens:
            return i + 1
    return placed.axis if placed is not None else None


def _width(geo: Geometry, spec: str) -> int:
    return int(geo.widths[spec.removeprefix("width:")])


def _metadata(bound: BoundPacked, geo: Geometry, region: torch.Tensor) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, spec in bound.layout.metadata.items():
        out[key] = torch.nonzero(region.flatten()).flatten() if spec == "index" else _width(geo, spec)
    return out


def _cut(col: torch.Tensor, axis: int, flat_index: torch.Tensor) -> torch.Tensor:
    """The real tokens of a dense ``(B, ..., W, ...)`` column along ``axis``, ragged first."""
    moved = col.movedim(axis, 1)
    return moved.flatten(0, 1).index_select(0, flat_index)


def pack_dense(plan: Plan, batch: Any, *, layout: PackedLayout) -> Any:
    """A dense batch (in the layout's ``dense:`` layout) as the packed batch ``layout`` describes.

    The dense batch is checked first. The result is a new batch (the input is not
    changed): a ``TensorDict`` with ``NonTensorData`` metadata when ``batch`` is one (as
    verl's ``left_right_2_no_padding`` returns it), else a `PackedBatch`.

    Raises:
        SchemaError: the dense batch breaks the schema or its layout; nothing is converted.
        ValueError: ``layout`` has no ``dense:`` layout.
    """
    bound = bind_packed(layout, plan)
    if bound.dense is None:
        raise ValueError(f"layout {layout.name!r} has no dense: layout to pack from; use to_packed with samples")
    from trajschema.files import as_layout

    full = as_layout(layout.dense)
    checked = check_dense(
        plan,
        batch,
        full.with_pad_token(layout.pad_token_id) if layout.pad_token_id is not None else full,
        depth="values",
    )
    if checked.violations:
        raise SchemaError(checked.violations, schema_name=plan.name, bindings=checked.bindings)
    assert checked.geometry is not None
    region = checked.geometry.region(layout.tokens)
    lengths = region.sum(-1, dtype=torch.int32)
    offsets = torch.zeros(lengths.shape[0] + 1, dtype=torch.int32, device=lengths.device)
    torch.cumsum(lengths, 0, dtype=torch.int32, out=offsets[1:])
    flat_index = torch.nonzero(region.flatten()).flatten()
    cols = _columns_of(batch)
    out: dict[str, Any] = dict(cols)
    for p in bound.held("nested", "jagged"):
        col = cols.get(p.key)
        axis = _dense_axis(bound, p.name)
        if not isinstance(col, torch.Tensor) or col.is_nested or axis is None:
            continue
        own = offsets if p.held == "nested" else offsets.to(torch.int64)
        out[p.key] = nested(_cut(col, axis, flat_index), own, axis - 1)
    for p in bound.held("alias"):
        if p.entry.source in out:
            out[p.key] = out[p.entry.source]
    return _container(batch, out, _metadata(bound, checked.geometry, region))


def _columns_of(batch: Any) -> dict[str, Any]:
    from trajschema.packed.view import read_packed

    return read_packed(batch)[0]


def _container(batch: Any, out: dict[str, Any], metadata: dict[str, Any]) -> Any:
    from trajschema.check import is_tensordict

    if not is_tensordict(batch):
        return PackedBatch(out, metadata=metadata)
    from tensordict import NonTensorData

    td = batch.empty()
    for k, v in out.items():
        td[k] = v if isinstance(v, torch.Tensor) else batch.get(k)
    for k, v in metadata.items():
        td[k] = NonTensorData(data=v)
    return td


def _nested_problem(p: PackedPlaced, col: Any, want: torch.Tensor) -> list[Violation]:
    if not (isinstance(col, torch.Tensor) and col.is_nested and col.layout == torch.jagged):
        found = (
            type(col).__name__
            if not isinstance(col, torch.Tensor)
            else "a dense tensor"
            if not col.is_nested
            else "a strided nested tensor"
        )
        return [
            Violation(
                None,
                p.key,
                "kind",
                "a jagged nested tensor",
                found,
                f"{p.key} must be a jagged nested tensor of the real tokens, found {found}",
            )
        ]
    have = offsets_of(col).diff().to(torch.int64)
    if have.shape != want.shape:
        msg = f"{p.key} holds {have.shape[0]} sequences, the dense masks {want.shape[0]}"
        return [Violation(None, p.key, "offsets", str(want.shape[0]), str(have.shape[0]), msg)]
    out = []
    for i in torch.nonzero(have != want.to(have.device)).flatten().tolist():
        msg = f"{p.key}: sequence {i} holds {int(have[i])} tokens, its attention mask counts {int(want[i])}"
        out.append(Violation(i, p.key, "offsets", str(int(want[i])), str(int(have[i])), msg))
    return out


def _metadata_problems(
    bound: BoundPacked, cols: Mapping[str, Any], geo: Geometry, region: torch.Tensor
) -> list[Violation]:
    found = []
    for key, spec in bound.layout.metadata.items():
        if key not in cols:
            found.append(Violation(None, key, "missing", spec, "nothing", f"the batch has no {key} ({spec})"))
            continue
        have = cols[key]
        if spec == "index":
            want = torch.nonzero(region.flatten()).flatten()
            ok = (
                isinstance(have, torch.Tensor)
                and not have.is_nested
                and have.shape == want.shape
                and bool(torch.equal(have.to(want.device), want))
            )
            shown = (
                f"{len(have)} positions" if isinstance(have, torch.Tensor) and have.dim() == 1 else type(have).__name__
            )
            if not ok:
                msg = f"{key} must be the flat positions of the {want.numel()} real tokens in the grid, found {shown}"
                found.append(Violation(None, key, "value", f"{want.numel()} real-token positions", shown, msg))
        elif not (isinstance(have, int) and not isinstance(have, bool) and have == _width(geo, spec)):
            dim = spec.removeprefix("width:")
            msg = f"{key} must be the padded width along {dim} ({_width(geo, spec)}), found {have!r}"
            found.append(Violation(None, key, "value", str(_width(geo, spec)), repr(have), msg))
    return found


def _alias_problems(bound: BoundPacked, cols: Mapping[str, Any]) -> list[Violation]:
    found = []
    for p in bound.held("alias"):
        src = cols.get(p.entry.source or "")
        have = cols.get(p.key)
        if src is None:
            continue
        if have is None:
            found.append(
                Violation(
                    None,
                    p.key,
                    "missing",
                    f"the {p.entry.source} tensor",
                    "nothing",
                    f"the batch has no {p.key} (verl sets it to {p.entry.source})",
                )
            )
        elif have is not src and not (
            isinstance(have, torch.Tensor)
            and isinstance(src, torch.Tensor)
            and have.shape == src.shape
            and bool(torch.equal(have, src))
        ):
            found.append(
                Violation(
                    None,
                    p.key,
                    "value",
                    f"the {p.entry.source} tensor",
                    "another tensor",
                    f"{p.key} must be {p.entry.source} itself",
                )
            )
    return found


def check_nopad(
    plan: Plan, bound: BoundPacked, cols: dict[str, Any], *, tags: Sequence[Any] | None, dims: Any, depth: str
) -> PackedCheck:
    """Every violation of a packed batch over a dense layout (see the module docstring)."""
    assert bound.dense is not None
    packed_keys = {p.key for p in bound.held("nested", "jagged", "alias")} | set(bound.layout.metadata)
    dense_part = DenseBatch({k: v for k, v in cols.items() if k not in packed_keys})
    d = check_dense(plan, dense_part, bound.dense, tags=tags, dims=dims, depth=depth, extract=True, engine=False)
    found = list(d.violations)
    geo = d.geometry
    if geo is None or not isinstance(d.jagged, BatchView):
        return PackedCheck(found, {})
    region = geo.region(bound.layout.tokens)
    want = region.sum(-1).to(torch.int64)
    columns: dict[str, Any] = {str(k): d.jagged.column(str(k)) for k in d.jagged.keys()}
    broken = set(geo.broken)
    for p in bound.held("nested", "jagged"):
        col = cols.get(p.key)
        if col is None:
            continue
        problems = _nested_problem(p, col, want) if p.held == "nested" else []
        found += problems
        broken |= {v.sample for v in problems if v.sample is not None}
        if not problems or all(v.sample is not None for v in problems):
            columns[p.name] = col
    found += _alias_problems(bound, cols) + _metadata_problems(bound, cols, geo, region)
    for p in bound.held("alias"):
        src = next((q for q in bound.placed.values() if q.key == p.entry.source), None)
        if src is not None and src.name in columns:
            columns[p.name] = columns[src.name]
    optional = frozenset(
        n
        for n, p in bound.placed.items()
        if p.held == "absent" or (p.held == "dense" and bound.dense.entry(n, plan.lineage).held == "absent")
    )
    engine, bindings, td = engine_check(
        plan, columns, geo.n, optional, tags=d.tags if tags is None else tags, dims=dims, depth=depth
    )
    found += [v for v in engine if v.sample is None or v.sample not in broken]
    pos = bound.positions
    if pos is not None and pos.name in columns and pos.axis is not None:
        found += position_violations(pos.key, columns[pos.name], pos.axis, broken)
    found += padding_masks(bound, columns, d.tags if tags is None else tags)
    return PackedCheck(found, {k: v for k, v in bindings.items() if k not in broken}, td, want)
