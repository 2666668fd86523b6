"""Small tensors' elements are hypothesis choices: failing examples shrink to readable ones; every draw is valid."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
import torch
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

import trajschema as ts
from trajschema.core import DTYPES_BY_NAME, fits_dtype
from trajschema.core.elements import element_failures
from trajschema.core.values import value_failures
from trajschema.testing import batches, samples
from trajschema.testing.elements import (
    PER_DRAW,
    SMALL,
    ElementBudget,
    distinct_count,
    from_keys,
    small_distinct_tensor,
    small_tensor,
    value_keys,
)
from trajschema.testing.strategies import _allowed

#: Every kind of element an allowed set can have: an unbounded int64, a range above 0,
#: one below 0, listed values, floats of every width, a bool (30 elements: within one
#: draw's budget, and few enough to shrink quickly).
SHRINK = ts.schema_from_dict(
    {
        "name": "shrink",
        "fields": {
            "ids": {"shape": [4], "dtype": "int64", "pad": 0},
            "low": {"shape": [2, 3], "dtype": "int32", "min": 3, "pad": 3},
            "neg": {"shape": [4], "dtype": "int16", "min": -50, "max": -7, "pad": -7},
            "mask": {"shape": [4], "dtype": "int64", "values": [1, -2, 5], "pad": 1},
            "f": {"shape": [3], "dtype": "float32", "finite": True, "pad": 0.0},
            "h": {"shape": [3], "dtype": "float16", "pad": 0.0},
            "bf": {"shape": [3], "dtype": "bfloat16", "min": -2, "max": 100, "pad": 0.0},
            "flag": {"shape": [3], "dtype": "bool", "pad": False},
        },
    }
)

# find() stops at the first example that meets its condition; the rare ones (a dtype's exact
# ends) need room to be met: 80 times the profile (2000 under dev).
_FIND = settings(database=None, max_examples=80 * settings().max_examples, suppress_health_check=list(HealthCheck))


def _find(strategy, condition):
    return find(strategy, condition, settings=_FIND, random=random.Random(0))


def _simplest(f) -> float:
    """The value a shrunk element of ``f`` settles on, from the declaration alone: the simplest value it allows."""
    if f.values is not None:
        return min(f.values, key=lambda v: (abs(v), v < 0))
    lo = -math.inf if f.min is None else f.min
    hi = math.inf if f.max is None else f.max
    return 0 if lo <= 0 <= hi else (lo if lo > 0 else hi)


def _at_simplest(sample: dict, but: str | None = None) -> None:
    for name, t in sample.items():
        if name != but:
            want = _simplest(SHRINK.fields[name])
            assert t.eq(want).all(), (name, t, want)


def test_the_values_are_what_no_shrinking_could_simplify():
    assert sum(math.prod(e.evaluate({}) for e in f.shape or ()) for f in SHRINK.fields.values()) <= PER_DRAW
    smallest = _find(samples(SHRINK), lambda s: True)
    SHRINK.validate(smallest)
    _at_simplest(smallest)


@pytest.mark.parametrize(
    ("field", "condition", "one"),
    [
        ("ids", lambda t: (t > 5).any(), 6),
        ("low", lambda t: (t > 10).any(), 11),
        ("neg", lambda t: (t < -20).any(), -21),
        ("mask", lambda t: (t == 5).any(), 5),
        ("f", lambda t: (t > 0.5).any(), None),
        ("h", lambda t: (t < -3).any(), None),
        ("bf", lambda t: (t > 1.5).any(), None),
        ("flag", lambda t: t.any(), True),
    ],
)
def test_a_failing_example_shrinks_to_one_element_that_matters_and_the_simplest_rest(field, condition, one):
    """The seeded fill fails this: its shrunk example keeps the seed's arbitrary numbers everywhere."""
    found = _find(samples(SHRINK), lambda s: bool(condition(s[field])))
    SHRINK.validate(found)
    _at_simplest(found, but=field)
    t = found[field].reshape(-1)
    odd = t.ne(_simplest(SHRINK.fields[field]))
    assert int(odd.sum()) == 1, t  # one element makes it fail; every other is back at the simplest
    if one is not None:  # and for integers it is the smallest that still fails
        assert t[odd].item() == one


def test_a_tensor_beyond_small_keeps_its_seed():
    def schema(n: int) -> ts.Schema:
        return ts.schema_from_dict({"name": "n", "fields": {"x": {"shape": [n], "dtype": "int64", "pad": 0}}})

    assert _find(samples(schema(SMALL)), lambda s: True)["x"].eq(0).all()
    assert _find(samples(schema(SMALL + 1)), lambda s: True)["x"].ne(0).any()  # int64 noise, not shrunk


def test_one_batch_takes_per_draw_elements_through_hypothesis_then_seeds():
    schema = ts.schema_from_dict({"name": "b", "fields": {"x": {"shape": [8], "dtype": "int64", "pad": 0}}})
    rows = _find(batches(schema, size=PER_DRAW // 8 + 4, layout="list"), lambda b: True)
    drawn = PER_DRAW // 8
    assert all(r["x"].eq(0).all() for r in rows[:drawn])
    assert all(r["x"].ne(0).any() for r in rows[drawn:])


def test_the_budget_takes_whole_small_tensors_only():
    budget = ElementBudget(10)
    assert not budget.take(SMALL + 1) and budget.left == 10  # too large at any budget: nothing spent
    assert budget.take(6) and budget.left == 4
    assert not budget.take(5) and budget.left == 4  # beyond what is left: seeded, nothing spent
    assert budget.take(4) and budget.take(0) and budget.left == 0
    assert ElementBudget().left == PER_DRAW


#: Many small float tensors: a batch of them drawn element by element would overflow
#: hypothesis's buffer (about 8 KiB a test case) and fail its health checks.
WIDE = ts.schema_from_dict(
    {
        "name": "wide",
        "dims": {"n": {"min": 8, "max": 8}},
        "fields": {f"x{i}": {"shape": ["n"], "dtype": "float64", "pad": 0.0} for i in range(20)},
    }
)


@settings(deadline=None)
@given(batches(WIDE, size=16, layout="list"), samples(WIDE), samples(WIDE))
def test_draws_of_many_small_tensors_fit_hypothesis_buffer(batch, a, b):
    for s in (*batch, a, b):
        WIDE.validate(s)


# -- every element drawn is allowed, against the pure-Python definition ----------------------

_BOUNDS = [
    0,
    -0.0,
    0.5,
    -0.5,
    1,
    -1,
    3,
    -7,
    100,
    255,
    256,
    -129,
    65504.0,
    -65504.0,
    70000,
    1e-8,
    -1e-8,
    3.3895313892515355e38,
    -3.3895313892515355e38,
    1e300,
    2**31,
    2**63 - 1,
    -(2**63),
    2**63,
    -(2**63) - 1,
    2**64,
]
_BASE = SHRINK.fields["ids"]


@st.composite
def _declarations(draw):
    bound = st.none() | st.sampled_from(_BOUNDS)
    values = st.none() | st.lists(st.sampled_from([*_BOUNDS, True, False, 2.5]), min_size=1, max_size=4).map(tuple)
    dtype = draw(st.sampled_from(sorted(DTYPES_BY_NAME.values(), key=str)))
    lo, hi = draw(bound), draw(bound)
    f = dataclasses.replace(_BASE, dtypes=(dtype,), values=draw(values), min=lo, max=hi, finite=draw(st.booleans()))
    return f, dtype


# Dtypes x bounds x listed values x shapes is a wide space: four times the profile.
@settings(max_examples=4 * settings().max_examples, deadline=None)
@given(decl=_declarations(), shape=st.sampled_from([(), (0,), (1,), (3,), (2, 3), (0, 4), (4, 4, 4)]), data=st.data())
def test_every_element_passes_the_fields_checks_in_its_exact_dtype(decl, shape, data):
    f, dtype = decl
    allowed = _allowed(f, dtype)
    if allowed.empty:  # no value of this dtype passes (the strategies never offer it): none of the candidates does
        for v in (*_BOUNDS, *(f.values or ()), math.inf, -math.inf, math.nan):
            if fits_dtype(v, dtype):
                assert value_failures(v, values=f.values, lo=f.min, hi=f.max, finite=f.finite), (v, f)
        return
    t = data.draw(small_tensor(allowed, shape, dtype))
    assert t.dtype == dtype and tuple(t.shape) == shape
    assert not any(bool(m.any()) for _, m in element_failures(f, t))  # the value engine
    for x in t.reshape(-1).tolist():  # and the definition, element by element
        assert not value_failures(x, values=f.values, lo=f.min, hi=f.max, finite=f.finite), (x, f)


@pytest.mark.parametrize(
    ("dtype", "finite", "ends"),
    [
        (torch.int64, False, (-(2**63), 2**63 - 1)),
        (torch.uint8, False, (0, 255)),
        (torch.bool, False, (False, True)),
        (torch.float16, True, (-65504.0, 65504.0)),
        (torch.float16, False, (-math.inf, math.inf)),
        (torch.bfloat16, True, (-3.3895313892515355e38, 3.3895313892515355e38)),
        (torch.float32, True, (-3.4028234663852886e38, 3.4028234663852886e38)),
    ],
)
def test_the_ends_of_a_dtype_are_reached_exactly(dtype, finite, ends):
    allowed = _allowed(dataclasses.replace(_BASE, dtypes=(dtype,), finite=finite), dtype)
    strategy = small_tensor(allowed, (4,), dtype)
    for end in ends:
        t = _find(strategy, lambda t, end=end: bool((t == end).any()))
        assert t.dtype == dtype


def test_nan_is_drawn_where_a_float_field_allows_it():
    allowed = _allowed(dataclasses.replace(_BASE, dtypes=(torch.bfloat16,)), torch.bfloat16)
    assert _find(small_tensor(allowed, (3,), torch.bfloat16), lambda t: bool(t.isnan().any())).dtype == torch.bfloat16


@pytest.mark.parametrize(
    ("dtype", "lo", "hi", "only"),
    [
        (torch.float32, 0, -0.0, 0.0),  # both zeros pass; hypothesis alone calls the range empty
        (torch.float16, 70000, None, math.inf),  # no finite float16 is >= 70000: only +inf
        (torch.bfloat16, None, -3.4e38, -math.inf),
        (torch.int64, 2**63 - 1, None, 2**63 - 1),
        (torch.bool, 0.5, None, True),
    ],
)
def test_a_range_of_one_value_draws_it(dtype, lo, hi, only):
    f = dataclasses.replace(_BASE, dtypes=(dtype,), min=lo, max=hi)

    @settings(deadline=None, database=None)
    @given(small_tensor(_allowed(f, dtype), (5,), dtype))
    def check(t):
        assert t.dtype == dtype and t.eq(only).all(), t
        assert not any(bool(m.any()) for _, m in element_failures(f, t))

    check()


def _bf16(x: float) -> float:
    return torch.tensor(x, dtype=torch.float32).to(torch.bfloat16).item()


# Bounds a few bfloat16 steps apart are rare among the drawn pairs: twice the profile.
@settings(max_examples=2 * settings().max_examples, deadline=None)
@given(ends=st.lists(st.floats(-3.3e38, 3.3e38).map(_bf16), min_size=2, max_size=2), data=st.data())
def test_bfloat16_elements_stay_between_bounds_that_are_bfloat16_values(ends, data):
    """Drawn as float32s and rounded: never past a bound, however close the bounds sit."""
    lo, hi = sorted(ends)
    f = dataclasses.replace(_BASE, dtypes=(torch.bfloat16,), min=lo, max=hi)
    t = data.draw(small_tensor(_allowed(f, torch.bfloat16), (6,), torch.bfloat16))
    assert t.dtype == torch.bfloat16
    assert all(lo <= x <= hi for x in t.tolist()), (lo, hi, t)


def test_each_draw_is_a_fresh_tensor():
    allowed = _allowed(SHRINK.fields["low"], torch.int32)
    seen = []

    @settings(deadline=None, database=None, phases=[Phase.generate])
    @given(small_tensor(allowed, (2, 4), torch.int32))
    def collect(t):
        seen.append(t)
        t.fill_(-1)  # a test that writes into its input must not change the next draw

    collect()
    assert len({id(t) for t in seen}) == len(seen)
    assert len(seen) >= 2


def test_an_empty_allowed_set_or_a_bad_shape_is_refused_when_the_strategy_is_made():
    # No bfloat16 lies in [1e-40, 1.1e-40]: its subnormals there are 9.2e-41 and 1.8e-40.
    f = dataclasses.replace(_BASE, dtypes=(torch.bfloat16,), min=1e-40, max=1.1e-40)
    empty = _allowed(f, torch.bfloat16)
    with pytest.raises(ValueError, match=r"no torch\.bfloat16 value is allowed"):
        small_tensor(empty, (2,), torch.bfloat16)
    ok = _allowed(_BASE, torch.int64)
    for shape in [(-1,), (2, -3), (1.0,), (True,)]:
        with pytest.raises(ValueError, match=r"shape=\.\.\.\) must be sizes"):
            small_tensor(ok, shape, torch.int64)


@given(data=st.data())
def test_a_shape_with_no_element_needs_no_allowed_value(data):
    """No value allowed at some sizes (min: topk, max: experts - 1 at experts = topk): 0 rows are still drawable."""
    f = dataclasses.replace(_BASE, dtypes=(torch.bfloat16,), min=1e-40, max=1.1e-40)
    empty = _allowed(f, torch.bfloat16)
    t = data.draw(small_tensor(empty, (0, 1, 2), torch.bfloat16))
    assert t.shape == (0, 1, 2) and t.dtype == torch.bfloat16


# -- distinct slices ---------------------------------------------------------------------


def _slices_distinct(t: torch.Tensor) -> bool:
    """The reference: every slice along the last axis, read as Python numbers (``-0.0 == 0.0``), has no repeat."""
    if not t.numel():
        return True
    rows = t.reshape(-1, t.shape[-1] if t.dim() else 1).tolist()
    return all(len(set(r)) == len(r) for r in rows)


@given(
    decl=_declarations(),
    shape=st.sampled_from([(), (0,), (1,), (3,), (2, 3), (0, 4), (4, 1), (2, 2, 2)]),
    data=st.data(),
)
def test_distinct_slices_hold_allowed_distinct_values(decl, shape, data):
    f, dtype = decl
    allowed = _allowed(f, dtype)
    k = shape[-1] if shape else 1
    if allowed.empty or distinct_count(allowed, dtype) < k:
        if math.prod(shape):
            with pytest.raises(ValueError, match="distinct"):
                small_distinct_tensor(allowed, shape, dtype)
        return
    t = data.draw(small_distinct_tensor(allowed, shape, dtype))
    assert t.dtype == dtype and tuple(t.shape) == shape
    assert _slices_distinct(t), t
    assert not t.isnan().any() if t.is_floating_point() else True
    for x in t.reshape(-1).tolist():
        assert not value_failures(x, values=f.values, lo=f.min, hi=f.max, finite=f.finite), (x, f)


@pytest.mark.parametrize(
    ("dtype", "lo", "hi", "values", "count"),
    [
        (torch.int16, 0, 7, None, 8),
        (torch.uint8, None, None, None, 256),
        (torch.int64, None, None, None, 2**64),
        (torch.bool, None, None, None, 2),
        (torch.int64, None, None, [1, -2, 5, 1.0], 3),
        (torch.float16, -0.0, 0.0, None, 1),  # one value: -0.0 is 0.0
        (torch.float16, 1.0, 2.0, None, 1025),  # 2**10 steps of 2**-10, both ends
        (torch.bfloat16, None, None, None, 2 * 0x7F80 + 1),  # every finite bfloat16 and both infinities
        (torch.float32, 0, None, None, 0x7F800000 + 1),
    ],
)
def test_distinct_count_counts_the_values_a_dtype_allows(dtype, lo, hi, values, count):
    f = dataclasses.replace(_BASE, dtypes=(dtype,), min=lo, max=hi, values=values)
    assert distinct_count(_allowed(f, dtype), dtype) == count


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_float_keys_round_trip_in_order(dtype):
    xs = torch.tensor([-math.inf, -3.5, -1e-3, 0.0, 1e-3, 2.0, math.inf], dtype=dtype)
    a = _allowed(dataclasses.replace(_BASE, dtypes=(dtype,)), dtype)
    keys = [value_keys(dataclasses.replace(a, lo=x, hi=x), dtype)[0] for x in xs.tolist()]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert torch.equal(from_keys(torch.tensor(keys), a, dtype), xs)
    assert value_keys(dataclasses.replace(a, lo=-0.0, hi=0.0), dtype) == (0, 0)


def test_a_distinct_slice_shrinks_to_the_simplest_values():
    f = dataclasses.replace(_BASE, dtypes=(torch.int16,), min=-3, max=9)
    t = _find(small_distinct_tensor(_allowed(f, torch.int16), (2, 4), torch.int16), lambda t: True)
    assert t.tolist() == [[0, 1, -1, 2], [0, 1, -1, 2]]
    members = dataclasses.replace(_BASE, values=[7, -2, 5])
    t = _find(small_distinct_tensor(_allowed(members, torch.int64), (3,), torch.int64), lambda t: True)
    assert t.tolist() == [-2, 5, 7]
    t = _find(small_distinct_tensor(_allowed(f, torch.int16), (3,), torch.int16), lambda t: int(t.max()) >= 9)
    assert sorted(t.tolist()) == [0, 1, 9]  # only the element that matters moves


def test_a_distinct_slice_as_long_as_the_allowed_set_holds_all_of_it():
    f = dataclasses.replace(_BASE, dtypes=(torch.uint8,), min=250)
    t = _find(small_distinct_tensor(_allowed(f, torch.uint8), (2, 6), torch.uint8), lambda t: True)
    assert (t.sort(dim=-1).values == torch.arange(250, 256, dtype=torch.uint8)).all()


def test_too_long_a_slice_or_a_bad_shape_is_refused():
    f = dataclasses.replace(_BASE, dtypes=(torch.bool,))
    with pytest.raises(ValueError, match=r"a slice of 3 distinct torch\.bool values, but only 2 are allowed"):
        small_distinct_tensor(_allowed(f, torch.bool), (4, 3), torch.bool)
    small_distinct_tensor(_allowed(f, torch.bool), (0, 3), torch.bool)  # no slice: nothing to refuse
    with pytest.raises(ValueError, match=r"shape=\.\.\.\) must be sizes"):
        small_distinct_tensor(_allowed(f, torch.bool), (2, -1), torch.bool)
