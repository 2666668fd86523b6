"""Compiling a declaration's pad fill: does it fit its dtypes (`fill_fits_dtype`, against a pure-Python
reference) and does it pass its field's own value checks, as Python compares."""

from __future__ import annotations

import math
import struct

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import trajschema as ts
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
