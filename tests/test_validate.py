"""One-sample validation: the bugs the schemas exist to catch, and the report's shape."""

from __future__ import annotations

import math

import pytest
import torch

import trajschema as ts
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
    assert v.message == "dtype float32 is not int16 or int32 or int64"


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
    sample["routed_experts"] = torch.full((9, 4, 2), 31337, dtype=torch.int16)
    with pytest.raises(ts.SchemaError) as info:
        MOE.validate(sample)
    text = str(info.value)
    assert "31337" not in text
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


@settings(max_examples=600, deadline=None)
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
