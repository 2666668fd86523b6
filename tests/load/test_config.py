"""Dims from the model config: ``from_config:`` on a free dim, ``Schema.with_dims``, and ``schema_for_config``."""

from __future__ import annotations

import pickle

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from trajschema.core import FixedDim, FreeDim, parse_expr

MOE = {
    "name": "moe_test",
    "extends": ["moe_routed"],
    "dims": {
        "experts": {"min": 1, "from_config": ["num_experts", "n_routed_experts", "num_local_experts"]},
        "topk": {"min": 1, "from_config": "num_experts_per_tok"},
        "layers": {"min": 1, "from_config": ["num_hidden_layers - first_k_dense_replace", "num_hidden_layers"]},
    },
}


def moe_schema() -> ts.Schema:
    return ts.schema_from_dict(MOE)


# -- from_config: parsed onto the free dim -------------------------------------------------


def test_from_config_is_parsed_in_order_one_key_or_a_list_of_keys_and_expressions():
    s = moe_schema()
    experts, topk, layers = s.dims["experts"], s.dims["topk"], s.dims["layers"]
    assert isinstance(experts, FreeDim) and experts.min == 1
    assert [str(e) for e in experts.from_config] == ["num_experts", "n_routed_experts", "num_local_experts"]
    assert [str(e) for e in topk.from_config] == ["num_experts_per_tok"]
    assert layers.from_config[0] == parse_expr("num_hidden_layers - first_k_dense_replace")
    assert layers.from_config[0].names() == ("num_hidden_layers", "first_k_dense_replace")
    # A dim without it has none, and config keys are not dims: nothing else is declared.
    assert s.dims["prompt"].from_config == ()
    assert "num_experts" not in s.dims


def test_from_config_shows_in_describe_and_makes_a_different_schema():
    s = moe_schema()
    assert "experts: free >= 1 (from config: num_experts | n_routed_experts | num_local_experts)" in s.describe()
    plain = ts.schema_from_dict({**MOE, "dims": {**MOE["dims"], "topk": {"min": 1}}})
    assert plain != s


@pytest.mark.parametrize(
    ("decl", "path", "problem"),
    [
        ({"size": 4, "from_config": "num_experts"}, "dims.e.from_config", r"this dim is fixed \(size\) already"),
        ({"expr": "a", "from_config": "num_experts"}, "dims.e.from_config", r"this dim is derived \(expr\) already"),
        ({"from_config": []}, "dims.e.from_config", "lists no config key"),
        ({"from_config": ["a", "b", "a"]}, "dims.e.from_config[2]", "'a' is listed twice"),
        ({"from_config": ["a", "b + c", "b+c"]}, "dims.e.from_config[2]", "listed twice"),
        ({"from_config": "3"}, "dims.e.from_config", "names no config key"),
        ({"from_config": "a, b"}, "dims.e.from_config", r"list each config key as its own item: \[a, b\]"),
        ({"from_config": 5}, "dims.e.from_config", "expected a list"),
        ({"from_config": ["a", 1]}, "dims.e.from_config[1]", "expected a string, found an integer 1"),
        ({"from_config": "a / b"}, "dims.e.from_config", "division is not supported"),
        ({"from_config": "a" * 300}, "dims.e.from_config", "a dim expression of 300 characters"),
        ({"from_config": "-" * 40 + "a"}, "dims.e.from_config", "nests more than"),
        ({"from_config": {"num_experts": 1}}, "dims.e.from_config", "expected a list"),
        ({"from_config": {"a", "b"}}, "dims.e.from_config", "its order is arbitrary"),
    ],
)
def test_a_bad_from_config_is_refused_at_load_naming_the_key(decl, path, problem):
    with pytest.raises(ts.SchemaDefinitionError, match=problem) as info:
        ts.schema_from_dict({"name": "m", "dims": {"e": decl}})
    assert info.value.path == path


def test_from_config_in_a_yaml_file(tmp_path):
    (tmp_path / "mine.yaml").write_text(
        "name: mine\ndims:\n  experts: {min: 1, from_config: [num_experts, n_routed_experts]}\n"
        "fields:\n  ids: {shape: [experts], dtype: int64, pad: 0}\n"
    )
    s = ts.load_schema(tmp_path / "mine.yaml")
    assert [str(e) for e in s.dims["experts"].from_config] == ["num_experts", "n_routed_experts"]


def test_freedim_refuses_a_from_config_that_is_not_a_tuple_of_exprs():
    with pytest.raises(TypeError, match="from_config must be a tuple of Expr"):
        FreeDim("e", from_config=["num_experts"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="from_config must be a tuple of Expr"):
        FreeDim("e", from_config=("num_experts",))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="source must be a str"):
        FixedDim("e", 4, source=None)  # type: ignore[arg-type]


# -- Schema.with_dims -------------------------------------------------------------------------


def test_with_dims_fixes_free_dims_and_records_where_each_size_came_from():
    s = moe_schema()
    pinned = s.with_dims({"experts": 128, "topk": 8}, sources={"experts": "config: num_experts"})
    assert pinned.dims["experts"] == FixedDim("experts", 128)
    assert pinned.dims["experts"].source == "config: num_experts"
    assert pinned.dims["topk"].source == "dims"
    assert isinstance(pinned.dims["layers"], FreeDim)  # not named: still free
    assert isinstance(s.dims["experts"], FreeDim)  # the original is unchanged
    assert pinned.name == s.name and pinned.fields == s.fields and pinned != s
    assert "experts: fixed 128 (pinned by config: num_experts)" in pinned.describe()
    assert pickle.loads(pickle.dumps(pinned)) == pinned
    assert pickle.loads(pickle.dumps(pinned)).dims["experts"].source == "config: num_experts"
    assert s.with_dims({}) is s


def test_a_pinned_schema_checks_the_pinned_size():
    from trajschema.testing import verl_sample

    s = ts.load_schema("moe_routed")
    sample = verl_sample(s, 5, 3, layers=4, topk=2)
    assert s.with_dims({"layers": 4, "topk": 2}).validate(sample)["topk"] == 2
    codes = {v.code for v in s.with_dims({"layers": 4, "topk": 3}).violations(sample)}
    assert codes and codes <= {"shape", "dim_mismatch", "dim_range"}


def test_with_dims_drops_the_padding_size_of_a_pinned_dim():
    s = ts.load_schema("text")
    assert "prompt" in s.padding_sizes
    pinned = s.with_dims({"prompt": 7})
    assert "prompt" not in pinned.padding_sizes and pinned.padding_sizes.keys() == s.padding_sizes.keys() - {"prompt"}
    assert pinned.validate(verl_text_sample(7, 2))["seq"] == 9


def verl_text_sample(p: int, r: int):
    from trajschema.testing import verl_sample

    return verl_sample(ts.load_schema("text"), p, r)


def test_a_fixed_dim_pinned_to_its_own_size_is_no_change():
    s = ts.load_schema("vlm_mrope")
    assert s.with_dims({"rope_rows": 4}).dims["rope_rows"] == s.dims["rope_rows"]
    with pytest.raises(ts.SchemaDefinitionError, match="rope_rows is fixed at 4 by the schema"):
        s.with_dims({"rope_rows": 3})


@pytest.mark.parametrize(
    ("dims", "error", "problem"),
    [
        ({"experts": 0}, ts.SchemaDefinitionError, r"experts cannot be pinned to 0: the dim must be >= 1"),
        ({"nope": 1}, ts.SchemaDefinitionError, r"declares no dim 'nope'"),
        ({"seq": 3}, ts.SchemaDefinitionError, r"seq is derived \(prompt \+ response\)"),
        ({"experts": -1}, ts.SchemaDefinitionError, r"a size is an int in 0\.\.2\*\*63-1"),
        ({"experts": 2**63}, ts.SchemaDefinitionError, r"a size is an int in 0\.\.2\*\*63-1"),
        ({"experts": "8"}, TypeError, r"dims\['experts'\] must be an int, found str '8'"),
        ({"experts": True}, TypeError, r"must be an int, found bool"),
        ({"experts": 8.0}, TypeError, r"must be an int, found float"),
        ({3: 8}, TypeError, r"keys must be dim names"),
    ],
)
def test_with_dims_refuses_what_the_dim_does_not_allow(dims, error, problem):
    with pytest.raises(error, match=problem) as info:
        moe_schema().with_dims(dims)
    if error is ts.SchemaDefinitionError:
        assert info.value.path == f"dims.{next(iter(dims))}"
        assert "the size came from dims" in str(info.value)


def test_with_dims_refuses_a_bad_mapping_or_bad_sources():
    with pytest.raises(TypeError, match="dims must be a mapping"):
        moe_schema().with_dims([("experts", 8)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sources must be a mapping of dim name to str"):
        moe_schema().with_dims({"experts": 8}, sources={"experts": 1})  # type: ignore[dict-item]


def test_with_dims_names_the_source_it_is_told():
    with pytest.raises(ts.SchemaDefinitionError, match=r"the dim must be >= 1; the size came from config: num_experts"):
        moe_schema().with_dims({"experts": 0}, sources={"experts": "config: num_experts"})


def test_with_dims_on_a_directly_built_schema_refuses_a_negative_derived_dim():
    from trajschema.core import DerivedDim, Field, PadRule

    s = ts.Schema(
        name="m",
        description="",
        architectures=(),
        lineage=("m",),
        dims={"a": FreeDim("a"), "b": FreeDim("b"), "d": DerivedDim("d", parse_expr("a - b"))},
        fields={
            "x": Field(
                "x", "tensor", shape=(parse_expr("a"),), dtypes=(torch.int64,), required=True, pad=PadRule("fill", 0)
            )
        },
        tags={},
        padding_sizes={},
        extra="allow",
        source="",
    )
    assert s.with_dims({"a": 5, "b": 2}).dims["a"].size == 5
    with pytest.raises(ts.SchemaDefinitionError, match=r"d = a - b would be -3 with a=2, b=5, not a size"):
        s.with_dims({"a": 2, "b": 5})


@given(st.integers(min_value=-5, max_value=2**64), st.integers(min_value=0, max_value=40))
def test_with_dims_accepts_exactly_the_sizes_the_free_dim_allows(size, minimum):
    """Against the reference: ``{min, multiple_of: 3}`` allows ``size`` iff ``min <= size`` and 3 divides it."""
    s = ts.schema_from_dict(
        {
            "name": "m",
            "dims": {"e": {"min": minimum, "multiple_of": 3}},
            "fields": {"x": {"shape": ["e"], "dtype": "int64", "pad": 0}},
        }
    )
    allowed = minimum <= size <= 2**63 - 1 and size % 3 == 0
    if allowed:
        assert s.with_dims({"e": size}).dims["e"].size == size
    else:
        with pytest.raises(ts.SchemaDefinitionError):
            s.with_dims({"e": size})
