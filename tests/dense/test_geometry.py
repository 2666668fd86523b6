"""Lengths and regions read from masks: random batches against a per-row Python reference."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from tests.dense.dense_builders import skyrl_batch, verl_batch
from trajschema.check import batch_of
from trajschema.core import Block
from trajschema.dense import bind_layout, check_dense
from trajschema.dense.geometry import count_mask, measure
from trajschema.dense.view import read_dense

ROWS = st.lists(st.tuples(st.integers(1, 6), st.integers(0, 5)), min_size=1, max_size=6)


def reference_lengths(mask: torch.Tensor, left: bool) -> list[int | None]:
    """Per row: the real length when the mask is one run of ones on the unpadded side, else None."""
    out: list[int | None] = []
    for row in mask.tolist():
        n = sum(1 for v in row if v == 1)
        want = [0] * (len(row) - n) + [1] * n if left else [1] * n + [0] * (len(row) - n)
        out.append(n if row == want else None)
    return out


def test_count_mask_reads_lengths_and_flags_each_broken_row() -> None:
    block = ts.load_layout("skyrl").axes["seq"].blocks[0]
    mask = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 0, 0], [1, 1, 0, 0]])
    lengths, bad = count_mask("m", mask, 0, 4, block, "seq")
    assert lengths.tolist() == [2, 4, 2, 0, 2]
    assert sorted(bad) == [2, 4]
    assert [r is None for r in reference_lengths(mask, left=True)] == [i in bad for i in range(5)]


def test_regions_of_a_concatenated_axis_and_of_the_parts_a_block_holds() -> None:
    lengths = [(2, 1), (1, 3)]
    verl = bind_layout(ts.load_layout("verl_dataproto"), ts.load_schema("text").plan)
    geo = measure(verl, read_dense(verl_batch("text", lengths, extra=0))[0])
    assert geo.region("seq").to(torch.int64).tolist() == [[1, 1, 1, 0, 0], [0, 1, 1, 1, 1]]
    assert geo.region("seq", "response").to(torch.int64).tolist() == [[0, 0, 1, 0, 0], [0, 0, 1, 1, 1]]
    sky = bind_layout(ts.load_layout("skyrl"), ts.load_schema("text").plan)
    geo = measure(sky, read_dense(skyrl_batch("text", lengths))[0])
    assert geo.region("seq", "prompt").to(torch.int64).tolist() == [[0, 1, 1, 0], [1, 0, 0, 0]]
    assert geo.region("response").to(torch.int64).tolist() == [[0, 0, 1], [1, 1, 1]]


@given(lengths=ROWS, layout=st.sampled_from(["skyrl", "verl_dataproto"]))
def test_random_clean_batches_check_clean_with_the_reference_lengths(lengths: list, layout: str) -> None:
    build = skyrl_batch if layout == "skyrl" else verl_batch
    batch = build("text", lengths)
    r = check_dense(ts.load_schema("text").plan, batch, ts.load_layout(layout), depth="shapes")
    assert r.violations == []
    if layout == "skyrl":
        assert r.lengths["seq"].tolist() == reference_lengths(batch["attention_mask"], left=True)
    assert r.lengths["response"].tolist() == [n for _, n in lengths]


@given(lengths=ROWS, data=st.data())
def test_one_random_defect_is_reported_at_its_row(lengths: list, data: st.DataObject) -> None:
    batch = skyrl_batch("text", lengths)
    row = data.draw(st.integers(0, len(lengths) - 1))
    mask = batch["attention_mask"]
    col = data.draw(st.integers(0, mask.shape[1] - 1))
    kind = data.draw(st.sampled_from(["flip", "two", "token"]))
    if kind == "flip":
        mask[row, col] = 1 - mask[row, col]
    elif kind == "two":
        mask[row, col] = 2
    else:
        batch["sequences"][row, col] = 7777
    ref = reference_lengths(mask, left=True)
    layout = ts.load_layout("skyrl").with_pad_token(0)  # pinned: one odd row has nothing to disagree with otherwise
    got = check_dense(ts.load_schema("text").plan, batch, layout).violations
    rows = {v.sample for v in got}
    if kind == "token":
        pads = mask[row, col] == 0
        assert rows == ({row} if pads else set()) and all(v.code == "padded" for v in got)
    elif ref[row] is None:
        assert (row, "attention_mask", "mask") in {(v.sample, v.field, v.code) for v in got}
    else:  # a flip that leaves one run: a legal mask of another length; others may follow (length, dims)
        assert all(v.code != "mask" for v in got)


MASK_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float32, torch.float16]


@given(
    rows=st.lists(st.lists(st.integers(-2, 3), min_size=1, max_size=7), min_size=1, max_size=6),
    dtype=st.sampled_from(MASK_DTYPES),
    side=st.sampled_from(["left", "right"]),
    data=st.data(),
)
def test_count_mask_agrees_with_the_reference_on_any_values_of_any_dtype(
    rows: list[list[int]], dtype: torch.dtype, side: str, data: st.DataObject
) -> None:
    """The monotone fast path (ints, bool) and the region comparison (floats) flag exactly the
    rows that are not one run of ones against their padding side, and count the clean ones."""
    width = len(rows[0])
    rows = [(r * width)[:width] for r in rows]
    if data.draw(st.booleans()):  # mostly legal masks: the fast path's clean case
        sizes = [data.draw(st.integers(0, width)) for _ in rows]
        rows = [[0] * (width - n) + [1] * n if side == "left" else [1] * n + [0] * (width - n) for n in sizes]
    full = torch.tensor(rows, dtype=torch.int64)
    if dtype == torch.bool:
        full = full != 0
    elif dtype == torch.uint8:
        full = full.clamp(min=0)
    mask = full.to(dtype)
    if dtype.is_floating_point and data.draw(st.booleans()):  # a fraction: not a mask value
        mask[data.draw(st.integers(0, len(rows) - 1)), data.draw(st.integers(0, width - 1))] = 0.5
    block = Block("seq", side, "max")  # type: ignore[arg-type]
    lengths, bad = count_mask("m", mask, 0, width, block, "seq")
    ref = reference_lengths(mask.to(torch.float64), left=side == "left")
    assert sorted(bad) == [i for i, r in enumerate(ref) if r is None]
    assert [n for i, n in enumerate(lengths.tolist()) if i not in bad] == [r for r in ref if r is not None]


@given(lengths=ROWS, layout=st.sampled_from(["skyrl", "verl_dataproto"]), data=st.data())
def test_the_three_cuts_of_a_batch_check_alike(lengths: list, layout: str, data: st.DataObject) -> None:
    """Checked as a jagged TensorDict (extract=True), as the engine's view (plain uid lists)
    and as per-row samples (rows=True): the same violations, and the rows hold the jagged rows."""
    build = skyrl_batch if layout == "skyrl" else verl_batch
    batch = build("text", lengths)
    key = data.draw(st.sampled_from(["attention_mask", "response_mask"]))
    col = batch[key]
    if col.numel() and data.draw(st.booleans()):  # a defect somewhere, often
        col[data.draw(st.integers(0, col.shape[0] - 1)), data.draw(st.integers(0, col.shape[1] - 1))] = 2
    schema, lay = ts.load_schema("text"), ts.load_layout(layout)
    depth = data.draw(st.sampled_from(["shapes", "values"]))
    cuts = [(True, False), (False, False), (True, True)]
    seen = [check_dense(schema.plan, batch, lay, depth=depth, extract=e, rows=r) for e, r in cuts]
    assert seen[0].violations == seen[1].violations == seen[2].violations
    if seen[0].jagged is not None:
        assert isinstance(seen[2].jagged, list)
        want = batch_of(seen[0].jagged).rows()
        assert [sorted(r) for r in want] == [sorted(r) for r in seen[2].jagged]
        for w, g in zip(want, seen[2].jagged, strict=True):
            for k, v in w.items():
                assert torch.equal(v, g[k]) if isinstance(v, torch.Tensor) else v == g[k]
