"""Compiling declarations into a Schema (`trajschema.load.compile`): dims, expressions, fields, pad
rules and fills, tags and padding sizes, each malformed one refused naming the key path; across
``extends``, the file named is the one whose declaration is at fault.

The pad fill: does it fit its dtypes (`fill_fits_dtype`, against a pure-Python reference) and
does it pass its field's own value checks, as Python compares.
"""

from __future__ import annotations

import copy
import math
import struct
import time
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajschema as ts
from tests.loading_cases import BASE, HUGE
from tests.loading_cases import edit_base as _edit
from tests.loading_cases import with_field as _field
from tests.loading_support import bump_mtime as _bump_mtime
from tests.loading_support import check_refused as _check
from tests.loading_support import child_schema as _child
from tests.loading_support import load_error as _load_error
from tests.loading_support import pad_and_validate as _pad_and_validate
from tests.loading_support import prefixed
from tests.loading_support import routes_schema as _moe
from tests.loading_support import write_schema as _write
from trajschema.load.compile import fill_fits_dtype

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]
_INT_RANGES = {
    torch.uint8: (0, 255),
    torch.int8: (-128, 127),
    torch.int16: (-32768, 32767),
    torch.int32: (-(2**31), 2**31 - 1),
    torch.int64: (-(2**63), 2**63 - 1),
}


def _reference_fits(value, dtype: torch.dtype) -> bool:
    """The same rules with struct's IEEE packing and literal ranges: no torch, no shared code."""
    if isinstance(value, bool):
        return dtype is torch.bool
    if not isinstance(value, (int, float)):
        return False
    if dtype is torch.bool:
        return value == 0 or value == 1
    if dtype in _INT_RANGES:
        if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
            return False
        lo, hi = _INT_RANGES[dtype]
        return lo <= value <= hi
    if isinstance(value, float) and not math.isfinite(value):
        return True
    try:
        x = float(value)
    except OverflowError:
        return False
    if x != value:  # an int that float64 rounds
        return False
    if dtype is torch.float64:
        return True
    fmt = "<e" if dtype is torch.float16 else "<f"
    try:
        packed = struct.pack(fmt, x)
    except OverflowError:
        return False
    if struct.unpack(fmt, packed)[0] != x:
        return False
    # bfloat16 is float32 with the low 16 mantissa bits dropped.
    return dtype is not torch.bfloat16 or struct.unpack("<I", packed)[0] & 0xFFFF == 0


_EDGES = [0, 1, -1, 2, 127, 128, -128, -129, 255, 256, 32767, 32768, 2**31, 2**31 - 1, 2**53 + 1, 2**63 - 1]
_EDGES += [2**63, -(2**63), -(2**63) - 1, 2**64, 2**24 + 1, 2**24, 257, 65504, 65505, 65520, 2**128, 10**400]
_FLOAT_EDGES = [0.0, -0.0, 0.5, 0.1, 1.5, 65504.0, 65519.0, 65520.0, 3.4028234663852886e38, 3.4e38, 1e40, 5.96e-8]
_FLOAT_EDGES += [
    2.0**-24,
    2.0**-25,
    2.0**-149,
    2.0**-150,
    2.0**-133,
    1e-45,
    1e300,
    5e-324,
    math.inf,
    -math.inf,
    math.nan,
]
fill_values = st.one_of(
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.sampled_from(_EDGES).flatmap(lambda n: st.sampled_from([n, -n, n - 1, n + 1])),
    st.floats(),
    st.floats(width=16),
    st.floats(width=32),
    st.sampled_from(_FLOAT_EDGES).flatmap(lambda x: st.sampled_from([x, -x, math.nextafter(x, math.inf)])),
    st.integers(-(2**30), 2**30).map(lambda n: n * 2.0**-20),  # dyadic: exact in some dtypes, not others
)


# The values that break a dtype are a few edges among the nine value families (float16 subnormals,
# bfloat16's dropped mantissa bits, integers just past a range): fifteen times the profile's budget
# meets each family with each of the ten dtypes many times over, and an example costs ~1 ms.
@settings(max_examples=15 * settings().max_examples)
@given(fill_values, st.sampled_from(DTYPES))
def test_fill_fits_dtype_matches_the_reference(value, dtype: torch.dtype) -> None:
    assert fill_fits_dtype(value, dtype) == _reference_fits(value, dtype)


@settings(max_examples=5 * settings().max_examples)  # as above: the edges are few among the values drawn
@given(fill_values, st.sampled_from(DTYPES))
def test_a_fill_that_fits_round_trips_through_torch(value, dtype: torch.dtype) -> None:
    if not fill_fits_dtype(value, dtype):
        return
    scalar = float(value) if isinstance(value, int) and not -(2**63) <= value < 2**63 else value
    back = torch.full((2,), scalar, dtype=dtype).tolist()  # what padding writes
    assert all(b == value or (b != b and value != value) for b in back)


@pytest.mark.parametrize("value", ["0", None, [0], 1j, object(), b"\x00"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fill_fits_dtype_refuses_non_numbers_without_raising(value, dtype: torch.dtype) -> None:
    assert fill_fits_dtype(value, dtype) is False


@pytest.mark.parametrize(
    ("value", "dtype", "fits"),
    [
        pytest.param(127, torch.int8, True, id="int8-max"),
        pytest.param(128, torch.int8, False, id="int8-max+1"),
        pytest.param(-1, torch.uint8, False, id="uint8-negative"),
        pytest.param(2.0, torch.int64, True, id="integral-float-on-int"),
        pytest.param(True, torch.bool, True, id="true-bool"),
        pytest.param(1, torch.bool, True, id="1-bool"),
        pytest.param(2, torch.bool, False, id="2-bool"),
        pytest.param(True, torch.int64, False, id="true-int64"),
        pytest.param(False, torch.float32, False, id="false-float32"),
        pytest.param(65504.0, torch.float16, True, id="float16-max"),
        pytest.param(65520.0, torch.float16, False, id="float16-overflow"),
        pytest.param(2.0**-24, torch.float16, True, id="float16-smallest-subnormal"),
        pytest.param(2.0**-25, torch.float16, False, id="float16-underflow"),
        pytest.param(2.0**-133, torch.bfloat16, True, id="bfloat16-subnormal"),
        pytest.param(2**24 + 1, torch.float32, False, id="float32-odd-int"),
        pytest.param(2**24 + 2, torch.float32, True, id="float32-even-int"),
        pytest.param(2**1023, torch.float64, True, id="float64-huge-power-of-two"),
        pytest.param(10**400, torch.float64, False, id="float64-beyond"),
        pytest.param(math.nan, torch.bfloat16, True, id="nan-bfloat16"),
        pytest.param(math.inf, torch.int64, False, id="inf-int64"),
    ],
)
def test_fill_fits_dtype_cases(value, dtype: torch.dtype, fits: bool) -> None:
    assert fill_fits_dtype(value, dtype) is fits


# ---------------------------------------------------------------------------
# The fill against the field's own values/min/max/finite, as Python compares


def _one(field: dict) -> ts.Schema:
    return ts.schema_from_dict({"name": "one", "dims": {"n": {"min": 1}}, "padding": {"n": 2}, "fields": {"t": field}})


FILL_CHECKS_PASS = [
    pytest.param({"kind": "any", "pad": True, "values": [0, 1]}, id="true-in-values-0-1"),
    pytest.param({"kind": "any", "pad": False, "values": [0.0]}, id="false-equals-0.0"),
    pytest.param({"shape": ["n"], "dtype": "float32", "pad": -0.0, "min": 0}, id="minus-zero-passes-min-0"),
    pytest.param({"shape": ["n"], "dtype": "int64", "pad": 0, "values": [0.0, 1.0]}, id="0-equals-0.0"),
    pytest.param({"shape": ["n"], "dtype": "int64", "pad": 5, "min": 5, "max": 5}, id="fill-at-both-bounds"),
    pytest.param({"shape": ["n"], "dtype": "int64", "pad": 3, "min": 2.5, "max": 3.5}, id="float-bounds-on-int"),
    pytest.param({"shape": ["n"], "dtype": "bool", "pad": 1, "values": [True]}, id="1-on-bool-equals-true"),
    pytest.param({"shape": ["n"], "dtype": "float32", "pad": math.inf}, id="inf-without-finite"),
    pytest.param({"shape": ["n"], "dtype": "float32", "pad": math.nan}, id="nan-without-checks"),
    pytest.param({"kind": "float", "pad": 10**30, "max": 1e31}, id="huge-int-under-float-max"),
    pytest.param({"kind": "int", "pad": 0, "min": -(10**40)}, id="huge-negative-min-on-int-kind"),
    pytest.param({"shape": ["n"], "dtype": "int64", "pad": "positions", "min": 0, "max": 10}, id="positions-in-bounds"),
]


@pytest.mark.parametrize("field", FILL_CHECKS_PASS)
def test_fills_that_pass_their_checks_load_and_pad(field: dict) -> None:
    schema = _one(field)
    pad = schema.padding(3, eos_token_id=1)
    schema.validate_batch(pad.fields, tags=pad.tags)


FILL_CHECKS_FAIL = [
    pytest.param({"kind": "any", "pad": 2, "values": [0, 1]}, "be in values [0, 1]", id="2-not-in-values"),
    pytest.param({"shape": ["n"], "dtype": "int64", "pad": 4, "min": 4.5}, "be >= min 4.5", id="below-float-min"),
    pytest.param({"shape": ["n"], "dtype": "int64", "pad": 6, "max": 5}, "be <= max 5", id="above-max"),
    pytest.param({"shape": ["n"], "dtype": "float32", "pad": math.nan, "max": 1}, "be <= max 1", id="nan-breaks-max"),
    pytest.param({"kind": "float", "pad": -math.inf, "finite": True}, "be finite", id="minus-inf-not-finite"),
    pytest.param({"kind": "int", "pad": 10**30, "max": 10**30 - 1}, f"be <= max {10**30 - 1}", id="huge-int-above-max"),
    pytest.param({"shape": ["n"], "dtype": "bool", "pad": False, "values": [True]}, "be in values [true]", id="false"),
]


@pytest.mark.parametrize(("field", "problem"), FILL_CHECKS_FAIL)
def test_fills_that_break_their_checks_are_refused(field: dict, problem: str) -> None:
    with pytest.raises(ts.SchemaDefinitionError) as info:
        _one(field)
    assert info.value.path == "fields.t.pad"
    assert info.value.problem.endswith(f"must itself pass the field's value checks ({problem})"), info.value.problem


@pytest.mark.parametrize(
    "field",
    [
        pytest.param({"shape": ["n"], "dtype": "bool", "pad": 0}, id="0-on-bool"),
        pytest.param({"shape": ["n"], "dtype": "bool", "pad": True}, id="true-on-bool"),
        pytest.param({"shape": ["n"], "dtype": ["bool", "int64"], "pad": 1, "values": [0, 1]}, id="mask-bool-or-int"),
        pytest.param({"shape": ["n"], "dtype": "bool", "pad": True, "values": [True]}, id="values-on-bool"),
        pytest.param(
            {"shape": ["n"], "dtype": ["int16", "int32"], "pad": 0, "values": [0, 40000]}, id="values-one-dtype"
        ),
        pytest.param({"shape": ["n"], "dtype": "float32", "pad": 0.0, "max": 10**30}, id="huge-int-max-on-float"),
        pytest.param({"shape": ["n"], "dtype": "uint8", "pad": 0, "min": -5}, id="vacuous-min-on-uint8"),
        pytest.param({"shape": ("n",), "dtype": ("int64",), "pad": 0}, id="tuples-from-python"),
        pytest.param({"kind": "any", "pad": True}, id="bool-fill-on-any"),
    ],
)
def test_accepted_fields(field: dict) -> None:
    schema = _one(field)
    pad = schema.padding(2, eos_token_id=1)
    schema.validate_batch(pad.fields, tags=pad.tags)


# ---------------------------------------------------------------------------
# Malformed schema files: file, key path and problem in every message


MALFORMED = [
    pytest.param(
        _edit("[seq]", "[sq]"),
        "fields.input_ids.shape[0]",
        "unknown dim 'sq'; did you mean 'seq'?",
        id="unknown-dim-in-shape",
    ),
    pytest.param(
        _edit("int64", "flaot32"),
        "fields.input_ids.dtype",
        "unknown dtype 'flaot32'; did you mean 'float32'?",
        id="unknown-dtype",
    ),
    pytest.param(
        _edit("int64", "int"), "fields.input_ids.dtype", "ambiguous dtype 'int'; did you mean int64", id="dtype-int"
    ),
    pytest.param(
        _edit("int64", "long"), "fields.input_ids.dtype", "ambiguous dtype 'long'; did you mean int64?", id="dtype-long"
    ),
    pytest.param(
        _edit("int64", "float"),
        "fields.input_ids.dtype",
        "ambiguous dtype 'float'; did you mean float32",
        id="dtype-float",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: []"),
        "fields.input_ids.dtype",
        "an empty dtype list allows nothing",
        id="dtype-empty-list",
    ),
    pytest.param(
        _edit("pad: eos", "pad: eso"),
        "fields.input_ids.pad",
        "unknown pad rule 'eso'; did you mean 'eos'?",
        id="unknown-pad-rule",
    ),
    pytest.param(
        _edit(", pad: eos", ""), "fields.input_ids.pad", "field 'input_ids' has no pad rule", id="missing-pad-rule"
    ),
    pytest.param(
        _edit("kind: str", "kind: string"),
        "fields.uid.kind",
        "unknown kind 'string'; did you mean 'str'?",
        id="unknown-kind",
    ),
    pytest.param(
        _edit(", dtype: int64", ""),
        "fields.input_ids",
        "needs both shape and dtype (dtype is missing)",
        id="tensor-without-dtype",
    ),
    pytest.param(
        _edit("{shape: [seq], ", "{"),
        "fields.input_ids",
        "needs both shape and dtype (shape is missing)",
        id="tensor-without-shape",
    ),
    pytest.param(
        _edit("kind: str,", "kind: str, shape: [seq],"),
        "fields.uid",
        "a 'str' field has no shape or dtype",
        id="kind-with-shape",
    ),
    pytest.param(
        _edit("pad: eos", "pad: uid"),
        "fields.input_ids.pad",
        "pad rule 'uid' does not fit a 'tensor' field",
        id="uid-pad-on-tensor",
    ),
    pytest.param(
        _edit("pad: uid", "pad: positions"),
        "fields.uid.pad",
        "pad rule 'positions' does not fit a 'str' field",
        id="positions-pad-on-str",
    ),
    pytest.param(
        _edit("pad: uid", "pad: 0"),
        "fields.uid.pad",
        "a 'str' field cannot be filled with the number 0",
        id="number-pad-on-str",
    ),
    pytest.param(
        _edit("pad: eos", "pad: 0.5"),
        "fields.input_ids.pad",
        "fill 0.5 does not fit dtype int64: it is not an integer",
        id="fractional-pad-on-int-tensor",
    ),
    pytest.param(
        _edit("pad: uid}", "pad: uid, min: 0}"),
        "fields.uid.min",
        "min applies to tensors, int and float",
        id="min-on-str",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: prompt +"),
        "dims.seq",
        "'prompt +' ends too early",
        id="bad-derived-dim-expression",
    ),
    pytest.param(
        _edit("[seq]", "['prompt, response']"),
        "fields.input_ids.shape[0]",
        "contains a comma; list each dim as its own item: [prompt, response]",
        id="comma-in-shape",
    ),
    pytest.param(
        _edit("[seq]", "['seq / 2']"), "fields.input_ids.shape[0]", "division is not supported", id="division-in-shape"
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  a: b + 1\n  b: a - 1\n"),
        "dims.a",
        "dims depend on each other in a cycle: a -> b -> a",
        id="derived-dim-cycle",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: -1"),
        "dims.rope_rows",
        "a fixed dim cannot be negative",
        id="negative-fixed-dim",
    ),
    pytest.param(
        _edit("response: {}", "response: {min: 5, max: 2}"), "dims.response", "max 2 is below min 5", id="max-below-min"
    ),
    pytest.param(_edit("rope_rows: 4", "2rows: 4"), "dims.2rows", "is not an identifier", id="dim-name-not-identifier"),
    pytest.param(
        BASE + "tags:\n  plen: {equals: promt}\n",
        "tags.plen.equals",
        "unknown dim 'promt'; did you mean",
        id="tag-equals-unknown-dim",
    ),
    pytest.param(
        _edit("fields:", "feilds:"),
        "",
        "unknown key 'feilds'; did you mean 'fields'?",
        id="unknown-top-level-key",
    ),
    pytest.param(
        _edit("pad: eos}", "pad: eos, requried: false}"),
        "fields.input_ids",
        "unknown key 'requried'; did you mean 'required'?",
        id="unknown-key-in-field",
    ),
    pytest.param(
        _edit("prompt: {min: 1}", "prompt: {minn: 1}"),
        "dims.prompt",
        "unknown key 'minn'",
        id="unknown-key-in-free-dim",
    ),
    pytest.param(BASE.replace("name: bad\n", ""), "", "missing required key 'name'", id="missing-name"),
    pytest.param(
        BASE + "padding:\n  promt: 3\n",
        "padding.promt",
        "unknown dim 'promt'; did you mean 'prompt'?",
        id="padding-unknown-dim",
    ),
    pytest.param(
        BASE + "padding:\n  rope_rows: 4\n",
        "padding.rope_rows",
        "only free dims take a padding size",
        id="padding-fixed-dim",
    ),
    pytest.param(
        BASE + "padding:\n  seq: 4\n", "padding.seq", "only free dims take a padding size", id="padding-derived-dim"
    ),
    pytest.param(
        BASE + "padding:\n  prompt: 0\n",
        "padding.prompt",
        "padding size 0 breaks the dim's bounds (>= 1)",
        id="padding-below-min",
    ),
    pytest.param(
        "name: bad\nfields:\n  input_ids: {shape: [seq, dtype: int64, pad: eos}\n",
        "line 3, column 50",
        "invalid YAML",
        id="invalid-yaml",
    ),
    pytest.param(
        "- a\n- b\n", "", "expected a mapping at the top level (name:, fields:, ...), found a list", id="top-level-list"
    ),
    pytest.param(
        "", "", "expected a mapping at the top level (name:, fields:, ...), found an empty file", id="empty-file"
    ),
    pytest.param(
        BASE + "extra: maybe\n", "extra", "expected 'allow' or 'forbid', found a string 'maybe'", id="extra-maybe"
    ),
    pytest.param(BASE + "extends: 3\n", "extends", "expected a list, found an integer 3", id="extends-not-a-list"),
]


# ---------------------------------------------------------------------------
# Numbers: NaN/inf, bounds, values, bools where ints are meant, YAML 1.1 floats


REFUSED_NUMBERS = [
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, min: .nan"),
        "fields.x.min",
        "min must be finite, found nan; leave min out for no bound",
        id="min-nan",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, max: .inf"),
        "fields.x.max",
        "max must be finite, found inf",
        id="max-inf",
    ),
    pytest.param(
        _field("kind: float, pad: 0.0, min: -.inf"),
        "fields.x.min",
        "min must be finite, found -inf",
        id="min-minus-inf",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, values: [.nan, 0.0]"),
        "fields.x.values[0]",
        "nan equals nothing, not even itself; drop it",
        id="values-nan",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [0, .inf]"),
        "fields.x.values[1]",
        "inf can never match: no int64 value equals it (it is not an integer)",
        id="values-inf-on-int",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: .nan"),
        "fields.x.pad",
        "fill nan does not fit dtype int64: it is not an integer",
        id="pad-nan-on-int",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: .inf, finite: true"),
        "fields.x.pad",
        "fill inf must itself pass the field's value checks (be finite)",
        id="pad-inf-finite",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: .nan, min: 0"),
        "fields.x.pad",
        "fill nan must itself pass the field's value checks (be >= min 0)",
        id="pad-nan-breaks-min",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, min: 5, max: 1"),
        "fields.x",
        "min 5 is above max 1; no value passes",
        id="min-above-max",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [0, a]"),
        "fields.x.values[1]",
        "expected a number, found a string 'a'",
        id="values-string",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [0, [1]]"),
        "fields.x.values[1]",
        "expected a number, found a list [1]",
        id="values-nested-list",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: []"),
        "fields.x.values",
        "an empty values list allows nothing",
        id="values-empty",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: 0"),
        "fields.x.values",
        "expected a list, found an integer 0",
        id="values-scalar",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [0, 1, 0.0]"),
        "fields.x.values[2]",
        "0.0 is listed twice (as Python compares: true == 1, 0.0 == 0)",
        id="values-twice",
    ),
    pytest.param(
        _field("kind: any, pad: 0, values: [0, 1, true]"),
        "fields.x.values[2]",
        "true is listed twice",
        id="values-true-is-1",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [no, yes]"),
        "fields.x.values[0]",
        "false can never match: it is a boolean, but the field holds none; write 0 for the number",
        id="values-yaml11-booleans",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int8, pad: 0, values: [0, 300]"),
        "fields.x.values[1]",
        "300 can never match: no int8 value equals it (int8 holds -128..127)",
        id="values-beyond-dtype",
    ),
    pytest.param(
        _field("shape: [seq], dtype: [int8, uint8], pad: 0, values: [0, -200]"),
        "fields.x.values[1]",
        "no int8 value equals it (int8 holds -128..127); no uint8 value equals it (uint8 holds 0..255)",
        id="values-beyond-every-dtype",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float16, pad: 0.0, values: [0.0, 0.1]"),
        "fields.x.values[1]",
        "no float16 value equals it (not exactly a float16 value (the nearest is 0.0999755859375))",
        id="values-not-exact-float",
    ),
    pytest.param(
        _field("kind: int, pad: 0, values: [0, 0.5]"),
        "fields.x.values[1]",
        "0.5 can never match: no value of an 'int' field equals it",
        id="values-fraction-on-int-kind",
    ),
    pytest.param(
        _field("kind: bool, pad: false, values: [false, 2]"),
        "fields.x.values[1]",
        "a 'bool' field holds only true and false",
        id="values-2-on-bool-kind",
    ),
    pytest.param(
        _edit("pad: uid}", "pad: uid, values: [1]}"),
        "fields.uid.values",
        "values lists numbers; it does not apply to a 'str' field",
        id="values-on-str",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, min: true"),
        "fields.x.min",
        "expected a number or a dim expression (experts - 1), found a boolean true",
        id="min-bool",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, max: 1e5"),
        "fields.x.max",
        "expected a number or a dim expression (experts - 1), found a string '1e5' (YAML reads '1e5' as a "
        "string: write a float with a dot "
        "and a signed exponent, e.g. 1.0e+5)",
        id="max-yaml11-exponent",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 1.0e5"),
        "fields.x.pad",
        "unknown pad rule '1.0e5'",
        id="pad-yaml11-exponent",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, min: 1000000000000000000000000000000"),
        "fields.x.min",
        "min 1000000000000000000000000000000 is above every value of int64; no element passes",
        id="min-10e30-on-int64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: [uint8, bool], pad: 0, max: -1"),
        "fields.x.max",
        "max -1 is below every value of uint8 and bool; no element passes",
        id="max-below-every-dtype",
    ),
    pytest.param(
        _field("kind: str, pad: uid, finite: true"),
        "fields.x.finite",
        "finite applies to tensors and float, not 'str'",
        id="finite-on-str",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, finite: 1"),
        "fields.x.finite",
        "expected true or false, found an integer 1",
        id="finite-int",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, required: 'no'"),
        "fields.x.required",
        "expected true or false, found a string 'no'",
        id="required-string",
    ),
    pytest.param(
        BASE.replace("  rope_rows: 4\n", "  a: " + "9" * 5000 + "\n"),
        "dims.a",
        "an integer literal of 5000 characters (line 6); the limit is 100",
        id="int-literal-5000-digits",
    ),
]


# ---------------------------------------------------------------------------
# Dims, shapes and expressions: sizes torch cannot hold, recursion, cycles


REFUSED_DIMS = [
    pytest.param(
        _edit("rope_rows: 4", f"rope_rows: {HUGE}"),
        "dims.rope_rows",
        f"a fixed dim of {HUGE} is larger than 2**63 - 1, the largest size torch can hold",
        id="fixed-dim-2**70",
    ),
    pytest.param(
        _edit("rope_rows: 4", f"rope_rows: {{size: {HUGE}}}"),
        "dims.rope_rows.size",
        f"{HUGE} is larger than 2**63 - 1",
        id="fixed-dim-mapping-2**70",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: {size: -1}"),
        "dims.rope_rows.size",
        "must be >= 0, found -1",
        id="fixed-dim-mapping-negative",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: true"),
        "dims.rope_rows",
        "expected a size (4), an expression (prompt + response) or a mapping ({min: 1}), found a boolean true",
        id="dim-bool",
    ),
    pytest.param(_edit("rope_rows: 4", "rope_rows: 4.0"), "dims.rope_rows", "found a number 4.0", id="dim-float"),
    pytest.param(_edit("rope_rows: 4", "rope_rows:"), "dims.rope_rows", "found null", id="dim-null"),
    pytest.param(_edit("rope_rows: 4", "rope_rows: [4]"), "dims.rope_rows", "found a list [4]", id="dim-list"),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: {size: 4, min: 1}"),
        "dims.rope_rows",
        "a dim is fixed (size), derived (expr) or free (min, max, multiple_of), not "
        "fixed (size) and free (min, max, multiple_of) at once",
        id="dim-fixed-and-free",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: {size: 4, expr: prompt}"),
        "dims.rope_rows",
        "not fixed (size) and derived (expr) at once",
        id="dim-fixed-and-derived",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: {size: 4, descripton: rows}"),
        "dims.rope_rows",
        "unknown key 'descripton'; did you mean 'description'?",
        id="dim-mapping-unknown-key",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: {expr: 3}"),
        "dims.seq.expr",
        "expected a string, found an integer 3",
        id="derived-dim-expr-int",
    ),
    pytest.param(
        _edit("response: {}", "response: {description: 3}"),
        "dims.response.description",
        "expected a string, found an integer 3",
        id="dim-description-int",
    ),
    pytest.param(
        _edit("response: {}", "response: {min: true}"),
        "dims.response.min",
        "expected an integer, found a boolean true",
        id="free-dim-min-bool",
    ),
    pytest.param(
        _edit("response: {}", "response: {min: '3'}"),
        "dims.response.min",
        "expected an integer, found a string '3'",
        id="free-dim-min-string",
    ),
    pytest.param(
        _edit("response: {}", "response: {multiple_of: 0}"),
        "dims.response.multiple_of",
        "must be > 0, found 0",
        id="multiple-of-0",
    ),
    pytest.param(
        _edit("response: {}", f"response: {{multiple_of: {HUGE}}}"),
        "dims.response.multiple_of",
        "is larger than 2**63 - 1",
        id="multiple-of-2**70",
    ),
    pytest.param(
        _edit("response: {}", "response: {min: 3, max: 4, multiple_of: 5}"),
        "dims.response",
        "no size is >= 3, <= 4 and a multiple of 5",
        id="free-dim-unsatisfiable",
    ),
    pytest.param(
        _edit("[seq]", f"[{HUGE}]"),
        "fields.input_ids.shape[0]",
        f"the integer {HUGE} is larger than 2**63 - 1",
        id="shape-literal-2**70",
    ),
    pytest.param(
        _edit("[seq]", f"['seq * {HUGE}']"),
        "fields.input_ids.shape[0]",
        f"the integer {HUGE} is larger than 2**63 - 1",
        id="shape-expression-literal-2**70",
    ),
    pytest.param(
        _edit("seq: prompt + response", f"seq: prompt + {HUGE}"),
        "dims.seq",
        f"the integer {HUGE} is larger",
        id="derived-literal-2**70",
    ),
    pytest.param(
        _edit("[seq]", "[-3]"),
        "fields.input_ids.shape[0]",
        "a dim size cannot be negative, found -3",
        id="shape-negative",
    ),
    pytest.param(
        _edit("[seq]", "['-3']"),
        "fields.input_ids.shape[0]",
        "dim expression '-3' is always -3, not a size",
        id="shape-negative-expression",
    ),
    pytest.param(
        _edit("[seq]", "['2 - 5']"),
        "fields.input_ids.shape[0]",
        "is always -3, not a size",
        id="shape-constant-negative",
    ),
    pytest.param(
        _edit("[seq]", "['9223372036854775807 + 1']"),
        "fields.input_ids.shape[0]",
        "is always 9223372036854775808, not a size",
        id="shape-constant-overflow",
    ),
    pytest.param(
        _edit("[seq]", "[1.5]"),
        "fields.input_ids.shape[0]",
        "expected a dim name, expression or integer, found float 1.5",
        id="shape-float",
    ),
    pytest.param(_edit("[seq]", "[true]"), "fields.input_ids.shape[0]", "found True", id="shape-bool"),
    pytest.param(
        _edit("[seq]", "seq"), "fields.input_ids.shape", "expected a list, found a string 'seq'", id="shape-str"
    ),
    pytest.param(
        _edit("[seq]", "!!set {seq}"), "fields.input_ids.shape", "expected a list, found a set", id="shape-set"
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: '" + " + ".join(["prompt"] * 30) + "'"),
        "dims.seq",
        "a dim expression of 267 characters; the limit is 200",
        id="expression-too-long",
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  a: {}\n  b: '" + "a+" * 40 + "a'\n"),
        "dims.b",
        "nests more than 32 levels deep",
        id="expression-too-deep",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: '" + "-" * 50 + "prompt'"),
        "dims.seq",
        "nests more than 32 levels deep",
        id="expression-negations",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: prompt + respnse"),
        "dims.seq",
        "unknown dim 'respnse'; did you mean 'response'?",
        id="derived-unknown-dim",
    ),
    pytest.param(
        _edit(
            "  rope_rows: 4\n",
            "  rope_rows: 4\n" + "".join(f"  d{i}: d{i + 1} + 1\n" for i in range(40)) + "  d40: {}\n",
        ),
        "dims.d7",
        "derived dims chain more than 32 deep",
        id="derived-chain-40",
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  a: b\n  b: c\n  c: a\n"),
        "dims.a",
        "dims depend on each other in a cycle: a -> b -> c -> a",
        id="derived-cycle-3",
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  a: a + 1\n"),
        "dims.a",
        "dims depend on each other in a cycle: a -> a",
        id="derived-self",
    ),
    pytest.param(
        _edit("response: {}", "response: {max: 0}").replace("[seq]", "['response - 1']"),
        "fields.input_ids.shape[0]",
        "response - 1 is at most -1 for every size the dims allow; a size cannot be negative",
        id="shape-always-negative",
    ),
    pytest.param(
        _edit("response: {}", "response: {max: 1, multiple_of: 2}").replace("[seq]", "['2 * response - 1']"),
        "fields.input_ids.shape[0]",
        "2 * response - 1 is at most -1",
        id="shape-negative-for-the-only-allowed-size",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: rope_rows - prompt - 4"),
        "dims.seq",
        "rope_rows - prompt - 4 is at most -1 for every size the dims allow",
        id="derived-always-negative",
    ),
    pytest.param("name: bad\ndims: [prompt]\n", "dims", "expected a mapping, found a list ['prompt']", id="dims-list"),
]


# ---------------------------------------------------------------------------
# Fields: dtypes, kinds, pad fills that a dtype cannot hold, pad rules


REFUSED_FIELDS = [
    # --- bounds written in dims and distinct slices (issue 16)
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, max: expert - 1"),
        "fields.x.max",
        "unknown dim 'expert'",
        id="dim-bound-unknown-dim",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, max: respons"),
        "fields.x.max",
        "did you mean 'response'?",
        id="dim-bound-did-you-mean",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, max: '5'"),
        "fields.x.max",
        "'5' names no dim; write the number 5 for a bound that never changes",
        id="dim-bound-without-a-dim",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, max: 'seq, 2'"),
        "fields.x.max",
        "contains a comma",
        id="dim-bound-with-a-comma",
    ),
    pytest.param(
        _field("kind: str, pad: uid, max: seq"),
        "fields.x.max",
        "max applies to tensors, int and float, not 'str'",
        id="dim-bound-on-a-str",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 5, min: 5, max: rope_rows - 1"),
        "fields.x.max",
        "max rope_rows - 1 is at most 3, below min 5, for every size the dims allow; no value passes",
        id="dim-bound-below-min",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: copy, min: prompt, max: prompt - 1"),
        "fields.x.max",
        "max prompt - 1 is below min prompt (by 1 or more) for every size the dims allow; no value passes",
        id="dim-bounds-that-cross",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: copy, min: 2 * seq, max: seq"),
        "fields.x.max",
        "max seq is below min 2 * seq (by 1 or more) for every size the dims allow",
        id="dim-bounds-that-cross-term-by-term",
    ),
    pytest.param(
        _field("shape: [seq], dtype: uint8, pad: 0, max: prompt + 300"),
        "fields.x.dtype",
        "uint8 cannot hold 301, the smallest value max prompt + 300 takes for the sizes the dims allow",
        id="dim-bound-beyond-every-dtype-value",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 9, max: rope_rows"),
        "fields.x.pad",
        "fill 9 breaks max rope_rows (at most 4) for every size the dims allow",
        id="dim-bound-breaks-the-fill",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: -1, min: prompt - 1"),
        "fields.x.pad",
        "fill -1 breaks min prompt - 1 (at least 0) for every size the dims allow",
        id="dim-bound-min-breaks-the-fill",
    ),
    pytest.param(
        _field("kind: int, pad: index, max: seq"),
        "fields.x.pad",
        "pad rule 'index' numbers padding samples 0, 1, 2, ... without bound, which max seq cannot keep to",
        id="dim-bound-index",
    ),
    pytest.param(
        _field("shape: [seq, rope_rows], dtype: int64, pad: 0, distinct: true"),
        "fields.x.pad",
        "fill 0 puts one value in every slot, which repeats along the last axis (rope_rows) when it has 2+ slots; "
        "spread ids over a dim instead (pad: {spread: experts})",
        id="distinct-constant-fill",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: eos, distinct: true"),
        "fields.x.pad",
        "pad rule 'eos' puts one value in every slot",
        id="distinct-eos",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: spread"),
        "fields.x.pad",
        "pad rule 'spread' needs the dim that counts the ids: write {spread: experts}",
        id="spread-without-its-dim",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: {spread: prompt}, min: 1"),
        "fields.x.pad",
        "pad rule {spread: prompt} fills 0, 1, 2, ..., and 0 breaks the field's value checks (be >= min 1)",
        id="spread-min-above-0",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: {spread: prompt}, values: [1, 2, 3]"),
        "fields.x.pad",
        "pad rule {spread: prompt} fills 0, 1, 2, ..., and 0 breaks the field's value checks (be in values [1, 2, 3])",
        id="spread-values-without-0",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: {spread: prompt}, min: prompt"),
        "fields.x.pad",
        "pad rule {spread: prompt} starts at 0, which breaks min prompt (at least 1) for every size the dims allow",
        id="spread-dim-min-above-0",
    ),
    pytest.param(
        _field("shape: [], dtype: int64, pad: copy, distinct: true"),
        "fields.x.distinct",
        "distinct applies along the last axis; a 0-d field has none",
        id="distinct-0d",
    ),
    pytest.param(
        _field("kind: int, pad: 0, distinct: true"),
        "fields.x.distinct",
        "distinct applies along a tensor's last axis, not to a 'int' field",
        id="distinct-non-tensor",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: copy, distinct: yes please"),
        "fields.x.distinct",
        "expected true or false",
        id="distinct-not-a-bool",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: [int64, int64]"),
        "fields.input_ids.dtype",
        "dtype int64 is listed twice",
        id="dtype-twice",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: [int64, torch.int64]"),
        "fields.input_ids.dtype",
        "dtype int64 is listed twice",
        id="dtype-twice-spelled-differently",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: [[int64]]"),
        "fields.input_ids.dtype[0]",
        "expected a torch dtype name, found a list ['int64']",
        id="dtype-nested-list",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: 64"),
        "fields.input_ids.dtype",
        "expected a torch dtype name, found an integer 64",
        id="dtype-int",
    ),
    pytest.param(
        _edit("{shape: [seq], ", "{kind: tensor, "),
        "fields.input_ids",
        "a tensor field needs both shape and dtype (shape is missing)",
        id="kind-tensor-without-shape",
    ),
    pytest.param(
        _edit("{shape: [seq], ", "{kind: Tensor, shape: [seq], "),
        "fields.input_ids.kind",
        "unknown kind 'Tensor'; did you mean 'tensor'?",
        id="kind-capitalised",
    ),
    pytest.param(
        BASE + "  x: 3\n", "fields.x", "expected a mapping (shape, dtype, pad, ...), found an integer 3", id="field-int"
    ),
    pytest.param("name: bad\nfields: [a]\n", "fields", "expected a mapping, found a list ['a']", id="fields-list"),
    pytest.param(
        _field("shape: [seq], dtype: int8, pad: 300"),
        "fields.x.pad",
        "fill 300 does not fit dtype int8: int8 holds -128..127",
        id="pad-300-int8",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 1.5"),
        "fields.x.pad",
        "fill 1.5 does not fit dtype int64: it is not an integer",
        id="pad-1.5-int64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: bool, pad: 2"),
        "fields.x.pad",
        "fill 2 does not fit dtype bool: bool holds only true and false, which equal 1 and 0",
        id="pad-2-bool",
    ),
    pytest.param(
        _field("shape: [seq], dtype: uint8, pad: -1"),
        "fields.x.pad",
        "fill -1 does not fit dtype uint8: uint8 holds 0..255",
        id="pad-minus-1-uint8",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float16, pad: 1.0e+40"),
        "fields.x.pad",
        "fill 1e+40 does not fit dtype float16: beyond float16's largest value 65504.0",
        id="pad-1e40-float16",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 1.0e+40"),
        "fields.x.pad",
        "fill 1e+40 does not fit dtype float32: beyond float32's largest value 3.4028234663852886e+38",
        id="pad-1e40-float32",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float16, pad: 65520.0"),
        "fields.x.pad",
        "beyond float16's largest value 65504.0",
        id="pad-rounds-to-inf-float16",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float16, pad: 1.0e-8"),
        "fields.x.pad",
        "fill 1e-08 does not fit dtype float16: not exactly a float16 value (the nearest is 0.0)",
        id="pad-underflows-float16",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.1"),
        "fields.x.pad",
        "fill 0.1 does not fit dtype float32: not exactly a float32 value (the nearest is 0.10000000149011612)",
        id="pad-0.1-float32",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 16777217"),
        "fields.x.pad",
        "fill 16777217 does not fit dtype float32: not exactly a float32 value",
        id="pad-2**24+1-float32",
    ),
    pytest.param(
        _field("shape: [seq], dtype: bfloat16, pad: 257"),
        "fields.x.pad",
        "not exactly a bfloat16 value",
        id="pad-257-bfloat16",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 9223372036854775808"),
        "fields.x.pad",
        "int64 holds -9223372036854775808..9223372036854775807",
        id="pad-2**63-int64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float64, pad: 18446744073709551616"),
        "fields.x.pad",
        "fill 18446744073709551616 is an integer beyond int64, which torch cannot take as a scalar; "
        "write it as a float (1.8446744073709552e+19)",
        id="pad-2**64-float64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: true"),
        "fields.x.pad",
        "fill true does not fit dtype int64: a boolean fills only a bool tensor; write 1 for the number",
        id="pad-true-int64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: off"),
        "fields.x.pad",
        "fill false does not fit dtype float32: a boolean fills only a bool tensor; write 0",
        id="pad-yaml11-off-float32",
    ),
    pytest.param(
        _field("shape: [seq], dtype: [int16, int8], pad: 200"),
        "fields.x.pad",
        "fill 200 does not fit dtype int8",
        id="pad-fits-only-one-listed-dtype",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: [0]"),
        "fields.x.pad",
        "expected a number or a pad rule (eos, positions, uid, index, empty, copy), found a list [0]",
        id="pad-list",
    ),
    pytest.param(
        _field("shape: [seq], dtype: bool, pad: eos"),
        "fields.x.pad",
        "pad rule 'eos' fills integers, which a bool tensor cannot hold",
        id="eos-on-bool",
    ),
    pytest.param(
        _field("shape: [], dtype: int64, pad: positions"),
        "fields.x.pad",
        "pad rule 'positions' counts along the last dim; a 0-d field has none",
        id="positions-on-0d",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: positions, min: 1"),
        "fields.x.pad",
        "pad rule 'positions' fills 0, 1, 2, ..., and 0 breaks the field's value checks (be >= min 1)",
        id="positions-break-min",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: positions, values: [1, 2]"),
        "fields.x.pad",
        "and 0 breaks the field's value checks (be in values [1, 2])",
        id="positions-break-values",
    ),
    pytest.param(
        _field("shape: [rope_rows], dtype: int64, pad: positions, max: 2"),
        "fields.x.pad",
        "pad rule 'positions' fills 0..3 (at the padding size), and 3 breaks max 2",
        id="positions-fixed-dim-break-max",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int8, pad: positions") + "padding: {prompt: 127, response: 129}\n",
        "fields.x.pad",
        "pad rule 'positions' fills 0..255 (at the padding size), and 255 does not fit int8",
        id="positions-overflow-int8-at-padding-size",
    ),
    pytest.param(
        _field("shape: [rope_rows], dtype: int64, pad: positions, values: [0, 1, 3]"),
        "fields.x.pad",
        "fills 0..3 (at the padding size), and 2 is not in values",
        id="positions-values-gap",
    ),
    pytest.param(
        _field("kind: int, pad: index, values: [0, 1]"),
        "fields.x.pad",
        "pad rule 'index' numbers padding samples 0, 1, 2, ... without bound, which values cannot keep to",
        id="index-with-values",
    ),
    pytest.param(
        _field("kind: int, pad: index, max: 5"), "fields.x.pad", "which max 5 cannot keep to", id="index-with-max"
    ),
    pytest.param(
        _field("kind: int, pad: index, min: 1"),
        "fields.x.pad",
        "pad rule 'index' fills 0, 1, 2, ..., and 0 breaks the field's value checks (be >= min 1)",
        id="index-break-min",
    ),
    pytest.param(
        _field("kind: any, pad: empty, values: [0]"),
        "fields.x.pad",
        "pad rule 'empty' fills an empty mapping, which no number in values equals",
        id="empty-with-values",
    ),
    pytest.param(
        _field("kind: int, pad: 1.0"),
        "fields.x.pad",
        "an 'int' field needs an integer fill, found 1.0",
        id="int-fill-1.0",
    ),
    pytest.param(
        _field("kind: float, pad: true"),
        "fields.x.pad",
        "a 'float' field needs a number fill, found true",
        id="float-fill-bool",
    ),
    pytest.param(
        _field("kind: bool, pad: 1"), "fields.x.pad", "a 'bool' field needs true or false, found 1", id="bool-fill-1"
    ),
    pytest.param(
        _field("kind: bool, pad: true, values: [false]"),
        "fields.x.pad",
        "fill true must itself pass the field's value checks (be in values [false])",
        id="bool-fill-breaks-values",
    ),
    pytest.param(
        _field("shape: ['prompt - response'], dtype: int64, pad: 0") + "padding: {prompt: 1, response: 5}\n",
        "fields.x.shape[0]",
        "prompt - response is -4 with the padding sizes (prompt=1, response=5); padding needs a size >= 0",
        id="inline-shape-negative-at-padding-sizes",
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  d: prompt - response\n")
        + "  x: {shape: [d], dtype: int64, pad: 0}\npadding: {prompt: 1, response: 5}\n",
        "dims.d",
        "prompt - response is -4 with the padding sizes (prompt=1, response=5)",
        id="derived-dim-negative-at-padding-sizes",
    ),
]


# ---------------------------------------------------------------------------
# Tags, padding sizes, extra


REFUSED_TAGS_AND_PADDING = [
    pytest.param(
        BASE + "tags:\n  x: {equals: 'seq +'}\n",
        "tags.x.equals",
        "dim expression 'seq +' ends too early",
        id="equals-bad",
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: promt}\n",
        "tags.x.equals",
        "unknown dim 'promt'; did you mean 'prompt'?",
        id="equals-unknown-dim",
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: true}\n",
        "tags.x.equals",
        "expected a dim name, expression or integer, found True",
        id="equals-bool",
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: '-1'}\n", "tags.x.equals", "is always -1, not a size", id="equals-negative"
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: seq, kind: str}\n",
        "tags.x.kind",
        "a tag with equals holds a dim size, an int, not 'str'",
        id="equals-with-kind-str",
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: seq, default: 3}\n",
        "tags.x.default",
        "a tag with equals takes its value from the dims; drop default",
        id="equals-with-default",
    ),
    pytest.param(
        BASE + "tags:\n  x: {kind: int, default: abc}\n",
        "tags.x.default",
        "the tag is 'int' but its default is a string 'abc'",
        id="default-wrong-kind",
    ),
    pytest.param(
        BASE + "tags:\n  x: {kind: any, default: [1]}\n",
        "tags.x.default",
        "a tag default is a number, a boolean or a string, found a list [1]",
        id="default-list",
    ),
    pytest.param(
        BASE + "tags:\n  is_padding: {kind: int}\n",
        "tags.is_padding",
        "padding samples carry is_padding: true and real ones may omit it, so this tag is {kind: bool, default: false}",
        id="is-padding-int",
    ),
    pytest.param(
        BASE + "tags:\n  is_padding: {kind: bool, default: true}\n",
        "tags.is_padding",
        "this tag is {kind: bool, default: false}",
        id="is-padding-default-true",
    ),
    pytest.param(
        BASE + "tags:\n  x: {knd: int}\n", "tags.x", "unknown key 'knd'; did you mean 'kind'?", id="tag-unknown-key"
    ),
    pytest.param(
        BASE + "tags:\n  x: 3\n",
        "tags.x",
        "expected a mapping (kind, equals, default, ...), found an integer 3",
        id="tag-not-a-mapping",
    ),
    pytest.param(BASE + "tags:\n  x: {kind: tensor}\n", "tags.x.kind", "unknown kind 'tensor'", id="tag-kind-tensor"),
    pytest.param(
        BASE + "padding: {rope_rows: 4}\n",
        "padding.rope_rows",
        "only free dims take a padding size; 'rope_rows' is FixedDim",
        id="padding-fixed-dim",
    ),
    pytest.param(
        BASE + "padding: {seq: 4}\n",
        "padding.seq",
        "only free dims take a padding size; 'seq' is DerivedDim",
        id="padding-derived-dim",
    ),
    pytest.param(
        BASE + "padding: {prompt: true}\n",
        "padding.prompt",
        "expected a size (an integer >= 0), found a boolean true",
        id="padding-bool",
    ),
    pytest.param(
        BASE + "padding: {prompt: '3'}\n",
        "padding.prompt",
        "expected a size (an integer >= 0), found a string '3'",
        id="padding-string",
    ),
    pytest.param(
        BASE + "padding: {prompt: -1}\n",
        "padding.prompt",
        "a padding size cannot be negative, found -1",
        id="padding-negative",
    ),
    pytest.param(
        BASE + f"padding: {{prompt: {HUGE}}}\n",
        "padding.prompt",
        f"padding size {HUGE} is larger than 2**63 - 1",
        id="padding-2**70",
    ),
    pytest.param(
        BASE + "padding: [prompt]\n",
        "padding",
        "expected a mapping, found a list ['prompt']",
        id="padding-not-a-mapping",
    ),
    pytest.param(BASE + "extra: 3\n", "extra", "expected 'allow' or 'forbid', found an integer 3", id="extra-int"),
    pytest.param(
        BASE + "extra: Allow\n", "extra", "expected 'allow' or 'forbid', found a string 'Allow'", id="extra-capitalised"
    ),
    pytest.param(BASE + "extra: [allow]\n", "extra", "found a list ['allow']", id="extra-list"),
]


#: Every table of malformed files above, under one body; each id is prefixed by its table.
#: (The tables of YAML and whole files are `tests/files/test_reader.py`'s, of names `test_syntax.py`'s.)
MALFORMED_FILES = prefixed(
    {
        "malformed": MALFORMED,
        "number": REFUSED_NUMBERS,
        "dim": REFUSED_DIMS,
        "field": REFUSED_FIELDS,
        "tag-and-padding": REFUSED_TAGS_AND_PADDING,
    }
)


@pytest.mark.parametrize(("text", "key_path", "problem"), MALFORMED_FILES)
def test_malformed_schema(tmp_path: Path, text: str | bytes, key_path: str, problem: str) -> None:
    """A SchemaDefinitionError at load time naming the file, the key path and the problem (``file: path: problem``)."""
    _check(tmp_path, text, key_path, problem)


def test_enough_malformed_cases() -> None:
    assert len(MALFORMED) >= 15


# ---------------------------------------------------------------------------
# extends: the file named is the one whose declaration is at fault
#
# A check that reads entries of several files (a padding size against its dim's bounds, a
# shape over dims, a cycle of derived dims, positions against the padding size) names the
# newest of them. Before, a child that redeclared a packaged dim was blamed on the packaged
# file, and a problem among inherited entries on whichever file was being loaded.


TEXT_YAML = str((ts.schema_search_path()[-1] / "text.yaml").resolve())


@pytest.mark.parametrize(
    ("bounds", "dim", "size", "describe", "fits"),
    [
        pytest.param("{min: 2}", "response", 1, ">= 2", 2, id="min-above-the-padding-size"),
        pytest.param("{min: 1, max: 10}", "prompt", 127, ">= 1 and <= 10", 8, id="max-below-the-padding-size"),
        pytest.param("{multiple_of: 2}", "response", 1, "a multiple of 2", 4, id="multiple-of"),
    ],
)
def test_a_redeclared_dim_that_refuses_the_inherited_padding_size_names_the_child(
    tmp_path: Path, bounds: str, dim: str, size: int, describe: str, fits: int
) -> None:
    child = _child(tmp_path, f"dims:\n  {dim}: {bounds}\n")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), f"dims.{dim}")  # before: text.yaml, padding.<dim>
    assert err.problem == (
        f"this declaration breaks padding.{dim}, which 'text' declares ({TEXT_YAML}): padding size {size} "
        f"breaks the dim's bounds ({describe}); change dims.{dim} here, or redeclare padding.{dim} here too"
    )
    # The fix it names works.
    _child(tmp_path, f"dims:\n  {dim}: {bounds}\npadding:\n  {dim}: {fits}\n")
    _bump_mtime(child)
    assert ts.load_schema(child).padding_sizes[dim] == fits


def test_a_file_that_declares_both_sides_is_named_at_the_entry_checked(tmp_path: Path) -> None:
    child = _child(tmp_path, "dims:\n  response: {min: 2}\npadding:\n  response: 1\n")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "padding.response")
    assert err.problem == "padding size 1 breaks the dim's bounds (>= 2)"


def test_a_grandchild_that_changes_nothing_names_the_child_that_did(tmp_path: Path) -> None:
    child = _child(tmp_path, "dims:\n  response: {min: 2}\n")
    grandchild = _child(tmp_path, "description: adds nothing\n", name="grandchild", parents="child")
    err, direct = _load_error(grandchild), _load_error(child)
    assert (err.source, err.path, err.problem) == (direct.source, direct.path, direct.problem)


def test_a_padding_size_that_overflows_an_inherited_derived_dim_names_the_padding_size(tmp_path: Path) -> None:
    child = _child(tmp_path, f"padding:\n  prompt: {2**63 - 1}\n")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "padding.prompt")  # before: the child, at dims.seq (text's key)
    assert err.problem.startswith(f"this declaration breaks dims.seq, which 'text' declares ({TEXT_YAML}): ")
    assert "prompt + response is 9223372036854775808 with the padding sizes" in err.problem


def test_a_fixed_dim_that_makes_a_parents_shape_negative_names_the_child(tmp_path: Path) -> None:
    parent = _child(
        tmp_path, "dims:\n  k: {min: 1}\nfields:\n  gap: {shape: [k - 1], dtype: int64, pad: 0}\n", "parent"
    )
    child = _child(tmp_path, "dims:\n  k: 0\n", parents="parent")
    assert ts.load_schema(parent).dims["k"] == ts.FreeDim("k", 1)
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.k")  # before: parent.yaml, fields.gap.shape[0]
    assert err.problem.startswith(f"this declaration breaks fields.gap.shape[0], which 'parent' declares ({parent}): ")
    assert "k - 1 is at most -1 for every size the dims allow" in err.problem


def test_a_dim_that_makes_a_parents_derived_dim_negative_names_the_child(tmp_path: Path) -> None:
    parent = _child(tmp_path, "dims:\n  total: {min: 0}\n  used: {min: 0}\n  gap: total - used\n", "parent")
    child = _child(tmp_path, "dims:\n  total: {max: 5}\n  used: {min: 10}\n", parents="parent")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.total")
    assert err.problem.startswith(f"this declaration breaks dims.gap, which 'parent' declares ({parent}): ")


def test_a_cycle_closed_by_a_child_names_the_child_and_reads_from_its_dim(tmp_path: Path) -> None:
    parent = _child(tmp_path, "dims:\n  a: b + 1\n  b: {min: 0}\n", "parent")
    child = _child(tmp_path, "dims:\n  b: a - 1\n", parents="parent")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.b")  # before: parent.yaml, dims.a
    assert err.problem == "dims depend on each other in a cycle: b -> a -> b (a as 'parent' declares it)"
    assert ts.load_schema(parent).dims["b"] == ts.FreeDim("b", 0)


def test_a_chain_of_derived_dims_made_too_long_by_a_child_names_the_child(tmp_path: Path) -> None:
    dims = "".join(f"  d{i}: d{i - 1} + 1\n" for i in range(1, 33))
    parent = _child(tmp_path, f"dims:\n  d0: {{min: 0}}\n{dims}", "parent")
    assert len(ts.load_schema(parent).dims) == 3 + 33
    child = _child(tmp_path, "dims:\n  d0: e + 1\n  e: {min: 0}\n", parents="parent")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.d0")
    assert "derived dims chain more than 32 deep" in err.problem


def test_a_padding_size_that_breaks_a_parents_positions_field_names_the_padding_size(tmp_path: Path) -> None:
    parent = _child(tmp_path, "fields:\n  position_ids: {shape: [seq], dtype: int8, pad: positions}\n", "parent")
    child = _child(tmp_path, "padding:\n  prompt: 200\n", parents="parent")
    assert ts.load_schema(parent).padding_sizes["prompt"] == 127  # 0..127 fits int8
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "padding.prompt")
    assert "pad rule 'positions' fills 0..200 (at the padding size), and 200 does not fit int8" in err.problem


def test_in_a_diamond_the_parent_that_redeclared_is_named(tmp_path: Path) -> None:
    left = _child(tmp_path, "dims:\n  response: {min: 2}\n", "left")
    _child(tmp_path, "description: right\n", "right")
    child = _child(tmp_path, "", parents="left, right")
    err = _load_error(child)
    assert (err.source, err.path) == (str(left), "dims.response")
    assert _load_error(left).problem == err.problem


def test_parents_that_each_load_but_do_not_fit_together_name_the_schema_that_joins_them(tmp_path: Path) -> None:
    """left narrows response to at most 3, right pads it with 4: each loads; the child that extends both cannot."""
    left = _child(tmp_path, "dims:\n  response: {max: 3}\n", "left")
    right = _child(tmp_path, "padding:\n  response: 4\n", "right")
    assert ts.load_schema(left).padding_sizes["response"] == 1 and ts.load_schema(right).padding_sizes["response"] == 4
    child = _child(tmp_path, "", parents="left, right")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "padding.response")  # not left.yaml, which loads on its own
    assert err.problem == (
        "padding size 4 breaks the dim's bounds (<= 3): 'right' declares padding.response and 'left' declares "
        "dims.response, which 'child' extends together; declare padding.response in 'child' to choose"
    )


def test_a_cycle_made_of_parents_extended_side_by_side_names_the_schema_that_joins_them(tmp_path: Path) -> None:
    _child(tmp_path, "dims:\n  a: {min: 0}\n  b: {min: 0}\n", "base")
    _child(tmp_path, "dims:\n  a: b + 1\n", "left", parents="base")
    _child(tmp_path, "dims:\n  b: a - 1\n", "right", parents="base")
    child = _child(tmp_path, "", parents="left, right")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.a")
    assert err.problem == (
        "dims depend on each other in a cycle: a -> b -> a (a as 'left' declares it, b as 'right' declares it), "
        "which 'child' extends together; redeclare one of them in 'child'"
    )


def test_a_bad_parent_on_trajschema_path_is_named_where_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "path").mkdir()
    (tmp_path / "mine").mkdir()
    parent = _child(tmp_path / "path", "dims:\n  prompt: {max: 64}\n", "house")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path / "path"))
    child = _child(tmp_path / "mine", "description: mine\n", parents="house")
    err = _load_error(child)
    assert (err.source, err.path) == (str(parent), "dims.prompt")
    assert f"breaks padding.prompt, which 'text' declares ({TEXT_YAML})" in err.problem
    # ... and a file on the path that redeclares a packaged dim, loaded by name, is named itself.
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema("house")
    assert (info.value.source, info.value.path) == (str(parent), "dims.prompt")


_bounds = st.fixed_dictionaries(
    {}, optional={"min": st.integers(0, 6), "max": st.integers(0, 200), "multiple_of": st.integers(1, 3)}
)
_level = st.fixed_dictionaries(
    {},
    optional={
        "dims": st.fixed_dictionaries(
            {},
            optional={
                "prompt": _bounds,
                "response": _bounds,
                "seq": st.sampled_from(["prompt + response", "prompt + response - 3", "response - prompt", 7]),
                "k": st.sampled_from([0, 2, "prompt - 200", "seq", {"min": 1}]),
            },
        ),
        "padding": st.fixed_dictionaries(
            {}, optional={"prompt": st.integers(0, 200), "response": st.integers(0, 4), "k": st.integers(0, 3)}
        ),
        "fields": st.fixed_dictionaries(
            {},
            optional={
                "position_ids": st.fixed_dictionaries(
                    {
                        "shape": st.just(["seq"]),
                        "dtype": st.sampled_from(["int8", "int64"]),
                        "pad": st.just("positions"),
                    }
                ),
                "gap": st.fixed_dictionaries(
                    {"shape": st.sampled_from([["seq - 130"], ["response - 1"], ["k"]]), "dtype": st.just("int64")},
                    optional={"pad": st.just(0)},
                ),
            },
        ),
    },
)


def _declares(data: dict, path: str) -> bool:
    section, _, rest = path.partition(".")
    key = rest.split(".")[0].split("[")[0]
    return key in (data.get(section) or {})


@settings(suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(_level, st.none() | _level), min_size=1, max_size=3))
def test_the_file_named_is_where_the_entries_at_fault_first_meet(tmp_path_factory, levels) -> None:
    """A lineage text <- s0 <- s1 <- ..., each s<i> maybe extending a side parent too (a diamond
    over text). Whatever the leaf's error:

    1. it names a key that the file it names declares, or tells that file to declare it
       (entries of parents it extends side by side);
    2. that file fails to load on its own: a file that loads alone (the packaged text, a
       consistent ancestor or side parent) is never named;
    3. a child that adds nothing gets the very same error: the file being loaded is not
       named for what it inherits.
    """
    directory = tmp_path_factory.mktemp("lineage")
    files, declared = [], {}
    for i, (data, side) in enumerate(levels):
        parents = [f"s{i - 1}" if i else "text"]
        if side is not None:
            _write(directory, f"side{i}", yaml.safe_dump({"name": f"side{i}", "extends": ["text"], **side}))
            declared[str(directory / f"side{i}.yaml")] = (f"side{i}", side)
            parents.insert(0, f"side{i}")  # before s<i-1>: [text, side] has no C3 order
        files.append(_write(directory, f"s{i}", yaml.safe_dump({"name": f"s{i}", "extends": parents, **data})))
        declared[str(files[-1])] = (f"s{i}", data)
    try:
        ts.load_schema(files[-1])
    except ts.SchemaDefinitionError as exc:
        err = exc
    else:
        return
    assert err.source in declared, str(err)
    name, data = declared[err.source]
    assert _declares(data, err.path) or f"in {name!r} to choose" in err.problem or "extends together" in err.problem, (
        str(err)
    )
    with pytest.raises(ts.SchemaDefinitionError):
        ts.load_schema(err.source)
    neutral = _write(directory, "leaf", f"name: leaf\nextends: [s{len(levels) - 1}]\ndescription: nothing new\n")
    again = _load_error(neutral)
    assert (again.source, again.path, again.problem) == (err.source, err.path, err.problem)


# -- Fuzz: whatever loads, pads and validates (whatever the text: `test_search.py`) ------------------


_DTYPE_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
_numbers = st.one_of(
    st.sampled_from([0, 1, -1, 2, 127, 128, 255, 256, 300, 2**31, 2**63 - 1, 2**63, 2**64, 0.5, 1.5, -0.0, 0.1]),
    st.sampled_from([65504.0, 65520.0, 1e40, 1e-8, math.inf, -math.inf, math.nan, True, False, 16777217, 1e300]),
    st.integers(-300, 300),
    st.floats(width=16),
)
_pads = st.one_of(_numbers, st.sampled_from(["eos", "positions", "uid", "index", "empty"]))
_checks = {"values": st.lists(_numbers, min_size=1, max_size=4), "min": _numbers, "max": _numbers}
_tensor_field = st.fixed_dictionaries(
    {
        "pad": _pads,
        "shape": st.sampled_from([["n"], ["n", 2], [], ["m"], ["n + m"], [3, "n"], ["2 * n - 1"]]),
        "dtype": st.one_of(
            st.sampled_from(_DTYPE_NAMES), st.lists(st.sampled_from(_DTYPE_NAMES), min_size=1, max_size=3)
        ),
    },
    optional={**_checks, "finite": st.booleans()},
)
_other_field = st.fixed_dictionaries(
    {"pad": _pads, "kind": st.sampled_from(["int", "float", "bool", "any", "str", "mapping"])},
    optional={**_checks, "finite": st.booleans(), "required": st.booleans()},
)
_free_dim = st.fixed_dictionaries(
    {}, optional={"min": st.integers(0, 5), "max": st.integers(0, 8), "multiple_of": st.integers(1, 4)}
)
_tag = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["int", "float", "bool", "str", "mapping", "any"]),
        "equals": st.sampled_from(["n", "m", "n + m", 3, "n - m"]),
        "default": _numbers,
    },
)


@settings(suppress_health_check=list(HealthCheck))
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.one_of(_tensor_field, _other_field), min_size=1, max_size=3),
    _free_dim,
    st.one_of(st.just(1), _free_dim),
    st.dictionaries(st.sampled_from(["t", "is_padding"]), _tag, max_size=2),
    st.fixed_dictionaries({}, optional={"n": st.integers(0, 9), "m": st.integers(0, 9)}),
)
def test_whatever_loads_pads_and_validates(fields, n, m, tags, padding) -> None:
    data = {"name": "fz", "dims": {"n": n, "m": m}, "fields": copy.deepcopy(fields), "tags": tags, "padding": padding}
    try:
        schema = ts.schema_from_dict(data)
    except ts.SchemaDefinitionError:
        return
    _pad_and_validate(schema)


# -- the interval check stays cheap (issue 15 §2) ---------------------------------------------


def _squarings(x: dict, n: int = 30, top: str | None = None) -> dict:
    """``x``, then ``s0 = x * x``, ``s1 = s0 * s0``, ... : sizes of ``x**(2**n)`` were computed exactly."""
    dims: dict = {"x": x}
    prev = "x"
    for i in range(n):
        dims[f"s{i}"] = f"{prev} * {prev}"
        prev = f"s{i}"
    if top is not None:
        dims["top"] = top.format(prev=prev)
    shape = ["top" if top is not None else prev]
    return {"name": "squares", "dims": dims, "fields": {"t": {"shape": shape, "dtype": "int64", "pad": 0}}}


@pytest.mark.parametrize(
    "x",
    [
        pytest.param({"max": 2}, id="max-2"),
        pytest.param({"max": 2**62}, id="max-2**62"),
        pytest.param({"min": 3, "max": 2**62}, id="min-and-max"),
        pytest.param({"min": 2**40}, id="large-min-no-max"),
    ],
)
def test_a_chain_of_30_squarings_under_a_max_loads_in_well_under_a_second(x):
    """It took ~14 s at max 2 (and did not end at max 2**62): the check squared x**(2**29) exactly."""
    start = time.perf_counter()
    schema = ts.schema_from_dict(_squarings(x))
    assert time.perf_counter() - start < 2.0
    assert schema.dims["s29"].expr.names() == ("s28",)


def test_a_chain_of_squarings_still_refuses_what_is_negative_for_every_size():
    start = time.perf_counter()
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_from_dict(_squarings({"max": 2**62}, top="0 - {prev} - 1"))
    assert time.perf_counter() - start < 2.0
    assert info.value.path == "dims.top"
    assert "is at most -1 for every size the dims allow; a size cannot be negative" in info.value.problem
    ts.schema_from_dict(_squarings({"max": 2**62}, top="{prev} - 1"))  # s29 may be large: not refused


# --- bounds written in dims and distinct slices (issue 16): what loads (what pinning refuses: `test_config.py`)


def test_a_dim_bound_loads_into_the_fields_expressions():
    f = _moe(extra=", distinct: true", pad="copy").fields["routed_experts"]
    assert (f.min, f.max, str(f.max_expr), f.min_expr, f.distinct) == (0, None, "experts - 1", None, True)
    assert f.max_expr.names() == ("experts",)


def test_a_fixed_dim_too_large_for_the_dtype_is_refused_when_loaded():
    with pytest.raises(ts.SchemaDefinitionError, match="uint8 cannot hold 299"):
        ts.schema_from_dict(
            {
                "name": "r",
                "dims": {"seq": {"min": 1}, "experts": 300},
                "fields": {"r": {"shape": ["seq"], "dtype": "uint8", "max": "experts - 1", "pad": 0}},
            }
        )


def test_a_fill_that_breaks_a_dim_bound_at_the_padding_sizes_is_refused():
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_from_dict(
            {
                "name": "r",
                "dims": {"seq": {"min": 1}, "experts": {"min": 1}},
                "fields": {"r": {"shape": ["seq"], "dtype": "int64", "max": "experts - 1", "pad": 3}},
                "padding": {"experts": 2},
            }
        )
    assert info.value.path == "fields.r.pad"
    assert "fill 3 breaks max experts - 1 at the padding sizes (experts=2)" in info.value.problem
