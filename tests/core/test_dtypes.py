"""The dtype arithmetic by name agrees with torch's own, bit for bit."""

from __future__ import annotations

import math
import struct

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from trajschema.core.dtypes import (
    DTYPE_NAMES,
    DType,
    as_dtype,
    counts_exactly_to,
    dtype_name,
    float_max,
    integer_capacity,
    is_dtype,
    is_tensor,
    round_to,
    short_dtype,
    step,
    torch_dtype,
)

FLOATS = ["float16", "bfloat16", "float32", "float64"]
INTEGERS = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64"]

#: Any float64: ordinary numbers, numbers near each dtype's edges, and every bit pattern.
any_float = st.one_of(
    st.floats(allow_nan=False),
    st.floats(min_value=-70000, max_value=70000),
    st.sampled_from([65504.0, 65519.99, 65520.0, 3.4028235e38, 3.3895314e38, 3.39e38, 5.96e-8, 2.98e-8, 1e-45]),
    st.integers(0, 2**64 - 1)
    .map(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0])
    .filter(lambda x: not math.isnan(x)),
)


@given(x=any_float, name=st.sampled_from(FLOATS))
def test_round_to_is_torchs_conversion(x: float, name: str) -> None:
    want = torch.tensor(x, dtype=torch.float64).to(getattr(torch, name)).item()
    assert round_to(x, name) == want or (math.isnan(want) and math.isnan(round_to(x, name)))


@given(x=any_float, name=st.sampled_from(FLOATS), up=st.booleans())
def test_step_is_torchs_nextafter(x: float, name: str, up: bool) -> None:
    dt = getattr(torch, name)
    value = torch.tensor(x, dtype=torch.float64).to(dt)
    if not math.isfinite(value.item()):
        return  # step takes a finite value of the dtype
    want = torch.nextafter(value, torch.tensor(math.inf if up else -math.inf, dtype=dt)).item()
    assert step(value.item(), name, up) == want


@pytest.mark.parametrize("name", INTEGERS)
def test_integer_capacity_is_torchs(name: str) -> None:
    dt = getattr(torch, name)
    want = (0, 1) if dt == torch.bool else (torch.iinfo(dt).min, torch.iinfo(dt).max)
    assert integer_capacity(name) == integer_capacity(dt) == want
    assert counts_exactly_to(name) == want[1]


@pytest.mark.parametrize("name", FLOATS)
def test_float_facts_are_torchs(name: str) -> None:
    dt = getattr(torch, name)
    assert float_max(name) == torch.finfo(dt).max
    assert integer_capacity(name) is None
    n = counts_exactly_to(name)  # every integer up to n is exact, n + 1 is not
    assert torch.tensor(n, dtype=dt).item() == n and torch.tensor(n + 1, dtype=torch.float64).to(dt).item() != n + 1


@pytest.mark.parametrize("name", DTYPE_NAMES)
def test_names_and_torch_dtypes_are_one_vocabulary(name: str) -> None:
    dt = torch_dtype(name)
    assert dtype_name(dt) == dtype_name(as_dtype(dt)) == name and as_dtype(name) == DType(name)
    assert short_dtype(dt) == short_dtype(name)
    d = DType(name)
    assert (d.is_bool, d.is_floating_point, d.is_complex) == (dt == torch.bool, dt.is_floating_point, dt.is_complex)


def test_torch_dtype_refuses_what_torch_has_not() -> None:
    with pytest.raises(ValueError, match="no dtype named 'int'"):
        torch_dtype("int")  # torch.int exists, but it is int32's alias, not a dtype name of ours
    with pytest.raises(ValueError, match="no dtype named 'Tensor'"):
        torch_dtype("Tensor")


def test_recognising_torch_values_needs_no_torch_import() -> None:
    assert is_dtype(torch.int64) and not is_dtype("int64") and not is_dtype(DType("int64"))
    assert is_tensor(torch.zeros(1)) and not is_tensor([0])


@pytest.mark.parametrize(
    ("call", "match"),
    [(lambda: round_to(1.0, "int8"), "round_to: dtype int8"), (lambda: step(1.0, "uint8", True), "step: dtype uint8")],
    ids=["round_to an integer dtype", "step an integer dtype"],
)
def test_the_float_arithmetic_refuses_integer_dtypes(call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call()
