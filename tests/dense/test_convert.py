"""to_dense / from_dense: bit-exact round trips by property, and every refusal typed and named."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from trajschema.check import batch_of
from trajschema.dense import from_dense, to_dense
from trajschema.testing import dense_batches, tq_batch, verl_sample

SCHEMAS = ["text", "vlm_mrope", "moe_routed", "distill", "vlm_mrope_moe"]
LAYOUTS = ["verl_dataproto", "skyrl"]
PAIRS = [(s, lay) for s in SCHEMAS for lay in LAYOUTS]


def same(a: Any, b: Any) -> bool:
    """Bit-exact equality: tensors by dtype, shape and bits; containers by their members."""
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor) and (a.dtype, a.shape) == (b.dtype, b.shape) and torch.equal(_bits(a), _bits(b))
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1).contiguous().view(torch.uint8) if t.numel() else t.reshape(-1)


def same_batch(a: ts.DenseBatch, b: ts.DenseBatch) -> bool:
    return same(dict(a), dict(b)) and same(a.metadata, b.metadata)


def rows_of(schema: str, lengths: list[tuple[int, int]]) -> list[dict[str, Any]]:
    rows = [verl_sample(schema, p, r, seed=i) for i, (p, r) in enumerate(lengths)]
    for r in rows:
        r["loss_mask"] = r["response_mask"].clone()
    return rows


SKY = ts.load_layout("skyrl").with_pad_token(0)
VERL = ts.load_layout("verl_dataproto").with_pad_token(0)


# -- round trips ------------------------------------------------------------------------------


def drawn_pair() -> st.SearchStrategy:
    """A schema and layout of the packaged ones, and a dense batch of it with its samples."""
    return st.sampled_from(PAIRS).flatmap(
        lambda pair: st.tuples(
            st.just(pair), dense_batches(pair[0], pair[1], size=st.integers(1, 4), max_len=8, with_samples=True)
        )
    )


@given(drawn_pair())
def test_dense_to_samples_to_dense_is_bit_exact(drawn: Any) -> None:
    """Every packaged schema in both layouts. (distill in skyrl: SkyRL 0.3.0 has no teacher
    columns, so the layout drops teacher_ids/teacher_logprobs and the samples come back
    without them, as they went in.)"""
    (schema, layout), (rows, batch) = drawn
    s, lay = ts.load_schema(schema), ts.load_layout(layout).with_pad_token(0)
    back = from_dense(s.plan, batch, layout=lay)
    assert same(back, rows)
    assert same_batch(to_dense(s.plan, back, layout=lay), batch)


@given(drawn_pair())
def test_jagged_to_dense_to_jagged_is_bit_exact(drawn: Any) -> None:
    """Samples as TransferQueue returns them (a jagged TensorDict) lay out as the list does,
    and come back as the same jagged columns."""
    (schema, layout), (rows, batch) = drawn
    s, lay = ts.load_schema(schema), ts.load_layout(layout).with_pad_token(0)
    jagged = tq_batch(rows)
    assert same_batch(to_dense(s.plan, jagged, layout=lay), batch)
    again = from_dense(s.plan, batch, layout=lay, as_tensordict=True)
    assert sorted(again.keys()) == sorted(jagged.keys())
    for k in jagged.keys():
        assert same(list(batch_of(again).values_of(k)), list(batch_of(jagged).values_of(k))), k


def test_verl_layout_by_hand() -> None:
    """Left-padded prompts, right-padded responses, edge positions, a pad-token fill."""
    rows = rows_of("text", [(2, 1), (1, 2)])
    batch = to_dense(ts.load_schema("text").plan, rows, layout=VERL)
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0], [0, 1, 1, 1]]
    assert batch["position_ids"].tolist() == [[0, 1, 2, 2], [0, 0, 1, 2]]
    assert batch["responses"][0, 1].item() == 0 and batch["prompts"][1, 0].item() == 0
    assert "loss_mask" not in batch and batch["__num_turns__"] == [1, 1]


def test_mrope_positions_pad_one_in_verl() -> None:
    batch = to_dense(ts.load_schema("vlm_mrope").plan, rows_of("vlm_mrope", [(2, 1), (1, 1)]), layout=VERL)
    assert batch["position_ids"].shape == (2, 4, 3)
    assert batch["position_ids"][1, :, 0].tolist() == [1, 1, 1, 1]


def test_skyrl_layout_by_hand() -> None:
    rows = rows_of("vlm_mrope_moe", [(2, 1), (1, 3)])
    rows[0]["multi_modal_inputs"] = {"pixel_values": torch.ones(4, 2), "image_grid_thw": torch.tensor([[1, 2, 2]])}
    rows[1]["multi_modal_inputs"] = {
        "pixel_values": torch.ones(0, 2),
        "image_grid_thw": torch.zeros(0, 3, dtype=torch.int64),
    }
    batch = to_dense(ts.load_schema("vlm_mrope_moe").plan, rows, layout=SKY)
    assert batch["attention_mask"].tolist() == [[0, 1, 1, 1], [1, 1, 1, 1]]
    assert batch["response_mask"].tolist() == [[0, 0, 1], [1, 1, 1]]
    assert batch["loss_mask"].dtype == torch.float32
    assert batch["rollout_expert_indices"].shape == (2, 4, 4, 2)
    assert [t.shape for t in batch["pixel_values"]] == [(4, 2), (0, 2)]
    assert batch.metadata == {"uids": ["q0", "q0"]}
    assert not {"position_ids", "__num_turns__", "num_turns", "prompts", "multi_modal_inputs"} & set(batch)


def test_from_dense_samples_share_no_storage() -> None:
    s = ts.load_schema("text")
    batch = to_dense(s.plan, rows_of("text", [(2, 1), (3, 2)]), layout=SKY)
    before = batch["sequences"].clone()
    back = from_dense(s.plan, batch, layout=SKY)
    back[0]["input_ids"].fill_(7)
    back[0]["prompts"].fill_(7)
    assert torch.equal(batch["sequences"], before)
    assert back[1]["input_ids"].ne(7).all() and back[0]["responses"].ne(7).all()


def test_lengths_pad_fixed_blocks_further() -> None:
    s = ts.load_schema("text")
    batch = to_dense(s.plan, rows_of("text", [(2, 1)]), layout=VERL, lengths={"prompt": 4, "response": 3})
    assert batch["input_ids"].shape == (1, 7) and batch["attention_mask"].tolist() == [[0, 0, 1, 1, 1, 0, 0]]
    assert s.batch_violations(batch, layout=VERL) == []
    with pytest.raises(ValueError, match=r"lengths\['prompt'\] = 1 is below the longest prompt of the batch, 2"):
        to_dense(s.plan, rows_of("text", [(2, 1)]), layout=VERL, lengths={"prompt": 1})
    with pytest.raises(ValueError, match="exactly the batch maximum"):
        to_dense(s.plan, rows_of("text", [(2, 1)]), layout=SKY, lengths={"seq": 9})
    with pytest.raises(ValueError, match=r"names \['seqq'\], which are not blocks"):
        to_dense(s.plan, rows_of("text", [(2, 1)]), layout=VERL, lengths={"seqq": 9})


# -- refusals ---------------------------------------------------------------------------------


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        to_dense(ts.load_schema("text").plan, [], layout=SKY)


def test_meta_tensors_are_refused() -> None:
    rows = rows_of("text", [(2, 1)])
    rows[0] = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in rows[0].items()}
    with pytest.raises(ValueError, match="sample 0, field 'prompts': a meta tensor"):
        to_dense(ts.load_schema("text").plan, rows, layout=SKY)


def test_no_pad_id_names_both_ways() -> None:
    with pytest.raises(ValueError, match=r"pass pad_token_id=, or pin it with layout.with_pad_token"):
        to_dense(ts.load_schema("text").plan, rows_of("text", [(2, 1)]), layout=ts.load_layout("skyrl"))


def test_schema_violations_come_first_all_of_them() -> None:
    s = ts.load_schema("text")
    rows = rows_of("text", [(2, 1), (2, 1)])
    rows[0]["uid"] = 3
    rows[1]["input_ids"] = rows[1]["input_ids"][:2]
    with pytest.raises(ts.SchemaError) as info:
        to_dense(s.plan, rows, layout=SKY)
    assert info.value.violations == s.batch_violations(rows)


@pytest.mark.parametrize(
    ("layout", "change", "field", "code"),
    [
        ("skyrl", lambda r: r["response_mask"].zero_(), "response_mask", "mask"),
        ("verl_dataproto", lambda r: r["attention_mask"].__setitem__(0, 0), "attention_mask", "mask"),
        ("verl_dataproto", lambda r: r["loss_mask"].zero_(), "loss_mask", "value"),
        ("skyrl", lambda r: r["prompts"].add_(1), "prompts", "value"),
        ("skyrl", lambda r: r["responses"].add_(1), "responses", "value"),
        (
            "skyrl",
            lambda r: r.__setitem__("multi_modal_inputs", {"pixel_values": torch.ones(1), "x": torch.ones(1)}),
            "multi_modal_inputs",
            "value",
        ),
        ("skyrl", lambda r: r.__setitem__("multi_modal_inputs", {"pixel_values": [1]}), "multi_modal_inputs", "value"),
        ("verl_dataproto", lambda r: r.pop("rm_scores"), "rm_scores", "missing"),
    ],
    ids=[
        "sky-response-mask-0",
        "verl-attention-hole",
        "verl-loss-not-response",
        "sky-prompts-not-slice",
        "sky-responses-not-slice",
        "sky-gather-extra-key",
        "sky-gather-not-tensor",
        "optional-in-some",
    ],
)
def test_what_the_layout_cannot_carry_is_refused_by_sample(layout: str, change: Any, field: str, code: str) -> None:
    s = ts.load_schema("text")
    rows = rows_of("text", [(2, 2), (3, 1), (1, 1)])
    for r in rows:
        r["multi_modal_inputs"] = {}
    change(rows[1])
    with pytest.raises(ts.SchemaError) as info:
        to_dense(s.plan, rows, layout=ts.load_layout(layout).with_pad_token(0))
    found = [(v.sample, v.field, v.code) for v in info.value.violations]
    assert (1, field, code) in found, found
    assert all(v.sample == 1 for v in info.value.violations)


def test_a_cast_that_changes_a_value_is_refused() -> None:
    lay = dataclasses.replace(
        SKY,
        fields={
            **SKY.fields,
            "rollout_log_probs": dataclasses.replace(SKY.fields["rollout_log_probs"], dtype=torch.float16),
        },
    )
    rows = rows_of("text", [(2, 2), (1, 1)])
    rows[0]["rollout_log_probs"] = torch.tensor([-0.5, -0.123456789])
    rows[1]["rollout_log_probs"] = torch.tensor([-0.25])
    with pytest.raises(ts.SchemaError) as info:
        to_dense(ts.load_schema("text").plan, rows, layout=lay)
    assert [(v.sample, v.field, v.code) for v in info.value.violations] == [(0, "rollout_log_probs", "value")]


def test_from_dense_refuses_a_fractional_float_loss_mask() -> None:
    s = ts.load_schema("text")
    batch = to_dense(s.plan, rows_of("text", [(2, 2), (1, 1)]), layout=SKY)
    batch["loss_mask"][0, 1] = 0.5
    with pytest.raises(ts.SchemaError) as info:
        from_dense(s.plan, batch, layout=SKY)
    assert info.value.violations == s.batch_violations(batch, layout=SKY)
    assert [(v.sample, v.field, v.code) for v in info.value.violations] == [(0, "loss_mask", "value")]
    assert "0.5 does not convert exactly to int64" in info.value.violations[0].message


@pytest.mark.parametrize("layout", LAYOUTS)
def test_from_dense_refuses_with_the_layout_checks_violations(layout: str) -> None:
    s = ts.load_schema("moe_routed")
    lay = ts.load_layout(layout).with_pad_token(0)
    batch = to_dense(s.plan, rows_of("moe_routed", [(2, 2), (3, 1), (1, 1)]), layout=lay)
    batch["attention_mask"] = batch["attention_mask"].roll(1, dims=1)  # every prompt shifted
    with pytest.raises(ts.SchemaError) as info:
        from_dense(s.plan, batch, layout=lay)
    assert info.value.violations and info.value.violations == s.batch_violations(batch, layout=lay)


def test_b1_all_empty_responses() -> None:
    s = ts.load_schema("text")
    for lay in (SKY, VERL):
        rows = rows_of("text", [(3, 0)])
        batch = to_dense(s.plan, rows, layout=lay)
        assert batch["response_mask"].shape == (1, 0)
        assert same(from_dense(s.plan, batch, layout=lay), rows if lay is VERL else [_carried(rows[0], SKY)])


def _carried(row: dict[str, Any], lay: ts.Layout) -> dict[str, Any]:
    """What the layout carries of a sample: no absent fields, no empty gathered mapping (SkyRL has no
    pixel_values column in a batch without images)."""
    held = {k: lay.fields[k].held if k in lay.fields else "column" for k in row}
    return {k: v for k, v in row.items() if held[k] != "absent" and not (held[k] == "gather" and not v)}


# -- review findings (issue 17) ---------------------------------------------------------------


def test_a_pad_id_beyond_the_dtype_is_a_typed_refusal() -> None:
    """Was: ``ValueError: Overflow when unpacking long long`` from inside torch; now refused when the
    layout meets the schema, before any row is laid out."""
    s = ts.load_schema("text")
    with pytest.raises(ValueError, match=r"^pad_token_id: pad id \d+ fits no dtype of field 'input_ids' \(int64\)"):
        to_dense(s.plan, rows_of("text", [(3, 2)]), layout=SKY, pad_token_id=2**70)


def test_lengths_that_are_not_a_mapping_or_too_big_are_refused_before_allocating() -> None:
    """Was: ``TypeError: 'int' object is not iterable``, and a RuntimeError from torch's allocator."""
    s = ts.load_schema("text")
    rows = rows_of("text", [(3, 2), (1, 4)])
    with pytest.raises(TypeError, match="lengths= must be a mapping of block dim to padded length, found int 5"):
        to_dense(s.plan, rows, layout=VERL, lengths=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"would take .* more than this machine has .* nothing was allocated"):
        to_dense(s.plan, rows, layout=VERL, lengths={"prompt": 10**12})


# -- a pad id the padded field cannot hold --------------------------------------------------------

_INT32_IDS = ts.schema_from_dict(
    {"name": "t32", "extends": ["text"], "fields": {"input_ids": {"shape": ["seq"], "dtype": "int32", "pad": "eos"}}}
)


def _int32_rows() -> list[dict[str, Any]]:
    rows = rows_of("text", [(2, 1), (1, 2)])
    return [{**r, "input_ids": r["input_ids"].to(torch.int32)} for r in rows]


@pytest.mark.parametrize("pad", [2**31, 2**40, 2**63 - 1])
def test_a_pad_id_the_padded_field_cannot_hold_is_refused_naming_the_field(pad):
    # skyrl pads input_ids with the tokenizer's pad id; an int32 column cannot hold 2**31. It was
    # an OverflowError from inside torch while the rows were laid out.
    want = rf"pad id {pad} fits no dtype of field 'input_ids' \(int32\), which layout 'skyrl' pads with it"
    with pytest.raises(ValueError, match=rf"^pad_token_id: {want}"):
        _INT32_IDS.to_dense(_int32_rows(), layout="skyrl", pad_token_id=pad)
    pinned = ts.load_layout("skyrl").with_pad_token(pad)
    with pytest.raises(ValueError, match=rf"^layout\.with_pad_token\(pad_token_id\): {want}"):
        _INT32_IDS.to_dense(_int32_rows(), layout=pinned)
    batch = _INT32_IDS.to_dense(_int32_rows(), layout="skyrl", pad_token_id=2**31 - 1)  # the largest int32 holds
    assert batch["sequences"].dtype == torch.int32


@pytest.mark.parametrize("pad", [2**64, -1])
def test_with_pad_token_refuses_an_id_no_dtype_holds(pad):
    with pytest.raises(ValueError, match=r"pad_token_id must be"):
        ts.load_layout("skyrl").with_pad_token(pad)
    assert ts.load_layout("skyrl").with_pad_token(2**64 - 1).pad_token_id == 2**64 - 1  # a uint64 id
