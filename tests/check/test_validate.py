"""One-sample validation: the bugs the schemas exist to catch, and the report's shape."""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import re

import cloudpickle
import pytest
import torch

import trajschema as ts
from tests.loading_support import routes_schema as _moe
from trajschema.testing import verl_sample

TEXT = ts.load_schema("text")
VLM = ts.load_schema("vlm_mrope")
MOE = ts.load_schema("moe_routed")
VLM_MOE = ts.load_schema("vlm_mrope_moe")


def codes(violations):
    return sorted((v.field, v.code) for v in violations)


def test_every_packaged_schema_accepts_a_realistic_sample(schema):
    sample = verl_sample(schema, 37, 11)
    dims = schema.validate(sample)
    assert dims["prompt"] == 37
    assert dims["response"] == 11
    assert dims["seq"] == 48
    assert schema.violations(sample) == []


def test_validate_returns_free_fixed_and_derived_dims():
    sample = verl_sample(VLM_MOE, 5, 3, layers=48, topk=8)
    assert VLM_MOE.validate(sample) == {
        "prompt": 5,
        "response": 3,
        "seq": 8,
        "layers": 48,
        "topk": 8,
        "rope_rows": 4,
    }


def test_a_tensordict_row_is_a_sample():
    from trajschema.testing import tq_batch

    batch = tq_batch([verl_sample(TEXT, 4, 2), verl_sample(TEXT, 6, 3)])
    assert TEXT.validate(batch[1])["seq"] == 9


# --- the real-world bugs named in the issue, each caught with the right field and code


def test_response_mask_of_the_wrong_length():
    sample = verl_sample(TEXT, 10, 6)
    sample["response_mask"] = torch.ones(16, dtype=torch.int64)  # sized like input_ids
    assert codes(TEXT.violations(sample)) == [("response_mask", "dim_mismatch")]


def test_three_rope_rows_where_four_are_declared():
    sample = verl_sample(VLM, 10, 6)
    sample["position_ids"] = sample["position_ids"][1:]
    (v,) = VLM.violations(sample)
    assert (v.field, v.code) == ("position_ids", "shape")
    assert v.expected == "(rope_rows=4, seq=16)"
    assert v.actual == "(3, 16)"


def test_routed_experts_one_row_short():
    sample = verl_sample(MOE, 41, 1, layers=4, topk=2)
    sample["routed_experts"] = sample["routed_experts"][:-1]
    (v,) = MOE.violations(sample)
    assert (v.field, v.code) == ("routed_experts", "dim_mismatch")
    assert v.message == "shape (41, 4, 2) does not match (seq=42, layers=4, topk=2)"


def test_all_violations_are_reported_together():
    sample = verl_sample(VLM_MOE, 10, 6)
    sample["response_mask"] = torch.ones(7, dtype=torch.int64)
    sample["position_ids"] = sample["position_ids"][:3]
    sample["routed_experts"] = sample["routed_experts"][:-1]
    sample["loss_mask"][0] = 2
    del sample["uid"]
    with pytest.raises(ts.SchemaError) as info:
        VLM_MOE.validate(sample)
    assert codes(info.value.violations) == [
        ("loss_mask", "value"),
        ("position_ids", "shape"),
        ("response_mask", "dim_mismatch"),
        ("routed_experts", "dim_mismatch"),
        ("uid", "missing"),
    ]
    assert info.value.bindings[None]["seq"] == 16


def test_sizes_that_agree_but_break_an_expression():
    sample = verl_sample(TEXT, 5, 3)
    for key in ("input_ids", "position_ids", "attention_mask"):
        sample[key] = torch.cat([sample[key], sample[key][-1:]])  # all say seq = 9
    (v,) = TEXT.violations(sample)
    assert (v.field, v.code) == ("input_ids", "dim_mismatch")
    assert "prompt + response = 8" in v.message
    assert v.actual == "9"


@pytest.mark.parametrize(
    ("odd_one", "others"),
    [
        pytest.param("input_ids", ("position_ids", "attention_mask"), id="majority-blames-input_ids"),
        pytest.param("attention_mask", ("input_ids", "position_ids"), id="majority-blames-attention_mask"),
    ],
)
def test_the_odd_field_out_is_blamed(odd_one, others):
    sample = verl_sample(TEXT, 5, 3)
    sample[odd_one] = torch.cat([sample[odd_one], sample[odd_one][-1:]])
    assert codes(TEXT.violations(sample)) == [(odd_one, "dim_mismatch")]


def test_a_tie_is_broken_by_the_derived_size():
    # input_ids says 9, position_ids says 8; prompt + response = 8 sides with position_ids.
    sample = verl_sample(TEXT, 5, 3, optional=False)
    sample["input_ids"] = torch.cat([sample["input_ids"], sample["input_ids"][-1:]])
    assert codes(TEXT.violations(sample)) == [("input_ids", "dim_mismatch")]


# --- presence, kinds, dtypes, ranks


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(lambda s: s.pop("prompts"), [("prompts", "missing")], id="missing-tensor"),
        pytest.param(lambda s: s.pop("num_turns"), [("num_turns", "missing")], id="missing-int"),
        pytest.param(lambda s: s.update(uid=None), [("uid", "missing")], id="required-none"),
        pytest.param(lambda s: s.update(uid=7), [("uid", "kind")], id="uid-int"),
        pytest.param(lambda s: s.update(num_turns=True), [("num_turns", "kind")], id="bool-is-not-int"),
        pytest.param(lambda s: s.update(num_turns=1.0), [("num_turns", "kind")], id="float-is-not-int"),
        pytest.param(
            lambda s: s.update(input_ids=s["input_ids"].tolist()), [("input_ids", "kind")], id="list-not-tensor"
        ),
        pytest.param(lambda s: s.update(input_ids=s["input_ids"].int()), [("input_ids", "dtype")], id="int32-ids"),
        pytest.param(lambda s: s.update(loss_mask=s["loss_mask"].bool()), [("loss_mask", "dtype")], id="bool-mask"),
        pytest.param(lambda s: s.update(input_ids=s["input_ids"][None]), [("input_ids", "rank")], id="batched-ids"),
        pytest.param(lambda s: s.update(multi_modal_inputs=[]), [("multi_modal_inputs", "kind")], id="mm-list"),
        pytest.param(
            lambda s: s.update(rollout_log_probs=s["rollout_log_probs"].double()),
            [("rollout_log_probs", "dtype")],
            id="float64-logprobs",
        ),
    ],
)
def test_presence_kind_dtype_rank(mutate, expected):
    sample = verl_sample(TEXT, 6, 4)
    mutate(sample)
    assert codes(TEXT.violations(sample)) == expected
    with pytest.raises(ts.SchemaError):
        TEXT.validate(sample)


def test_optional_fields_may_be_absent_or_none():
    sample = verl_sample(TEXT, 6, 4, optional=False)
    assert TEXT.violations(sample) == []
    sample["rollout_log_probs"] = None
    assert TEXT.violations(sample) == []


def test_scalar_fields_accept_zero_dim_tensors():
    # A dense (B,) column of a batch yields 0-d tensors per row.
    sample = verl_sample(TEXT, 6, 4)
    sample["num_turns"] = torch.tensor(2)
    assert TEXT.violations(sample) == []
    sample["num_turns"] = torch.tensor(-1)
    assert codes(TEXT.violations(sample)) == [("num_turns", "value")]


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.int64])
def test_routed_experts_accept_old_and_new_dtypes(dtype):
    sample = verl_sample(MOE, 6, 4)
    sample["routed_experts"] = sample["routed_experts"].to(dtype)
    assert MOE.violations(sample) == []


def test_dtype_message_names_the_allowed_dtypes():
    sample = verl_sample(MOE, 6, 4)
    sample["routed_experts"] = sample["routed_experts"].float()
    (v,) = MOE.violations(sample)
    assert v.message == "dtype float32 is not int16 or int32 or int64 or uint8 or uint16"


# --- dims: pinned, ranges


def test_pinned_dims():
    sample = verl_sample(MOE, 6, 4, layers=4, topk=2)
    assert MOE.validate(sample, dims={"layers": 4})["layers"] == 4
    assert codes(MOE.violations(sample, dims={"layers": 48})) == [("routed_experts", "dim_mismatch")]
    # A pinned seq blames every field with a seq axis and the broken expression (on input_ids).
    assert codes(MOE.violations(sample, dims={"seq": 11})) == sorted(
        [
            ("input_ids", "dim_mismatch"),
            ("position_ids", "dim_mismatch"),
            ("routed_experts", "dim_mismatch"),
            ("attention_mask", "dim_mismatch"),
            ("input_ids", "dim_mismatch"),
        ]
    )


def test_empty_prompt_breaks_the_dims_minimum():
    sample = verl_sample(TEXT, 1, 4)
    for key in ("prompts",):
        sample[key] = sample[key][:0]
    for key in ("input_ids", "position_ids", "attention_mask"):
        sample[key] = sample[key][1:]
    (v,) = TEXT.violations(sample)
    assert (v.field, v.code) == ("prompts", "dim_range")
    assert v.message == "dim prompt=0 is not >= 1"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param({"dims": {"layer": 4}}, "has no dim 'layer'", id="unknown-dim"),
        pytest.param({"dims": {"layers": -1}}, r"an int in 0\.\.2\*\*63-1", id="negative-dim"),
        pytest.param({"dims": {"layers": "4"}}, r"an int in 0\.\.2\*\*63-1", id="str-dim"),
        pytest.param({"depth": "deep"}, "depth must be", id="bad-depth"),
    ],
)
def test_bad_arguments_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MOE.validate(verl_sample(MOE, 3, 2), **kwargs)


def test_a_non_mapping_sample_is_a_type_error():
    with pytest.raises(TypeError, match="mapping"):
        TEXT.validate([1, 2, 3])


# --- tags


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        pytest.param({"is_padding": False, "prompt_len": 6, "response_len": 4, "seq_len": 10}, [], id="good"),
        pytest.param({"status": "finished", "min_global_steps": 3}, [], id="undeclared-keys-allowed"),
        pytest.param({}, [], id="empty"),
        pytest.param({"seq_len": 11}, [("seq_len", "tag")], id="wrong-seq_len"),
        pytest.param({"prompt_len": 6.0}, [("prompt_len", "tag")], id="float-length"),
        pytest.param({"is_padding": 1}, [("is_padding", "tag")], id="int-is_padding"),
        pytest.param({"is_padding": "false"}, [("is_padding", "tag")], id="str-is_padding"),
        pytest.param({"is_padding": torch.tensor(True)}, [("is_padding", "tag")], id="tensor-is_padding"),
        pytest.param({"seq_len": torch.tensor([10, 10])}, [("seq_len", "tag")], id="tensor-seq_len"),
        pytest.param(["is_padding"], [("<tag>", "tag")], id="not-a-mapping"),
    ],
)
def test_tags(tag, expected):
    sample = verl_sample(TEXT, 6, 4)
    assert codes(TEXT.violations(sample, tag=tag)) == expected
    if expected:
        with pytest.raises(ts.SchemaError):
            TEXT.validate(sample, tag=tag)
    else:
        TEXT.validate(sample, tag=tag)


# --- values


@pytest.mark.parametrize(
    ("field", "bad_value", "expected"),
    [
        pytest.param("loss_mask", 2, "in {0, 1}", id="mask-2"),
        pytest.param("response_mask", -1, "in {0, 1}", id="mask-negative"),
        pytest.param("rollout_log_probs", math.nan, "finite", id="logprob-nan"),
        pytest.param("rollout_log_probs", math.inf, "finite", id="logprob-inf"),
        pytest.param("rm_scores", -math.inf, "finite", id="score-inf"),
    ],
)
def test_value_checks(field, bad_value, expected):
    sample = verl_sample(TEXT, 6, 4)
    sample[field][2] = bad_value
    (v,) = TEXT.violations(sample)
    assert (v.field, v.code, v.expected) == (field, "value", expected)
    assert "first at [2]" in v.actual
    assert TEXT.violations(sample, depth="shapes") == []


def test_routed_expert_ids_must_be_non_negative():
    sample = verl_sample(MOE, 6, 4)
    sample["routed_experts"][3, 1, 0] = -1
    (v,) = MOE.violations(sample)
    assert (v.field, v.code) == ("routed_experts", "value")
    assert "first at [3,1,0]: -1" in v.actual


def test_shapes_depth_reads_no_tensor_values():
    # Meta tensors have shapes and dtypes but no data: reading a value would raise.
    sample = verl_sample(VLM_MOE, 6, 4)
    meta = {k: (v.to("meta") if isinstance(v, torch.Tensor) else v) for k, v in sample.items()}
    assert VLM_MOE.validate(meta, depth="shapes")["seq"] == 10
    meta["routed_experts"] = meta["routed_experts"][:-1]
    assert codes(VLM_MOE.violations(meta, depth="shapes")) == [("routed_experts", "dim_mismatch")]


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        pytest.param(lambda: torch.empty(4, device="meta"), [], id="meta-has-no-values-to-check"),
        pytest.param(lambda: torch.zeros(4).to_sparse(), [("rollout_log_probs", "kind")], id="sparse-is-not-dense"),
    ],
)
def test_tensors_without_readable_values(make, expected):
    sample = verl_sample(TEXT, 6, 4)
    sample["rollout_log_probs"] = make()
    assert codes(TEXT.violations(sample, depth="values")) == expected


def test_extra_fields_allowed_by_default_and_forbidden_on_request():
    sample = verl_sample(TEXT, 6, 4)
    sample["data_source"] = "gsm8k"
    assert TEXT.violations(sample) == []
    strict = ts.schema_from_dict({"name": "strict_text", "extends": ["text"], "extra": "forbid"})
    assert codes(strict.violations(sample)) == [("data_source", "extra")]


def test_report_shows_shapes_never_contents():
    sample = verl_sample(MOE, 6, 4)
    # distinct ids that break nothing but the shape: no value of the tensor is reported
    sample["routed_experts"] = (torch.arange(9 * 4 * 2, dtype=torch.int16) + 31337).view(9, 4, 2)
    with pytest.raises(ts.SchemaError) as info:
        MOE.validate(sample)
    text = str(info.value)
    assert [v.code for v in info.value.violations] == ["dim_mismatch"]
    assert not any(str(31337 + i) in text for i in range(9 * 4 * 2))
    assert "routed_experts" in text
    assert "(9, 4, 2)" in text
    assert "seq=10" in text


# --- nothing leaks from inside: any mapping gets a list of violations, never a crash

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_DTYPES = [
    torch.int64,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
    torch.float32,
    torch.float64,
    torch.bfloat16,
    torch.complex64,
]


_ALL_FIELDS = sorted({f for n in ts.schema_names() for f in ts.load_schema(n).fields})


@st.composite
def _odd_values(draw):
    kind = draw(st.sampled_from(["tensor", "nested", "meta", "sparse", "scalar", "python", "none"]))
    if kind == "tensor":
        shape = draw(st.lists(st.integers(0, 5), max_size=4))
        dtype = draw(st.sampled_from(_DTYPES))
        return torch.zeros(shape, dtype=dtype)
    if kind == "nested":
        lengths = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
        return torch.nested.nested_tensor([torch.zeros(n) for n in lengths], layout=torch.jagged)
    if kind == "meta":
        shape = draw(st.lists(st.integers(1, 5), max_size=3))
        return torch.empty(shape, dtype=draw(st.sampled_from(_DTYPES[:-1])), device="meta")
    if kind == "sparse":
        return torch.ones(draw(st.integers(1, 5))).to_sparse()
    if kind == "scalar":
        return torch.tensor(draw(st.sampled_from([0, 1.5, True, -3])))
    if kind == "python":
        return draw(
            st.one_of(
                st.integers(),
                st.floats(allow_nan=True),
                st.text(max_size=3),
                st.booleans(),
                st.lists(st.integers(), max_size=3),
                st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
            )
        )
    return None


@settings(deadline=None)
@given(
    name=st.sampled_from(ts.schema_names()),
    overrides=st.dictionaries(
        st.sampled_from([*_ALL_FIELDS, "extra"]),
        _odd_values(),
        max_size=4,
    ),
    tag=st.one_of(
        st.none(),
        st.dictionaries(st.sampled_from(["is_padding", "seq_len", "prompt_len", "x"]), _odd_values(), max_size=3),
    ),
    depth=st.sampled_from(["shapes", "values"]),
)
def test_any_mapping_gets_violations_never_a_crash(name, overrides, tag, depth):
    schema = ts.load_schema(name)
    sample = {**verl_sample(schema, 4, 3), **overrides}
    found = schema.violations(sample, tag=tag, depth=depth)
    assert all(isinstance(v, ts.Violation) for v in found)
    if found:
        with pytest.raises(ts.SchemaError) as info:
            schema.validate(sample, tag=tag, depth=depth)
        assert info.value.violations == found
    else:
        schema.validate(sample, tag=tag, depth=depth)
    schema.batch_violations([sample, sample], tags=None if tag is None else [tag, tag], depth=depth)


@pytest.mark.parametrize(
    ("value", "ok"),
    [(3, True), (torch.tensor(3), True), (torch.tensor([3, 3]), False), (torch.tensor([]), False), ("3", False)],
)
def test_a_tag_with_equals_compares_any_value_without_raising(value, ok):
    schema = ts.schema_from_dict(
        {
            "name": "t",
            "dims": {"n": {}},
            "fields": {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}},
            "tags": {"n_len": {"kind": "any", "equals": "n"}},
        }
    )
    sample = {"x": torch.arange(3)}
    found = schema.violations(sample, tag={"n_len": value})
    assert (found == []) == ok
    assert [v.code for v in found] == ([] if ok else ["tag"])
    batch = schema.batch_violations([sample, sample], tags=[{"n_len": value}, {"n_len": 3}])
    assert [v.sample for v in batch] == ([] if ok else [0])


# --- arguments are checked first and by name (issue 14); tags and samples' contents are data

import copy  # noqa: E402
import pickle  # noqa: E402

import numpy as np  # noqa: E402

from trajschema.testing import tq_batch  # noqa: E402

_S = verl_sample(TEXT, 3, 2)


class _RaisingRepr:
    """A value whose repr raises: an error message naming it must not die of it."""

    def __repr__(self) -> str:
        raise RuntimeError("repr of a hostile value")


class _RaisingLen(list):
    def __len__(self) -> int:
        raise RuntimeError("len of a hostile value")


#: id -> (keyword arguments of validate/violations beside the sample, exception type, message regex).
BAD_SINGLE_SAMPLE_ARGUMENTS = {
    "depth-typo": ({"depth": "value"}, ValueError, r"^depth must be 'shapes' or 'values', found 'value'$"),
    "depth-none": ({"depth": None}, ValueError, r"^depth must be .*found None$"),
    "depth-list": ({"depth": ["values"]}, ValueError, r"^depth must be .*found \['values'\]$"),
    "depth-array": ({"depth": np.array(["values", "shapes"])}, ValueError, r"^depth must be .*found array"),
    "depth-raising-repr": (
        {"depth": _RaisingRepr()},
        ValueError,
        r"^depth must be .*found \S*_RaisingRepr$",
    ),
    "dims-list": ({"dims": [("prompt", 3)]}, ValueError, r"^dims= must be a mapping of dim name to size"),
    "dims-str": ({"dims": "prompt=3"}, ValueError, r"^dims= must be a mapping"),
    "dims-unknown": ({"dims": {"promt": 3}}, ValueError, r"^dims=\{'promt': \.\.\.\}: schema 'text' has no dim"),
    "dims-bool": ({"dims": {"prompt": True}}, ValueError, r"^dims\['prompt'\] must be an int .*found True$"),
    "dims-float": ({"dims": {"prompt": 3.0}}, ValueError, r"^dims\['prompt'\] must be an int .*found 3\.0$"),
    "dims-nan": ({"dims": {"prompt": float("nan")}}, ValueError, r"^dims\['prompt'\] must be an int"),
    "dims-above-int64": ({"dims": {"prompt": 2**63}}, ValueError, r"^dims\['prompt'\] must be an int in 0\.\.2"),
    "dims-tensor": ({"dims": {"prompt": torch.tensor(3)}}, ValueError, r"^dims\['prompt'\] must be an int"),
    "dims-raising-repr": (
        {"dims": {"prompt": _RaisingRepr()}},
        ValueError,
        r"^dims\['prompt'\] .*found \S*_RaisingRepr$",
    ),
}

#: id -> (sample, message regex): what is not one sample is a TypeError naming the sample.
NOT_A_SAMPLE = {
    "list": ([_S], r"^sample must be a mapping .*found list of 1$"),
    "none": (None, r"^sample must be a mapping .*found NoneType$"),
    "str": ("uid", r"^sample must be a mapping .*found str 'uid'$"),
    "tensor": (torch.zeros(3), r"^sample must be a mapping .*found f32\[3\]$"),
    "a-batch": (tq_batch([_S, _S]), r"^sample must be one sample, found a TensorDict with batch_size \[2\]"),
    "a-batch-of-one": (tq_batch([_S]), r"^sample must be one sample, found a TensorDict with batch_size \[1\]"),
}


@pytest.mark.parametrize("method", ["validate", "violations"])
@pytest.mark.parametrize(
    ("kwargs", "exc", "match"), list(BAD_SINGLE_SAMPLE_ARGUMENTS.values()), ids=list(BAD_SINGLE_SAMPLE_ARGUMENTS)
)
def test_bad_depth_and_dims_are_value_errors_naming_them(method, kwargs, exc, match):
    with pytest.raises(Exception) as info:
        getattr(TEXT, method)(_S, **kwargs)
    assert type(info.value) is exc
    assert re.search(match, str(info.value)), str(info.value)


@pytest.mark.parametrize("method", ["validate", "violations"])
@pytest.mark.parametrize(("sample", "match"), list(NOT_A_SAMPLE.values()), ids=list(NOT_A_SAMPLE))
def test_what_is_not_one_sample_is_a_type_error(method, sample, match):
    with pytest.raises(TypeError) as info:
        getattr(TEXT, method)(sample)
    assert re.search(match, str(info.value)), str(info.value)


@pytest.mark.parametrize(
    "tag",
    [
        pytest.param([1], id="list"),
        pytest.param("x", id="str"),
        pytest.param(3, id="int"),
        pytest.param(_RaisingLen(), id="raising-len"),
    ],
)
def test_a_tag_that_is_not_a_mapping_is_a_violation_not_an_error(tag):
    found = TEXT.violations(_S, tag=tag)
    assert [(v.field, v.code, v.expected) for v in found] == [("<tag>", "tag", "a mapping")]
    with pytest.raises(ts.SchemaError):
        TEXT.validate(_S, tag=tag)


def test_a_value_whose_len_raises_is_reported_not_raised():
    # Describing the value for the report called its __len__, whose error replaced the report.
    found = TEXT.violations({**_S, "prompts": _RaisingLen([1, 2, 3])})
    assert [(v.field, v.code) for v in found] == [("prompts", "kind")]
    assert found[0].actual.endswith("_RaisingLen")


_ARGUMENT_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=3),
    st.lists(st.text(max_size=6), max_size=2),
    st.sampled_from([np.array(["values", "shapes"]), np.str_("values"), torch.tensor(1), object(), _RaisingRepr()]),
)


@settings(deadline=None)
@given(depth=st.one_of(_ARGUMENT_VALUES, st.sampled_from(["shapes", "values"])), size=_ARGUMENT_VALUES)
def test_odd_depth_and_dims_raise_only_value_errors_naming_them(depth, size):
    """The reference: depth is one of two strs; a dim size an int (not bool) in 0..2**63-1 (prompt=3 here)."""
    depth_ok = isinstance(depth, str) and depth in ("shapes", "values")
    size_ok = isinstance(size, int) and not isinstance(size, bool) and 0 <= size < 2**63
    for method in (TEXT.violations, TEXT.batch_violations):
        arg = _S if method == TEXT.violations else [_S]
        if depth_ok and size_ok:
            found = method(arg, depth=depth, dims={"prompt": size})
            assert (found == []) == (size == 3)  # the sample's prompt has 3 tokens
            continue
        with pytest.raises(ValueError) as info:
            method(arg, depth=depth, dims={"prompt": size})
        assert type(info.value) is ValueError
        named = "depth must be" if not depth_ok else "dims['prompt'] must be"
        assert str(info.value).startswith(named), str(info.value)


# --- a schema is immutable and checks how it is built


def test_a_schemas_declarations_cannot_be_changed():
    schema = copy.deepcopy(TEXT)
    for attr in ("name", "fields", "dims", "extra", "padding_sizes"):
        with pytest.raises(AttributeError, match=rf"^schema 'text' is immutable: its {attr} cannot be reassigned"):
            setattr(schema, attr, getattr(schema, attr))
        with pytest.raises(AttributeError, match=rf"its {attr} cannot be deleted"):
            delattr(schema, attr)
    mutations = [
        lambda: schema.fields.pop("uid"),
        lambda: schema.fields.__setitem__("uid", None),
        lambda: schema.dims.clear(),
        lambda: schema.tags.update(x=1),
        lambda: schema.padding_sizes.__delitem__("prompt"),
        lambda: schema.padding_sizes.setdefault("response", 5),
    ]
    for mutate in mutations:
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    assert schema == TEXT and schema.validate(_S) == TEXT.validate(_S)
    schema.validate = lambda *a, **k: {}  # other attributes stay settable (tests wrap methods)


def test_a_schemas_declarations_copy_and_pickle_as_plain_dicts():
    used = copy.deepcopy(TEXT)
    used.validate(_S)
    for clone in (pickle.loads(pickle.dumps(used)), copy.deepcopy(used), copy.copy(used)):
        assert clone == TEXT and clone.validate(_S) == {"prompt": 3, "response": 2, "seq": 5}
        with pytest.raises(TypeError, match="read-only"):
            clone.fields.pop("uid")
    for part in (TEXT.fields, TEXT.dims, TEXT.tags, TEXT.padding_sizes):
        for clone in (pickle.loads(pickle.dumps(part)), copy.deepcopy(part), copy.copy(part), dict(part)):
            assert type(clone) is dict and clone == part
            clone["x"] = 1  # a copy is an ordinary dict


def _args(**changes):
    base = {
        k: getattr(TEXT, k)
        for k in (
            "name",
            "description",
            "architectures",
            "lineage",
            "dims",
            "fields",
            "tags",
            "padding_sizes",
            "extra",
            "source",
        )
    }
    return {**base, **changes}


_FIELD = TEXT.fields["prompts"]
_DIM = TEXT.dims["prompt"]

#: id -> (constructor arguments changed from the text schema's, exception type, message regex).
REFUSED_SCHEMA_PARTS = {
    "name-int": ({"name": 3}, TypeError, r"^Schema: name must be a str, found int 3$"),
    "source-none": ({"source": None}, TypeError, r"^Schema: source must be a str"),
    "architectures-str": ({"architectures": "Qwen2"}, TypeError, r"^Schema: architectures must be a sequence of str"),
    "lineage-ints": ({"lineage": ("text", 1)}, TypeError, r"^Schema: lineage\[1\] must be a str"),
    "extra-typo": ({"extra": "forbidden"}, ValueError, r"^Schema: extra must be 'allow' or 'forbid'"),
    "dims-list": ({"dims": [_DIM]}, TypeError, r"^Schema: dims must be a mapping of name to"),
    "dims-not-a-dim": (
        {"dims": {**TEXT.dims, "prompt": 3}},
        TypeError,
        r"^Schema: dims\['prompt'\] must be a FixedDim",
    ),
    "dims-misnamed": ({"dims": {**TEXT.dims, "p": _DIM}}, ValueError, r"^Schema: dims\['p'\] is named 'prompt'"),
    "fields-not-a-field": ({"fields": {"prompts": {}}}, TypeError, r"^Schema: fields\['prompts'\] must be a Field"),
    "fields-misnamed": ({"fields": {"x": _FIELD}}, ValueError, r"^Schema: fields\['x'\] is named 'prompts'"),
    "fields-int-key": ({"fields": {1: _FIELD}}, TypeError, r"^Schema: fields keys must be str"),
    "field-shape-of-strs": (
        {"fields": {"prompts": dataclasses.replace(_FIELD, shape=("prompt",))}},
        TypeError,
        r"^Schema: fields\['prompts'\]\.shape must be a tuple of Expr",
    ),
    "field-no-dtypes": (
        {"fields": {"prompts": dataclasses.replace(_FIELD, dtypes=())}},
        TypeError,
        r"\.dtypes must be a non-empty tuple of torch dtypes",
    ),
    "field-kind-typo": (
        {"fields": {"prompts": dataclasses.replace(_FIELD, kind="tensors")}},
        ValueError,
        r"\.kind must be 'tensor' or one of",
    ),
    "field-pad-rule-typo": (
        {"fields": {"prompts": dataclasses.replace(_FIELD, pad=ts.PadRule("eso"))}},
        ValueError,
        r"\.pad must be a PadRule of one of",
    ),
    "field-undeclared-dim": (
        {"dims": {k: v for k, v in TEXT.dims.items() if k != "seq"}},
        ValueError,
        r"uses dim 'seq', which dims does not declare",
    ),
    "tags-not-a-tag": ({"tags": {"seq_len": "seq"}}, TypeError, r"^Schema: tags\['seq_len'\] must be a Tag"),
    "padding-for-a-derived-dim": (
        {"padding_sizes": {"seq": 4}},
        ValueError,
        r"padding_sizes\['seq'\]: 'seq' is not a free",
    ),
    "padding-negative": ({"padding_sizes": {"prompt": -1}}, ValueError, r"padding_sizes\['prompt'\] must be an int"),
    "padding-list": ({"padding_sizes": [1]}, TypeError, r"^Schema: padding_sizes must be a mapping"),
}


@pytest.mark.parametrize(
    ("changes", "exc", "match"), list(REFUSED_SCHEMA_PARTS.values()), ids=list(REFUSED_SCHEMA_PARTS)
)
def test_the_schema_constructor_refuses_parts_that_do_not_fit(changes, exc, match):
    with pytest.raises(Exception) as info:
        ts.Schema(**_args(**changes))
    assert type(info.value) is exc
    assert re.search(match, str(info.value)), str(info.value)


def test_the_schema_constructor_accepts_what_the_loader_builds():
    again = ts.Schema(**_args())
    assert again == TEXT and again.validate(_S) == TEXT.validate(_S)


def test_a_schema_built_in_python_with_a_bound_over_an_undeclared_dim_is_refused():
    from trajschema.core import parse_expr

    schema = _moe(dtype="int16")
    bad = dataclasses.replace(schema.fields["routed_experts"], max_expr=parse_expr("nope - 1"))
    with pytest.raises(ValueError, match="uses dim 'nope'"):
        ts.Schema(
            name="x",
            description="",
            architectures=[],
            lineage=["x"],
            dims=dict(schema.dims),
            fields={"routed_experts": bad},
            tags={},
            padding_sizes={},
            extra="allow",
            source="",
        )


# -- value reports in bounded memory ---------------------------------------------------

from unittest import mock  # noqa: E402

from trajschema.core import elements as _values  # noqa: E402

_XY = ts.schema_from_dict(
    {
        "name": "xy",
        "dims": {"n": {}, "w": {}},
        "fields": {
            "x": {"shape": ["n", "w"], "dtype": "int64", "pad": "copy", "values": [0, 1], "max": 1},
            "y": {"shape": ["n"], "dtype": "float32", "pad": "copy", "finite": True},
        },
    }
)


def test_value_reports_of_an_expanded_sample_count_its_logical_elements():
    big = 2**40  # logical elements: a full-size mask or copy would fail to allocate
    sample = {"x": torch.tensor([[0, 1, 7, 1]]).expand(big, 4), "y": torch.tensor([math.nan]).expand(big)}
    found = [(v.field, v.message) for v in _XY.violations(sample)]
    assert found == [
        ("x", f"{big} of {4 * big} elements are not in {{0, 1}} (first at [0,2]: 7)"),
        ("x", f"{big} of {4 * big} elements are not <= 1 (first at [0,2]: 7)"),
        ("y", f"{big} of {big} elements are not finite (first at [0]: nan)"),
    ]
    with pytest.raises(ts.SchemaError) as info:
        _XY.validate(sample)
    assert info.value.violations == _XY.violations(sample)
    clean = {"x": torch.tensor([[0, 1, 0, 1]]).expand(big, 4), "y": torch.zeros(1).expand(big)}
    assert _XY.validate(clean) == {"n": big, "w": 4} and _XY.violations(clean) == []


@st.composite
def _xy_views(draw):
    """A sample whose tensors are views: expanded rows, transposes, every other row, or copies."""
    rows, cols = draw(st.integers(0, 4)), draw(st.integers(1, 3))
    out = {}
    for name, dtype, numbers in [
        ("x", torch.int64, st.integers(-1, 2)),
        ("y", torch.float32, st.sampled_from([0.0, 1.5, math.inf, math.nan])),
    ]:
        how = draw(st.sampled_from(["copy", "expanded", "transposed", "stepped"]))
        size = (cols, rows) if how == "transposed" else (2 * rows, cols) if how == "stepped" else (rows, cols)
        base = torch.tensor(draw(st.lists(numbers, min_size=size[0] * size[1], max_size=size[0] * size[1])))
        base = base.to(dtype).reshape(size)
        t = base[:1].expand(rows, cols) if how == "expanded" and rows else base
        t = t.t() if how == "transposed" else t[::2] if how == "stepped" else t
        out[name] = t if name == "x" else t[:, 0]
    return out


@settings(deadline=None)
@given(sample=_xy_views(), budget=st.sampled_from([1, 2, 3, 1 << 20]))
def test_reports_on_views_read_in_blocks_equal_reports_on_copies(sample, budget):
    copies = {k: v.contiguous().clone() for k, v in sample.items()}
    want = _XY.violations(copies)  # one block each, as before the checks walked blocks
    with mock.patch.object(_values, "_BUDGET", budget):
        assert _XY.violations(sample) == want


# -- a used schema pickles, copies and compares equal (each test failed when written) -----


def _use(schema: ts.Schema) -> None:
    """Exercise every lazily built part of a schema."""
    s = verl_sample(schema, 5, 3, layers=2, topk=2) if "layers" in schema.dims else verl_sample(schema, 5, 3)
    schema.validate(s)
    schema.violations({"uid": 3})
    schema.validate_batch(tq_batch([s, s]))
    schema.padding(2, eos_token_id=2, like=s)


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_a_used_schema_pickles_and_compares_equal(schema, dumps):
    _use(schema)
    back = pickle.loads(dumps(schema))
    assert back == schema and back is not schema
    _use(back)  # its plan is rebuilt on first use
    assert back == schema


def test_a_used_schema_deep_copies_and_compares_equal(schema):
    _use(schema)
    clone = copy.deepcopy(schema)
    assert clone == schema and hash(clone) == hash(schema)
    assert clone._plan is None
    _use(clone)


def test_different_schemas_do_not_compare_equal():
    assert TEXT != VLM and TEXT != "text"


def _validate_in_child(schema_bytes: bytes) -> dict[str, int]:
    schema = pickle.loads(schema_bytes)
    return schema.validate(verl_sample(schema, 4, 2))


def test_a_used_schema_crosses_a_spawned_process():
    _use(TEXT)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(_validate_in_child, (pickle.dumps(TEXT),)) == {"prompt": 4, "response": 2, "seq": 6}


# -- dims= cannot re-pin a fixed dim, in any call that takes it ---------------------------


@pytest.mark.parametrize("call", ["validate", "violations", "validate_batch", "batch_violations", "padding", "writer"])
def test_dims_cannot_repin_a_fixed_dim(call):
    sample = verl_sample(VLM, 5, 3)
    dims = {"rope_rows": 3}
    calls = {
        "validate": lambda: VLM.validate(sample, dims=dims),
        "violations": lambda: VLM.violations(sample, dims=dims),
        "validate_batch": lambda: VLM.validate_batch([sample], dims=dims),
        "batch_violations": lambda: VLM.batch_violations(tq_batch([sample]), dims=dims),
        "padding": lambda: VLM.padding(1, eos_token_id=2, dims=dims),
        "writer": lambda: ts.TransferQueueWriter(VLM, partition_id="p", eos_token_id=2, dims=dims, client=object()),
    }
    with pytest.raises(ValueError, match="rope_rows is fixed at 4"):
        calls[call]()


def test_dims_may_restate_a_fixed_dim():
    assert VLM.validate(verl_sample(VLM, 5, 3), dims={"rope_rows": 4})["rope_rows"] == 4


# -- value checks and odd keys -------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [np.float32("nan"), np.float16("inf"), np.float32("-inf")], ids=["f32-nan", "f16-inf", "f32-neginf"]
)
def test_finite_rejects_numpy_float_nan_and_inf(value):
    """finite: true breaks for any non-finite float, numpy float32/float16 included (not only Python floats)."""
    schema = ts.schema_from_dict({"name": "f", "fields": {"r": {"kind": "float", "finite": True, "pad": 0.0}}})
    assert [(v.sample, v.field, v.code) for v in schema.violations({"r": value})] == [(None, "r", "value")]
    with pytest.raises(ts.SchemaError):
        schema.validate({"r": value})


@pytest.mark.parametrize("key", [1, (1, 2)], ids=["int", "tuple"])
def test_a_non_str_extra_key_is_reported_as_a_schema_error(key):
    """extra: forbid with a non-str key gives a SchemaError that renders (field as text), not Type/AttributeError."""
    schema = ts.schema_from_dict(
        {
            "name": "f",
            "dims": {"n": {}},
            "fields": {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}},
            "extra": "forbid",
        }
    )
    sample = {"x": torch.arange(3), key: 2}
    found = schema.violations(sample)
    assert [v.code for v in found] == ["extra"] and isinstance(found[0].field, str)
    with pytest.raises(ts.SchemaError) as info:
        schema.validate(sample)
    assert str(key) in str(info.value)


# -- a derived dim solved from another is held to its own definition (issue 15 §3) -------------

_CHAIN = ts.schema_from_dict(
    {
        "name": "chain",
        "dims": {"x": {"max": 50}, "c": {}, "b": "2 * x", "a": "b + c"},
        "fields": {
            "z": {"shape": ["a"], "dtype": "int64", "pad": 0},
            "y": {"shape": ["c"], "dtype": "int64", "pad": 0},
        },
    }
)


def _zeros(*sizes: int) -> dict:
    return {name: torch.zeros(n, dtype=torch.int64) for name, n in zip(("z", "y"), sizes)}


def test_a_solved_derived_dim_is_checked_against_its_definition():
    """a = 5, c = 2 solves b = 3, which 2 * x never is: it passed before, unchecked."""
    (v,) = _CHAIN.violations(_zeros(5, 2))
    assert (v.field, v.code, v.expected, v.actual) == ("z", "dim_mismatch", "b = 2 * x", "3")
    assert v.message == "b is 3 (solved from a = b + c on z), which no sizes of x satisfy"
    assert _CHAIN.validate(_zeros(6, 2)) == {"x": 2, "c": 2, "b": 4, "a": 6}  # solved down to x


def test_a_size_solved_down_the_chain_is_held_to_the_bounds_of_the_free_dim():
    (v,) = _CHAIN.violations(_zeros(104, 2))  # b = 102, so x = 51, past its max
    assert (v.field, v.code, v.actual) == ("z", "dim_range", "x=51")


def test_the_batch_paths_agree_with_the_sample_check_on_a_solved_chain():
    from tensordict import TensorDict

    rows = [(5, 2), (6, 2), (104, 2), (9, 1)]
    columns = {
        name: torch.nested.nested_tensor([_zeros(*r)[name] for r in rows], layout=torch.jagged) for name in ("z", "y")
    }
    batch = TensorDict(columns, batch_size=[len(rows)])
    one_by_one = [(i, v.code) for i, r in enumerate(rows) for v in _CHAIN.violations(_zeros(*r))]
    assert one_by_one == [(0, "dim_mismatch"), (2, "dim_range")]
    for b in (batch, [_zeros(*r) for r in rows]):
        assert [(v.sample, v.code) for v in _CHAIN.batch_violations(b)] == one_by_one


def test_a_deeper_chain_is_held_at_every_step():
    schema = ts.schema_from_dict(
        {
            "name": "deep",
            "dims": {"x": {}, "c": {}, "e": "3 * x", "b": "e + 1", "a": "b + c"},
            "fields": {
                "z": {"shape": ["a"], "dtype": "int64", "pad": 0},
                "y": {"shape": ["c"], "dtype": "int64", "pad": 0},
            },
        }
    )
    assert schema.validate(_zeros(8, 1)) == {"x": 2, "c": 1, "e": 6, "b": 7, "a": 8}
    (v,) = schema.violations(_zeros(10, 1))  # b = 9, so e = 8, which 3 * x never is
    assert (v.field, v.expected, v.actual) == ("z", "e = 3 * x", "8")
    assert v.message == "e is 8 (solved from a = b + c on z), which no sizes of x satisfy"


def test_an_input_the_expression_does_not_depend_on_at_these_sizes_is_not_solved_and_the_message_says_so():
    """a = x * y with y = 0: no unique x, so binding refuses it as it refuses two unbound inputs (one way for a
    sample and a batch alike); the message no longer claims no size satisfies it."""
    schema = ts.schema_from_dict(
        {
            "name": "times",
            "dims": {"x": {"min": 1}, "y": {}, "a": "x * y"},
            "fields": {
                "z": {"shape": ["a"], "dtype": "int64", "pad": 0},
                "y": {"shape": ["y"], "dtype": "int64", "pad": 0},
            },
        }
    )
    (v,) = schema.violations(_zeros(0, 0))
    assert (
        v.message == "a is 0 on z, which does not depend on x at these sizes, so validation cannot solve it for x (y=0)"
    )
    assert schema.validate(_zeros(6, 3)) == {"x": 2, "y": 3, "a": 6}


def test_two_unbound_inputs_are_refused_and_the_message_says_why():
    schema = ts.schema_from_dict(
        {
            "name": "two",
            "dims": {"h": {}, "w": {}, "a": "h + w"},
            "fields": {"z": {"shape": ["a"], "dtype": "int64", "pad": 0}},
        }
    )
    (v,) = schema.violations({"z": torch.zeros(6, dtype=torch.int64)})
    assert v.message == "a is 6 on z, validation solves for one unbound dim at a time, and h, w are bound by no field"


# --- bounds written in dims and distinct slices (issue 16), on one sample

ROUTES = ts.schema_from_dict(
    {
        "name": "routes",
        "dims": {"seq": {"min": 1}, "layers": {"min": 1}, "topk": {"min": 1}, "experts": {"min": 1}},
        "fields": {
            "routed_experts": {
                "shape": ["seq", "layers", "topk"],
                "dtype": ["uint8", "int16", "int64"],
                "min": 0,
                "max": "experts - 1",
                "distinct": True,
                "pad": "copy",
            }
        },
    }
)


def _routes(seq=3, layers=2, topk=2, experts=4, dtype=torch.int16):
    ids = torch.arange(seq * layers * topk) % experts
    return {"routed_experts": ids.reshape(seq, layers, topk).to(dtype)}


def test_an_expert_id_beyond_the_experts_is_a_value_violation_once_experts_is_known():
    sample = _routes()
    sample["routed_experts"][2, 1, 0] = 4
    assert ROUTES.violations(sample) == []  # experts unknown: a real rollout sample still validates
    (v,) = ROUTES.violations(sample, dims={"experts": 4})
    assert (v.field, v.code, v.expected) == ("routed_experts", "value", "<= 3")
    assert v.message == "1 of 12 elements are not <= 3 (first at [2,1,0]: 4)"
    (v,) = ROUTES.with_dims({"experts": 4}).violations(sample)  # the same through a pinned schema
    assert v.message == "1 of 12 elements are not <= 3 (first at [2,1,0]: 4)"
    with pytest.raises(ts.SchemaError) as info:
        ROUTES.validate(sample, dims={"experts": 4})
    assert info.value.bindings[None]["experts"] == 4


def test_a_token_routed_twice_to_one_expert_is_its_own_code():
    sample = _routes()
    sample["routed_experts"][1, 0] = torch.tensor([3, 3])
    sample["routed_experts"][2, 1] = torch.tensor([0, 0])
    (v,) = ROUTES.violations(sample)
    assert (v.field, v.code, v.expected) == ("routed_experts", "repeated", "distinct along the last axis")
    assert v.actual == "2 of 6 slices (first at [1,0]: 3 repeats)"
    assert v.message == "2 of 6 slices along the last axis are not distinct (first at [1,0]: 3 repeats)"
    assert [x.code for x in ROUTES.violations(sample, depth="shapes")] == []


def test_ids_in_a_dtype_too_small_for_the_experts_are_a_dtype_violation():
    sample = _routes(dtype=torch.uint8)
    (v,) = ROUTES.violations(sample, dims={"experts": 300}, depth="shapes")
    assert (v.field, v.code, v.expected, v.actual) == (
        "routed_experts",
        "dtype",
        "a dtype holding 299 (max experts - 1)",
        "uint8",
    )
    assert v.message == (
        "dtype uint8 cannot hold 299, the largest value max experts - 1 allows (experts=300); uint8 holds 0..255"
    )
    assert ROUTES.violations(_routes(dtype=torch.int16), dims={"experts": 300}) == []
    assert ROUTES.violations(sample, dims={"experts": 256}) == []


def test_a_dim_pinned_by_dims_that_no_field_observes_keeps_the_fast_path(monkeypatch):
    import trajschema.check.batch as batch

    def no_full_check(*args, **kwargs):
        raise AssertionError("the full check ran for a clean sample")

    monkeypatch.setattr(batch, "check_sample", no_full_check)
    assert ROUTES.validate(_routes(), dims={"experts": 4}) == {"seq": 3, "layers": 2, "topk": 2, "experts": 4}


def test_a_dim_pinned_outside_its_bounds_is_still_a_range_violation():
    schema = ts.schema_from_dict(
        {
            "name": "r",
            "dims": {"seq": {"min": 1}, "experts": {"min": 2, "max": 8}},
            "fields": {"r": {"shape": ["seq"], "dtype": "int64", "max": "experts - 1", "pad": 0}},
        }
    )
    with pytest.raises(ts.SchemaError) as info:
        schema.validate({"r": torch.tensor([0])}, dims={"experts": 9})
    assert [(v.field, v.code) for v in info.value.violations] == [("experts", "dim_range")]
