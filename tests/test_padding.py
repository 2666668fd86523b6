"""Padding derived from schemas: always valid, never touching real samples' numbers."""

from __future__ import annotations

import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import trajschema as ts
from trajschema.testing import tq_batch, verl_sample

TEXT = ts.load_schema("text")
MOE = ts.load_schema("moe_routed")
VLM = ts.load_schema("vlm_mrope")
VLM_MOE = ts.load_schema("vlm_mrope_moe")
DISTILL = ts.load_schema("distill")

UID = re.compile(r"^pad[0-9a-f]{32}$")


def test_padding_of_every_schema_validates(schema):
    like = verl_sample(schema, 20, 9, layers=6, topk=3)
    pad = schema.padding(5, eos_token_id=2, like=like)
    for sample, tag in zip(pad.samples, pad.tags, strict=True):
        schema.validate(sample, tag=tag)
    schema.validate_batch(pad.fields, tags=pad.tags)
    schema.validate_batch(tq_batch(pad.samples), tags=pad.tags)
    # Padding joins the real batch as TransferQueue would return it.
    schema.validate_batch(tq_batch([like, *pad.samples]))


def test_the_padding_contract():
    like = verl_sample(VLM_MOE, 20, 9, uid="real")
    pad = VLM_MOE.padding(4, eos_token_id=151643, like=like)
    assert UID.match(pad.uid)
    assert pad.keys == [f"{pad.uid}_{i}_0" for i in range(4)]
    assert len(set(pad.keys)) == 4
    assert all(k.split("_")[0] == pad.uid for k in pad.keys)  # trainers split keys on "_"
    for i, (s, tag) in enumerate(zip(pad.samples, pad.tags, strict=True)):
        assert s["uid"] == pad.uid != like["uid"]
        assert s["session_id"] == i
        assert not s["loss_mask"].any() and not s["response_mask"].any()
        assert (s["responses"] == 151643).all() and (s["input_ids"] == 151643).all()
        assert tag == {"is_padding": True, "prompt_len": 127, "response_len": 1, "seq_len": 128}
        assert s["multi_modal_inputs"] == {}
        assert (s["position_ids"] == torch.arange(128).expand(4, 128)).all()
    assert pad.fields.batch_size == torch.Size([4])
    assert pad.dims == {"prompt": 127, "response": 1, "seq": 128, "layers": 4, "topk": 2, "rope_rows": 4}


def test_every_call_gets_a_fresh_uid():
    uids = {TEXT.padding(1, eos_token_id=0).uid for _ in range(50)}
    assert len(uids) == 50


def test_like_decides_dims_dtypes_and_optional_fields():
    like = verl_sample(MOE, 8, 4, layers=48, topk=8, optional=False)
    like["routed_experts"] = like["routed_experts"].to(torch.int32)
    like["rollout_log_probs"] = -torch.rand(4)
    pad = MOE.padding(3, eos_token_id=2, like=like)
    assert set(pad.fields.keys()) == set(like)  # exactly the reference's fields
    assert pad.fields["routed_experts"].shape == (3, 128, 48, 8)
    assert pad.fields["routed_experts"].dtype == torch.int32
    assert not pad.fields["routed_experts"].any()


def test_extra_fields_are_deep_copied_from_like():
    like = verl_sample(TEXT, 8, 4)
    like["data_source"] = "gsm8k"
    like["reward_extra"] = {"acc": [1.0]}
    pad = TEXT.padding(2, eos_token_id=2, like=like)
    assert pad.samples[0]["data_source"] == "gsm8k"
    like["reward_extra"]["acc"].append(0.0)
    assert pad.samples[1]["reward_extra"] == {"acc": [1.0]}
    assert pad.samples[0]["reward_extra"] is not pad.samples[1]["reward_extra"]


def test_without_like_optional_fields_come_from_include():
    assert "attention_mask" not in TEXT.padding(2, eos_token_id=2).fields.keys()
    pad = TEXT.padding(2, eos_token_id=2, include=["attention_mask", "rollout_log_probs"])
    assert pad.fields["attention_mask"].all()
    assert set(pad.fields.keys()) >= {"attention_mask", "rollout_log_probs"}
    for s, t in zip(pad.samples, pad.tags, strict=True):
        TEXT.validate(s, tag=t)


def test_dims_override_the_padding_defaults():
    pad = TEXT.padding(2, eos_token_id=2, dims={"prompt": 1, "response": 1})
    assert pad.samples[0]["input_ids"].tolist() == [2, 2]
    assert pad.tags[0]["seq_len"] == 2


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        pytest.param(
            lambda: MOE.padding(2, eos_token_id=2),
            ValueError,
            r"no padding size for dim 'layers'.*like=.*dims=",
            id="free-dim-without-size",
        ),
        pytest.param(lambda: TEXT.padding(-1, eos_token_id=2), ValueError, "count must be", id="negative-count"),
        pytest.param(lambda: TEXT.padding(2.0, eos_token_id=2), ValueError, "count must be", id="float-count"),
        pytest.param(lambda: TEXT.padding(2, eos_token_id=-3), ValueError, "eos_token_id", id="negative-eos"),
        pytest.param(lambda: TEXT.padding(2, eos_token_id=2, dims={"seq": 4}), ValueError, "derived", id="derived-dim"),
        pytest.param(
            lambda: VLM.padding(2, eos_token_id=2, dims={"rope_rows": 3}), ValueError, "fixed at 4", id="fixed-dim"
        ),
        pytest.param(lambda: TEXT.padding(2, eos_token_id=2, dims={"prompt": 0}), ValueError, "bounds", id="below-min"),
        pytest.param(
            lambda: TEXT.padding(2, eos_token_id=2, dims={"promt": 1}), ValueError, "no dim 'promt'", id="unknown-dim"
        ),
        pytest.param(
            lambda: TEXT.padding(2, eos_token_id=2, include=["attn_mask"]),
            ValueError,
            "does not declare",
            id="unknown-include",
        ),
        pytest.param(
            lambda: TEXT.padding(
                2, eos_token_id=2, like=verl_sample(TEXT, 3, 2, optional=False), include=["attention_mask"]
            ),
            ValueError,
            "lacks",
            id="include-beyond-like",
        ),
        pytest.param(
            lambda: TEXT.padding(2, eos_token_id=2, like={"uid": "x"}), ts.SchemaError, "missing", id="bad-like"
        ),
    ],
)
def test_padding_misuse(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_zero_padding():
    pad = VLM_MOE.padding(0, eos_token_id=2, dims={"layers": 2, "topk": 2})
    assert len(pad) == 0 and pad.samples == [] and pad.fields.batch_size == torch.Size([0])


# --- properties


def _dims_for(schema):
    free = {n: st.integers(1, 6) for n in ("layers", "topk", "teacher_topk") if n in schema.dims}
    return st.fixed_dictionaries({"prompt": st.integers(1, 200), "response": st.integers(0, 40), **free})


@st.composite
def padding_requests(draw):
    schema = ts.load_schema(draw(st.sampled_from(ts.schema_names())))
    dims = draw(_dims_for(schema))
    optional = [f.name for f in schema.fields.values() if not f.required]
    include = draw(st.lists(st.sampled_from(optional), unique=True)) if optional else []
    return schema, dims, include, draw(st.integers(0, 12)), draw(st.integers(0, 200_000))


@settings(max_examples=60, deadline=None)
@given(padding_requests())
def test_padding_always_validates(request):
    schema, dims, include, count, eos = request
    pad = schema.padding(count, eos_token_id=eos, dims=dims, include=include)
    assert len(pad.samples) == len(pad.tags) == len(pad.keys) == count
    for s, t in zip(pad.samples, pad.tags, strict=True):
        schema.validate(s, tag=t, dims=dict(dims))
        assert not s["loss_mask"].any()
        assert t["is_padding"] is True
    schema.validate_batch(pad.fields, tags=pad.tags)


@settings(max_examples=40, deadline=None)
@given(
    schema_name=st.sampled_from(ts.schema_names()),
    p=st.integers(1, 40),
    r=st.integers(0, 20),
    count=st.integers(1, 6),
    layers=st.integers(1, 4),
    topk=st.integers(1, 3),
)
def test_padding_like_any_real_sample_validates(schema_name, p, r, count, layers, topk):
    schema = ts.load_schema(schema_name)
    like = verl_sample(schema, p, r, layers=layers, topk=topk, teacher_topk=topk)
    pad = schema.padding(count, eos_token_id=2, like=like)
    assert set(pad.fields.keys()) == set(like)
    schema.validate_batch(tq_batch([like, *pad.samples]), tags=[{}, *pad.tags])


def _grpo_advantages(scores, uids, eps=1e-6):
    """verl-style outcome advantage: normalize each sample's score within its uid group."""
    out = torch.empty_like(scores)
    for uid in dict.fromkeys(uids):
        idx = torch.tensor([i for i, u in enumerate(uids) if u == uid])
        group = scores[idx]
        std = group.std() if len(group) > 1 else torch.tensor(1.0)
        mean = group.mean() if len(group) > 1 else torch.tensor(0.0)
        out[idx] = (group - mean) / (std + eps)
    return out


def _token_mean_loss(per_token, masks):
    num = sum((lt * m).sum() for lt, m in zip(per_token, masks, strict=True))
    den = sum(m.sum() for m in masks)
    return num / den


@settings(max_examples=40, deadline=None)
@given(
    groups=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    count=st.integers(1, 9),
    seed=st.integers(0, 2**16),
)
def test_padding_never_changes_real_advantages_or_losses(groups, count, seed):
    g = torch.Generator().manual_seed(seed)
    real = []
    for gi, size in enumerate(groups):
        for j in range(size):
            r = int(torch.randint(1, 6, (1,), generator=g))
            real.append(verl_sample(TEXT, 3, r, uid=f"prompt{gi}", seed=seed + 7 * gi + j))
    scores = torch.rand(len(real), generator=g)
    pad = TEXT.padding(count, eos_token_id=2, like=real[0])
    batch = real + pad.samples
    all_scores = torch.cat([scores, torch.rand(count, generator=g)])  # padding gets arbitrary scores
    uids = [s["uid"] for s in batch]
    adv_real = _grpo_advantages(scores, uids[: len(real)])
    adv_all = _grpo_advantages(all_scores, uids)
    assert torch.equal(adv_all[: len(real)], adv_real)

    per_token = [torch.rand(s["responses"].numel(), generator=g) for s in batch]
    masks = [s["loss_mask"] for s in batch]
    assert torch.equal(_token_mean_loss(per_token, masks), _token_mean_loss(per_token[: len(real)], masks[: len(real)]))


# --- padding is valid by construction; the cheap proofs behind that


def _one_field_schema(field: dict) -> ts.Schema:
    return ts.schema_from_dict({"name": "one", "dims": {"n": {"min": 1}}, "padding": {"n": 3}, "fields": {"t": field}})


@pytest.mark.parametrize(
    ("field", "match"),
    [
        pytest.param(
            {"shape": ["n"], "dtype": "int16", "pad": "eos"}, "does not fit dtype torch.int16", id="eos-overflows-int16"
        ),
        pytest.param(
            {"shape": ["n"], "dtype": "int64", "values": [0, 1], "pad": "eos"},
            "eos_token_id=151643",
            id="eos-breaks-values",
        ),
        pytest.param(
            {"shape": ["n"], "dtype": "int64", "max": 3, "pad": "positions"},
            "breaks its value checks",
            id="positions-break-max-at-the-callers-size",
        ),
    ],
)
def test_padding_refuses_values_that_would_not_validate(field, match):
    # The schema's own padding size (n=3) passes; dims= asks for positions 0..4.
    with pytest.raises(ValueError, match=match):
        _one_field_schema(field).padding(2, eos_token_id=151643, dims={"n": 5})


def test_positions_that_break_max_at_the_schemas_own_padding_size_fail_at_load_time():
    with pytest.raises(ts.SchemaDefinitionError, match=r"fields\.t\.pad: pad rule 'positions' fills 0\.\.2"):
        _one_field_schema({"shape": ["n"], "dtype": "int64", "max": 1, "pad": "positions"})


def test_a_fill_that_breaks_its_own_value_checks_is_a_schema_error():
    with pytest.raises(ts.SchemaDefinitionError, match=r"fields\.t\.pad: fill 2 must itself pass"):
        _one_field_schema({"shape": ["n"], "dtype": "int64", "values": [0, 1], "pad": 2})


def test_the_shared_empty_mapping_is_read_only_and_travels_as_a_plain_dict():
    import copy
    import pickle

    pad = VLM.padding(3, eos_token_id=2)
    mm = pad.samples[0]["multi_modal_inputs"]
    assert mm == {} and mm is pad.samples[2]["multi_modal_inputs"]
    with pytest.raises(TypeError, match="read-only"):
        mm["pixel_values"] = torch.zeros(1)
    with pytest.raises(TypeError, match="read-only"):
        mm.update(a=1)
    for clone in (pickle.loads(pickle.dumps(mm)), copy.deepcopy(mm), copy.copy(mm)):
        assert type(clone) is dict and clone == {}
        clone["ok"] = 1  # a copy is an ordinary dict again
    assert pad.fields[1]["multi_modal_inputs"] == {}
