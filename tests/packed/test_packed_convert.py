"""to_packed / from_packed: bit-exact round trips by property for every packaged schema,
packing against a simple reference, padding sequences as segments of their own, and every
refusal typed and named."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from tests.dense.test_convert import same
from tests.packed.packed_builders import SCHEMAS, rows_of, thd
from trajschema.testing import tq_batch


def same_column(a: Any, b: Any) -> bool:
    """Bit-exact, nested tensors by their values and offsets."""
    if isinstance(a, torch.Tensor) and a.is_nested:
        nested = isinstance(b, torch.Tensor) and b.is_nested
        return nested and same(a.values(), b.values()) and same(a.offsets(), b.offsets())
    return same(a, b)


LENGTHS = st.lists(st.tuples(st.integers(1, 7), st.integers(0, 6)), min_size=1, max_size=5)


@given(st.sampled_from(SCHEMAS), LENGTHS, st.integers(1, 9))
def test_samples_to_packed_to_samples_is_bit_exact(schema: str, lengths: list[tuple[int, int]], align: int) -> None:
    s = ts.load_schema(schema)
    rows = rows_of(schema, lengths)
    batch = s.to_packed(rows, layout=thd(align))
    assert s.batch_violations(batch, layout=thd(align)) == []
    assert same(s.from_packed(batch, layout=thd(align)), rows)


@given(st.sampled_from(SCHEMAS), LENGTHS)
def test_a_jagged_batch_packs_as_its_samples_do(schema: str, lengths: list[tuple[int, int]]) -> None:
    s = ts.load_schema(schema)
    rows = rows_of(schema, lengths)
    a, b = s.to_packed(rows, layout=thd()), s.to_packed(tq_batch(rows), layout=thd())
    assert a.keys() == b.keys() and all(same_column(a[k], b[k]) for k in a)
    back = s.from_packed(b, layout=thd(), as_tensordict=True)
    assert same(s.from_packed(b, layout=thd()), rows) and back.batch_size[0] == len(rows)


def reference_run(rows: list[dict[str, Any]], key: str, align: int, pad: int) -> torch.Tensor:
    """The flat run written the obvious way: each sequence, then pad up to the alignment."""
    parts = []
    for r in rows:
        t = r[key]
        extra = -t.shape[-1] % align
        parts += [t, torch.full((*t.shape[:-1], extra), pad, dtype=t.dtype)]
    return torch.cat(parts, dim=-1)


@given(LENGTHS, st.integers(1, 9))
def test_the_run_equals_a_reference_packing(lengths: list[tuple[int, int]], align: int) -> None:
    rows = rows_of("vlm_mrope", lengths)
    b = ts.load_schema("vlm_mrope").to_packed(rows, layout=thd(align, pad=0))
    assert torch.equal(b["input_ids"], reference_run(rows, "input_ids", align, 0))
    assert torch.equal(b["position_ids"], reference_run(rows, "position_ids", align, 0))
    seq = [r["input_ids"].shape[0] for r in rows]
    assert b["cu_seqlens"].dtype == torch.int32 and b["cu_seqlens"].tolist() == [
        0,
        *torch.tensor(seq).cumsum(0).tolist(),
    ]
    widths = b["cu_seqlens_padded"].diff().tolist()
    assert all(w % align == 0 and w - n < align for w, n in zip(widths, seq, strict=True))
    loss = torch.cat([torch.cat([torch.zeros(r["prompts"].shape[0], dtype=torch.int64), r["loss_mask"]]) for r in rows])
    assert torch.equal(b["loss_mask"][b["loss_mask"] != 0].sum(), loss.sum())


def test_padding_sequences_are_segments_of_their_own() -> None:
    s = ts.load_schema("moe_routed")
    real = s.to_packed(rows_of("moe_routed"), layout=thd(8), tags=[{"is_padding": False}] * 4)
    out = s.packed_padding(3, layout=thd(8), like=real, eos_token_id=2)
    assert s.batch_violations(out, layout=thd(8)) == []
    assert out["is_padding"].tolist() == [False] * 4 + [True] * 3
    n = int(real["cu_seqlens_padded"][-1])
    assert torch.equal(out["input_ids"][:n], real["input_ids"])  # the real run is untouched
    widths = out["cu_seqlens_padded"].diff()[4:]
    assert widths.tolist() == [8, 8, 8] and out["cu_seqlens"].diff()[4:].tolist() == [8, 8, 8]
    samples = s.from_packed(out, layout=thd(8))
    assert all(int(p["loss_mask"].sum()) == 0 and p["uid"] == samples[4]["uid"] for p in samples[4:])
    routes = torch.cat([p["routed_experts"] for p in samples[4:]])
    assert (routes.flatten(0, 1).sort(-1).values.diff(dim=-1) != 0).all()  # distinct experts per token


def test_padding_length_meets_verls_alignment() -> None:
    from trajschema.verl import sequence_alignment

    align = sequence_alignment(tp_size=2, cp_size=2)
    s = ts.load_schema("text")
    real = s.to_packed(rows_of("text"), layout=thd(align))
    out = s.packed_padding(1, layout=thd(align), like=real, eos_token_id=2)
    assert int(out["cu_seqlens"].diff()[-1]) == align and s.batch_violations(out, layout=thd(align)) == []


def test_refusals_are_typed_and_named() -> None:
    s = ts.load_schema("text")
    rows = rows_of("text")
    with pytest.raises(ValueError, match="at least one sample"):
        s.to_packed([], layout=thd())
    unpinned = ts.load_layout("thd")
    assert isinstance(unpinned, ts.PackedLayout)
    with pytest.raises(ValueError, match="pad_token_id"):  # alignment padding of input_ids needs the pad id
        s.to_packed(rows, layout=unpinned.with_alignment(4))
    assert s.batch_violations(s.to_packed(rows, layout="thd"), layout="thd") == []  # no padding, no pad id needed
    bad = [dict(r) for r in rows]
    bad[1]["input_ids"] = bad[1]["input_ids"][:-1]
    with pytest.raises(ts.SchemaError):
        s.to_packed(bad, layout=thd())
    mixed = rows_of("moe_routed")
    mixed[1]["routed_experts"] = mixed[1]["routed_experts"].to(torch.int32)
    with pytest.raises(ValueError, match="routed_experts"):
        ts.load_schema("moe_routed").to_packed(mixed, layout=thd())
    meta = [dict(r) for r in rows]
    meta[0]["rm_scores"] = torch.empty(2, device="meta")
    with pytest.raises((ValueError, ts.SchemaError)):
        s.to_packed(meta, layout=thd())
    with pytest.raises(ValueError, match="pack_dense"):
        s.to_packed(rows, layout="verl_nopad")
    with pytest.raises(ValueError, match="packed"):
        s.to_dense(rows, layout="thd", pad_token_id=0)
    with pytest.raises(ValueError, match="dense"):
        s.to_packed(rows, layout="verl_dataproto")
    broken = s.to_packed(rows, layout=thd())
    broken["loss_mask"] = torch.roll(broken["loss_mask"], -1)
    with pytest.raises(ts.SchemaError):
        s.from_packed(broken, layout=thd())


def test_the_layout_pins_are_checked() -> None:
    lay = thd()
    with pytest.raises(ValueError):
        lay.with_alignment(0)
    with pytest.raises(ValueError, match="found True"):
        lay.with_alignment(True)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        lay.with_pad_token(2**64)
    assert lay.with_alignment(8).alignment == 8 and hash(lay.with_alignment(8)) != hash(lay.with_alignment(4))


@given(st.sampled_from(SCHEMAS), LENGTHS, st.integers(0, 3))
def test_samples_to_verl_nopad_to_samples_is_bit_exact(schema: str, lengths: list[tuple[int, int]], extra: int) -> None:
    """to_dense (verl_dataproto, padded past the longest row), then pack_dense, then from_packed."""
    s = ts.load_schema(schema)
    rows = rows_of(schema, lengths)
    sizes = {"prompt": max(p for p, _ in lengths) + extra, "response": max(r for _, r in lengths) + extra}
    dense = s.to_dense(rows, layout="verl_dataproto", pad_token_id=0, lengths=sizes)
    before = {k: v.clone() if isinstance(v, torch.Tensor) else list(v) for k, v in dense.items()}
    nopad = s.pack_dense(dense, layout="verl_nopad")
    assert isinstance(nopad, ts.PackedBatch) and nopad["loss_mask"] is nopad["response_mask"]
    assert nopad.metadata["max_seq_len"] == sizes["prompt"] + sizes["response"]
    assert s.batch_violations(nopad, layout="verl_nopad") == []
    assert same(s.from_packed(nopad, layout="verl_nopad"), rows)
    assert same(dict(dense), before)  # the dense batch is left as it was
