"""Hypothesis strategies from a schema: what they draw always validates; every labelled corruption is caught."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

import trajschema as ts
from trajschema.core.dims import DerivedDim, FixedDim, FreeDim, parse_expr
from trajschema.core.values import value_failures
from trajschema.padding.spread import largest_id
from trajschema.schema import Schema
from trajschema.testing import batches, dense_batches, invalid_samples, samples, tags
from trajschema.testing.strategies import _rest_bounds, corruptions

PACKAGED = ts.schema_names()
CODES = ("missing", "kind", "dtype", "rank", "shape", "dim_mismatch", "dim_range", "value", "tag", "extra")
#: What a ``distinct`` field adds.
TIED_CODES = ("repeated",)

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


def with_fields(schema: ts.Schema, **changes: dict) -> ts.Schema:
    """``schema`` with some fields' declarations changed (``routes={"distinct": True}``); bounds in dims as text.

    Builds the declarations directly, so the strategies are tested on any combination of
    value bounds in dims and ``distinct``, whatever the loader's own rules for them.
    """
    fields = dict(schema.fields)
    for name, change in changes.items():
        change = {k: parse_expr(v) if k.endswith("_expr") else v for k, v in change.items()}
        fields[name] = dataclasses.replace(fields[name], **change)
    return Schema(
        name=schema.name,
        description=schema.description,
        architectures=schema.architectures,
        lineage=schema.lineage,
        dims=schema.dims,
        fields=fields,
        tags=schema.tags,
        padding_sizes=schema.padding_sizes,
        extra=schema.extra,
        source=schema.source,
    )


#: Values tied to the sizes: routes below an observed expert count and distinct per token
#: (experts >= topk), listed values distinct per token (topk <= 3), a bound in a dim no
#: field observes (checked only when pinned), a literal last axis.
TIED = with_fields(
    ts.schema_from_dict(
        {
            "name": "tied",
            "dims": {"experts": {"min": 1}, "topk": {"min": 1}, "tok": {}, "off": {"max": 3}},
            "fields": {
                "routes": {"shape": ["tok", "topk"], "dtype": ["int16", "uint8"], "min": 0, "pad": 0},
                "gates": {"shape": ["experts"], "dtype": "float32", "finite": True, "pad": 0.0},
                "small": {"shape": ["tok", "topk"], "dtype": "int8", "values": [1, -2, 5], "pad": 1},
                "pair": {"shape": ["tok", 2], "dtype": ["int64", "float16"], "pad": 0, "required": False},
            },
        }
    ),
    routes={"max_expr": "experts - 1", "distinct": True},
    small={"distinct": True},
    pair={"min_expr": "off", "max_expr": "off + topk", "distinct": True},
)

CUSTOM = {"bounded": BOUNDED, "dtypes": DTYPES, "odd": ODD, "tied": TIED}
ALL = [*PACKAGED, *CUSTOM]


def _schema(name: str) -> ts.Schema:
    return CUSTOM.get(name) or ts.load_schema(name)


def _reference_values_ok(schema: ts.Schema, sample: dict, dims: dict | None = None) -> None:
    """Each element, as a Python number, passes the field's checks (the pure-Python definition).

    Bounds in dims are evaluated with ``dims`` (left out where they name a dim it lacks);
    a ``distinct`` field's slices along the last axis hold no value twice.
    """
    for name, v in sample.items():
        f = schema.fields[name]
        if f.is_tensor and f.has_value_checks:
            f = f.bounded(dims or {})
            for x in v.reshape(-1)[:64].tolist():
                assert not value_failures(x, values=f.values, lo=f.min, hi=f.max, finite=f.finite), (name, x)
            if f.distinct and v.numel():
                rows = v.reshape(-1, v.shape[-1] if v.dim() else 1).tolist()
                assert all(len(set(r)) == len(r) for r in rows), (name, v)


def _dims_ok(schema: ts.Schema, dims: dict) -> None:
    for n, d in schema.dims.items():
        if isinstance(d, FreeDim) and n in dims:
            assert d.allows(dims[n]), (n, dims[n], d.describe())


# -- valid samples ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL)
@settings(deadline=None)
@given(data=st.data())
def test_samples_validate_with_their_tags(name, data):
    schema = _schema(name)
    sample, tag = data.draw(samples(schema, max_len=24, with_tags=True))
    dims = schema.validate(sample, tag=tag)
    _dims_ok(schema, dims)
    _reference_values_ok(schema, sample, dims)
    assert schema.violations(sample, tag=tag) == []
    for t in schema.tags.values():  # a length tag, when drawn, is the sample's own size
        if t.equals is not None and t.name in tag:
            assert tag[t.name] == t.equals.evaluate(dims)


@settings(deadline=None)
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
@settings(deadline=None)
@given(data=st.data())
def test_pinned_dims_are_kept_derived_ones_solved(name, dims, data):
    schema = _schema(name)
    sample = data.draw(samples(schema, dims=dims, max_len=16))
    bound = schema.validate(sample, dims=dims)
    assert {k: bound[k] for k in dims} == dims


def test_value_bounds_are_reached_exactly():
    """The generator reaches the exact ends of every integer range and never crosses them."""
    seen: dict[str, set] = {k: set() for k in ("u8", "i8", "i32", "b", "i16")}

    # Collects values until every end of every range is seen: about 60 draws.
    @settings(max_examples=3 * settings().max_examples, deadline=None, derandomize=True)
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

    # Collects values until every end of every range is seen: about 60 draws.
    @settings(max_examples=3 * settings().max_examples, deadline=None, derandomize=True)
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
@settings(deadline=None)
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

    @settings(deadline=None, derandomize=True)
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
@settings(deadline=None)
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
@settings(deadline=None)
@given(data=st.data())
def test_each_code_on_its_own(code, data):
    sample, expected = data.draw(invalid_samples(BOUNDED, max_len=16, codes=[code]))
    assert expected.code in (code, "tag")  # "tag": the fallback when the sizes a corruption needs do not exist
    _assert_caught(BOUNDED, sample, expected)


def test_every_corruption_kind_occurs():
    codes: set[str] = set()

    # hypothesis's draws come in clumps (in 200 examples a code may come up 3 times, or none):
    # 300 leaves room for that, whatever choices the tensors' elements take: 12 times the dev profile.
    @settings(max_examples=12 * settings().max_examples, deadline=None, derandomize=True)
    @given(invalid_samples(BOUNDED, max_len=12))
    def collect(case):
        codes.add(case[1].code)

    collect()
    assert codes == set(CODES)
    assert {code for code, _ in corruptions(BOUNDED)} == set(CODES)
    assert "extra" not in {code for code, _ in corruptions("text")}  # packaged schemas allow extras


def test_value_corruptions_break_the_pure_python_definition():
    @settings(deadline=None)
    @given(invalid_samples(DTYPES, max_len=8, codes=["value"]))
    def check(case):
        sample, expected = case
        _assert_caught(DTYPES, sample, expected)
        f = DTYPES.fields[expected.field]
        xs = sample[f.name].reshape(-1).tolist()
        assert sum(bool(value_failures(x, values=f.values, lo=f.min, hi=f.max, finite=f.finite)) for x in xs) == 1

    check()


# -- arguments and import ------------------------------------------------------------


#: Bad arguments for every public strategy: each is a typed error naming the argument, raised
#: when the strategy is made (no draw), never an internal error or a strategy that draws wrong data.
BAD_STRATEGY_ARGUMENTS = [
    (lambda: samples("text", dims={"nope": 1}), ValueError, r"samples\(dims=\.\.\.\).*no dim 'nope'"),
    (lambda: samples("vlm_mrope", dims={"rope_rows": 3}), ValueError, "fixed at 4"),
    (lambda: samples(BOUNDED, dims={"a": 5}), ValueError, "multiple of 4"),
    (lambda: samples(BOUNDED, dims={"b": 1}), ValueError, r"dims\['b'\]=1: b must be >= 2"),
    (lambda: samples("text", dims={"seq": True}), ValueError, r"dims\['seq'\] must be an int.*found True"),
    (lambda: samples("text", dims={"seq": 3.0}), ValueError, r"found 3\.0"),
    (lambda: samples("text", dims={"seq": -1}), ValueError, r"found -1"),
    (lambda: samples("text", dims={"seq": 2**63}), ValueError, r"0\.\.2\*\*63-1"),
    (lambda: samples("text", dims="seq"), ValueError, "must be a mapping"),
    (
        lambda: samples("text", dims={"prompt": 3, "response": 2, "seq": 9}),
        ValueError,
        r"seq = prompt \+ response is 5",
    ),
    (lambda: samples(BOUNDED, dims={"a": 4, "b": 5}), ValueError, r"d = a - b is -1 for a=4, b=5"),
    (lambda: samples(ODD, dims={"r": 0}), ValueError, r"shape expression r - 1 is -1"),
    (lambda: samples(BOUNDED, dims={"d": 100}), ValueError, r"cannot construct a sample.*'d': 100"),
    (lambda: samples("text", dims={"seq": 2**40}), ValueError, r"2\*\*24"),  # allocating it would take 8 TiB
    (lambda: samples("text", max_len=-1), ValueError, "max_len"),
    (lambda: samples("text", max_len=True), ValueError, r"max_len=\.\.\.\).*found True"),
    (lambda: samples("text", max_len=8.0), ValueError, r"max_len=\.\.\.\).*found 8\.0"),
    (lambda: samples("text", max_len=2**64), ValueError, r"max_len=\.\.\.\)"),
    (lambda: samples("moe_routed", max_len=10**5), ValueError, r"samples\(max_len=100000\).*routed_experts"),
    (lambda: samples("text", with_tags="yes"), TypeError, r"with_tags=\.\.\.\) must be True or False"),
    (lambda: samples(42), TypeError, "Schema or a schema name"),
    (lambda: samples(b"text"), TypeError, "Schema or a schema name"),
    (lambda: samples("no_such_schema"), ts.SchemaNotFoundError, "no_such_schema"),
    (lambda: tags("text", sizes={"seq": -1}), ValueError, r"tags\(sizes=\.\.\.\).*found -1"),
    (lambda: tags("text", sizes={"seq": True}), ValueError, r"tags\(sizes=\.\.\.\).*found True"),
    (lambda: tags("text", sizes={"seq": 1.5}), ValueError, r"tags\(sizes=\.\.\.\).*found 1\.5"),
    (lambda: tags("text", sizes={"sq": 3}), ValueError, r"tags\(sizes=\.\.\.\).*no dim 'sq'"),
    (lambda: tags("text", sizes=[("seq", 3)]), ValueError, r"tags\(sizes=\.\.\.\).*must be a mapping"),
    (lambda: tags(BOUNDED, sizes={"b": 0}), ValueError, r"sizes\['b'\]=0: b must be >= 2"),
    (lambda: tags("text", sizes={"prompt": 3, "response": 2, "seq": 9}), ValueError, r"sizes\['seq'\]=9, but seq"),
    (lambda: tags("text", sizes={"prompt": 2**62, "response": 2**62}), ValueError, r"seq = prompt \+ response is 9"),
    (lambda: tags("vlm_mrope", sizes={"rope_rows": 3}), ValueError, "fixed at 4"),
    (lambda: tags(BOUNDED, sizes={"d": 100}), ValueError, r"tags\(sizes=\.\.\.\): cannot construct"),
    (lambda: tags("text", padding=1), TypeError, r"padding=\.\.\.\) must be True, False or None"),
    (lambda: tags("text", padding="no"), TypeError, r"padding=\.\.\.\)"),
    (lambda: tags(None), TypeError, "Schema or a schema name"),
    (lambda: tags("no_such_schema"), ts.SchemaNotFoundError, "no_such_schema"),
    (lambda: batches("text", layout="columns"), ValueError, r"layout=\.\.\.\) must be one of"),
    (lambda: batches("text", layout=["tq"]), ValueError, r"layout=\.\.\.\) must be one of"),
    (lambda: batches("text", size=-1), ValueError, r"size=\.\.\.\) must be >= 0"),
    (lambda: batches("text", size=10**9), ValueError, r"size=\.\.\.\) must be >= 0 and at most 65536"),
    (lambda: batches("text", size="3"), TypeError, r"size=\.\.\.\) must be an int"),
    (lambda: batches("text", size=True), TypeError, r"size=\.\.\.\) must be an int or a strategy.*bool"),
    (lambda: batches("text", size=2.0), TypeError, r"size=\.\.\.\) must be an int"),
    (lambda: batches("moe_routed", size=1000), ValueError, r"1000 samples of schema 'moe_routed'.*2\*\*24"),
    (lambda: batches("text", dims={"seq": -3}), ValueError, r"batches\(dims=\.\.\.\)"),
    (lambda: batches("text", max_len=-3), ValueError, r"batches\(max_len=\.\.\.\)"),
    (lambda: batches("text", with_tags=1), TypeError, r"batches\(with_tags=\.\.\.\)"),
    (lambda: invalid_samples("text", codes=["extra"]), ValueError, "allows no corruption"),
    (lambda: invalid_samples("text", codes=["missing", "mising"]), ValueError, r"'mising' is not a corruption"),
    (lambda: invalid_samples("text", codes=[3]), ValueError, r"3 is not a corruption"),
    (lambda: invalid_samples("text", codes="missing"), TypeError, r"codes=\.\.\.\) must be a list"),
    (lambda: invalid_samples("text", codes=3), TypeError, r"codes=\.\.\.\) must be a list"),
    (lambda: invalid_samples("text", dims={"seq": True}), ValueError, r"invalid_samples\(dims=\.\.\.\)"),
    (lambda: invalid_samples("text", max_len=False), ValueError, r"invalid_samples\(max_len=\.\.\.\)"),
    (lambda: invalid_samples(BOUNDED, dims={"k": 4}), ValueError, "fixed at 3"),
    (lambda: invalid_samples(3.5), TypeError, "Schema or a schema name"),
    (lambda: dense_batches("text", "skyr"), ts.SchemaNotFoundError, "did you mean 'skyrl'"),
    (lambda: dense_batches("text", 3), TypeError, r"dense_batches\(layout=\.\.\.\) must be a Layout"),
    (lambda: dense_batches(None, "skyrl"), TypeError, r"dense_batches\(schema=\.\.\.\) must be a trajschema.Schema"),
    (lambda: dense_batches("text", "skyrl", size=0), ValueError, r"dense_batches\(size=\.\.\.\) must be"),
    (lambda: dense_batches("text", "skyrl", size=True), TypeError, r"dense_batches\(size=\.\.\.\)"),
    (lambda: dense_batches("text", "skyrl", size="3"), TypeError, r"dense_batches\(size=\.\.\.\)"),
    (lambda: dense_batches("text", "skyrl", max_len=0), ValueError, r"dense_batches\(max_len=\.\.\.\)"),
    (lambda: dense_batches("text", "skyrl", pad_token_id=-1), ValueError, r"dense_batches\(pad_token_id"),
    (lambda: dense_batches("text", "skyrl", with_samples=1), TypeError, r"dense_batches\(with_samples"),
]


@pytest.mark.parametrize(("call", "error", "match"), BAD_STRATEGY_ARGUMENTS)
def test_bad_arguments_are_typed_errors_when_the_strategy_is_made(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_every_public_strategy_has_bad_arguments_listed():
    import trajschema.testing as testing

    strategies = {
        n
        for n in testing.__all__
        if callable(getattr(testing, n)) and n not in ("verl_sample", "tq_batch", "random_routes")
    }
    strategies -= {"assert_valid", "assert_padding_invariant", "MemoryTransferQueue", "ExpectedViolation"}
    strategies -= {"assert_bundle_valid", "recorded_batch"}  # no strategies: their refusals are tests/bundle's
    listed = {call.__code__.co_names[0] for call, _, _ in BAD_STRATEGY_ARGUMENTS}
    assert strategies <= listed, strategies - listed


def _declared_feasible(schema: ts.Schema, pins: dict, box: int) -> bool:
    """Whether some sizes up to ``box`` satisfy every dim constraint and ``pins``: the reference, by brute force.

    Read from the declarations alone: free dims within their bounds, fixed dims their size,
    every derived dim and every inline shape expression a size (>= 0), pins kept.
    """
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 0 for v in pins.values()):
        return False
    dims = schema.dims
    free = [n for n, d in dims.items() if isinstance(d, FreeDim)]
    choices = [[pins[n]] if n in pins else [v for v in range(box + 1) if dims[n].allows(v)] for n in free]
    exprs = [e for f in schema.fields.values() if f.shape for e in f.shape if not (e.is_name or e.is_int)]
    for combo in itertools.product(*choices):
        env = {**{n: d.size for n, d in dims.items() if isinstance(d, FixedDim)}, **dict(zip(free, combo))}
        if not all(dims[n].allows(env[n]) for n in free):
            continue
        derived = [n for n, d in dims.items() if isinstance(d, DerivedDim)]
        while derived:  # in any order their definitions allow
            n = next(n for n in derived if dims[n].expr.evaluate(env) is not None)
            env[n] = dims[n].expr.evaluate(env)
            derived.remove(n)
        if any(env[n] != v for n, v in pins.items()) or any(v < 0 for v in env.values()):
            continue
        if all(e.evaluate(env) >= 0 for e in exprs):
            return True
    return False


def _error(call) -> str | None:
    try:
        call()
    except (ValueError, TypeError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


_PINS = st.dictionaries(
    st.sampled_from(sorted({*BOUNDED.dims, *ODD.dims, *ts.load_schema("text").dims})),
    st.one_of(st.integers(-1, 60), st.just(True)),
    max_size=3,
)


# The pins and schemas are a wide space of arguments: six times the profile.
@settings(max_examples=6 * settings().max_examples, deadline=None)
@given(name=st.sampled_from(["text", "bounded", "odd"]), pins=_PINS, data=st.data())
def test_samples_and_tags_refuse_the_same_sizes_and_every_size_no_sample_has(name, pins, data):
    schema = _schema(name)
    pins = {k: v for k, v in pins.items() if k in schema.dims}
    refused = _error(lambda: samples(schema, dims=pins, max_len=8))
    refused_tags = _error(lambda: tags(schema, sizes=pins))
    assert (refused is None) == (refused_tags is None), (refused, refused_tags)
    assert refused is None or refused.split(":")[0] == refused_tags.split(":")[0]  # the same type of error
    feasible = _declared_feasible(schema, pins, 63)
    if not feasible:
        assert refused is not None, pins  # sizes no sample has are refused, when the strategy is made
    if refused is not None and "cannot construct" not in refused:
        assert not feasible, refused  # a refusal that says no sample has these sizes is true
    if refused is None:
        drawn = _draw_or_limit(data, samples(schema, dims=pins, max_len=8, with_tags=True))
        if drawn is None:
            return
        sample, tag = drawn
        bound = schema.validate(sample, tag=tag, dims=pins)
        schema.validate(sample, tag=data.draw(tags(schema, sizes=bound)))


def _draw_or_limit(data, strategy):
    """A draw, or ``None`` where it meets the documented limit of pinning a derived dim (module docstring)."""
    try:
        return data.draw(strategy)
    except ValueError as exc:
        if "cannot construct sizes" not in str(exc):
            raise
        return None


@pytest.mark.parametrize("name", ALL)
@settings(deadline=None)
@given(data=st.data())
def test_max_len_zero_draws_the_smallest_valid_samples(name, data):
    schema = _schema(name)
    sample, tag = data.draw(samples(schema, max_len=0, with_tags=True))
    schema.validate(sample, tag=tag)


def test_padding_tags_carry_is_padding_even_where_the_schema_does_not_declare_it():
    untagged = ts.schema_from_dict(
        {"name": "untagged", "dims": {"n": {}}, "fields": {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}}}
    )
    assert untagged.padding(1, eos_token_id=2, like={"x": torch.zeros(1, dtype=torch.int64)}).tags == [
        {"is_padding": True}
    ]

    @settings(deadline=None)
    @given(tags(untagged, padding=True), tags(untagged, padding=False), tags(untagged, padding=None))
    def check(padding, real, either):
        assert ts.is_padding(padding) and not ts.is_padding(real)
        assert isinstance(ts.is_padding(either), bool)
        for tag in (padding, real, either):
            untagged.validate({"x": torch.zeros(2, dtype=torch.int64)}, tag=tag)

    check()


def test_tags_complete_sizes_with_the_derived_dims_they_decide():
    seen = set()

    # Collects the tag values: about 40 draws to see each.
    @settings(max_examples=2 * settings().max_examples, deadline=None, derandomize=True)
    @given(tags("text", sizes={"prompt": 3, "response": 2}))
    def collect(tag):
        seen.add(tag.get("seq_len"))

    collect()
    assert seen == {None, 5}


def _draw_error(strategy) -> str:
    @settings(deadline=None, database=None, phases=[Phase.generate])  # no shrinking: one failure
    @given(strategy)
    def draw(_):
        pass

    with pytest.raises(ValueError) as info:
        draw()
    return str(info.value)


def test_a_size_strategy_drawing_no_batch_size_fails_the_draw():
    assert "must draw ints in 0..65536, drew True" in _draw_error(batches("text", size=st.just(True)))
    assert "drew -1" in _draw_error(batches("text", size=st.just(-1)))
    assert "drew 100000" in _draw_error(batches("text", size=st.just(10**5)))
    wide = ts.schema_from_dict(
        {"name": "wide", "dims": {"n": {}}, "fields": {"x": {"shape": ["n"], "dtype": "int8", "pad": 0}}}
    )
    batches(wide, size=1, dims={"n": 2**23 + 1})  # a sample within the budget, two beyond it
    assert _draw_error(batches(wide, size=st.just(2), dims={"n": 2**23 + 1})).endswith("lower max_len=, size= or dims=")
    with pytest.raises(ValueError, match=r"2 samples of schema 'wide' can hold 16777218 tensor elements"):
        batches(wide, size=2, dims={"n": 2**23 + 1})  # an int size is refused when the strategy is made


def test_a_dim_range_too_large_to_build_falls_back_and_allocates_nothing():
    huge = ts.schema_from_dict(
        {"name": "huge", "dims": {"n": {"max": 2**40}}, "fields": {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}}}
    )
    assert ("dim_range", "x") not in corruptions(huge)  # max + 1 = 2**40 + 1 elements: not offered

    @settings(deadline=None)
    @given(invalid_samples(huge, codes=["dim_range", "tag"], max_len=8))
    def check(case):
        sample, expected = case
        assert expected.code == "tag" and sample["x"].numel() <= 8
        _assert_caught(huge, sample, expected)

    check()


def test_an_unsatisfiable_schema_says_so():
    schema = ts.schema_from_dict(
        {
            "name": "tight",
            "dims": {"x": {"max": 3}, "y": {"min": 1}, "d": "x - y", "e": "y - x - 1"},
            "fields": {"t": {"shape": ["d", "e"], "dtype": "int64", "pad": 0}},
        }
    )

    for strategy in (samples(schema), batches(schema, size=2), invalid_samples(schema)):
        assert "cannot construct sizes" in _draw_error(strategy)  # a ValueError, never the internal _Infeasible


# Importing trajschema.testing does not import hypothesis (until a strategy is used):
# one of the import claims of tests/test_public_api.py, which one interpreter checks together.


# -- samples validation accepts, over schemas with chains of derived dims (issue 15 §3) ---------

from hypothesis import HealthCheck  # noqa: E402

from trajschema.testing import LAYOUTS  # noqa: E402


@st.composite
def _chain_schemas(draw) -> dict:
    """A schema dict built constructively: free dims whose bounds admit a size, derived dims over earlier dims
    (sums, constant multiples, at most one product of dims, so every shape stays small), fields observing any
    of them, and a field for each free dim no shape uses (so that, with every field present, every dim binds)."""
    dims: dict = {}
    names: list[str] = []
    for i in range(draw(st.integers(1, 3))):
        lo, step = draw(st.integers(0, 3)), draw(st.sampled_from([None, 1, 2, 3]))
        d: dict = {"min": lo} if lo else {}
        if step:
            d["multiple_of"] = step
        if draw(st.booleans()):
            first = -(-lo // (step or 1)) * (step or 1)
            d["max"] = first + (step or 1) * draw(st.integers(0, 2))
        dims[f"x{i}"] = d
        names.append(f"x{i}")
    products = 0
    for i in range(draw(st.integers(1, 4))):

        def term() -> str:
            k, n = draw(st.integers(1, 3)), draw(st.sampled_from(names))
            return n if k == 1 else f"{k} * {n}"

        e = term()
        for _ in range(draw(st.integers(0, 2))):
            op = draw(st.sampled_from(["+", "+ const", *(["*"] if not products else [])]))
            products += op == "*"
            e = f"{e} + {draw(st.integers(0, 3))} + {term()}" if op == "+ const" else f"({e}) {op} {term()}"
        dims[f"d{i}"] = e
        names.append(f"d{i}")
    fields = {
        f"f{j}": {"shape": [draw(st.sampled_from(names))], "dtype": "int64", "pad": 0, "required": draw(st.booleans())}
        for j in range(draw(st.integers(1, 4)))
    }
    seen = {f["shape"][0] for f in fields.values()}
    for n in [n for n in names if n.startswith("x") and n not in seen]:
        fields[f"o_{n}"] = {"shape": [n], "dtype": "int64", "pad": 0, "required": draw(st.booleans())}
    return {"name": "chain", "dims": dims, "fields": fields}


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(d=_chain_schemas(), data=st.data())
def test_samples_of_schemas_with_chains_of_derived_dims_always_validate(d, data):
    """Validation binds a sample from the fields it carries: a derived dim observed alone is solved for its one
    unbound input, and a derived input solved so is held to its own definition. samples() yields only samples it
    can bind (choosing which optional fields to carry), and every one validates."""
    schema = ts.schema_from_dict(d)
    sample = data.draw(samples(schema, max_len=3))
    assert schema.violations(sample) == [], (d, {k: tuple(v.shape) for k, v in sample.items()})
    batch = data.draw(batches(schema, size=st.integers(0, 3), max_len=3, layout=data.draw(st.sampled_from(LAYOUTS))))
    assert schema.batch_violations(batch) == []


_ALONE = {"name": "alone", "dims": {"h": {"max": 4}, "w": {"max": 4}, "a": "h + w"}}


def test_a_schema_no_sample_of_which_validation_accepts_is_refused_when_the_strategy_is_made():
    """a = h + w observed alone has two unbound inputs: validation refuses every sample that carries it."""
    schema = ts.schema_from_dict({**_ALONE, "fields": {"t": {"shape": ["a"], "dtype": "int64", "pad": 0}}})
    assert schema.violations({"t": torch.zeros(3, dtype=torch.int64)})  # what the refusal says is true
    for make in (lambda: samples(schema), lambda: batches(schema, size=2)):
        with pytest.raises(ValueError, match=r"has no sample validation accepts: .*a = h \+ w is 0 but validation"):
            make()


@settings(deadline=None)
@given(data=st.data())
def test_optional_fields_are_chosen_so_that_validation_can_bind(data):
    fields = {
        "t": {"shape": ["a"], "dtype": "int64", "pad": 0, "required": False},
        "th": {"shape": ["h"], "dtype": "int64", "pad": 0, "required": False},
        "tw": {"shape": ["w"], "dtype": "int64", "pad": 0, "required": False},
    }
    schema = ts.schema_from_dict({**_ALONE, "fields": fields})
    sample = data.draw(samples(schema, max_len=3))
    assert "t" not in sample or {"th", "tw"} & set(sample)  # t alone cannot be bound
    schema.validate(sample)


def test_samples_can_carry_the_derived_dim_when_its_inputs_come_with_it():
    fields = {
        "t": {"shape": ["a"], "dtype": "int64", "pad": 0},
        "th": {"shape": ["h"], "dtype": "int64", "pad": 0, "required": False},
        "tw": {"shape": ["w"], "dtype": "int64", "pad": 0, "required": False},
    }
    schema = ts.schema_from_dict({**_ALONE, "fields": fields})

    @settings(deadline=None)
    @given(samples(schema, max_len=3))
    def check(sample):
        assert {"th", "tw"} & set(sample)
        schema.validate(sample)

    check()


# -- value bounds in dims and distinct slices ------------------------------------------------


@st.composite
def _tied_schemas(draw) -> tuple[ts.Schema, dict]:
    """A routes-like schema with bounds in dims and ``distinct`` drawn at random, and ``dims=`` to pin.

    Always constructible: whatever is pinned leaves the routes more allowed values than
    the smallest ``topk`` (``experts >= 2 * topk_min + 2``, literal ``min`` at most 1).
    """
    topk_min = draw(st.integers(0, 2))
    topk = {"min": topk_min, **({"max": draw(st.integers(topk_min, 6))} if draw(st.booleans()) else {})}
    dtypes = draw(st.lists(st.sampled_from(["uint8", "int8", "int16", "int64", "float16"]), min_size=1, max_size=3))
    lit = {
        k: v
        for k, v in (("min", draw(st.sampled_from([None, 0, 1]))), ("max", draw(st.sampled_from([None, 200]))))
        if v is not None
    }
    base = ts.schema_from_dict(
        {
            "name": "tied_random",
            "dims": {"experts": {"min": draw(st.integers(1, 3))}, "topk": topk, "tok": {}, "layers": {"min": 1}},
            "fields": {
                "routes": {"shape": ["tok", "layers", "topk"], "dtype": sorted(set(dtypes)), **lit, "pad": 1},
                **({"gates": {"shape": ["experts"], "dtype": "float32", "pad": 0.0}} if draw(st.booleans()) else {}),
            },
        }
    )
    change = {
        "max_expr": draw(st.sampled_from([None, "experts - 1", "experts + 2", "2 * experts - 1"])),
        "min_expr": draw(st.sampled_from([None, None, "topk"])),
        "distinct": draw(st.booleans()),
    }
    schema = with_fields(base, routes={k: v for k, v in change.items() if v is not None})
    low = max(base.dims["experts"].min, 2 * topk_min + 2)
    dims = draw(st.sampled_from([{}, {"experts": draw(st.integers(low, 40))}]))
    return schema, dims


@given(case=_tied_schemas(), data=st.data())
def test_tied_values_always_validate_samples(case, data):
    schema, dims = case
    sample = data.draw(samples(schema, dims=dims, max_len=10))
    bound = schema.validate(sample, dims=dims)
    _reference_values_ok(schema, sample, {**bound, **dims})


@given(case=_tied_schemas(), layout=st.sampled_from(["tq", "dense", "list"]), data=st.data())
def test_tied_values_always_validate_batches(case, layout, data):
    schema, dims = case
    batch = data.draw(batches(schema, size=st.integers(0, 4), layout=layout, dims=dims, max_len=8))
    assert schema.batch_violations(batch, dims=dims) == []
    for row in batch if isinstance(batch, list) else []:
        _reference_values_ok(schema, row, dims)


def test_a_bound_naming_the_distinct_axis_shortens_it_until_the_values_fit():
    # min: topk on a topk-wide distinct axis: a wider axis leaves fewer values (experts - topk),
    # so the strategy must look below the room the drawn width leaves; with experts pinned at 4
    # it once declared that the schema had no valid sample (topk 1 and 2 have one).
    base = ts.schema_from_dict(
        {
            "name": "tied_min",
            "dims": {"experts": {"min": 2}, "topk": {"min": 1}, "tok": {}, "layers": {"min": 1}},
            "fields": {"routes": {"shape": ["tok", "layers", "topk"], "dtype": "uint8", "pad": 1}},
        }
    )  # the bounds are set on the field itself: the loader refuses their fill with pad: 1
    schema = with_fields(base, routes={"min_expr": "topk", "max_expr": "experts - 1", "distinct": True})

    @settings(deadline=None, max_examples=60)
    @given(batches(schema, size=st.integers(1, 3), layout="list", max_len=8, dims={"experts": 4}))
    def check(batch):
        assert schema.batch_violations(batch, dims={"experts": 4}) == []
        for row in batch:
            topk = row["routes"].shape[-1]
            assert row["routes"].numel() == 0 or (topk <= 2 and int(row["routes"].min()) >= topk)  # empty: any width

    check()


def test_experts_are_drawn_at_least_topk_and_topk_at_most_the_listed_values():
    seen = set()

    @settings(derandomize=True)
    @given(samples(TIED, max_len=12))
    def collect(sample):
        experts, topk = sample["gates"].shape[0], sample["routes"].shape[-1]
        if sample["routes"].numel():  # an empty one holds no id: any sizes do
            assert topk <= 3 and experts >= topk  # small's 3 listed values; routes' ids 0 .. experts-1
            seen.add((experts, topk))

    collect()
    assert {t for _, t in seen} == {1, 2, 3} and len({e for e, _ in seen}) > 3


def test_pinned_sizes_move_the_other_dim():
    shape_bound = with_fields(ts.load_schema("moe_routed"), routed_experts={"max_expr": "topk + 2", "distinct": True})

    @given(
        samples(TIED, dims={"experts": 2}, max_len=12),
        samples(TIED, dims={"topk": 3}, max_len=12),
        samples(shape_bound, dims={"topk": 2, "layers": 3}, max_len=6),  # a bound in shape dims: nothing to move
    )
    def check(few_experts, three, bounded):
        # An empty routes tensor holds no id: any sizes do (tok = 0 leaves topk and experts free).
        if few_experts["routes"].numel():
            assert few_experts["routes"].shape[-1] <= 2 and largest_id(few_experts["routes"]) <= 1
        if three["routes"].numel():
            assert three["gates"].shape[0] >= 3
        TIED.validate(few_experts, dims={"experts": 2})
        TIED.validate(three, dims={"topk": 3})
        shape_bound.validate(bounded)
        if bounded["routed_experts"].numel():
            assert largest_id(bounded["routed_experts"]) <= 4  # topk + 2

    check()


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: samples(with_fields(TIED, routes={"dtypes": (torch.uint8,)}), dims={"experts": 300}),
            r"samples: schema 'tied' has no valid sample: field routes: torch\.uint8 cannot hold id 299 "
            r"\(max: experts - 1\) with experts=300.*pin sizes with dims=",
        ),
        (
            lambda: batches(TIED, dims={"experts": 2, "topk": 3}),
            r"batches: schema 'tied' has no valid sample: field routes needs 3 distinct values along its last "
            r"axis, but torch\.(int16|uint8) allows 2 \(max: experts - 1\) with experts=2, .*topk=3",
        ),
        (
            lambda: samples(TIED, dims={"topk": 4}),
            r"field small needs 4 distinct values along its last axis, but torch\.int8 allows 3 \(its value checks\)",
        ),
    ],
    ids=["dtype-too-narrow", "topk-above-experts", "topk-above-listed-values"],
)
def test_sizes_no_tied_value_fits_are_refused_when_the_strategy_is_made(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_a_pinned_expert_count_leaves_only_the_dtypes_that_hold_it():
    wide = with_fields(TIED, routes={"dtypes": (torch.uint8, torch.int16)})

    @given(samples(wide, dims={"experts": 300}, max_len=4))
    def check(sample):
        assert sample["routes"].dtype == torch.int16

    check()


def test_tied_corruptions_are_offered_where_validation_can_see_them():
    offered = set(corruptions(TIED))
    assert {("repeated", "routes"), ("repeated", "small"), ("repeated", "pair"), ("value", "routes")} <= offered
    assert ("value", "pair") not in offered  # off is observed by no field: its bound is checked only when pinned
    assert ("value", "pair") in set(corruptions(TIED, dims={"off": 1}))
    assert not {c for c, _ in corruptions(BOUNDED)} & set(TIED_CODES)


@pytest.mark.parametrize("dims", [{}, {"off": 2}])
@given(data=st.data())
def test_an_expert_id_out_of_range_and_a_repeated_expert_are_caught(dims, data):
    sample, expected = data.draw(invalid_samples(TIED, dims=dims, max_len=8, codes=["value", "repeated"]))
    found = TIED.violations(sample, tag=expected.tag, dims=dims)
    assert any((v.field, v.code) == (expected.field, expected.code) for v in found), (expected, found)
    if expected.code == "repeated":  # the reference: some slice along the last axis repeats a value
        t = sample[expected.field]
        assert any(len(set(r)) < len(r) for r in t.reshape(-1, t.shape[-1]).tolist())


def test_out_of_range_ids_are_among_the_value_corruptions():
    beyond = set()

    @settings(derandomize=True)
    @given(invalid_samples(TIED, max_len=8, codes=["value"]))
    def collect(case):
        sample, expected = case
        if expected.field == "routes":
            experts = sample["gates"].shape[0]
            beyond.add(int(sample["routes"].max()) >= experts)

    collect()
    assert True in beyond


@pytest.mark.parametrize("layout", ["tq", "dense"])
def test_a_repeated_expert_is_caught_in_a_batch_at_its_index(layout):
    @given(invalid_samples(TIED, max_len=6, codes=["repeated"]), samples(TIED, max_len=6))
    def check(case, good):
        sample, expected = case
        found = TIED.batch_violations([good, sample])
        assert any((v.sample, v.field, v.code) == (1, expected.field, "repeated") for v in found), found

    check()


@given(
    sizes=st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 3), st.one_of(st.none(), st.integers(4, 7)), st.integers(-3, 3)),
        min_size=0,
        max_size=3,
    )
)
def test_rest_bounds_are_the_brute_force_range(sizes):
    """`_rest_bounds` (`Expr.bounds` of a linear sum) against every combination of sizes."""
    dims = [FreeDim(f"d{i}", min=lo, max=hi, multiple_of=m or 1) for i, (lo, m, hi, _) in enumerate(sizes)]
    coef = {d.name: c for d, (*_, c) in zip(dims, sizes)}
    got = _rest_bounds(dims, coef, {})
    choices = []
    for d in dims:
        first, last = d.size_range(0) or (0, 0)
        choices.append(range(first, (last if last is not None else first + 20) + 1, d.step))
    values = [sum(coef[d.name] * x for d, x in zip(dims, xs)) for xs in itertools.product(*choices)]
    unbounded = [d for d in dims if d.size_range(0) and d.size_range(0)[1] is None and coef[d.name]]
    if not unbounded and values:
        assert got == (min(values), max(values))
    elif values:
        assert got[0] <= min(values) and got[1] >= max(values)
