"""Dims from the model config: ``from_config:`` on a free dim, ``Schema.with_dims``, and ``schema_for_config``."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from tests.loading_support import routes_schema as _moe
from tests.schema_texts import MOE_ROUTED
from trajschema.core import FixedDim, FreeDim, parse_expr
from trajschema.testing import verl_sample

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


def test_a_pinned_dim_is_pinned_again_only_to_its_size_and_the_refusal_names_its_source():
    pinned = moe_schema().with_dims({"experts": 128}, sources={"experts": "config: num_experts"})
    assert pinned.with_dims({"experts": 128}) is pinned
    with pytest.raises(ts.SchemaDefinitionError, match=r"experts is fixed at 128 by config: num_experts; it cannot"):
        pinned.with_dims({"experts": 64})


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


# -- Schema.with_dims and bounds written in dims (issue 16): what pinning refuses ----------------------


def test_a_fill_that_breaks_a_dim_bound_at_some_sizes_only_loads_and_pinning_refuses_it():
    schema = _moe(pad="5", dtype="int16")  # 5 <= experts - 1 unless experts <= 5
    assert schema.with_dims({"experts": 6}).dims["experts"].size == 6
    with pytest.raises(ts.SchemaDefinitionError) as info:
        schema.with_dims({"experts": 4})
    assert info.value.path == "fields.routed_experts.pad"
    assert "fill 5 is not <= 3, as the field's bounds are at the pinned sizes (pinned: experts by dims)" in str(
        info.value
    )


@pytest.mark.parametrize("pad", ["{spread: experts}", "positions", "index"])
def test_a_counting_pad_rule_whose_0_breaks_a_dim_min_at_the_pinned_sizes_is_refused_by_pinning(pad):
    """Found by the to_yaml round trip: the pinned schema must be one the loader would load."""
    kind = "kind: int" if pad == "index" else "shape: [seq, topk], dtype: int64"
    schema = ts.schema_from_dict(
        {
            "name": "m",
            "dims": {"seq": {}, "topk": {"min": 1}, "experts": {"min": 1}},
            "fields": {"r": {**yaml.safe_load("{" + kind + "}"), "min": "experts - 1", "pad": yaml.safe_load(pad)}},
        }
    )
    assert schema.with_dims({"experts": 1}).dims["experts"].size == 1  # min 0: the 0 keeps to it
    with pytest.raises(ts.SchemaDefinitionError) as info:
        schema.with_dims({"experts": 2})
    assert info.value.path == "fields.r.pad"
    assert "starts at 0, which is not >= 1, as the field's bounds are at the pinned sizes" in str(info.value)


def test_pinning_more_experts_than_every_declared_dtype_holds_names_the_field_dtype_and_largest_id():
    schema = _moe(dtype="uint8")
    with pytest.raises(ts.SchemaDefinitionError) as info:
        schema.with_dims({"experts": 300}, sources={"experts": "config num_experts"})
    assert info.value.path == "fields.routed_experts.dtype"
    assert info.value.problem == (
        "no dtype of uint8 holds the bound: uint8 cannot hold 299, the largest value max experts - 1 allows "
        "(experts=300); uint8 holds 0..255; add a wider dtype (pinned: experts by config num_experts)"
    )
    assert schema.with_dims({"experts": 256}).dims["experts"].size == 256


def test_pinning_past_a_narrow_dtype_keeps_it_and_a_sample_in_it_is_a_dtype_violation_as_with_dims():
    schema = _moe()  # [uint8, int16]
    pinned = schema.with_dims({"experts": 300}, sources={"experts": "config num_experts"})
    assert pinned.dims["experts"].size == 300
    assert pinned.fields["routed_experts"].dtype_names == ("uint8", "int16")
    narrow = {"routed_experts": torch.zeros(4, 2, dtype=torch.uint8)}
    wide = {"routed_experts": torch.tensor([[0, 299]] * 4, dtype=torch.int16)}
    found = [(v.field, v.code, v.actual) for v in pinned.violations(narrow)]
    assert found == [("routed_experts", "dtype", "uint8")]
    assert found == [(v.field, v.code, v.actual) for v in schema.violations(narrow, dims={"experts": 300})]
    assert pinned.violations(wide) == []
    assert pinned.violations(narrow, dims=None) and not pinned.violations(wide)


def test_pinning_sizes_at_which_two_dim_bounds_leave_no_value_is_refused():
    schema = ts.schema_from_dict(
        {
            "name": "r",
            "dims": {"seq": {"min": 1}, "topk": {"min": 1}, "experts": {"min": 1}},
            "fields": {
                "r": {"shape": ["seq", "topk"], "dtype": "int64", "min": "topk", "max": "experts - 1", "pad": "copy"}
            },
        }
    )
    assert schema.with_dims({"topk": 2, "experts": 3}).dims["experts"].size == 3
    with pytest.raises(ts.SchemaDefinitionError, match="min 2 is above max 1 at the pinned sizes; no value passes"):
        schema.with_dims({"topk": 2, "experts": 2})


# -- reading a model config ----------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "configs"


@pytest.fixture
def moe_path(tmp_path, monkeypatch):
    d = tmp_path / "schemas"
    d.mkdir()
    (d / "moe_routed.yaml").write_text(MOE_ROUTED)
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(d))
    return d


def qwen3() -> dict:
    return json.loads((FIXTURES / "qwen3-moe" / "config.json").read_text())


def pinned(schema: ts.Schema) -> dict[str, tuple[int, str]]:
    return {n: (d.size, d.source) for n, d in schema.dims.items() if isinstance(d, FixedDim) and d.source}


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (
            "qwen3-moe",
            {
                "experts": (128, "config: num_experts"),
                "topk": (8, "config: num_experts_per_tok"),
                "layers": (48, "config: num_hidden_layers"),
            },
        ),
        (
            "deepseek-v3",
            {
                "experts": (256, "config: n_routed_experts"),
                "topk": (8, "config: num_experts_per_tok"),
                "layers": (58, "config: num_hidden_layers - first_k_dense_replace"),
            },
        ),
        (
            "mixtral",
            {
                "experts": (8, "config: num_local_experts"),
                "topk": (2, "config: num_experts_per_tok"),
                "layers": (32, "config: num_hidden_layers"),
            },
        ),
    ],
)
def test_each_model_directory_pins_its_dims(moe_path, model, expected):
    by_dir = ts.schema_for_config(FIXTURES / model)
    assert by_dir.name == "moe_routed"
    assert pinned(by_dir) == expected
    # the file itself, as a str, and the parsed mapping give the same schema
    assert ts.schema_for_config(str(FIXTURES / model / "config.json")) == by_dir
    assert ts.schema_for_config(json.loads((FIXTURES / model / "config.json").read_text())) == by_dir


def test_a_pinned_schema_pads_and_checks_with_the_config_sizes(moe_path):
    schema = ts.schema_for_config(FIXTURES / "mixtral")
    pad = schema.padding(2, eos_token_id=2, dims={"prompt": 3, "response": 1})
    assert pad.samples[0]["routed_experts"].shape == (4, 32, 2)
    schema.validate_batch(pad.samples, tags=pad.tags)


def test_schema_names_the_schema_to_pin_instead_of_the_architectures(moe_path):
    config = {**qwen3(), "architectures": ["SomethingElse"]}
    by_name = ts.schema_for_config(config, schema="moe_routed")
    assert pinned(by_name)["experts"] == (128, "config: num_experts")
    assert ts.schema_for_config(config, schema=ts.load_schema("moe_routed")) == by_name
    # a schema that reads nothing from the config comes back as it is
    assert ts.schema_for_config(config, schema="text") is ts.load_schema("text")


class FakePretrainedConfig:
    """What schema_for_config reads of a transformers.PretrainedConfig: to_dict()."""

    def __init__(self, **kw):
        self.kw = kw

    def to_dict(self):
        return dict(self.kw)


def test_a_pretrained_config_is_read_through_to_dict(moe_path):
    schema = ts.schema_for_config(FakePretrainedConfig(**qwen3()))
    assert pinned(schema)["topk"] == (8, "config: num_experts_per_tok")


def test_a_real_transformers_config(moe_path):
    transformers = pytest.importorskip("transformers")
    config = transformers.MixtralConfig(num_local_experts=8, num_experts_per_tok=2, num_hidden_layers=4)
    config.architectures = ["MixtralForCausalLM"]
    assert pinned(ts.schema_for_config(config)) == {
        "experts": (8, "config: num_local_experts"),
        "topk": (2, "config: num_experts_per_tok"),
        "layers": (4, "config: num_hidden_layers"),
    }


def test_reading_a_mapping_or_a_path_does_not_import_transformers(tmp_path):
    code = (
        "import sys, trajschema as ts\n"
        f"ts.schema_for_config({{'architectures': ['Qwen2VLForConditionalGeneration']}})\n"
        f"ts.schema_for_config({str(FIXTURES / 'qwen3-moe')!r}, schema='text')\n"
        "assert 'transformers' not in sys.modules, 'transformers was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_text_config_keys_are_read_and_must_agree_with_the_top_level(moe_path):
    vl = {"architectures": ["Qwen3MoeForCausalLM"], "text_config": qwen3()}
    assert pinned(ts.schema_for_config(vl))["experts"] == (128, "config: num_experts")
    both = {**qwen3(), "text_config": {"num_experts": 128}}
    assert pinned(ts.schema_for_config(both))["experts"] == (128, "config: num_experts")
    with pytest.raises(ts.ModelConfigError, match=r"num_experts is an integer 128 but text_config.num_experts is"):
        ts.schema_for_config({**qwen3(), "text_config": {"num_experts": 64}})
    with pytest.raises(ts.ModelConfigError, match=r"text_config: expected a mapping"):
        ts.schema_for_config({**qwen3(), "text_config": "qwen3"})
    # a text_config holding a bad value is named by its own key
    with pytest.raises(ts.ModelConfigError) as info:
        ts.schema_for_config(
            {"architectures": ["Qwen3MoeForCausalLM"], "text_config": {**qwen3(), "num_experts": "128"}}
        )
    assert info.value.key == "text_config.num_experts"


@pytest.mark.parametrize(
    ("change", "key", "problem"),
    [
        ({"num_experts": "128"}, "num_experts", r"expected an integer >= 0 \(a size\), found a string '128'"),
        ({"num_experts": 128.0}, "num_experts", r"found a number 128.0"),
        ({"num_experts": True}, "num_experts", r"found a boolean true"),
        ({"num_experts": -8}, "num_experts", r"found an integer -8"),
        ({"num_experts": 2**63}, "num_experts", r"found an integer 9223372036854775808"),
        ({"num_experts": [128]}, "num_experts", r"found a list"),
        ({"num_experts": 0}, "num_experts", r"num_experts is 0, but dim experts of schema 'moe_routed' must be >= 1"),
        (
            {"n_routed_experts": 64},
            "num_experts, n_routed_experts",
            r"num_experts is 128 but n_routed_experts is 64: the config says two things about dim experts",
        ),
        (
            {"num_experts": None, "num_local_experts": 8, "n_routed_experts": 256},
            "n_routed_experts, num_local_experts",
            r"n_routed_experts is 256 but num_local_experts is 8",
        ),
        (
            {"num_experts_per_tok": None},
            "num_experts_per_tok",
            r"the config gives no num_experts_per_tok .*which dim topk of schema 'moe_routed' is read from",
        ),
        (
            {"first_k_dense_replace": 60, "num_hidden_layers": 50},
            "num_hidden_layers, first_k_dense_replace",
            r"num_hidden_layers - first_k_dense_replace is -10 \(num_hidden_layers = 50, first_k_dense_replace = 60\)",
        ),
        (
            {"first_k_dense_replace": 48},
            "num_hidden_layers, first_k_dense_replace",
            r"num_hidden_layers - first_k_dense_replace is 0 .* must be >= 1",
        ),
        ({"architectures": None}, "architectures", r"missing: it names the model class"),
        ({"architectures": "Qwen3MoeForCausalLM"}, "architectures", r"expected a list of class names, found a string"),
        ({"architectures": []}, "architectures", r"expected a list of class names, found a list \[\]"),
        ({"architectures": ["Qwen3MoeForCausalLM", 3]}, "architectures[1]", r"expected a class name, found an integer"),
    ],
)
def test_a_config_key_that_gives_no_size_is_a_typed_error_naming_it(moe_path, change, key, problem):
    config = {**qwen3(), **change}
    with pytest.raises(ts.ModelConfigError, match=problem) as info:
        ts.schema_for_config(config)
    assert info.value.key == key and info.value.source == "<mapping>"
    assert pickle.loads(pickle.dumps(info.value)).args == info.value.args


def test_a_missing_key_lists_every_alternative(moe_path):
    config = {k: v for k, v in qwen3().items() if k not in ("num_experts", "num_hidden_layers")}
    with pytest.raises(ts.ModelConfigError, match="num_experts or n_routed_experts or num_local_experts"):
        ts.schema_for_config(config)
    config = {**qwen3(), "num_hidden_layers": None}
    with pytest.raises(
        ts.ModelConfigError,
        match=r"num_hidden_layers - first_k_dense_replace \(lacks num_hidden_layers, first_k_dense_replace\) "
        r"or num_hidden_layers",
    ):
        ts.schema_for_config(config)


def test_the_architectures_pick_exactly_one_schema(moe_path):
    base = qwen3()
    # two model classes of one schema, or an unknown one beside a known one: that schema
    for archs in (["Qwen3MoeForCausalLM", "MixtralForCausalLM"], ["NoSuchModel", "Qwen3MoeForCausalLM"]):
        assert ts.schema_for_config({**base, "architectures": archs}).name == "moe_routed"
    with pytest.raises(
        ts.SchemaNotFoundError, match=r"architectures: 'Qwen3MoeForCausalLM', 'Qwen2VLFor.*more than one"
    ):
        ts.schema_for_config({**base, "architectures": ["Qwen3MoeForCausalLM", "Qwen2VLForConditionalGeneration"]})
    with pytest.raises(
        ts.SchemaNotFoundError,
        match=r"<mapping>: architectures: no schema claims 'Qwen3MoeForCausalLm'.*"
        r"did you mean 'Qwen3MoeForCausalLM'",
    ):
        ts.schema_for_config({**base, "architectures": ["Qwen3MoeForCausalLm"]})


def test_an_architecture_two_schema_files_claim_is_refused(moe_path):
    (moe_path / "twin.yaml").write_text("name: twin\narchitectures: [MixtralForCausalLM]\n")
    with pytest.raises(ts.SchemaNotFoundError, match=r"'MixtralForCausalLM' by moe_routed, twin"):
        ts.schema_for_config(FIXTURES / "mixtral")


def test_a_refused_config_changes_nothing(moe_path):
    before = ts.load_schema("moe_routed")
    with pytest.raises(ts.ModelConfigError):
        ts.schema_for_config({**qwen3(), "num_experts": "x"})
    assert ts.load_schema("moe_routed") is before and isinstance(before.dims["experts"], FreeDim)


# -- config files that cannot be read as one, and config objects that fail -----------------------


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("content", "key", "problem"),
    [
        ("{not json", "line 1, column 2", r"not JSON: Expecting property name"),
        ("", "line 1, column 1", r"not JSON: Expecting value"),
        ('[{"architectures": ["MixtralForCausalLM"]}]', "", r"expected a JSON object of config keys, found a list"),
        ('"config"', "", r"found a string 'config'"),
        ('{"a": 1, "a": 2}', "a", r"'a' is given twice in one object"),
        ('{"text_config": {"num_experts": 8, "num_experts": 9}}', "num_experts", r"given twice"),
        (b'{"a": "\xff"}', "", r"not UTF-8 text: byte 0xff at offset 7"),
        ("[" * 100_000 + "]" * 100_000, "", r"nested too deeply to be a config"),
        ('{"num_experts": ' + "9" * 5000 + "}", "", r"not JSON a config holds: .*digits"),
    ],
)
def test_a_config_file_that_is_not_a_json_object_names_the_file(tmp_path, content, key, problem):
    path = write(tmp_path / "m" / "config.json", content)
    with pytest.raises(ts.ModelConfigError, match=problem) as info:
        ts.schema_for_config(tmp_path / "m")
    assert info.value.source == str(path) and info.value.key == key


def test_a_byte_order_mark_is_fine(moe_path, tmp_path):
    write(tmp_path / "m" / "config.json", b"\xef\xbb\xbf" + (FIXTURES / "mixtral" / "config.json").read_bytes())
    assert pinned(ts.schema_for_config(tmp_path / "m"))["experts"] == (8, "config: num_local_experts")


def test_a_huge_file_is_refused_before_it_is_read_whole(tmp_path):
    path = tmp_path / "config.json"
    with open(path, "wb") as fh:  # sparse: 17 MiB of nothing costs no disk
        fh.truncate(17 << 20)
    with pytest.raises(ts.ModelConfigError, match=r"larger than 16 MiB; a config.json is a few KiB"):
        ts.schema_for_config(path)


def test_paths_that_hold_no_config(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ts.ModelConfigError, match=r"the directory holds no config.json") as info:
        ts.schema_for_config(tmp_path / "empty")
    assert info.value.source == str(tmp_path / "empty")
    with pytest.raises(ts.ModelConfigError, match=r"nothing is there \(only local files are read"):
        ts.schema_for_config("Qwen/Qwen3-30B-A3B")  # a hub id: never downloaded
    with pytest.raises(ts.ModelConfigError, match=r"nothing is there"):
        ts.schema_for_config("a\0b")
    (tmp_path / "dirjson" / "config.json").mkdir(parents=True)
    with pytest.raises(ts.ModelConfigError, match=r"is a directory") as info:
        ts.schema_for_config(tmp_path / "dirjson")
    assert info.value.source == str(tmp_path / "dirjson" / "config.json")
    with pytest.raises(ts.ModelConfigError, match=r"File name too long") as info:
        ts.schema_for_config("x" * 5000)
    assert len(str(info.value)) < 1200  # the path is cut, not echoed whole


def test_symbolic_links_that_reach_no_file(tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop")
    with pytest.raises(ts.ModelConfigError, match=r"too many levels of symbolic links") as info:
        ts.schema_for_config(loop)
    assert info.value.source == str(loop)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").symlink_to(tmp_path / "gone.json")
    with pytest.raises(ts.ModelConfigError, match=r"is a symbolic link to .*gone.json, which does not exist"):
        ts.schema_for_config(tmp_path / "m")
    (tmp_path / "m2").mkdir()
    (tmp_path / "m2" / "config.json").symlink_to(tmp_path / "m2" / "config.json")
    with pytest.raises(ts.ModelConfigError, match=r"too many levels of symbolic links"):
        ts.schema_for_config(tmp_path / "m2")


def test_a_fifo_is_never_opened(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    with pytest.raises(ts.ModelConfigError, match=r"is not a regular file \(a FIFO\)"):
        ts.schema_for_config(tmp_path)  # would block forever if it were read


class Hostile:
    def to_dict(self):
        raise RuntimeError("boom")


class NotAMapping:
    def to_dict(self):
        return [1, 2]


class RaisingMapping(dict):
    def items(self):
        raise RuntimeError("no items")


def test_config_objects_that_fail_are_typed_errors():
    with pytest.raises(ts.ModelConfigError, match=r"<Hostile>: to_dict\(\) failed: RuntimeError: boom"):
        ts.schema_for_config(Hostile())
    with pytest.raises(ts.ModelConfigError, match=r"to_dict\(\) must return a mapping, found a list"):
        ts.schema_for_config(NotAMapping())
    with pytest.raises(ts.ModelConfigError, match=r"cannot be read as a mapping: RuntimeError: no items"):
        ts.schema_for_config(RaisingMapping())
    for bad in (5, None, b"config.json", [("architectures", [])]):
        with pytest.raises(TypeError, match=r"config must be a mapping, a transformers\.PretrainedConfig, or a path"):
            ts.schema_for_config(bad)


def test_a_config_that_contains_itself_is_read_one_level_deep(moe_path):
    config = qwen3()
    config["text_config"] = config  # a mapping cannot hold itself in JSON, but a dict can
    assert pinned(ts.schema_for_config(config))["experts"] == (128, "config: num_experts")


# -- the rules, against a reference --------------------------------------------------------

_VALUES = st.one_of(st.none(), st.integers(-3, 20), st.sampled_from(["7", 1.5, True, [3]]))


def _reference(config: dict) -> int | None:
    """What ``e: {min: 1, from_config: [a, b, "c - d"]}`` is under ``config`` (``None``: an error), written plainly."""
    present = {k: v for k, v in config.items() if v is not None}
    for v in present.values():
        if type(v) is not int or v < 0:
            return None  # every key the dim names must hold a size when present
    plain = [present[k] for k in ("a", "b") if k in present]
    if len(set(plain)) > 1:
        return None
    if plain:
        value = plain[0]
    elif "c" in present and "d" in present:
        value = present["c"] - present["d"]
    else:
        return None
    return value if value >= 1 else None


@given(st.fixed_dictionaries({}, optional=dict.fromkeys("abcd", _VALUES)))
def test_from_config_against_a_reference(config):
    schema = ts.schema_from_dict(
        {
            "name": "m",
            "dims": {"e": {"min": 1, "from_config": ["a", "b", "c - d"]}},
            "fields": {"x": {"shape": ["e"], "dtype": "int64", "pad": 0}},
        }
    )
    expected = _reference(config)
    if expected is None:
        with pytest.raises(ts.ModelConfigError):
            ts.schema_for_config(config, schema=schema)
    else:
        assert ts.schema_for_config(config, schema=schema).dims["e"].size == expected


# -- the largest MoE models (issue 27 §3): more than 256 experts, uint16 ids -------------------------


def large_moe(experts: int) -> dict:
    """A config of a real model's shape: DeepSeek-V3's architecture with Kimi K2's 384 routed
    experts, or Qwen3-MoE's with 512 (Qwen3-Next's count)."""
    if experts == 384:
        return {**json.loads((FIXTURES / "deepseek-v3" / "config.json").read_text()), "n_routed_experts": 384}
    return {**qwen3(), "num_experts": experts}


@pytest.mark.parametrize("experts", [8, 257, 384, 512, 4096])
def test_schema_for_config_pins_any_expert_count_a_model_has(experts):
    schema = ts.schema_for_config(large_moe(experts) if experts in (384, 512) else {**qwen3(), "num_experts": experts})
    assert schema.dims["experts"].size == experts
    assert "uint8" in schema.fields["routed_experts"].dtype_names  # kept: a uint8 sample is a dtype violation
    pad = schema.padding(3, eos_token_id=2, dims={"prompt": 60, "response": 4})
    assert pad.sources["experts"] in ("config", "schema") and pad.dims["experts"] == experts
    routes = pad.fields["routed_experts"]
    assert routes.dtype == torch.int16 and int(routes.min()) >= 0 and int(routes.max()) < experts
    schema.validate_batch(pad.samples, tags=pad.tags, depth="values")


@pytest.mark.parametrize(
    ("experts", "dtype", "ok"),
    [
        (384, torch.uint8, False),
        (384, torch.uint16, True),
        (384, torch.int16, True),
        (512, torch.uint16, True),
        (512, torch.uint8, False),
        (256, torch.uint8, True),
    ],
    ids=lambda v: str(v).removeprefix("torch."),
)
def test_a_sample_whose_dtype_cannot_hold_the_pinned_experts_is_a_dtype_violation(experts, dtype, ok):
    schema = ts.schema_for_config(large_moe(experts) if experts in (384, 512) else qwen3() | {"num_experts": experts})
    layers, topk = schema.dims["layers"].size, schema.dims["topk"].size
    sample = verl_sample(schema, 5, 3, layers=layers, topk=topk)
    ids = torch.arange(8 * layers * topk).remainder(min(experts, 256 if dtype == torch.uint8 else experts))
    sample["routed_experts"] = ids.view(8, layers, topk).to(dtype)
    found = [(v.field, v.code) for v in schema.violations(sample, depth="values")]
    assert found == ([] if ok else [("routed_experts", "dtype")])
    unpinned = ts.load_schema("moe_routed").violations(sample, dims={"experts": experts}, depth="values")
    assert [(v.field, v.code) for v in unpinned] == found  # the same answer as dims=
