"""dense_padding: rows shaped like the batch they pad, checking clean alone and joined to it."""

from __future__ import annotations

import math
import pickle
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from trajschema.dense import dense_padding, to_dense
from trajschema.padding import spread_ids
from trajschema.testing import dense_batches, verl_sample

SCHEMAS = ["text", "vlm_mrope", "moe_routed", "distill", "vlm_mrope_moe"]
PAIRS = [(s, lay) for s in SCHEMAS for lay in ("verl_dataproto", "skyrl")]
SKY = ts.load_layout("skyrl").with_pad_token(0)
VERL = ts.load_layout("verl_dataproto").with_pad_token(0)


def joined(a: ts.DenseBatch, b: ts.DenseBatch) -> ts.DenseBatch:
    """``a`` then ``b`` along the batch axis, key by key (what a trainer's concat does)."""
    assert a.keys() == b.keys()
    out = {k: torch.cat([a[k], b[k]]) if isinstance(a[k], torch.Tensor) else [*a[k], *b[k]] for k in a}
    n = len(next(iter(a.values())))
    meta = {k: [*a.metadata.get(k, [False] * n), *b.metadata[k]] for k in b.metadata}
    return ts.DenseBatch(out, metadata=meta)


def only_skyrl_response_length(found: list[ts.Violation]) -> bool:
    """SkyRL padding rows have no response (their response_mask, which counts it, is 0), so on
    their own they leave the length: max response block longer than its longest row."""
    return all(v.code == "length" and v.field == "response_mask" for v in found)


@given(
    st.sampled_from(PAIRS).flatmap(
        lambda pair: st.tuples(
            st.just(pair), dense_batches(pair[0], pair[1], size=st.integers(1, 3), max_len=8), st.integers(0, 3)
        )
    )
)
def test_padding_checks_clean_alone_and_joined(drawn: Any) -> None:
    (schema, layout), batch, count = drawn
    s, lay = ts.load_schema(schema), ts.load_layout(layout).with_pad_token(0)
    pad = dense_padding(s.plan, count, layout=lay, like=batch, eos_token_id=2)
    assert pad.keys() == batch.keys()
    for k, v in batch.items():
        if isinstance(v, torch.Tensor):
            assert (pad[k].shape[1:], pad[k].dtype) == (v.shape[1:], v.dtype), k
            assert pad[k].shape[0] == count
    assert pad.metadata["is_padding"] == [True] * count
    assert s.batch_violations(joined(batch, pad), layout=lay) == []
    alone = s.batch_violations(pad, layout=lay) if count else []
    assert alone == [] or (layout == "skyrl" and only_skyrl_response_length(alone)), alone


def test_skyrl_padding_rows_by_hand() -> None:
    s = ts.load_schema("vlm_mrope_moe")
    rows = [verl_sample(s, 3, 2, seed=0), verl_sample(s, 5, 1, seed=1)]
    for r in rows:
        r["loss_mask"] = r["response_mask"].clone()
        r["multi_modal_inputs"] = {"pixel_values": torch.ones(8, 3), "image_grid_thw": torch.tensor([[1, 2, 4]])}
    batch = to_dense(s.plan, rows, layout=SKY)
    pad = dense_padding(s.plan, 2, layout=SKY, like=batch, eos_token_id=2)
    assert pad["attention_mask"].tolist() == [[1] * 6] * 2  # the seq block filled exactly: prompt 6, response 0
    assert pad["response_mask"].tolist() == [[0, 0]] * 2 and pad["loss_mask"].abs().sum() == 0
    assert pad["sequences"].eq(2).all()
    assert [tuple(t.shape) for t in pad["pixel_values"]] == [(0, 3), (0, 3)]
    assert [tuple(t.shape) for t in pad["image_grid_thw"]] == [(0, 3), (0, 3)]
    assert pad["rollout_expert_indices"].dtype == batch["rollout_expert_indices"].dtype
    uids = pad.metadata["uids"]
    assert uids[0] == uids[1] and uids[0].startswith("pad") and uids[0] not in batch.metadata["uids"]
    assert pad.metadata["is_padding"] == [True, True]


def test_verl_padding_rows_fit_the_configured_lengths() -> None:
    s = ts.load_schema("text")
    batch = to_dense(s.plan, [verl_sample(s, 3, 2, seed=0)], layout=VERL, lengths={"prompt": 200, "response": 4})
    pad = dense_padding(s.plan, 1, layout=VERL, like=batch, eos_token_id=2)
    # the schema's padding sizes (prompt 127, response 1) fit: kept, not stretched
    assert pad["attention_mask"].sum().item() == 128 and pad["input_ids"].shape == (1, 204)
    assert pad["response_mask"].tolist() == [[0, 0, 0, 0]]
    small = to_dense(s.plan, [verl_sample(s, 3, 2, seed=0)], layout=VERL)
    cut = dense_padding(s.plan, 1, layout=VERL, like=small, eos_token_id=2)
    assert cut["attention_mask"].tolist() == [[1, 1, 1, 1, 0]]  # prompt cut to 3, response 1
    assert s.batch_violations(joined(small, cut), layout=VERL) == []


def test_count_zero_gives_the_keys_with_no_rows() -> None:
    s = ts.load_schema("moe_routed")
    batch = to_dense(s.plan, [verl_sample(s, 3, 2, seed=0)], layout=SKY)
    pad = dense_padding(s.plan, 0, layout=SKY, like=batch, eos_token_id=2)
    assert pad.keys() == batch.keys() and all(v.shape[0] == 0 for v in pad.values())
    assert pad.metadata == {"uids": [], "is_padding": []}


def test_a_broken_like_is_refused() -> None:
    s = ts.load_schema("text")
    batch = to_dense(s.plan, [verl_sample(s, 3, 2, seed=0), verl_sample(s, 2, 2, seed=1)], layout=SKY)
    batch["attention_mask"] = batch["attention_mask"].flip(1)
    with pytest.raises(ts.SchemaError):
        dense_padding(s.plan, 1, layout=SKY, like=batch, eos_token_id=2)


def test_unchecked_padding_reads_only_the_first_row() -> None:
    s = ts.load_schema("text")
    samples = [verl_sample(s, 3, 2, seed=0), verl_sample(s, 2, 2, seed=1), verl_sample(s, 4, 1, seed=2)]
    batch = to_dense(s.plan, samples, layout=SKY)
    checked = dense_padding(s.plan, 2, layout=SKY, like=batch, eos_token_id=2)
    unchecked = dense_padding(s.plan, 2, layout=SKY, like=batch, eos_token_id=2, check=False)
    assert checked.keys() == unchecked.keys()
    for k, v in checked.items():
        same = torch.equal(v, unchecked[k]) if isinstance(v, torch.Tensor) else k == "uid" or v == unchecked[k]
        assert same, k
    broken = batch.copy()
    broken["sequences"] = batch["sequences"].clone()
    broken["sequences"][1, 0] = 7  # a token in row 1's left padding (4 of 5 tokens): a `padded` violation
    with pytest.raises(ts.SchemaError, match="padded"):
        dense_padding(s.plan, 1, layout=SKY, like=broken, eos_token_id=2)
    assert len(dense_padding(s.plan, 1, layout=SKY, like=broken, eos_token_id=2, check=False)["sequences"]) == 1
    first_broken = batch.copy()
    first_broken["attention_mask"] = batch["attention_mask"].clone()
    first_broken["attention_mask"][0, 1] = 0  # not one run: row 0 is the row the padding is shaped on
    with pytest.raises(ts.SchemaError, match="mask"):
        dense_padding(s.plan, 1, layout=SKY, like=first_broken, eos_token_id=2, check=False)


def test_nothing_fits_is_refused_clearly() -> None:
    s = ts.load_schema("text")
    batch = to_dense(s.plan, [verl_sample(s, 3, 2, seed=0)], layout=VERL)
    with pytest.raises(ValueError, match="no padding row fits layout 'verl_dataproto': block 'response' is 2 long"):
        dense_padding(s.plan, 1, layout=VERL, like=batch, eos_token_id=2, dims={"response": 5})


def test_bad_count_and_empty_like() -> None:
    s = ts.load_schema("text")
    batch = to_dense(s.plan, [verl_sample(s, 3, 2, seed=0)], layout=SKY)
    with pytest.raises(ValueError, match="count"):
        dense_padding(s.plan, -1, layout=SKY, like=batch, eos_token_id=2)
    empty = ts.DenseBatch(
        {k: v[:0] if isinstance(v, torch.Tensor) else [] for k, v in batch.items()}, metadata={"uids": []}
    )
    with pytest.raises(ValueError, match="at least one row"):
        dense_padding(s.plan, 1, layout=SKY, like=empty, eos_token_id=2)


def test_meta_like_is_refused() -> None:
    s = ts.load_schema("text")
    batch = to_dense(s.plan, [verl_sample(s, 3, 2, seed=0)], layout=SKY)
    meta = ts.DenseBatch({k: v.to("meta") for k, v in batch.items()}, metadata=batch.metadata)
    with pytest.raises(ts.SchemaError, match="meta tensor"):
        dense_padding(s.plan, 1, layout=SKY, like=meta, eos_token_id=2)


# -- review findings (issue 17) ---------------------------------------------------------------


def test_a_huge_count_is_refused_before_anything_is_allocated() -> None:
    """Was: count=10**12 passed the per-sample estimate of make_padding only when small, and a
    count the estimate allowed (10**7) was built as per-row dicts, ~50x the dense bytes: the
    process was killed by the kernel instead of refused."""
    s = ts.load_schema("vlm_mrope_moe")
    batch = to_dense(s.plan, [verl_sample(s, 3, 2, seed=0), verl_sample(s, 1, 4, seed=1)], layout=SKY)
    for count in (10**9, 10**12):
        with pytest.raises(ts.PaddingMemoryError, match="more than this machine has") as err:
            dense_padding(s.plan, count, layout=SKY, like=batch, eos_token_id=2)
        assert err.value.count == count and err.value.largest  # the biggest columns are named


@pytest.mark.parametrize("layout", [SKY, VERL])
def test_many_rows_are_cheap_and_share_nothing(layout: ts.Layout) -> None:
    """Rows are one laid-out padding row repeated: 20000 of them in well under a second, every
    tensor its own storage, the gathered image tensors one per row, torch.cat-able key by key."""
    s = ts.load_schema("vlm_mrope_moe")
    rows = [verl_sample(s, 3, 2, seed=0), verl_sample(s, 1, 4, seed=1)]
    for r in rows:
        r["loss_mask"] = r["response_mask"].clone()
    batch = to_dense(s.plan, rows, layout=layout)
    pad = dense_padding(s.plan, 20000, layout=layout, like=batch, eos_token_id=2)
    for k, v in pad.items():
        if isinstance(v, torch.Tensor):
            assert v.shape[0] == 20000 and v.is_contiguous() and v.stride(0) != 0, k
            assert v.untyped_storage().data_ptr() != batch[k].untyped_storage().data_ptr(), k
        elif v and isinstance(v[0], torch.Tensor):
            assert v[0] is not v[1] and v[0].numel() == 0  # empty images: distinct objects, no data
    few = dense_padding(s.plan, 3, layout=layout, like=batch, eos_token_id=2)
    assert s.batch_violations(joined(batch, few), layout=layout) == []


# -- spread routes over all the padding rows (issue 27 §1, §2) -----------------------------------

ROUTES_KEY = {"skyrl": "rollout_expert_indices", "verl_dataproto": "routed_experts"}


def moe_batch(layout: ts.Layout, lengths: list[tuple[int, int]], layers: int, topk: int, experts: int, dtype=None):
    """A dense moe_routed batch whose row 0 routes every token to experts 0..topk-1 only and whose
    last row reaches expert ``experts - 1``."""
    s = ts.load_schema("moe_routed")
    rows = [verl_sample(s, p, r, seed=i, layers=layers, topk=topk) for i, (p, r) in enumerate(lengths)]
    for r in rows:
        r["loss_mask"] = r["response_mask"].clone()
        seq = r["input_ids"].shape[0]
        r["routed_experts"] = torch.arange(topk).expand(seq, layers, topk).to(dtype or r["routed_experts"].dtype)
    rows[-1]["routed_experts"][0, 0, 0] = experts - 1 if topk == 1 else rows[-1]["routed_experts"][0, 0, 0]
    rows[-1]["routed_experts"][0, 0, -1] = experts - 1
    return s, to_dense(s.plan, rows, layout=layout)


def padding_routes(pad: ts.DenseBatch, layout: ts.Layout) -> torch.Tensor:
    """The padding tokens' routes, ``(tokens, layers, topk)``, row by row (the real positions of each row)."""
    routes = pad[ROUTES_KEY[layout.name]]
    return routes[pad["attention_mask"].bool()]


@given(
    layout=st.sampled_from([SKY, VERL]),
    count=st.integers(1, 40),
    lengths=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4)), min_size=1, max_size=3),
    layers=st.integers(1, 3),
    data=st.data(),
)
def test_dense_padding_spreads_over_the_whole_call_as_the_jagged_padding_does(layout, count, lengths, layers, data):
    """Property: no expert gets more than ceil(T * topk / E) slots in any layer over the call, each
    token's slots are distinct, the ids are those of `spread_ids` over all padding tokens (the
    reference the jagged `Schema.padding` is held to), and two calls agree."""
    experts = data.draw(st.integers(1, 24), label="experts")
    topk = data.draw(st.integers(1, min(experts, 4)), label="topk")
    dtype = data.draw(st.sampled_from([torch.int16, torch.int64, torch.uint8, torch.uint16]), label="dtype")
    s, batch = moe_batch(layout, lengths, layers, topk, experts, dtype)
    pad = dense_padding(s.plan, count, layout=layout, like=batch, eos_token_id=2)
    assert pad.sources["experts"] == "batch"
    routes = padding_routes(pad, layout)
    tokens = routes.shape[0] // count
    expected = spread_ids((count, tokens, layers, topk), experts, dtype).reshape(count * tokens, layers, topk)
    assert torch.equal(routes.to(torch.int64), expected.to(torch.int64))
    per_layer = torch.stack([torch.bincount(routes[:, k].reshape(-1).long(), minlength=experts) for k in range(layers)])
    assert int(per_layer.max()) <= math.ceil(tokens * count * topk / experts)
    again = dense_padding(s.plan, count, layout=layout, like=batch, eos_token_id=2)
    assert torch.equal(again[ROUTES_KEY[layout.name]].to(torch.int64), pad[ROUTES_KEY[layout.name]].to(torch.int64))


def test_the_issues_example_keeps_the_bound_the_docs_give():
    """8 experts, top-2, 255 padding rows of 6 tokens: 383 slots at most per expert and layer (the
    rows repeated, as before, gave 510 to four experts and 255 to the other four)."""
    s, batch = moe_batch(SKY, [(3, 3), (4, 2)], layers=2, topk=2, experts=8)
    pad = dense_padding(s.plan, 255, layout=SKY, like=batch, eos_token_id=2)
    routes = padding_routes(pad, SKY)
    assert routes.shape == (255 * 6, 2, 2)
    for layer in range(2):
        counts = torch.bincount(routes[:, layer].reshape(-1).long(), minlength=8).tolist()
        assert max(counts) == 383 == math.ceil(255 * 6 * 2 / 8) and min(counts) == 382


@pytest.mark.parametrize("layout", [SKY, VERL], ids=["skyrl", "verl"])
def test_the_expert_count_comes_from_every_row_not_row_0(layout):
    s, batch = moe_batch(layout, [(3, 3), (4, 2), (2, 2)], layers=2, topk=2, experts=8)
    pad = dense_padding(s.plan, 5, layout=layout, like=batch, eos_token_id=2, check=False)
    assert pad.sources["experts"] == "batch"
    assert sorted(set(padding_routes(pad, layout).flatten().tolist())) == list(range(8))
    assert (
        dense_padding(s.plan, 5, layout=layout, like=batch, eos_token_id=2, dims={"experts": 3}).sources["experts"]
        == "dims"
    )
    pinned = s.with_dims({"experts": 16}, sources={"experts": "config: num_experts"})
    assert dense_padding(pinned.plan, 5, layout=layout, like=batch, eos_token_id=2).sources["experts"] == "config"
    assert pickle.loads(pickle.dumps(pad)).sources == pad.sources


def test_rows_a_layout_orders_otherwise_are_shifted_row_by_row():
    """The fallback of a layout whose slots are not in the sample's order: row r is row 0 with its
    token slots moved by r * tokens * topk modulo the experts, exactly what spread_ids gives."""
    from trajschema.dense.padding import _shift_rows

    experts, tokens, topk = 5, 3, 2
    want = spread_ids((4, tokens, 1, topk), experts, torch.int64)  # 4 rows
    first = torch.zeros(2, tokens + 1, 1, topk, dtype=torch.int64)  # one padded position after the tokens
    first[0, :tokens] = want[0]
    first = first.transpose(0, 1)  # a layout that stores (position, row?, ...) otherwise
    slots = torch.zeros_like(first, dtype=torch.bool)
    slots[:tokens, 0] = True
    col = first.expand(4, *first.shape).contiguous()
    _shift_rows(col, first, slots, tokens * topk % experts, experts)
    for r in range(4):
        assert torch.equal(col[r][:tokens, 0], want[r]) and col[r][tokens:].eq(0).all() and col[r][:, 1].eq(0).all()
