"""Checking a ``thd`` packed batch: each bug class of the field as a broken batch, seen at
the right sample and key; every schema rule applied to each sequence; nothing raises."""

from __future__ import annotations

import itertools
import pickle

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from tests.packed.packed_builders import LENGTHS, SCHEMAS, codes, packed, rows_of, thd


def check(batch: ts.PackedBatch, schema: str = "text", alignment: int = 4, **kw) -> list[ts.Violation]:
    return ts.load_schema(schema).batch_violations(batch, layout=thd(alignment), **kw)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_a_packed_batch_of_real_samples_is_clean(schema: str) -> None:
    assert check(packed(schema), schema) == []
    assert check(packed(schema, alignment=1), schema, alignment=1) == []


def test_a_loss_mask_rolled_back_across_a_boundary_is_seen_on_the_prompt_token() -> None:
    """verl #6564: labels and loss mask shifted by one over the flat run."""
    b = packed()
    b["loss_mask"] = torch.roll(b["loss_mask"], -1)
    found = codes(check(b))
    assert (0, "loss_mask", "boundary") in found and (2, "loss_mask", "boundary") in found


def test_a_loss_mask_rolled_forward_lands_in_padding_or_the_next_prompt() -> None:
    b = packed(alignment=1)
    b["loss_mask"] = torch.roll(b["loss_mask"], 1)
    found = codes(check(b, alignment=1))
    assert (1, "loss_mask", "boundary") in found  # sequence 0's last response token on sequence 1's prompt


def test_dropped_offsets_are_missing() -> None:
    """NeMo-RL #2105: cu_seqlens dropped, the sequences attend to each other."""
    b = packed()
    del b["cu_seqlens"]
    assert codes(check(b)) == [(None, "cu_seqlens", "missing")]


def test_one_segment_for_the_whole_run_is_not_one_per_sample() -> None:
    b = packed(alignment=1)
    total = int(b["cu_seqlens"][-1])
    b["cu_seqlens"] = b["cu_seqlens_padded"] = torch.tensor([0, total], dtype=torch.int32)
    assert "offsets" in {c for _, _, c in codes(check(b, alignment=1))}


def test_a_one_token_sequence_merged_into_its_neighbour() -> None:
    """ms-swift #9904: sequence 1 (one token) merged into sequence 2; the sample count is kept by a split elsewhere."""
    b = packed(alignment=1)
    o = b["cu_seqlens"].clone()  # [0, 5, 6, 15, 20]
    o[2] = o[1] + 3  # sequence 1 now holds its token and sequence 2's first two
    b["cu_seqlens"] = b["cu_seqlens_padded"] = o
    found = codes(check(b, alignment=1))
    assert (1, "position_ids", "positions") in found
    assert all(s in (1, 2) for s, _, _ in found)


def test_an_empty_segment_appended_is_reported() -> None:
    """AReaL #1103: a zero-length segment appended to the offsets."""
    b = packed()
    for k in ("cu_seqlens", "cu_seqlens_padded"):
        b[k] = torch.cat([b[k], b[k][-1:]])
    found = codes(check(b))
    assert found and {c for _, _, c in found} == {"offsets"}


def test_an_empty_segment_in_place_of_a_sequence_is_reported_at_it() -> None:
    b = packed(alignment=1)
    o = b["cu_seqlens"].clone()
    o[2] = o[1]
    b["cu_seqlens"] = o
    found = codes(check(b, alignment=1))
    assert (1, "cu_seqlens", "offsets") in found


def test_real_and_padded_offsets_swapped() -> None:
    """Megatron-Bridge #4507: padded and real offsets confused."""
    b = packed()
    b["cu_seqlens"], b["cu_seqlens_padded"] = b["cu_seqlens_padded"], b["cu_seqlens"]
    found = codes(check(b))
    assert found and all(c == "offsets" for _, _, c in found)


def test_a_real_length_beyond_its_padded_segment() -> None:
    b = packed()  # real lengths 5, 1, 9, 5 in segments of 8, 4, 12, 8
    b["cu_seqlens"] = torch.tensor([0, 5, 10, 19, 24], dtype=torch.int32)  # sequence 1 claims 5 tokens
    assert codes(check(b)) == [(1, "cu_seqlens_padded", "offsets")]


@pytest.mark.parametrize("alignment", [8, 16])
def test_segments_not_aligned_for_context_parallelism_or_fp8(alignment: int) -> None:
    """verl #7449 (tp*cp*2), SkyRL #1828 (FP8: 16): a batch packed to 4 checked against a larger alignment."""
    b = packed(alignment=4)
    widths = b["cu_seqlens_padded"].diff().tolist()
    found = codes(check(b, alignment=alignment))
    assert found == [(i, "cu_seqlens_padded", "alignment") for i, w in enumerate(widths) if w % alignment]


def test_the_alignment_of_verls_rules() -> None:
    from trajschema.verl import sequence_alignment

    align = sequence_alignment(tp_size=2, cp_size=2, use_fp8_padding=True)
    b = packed(alignment=align)
    assert check(b, alignment=align) == []
    assert all(w % 16 == 0 for w in b["cu_seqlens_padded"].diff().tolist())


def test_padding_merged_into_the_last_real_sequence() -> None:
    """prime-rl pad_micro_batch: the run's trailing padding counted as the last sequence's tokens."""
    b = packed(alignment=8)  # the last sequence: 5 real tokens in a segment of 8
    o = b["cu_seqlens"].clone()
    o[-1] += 3  # its three padding tokens counted as real
    b["cu_seqlens"] = o
    found = codes(check(b, alignment=8))
    last = len(LENGTHS) - 1
    assert found and all(s == last for s, _, _ in found)
    assert (last, "position_ids", "positions") in found


def test_a_real_value_in_the_alignment_padding() -> None:
    b = packed()
    start, width, real = (
        int(b["cu_seqlens_padded"][1]),
        int(b["cu_seqlens_padded"][2]) - int(b["cu_seqlens_padded"][1]),
        1,
    )
    assert width > real
    b["input_ids"][start + real] = 7
    assert codes(check(b)) == [(1, "input_ids", "padded")]


def test_positions_that_do_not_restart() -> None:
    b = packed(alignment=1)
    b["position_ids"] = torch.arange(b["position_ids"].shape[0])
    found = codes(check(b, alignment=1))
    assert [s for s, k, c in found if c == "positions"] == [1, 2, 3]


def test_mrope_rows_restart_at_every_sequence() -> None:
    b = packed("vlm_mrope", alignment=1)
    start = int(b["cu_seqlens"][2])
    b["position_ids"][2, start] = 3
    assert codes(check(b, "vlm_mrope", alignment=1)) == [(2, "position_ids", "positions")]


def test_schema_rules_apply_to_each_sequence() -> None:
    b = packed("moe_routed")
    start = int(b["cu_seqlens_padded"][2])
    b["routed_experts"][start, 0, 1] = b["routed_experts"][start, 0, 0]  # a token names one expert twice
    found = codes(check(b, "moe_routed"))
    assert found == [(2, "routed_experts", "repeated")]
    b = packed()
    b["prompts"] = torch.nested.as_nested_tensor(
        [t[:-1] if i == 2 else t for i, t in enumerate(b["prompts"].unbind())], layout=torch.jagged
    )
    assert 2 in {s for s, _, _ in codes(check(b))}


def test_a_padding_sequence_with_a_loss_mask_is_reported() -> None:
    b = packed()
    b["is_padding"] = torch.tensor([False, False, True, False])
    assert codes(check(b)) == [(2, "loss_mask", "padding")]


@pytest.mark.parametrize(
    "bad",
    [
        torch.tensor([0.0, 5.0, 6.0, 15.0, 20.0]),
        torch.tensor([[0, 5]]),
        [0, 5, 6, 15, 20],
        torch.empty(0, dtype=torch.int32),
        torch.zeros(5, dtype=torch.int32, device="meta"),
        torch.tensor([1, 5, 6, 15, 20], dtype=torch.int32),
        torch.tensor([0, 5, 4, 15, 20], dtype=torch.int32),
    ],
)
def test_malformed_offsets_are_violations_never_errors(bad) -> None:
    b = packed(alignment=1)
    b["cu_seqlens"] = bad
    found = check(b, alignment=1)
    assert found and {v.field for v in found} <= {"cu_seqlens", "cu_seqlens_padded"}


def test_int64_offsets_are_a_dtype_violation_but_still_read() -> None:
    b = packed()
    b["cu_seqlens"] = b["cu_seqlens"].long()
    assert codes(check(b)) == [(None, "cu_seqlens", "dtype")]


@pytest.mark.parametrize("key", ["input_ids", "loss_mask", "position_ids"])
def test_a_run_of_another_length_or_rank(key: str) -> None:
    b = packed()
    b[key] = b[key][:-1]
    assert (None, key, "shape") in codes(check(b))
    b = packed()
    b[key] = b[key].unsqueeze(0)
    assert (None, key, "rank") in codes(check(b))


def test_a_batch_that_is_no_mapping_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="mapping"):
        check([1, 2, 3])  # type: ignore[arg-type]


def test_an_empty_packed_batch_is_clean() -> None:
    b = ts.PackedBatch(
        cu_seqlens=torch.zeros(1, dtype=torch.int32),
        cu_seqlens_padded=torch.zeros(1, dtype=torch.int32),
        input_ids=torch.zeros(0, dtype=torch.int64),
    )
    assert ts.load_schema("text").batch_violations(b, layout=thd()) == []


def test_violations_at_shapes_depth_still_read_the_layout() -> None:
    b = packed()
    b["loss_mask"] = torch.roll(b["loss_mask"], -1)
    assert "boundary" in {v.code for v in check(b, depth="shapes")}


def test_a_packed_batch_pickles_and_checks_the_same() -> None:
    b = packed("vlm_mrope_moe")
    back = pickle.loads(pickle.dumps(b))
    assert isinstance(back, ts.PackedBatch) and check(back, "vlm_mrope_moe") == []


def test_validate_batch_raises_with_every_violation() -> None:
    b = packed()
    b["loss_mask"] = torch.roll(b["loss_mask"], -1)
    with pytest.raises(ts.SchemaError) as info:
        ts.load_schema("text").validate_batch(b, layout=thd())
    assert len(info.value.violations) >= 2


def test_rows_of_every_size() -> None:
    rows = rows_of("text", [(1, 0)] * 3)
    b = ts.load_schema("text").to_packed(rows, layout=thd(2))
    assert check(b, alignment=2) == []


@pytest.mark.parametrize("value", [None, 3, torch.tensor(1.5), ["q0"], torch.zeros(4, device="meta", dtype=torch.bool)])
@pytest.mark.parametrize("key", ["uid", "prompts", "is_padding", "num_turns"])
def test_a_per_sample_column_without_one_entry_per_sample(key: str, value) -> None:
    """None is absence (a required field is missing); a value without one entry per sample is a batch violation."""
    b = packed()
    b[key] = value
    found = check(b)
    if value is None:  # missing in every sample, as in a jagged batch; an absent tag column is no tag
        want = [] if key == "is_padding" else [(i, key, "missing") for i in range(len(LENGTHS))]
        assert codes(found) == want
    else:
        assert codes(found) == [(None, key, "batch")]


def offsets_ok(o: list[int], n: int, total: int) -> bool:
    """The reference: offsets of n non-empty segments covering a run of total tokens."""
    return len(o) == n + 1 and o[0] == 0 and o[-1] == total and all(b > a for a, b in itertools.pairwise(o))


@given(st.lists(st.integers(-2, 24), min_size=1, max_size=7))
def test_offsets_violations_agree_with_a_reference(offsets: list[int]) -> None:
    b = packed(alignment=1)  # 4 sequences of 5, 1, 9, 5 tokens: a run of 20
    t = torch.tensor(offsets, dtype=torch.int32)
    b["cu_seqlens"], b["cu_seqlens_padded"] = t, t.clone()
    found = check(b, alignment=1)
    broken = {v.code for v in found} & {"offsets"}
    assert bool(broken) == (not offsets_ok(offsets, len(LENGTHS), 20))
