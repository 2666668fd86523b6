"""Hypothesis strategies from a schema: what they draw always validates; every labelled corruption is caught."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

import trajschema as ts
from trajschema._dims import FreeDim
from trajschema._strategies import corruptions
from trajschema._values import value_failures
from trajschema.testing import batches, invalid_samples, samples, tags

PACKAGED = ts.schema_names()
CODES = ("missing", "kind", "dtype", "rank", "shape", "dim_mismatch", "dim_range", "value", "tag", "extra")

#: Every dim constraint: min/max/multiple_of, fixed, derived needing a >= b, an inline
#: expression, a literal axis; every kind; extra: forbid.
BOUNDED = ts.schema_from_dict(
    {
        "name": "bounded",
        "dims": {
            "a": {"min": 3, "max": 40, "multiple_of": 4},
            "b": {"min": 2, "max": 5},
            "c": {"multiple_of": 8},
            "k": 3,
            "d": "a - b",
            "e": "2 * b + 1",
            "f": "d - c",
        },
        "fields": {
            "xa": {"shape": ["a"], "dtype": "int64", "pad": 0},
            "xd": {"shape": ["d", "k"], "dtype": ["float32", "bfloat16"], "finite": True, "pad": 0.0},
            "xd2": {"shape": ["d"], "dtype": "int8", "values": [-1, 0, 1], "pad": 0},
            "xe": {"shape": ["e", 2], "dtype": "uint8", "min": 1, "pad": 1},
            "xf": {"shape": ["f"], "dtype": "int16", "pad": 0, "required": False},
            "xb": {"shape": ["b - 2", "k"], "dtype": "float64", "pad": 0.0},
            "xc": {"shape": ["c"], "dtype": "bool", "pad": False, "required": False},
            "xc2": {"shape": ["c", "k"], "dtype": "int32", "max": 0, "pad": 0},
            "n": {"kind": "int", "min": -3, "max": 3, "pad": 0},
            "r": {"kind": "float", "min": 0.5, "finite": True, "pad": 0.5},
            "flag": {"kind": "bool", "values": [1], "pad": True},
            "s": {"kind": "str", "pad": "uid"},
            "m": {"kind": "mapping", "pad": "empty", "required": False},
            "anything": {"kind": "any", "values": [2, 3], "pad": 2},
        },
        "tags": {"is_padding": {"kind": "bool", "default": False}, "d_len": {"equals": "d"}, "note": {"kind": "str"}},
        "extra": "forbid",
    }
)

#: Every dtype with value bounds that bite (integer-valued float bounds, fractions, big ints).
DTYPES = ts.schema_from_dict(
    {
        "name": "dtypes",
        "dims": {"n": {"min": 1, "max": 12}},
        "fields": {
            "b": {"shape": ["n"], "dtype": "bool", "values": [1], "pad": True},
            "u8": {"shape": ["n"], "dtype": "uint8", "min": 3, "max": 200, "pad": 3},
            "i8": {"shape": ["n"], "dtype": "int8", "min": -100.5, "max": 5, "pad": 0},
            "i16": {"shape": ["n"], "dtype": "int16", "values": [-3, 7, 300], "pad": 7},
            "i32": {"shape": ["n"], "dtype": "int32", "min": -0.5, "max": 1.0e9, "pad": 0},
            "i64": {"shape": ["n"], "dtype": "int64", "min": 4611686018427387904, "pad": 4611686018427387904},
            "f16": {"shape": ["n"], "dtype": "float16", "min": 0.1, "max": 1000, "finite": True, "pad": 1.0},
            "bf16": {"shape": ["n"], "dtype": "bfloat16", "max": -1.0e-3, "pad": -1.0},
            "f32": {"shape": ["n"], "dtype": "float32", "values": [0.5, 0.25, -2.0], "pad": 0.5},
            "f64": {"shape": ["n"], "dtype": "float64", "min": -1.0e300, "finite": True, "pad": 0.0},
            "free_f16": {"shape": ["n"], "dtype": "float16", "pad": 0.0},
            "mixed": {"shape": ["n", 2], "dtype": ["int8", "float16", "uint8"], "min": 0, "max": 100, "pad": 0},
        },
    }
)

#: Derived dims of derived dims, a product, an inline expression that needs its input >= 1
#: on a lattice (r - 1, r a multiple of 3), a 0-d tensor field, a fixed dim of size 0.
ODD = ts.schema_from_dict(
    {
        "name": "odd",
        "dims": {"p": {}, "r": {"multiple_of": 3}, "z": 0, "s": "p * r", "t": "s - p", "u": "t + 2"},
        "fields": {
            "a": {"shape": ["r - 1"], "dtype": "int64", "pad": 0},
            "b": {"shape": [], "dtype": "float16", "min": -1, "max": 1, "pad": 0.0},
            "c": {"shape": ["z", "u"], "dtype": "int8", "min": 0, "pad": 0},
            "d": {"shape": ["t", "p"], "dtype": "bfloat16", "values": [0.5, 1], "pad": 1},
            "e": {"shape": ["u"], "dtype": "uint8", "max": 3, "pad": 0},
            "e2": {"shape": ["u"], "dtype": "uint8", "pad": 0, "required": False},
        },
        "tags": {"u_len": {"equals": "u"}},
        "extra": "forbid",
    }
)

CUSTOM = {"bounded": BOUNDED, "dtypes": DTYPES, "odd": ODD}
ALL = [*PACKAGED, *CUSTOM]


def _schema(name: str) -> ts.Schema:
    return CUSTOM.get(name) or ts.load_schema(name)


def _reference_values_ok(schema: ts.Schema, sample: dict) -> None:
    """Each element, as a Python number, passes the field's checks (the pure-Python definition)."""
    for name, v in sample.items():
        f = schema.fields[name]
        if f.is_tensor and f.has_value_checks:
            for x in v.reshape(-1)[:64].tolist():
                assert not value_failures(x, values=f.values, lo=f.min, hi=f.max, finite=f.finite), (name, x)


def _dims_ok(schema: ts.Schema, dims: dict) -> None:
    for n, d in schema.dims.items():
        if isinstance(d, FreeDim) and n in dims:
            assert d.allows(dims[n]), (n, dims[n], d.describe())


# -- valid samples ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_samples_validate_with_their_tags(name, data):
    schema = _schema(name)
    sample, tag = data.draw(samples(schema, max_len=24, with_tags=True))
    dims = schema.validate(sample, tag=tag)
    _dims_ok(schema, dims)
    _reference_values_ok(schema, sample)
    assert schema.violations(sample, tag=tag) == []
    for t in schema.tags.values():  # a length tag, when drawn, is the sample's own size
        if t.equals is not None and t.name in tag:
            assert tag[t.name] == t.equals.evaluate(dims)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_tags_agree_with_the_dims_validate_binds(data):
    schema = BOUNDED
    sample = data.draw(samples(schema, max_len=16))
    dims = schema.validate(sample)
    tag = data.draw(tags(schema, sizes=dims, padding=None))
    schema.validate(sample, tag=tag)
    assert data.draw(tags(schema, padding=True))["is_padding"] is True
    assert "d_len" not in data.draw(tags(schema))  # no sizes: no length tag to get wrong
    assert data.draw(tags(schema, padding=False)).get("is_padding", False) is False


@pytest.mark.parametrize(("name", "dims"), [("text", {"seq": 10}), ("moe_routed", {"layers": 48, "topk": 2})])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_pinned_dims_are_kept_derived_ones_solved(name, dims, data):
    schema = _schema(name)
    sample = data.draw(samples(schema, dims=dims, max_len=16))
    bound = schema.validate(sample, dims=dims)
    assert {k: bound[k] for k in dims} == dims


def test_value_bounds_are_reached_exactly():
    """The generator reaches the exact ends of every integer range and never crosses them."""
    seen: dict[str, set] = {k: set() for k in ("u8", "i8", "i32", "b", "i16")}

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(samples(DTYPES, max_len=12))
    def collect(sample):
        DTYPES.validate(sample)
        for k in seen:
            seen[k].update(sample[k].tolist())

    collect()
    assert {3, 200} <= seen["u8"] and min(seen["u8"]) == 3 and max(seen["u8"]) == 200
    assert {-100, 5} <= seen["i8"] and min(seen["i8"]) == -100
    assert min(seen["i32"]) == 0 and max(seen["i32"]) == 10**9
    assert seen["b"] == {True}
    assert seen["i16"] == {-3, 7, 300}


def test_every_dtype_and_special_float_occurs():
    dtypes, floats = set(), set()

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(samples(DTYPES, max_len=12))
    def collect(sample):
        dtypes.add(sample["mixed"].dtype)
        for x in sample["free_f16"].tolist():
            floats.add("nan" if math.isnan(x) else "inf" if math.isinf(x) else "finite")

    collect()
    assert dtypes == {torch.int8, torch.float16, torch.uint8}
    assert floats == {"nan", "inf", "finite"}


# -- batches ----------------------------------------------------------------------------


def _check_layout(batch, layout: str) -> None:
    if layout == "list":
        assert isinstance(batch, list)
        return
    assert isinstance(batch, TensorDictBase)
    for k in batch.keys():
        col = batch.get(k)
        if layout == "nontensor":  # an empty one is NonTensorData: tensordict 0.10 cannot hold an empty stack
            assert isinstance(col, NonTensorStack if batch.batch_size[0] else NonTensorData), k
        elif layout == "dense" and isinstance(col, torch.Tensor):
            assert not col.is_nested, k
        elif layout == "tq" and isinstance(col, torch.Tensor) and col.dim() > 1:
            assert col.is_nested, k  # TransferQueue never returns a dense multi-dim column


@pytest.mark.parametrize("layout", ["tq", "dense", "nontensor", "list"])
@pytest.mark.parametrize("name", ALL)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_batches_validate_in_every_layout(name, layout, data):
    schema = _schema(name)
    batch, batch_tags = data.draw(batches(schema, size=st.integers(0, 6), layout=layout, max_len=12, with_tags=True))
    _check_layout(batch, layout)
    n = len(batch) if isinstance(batch, list) else batch.batch_size[0]
    assert len(batch_tags) == n
    schema.validate_batch(batch, tags=batch_tags)


def test_tq_layout_draws_jagged_and_strided_columns():
    layouts = set()

    @settings(max_examples=20, deadline=None, derandomize=True)
    @given(batches("distill", size=st.integers(2, 4), max_len=6))
    def collect(batch):
        ts.load_schema("distill").validate_batch(batch)
        col = batch.get("teacher_ids")
        layouts.add(col.layout)

    collect()
    assert layouts == {torch.jagged, torch.strided}  # teacher_topk and seq both vary: TransferQueue's fallback


# -- invalid samples --------------------------------------------------------------------


def _assert_caught(schema: ts.Schema, sample: dict, expected) -> None:
    found = schema.violations(sample, tag=expected.tag)
    assert any(v.field == expected.field and v.code == expected.code for v in found), (expected, found)


@pytest.mark.parametrize("name", ALL)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_every_corruption_is_reported_with_its_label(name, data):
    schema = _schema(name)
    sample, expected = data.draw(invalid_samples(schema, max_len=16))
    _assert_caught(schema, sample, expected)
    with pytest.raises(ts.SchemaError):
        schema.validate(sample, tag=expected.tag)
    if expected.tag is None or isinstance(expected.tag, dict):  # and in a batch, at its index
        good, good_tag = data.draw(samples(schema, max_len=8, with_tags=True))
        found = schema.batch_violations([good, sample], tags=[good_tag, expected.tag or {}])
        assert any((v.sample, v.field, v.code) == (1, expected.field, expected.code) for v in found), found
        assert all(v.sample == 1 for v in found)


@pytest.mark.parametrize("code", CODES)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_each_code_on_its_own(code, data):
    sample, expected = data.draw(invalid_samples(BOUNDED, max_len=16, codes=[code]))
    assert expected.code in (code, "tag")  # "tag": the fallback when the sizes a corruption needs do not exist
    _assert_caught(BOUNDED, sample, expected)


def test_every_corruption_kind_occurs():
    codes: set[str] = set()

    @settings(max_examples=200, deadline=None, derandomize=True)
    @given(invalid_samples(BOUNDED, max_len=12))
    def collect(case):
        codes.add(case[1].code)

    collect()
    assert codes == set(CODES)
    assert {code for code, _ in corruptions(BOUNDED)} == set(CODES)
    assert "extra" not in {code for code, _ in corruptions("text")}  # packaged schemas allow extras


def test_value_corruptions_break_the_pure_python_definition():
    @settings(max_examples=40, deadline=None)
    @given(invalid_samples(DTYPES, max_len=8, codes=["value"]))
    def check(case):
        sample, expected = case
        _assert_caught(DTYPES, sample, expected)
        f = DTYPES.fields[expected.field]
        xs = sample[f.name].reshape(-1).tolist()
        assert sum(bool(value_failures(x, values=f.values, lo=f.min, hi=f.max, finite=f.finite)) for x in xs) == 1

    check()


# -- arguments and import ------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: samples("text", dims={"nope": 1}), ValueError, "no dim 'nope'"),
        (lambda: samples("vlm_mrope", dims={"rope_rows": 3}), ValueError, "fixed at 4"),
        (lambda: samples(BOUNDED, dims={"a": 5}), ValueError, "multiple of 4"),
        (lambda: samples("text", max_len=-1), ValueError, "max_len"),
        (lambda: samples(42), TypeError, "Schema or a schema name"),
        (lambda: batches("text", layout="columns"), ValueError, "layout must be one of"),
        (lambda: batches("text", size=-1), ValueError, "size must be >= 0"),
        (lambda: batches("text", size="3"), TypeError, "size must be an int"),
        (lambda: invalid_samples("text", codes=["extra"]), ValueError, "allows no corruption"),
        (lambda: samples("no_such_schema"), ts.SchemaNotFoundError, "no_such_schema"),
    ],
)
def test_bad_arguments_are_typed_errors(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_an_unsatisfiable_schema_says_so():
    schema = ts.schema_from_dict(
        {
            "name": "tight",
            "dims": {"x": {"max": 3}, "y": {"min": 1}, "d": "x - y", "e": "y - x - 1"},
            "fields": {"t": {"shape": ["d", "e"], "dtype": "int64", "pad": 0}},
        }
    )

    @settings(max_examples=5, deadline=None)
    @given(samples(schema))
    def draw(sample):
        pass

    with pytest.raises(ValueError, match=r"cannot construct sizes.*pin sizes with dims="):
        draw()


def test_importing_testing_does_not_import_hypothesis():
    code = (
        "import sys, trajschema.testing as t; assert 'hypothesis' not in sys.modules; "
        "t.samples; assert 'hypothesis' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
