"""Vectorized screening of a TransferQueue-shaped TensorDict batch.

TransferQueue returns each per-sample tensor field as a jagged nested tensor (also
when every sample has the same shape, and with the ragged dim anywhere, e.g. ``(4, S)``
position ids), falls back to a strided nested tensor when rows cannot form a jagged one,
and may hand back dense tensors whose first dim is the batch. Per-sample shapes are read
from offsets and nested sizes — never by unbinding samples — and the dims are bound for
all samples at once. The result is only the list of rows that need a closer look;
``_validate.check_sample`` writes the actual violation records for those rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ._dims import DerivedDim
from ._schema import Field, Schema

__all__ = ["RowSource", "column_rows", "column_shapes", "suspicious_rows"]


def _nontensor_values(col: Any, n: int) -> list[Any] | None:
    from tensordict import NonTensorData, NonTensorStack

    if isinstance(col, NonTensorStack):
        return list(col.tolist())
    if isinstance(col, NonTensorData):
        return [col.data] * n
    return None


def column_rows(col: Any, n: int) -> Sequence[Any]:
    """A batch column as one value per sample: tensors for tensor columns, Python values otherwise.

    Jagged columns are cut from their flat values with ``narrow`` — ``unbind`` on a
    nested tensor goes through Python-level dispatch and costs ~0.3 ms a column.
    """
    values = _nontensor_values(col, n)
    if values is not None:
        return values
    if not isinstance(col, torch.Tensor):
        return [col] * n
    if col.is_nested and col.layout == torch.jagged and col.lengths() is None:
        flat, axis = col.values(), col._ragged_idx - 1
        bounds = col.offsets().tolist()
        return [flat.narrow(axis, bounds[i], bounds[i + 1] - bounds[i]) for i in range(n)]
    return col.unbind(0)


def column_shapes(col: Any, n: int) -> torch.Tensor | None:
    """Per-sample shapes of a batch column as an ``(n, rank)`` int64 tensor, or ``None``.

    ``None`` means the column is not a tensor laid out per sample (e.g. non-tensor data).
    """
    if not isinstance(col, torch.Tensor):
        return None
    if not col.is_nested:
        if col.dim() == 0:
            return None
        return torch.tensor(col.shape[1:], dtype=torch.int64).expand(n, col.dim() - 1)
    if col.layout == torch.jagged:
        ragged = col._ragged_idx
        lengths = col.lengths() if col.lengths() is not None else col.offsets().diff()
        cols = [
            lengths.to(torch.int64) if d == ragged else torch.full((n,), col.shape[d], dtype=torch.int64)
            for d in range(1, col.dim())
        ]
        return torch.stack(cols, dim=1) if cols else torch.zeros((n, 0), dtype=torch.int64)
    return col._nested_tensor_size().to(torch.int64)


def _majority(obs: torch.Tensor, preferred: torch.Tensor | None) -> torch.Tensor:
    """Per column of ``obs`` (observers x samples), the size most observers agree on.

    Ties go to ``preferred`` (a derived dim's computed size), then to the first observer
    in declaration order (``argmax`` returns the first maximum).
    """
    if preferred is not None:
        obs = torch.cat([preferred.expand(1, obs.shape[1]), obs])
    if obs.shape[0] == 1 or bool((obs == obs[0]).all()):
        return obs[0]  # the usual case: every observer agrees
    counts = (obs[:, None, :] == obs[None, :, :]).sum(1)
    return obs.gather(0, counts.argmax(0, keepdim=True))[0]


def _as_vec(x: Any, n: int) -> torch.Tensor:
    return x if isinstance(x, torch.Tensor) else torch.full((n,), int(x), dtype=torch.int64)


def suspicious_rows(
    schema: Schema,
    plan: Any,
    batch: Any,
    *,
    tags: Sequence[Mapping[str, Any]] | None,
    dims: Mapping[str, int] | None,
    depth: str,
) -> list[int]:
    """Rows of ``batch`` that may break ``schema``; a clean row is never listed."""
    from ._validate import _check_tag, _kind_ok, kinds_ok

    n = batch.batch_size[0]
    if n == 0:
        return []
    bad = torch.zeros(n, dtype=torch.bool)
    keys = set(batch.keys())
    everyone = list(range(n))

    obs: dict[str, list[torch.Tensor]] = {}
    for f, axes in plan.tensors:
        if f.name not in keys:
            if f.required:
                return everyone
            continue
        col = batch.get(f.name)
        shapes = column_shapes(col, n)
        if shapes is None or col.dtype not in f.dtypes or shapes.shape[1] != len(axes):
            return everyone
        for i, (name, lit) in enumerate(axes):
            if name is None:
                bad |= shapes[:, i] != lit
            else:
                obs.setdefault(name, []).append(shapes[:, i])
        if depth == "values" and f.has_value_checks:
            bad |= _bad_value_rows(f, col, n)
    for f in plan.others:
        if f.name not in keys:
            if f.required:
                return everyone
            continue
        col = batch.get(f.name)
        values = _nontensor_values(col, n)
        if values is None:
            if isinstance(col, torch.Tensor) and not col.is_nested and col.dim() == 1:
                # A dense column of scalars, e.g. num_turns written as an int64 tensor.
                if not _kind_ok(f.kind, col[0]):
                    return everyone
                if depth == "values" and f.has_value_checks:
                    bad |= _bad_scalar_rows(f, col)
                continue
            return everyone
        if f.required and None in values:
            bad |= torch.tensor([v is None for v in values])
        if not kinds_ok(f.kind, values):
            bad |= torch.tensor([v is not None and not _kind_ok(f.kind, v) for v in values])
        if depth == "values" and f.has_value_checks:
            from ._validate import _check_values

            for i, v in enumerate(values):
                if v is not None and not bad[i]:
                    hits: list[Any] = []
                    _check_values(f, v, lambda *a, hits=hits: hits.append(a))
                    bad[i] |= bool(hits)
    if schema.extra == "forbid" and any(k not in schema.fields for k in keys):
        return everyone

    pinned = dict(dims or {})
    env: dict[str, Any] = {}
    for name, d in plan.dims.items():
        if isinstance(d, DerivedDim):
            continue
        seen = obs.get(name)
        ref = pinned.get(name, plan.fixed.get(name))
        if ref is not None:
            ref = _as_vec(ref, n)
        elif seen:
            ref = _majority(torch.stack(seen), None)
        else:
            continue
        env[name] = ref
        for s in seen or ():
            bad |= s != ref
    for d in plan.derived:
        computed = d.expr.evaluate(env)
        computed = None if computed is None else _as_vec(computed, n)
        seen = obs.get(d.name)
        target = pinned.get(d.name)
        if target is not None:
            target = _as_vec(target, n)
        elif seen:
            target = _majority(torch.stack(seen), computed)
        if target is None:
            if computed is not None:
                env[d.name] = computed
            continue
        env[d.name] = target
        for s in seen or ():
            bad |= s != target
        if computed is not None:
            bad |= computed != target
            continue
        unbound = [m for m in d.expr.names() if m not in env]
        if len(unbound) != 1:
            bad[:] = True
            continue
        x = unbound[0]
        a = _as_vec(d.expr.evaluate({**env, x: 0}), n)
        b = _as_vec(d.expr.evaluate({**env, x: 1}), n) - a
        c = _as_vec(d.expr.evaluate({**env, x: 2}), n) - a
        ok = (b != 0) & (c == 2 * b)
        safe_b = torch.where(ok, b, torch.ones_like(b))
        sol = torch.div(target - a, safe_b, rounding_mode="floor")
        ok &= (sol * safe_b == target - a) & (sol >= 0)
        sol = torch.where(ok, sol, torch.zeros_like(sol))
        ok &= _as_vec(d.expr.evaluate({**env, x: sol}), n) == target  # probes cannot prove linearity
        bad |= ~ok
        env[x] = sol
    for d in plan.free:
        v = env.get(d.name)
        if v is None:
            continue
        out = v < d.min
        if d.max is not None:
            out |= v > d.max
        if d.multiple_of is not None:
            out |= v % d.multiple_of != 0
        bad |= out

    if tags is not None:
        # Tag dicts are Python objects; compare them against the bound dims row by row,
        # reusing the per-sample tag check (it appends a record per problem).
        env_lists = {k: v.tolist() for k, v in env.items()}
        for i, tag in enumerate(tags):
            if bad[i]:
                continue
            row_env = {k: v[i] for k, v in env_lists.items()}
            hits: list[Any] = []
            _check_tag(schema, tag, row_env, lambda *a, hits=hits: hits.append(a))
            if hits:
                bad[i] = True
    return bad.nonzero().flatten().tolist()


def _bad_value_rows(f: Field, col: torch.Tensor, n: int) -> torch.Tensor:
    from ._validate import _bad_elements, values_clean

    if not col.is_nested:
        if values_clean(f, col):
            return torch.zeros(n, dtype=torch.bool)
        rows = torch.zeros(n, dtype=torch.bool)
        for _, mask in _bad_elements(f, col):
            rows |= mask.reshape(n, -1).any(1)
        return rows
    if col.layout == torch.jagged and col.lengths() is None:
        values = col.values()
        if values_clean(f, values):
            return torch.zeros(n, dtype=torch.bool)
        axis = col._ragged_idx - 1
        offsets = col.offsets()
        rows = torch.zeros(n, dtype=torch.bool)
        for _, mask in _bad_elements(f, values):
            other = [d for d in range(mask.dim()) if d != axis]
            per_pos = mask.any(dim=other) if other else mask
            pos = per_pos.nonzero().flatten()
            if pos.numel():
                rows[torch.searchsorted(offsets, pos, right=True) - 1] = True
        return rows
    # Strided nested tensors (TransferQueue's rare fallback) have no flat values view.
    rows = torch.zeros(n, dtype=torch.bool)
    for i, t in enumerate(col.unbind()):
        rows[i] = any(bool(m.any()) for _, m in _bad_elements(f, t))
    return rows


def _bad_scalar_rows(f: Field, col: torch.Tensor) -> torch.Tensor:
    rows = torch.zeros(col.shape[0], dtype=torch.bool)
    if f.values is not None:
        rows |= ~torch.isin(col, torch.tensor(f.values, dtype=col.dtype))
    if f.min is not None:
        rows |= col < f.min
    if f.max is not None:
        rows |= col > f.max
    if f.finite and col.is_floating_point():
        rows |= ~torch.isfinite(col)
    return rows


class RowSource:
    """Per-sample rows of a batch TensorDict, for the rows that need a closer look.

    A few rows are cut out one at a time; many rows (a column-wide problem) unbind each
    column once instead, which is far cheaper than indexing the TensorDict per row.
    """

    _UNBIND_ABOVE = 32

    def __init__(self, batch: Any, rows: Sequence[int]) -> None:
        self.batch = batch
        self.columns: dict[str, Sequence[Any]] | None = None
        if len(rows) > self._UNBIND_ABOVE:
            n = batch.batch_size[0]
            self.columns = {k: column_rows(batch.get(k), n) for k in batch.keys()}

    def __call__(self, i: int) -> dict[str, Any]:
        if self.columns is not None:
            return {k: v[i] for k, v in self.columns.items()}
        return self.batch[i]  # check_sample unwraps the row's non-tensor entries
