"""`trajschema.skyrl.pad_training_input_batch` against SkyRL 0.3.0's own as the oracle.

Every batch is built by SkyRL's ``convert_prompts_responses_to_batch_tensors`` and wrapped
as ``RayPPOTrainer.convert_to_training_input`` wraps it (`skyrl_support.skyrl_batch`); the
padded batch is compared with what SkyRL's ``pad_training_input_batch`` returns for the
same batch: same class, keys, widths, dtypes, real rows and metadata keys (plus
``is_padding``), and the differences the drop-in exists for (no copy of row 0, its images
or its reward; a fresh uid per padding row).
"""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
import trajschema.skyrl as sk
from tests.skyrl_support import TRAINING_BATCH, import_skyrl, routes, skyrl_batch, tokens

P_LENS = [3, 5, 1, 2]
R_LENS = [4, 2, 3, 1]
SCHEMAS = ["text", "moe_routed", "vlm_mrope", "vlm_mrope_moe"]


def build(schema: str, *, p_lens=P_LENS, r_lens=R_LENS, image_rows: int = 4, **kw: Any) -> Any:
    prompts = [tokens(p) for p in p_lens]
    responses = [tokens(r, 50) for r in r_lens]
    extra: dict[str, Any] = {"logprobs": [[-0.5] * r for r in r_lens]}
    if "moe" in schema:
        extra["experts"] = [routes(p + r, 2, 2, 8, seed=i) for i, (p, r) in enumerate(zip(p_lens, r_lens))]
    if "vlm" in schema:
        g = torch.Generator().manual_seed(0)
        extra["images"] = [
            (torch.randn(image_rows * (i + 1), 6, generator=g), torch.tensor([[1, 2, 2 * (i + 1)]]))
            for i in range(len(p_lens))
        ]
    return skyrl_batch(prompts, responses, **{**extra, **kw})


def theirs(batch: Any, pad: int) -> Any:
    return import_skyrl(TRAINING_BATCH).pad_training_input_batch(batch, pad)


def entries(col: Any) -> list[torch.Tensor]:
    return list(col.tensors)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_same_class_keys_widths_dtypes_and_real_rows_as_skyrls(schema):
    batch = build(schema)
    ours, ref = sk.pad_training_input_batch(build(schema), 3), theirs(build(schema), 3)
    assert type(ours) is type(ref) is type(batch)
    assert list(ours) == list(ref)
    for key, col in ref.items():
        if col is None:
            assert ours[key] is None
        elif isinstance(col, torch.Tensor):
            assert ours[key].shape == col.shape and ours[key].dtype == col.dtype, key
            assert torch.equal(ours[key][:4], batch[key]), key
        else:
            assert type(ours[key]) is type(col) and len(ours[key]) == len(col) == 7
            assert all(torch.equal(a, b) for a, b in zip(entries(ours[key])[:4], entries(batch[key])))
    assert set(ours.metadata) == set(ref.metadata) | {"is_padding"}
    assert ours.metadata["pad_size"] == ref.metadata["pad_size"] == 3
    assert ours.metadata["is_padding"] == [False] * 4 + [True] * 3
    ts.load_schema(schema).validate_batch(ours, layout="skyrl")


@pytest.mark.parametrize("schema", SCHEMAS)
def test_padding_rows_are_schema_padding_never_row_0(schema):
    ours, ref = sk.pad_training_input_batch(build(schema), 3), theirs(build(schema), 3)
    pad = slice(4, 7)
    for key in ("loss_mask", "response_mask", "rewards", "rollout_logprobs"):
        assert not ours[key][pad].any(), key
    assert ref["rewards"][pad].any() and ref["response_mask"][pad].any()  # SkyRL: row 0's clones
    seqs = ours["sequences"][pad]
    assert (seqs == seqs[0, -1]).all() and seqs[0, -1] == build(schema)["sequences"][0, -1]  # EOS: row 0's last token
    uids = ours.metadata["uids"][4:]
    assert len(set(uids)) == 3 and not set(uids) & set(ours.metadata["uids"][:4])
    assert all(u.startswith("pad") for u in uids) and ref.metadata["uids"][4:] == ["pad0", "pad1", "pad2"]
    if "vlm" in schema:
        assert [t.shape[0] for t in entries(ours["pixel_values"])[4:]] == [0, 0, 0]
        assert [t.shape[0] for t in entries(ref["pixel_values"])[4:]] == [4, 4, 4]  # SkyRL: row 0's images
    if "moe" in schema:
        routed = ours["rollout_expert_indices"][pad]
        assert routed.dtype == torch.uint8 and (routed[..., 0] != routed[..., 1]).all()  # distinct per token


def test_pad_size_zero_returns_the_batch_itself_as_skyrl_does():
    batch, ref = build("text"), build("text")
    assert sk.pad_training_input_batch(batch, 0) is batch
    assert theirs(ref, 0) is ref
    assert batch.metadata == {**ref.metadata, "is_padding": [False] * 4}


def test_is_last_step_and_other_metadata_as_skyrl():
    batch = build("text")
    batch.metadata.update(is_last_step=[True, False, True, True], response_length=4, extra={"a": [1]})
    ours, ref = sk.pad_training_input_batch(batch, 2), theirs(copy.deepcopy(batch), 2)
    assert ours.metadata["is_last_step"] == ref.metadata["is_last_step"] == [True, False, True, True, True, True]
    assert ours.metadata["extra"] == ref.metadata["extra"] and ours.metadata["extra"] is not batch.metadata["extra"]
    assert ours.metadata["response_length"] == 4


def test_ids_given_win_and_the_pad_id_is_read_from_the_batch():
    batch = build("text")
    ours = sk.pad_training_input_batch(batch, 1, eos_token_id=7)
    assert (ours["sequences"][-1] == 7).all()
    assert batch["sequences"][2, 0] == 0  # the batch's own pad id (row 2 is left-padded)


def test_columns_no_schema_field_gives_get_zeros():
    batch = build("text")
    batch["advantages"] = torch.randn(4, 4)
    batch["values"] = None
    ours = sk.pad_training_input_batch(batch, 2)
    assert torch.equal(ours["advantages"][4:], torch.zeros(2, 4)) and ours["values"] is None


def test_a_batch_that_breaks_the_layout_is_refused_and_nothing_is_built():
    batch = build("moe_routed")
    batch["loss_mask"][1, 0] = 1.0  # loss outside the response
    with pytest.raises(ts.SchemaError) as err:
        sk.pad_training_input_batch(batch, 2)
    assert (1, "loss_mask", "mask") in {(v.sample, v.field, v.code) for v in err.value.violations}
    assert len(batch["loss_mask"]) == 4 and "pad_size" not in batch.metadata


@pytest.mark.parametrize(
    ("mutate", "pad", "error", "words"),
    [
        (lambda b: None, -1, ValueError, "pad_size must be"),
        (lambda b: None, True, ValueError, "pad_size must be"),
        (lambda b: b.metadata.update(is_padding=[True] * 4), 1, ValueError, "no real row"),
        (lambda b: b.metadata.update(is_padding=[0, 0, 0, 0]), 1, TypeError, "must be a bool"),
        (lambda b: b.metadata.update(uids=["a"]), 1, ValueError, "one per row (4)"),
    ],
    ids=["negative", "bool", "all-padding", "int-tag", "short-uids"],
)
def test_misuse_is_a_typed_error_naming_what(mutate, pad, error, words):
    batch = build("text")
    mutate(batch)
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        sk.pad_training_input_batch(batch, pad)


def test_not_a_batch_and_an_empty_batch():
    with pytest.raises(TypeError, match="TrainingInputBatch"):
        sk.pad_training_input_batch({"sequences": torch.zeros(1, 1)}, 1)
    empty = build("text")[0:0]
    empty.metadata = {"uids": []}
    with pytest.raises(ValueError, match="no rows"):
        sk.pad_training_input_batch(empty, 1)
    assert sk.pad_training_input_batch(empty, 0) is empty


def test_one_row_at_the_padded_maximum_and_a_row_without_response():
    one = build("moe_routed", p_lens=[4], r_lens=[3])
    ts.load_schema("moe_routed").validate_batch(sk.pad_training_input_batch(one, 5), layout="skyrl")
    no_response = build("text", p_lens=[2, 3], r_lens=[0, 2])
    ts.load_schema("text").validate_batch(sk.pad_training_input_batch(no_response, 2), layout="skyrl")


def test_padding_a_padded_batch_keeps_earlier_padding_tagged():
    twice = sk.pad_training_input_batch(sk.pad_training_input_batch(build("text"), 1), 2)
    assert twice.metadata["is_padding"] == [False] * 4 + [True] * 3 and twice.metadata["pad_size"] == 2


def test_the_padding_does_not_grow_with_row_0s_images():
    small, large = build("vlm_mrope", image_rows=4), build("vlm_mrope", image_rows=400)
    sizes = [
        sum(t.numel() for t in entries(sk.pad_training_input_batch(b, 3)["pixel_values"])[4:]) for b in (small, large)
    ]
    assert sizes == [0, 0]


def test_the_schema_chosen_declares_what_the_batch_holds():
    # SkyRL keeps no position_ids (the model computes them), so in its layout a VLM batch
    # reads as text does (text declares multi_modal_inputs): the tighter schema wins the tie.
    chosen = [sk.choose_batch_schema(build(s)).name for s in SCHEMAS]
    assert chosen == ["text", "moe_routed", "text", "moe_routed"]


def test_the_choice_is_made_once_per_batch_signature(monkeypatch, tmp_path):
    """A trainer pads batch after batch of one shape: the schema is chosen once for them; another
    set of columns, or a schema file added to the search path, makes a fresh choice."""
    from trajschema.skyrl import pad as module

    calls = []
    choose = module._choose
    monkeypatch.setattr(module, "_choose", lambda *a: calls.append(a) or choose(*a))
    monkeypatch.setattr(module, "_CHOSEN", {})
    text = [sk.choose_batch_schema(build("text", p_lens=p)).name for p in ([3, 5, 1, 2], [7, 1, 2, 9], [1, 1, 1, 1])]
    assert text == ["text"] * 3 and len(calls) == 1
    assert sk.choose_batch_schema(build("moe_routed")).name == "moe_routed" and len(calls) == 2
    assert sk.choose_batch_schema(build("text"), layout=sk.sliced_layout()).name == "text" and len(calls) == 3
    (tmp_path / "unrelated.yaml").write_text(
        (ts.load_schema("text").to_yaml()).replace("name: text", "name: unrelated")
    )
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    assert sk.choose_batch_schema(build("text")).name == "text" and len(calls) == 4
    assert sk.pad_training_input_batch(build("text"), 2).metadata["is_padding"][-2:] == [True, True]
    assert len(calls) == 4  # the padding itself chose from the cache


def test_a_slice_fails_the_exact_layout_and_passes_the_sliced_one():
    part = build("text")[2:4]  # rows shorter than the whole batch's widths
    part.metadata = {"uids": ["u1", "u1"]}
    assert {v.code for v in ts.load_schema("text").batch_violations(part, layout="skyrl")} == {"length"}
    padded = sk.pad_training_input_batch(part, 2, layout=sk.sliced_layout())
    ts.load_schema("text").validate_batch(padded, layout=sk.sliced_layout())


@given(st.lists(st.tuples(st.integers(1, 6), st.integers(0, 5)), min_size=1, max_size=5), st.integers(0, 4))
def test_any_batch_skyrl_builds_pads_clean_with_its_real_rows_untouched(sizes, pad):
    p_lens, r_lens = [p for p, _ in sizes], [r for _, r in sizes]
    batch = build("moe_routed", p_lens=p_lens, r_lens=r_lens)
    out = sk.pad_training_input_batch(batch, pad)
    n = len(sizes)
    assert len(out) == n + pad and out.metadata["is_padding"] == [False] * n + [True] * pad
    for key, col in batch.items():
        if isinstance(col, torch.Tensor):
            assert torch.equal(out[key][:n], col)
    ts.load_schema("moe_routed").validate_batch(out, layout="skyrl")


def test_check_false_pads_a_batch_the_same_and_skips_the_whole_batch_check():
    checked = sk.pad_training_input_batch(build("moe_routed"), 2)
    unchecked = sk.pad_training_input_batch(build("moe_routed"), 2, check=False)
    for key, col in checked.items():
        if isinstance(col, torch.Tensor):
            assert torch.equal(col, unchecked[key]), key
    bad = build("moe_routed")
    bad["sequences"] = bad["sequences"].clone()
    bad["sequences"][2, 0] = 7  # a token in row 2's left padding (its prompt is 1 of 5)
    with pytest.raises(ts.SchemaError, match="padded"):
        sk.pad_training_input_batch(bad, 2)
    assert len(sk.pad_training_input_batch(bad, 2, check=False)) == 6
    with pytest.raises(TypeError, match="check must be a bool"):
        sk.install(check="no")


# -- spread routes over every padding row of a call (issue 27 §1-§3) -----------------------------


@given(
    pad=st.integers(1, 30),
    lengths=st.lists(st.tuples(st.integers(1, 6), st.integers(1, 4)), min_size=1, max_size=3),
    experts=st.integers(2, 24),
    data=st.data(),
)
def test_the_drop_ins_padding_keeps_the_spread_bound_over_the_whole_call(pad, lengths, experts, data):
    """Property: over all padding tokens of one call, no expert gets more than ceil(T * topk / E)
    slots in any layer, each token's slots are distinct, and E is the batch's largest id + 1."""
    topk = data.draw(st.integers(1, min(experts, 3)), label="topk")
    p, r = [a for a, _ in lengths], [b for _, b in lengths]
    experts_of = [routes(a + b, 2, topk, experts, seed=i) for i, (a, b) in enumerate(lengths)]
    token = experts_of[-1][0, 0]  # the last row reaches the last expert; row 0 need not
    if experts - 1 not in token.tolist():
        token[-1] = experts - 1
    batch = skyrl_batch([tokens(x) for x in p], [tokens(x, 50) for x in r], experts=experts_of)
    out = sk.pad_training_input_batch(batch, pad)
    mask = out["attention_mask"][len(p) :].bool()
    ids = out["rollout_expert_indices"][len(p) :][mask].long()  # (padding tokens, layers, topk)
    assert (ids.sort(-1).values.diff(dim=-1) != 0).all()
    bound = math.ceil(ids.shape[0] * topk / experts)
    for layer in range(2):
        assert int(torch.bincount(ids[:, layer].reshape(-1), minlength=experts).max()) <= bound
    assert int(ids.max()) < experts
