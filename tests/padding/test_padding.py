"""Padding derived from schemas: always valid, never touching real samples' numbers."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import trajschema as ts
from trajschema.padding import PaddingMemoryError, PaddingSizeError, format_bytes, resolve_padding
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
    sizes = {k: v for k, v in pad.dims.items() if k != "experts"}  # experts: once moe_routed spreads its routes
    assert sizes == {"prompt": 127, "response": 1, "seq": 128, "layers": 4, "topk": 2, "rope_rows": 4}
    assert_routes(VLM_MOE, pad)


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
    assert_routes(MOE, pad)


def assert_routes(schema: ts.Schema, pad: ts.PaddingBatch) -> None:
    """Padding routes as the schema's rule says: zeros, or spread (distinct per token, within the experts)."""
    routes = pad.fields["routed_experts"]
    rule = schema.fields["routed_experts"].pad
    if rule.rule == "fill":
        assert not routes.any()
        return
    assert rule.rule == "spread"
    experts = pad.dims[rule.over or ""]
    assert int(routes.min()) >= 0 and int(routes.max()) < experts
    slots = routes.reshape(-1, routes.shape[-1])
    assert (slots.sort(dim=-1).values.diff(dim=-1) != 0).all()  # no token repeats an expert


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
            PaddingSizeError,
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
    pad = VLM_MOE.padding(0, eos_token_id=2, dims={k: 2 for k in ("layers", "topk", "experts") if k in VLM_MOE.dims})
    assert len(pad) == 0 and pad.samples == [] and pad.fields.batch_size == torch.Size([0])


# --- properties


def _dims_for(schema):
    free = {n: st.integers(1, 6) for n in ("layers", "topk", "teacher_topk") if n in schema.dims}
    if "experts" in schema.dims:  # routes spread over the experts: at least topk of them
        free["experts"] = st.integers(6, 40)
    return st.fixed_dictionaries({"prompt": st.integers(1, 200), "response": st.integers(0, 40), **free})


@st.composite
def padding_requests(draw):
    schema = ts.load_schema(draw(st.sampled_from(ts.schema_names())))
    dims = draw(_dims_for(schema))
    optional = [f.name for f in schema.fields.values() if not f.required]
    include = draw(st.lists(st.sampled_from(optional), unique=True)) if optional else []
    return schema, dims, include, draw(st.integers(0, 12)), draw(st.integers(0, 200_000))


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


# --- every argument is checked first, by name, before anything is built (issue 14)


def _on(device: str, sample: dict) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in sample.items()}


_REAL = verl_sample(TEXT, 3, 2)
_HUGE = 2**40  # padding of this many samples, or tokens, needs terabytes: refused, never allocated

#: id -> (call, exception type (exactly), a regex the message must match: it names the argument).
BAD_PADDING_ARGUMENTS = {
    "count-bool": (lambda: TEXT.padding(True, eos_token_id=2), ValueError, r"^count must be an int .*found True"),
    "count-nan": (lambda: TEXT.padding(float("nan"), eos_token_id=2), ValueError, r"^count must be .*found nan"),
    "count-none": (lambda: TEXT.padding(None, eos_token_id=2), ValueError, r"^count must be .*found None"),
    "count-tensor": (lambda: TEXT.padding(torch.tensor(2), eos_token_id=2), ValueError, r"^count must be"),
    "count-above-int64": (lambda: TEXT.padding(2**63, eos_token_id=2), ValueError, r"^count must be an int in 0\.\."),
    "count-terabytes": (
        lambda: TEXT.padding(_HUGE, eos_token_id=2),
        PaddingMemoryError,
        r"^count=1099511627776: .*memory",
    ),
    "eos-bool": (lambda: TEXT.padding(1, eos_token_id=True), ValueError, r"^eos_token_id must be .*found True"),
    "eos-above-int64": (lambda: TEXT.padding(1, eos_token_id=2**63), ValueError, r"^eos_token_id must be an int"),
    "eos-str": (lambda: TEXT.padding(1, eos_token_id="2"), ValueError, r"^eos_token_id must be .*found '2'"),
    "like-list": (lambda: TEXT.padding(1, eos_token_id=2, like=[_REAL]), TypeError, r"^like= must be a mapping"),
    "like-str": (lambda: TEXT.padding(1, eos_token_id=2, like="text"), TypeError, r"^like= must be a mapping"),
    "like-a-batch": (
        lambda: TEXT.padding(1, eos_token_id=2, like=tq_batch([_REAL, _REAL])),
        TypeError,
        r"^like= must be one sample, found a TensorDict with batch_size \[2\]",
    ),
    "like-int-keys": (lambda: TEXT.padding(1, eos_token_id=2, like={1: 2}), TypeError, r"^like= has keys that are not"),
    "like-of-another-schema": (
        lambda: TEXT.padding(1, eos_token_id=2, like=verl_sample(VLM, 3, 2)),
        ts.SchemaError,
        r"position_ids: like= sample: ",
    ),
    "like-meta-undeclared": (
        lambda: TEXT.padding(1, eos_token_id=2, like={**_REAL, "extra": torch.zeros(7, device="meta")}),
        ValueError,
        r"field 'extra' of like= is a f32\[7\]: a meta tensor",
    ),
    "like-sparse-undeclared": (
        lambda: TEXT.padding(1, eos_token_id=2, like={**_REAL, "extra": torch.zeros(7).to_sparse()}),
        ValueError,
        r"field 'extra' of like= .*not a dense tensor",
    ),
    "like-uncopyable-undeclared": (
        lambda: TEXT.padding(2, eos_token_id=2, like={**_REAL, "extra": (i for i in range(3))}),
        ValueError,
        r"field 'extra' of like= \(generator\) cannot be copied into padding: TypeError",
    ),
    "dims-list": (
        lambda: TEXT.padding(1, eos_token_id=2, dims=[("prompt", 1)]),
        ValueError,
        r"^dims= must be a mapping",
    ),
    "dims-bool": (lambda: TEXT.padding(1, eos_token_id=2, dims={"prompt": True}), ValueError, r"^dims\['prompt'\]"),
    "dims-negative": (lambda: TEXT.padding(1, eos_token_id=2, dims={"prompt": -1}), ValueError, r"^dims\['prompt'\]"),
    "dims-float": (lambda: TEXT.padding(1, eos_token_id=2, dims={"prompt": 2.0}), ValueError, r"^dims\['prompt'\]"),
    "dims-int-key": (
        lambda: TEXT.padding(1, eos_token_id=2, dims={1: 1}),
        ValueError,
        r"^dims=\{1: \.\.\.\}: .*no dim",
    ),
    "dims-terabytes": (
        lambda: TEXT.padding(1, eos_token_id=2, dims={"prompt": _HUGE}),
        PaddingMemoryError,
        r"^count=1: 1 padding sample of schema 'text' \(prompt=1099511627776, response=1\) .*dims=",
    ),
    "dims-past-torch-sizes": (  # count * axis overflowed torch's int64 storage size before
        lambda: TEXT.padding(1, eos_token_id=2, dims={"response": 2**62}),
        PaddingMemoryError,
        r"^count=1: .*response=4611686018427387904.*2\*\*67 bytes",
    ),
    "include-int": (lambda: TEXT.padding(1, eos_token_id=2, include=3), ValueError, r"^include= must be a list"),
    "include-bytes": (lambda: TEXT.padding(1, eos_token_id=2, include=b"rm"), ValueError, r"^include= must be a list"),
    "include-mapping": (
        lambda: TEXT.padding(1, eos_token_id=2, include={"rm_scores": 1}),
        ValueError,
        r"^include= must be a list",
    ),
    "include-non-str-item": (lambda: TEXT.padding(1, eos_token_id=2, include=[[1]]), ValueError, r"^include\[0\] must"),
    "include-none-item": (
        lambda: TEXT.padding(1, eos_token_id=2, include=["rm_scores", None]),
        ValueError,
        r"^include\[1\] must be a field name \(str\), found NoneType",
    ),
}


@pytest.mark.parametrize(
    ("call", "exc", "match"), list(BAD_PADDING_ARGUMENTS.values()), ids=list(BAD_PADDING_ARGUMENTS)
)
def test_padding_refuses_bad_arguments_by_name(call, exc, match):
    with pytest.raises(Exception) as info:
        call()
    assert type(info.value) is exc, f"{type(info.value).__name__}: {info.value}"
    assert re.search(match, str(info.value)), str(info.value)


def _is_index(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _accepted(arg: str, value) -> bool:
    """The reference: an int64 index, and for count and the prompt size not terabytes (nor 0 tokens)."""
    if not _is_index(value):
        return False
    if arg == "eos_token_id":
        return True
    return (0 if arg == "count" else 1) <= value < 2**45


#: Values a careless caller passes where an int belongs. Valid ints stay small or
#: huge (refused for memory) so that no example builds gigabytes.
_ODD_INTS = st.one_of(
    st.integers(-3, 3),
    st.integers(2**45, 2**70),
    st.integers(-(2**70), -1),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.binary(max_size=3),
    st.lists(st.integers(0, 3), max_size=2),
    st.sampled_from([torch.tensor(2), torch.zeros(2), object(), 2 + 0j]),
)


# Ten kinds of odd value against three arguments: each pair needs its own few draws.
@settings(max_examples=6 * settings().max_examples)
@given(arg=st.sampled_from(["count", "eos_token_id", "dims"]), value=_ODD_INTS)
def test_odd_ints_raise_only_value_errors_naming_their_argument(arg, value):
    count, eos, dims = 1, 2, {"prompt": 1, "response": 1}
    if arg == "count":
        count = value
    elif arg == "eos_token_id":
        eos = value
    else:
        dims = {"prompt": value, "response": 1}
    if _accepted(arg, value):
        pad = TEXT.padding(count, eos_token_id=eos, dims=dims)
        assert len(pad) == count and pad.dims["prompt"] == dims["prompt"]
        return
    with pytest.raises(ValueError) as info:
        TEXT.padding(count, eos_token_id=eos, dims=dims)
    # Ints of the right range are refused for the memory they need; everything else by type.
    assert type(info.value) is (PaddingMemoryError if _is_index(value) and value >= 2**45 else ValueError)
    named = {"count": ["count"], "eos_token_id": ["eos_token_id"], "dims": ["dims", "prompt="]}[arg]
    assert any(n in str(info.value) for n in named), str(info.value)


def test_an_iterator_of_include_names_is_read_once():
    # include= was read twice, so an iterator's names were checked and then forgotten.
    pad = TEXT.padding(1, eos_token_id=2, include=iter(["attention_mask", "rm_scores"]))
    assert {"attention_mask", "rm_scores"} <= set(pad.fields.keys())
    assert "rollout_log_probs" not in pad.fields.keys()


def test_no_padding_samples_allocate_nothing_whatever_the_sizes():
    # With count 0 the positions row 0..n-1 was still built: 8 TiB here.
    pad = TEXT.padding(0, eos_token_id=2, dims={"prompt": _HUGE, "response": 1})
    assert len(pad) == 0 and pad.dims["seq"] == _HUGE + 1
    assert pad.fields["position_ids"].shape == (0, _HUGE + 1)


def test_a_value_set_of_positions_is_judged_without_building_every_position():
    schema = _one_field_schema({"shape": ["n"], "dtype": "int64", "values": [0, 1, 2], "pad": "positions"})
    assert schema.padding(2, eos_token_id=2).fields["t"].tolist() == [[0, 1, 2]] * 2
    with pytest.raises(ValueError, match=r"padding field 't' with fill positions breaks its value checks"):
        schema.padding(0, eos_token_id=2, dims={"n": _HUGE})  # probed 0..2**40-1 before


def test_a_like_on_the_meta_device_gives_real_padding():
    # Declared fields take only shapes and dtypes from like=: a meta sample is enough.
    pad = TEXT.padding(2, eos_token_id=2, like=_on("meta", verl_sample(TEXT, 6, 3)))
    assert all(not v.is_meta for v in pad.fields.values() if isinstance(v, torch.Tensor))
    assert pad.dims == {"prompt": 127, "response": 1, "seq": 128}
    TEXT.validate_batch(pad.fields, tags=pad.tags)


def test_a_copy_field_refuses_a_meta_reference_before_building_any_column(monkeypatch):
    schema = ts.schema_from_dict(
        {
            "name": "cp",
            "dims": {"n": {"min": 1}},
            "padding": {"n": 2},
            "fields": {
                "a": {"shape": ["n"], "dtype": "int64", "pad": 0},
                "t": {"shape": [3], "dtype": "float32", "pad": "copy"},
            },
        }
    )
    like = {"a": torch.zeros(2, dtype=torch.int64), "t": torch.zeros(3, device="meta")}
    built = []
    monkeypatch.setattr(torch, "zeros", lambda *a, **k: built.append(a) or torch.empty(0))
    with pytest.raises(ValueError, match=r"field 't' of like= is a f32\[3\]: a meta tensor"):
        schema.padding(2, eos_token_id=2, like=like)
    assert built == []  # the zero-filled column of `a` was not built first


def _tensor_bytes(pad: ts.PaddingBatch) -> int:
    return sum(v.numel() * v.element_size() for v in pad._columns.values() if isinstance(v, torch.Tensor))


# --- one size resolver: what padding will build, known before it builds it (issue 15)


@given(request=padding_requests(), with_like=st.booleans(), extra=st.sampled_from([0, 1, 13]))
def test_the_resolved_sizes_are_what_padding_builds(request, with_like, extra):
    """Every dim, and every field's shape, dtype and bytes, as the built columns have them; the batch adds up."""
    schema, dims, include, count, _ = request
    count = max(count, 1)
    like = None
    if with_like:
        like = verl_sample(schema, 5, 3, layers=dims.get("layers", 2), topk=dims.get("topk", 2))
        like["undeclared"] = torch.zeros(11, extra)  # copied into every sample (no axis follows a dim)
        include = None
    sizes = resolve_padding(schema.plan, count, like=like, dims=dims, include=include)
    pad = schema.padding(count, eos_token_id=2, like=like, dims=dims, include=include)
    assert dict(sizes.dims) == pad.dims and list(sizes.fields) == list(pad._columns)
    free = {n for n, d in schema.dims.items() if isinstance(d, ts.FreeDim)}
    assert dict(sizes.free_dims) == {n: v for n, v in pad.dims.items() if n in free}
    for name, size in sizes.fields.items():
        column = pad.fields.get(name)
        if isinstance(column, torch.Tensor):
            assert (size.shape, size.dtype) == (tuple(column.shape[1:]), column.dtype), name
            assert size.bytes * count == column.numel() * column.element_size(), name
        else:
            assert (size.shape, size.dtype, size.bytes) == (None, None, 0), name
    assert sizes.sample_bytes * count == _tensor_bytes(pad)
    assert sizes.batch_bytes == count * (sizes.sample_bytes + sizes.row_overhead)


def test_resolving_allocates_nothing_whatever_the_sizes(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("resolve_padding allocated a tensor")

    for name in ("zeros", "full", "empty", "arange", "tensor"):
        monkeypatch.setattr(torch, name, refuse)
    dims = {"prompt": 2**40, "layers": 2**20, "topk": 64, "experts": 128}
    sizes = resolve_padding(VLM_MOE.plan, 2**40, dims=dims)
    assert sizes.fields["routed_experts"].shape == (2**40 + 1, 2**20, 64)
    itemsize = VLM_MOE.fields["routed_experts"].dtypes[0].itemsize  # its first dtype, with no like=
    assert sizes.fields["routed_experts"].bytes == (2**40 + 1) * 2**26 * itemsize
    assert sizes.batch_bytes > 2**100


def test_resolving_refuses_what_padding_refuses_for_sizes():
    with pytest.raises(PaddingSizeError) as info:
        resolve_padding(MOE.plan, 2)
    assert (info.value.dim, info.value.field, info.value.schema_name) == ("layers", None, "moe_routed")
    assert info.value.problem == "schema 'moe_routed' has no padding size for dim 'layers' (used by routed_experts)"
    assert str(info.value) == info.value.problem + "; pass like=<a real sample of the batch> or dims={'layers': <size>}"
    copying = _one_field_schema({"shape": ["n"], "dtype": "int64", "pad": "copy"})
    with pytest.raises(PaddingSizeError) as info:
        copying.padding(1, eos_token_id=2)
    assert (info.value.dim, info.value.field) == (None, "t")
    assert str(info.value) == "field 't' pads by copying the reference sample; pass like=<a real sample>"
    with pytest.raises(ValueError, match=r"^count must be an int"):
        resolve_padding(TEXT.plan, -1)


@pytest.mark.parametrize(
    ("dims", "missing", "users"),
    [
        ({"r": 1, "k": 1, "experts": 2}, "p", "x, y"),  # x through seq = p + r, y directly
        ({"p": 1, "k": 1, "experts": 2}, "r", "x"),  # only through the derived seq
        ({"p": 1, "r": 1, "k": 1}, "experts", "y"),  # through the derived dim y spreads over
    ],
)
def test_a_missing_padding_size_names_the_fields_that_need_it_through_derived_dims(dims, missing, users):
    # It said "(used by tags)" for a dim a field needs only through a derived dim.
    free = {"min": 0}
    schema = ts.schema_from_dict(
        {
            "name": "derived_users",
            "dims": {"p": free, "r": free, "seq": "p + r", "k": free, "experts": free, "e2": "experts * 2"},
            "fields": {
                "x": {"shape": ["seq"], "dtype": "int64", "pad": 0},
                "y": {"shape": ["p", "k"], "dtype": "int64", "pad": {"spread": "e2"}},
            },
        }
    )
    with pytest.raises(PaddingSizeError) as info:
        schema.padding(1, eos_token_id=0, dims=dims)
    assert info.value.problem == f"schema 'derived_users' has no padding size for dim {missing!r} (used by {users})"


def test_the_memory_error_carries_its_numbers_and_survives_pickling(monkeypatch):
    import pickle

    from trajschema.padding import samples as _padding

    monkeypatch.setattr(_padding, "_memory_limit", lambda: 2**30)
    with pytest.raises(PaddingMemoryError) as info:
        TEXT.padding(10**6, eos_token_id=2)
    exc = info.value
    sizes = resolve_padding(TEXT.plan, 10**6)
    assert isinstance(exc, ValueError) and not isinstance(exc, ts.SchemaError)
    assert (exc.needed, exc.per_sample, exc.limit, exc.machine) == (sizes.batch_bytes, sizes.sample_bytes, 2**30, True)
    assert exc.count == 10**6 and exc.schema_name == "text" and exc.dims == {"prompt": 127, "response": 1}
    by_field = {n: (s.bytes + s.objects) * 10**6 for n, s in sizes.fields.items()}
    assert exc.largest == tuple(sorted(by_field.items(), key=lambda kv: -kv[1])[:3])
    assert exc.largest[0][0] in ("input_ids", "position_ids")  # 128 int64 tokens each
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is PaddingMemoryError and str(again) == str(exc) and again.largest == exc.largest


def test_a_limit_below_the_machines_memory_is_named_as_a_limit(monkeypatch):
    from trajschema.padding import samples as _padding

    monkeypatch.setattr(_padding, "_memory_limit", lambda: 2**40)
    sizes = resolve_padding(TEXT.plan, 1000)
    sizes.check_memory(sizes.batch_bytes)  # exactly at the limit: allowed
    below = re.escape(f"above {format_bytes(sizes.batch_bytes - 1)}; lower count")
    with pytest.raises(PaddingMemoryError, match=below) as info:
        sizes.check_memory(sizes.batch_bytes - 1)
    assert (info.value.limit, info.value.machine) == (sizes.batch_bytes - 1, False)
    monkeypatch.setattr(_padding, "_memory_limit", lambda: 2**20)  # a limit above the machine's: the machine's
    with pytest.raises(PaddingMemoryError, match=r"more than this machine has \(1\.0 MiB\)") as info:
        sizes.check_memory(2**30)
    assert (info.value.limit, info.value.machine) == (2**20, True)
    for bad in (0, -1, 2.5, True, "1"):
        with pytest.raises(ValueError, match=r"^limit must be an int in 1"):
            sizes.check_memory(bad)


def test_padding_is_refused_exactly_past_the_machines_memory(monkeypatch):
    from trajschema.padding import samples as _padding

    total = resolve_padding(TEXT.plan, 3).batch_bytes
    monkeypatch.setattr(_padding, "_memory_limit", lambda: total)
    assert len(TEXT.padding(3, eos_token_id=2)) == 3
    monkeypatch.setattr(_padding, "_memory_limit", lambda: total - 1)
    built = []
    monkeypatch.setattr(torch, "full", lambda *a, **k: built.append(a))
    with pytest.raises(
        PaddingMemoryError, match=r"^count=3: 3 padding samples of schema 'text' \(prompt=127, response=1\)"
    ):
        TEXT.padding(3, eos_token_id=2)
    assert built == []  # refused before any column was built


def _traced_per_row(build, rows: int) -> float:
    import tracemalloc

    build(1)  # warm caches
    tracemalloc.start()
    try:
        pad = build(rows)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(pad) == rows
    return held / rows  # torch's tensor storage is not traced: this is the Python objects alone


@pytest.mark.parametrize("name", ["text", "vlm_mrope_moe"])
def test_the_row_allowance_covers_what_a_padding_row_holds_besides_tensors(name):
    schema = ts.load_schema(name)
    like = verl_sample(schema, 1, 1, layers=2, topk=2)
    like["reward_extra"] = {"acc": list(range(100))}  # deep-copied into every row
    like["data_source"] = "gsm8k"
    per_row = _traced_per_row(lambda n: schema.padding(n, eos_token_id=2, like=like, dims={"prompt": 1}), 5000)
    overhead = resolve_padding(schema.plan, 5000, like=like, dims={"prompt": 1}).row_overhead
    assert per_row < overhead < 4 * per_row  # an upper bound, and not a wild one


def test_a_copied_value_counts_what_its_deep_copies_hold_at_any_depth():
    """Tensors deeper than 16 levels counted as nothing, so padding 1000 copies of one could exhaust memory."""
    from trajschema.padding import samples as _padding

    pixels = torch.zeros(2**20)  # 4 MiB
    deep: object = pixels
    for _ in range(40):
        deep = {"x": [deep]}
    assert _padding._held_bytes(deep)[0] == 4 * 2**20
    cycle: list = [pixels, pixels, (pixels,)]
    cycle.append(cycle)  # a cycle ends, and the tensor reached three times counts once, as deepcopy keeps it once
    assert _padding._held_bytes(cycle)[0] == 4 * 2**20
    nested = torch.nested.nested_tensor([torch.zeros(3), torch.zeros(5)])
    ids = list(range(10**5))  # a deep copy duplicates the list's 800 KB of pointers (not the ints)
    tensors, objects = _padding._held_bytes({"n": nested, "ids": ids, "m": torch.zeros(9, device="meta")})
    assert tensors == 8 * 4 and objects >= 8 * 10**5
    assert _padding._held_bytes([np.zeros(1000), bytearray(10)])[0] == 8000
    like = {**verl_sample(TEXT, 3, 2), "deep": deep}
    sizes = resolve_padding(TEXT.plan, 1000, like=like)
    assert sizes.fields["deep"].bytes == 4 * 2**20 and sizes.sample_bytes > 4 * 2**20


def test_a_copied_list_of_ids_is_counted_for_its_copies(monkeypatch):
    """Counted as no tensors, 1000 deep copies of it (1.6 GB of pointers) were built until memory ran out."""
    from trajschema.padding import samples as _padding

    monkeypatch.setattr(_padding, "_memory_limit", lambda: 2**28)
    like = {**verl_sample(TEXT, 3, 2), "ids": list(range(2 * 10**5))}
    with pytest.raises(PaddingMemoryError, match=r"most in ids ") as info:
        TEXT.padding(1000, eos_token_id=2, like=like)
    assert info.value.largest[0][0] == "ids" and info.value.needed > 1.6 * 10**9
    pad = TEXT.padding(10, eos_token_id=2, like=like)  # 16 MB of copies: fine
    assert pad.fields[9]["ids"] == like["ids"] and pad.fields[9]["ids"] is not like["ids"]


def test_a_list_value_is_one_value_per_row_as_transferqueue_returns_it():
    """A ragged list crashed padding inside tensordict (NonTensorStack.from_list stacks a list's items)."""
    from tensordict import TensorDict

    like = {**verl_sample(TEXT, 3, 2), "ids": [1, 2, [3, 4]], "state": TensorDict({"a": torch.zeros(2)}, [])}
    pad = TEXT.padding(2, eos_token_id=2, like=like)
    assert pad.fields[1]["ids"] == [1, 2, [3, 4]] and pad.samples[1]["ids"] == [1, 2, [3, 4]]
    column, read_back = pad.fields.get("ids"), tq_batch([{"ids": [1, 2, [3, 4]]}] * 2).get("ids")
    assert type(column) is type(read_back) and type(column.tensordicts[0]) is type(read_back.tensordicts[0])
    assert torch.equal(pad.fields[1]["state"]["a"], torch.zeros(2))
    TEXT.validate_batch(pad.fields, tags=pad.tags)


def test_a_reference_tensor_that_needs_grad_gives_padding_that_pickles():
    import pickle

    like = {**verl_sample(TEXT, 4, 2), "extra": torch.ones(5, requires_grad=True) * 2}  # a non-leaf
    pad = TEXT.padding(2, eos_token_id=2, like=like)
    assert not pad.fields["extra"].requires_grad  # tied to the reference's graph, torch refused to pickle it
    assert torch.equal(pickle.loads(pickle.dumps(pad.fields))["extra"], torch.full((2, 5), 2.0))


# --- padding rows never alias: writing into one row changes no other (issue 15)


def _aliasing_like(schema: ts.Schema) -> dict:
    like = verl_sample(schema, 4, 3, layers=2, topk=2, teacher_topk=2)
    like["reward_extra"] = {"acc": [1.0]}  # an undeclared mutable value, deep-copied per row
    like["data_source"] = "gsm8k"  # an undeclared immutable one, shared
    like["extra_ids"] = torch.arange(5)  # an undeclared tensor, copied into a column
    return like


def _picture(pad: ts.PaddingBatch) -> list:
    """Every row in every layout padding returns, as plain values (tensors cloned, the rest deep-copied)."""
    import copy

    def plain(v):
        if isinstance(v, torch.Tensor):
            return ("tensor", v.dtype, tuple(v.shape), v.clone().tolist())
        return ("value", copy.deepcopy(v))

    rows = []
    for i in range(len(pad)):
        row = pad.fields[i]
        rows.append(
            (
                pad.keys[i],
                copy.deepcopy(pad.tags[i]),
                {k: plain(row[k]) for k in row.keys()},
                {k: plain(v) for k, v in pad.samples[i].items()},
            )
        )
    return rows


def _new_row(pad: ts.PaddingBatch, i: int):
    """A replacement for row ``i`` that differs from it in every field."""
    from tensordict import TensorDict

    row = {}
    for k in pad.fields.keys():
        v = pad.fields[i][k]
        row[k] = v + 1 if isinstance(v, torch.Tensor) else _nontensor(f"changed-{k}")
    return TensorDict(row, batch_size=[])


def _nontensor(value):
    from tensordict import NonTensorData

    return NonTensorData(data=value)


def _tensor_keys(pad):
    return [k for k in pad.fields.keys() if isinstance(pad.fields.get(k), torch.Tensor)]


def _nontensor_keys(pad):
    return [k for k in pad.fields.keys() if not isinstance(pad.fields.get(k), torch.Tensor)]


#: Ways to write into row ``i`` of a padding batch ``p``, each through one access path.
ROW_WRITES = {
    "td[i] = row": lambda p, i: p.fields.__setitem__(i, _new_row(p, i)),
    "td[i:i+1] = rows": lambda p, i: p.fields.__setitem__(slice(i, i + 1), _new_row(p, i).unsqueeze(0)),
    "td.update_at_(row, i)": lambda p, i: p.fields.update_at_(_new_row(p, i), i),
    "td.set_at_(every non-tensor)": lambda p, i: [p.fields.set_at_(k, "changed", i) for k in _nontensor_keys(p)],
    "td[i].set_(uid)": lambda p, i: p.fields[i].set_("uid", "changed"),
    "td[i].update_(uid)": lambda p, i: p.fields[i].update_({"uid": "changed"}),
    "stack[i] = NonTensorData": lambda p, i: p.fields.get("uid").__setitem__(i, _nontensor("changed")),
    "stack member .data = (every column)": lambda p, i: [
        setattr(p.fields.get(k).tensordicts[i], "data", "changed") for k in _nontensor_keys(p)
    ],
    "td[i][tensor].fill_": lambda p, i: p.fields[i][_tensor_keys(p)[0]].fill_(7),
    "td[tensor][i].add_": lambda p, i: p.fields[_tensor_keys(p)[0]][i].add_(1),
    "td[i].apply_(fill_)": lambda p, i: p.fields[i].apply_(lambda t: t.fill_(3)),
    "td[i].zero_()": lambda p, i: p.fields[i].zero_(),
    "samples[i][tensor].set_": lambda p, i: p.samples[i]["input_ids"].set_(torch.zeros(1, dtype=torch.int64)),
    "samples[i][tensor].fill_ (every tensor)": lambda p, i: [
        v.fill_(1) for v in p.samples[i].values() if isinstance(v, torch.Tensor)
    ],
    "samples[i][tensor][...] =": lambda p, i: p.samples[i]["input_ids"].__setitem__(..., 5),
    "samples[i][key] = (every key)": lambda p, i: p.samples[i].update(dict.fromkeys(p.samples[i], "changed")),
    "samples[i] mutable value, in place": lambda p, i: p.samples[i]["reward_extra"]["acc"].append(9.0),
    "td[i] mutable value, in place": lambda p, i: p.fields[i]["reward_extra"]["acc"].append(9.0),
    "tags[i][key] =": lambda p, i: p.tags[i].update(is_padding=False, seq_len=0),
}


def _others(rows: list, i: int) -> list:
    return [r for j, r in enumerate(rows) if j != i]


@pytest.mark.parametrize("write", list(ROW_WRITES.values()), ids=list(ROW_WRITES))
@pytest.mark.parametrize("name", ["text", "vlm_mrope_moe"])
def test_writing_into_one_padding_row_changes_no_other_row(name, write):
    schema = ts.load_schema(name)
    pad = schema.padding(3, eos_token_id=2, like=_aliasing_like(schema))
    before = _picture(pad)
    write(pad, 1)
    after = _picture(pad)
    assert _others(after, 1) == _others(before, 1)
    assert after[1] != before[1]  # the write did land: this test can fail


@given(
    name=st.sampled_from(ts.schema_names()),
    count=st.integers(1, 5),
    data=st.data(),
    write=st.sampled_from(list(ROW_WRITES)),
    with_like=st.booleans(),
)
def test_any_write_into_any_row_leaves_the_others_as_they_were(name, count, data, write, with_like):
    """The reference: rows are independent, so after a write into row i every other row is as it was."""
    schema = ts.load_schema(name)
    like = _aliasing_like(schema) if with_like else None
    dims = None if with_like else {k: 2 for k in ("layers", "topk", "teacher_topk", "experts") if k in schema.dims}
    pad = schema.padding(count, eos_token_id=2, like=like, dims=dims)
    i = data.draw(st.integers(0, count - 1), label="row")
    if not with_like and "mutable value" in write:
        return  # without a reference there is no deep-copied value to change
    before = _picture(pad)
    ROW_WRITES[write](pad, i)
    assert _others(_picture(pad), i) == _others(before, i)


def test_the_empty_mapping_every_row_shares_refuses_changes_and_can_be_replaced():
    pad = VLM.padding(3, eos_token_id=2)
    for shared in (pad.samples[0]["multi_modal_inputs"], pad.fields[0]["multi_modal_inputs"]):
        with pytest.raises(TypeError, match="shared by all samples of a padding batch and is read-only; replace it"):
            shared["pixel_values"] = torch.zeros(1)
    pad.fields.set_at_("multi_modal_inputs", _nontensor({"pixel_values": 1}), 0)  # replacing a row's value is fine
    pad.fields.get("multi_modal_inputs")[1] = _nontensor({"image_grid_thw": 2})
    pad.samples[2]["multi_modal_inputs"] = {"x": 3}
    assert [pad.fields[i]["multi_modal_inputs"] for i in range(3)] == [{"pixel_values": 1}, {"image_grid_thw": 2}, {}]
    assert pad.samples[2]["multi_modal_inputs"] == {"x": 3}


def test_padding_read_back_as_transferqueue_returns_it_keeps_its_rows_apart():
    """The jagged (nested) layout padding travels in: rows written there stay apart too."""
    like = _aliasing_like(VLM_MOE)
    pad = VLM_MOE.padding(3, eos_token_id=2, like=like)
    batch = tq_batch(pad.samples)
    assert batch.get("input_ids").is_nested
    before = [batch[i].clone() for i in range(3)]
    batch.get("input_ids").unbind()[0].fill_(9)
    batch.set_at_("uid", "changed", 0)
    assert (batch.get("input_ids").unbind()[0] == 9).all() and batch[0]["uid"] == "changed"
    for i in (1, 2):
        assert torch.equal(batch.get("input_ids").unbind()[i], before[i]["input_ids"])
        assert batch[i]["uid"] == before[i]["uid"] == pad.uid
    assert (pad.samples[0]["input_ids"] == 2).all()  # and the padding itself is untouched


def test_rows_written_then_pickled_keep_their_own_values():
    import pickle

    pad = TEXT.padding(3, eos_token_id=2)
    pad.fields.set_at_("uid", "changed", 0)
    back = pickle.loads(pickle.dumps(pad.fields))
    assert back.get("uid").tolist() == ["changed", pad.uid, pad.uid]
    back.set_at_("uid", "again", 1)
    assert back.get("uid").tolist() == ["changed", "again", pad.uid]


# --- non-tensor rows built by copying a template NonTensorData (issue 15's padding cost)


@pytest.mark.parametrize("value", ["uid", 3, 2.5, True, None, {}, [1, 2], {"a": [1]}], ids=repr)
def test_fast_nontensor_rows_are_what_the_constructor_builds_and_share_nothing(value):
    from tensordict import NonTensorData

    from trajschema.padding import samples as padding_samples

    rows = padding_samples._nontensor_rows([value, value, value])
    assert rows is not None
    public = NonTensorData(data=value)
    for row in rows:
        assert type(row) is NonTensorData and row.data is value
        assert set(vars(row)) == set(vars(public)) and vars(row)["_is_initialized"] == vars(public)["_is_initialized"]
        inner, public_inner = vars(row)["_tensordict"], vars(public)["_tensordict"]
        assert type(inner) is type(public_inner) and vars(inner) == vars(public_inner)
        assert row.batch_size == public.batch_size and row.device == public.device
    a, b = vars(rows[0]), vars(rows[1])
    assert a["_tensordict"] is not b["_tensordict"] and a["_non_tensordict"] is not b["_non_tensordict"]
    assert vars(a["_tensordict"])["_tensordict"] is not vars(b["_tensordict"])["_tensordict"]


def test_a_value_type_or_layout_it_does_not_know_takes_the_public_path(monkeypatch):
    from trajschema.padding import samples as padding_samples

    assert padding_samples._nontensor_rows([b"bytes"]) is None  # not a value NonTensorData keeps as is
    assert padding_samples._nontensor_rows([(1, 2)]) is None
    monkeypatch.setattr(padding_samples, "_NTD_ATTRS", frozenset({"_tensordict"}))  # another tensordict's layout
    assert padding_samples._nontensor_rows(["uid"]) is None
    pad = VLM_MOE.padding(3, eos_token_id=2, like=_aliasing_like(VLM_MOE))  # built the public way: the same rows
    before = _picture(pad)
    pad.fields.set_at_("uid", "changed", 1)
    assert _others(_picture(pad), 1) == _others(before, 1)
