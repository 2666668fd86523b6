"""schema.jaxtyping(field) / schema.annotations(): jaxtyping annotations checked by @jaxtyped(typechecker=beartype)."""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path
from typing import Any

import beartype
import jaxtyping
import pytest
import torch
from beartype import beartype as beartype_checker
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxtyping import jaxtyped

import trajschema as ts
from trajschema.files import layout_from_dict
from trajschema.testing import verl_sample

JT_ERRORS = (jaxtyping.TypeCheckError, beartype.roar.BeartypeException)
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "workload.py"


def checked(annotations: dict[str, Any]):
    """A ``@jaxtyped(typechecker=beartype)`` function with one parameter per annotation, in order.

    It is called with the field names as keywords (field names need not be identifiers).
    """
    params = [f"p{i}" for i in range(len(annotations))]
    namespace: dict[str, Any] = {}
    exec(f"def fn({', '.join(params)}):\n    return None", namespace)
    fn = namespace["fn"]
    fn.__annotations__ = dict(zip(params, annotations.values()))
    wrapped = jaxtyped(typechecker=beartype_checker)(fn)
    names = dict(zip(annotations, params))

    def call(sample: dict[str, Any]) -> bool:
        """True when the annotations accept ``sample``'s tensor fields."""
        try:
            wrapped(**{names[k]: sample[k] for k in annotations})
        except JT_ERRORS:
            return False
        return True

    return call


def sample_for(schema: ts.Schema, p: int = 6, r: int = 3) -> dict[str, Any]:
    kw = {k: 2 for k in ("layers", "topk", "teacher_topk") if k in schema.dims}
    return verl_sample(schema, p, r, **kw)


# -- packaged schemas -------------------------------------------------------------------


@pytest.mark.parametrize("name", ts.schema_names())
def test_each_packaged_schema_accepts_its_sample_and_rejects_every_kind_of_bad_one(name):
    schema = ts.load_schema(name)
    ann = schema.annotations()
    assert list(ann) == [f.name for f in schema.fields.values() if f.is_tensor]
    check = checked(ann)
    good = sample_for(schema)
    assert check(good)
    assert check(sample_for(schema, 1, 0))  # 0-length response
    bad = {
        "wrong dtype": {**good, "input_ids": good["input_ids"].to(torch.int32)},
        "wrong rank": {**good, "responses": good["responses"][None]},
        "input_ids one shorter than position_ids": {**good, "input_ids": good["input_ids"][:-1]},
        "response_mask one longer than responses": {**good, "response_mask": torch.ones(4, dtype=torch.int64)},
        "float64 log-probs": {**good, "rollout_log_probs": good["rollout_log_probs"].double()},
    }
    if good["position_ids"].dim() == 2:
        bad["3 rope rows, not 4"] = {**good, "position_ids": good["position_ids"][1:]}
    if "routed_experts" in good:
        bad["int8 routed experts"] = {**good, "routed_experts": good["routed_experts"].to(torch.int8)}
        bad["routed_experts one row short"] = {**good, "routed_experts": good["routed_experts"][:-1]}
    for what, sample in bad.items():
        assert schema.violations(sample, depth="shapes"), what  # the oracle agrees it is bad
        assert not check(sample), what


@pytest.mark.parametrize("name", ts.schema_names())
def test_seq_is_a_named_axis_so_seq_equals_prompt_plus_response_is_left_to_validate(name):
    """The documented limit: every seq field one short is consistent, and only validate catches it."""
    schema = ts.load_schema(name)
    good = sample_for(schema)
    short = dict(good)
    for k, f in schema.fields.items():
        if f.is_tensor and k in good and str(f.shape[0]) == "seq":
            short[k] = good[k][:-1]
        elif f.is_tensor and k in good and len(f.shape) == 2 and str(f.shape[1]) == "seq":
            short[k] = good[k][:, :-1]
    assert [v.code for v in schema.violations(short, depth="shapes")] == ["dim_mismatch"]
    assert checked(schema.annotations())(short)


def test_the_issues_example_and_the_benchmarks_hand_written_signature():
    schema = ts.load_schema("vlm_mrope_moe")
    ann = schema.jaxtyping("position_ids")
    assert (ann.__name__, ann.dtypes, ann.dim_str, ann.array_type) == (
        "Int64[Tensor, '4 seq']",
        ("int64",),
        "4 seq",
        torch.Tensor,
    )
    spec = importlib.util.spec_from_file_location("bench_workload_for_test", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rename = {"P": "prompt", "R": "response", "S": "seq"}
    hand = {
        k: (v.dtypes, " ".join(rename.get(d, d) for d in v.dim_str.split()))
        for k, v in bench.check_jaxtyping.__annotations__.items()
        if isinstance(v, type) and hasattr(v, "dim_str")
    }
    ours = schema.annotations()
    assert set(hand) <= set(ours)
    for k, (dtypes, dims) in hand.items():
        assert ours[k].dim_str == dims, k
        # The benchmark pins int16 routed experts; the schema allows int16, int32, int64 and
        # uint8 (SkyRL's downcast below 256 experts).
        assert set(dtypes) <= set(ours[k].dtypes), k
    assert ours["routed_experts"].dtypes == ("int16", "int32", "int64", "uint8", "uint16")


def test_one_field_and_all_fields_give_the_same_object():
    schema = ts.load_schema("vlm_mrope_moe")
    for k, a in schema.annotations().items():
        assert schema.jaxtyping(k) is a
    assert pickle.loads(pickle.dumps(schema)).jaxtyping("input_ids") is schema.jaxtyping("input_ids")


def test_bad_field_names_are_value_and_type_errors_naming_the_field():
    schema = ts.load_schema("text")
    with pytest.raises(ValueError, match=r"no field 'input_id'; did you mean 'input_ids'\?") as info:
        schema.jaxtyping("input_id")
    assert not isinstance(info.value, KeyError)
    with pytest.raises(TypeError, match=r"'uid' is a str field, not a tensor"):
        schema.jaxtyping("uid")
    with pytest.raises(TypeError, match=r"'num_turns' is a int field"):
        schema.jaxtyping("num_turns")
    with pytest.raises(TypeError, match="must be a str, found int 3"):
        schema.jaxtyping(3)  # type: ignore[arg-type]
    assert "uid" not in schema.annotations() and "num_turns" not in schema.annotations()


# -- every dtype, dtype sets -------------------------------------------------------------


def _one_field(dtype: Any, shape: list[Any] | None = None, dims: dict[str, Any] | None = None) -> ts.Schema:
    return ts.schema_from_dict(
        {"name": "t", "dims": dims or {"n": {}}, "fields": {"x": {"shape": shape or ["n"], "dtype": dtype, "pad": 0}}}
    )


@pytest.mark.parametrize("declared", DTYPES)
def test_each_dtype_maps_to_its_jaxtyping_class_and_admits_exactly_itself(declared):
    ann = _one_field(declared).jaxtyping("x")
    expected = {"bool": "Bool", "uint8": "UInt8", "bfloat16": "BFloat16"}.get(declared, declared.capitalize())
    assert ann.__name__ == f"{expected}[Tensor, 'n']"
    assert ann.dtypes == getattr(jaxtyping, expected).dtypes and declared in ann.dtypes  # Bool: bool, bool_
    check = checked({"x": ann})
    for other in DTYPES:
        t = torch.zeros(3, dtype=getattr(torch, other))
        assert check({"x": t}) == (other == declared), other
        assert check({"x": t.to("meta")}) == (other == declared), other  # shapes and dtypes only


@settings(deadline=None)
@given(st.lists(st.sampled_from(DTYPES), min_size=2, max_size=5, unique=True))
def test_a_dtype_list_admits_exactly_the_listed_dtypes(declared):
    ann = _one_field(declared).jaxtyping("x")
    assert ann.dtypes == tuple(declared)
    assert ann is _one_field(declared).jaxtyping("x")  # one class per dtype set
    check = checked({"x": ann})
    for other in DTYPES:
        assert check({"x": torch.zeros(2, dtype=getattr(torch, other))}) == (other in declared)


def test_dtype_set_annotations_pickle():
    try:
        pickle.dumps(jaxtyping.Int64[torch.Tensor, "n"])
    except pickle.PicklingError:
        pytest.skip("this jaxtyping cannot pickle its own annotations (0.2.36 cannot)")
    ann = ts.load_schema("moe_routed").jaxtyping("routed_experts")
    back = pickle.loads(pickle.dumps(ann))
    assert back.dtypes == ann.dtypes and back.dim_str == ann.dim_str


# -- dims --------------------------------------------------------------------------------


def test_fixed_dims_and_constant_expressions_are_literals():
    dims = {"k": 3, "two_k": "2 * k", "n": {}}
    schema = _one_field("int64", ["k", "two_k", "k + 1", 5, "n"], dims)
    ann = schema.jaxtyping("x")
    assert ann.dim_str == "3 6 4 5 n"
    check = checked({"x": ann})
    assert check({"x": torch.zeros(3, 6, 4, 5, 0, dtype=torch.int64)})
    for shape in [(2, 6, 4, 5, 1), (3, 7, 4, 5, 1), (3, 6, 3, 5, 1), (3, 6, 4, 4, 1)]:
        assert not check({"x": torch.zeros(shape, dtype=torch.int64)}), shape


def test_inline_expressions_are_symbolic_axes_that_catch_a_wrong_size():
    schema = ts.schema_from_dict(
        {
            "name": "t",
            "dims": {"a": {}, "b": {}, "s": "a + b", "c": {}},
            "fields": {
                "x": {"shape": ["a"], "dtype": "int64", "pad": 0},
                "y": {"shape": ["b"], "dtype": "int64", "pad": 0},
                "z": {"shape": ["a + b"], "dtype": "int64", "pad": 0},
                "w": {"shape": ["2 * s - a", "a"], "dtype": "int64", "pad": 0},  # s is no axis: expanded
                "u": {"shape": ["c * 2"], "dtype": "int64", "pad": 0},  # c bound by no earlier field
                "v": {"shape": ["c"], "dtype": "int64", "pad": 0},
            },
        }
    )
    ann = schema.annotations()
    assert ann["z"].dim_str == "a+b"
    assert ann["w"].dim_str == "(2*(a+b))-a a"
    assert ann["u"].dim_str == "_"
    check = checked(ann)

    def sample(a: int, b: int, c: int, *, z: int | None = None, w: int | None = None, u: int | None = None):
        t = {"x": a, "y": b, "z": a + b if z is None else z, "u": 2 * c if u is None else u, "v": c}
        out = {k: torch.zeros(n, dtype=torch.int64) for k, n in t.items()}
        out["w"] = torch.zeros(a + 2 * b if w is None else w, a, dtype=torch.int64)
        return out

    for a, b, c in [(0, 0, 0), (2, 3, 1), (5, 0, 4)]:
        good = sample(a, b, c)
        assert schema.violations(good) == [] and check(good)
        assert not check(sample(a, b, c, z=a + b + 1)) and schema.violations(sample(a, b, c, z=a + b + 1))
        assert not check(sample(a, b, c, w=a + 2 * b + 1))
        odd_u = sample(a, b, c, u=2 * c + 1)
        assert schema.violations(odd_u) and check(odd_u)  # the "_" fallback checks nothing


def test_an_expression_needs_its_names_bound_earlier_in_the_same_call():
    schema = ts.schema_from_dict(
        {
            "name": "t",
            "dims": {"a": {}},
            "fields": {
                "x": {"shape": ["a"], "dtype": "int64", "pad": 0},
                "z": {"shape": ["a + 1"], "dtype": "int64", "pad": 0},
            },
        }
    )
    alone = checked({"z": schema.jaxtyping("z")})
    with pytest.raises(jaxtyping.AnnotationError):
        alone({"z": torch.zeros(3, dtype=torch.int64)})


def test_dim_names_jaxtyping_would_misread_are_renamed_and_still_bind():
    schema = ts.schema_from_dict(
        {
            "name": "t",
            "dims": {"_x": {}, "if": {}, "d_x": {}},
            "fields": {
                "p": {"shape": ["_x", "if", "d_x"], "dtype": "int64", "pad": 0},
                "q": {"shape": ["_x", "if + 1"], "dtype": "int64", "pad": 0},
            },
        }
    )
    ann = schema.annotations()
    assert ann["p"].dim_str == "dd_x dif d_x"
    assert ann["q"].dim_str == "dd_x dif+1"
    check = checked(ann)
    assert check({"p": torch.zeros(2, 3, 4, dtype=torch.int64), "q": torch.zeros(2, 4, dtype=torch.int64)})
    assert not check({"p": torch.zeros(2, 3, 4, dtype=torch.int64), "q": torch.zeros(4, 4, dtype=torch.int64)})
    assert not check({"p": torch.zeros(2, 3, 4, dtype=torch.int64), "q": torch.zeros(2, 5, dtype=torch.int64)})


def test_field_names_need_not_be_identifiers():
    schema = ts.schema_from_dict(
        {"name": "t", "dims": {"n": {}}, "fields": {"a-b.日本": {"shape": ["n", 2], "dtype": "float32", "pad": 0.0}}}
    )
    assert schema.jaxtyping("a-b.日本").dim_str == "n 2"


# -- the annotations are a relaxation of the schema (property) ------------------------------

_AXES = ["a", "b", "s", "k", 2, "a + 1", "s - b", "2 * k"]


@st.composite
def schemas_and_samples(draw):
    n_fields = draw(st.integers(1, 4))
    fields = {}
    for i in range(n_fields):
        shape = draw(st.lists(st.sampled_from(_AXES), max_size=3))
        dtype = draw(
            st.lists(st.sampled_from(["int64", "int16", "float32", "bool"]), min_size=1, max_size=2, unique=True)
        )
        fields[f"f{i}"] = {"shape": shape, "dtype": dtype, "pad": 0}
    schema = ts.schema_from_dict({"name": "t", "dims": {"a": {}, "b": {}, "k": 3, "s": "a + b"}, "fields": fields})
    env = {"a": draw(st.integers(0, 3)), "b": draw(st.integers(0, 3)), "k": 3}
    env["s"] = env["a"] + env["b"]
    sample = {}
    for name, f in schema.fields.items():
        shape = [e.evaluate(env) for e in f.shape]
        if draw(st.booleans()):  # break it, maybe
            how = draw(st.sampled_from(["grow", "rank", "dtype"]))
            if how == "grow" and shape:
                i = draw(st.integers(0, len(shape) - 1))
                shape[i] += 1
            elif how == "rank":
                shape.append(1)
        dtype = draw(st.sampled_from([*f.dtypes, torch.int32]))
        sample[name] = torch.zeros(shape, dtype=dtype)
    return schema, sample


@settings(deadline=None)
@given(schemas_and_samples())
def test_annotations_never_reject_what_the_schema_accepts_nor_accept_a_dtype_or_rank_it_rejects(case):
    schema, sample = case
    accepted = checked(schema.annotations())(sample)
    found = {v.code for v in schema.violations(sample, depth="shapes")}
    if not found:
        assert accepted
    if found & {"dtype", "rank", "shape"}:  # wrong dtype, rank or literal/fixed size
        assert not accepted, found
    if not accepted:
        assert found


def test_every_kind_of_axis_in_a_schema_extending_text():
    schema = ts.schema_from_dict(
        {
            "name": "everything",
            "extends": ["text"],
            "dims": {"k": {"size": 2}, "two_k": "2 * k", "n": {"min": 1}, "m": "n + k"},
            "fields": {
                "grid": {"shape": ["k", "n", "n + 1"], "dtype": ["bool", "int8", "float16"], "pad": 0},
                "ratio": {"shape": ["two_k"], "dtype": "bfloat16", "pad": 0.5},
                "wide": {"shape": ["m", "n"], "dtype": "float64", "pad": 0.0},
                "raw": {"shape": [], "dtype": "float32", "pad": 0.0, "required": False},
            },
        }
    )
    ann = schema.annotations()
    got = {k: ann[k].__name__ for k in ("grid", "ratio", "wide", "raw")}
    assert got == {
        "grid": "Bool|Int8|Float16[Tensor, '2 n n+1']",
        "ratio": "BFloat16[Tensor, '4']",
        "wide": "Float64[Tensor, 'm n']",
        "raw": "Float32[Tensor, '']",
    }
    good = {
        **sample_for(ts.load_schema("text")),
        "grid": torch.ones(2, 3, 4, dtype=torch.bool),
        "ratio": torch.zeros(4, dtype=torch.bfloat16),
        "wide": torch.zeros(5, 3, dtype=torch.float64),
        "raw": torch.tensor(1.0),
    }
    check = checked(ann)
    assert schema.violations(good) == [] and check(good)
    bad = {
        "grid n+1 wrong": {**good, "grid": torch.ones(2, 3, 5, dtype=torch.bool)},
        "grid k=3": {**good, "grid": torch.ones(3, 3, 4, dtype=torch.int8)},
        "grid int16": {**good, "grid": torch.ones(2, 3, 4, dtype=torch.int16)},
        "ratio 3 long": {**good, "ratio": torch.zeros(3, dtype=torch.bfloat16)},
        "wide n disagrees with grid": {**good, "wide": torch.zeros(5, 2, dtype=torch.float64)},
        "raw 1-d": {**good, "raw": torch.zeros(1)},
    }
    for what, sample in bad.items():
        assert schema.violations(sample, depth="shapes") and not check(sample), what
    m_wrong = {**good, "wide": torch.zeros(6, 3, dtype=torch.float64)}  # m = n + k is a name: not checked
    assert schema.violations(m_wrong) and check(m_wrong)


def test_an_optional_field_binds_no_name_for_a_later_expression():
    schema = ts.schema_from_dict(
        {
            "name": "t",
            "dims": {"a": {}},
            "fields": {
                "x": {"shape": ["a"], "dtype": "int64", "pad": 0, "required": False},
                "z": {"shape": ["a + 1", "a"], "dtype": "int64", "pad": 0},
            },
        }
    )
    # x may be None (then it binds nothing), so z's expression cannot rely on it; z's own
    # later axis cannot bind it in time either (jaxtyping reads the axes left to right).
    assert schema.jaxtyping("z").dim_str == "_ a"


# -- the field argument (issue 14) ----------------------------------------------------------


class _RaisingRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr of a hostile value")


#: id -> (field argument, exception type (exactly), message regex naming it).
BAD_FIELD_ARGUMENTS = {
    "int": (3, TypeError, r"^schema 'text': a field name must be a str, found int 3$"),
    "none": (None, TypeError, r"^schema 'text': a field name must be a str, found NoneType None$"),
    "bytes": (b"uid", TypeError, r"^schema 'text': a field name must be a str, found bytes b'uid'$"),
    "unhashable": (
        ["input_ids"],
        TypeError,
        r"^schema 'text': a field name must be a str, found list \['input_ids'\]$",
    ),
    "raising-repr": (_RaisingRepr(), TypeError, r"^schema 'text': a field name must be a str, found \S*_RaisingRepr$"),
    "typo": ("input_id", ValueError, r"^schema 'text' has no field 'input_id'; did you mean 'input_ids'\?"),
    "empty": ("", ValueError, r"^schema 'text' has no field ''"),
    "not-a-tensor": ("multi_modal_inputs", TypeError, r"field 'multi_modal_inputs' is a mapping field, not a tensor"),
}


@pytest.mark.parametrize(("field", "exc", "match"), list(BAD_FIELD_ARGUMENTS.values()), ids=list(BAD_FIELD_ARGUMENTS))
def test_the_field_argument_is_refused_by_name(field, exc, match):
    import re

    with pytest.raises(Exception) as info:
        ts.load_schema("text").jaxtyping(field)
    assert type(info.value) is exc
    assert re.search(match, str(info.value)), str(info.value)


# -- dense batches: schema.annotations(layout=...) -------------------------------------------

DENSE_DIM_STRS = {
    ("text", "skyrl"): {
        "sequences": ("batch seq_padded", ["int64"]),
        "attention_mask": ("batch seq_padded", ["int64"]),
        "response_mask": ("batch response_padded", ["int64"]),
        "loss_mask": ("batch response_padded", ["float32"]),
        "rewards": ("batch response_padded", ["float32"]),
        "rollout_logprobs": ("batch response_padded", ["float32"]),
    },
    ("vlm_mrope_moe", "verl_dataproto"): {
        "prompts": ("batch prompt_padded", ["int64"]),
        "responses": ("batch response_padded", ["int64"]),
        "input_ids": ("batch seq_padded", ["int64"]),
        "position_ids": ("batch 4 seq_padded", ["int64"]),
        "response_mask": ("batch response_padded", ["int64"]),
        "attention_mask": ("batch seq_padded", ["int64"]),
        "rollout_log_probs": ("batch response_padded", ["float32"]),
        "rm_scores": ("batch response_padded", ["float32"]),
        "routed_experts": ("batch seq_padded layers topk", ["int16", "int32", "int64", "uint8", "uint16"]),
    },
}


def _dtype_names(annotation: Any) -> list[str]:
    return [str(d) for d in annotation.dtypes]


@pytest.mark.parametrize("case", list(DENSE_DIM_STRS), ids="-".join)
def test_dense_annotations_name_the_batch_and_padded_axes_and_take_the_layouts_dtype(case):
    ann = ts.load_schema(case[0]).annotations(layout=case[1])
    assert {k: (a.dim_str, _dtype_names(a)) for k, a in ann.items()} == DENSE_DIM_STRS[case]


def test_dense_annotations_leave_out_what_is_not_a_tensor_column():
    # SkyRL: prompts/responses are slices of sequences, position_ids absent, uid in metadata,
    # multi_modal_inputs gathered from TensorLists; verl: loss_mask is response_mask.
    sky = ts.load_schema("vlm_mrope").annotations(layout=ts.load_layout("skyrl"))
    assert not {"prompts", "responses", "position_ids", "input_ids", "uid", "metadata.uids"} & set(sky)
    assert "loss_mask" not in ts.load_schema("text").annotations(layout="verl_dataproto")


def _skyrl_like(b: int = 3, s: int = 7, r: int = 4) -> dict[str, torch.Tensor]:
    return {
        "sequences": torch.zeros(b, s, dtype=torch.int64),
        "attention_mask": torch.ones(b, s, dtype=torch.int64),
        "response_mask": torch.ones(b, r, dtype=torch.int64),
        "loss_mask": torch.ones(b, r, dtype=torch.float32),
        "rewards": torch.zeros(b, r, dtype=torch.float32),
        "rollout_logprobs": torch.zeros(b, r, dtype=torch.float32),
        "rollout_expert_indices": torch.zeros(b, s, 2, 3, dtype=torch.uint8),
    }


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("loss_mask", torch.ones(3, 4, dtype=torch.int64)),  # what SkyRL's TrainingInput says it is
        ("response_mask", torch.ones(3, 7, dtype=torch.int64)),  # seq-wide, as TrainingInput says
        ("attention_mask", torch.ones(3, 6, dtype=torch.int64)),  # not as wide as sequences
        ("rewards", torch.zeros(2, 4, dtype=torch.float32)),  # another batch size
        ("rollout_expert_indices", torch.zeros(3, 7, 2, 3, dtype=torch.int8)),  # a dtype no schema allows
        ("rollout_expert_indices", torch.zeros(3, 7, 3, dtype=torch.uint8)),  # a rank short
        ("sequences", torch.zeros(3, 7, dtype=torch.float32)),
    ],
    ids=["loss_mask-int64", "response-seq-wide", "mask-width", "batch", "experts-int8", "experts-rank", "float-ids"],
)
def test_dense_annotations_accept_a_skyrl_shaped_batch_and_reject_each_shape_or_dtype_defect(key, bad):
    check = checked(ts.load_schema("moe_routed").annotations(layout="skyrl"))
    assert check(_skyrl_like())
    assert check(_skyrl_like(b=1, s=1, r=0))
    assert not check({**_skyrl_like(), key: bad})


def test_dense_mrope_annotation_rejects_three_rope_rows_and_the_rows_first():
    ann = ts.load_schema("vlm_mrope").annotations(layout="verl_dataproto")
    check = checked({"input_ids": ann["input_ids"], "position_ids": ann["position_ids"]})
    ids = torch.zeros(2, 9, dtype=torch.int64)
    assert check({"input_ids": ids, "position_ids": torch.zeros(2, 4, 9, dtype=torch.int64)})
    assert not check({"input_ids": ids, "position_ids": torch.zeros(2, 3, 9, dtype=torch.int64)})
    assert not check({"input_ids": ids, "position_ids": torch.zeros(4, 2, 9, dtype=torch.int64)})  # verl #3653


def test_dense_annotations_rename_a_dim_called_batch_or_like_a_padded_axis():
    schema = ts.schema_from_dict(
        {
            "name": "t",
            "dims": {"n": {}, "batch": {}, "n_padded": {}},
            "fields": {
                "m": {"shape": ["n"], "dtype": "int64", "values": [0, 1], "pad": 0},
                "x": {"shape": ["n", "batch"], "dtype": "int64", "pad": 0},
                "y": {"shape": ["n_padded", "batch + 1"], "dtype": "int64", "pad": 0},
            },
        }
    )
    layout = layout_from_dict(
        {"name": "l", "axes": {"n": {"pad_side": "right", "length": "max"}}, "sizes": {"n": "m"}, "fields": {}}
    )
    ann = schema.annotations(layout=layout)
    assert {k: a.dim_str for k, a in ann.items()} == {
        "m": "batch n_padded",
        "x": "batch n_padded dbatch",
        "y": "batch dn_padded dbatch+1",
    }
    check = checked(ann)
    m = torch.ones(2, 5, dtype=torch.int64)
    assert check({"m": m, "x": torch.zeros(2, 5, 3, dtype=torch.int64), "y": torch.zeros(2, 6, 4, dtype=torch.int64)})
    assert not check(
        {"m": m, "x": torch.zeros(2, 5, 3, dtype=torch.int64), "y": torch.zeros(2, 6, 3, dtype=torch.int64)}
    )


def test_annotations_layout_argument_is_checked():
    with pytest.raises(TypeError, match="layout"):
        ts.load_schema("text").annotations(layout=3)
