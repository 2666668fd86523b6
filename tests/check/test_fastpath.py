"""The generated fast checker never calls a bad sample clean, and binds what the full check binds."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import trajschema as ts
from trajschema.check.batch import fast_bindings
from trajschema.check.sample import check_sample

# Schemas that stress the code generator: a dim bound only by optional fields, an inline
# expression, a fixed dim, a literal axis, a derived dim of derived dims, bounds.
EXOTIC = ts.schema_from_dict(
    {
        "name": "exotic",
        "dims": {
            "a": {"min": 1, "max": 6},
            "b": {"multiple_of": 2},
            "c": "a + b",
            "e": "2 * c - a",
            "k": 3,
            "opt": {},
        },
        "fields": {
            "x": {"shape": ["a"], "dtype": "int64", "pad": 0},
            "y": {"shape": ["b", "k"], "dtype": ["int16", "int32"], "pad": 0},
            "z": {"shape": ["c", 2], "dtype": "float32", "pad": 0.0, "required": False},
            "w": {"shape": ["a + b"], "dtype": "int64", "pad": 0},
            "u": {"shape": ["opt", "e"], "dtype": "int64", "pad": 0, "required": False},
            "v": {"shape": ["opt"], "dtype": "bool", "pad": False, "required": False},
            "n": {"kind": "int", "pad": 0},
            "f": {"kind": "float", "pad": 0.0, "required": False},
            "m": {"kind": "mapping", "pad": "empty", "required": False},
            "any": {"kind": "any", "pad": "copy", "required": False},
        },
    }
)

SIZE = st.integers(0, 7)
DTYPE = st.sampled_from([torch.int64, torch.int32, torch.int16, torch.float32, torch.bool])


@st.composite
def samples(draw):
    """Mostly consistent samples, with a few sizes, dtypes and kinds drawn freely."""
    a, b, opt = draw(st.integers(1, 6)), draw(st.sampled_from([0, 2, 4])), draw(SIZE)
    c, e = a + b, 2 * (a + b) - a
    noisy = draw(st.sets(st.sampled_from(["x", "y", "z", "w", "u", "v", "n", "f", "m"]), max_size=2))

    def size(n):
        return draw(SIZE) if draw(st.booleans()) and noisy else n

    def dtype(field, want):
        return draw(DTYPE) if field in noisy and draw(st.booleans()) else want

    out = {
        "x": torch.zeros(size(a), dtype=dtype("x", torch.int64)),
        "y": torch.zeros(size(b), size(3), dtype=dtype("y", draw(st.sampled_from([torch.int16, torch.int32])))),
        "w": torch.zeros(size(c), dtype=dtype("w", torch.int64)),
        "n": draw(st.sampled_from([1, True, 1.5, torch.tensor(2), "1"])) if "n" in noisy else 3,
    }
    if draw(st.booleans()):
        out["z"] = torch.zeros(size(c), 2, dtype=dtype("z", torch.float32))
    if draw(st.booleans()):
        out["u"] = torch.zeros(size(opt), size(e), dtype=dtype("u", torch.int64))
    if draw(st.booleans()):
        out["v"] = torch.zeros(size(opt), dtype=dtype("v", torch.bool))
    if draw(st.booleans()):
        out["f"] = draw(st.sampled_from([1.0, 2, True, "x"])) if "f" in noisy else 0.5
    if draw(st.booleans()):
        out["m"] = [] if "m" in noisy else {}
    if draw(st.booleans()):
        del out[draw(st.sampled_from(sorted(out)))]
    return out


@settings(deadline=None)
@given(samples())
def test_fast_checker_agrees_with_the_full_check(sample):
    bound, found = check_sample(EXOTIC.plan, sample, depth="shapes")
    fast = fast_bindings(EXOTIC.plan, sample, None, None, "shapes")
    if found:
        assert fast is None
    elif fast is not None:
        assert fast == bound


def test_clean_samples_do_take_the_fast_path(schema, sample_of):
    # Without this, a checker that always said "look closer" would pass the property above.
    sample = sample_of(schema, 9, 4)
    assert fast_bindings(schema.plan, sample, None, None, "shapes") == schema.validate(sample)


def test_generated_source_holds_no_schema_text():
    source = EXOTIC.plan.fast.__source__
    assert "a + b" not in source and "2 * c" not in source
    assert "'x'" in source  # field names only as string constants


@pytest.mark.parametrize("name", ["import os", "x'); import os; ('"])
def test_field_names_cannot_inject_code(name):
    schema = ts.schema_from_dict({"name": "odd", "fields": {name: {"kind": "int", "pad": 0}}})
    assert schema.validate({name: 1}) == {}
    assert [v.code for v in schema.violations({name: "1"})] == ["kind"]
