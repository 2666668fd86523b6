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


# --- every argument is checked first, by name, before anything is built (issue 14)


def _on(device: str, sample: dict) -> dict:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in sample.items()}


_REAL = verl_sample(TEXT, 3, 2)
_HUGE = 2**40  # padding of this many samples, or tokens, needs terabytes: refused, never allocated

#: id -> (call, exception type (exactly), a regex the message must match: it names the argument).
PADDING_ARGUMENT_ATTACKS = {
    "count-bool": (lambda: TEXT.padding(True, eos_token_id=2), ValueError, r"^count must be an int .*found True"),
    "count-nan": (lambda: TEXT.padding(float("nan"), eos_token_id=2), ValueError, r"^count must be .*found nan"),
    "count-none": (lambda: TEXT.padding(None, eos_token_id=2), ValueError, r"^count must be .*found None"),
    "count-tensor": (lambda: TEXT.padding(torch.tensor(2), eos_token_id=2), ValueError, r"^count must be"),
    "count-above-int64": (lambda: TEXT.padding(2**63, eos_token_id=2), ValueError, r"^count must be an int in 0\.\."),
    "count-terabytes": (lambda: TEXT.padding(_HUGE, eos_token_id=2), ValueError, r"^count=1099511627776: .*memory"),
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
        ValueError,
        r"^count=1: 1 padding sample of schema 'text' \(prompt=1099511627776, .*dims=",
    ),
    "dims-past-torch-sizes": (  # count * axis overflowed torch's int64 storage size before
        lambda: TEXT.padding(1, eos_token_id=2, dims={"response": 2**62}),
        ValueError,
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
    ("call", "exc", "match"), list(PADDING_ARGUMENT_ATTACKS.values()), ids=list(PADDING_ARGUMENT_ATTACKS)
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


#: Values a hostile or careless caller passes where an int belongs. Valid ints stay small or
#: huge (refused for memory) so that no example builds gigabytes.
_HOSTILE_INTS = st.one_of(
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


@settings(max_examples=150, deadline=None)
@given(arg=st.sampled_from(["count", "eos_token_id", "dims"]), value=_HOSTILE_INTS)
def test_hostile_ints_raise_only_value_errors_naming_their_argument(arg, value):
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
    assert type(info.value) is ValueError
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


@settings(max_examples=40, deadline=None)
@given(request=padding_requests(), with_like=st.booleans(), extra=st.sampled_from([0, 1, 13]))
def test_the_memory_estimate_is_the_padding_tensors_bytes(request, with_like, extra):
    """What padding refuses by is exact: the bytes of the tensor columns it would build, plus a per-row allowance."""
    from trajschema.padding import samples as _padding

    schema, dims, include, count, _ = request
    count = max(count, 1)
    like = None
    if with_like:
        like = verl_sample(schema, 5, 3, layers=dims.get("layers", 2), topk=dims.get("topk", 2))
        like["undeclared"] = torch.zeros(11, extra)  # copied into every sample (no axis follows a dim)
        include = None
    pad = schema.padding(count, eos_token_id=2, like=like, dims=dims, include=include)
    emitted = [schema.fields[k] for k in pad._columns if k in schema.fields]
    per_sample = _padding._sample_bytes(schema._compiled(), emitted, pad.dims, like)
    assert per_sample * count == _tensor_bytes(pad)


def test_padding_is_refused_exactly_past_the_machines_memory(monkeypatch):
    from trajschema.padding import samples as _padding

    pad = TEXT.padding(3, eos_token_id=2)
    total = _tensor_bytes(pad) + 3 * _padding._ROW_OVERHEAD
    monkeypatch.setattr(_padding, "_memory_limit", lambda: total)
    assert len(TEXT.padding(3, eos_token_id=2)) == 3
    monkeypatch.setattr(_padding, "_memory_limit", lambda: total - 1)
    with pytest.raises(
        ValueError, match=r"^count=3: 3 padding samples of schema 'text' \(prompt=127, response=1, seq=128\)"
    ):
        TEXT.padding(3, eos_token_id=2)


def test_the_row_allowance_covers_what_a_padding_row_holds_besides_tensors():
    import tracemalloc

    from trajschema.padding import samples as _padding

    TEXT.padding(1, eos_token_id=2)  # warm caches
    tracemalloc.start()
    try:
        pad = TEXT.padding(20_000, eos_token_id=2, dims={"prompt": 1, "response": 1})
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(pad) == 20_000
    assert held / 20_000 < _padding._ROW_OVERHEAD
