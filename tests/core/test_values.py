"""The value engine against a pure-Python reference, for every real dtype and any bound or value set."""

from __future__ import annotations

import math
import subprocess
import sys
from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from trajschema.core import elements as _values
from trajschema.core.decl import Field, PadRule
from trajschema.core.dtypes import integer_capacity
from trajschema.core.elements import (
    element_failures,
    failing_positions,
    failure_summary,
    has_repeats,
    nonzero_per_position,
    position_extremes,
    repeat_positions,
    repeat_summary,
    tensor_clean,
    tensor_extremes,
    tensor_has_failures,
)
from trajschema.core.values import fits_dtype, float_bound, scalar_failures

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
]

# Bounds and listed values: small ints, the edges of every dtype (and one past), huge
# ints, fractions, subnormals, infinities, NaN, bools.
_EDGES = sorted(
    {
        v
        for d in DTYPES
        if not d.is_floating_point and d != torch.bool
        for v in (torch.iinfo(d).min - 1, torch.iinfo(d).min, torch.iinfo(d).max, torch.iinfo(d).max + 1)
    }
)
NUMBER = st.one_of(
    st.integers(-300, 300),
    st.sampled_from(_EDGES),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(-3, 3),
    st.sampled_from([0.5, -0.5, 1e-8, 65504.0, 65520.0, 3.4e38, 1e39, 2.0**-24, 5e-324, -0.0]),
    st.booleans(),
)


def _field(values, lo, hi, finite) -> Field:
    return Field("x", "tensor", (), (torch.float32,), True, PadRule("fill", 0), values, lo, hi, finite)


def _reference(x, values, lo, hi, finite) -> dict[str, bool]:
    """Which checks element ``x`` breaks, in plain Python arithmetic."""
    out = {}
    if values is not None:
        out["values"] = not any(x == v for v in values)
    if lo is not None:
        out["min"] = not (x >= lo)
    if hi is not None:
        out["max"] = not (x <= hi)
    if finite:
        out["finite"] = isinstance(x, float) and not math.isfinite(x)
    return out


def _tensor(dtype: torch.dtype, raw: bytes) -> torch.Tensor:
    size = torch.empty((), dtype=dtype).element_size()
    raw = raw[: len(raw) - len(raw) % size] or bytes(size)
    if dtype == torch.bool:
        raw = bytes(b & 1 for b in raw)
    return torch.frombuffer(bytearray(raw), dtype=dtype).clone()


# A reference comparison over every dtype and odd numbers (nan, -0.0, bounds, ints past a
# dtype's range): the cases that break are edges, and an example costs ~2 ms, so this runs
# 5 times the profile's examples.
@settings(max_examples=5 * settings().max_examples, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    raw=st.binary(min_size=1, max_size=24),
    values=st.none() | st.lists(NUMBER, min_size=1, max_size=5),
    lo=st.none() | NUMBER,
    hi=st.none() | NUMBER,
    finite=st.booleans(),
)
def test_element_failures_match_python_arithmetic(dtype, raw, values, lo, hi, finite):
    t = _tensor(dtype, raw)
    f = _field(tuple(values) if values is not None else None, lo, hi, finite)
    elements = t.tolist()
    expected = [_reference(x, f.values, lo, hi, finite) for x in elements]
    got = {label: mask.tolist() for label, mask in element_failures(f, t)}
    labels = {"values": f"in {{{', '.join(map(repr, f.values or ()))}}}", "min": f">= {lo}", "max": f"<= {hi}"}
    labels["finite"] = "finite"
    for check in expected[0] if expected else ():
        mask = got.get(labels[check], [False] * len(elements))
        assert mask == [e[check] for e in expected], (check, elements)
    any_bad = any(any(e.values()) for e in expected)
    assert tensor_has_failures(f, t) == any_bad
    if tensor_clean(f, t):
        assert not any_bad


# A reference comparison over every dtype and odd numbers (nan, -0.0, bounds, ints past a
# dtype's range): the cases that break are edges, and an example costs ~4 ms, so this runs
# 4 times the profile's examples.
@settings(max_examples=4 * settings().max_examples, deadline=None)
@given(
    x=NUMBER,
    values=st.none() | st.lists(NUMBER, min_size=1, max_size=5),
    lo=st.none() | NUMBER,
    hi=st.none() | NUMBER,
    finite=st.booleans(),
)
def test_scalar_failures_match_python_arithmetic(x, values, lo, hi, finite):
    f = _field(tuple(values) if values is not None else None, lo, hi, finite)
    ref = _reference(x, f.values, lo, hi, finite)
    names = {"values": f"one of {list(f.values or ())}", "min": f">= {lo}", "max": f"<= {hi}", "finite": "finite"}
    assert scalar_failures(f, x) == [names[k] for k, bad in ref.items() if bad]


# A reference comparison over every dtype and odd numbers (nan, -0.0, bounds, ints past a
# dtype's range): the cases that break are edges, and an example costs ~2 ms, so this runs
# 5 times the profile's examples.
@settings(max_examples=5 * settings().max_examples, deadline=None)
@given(dtype=st.sampled_from(DTYPES), value=NUMBER)
def test_fits_dtype_matches_a_round_trip(dtype, value):
    if dtype.is_floating_point:
        if isinstance(value, float) and not math.isfinite(value):
            expected = True
        else:
            try:
                as_float = float(value)
            except OverflowError:
                as_float = None
            expected = (
                as_float is not None
                and as_float == value
                and torch.tensor(as_float, dtype=torch.float64).to(dtype).item() == as_float
            )
    else:
        lo, hi = (0, 1) if dtype == torch.bool else (torch.iinfo(dtype).min, torch.iinfo(dtype).max)
        integral = not isinstance(value, float) or value.is_integer()
        expected = integral and lo <= value <= hi
    assert fits_dtype(value, dtype) == expected


@pytest.mark.parametrize(
    ("dtype", "kw", "data", "bad"),
    [
        # bounds converted to the dtype before comparing gave these wrong
        pytest.param(torch.int64, {"lo": 0.5}, [0, 1], [True, False], id="fractional-min-on-int"),
        pytest.param(torch.int8, {"hi": 300}, [127, -128], [False, False], id="max-beyond-int8"),
        pytest.param(torch.int8, {"lo": 200}, [127, 0], [True, True], id="min-beyond-int8"),
        pytest.param(torch.uint8, {"lo": -1}, [0, 255], [False, False], id="negative-min-on-uint8"),
        pytest.param(torch.float16, {"lo": 1e-8}, [0.0, 6e-8], [True, False], id="min-below-float16-resolution"),
        pytest.param(torch.float32, {"hi": 1e39}, [3.4e38, float("inf")], [False, True], id="max-beyond-float32"),
        pytest.param(torch.bool, {"values": (0, 1)}, [True, False], [False, False], id="bool-with-0-1"),
        pytest.param(torch.bool, {"values": (1,)}, [True, False], [False, True], id="bool-only-true"),
        pytest.param(torch.int64, {"values": (0.5, 1)}, [0, 1], [True, False], id="fractional-value-in-int-set"),
        pytest.param(torch.int64, {"values": (2**70,)}, [0], [True], id="huge-value-in-int-set"),
        pytest.param(torch.float32, {"lo": 0}, [float("nan")], [True], id="nan-breaks-min"),
        pytest.param(torch.bfloat16, {"values": (0.1, 0.5)}, [0.5, 0.1], [False, True], id="bf16-inexact-member"),
        pytest.param(torch.int64, {"lo": 2**63}, [2**63 - 1], [True], id="min-just-past-int64"),
    ],
)
def test_known_inexact_cases(dtype, kw, data, bad):
    f = _field(kw.get("values"), kw.get("lo"), kw.get("hi"), False)
    t = torch.tensor(data).to(dtype)
    masks = [m for _, m in element_failures(f, t)]
    got = torch.stack(masks).any(0).tolist() if masks else [False] * len(data)
    assert got == bad


def test_meta_tensors_have_no_values_to_check():
    f = _field((0, 1), 0, 1, True)
    t = torch.empty(5, device="meta")
    assert element_failures(f, t) == [] and tensor_clean(f, t) and not tensor_has_failures(f, t)


def test_masks_stay_on_the_tensors_device_and_shape():
    f = _field((0, 1, 5), 0, 4, False)
    t = torch.tensor([[0, 5], [1, 9]])
    for _, mask in element_failures(f, t):
        assert mask.shape == t.shape and mask.device == t.device and mask.dtype == torch.bool


_DECLARABLE = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
_DECLARABLE += [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@settings(deadline=None)
@given(
    dtype=st.sampled_from(_DECLARABLE),
    raw=st.binary(min_size=1, max_size=16),
    values=st.none() | st.lists(NUMBER.filter(lambda v: not (isinstance(v, float) and math.isnan(v))), min_size=1),
    lo=st.none() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False),
    hi=st.none() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False),
    finite=st.booleans(),
)
def test_validate_and_violations_never_disagree(dtype, raw, values, lo, hi, finite):
    import trajschema as ts

    decl = {"shape": ["n"], "dtype": str(dtype).removeprefix("torch."), "pad": "copy", "finite": finite}
    decl.update({k: v for k, v in {"values": values, "min": lo, "max": hi}.items() if v is not None})
    try:
        schema = ts.schema_from_dict({"name": "v", "dims": {"n": {}}, "fields": {"x": decl}})
    except ts.SchemaDefinitionError:
        return  # e.g. min above max: the loader refuses it, which is its own test's business
    sample = {"x": _tensor(dtype, raw)}
    found = schema.violations(sample)
    if found:
        with pytest.raises(ts.SchemaError) as info:
            schema.validate(sample)
        assert info.value.violations == found
    else:
        schema.validate(sample)


# -- bounded memory: the walking checks against the full-mask implementation ------------

# Views a real tensor can arrive as: repeats (expand: stride 0), transposes, steps,
# overlapping windows (unfold), zero-size and 0-d tensors. Each op keeps a view.
# Weighted towards the layouts that change how a tensor is walked; degenerate ones stay rarer.
_OPS = ["expand"] * 4 + ["transpose"] * 3 + ["step", "unfold", "unfold", "select", "empty", "flatten"]


@st.composite
def odd_tensors(draw, dtypes=DTYPES):
    t = _tensor(draw(st.sampled_from(dtypes)), draw(st.binary(min_size=1, max_size=24)))
    for op in draw(st.lists(st.sampled_from(_OPS), max_size=6)):
        d = draw(st.integers(0, max(t.dim() - 1, 0)))
        if op == "expand" and t.dim() < 5:
            t = t.unsqueeze(d).expand(*t.shape[:d], draw(st.integers(1, 4)), *t.shape[d:])
        elif t.dim() == 0:
            continue
        elif op == "transpose":
            t = t.transpose(d, draw(st.integers(0, t.dim() - 1)))
        elif op == "step" and t.shape[d] > 1:
            t = t.narrow(d, draw(st.integers(0, 1)), t.shape[d] - 1)[(slice(None),) * d + (slice(None, None, 2),)]
        elif op == "unfold" and t.shape[d] > 0 and t.dim() < 5:
            t = t.unfold(d, draw(st.integers(1, t.shape[d])), draw(st.integers(1, 2)))
        elif op == "select" and t.shape[d] > 0:
            t = t.select(d, draw(st.integers(0, t.shape[d] - 1)))
        elif op == "empty":
            t = t.narrow(d, 0, 0)
        elif op == "flatten":
            t = t.reshape(-1)  # a copy when the view cannot be flattened: still a valid input
    return t


def _old_tensor_clean(f: Field, t: torch.Tensor) -> bool:
    """``tensor_clean`` as it was before it walked blocks: one ``aminmax`` over the whole operand."""
    if t.is_meta or t.numel() == 0 or not f.has_value_checks:
        return True
    dom, checks = _values.checks_for(f, t.dtype)
    live = [c for c in checks if c.op != "ok"]
    if not live:
        return True
    if any(c.op in ("bad", "in") for c in live):
        return False
    lo, hi = (v.item() for v in torch.aminmax(_values._operand(t, dom)))
    for c in live:
        if c.op == "finite":
            ok = math.isfinite(lo) and math.isfinite(hi)
        elif c.op == "ge":
            ok = lo >= c.bound
        elif c.op == "le":
            ok = hi <= c.bound
        else:
            ok = lo >= c.bound and hi <= c.upper
        if not ok:
            return False
    return True


def _expected_from_masks(f: Field, t: torch.Tensor):
    """What the full-size masks of ``element_failures`` say: per check (label, count, first index), and per axis the
    positions holding a failing element."""
    masks = element_failures(f, t)
    summary = [(label, int(m.sum()), tuple(int(i) for i in m.nonzero()[0])) for label, m in masks if bool(m.any())]
    rows = []
    for axis in range(t.dim()):
        other = tuple(d for d in range(t.dim()) if d != axis)
        hit = torch.zeros(t.shape[axis], dtype=torch.bool)
        for _, m in masks:
            hit |= m.any(dim=other) if other else m
        rows.append(hit.tolist())
    return summary, rows, any(bool(m.any()) for _, m in masks)


@settings(deadline=None)
@given(
    t=odd_tensors(),
    values=st.none() | st.lists(NUMBER, min_size=1, max_size=4),
    lo=st.none() | NUMBER,
    hi=st.none() | NUMBER,
    finite=st.booleans(),
    budget=st.sampled_from([1, 2, 3, 5, 7, 1 << 20]),
)
def test_walking_in_blocks_answers_what_the_full_masks_do(t, values, lo, hi, finite, budget):
    f = _field(tuple(values) if values is not None else None, lo, hi, finite)
    summary, rows, any_bad = _expected_from_masks(f, t)
    old_clean = _old_tensor_clean(f, t)
    with mock.patch.object(_values, "_BUDGET", budget):
        assert [(x.expected, x.count, x.first) for x in failure_summary(f, t)] == summary
        assert [failing_positions(f, t, axis).tolist() for axis in range(t.dim())] == rows
        assert tensor_has_failures(f, t) == any_bad
        assert tensor_clean(f, t) == old_clean
    if old_clean:
        assert not any_bad


@settings(deadline=None)
@given(t=odd_tensors(), budget=st.sampled_from([1, 2, 3, 5, 1 << 20]))
def test_extremes_match_one_reduction_over_a_copy(t, budget):
    with mock.patch.object(_values, "_BUDGET", budget):
        got = tensor_extremes(t)
    if t.numel() == 0:
        assert got is None
        return
    as_python = t.contiguous().reshape(-1).tolist()  # exact: Python ints and floats
    if any(isinstance(x, float) and math.isnan(x) for x in as_python):
        assert got is not None and math.isnan(got[0]) and math.isnan(got[1]) and got[2] is False
        return
    lo, hi = min(as_python), max(as_python)
    assert got == (lo, hi, math.isfinite(lo) and math.isfinite(hi))
    assert all(type(v) is type(w) for v, w in zip(got[:2], (lo, hi))) or t.dtype == torch.bool


@settings(deadline=None)
@given(t=odd_tensors(), budget=st.sampled_from([1, 2, 5, 1 << 20]))
def test_nonzero_counts_per_position_match_one_mask_over_the_whole(t, budget):
    if t.dim() == 0:
        return
    with mock.patch.object(_values, "_BUDGET", budget):
        got = [nonzero_per_position(t, axis).tolist() for axis in range(t.dim())]
    mask = t != 0
    others = [tuple(d for d in range(t.dim()) if d != axis) for axis in range(t.dim())]
    assert got == [(mask.sum(dim=o) if o else mask.to(torch.int64)).tolist() for o in others]


def test_an_expanded_element_counts_once_per_place_it_appears():
    big = 2**38  # logical elements that no machine holds: a full-size mask or copy would fail to allocate
    t = torch.tensor([[0, -1, 5, -1]]).expand(big, 4)
    f = _field((0, 5), 0, None, False)
    got = [(x.expected, x.count, x.first) for x in failure_summary(f, t)]
    assert got == [("in {0, 5}", 2 * big, (0, 1)), (">= 0", 2 * big, (0, 1))]
    assert tensor_has_failures(f, t) and not tensor_clean(f, t)
    assert failing_positions(f, t.t()).tolist() == [False, True, False, True]
    # transposed: the first failing element in row-major order is in the first row, column 1
    tt = torch.tensor([[0], [-1]]).expand(2, big).t()
    assert [(x.count, x.first) for x in failure_summary(f, tt)] == [(big, (0, 1)), (big, (0, 1))]
    assert tensor_extremes(t) == (-1, 5, True)
    assert nonzero_per_position(t, 1).tolist() == [0, big, big, big]
    assert nonzero_per_position(torch.tensor([[3], [0], [-2]]).expand(3, big)).tolist() == [big, 0, big]


def test_expanded_non_finite_floats_and_wide_unsigned_ints():
    big = 2**40
    f = _field(None, None, 2**63, True)
    x = torch.tensor([1.0, float("inf"), float("nan")], dtype=torch.bfloat16, requires_grad=True).expand(big, 3)
    got = [(s.expected, s.count, s.first) for s in failure_summary(f, x)]
    assert got == [("<= 9223372036854775808", 2 * big, (0, 1)), ("finite", 2 * big, (0, 1))]  # inf and NaN
    u = torch.tensor([2**64 - 1], dtype=torch.uint64).expand(big)
    assert [(s.count, s.first) for s in failure_summary(f, u)] == [(big, (0,))]
    assert tensor_extremes(u) == (2**64 - 1, 2**64 - 1, True)
    e = torch.tensor([448.0], dtype=torch.float8_e4m3fn).expand(3, big)
    assert failure_summary(_field(None, None, 400, False), e)[0].count == 3 * big


def test_meta_tensors_of_any_size_have_nothing_to_walk():
    f = _field((0, 1), 0, 1, True)
    t = torch.empty(1, device="meta").expand(2**40)
    assert failure_summary(f, t) == [] and tensor_extremes(t) is None and not tensor_has_failures(f, t)
    rows = failing_positions(f, torch.empty(3, 2**40, device="meta"))
    assert rows.device.type == "meta" and rows.shape == (3,)


def test_failing_positions_needs_an_axis():
    with pytest.raises(ValueError, match="at least one axis"):
        failing_positions(_field(None, 0, None, False), torch.tensor(-1))


# Run in a fresh interpreter: ru_maxrss is the process's peak, which this test process may already be past.
_PEAK_SCRIPT = r"""
import contextlib, io, math, resource, sys
import torch
import trajschema as ts
from tensordict import TensorDict
from trajschema.cli.app import main

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

decl = {
    "x": {"shape": ["n"], "dtype": "int64", "pad": "copy", "min": 0, "values": [0, 1, 3]},
    "y": {"shape": ["n", 2], "dtype": "float32", "pad": "copy", "finite": True},
}
schema = ts.schema_from_dict({"name": "big", "dims": {"n": {}}, "fields": decl})
windows = ts.schema_from_dict({"name": "win", "dims": {"m": {}},
                               "fields": {"w": {"shape": ["m", 64], "dtype": "int64", "pad": "copy", "min": 2**40}}})

def sample(n, bad):
    x = torch.tensor([-1 if bad else 0]).expand(n)
    y = torch.tensor([[0.0, math.nan if bad else 1.0]]).expand(n, 2)
    return {"x": x, "y": y}

def batch(n):
    off = torch.tensor([0, n, 2 * n])
    y = torch.nested.nested_tensor_from_jagged(torch.tensor([[0.0, 1.0]]).expand(2 * n, 2), off)
    return TensorDict({"x": torch.tensor([[0], [5]]).expand(2, n), "y": y}, batch_size=[2])

def run_all(n, path):
    found = [(v.field, v.actual) for v in schema.violations(sample(n, True))]
    assert not schema.violations(sample(n, False))
    rows = sorted({v.sample for v in schema.batch_violations(batch(n))})
    draft = ts.infer_schema([sample(n, False), sample(n, True)], name="d").to_yaml()
    # overlapping windows, no stride 0: walked in blocks (the old masks and indices took ~600 MB here)
    bad_windows = windows.violations({"w": torch.arange(2**20 if n > 8 else 80).unfold(0, 64, 1)})
    torch.save([sample(n, True)], path + ".pt")
    with open(path + ".yaml", "w") as f:
        f.write(schema.to_yaml())
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(["check", path + ".pt", "--schema", path + ".yaml"])
    return found, rows, draft, bad_windows[0].actual, code, out.getvalue()

small = run_all(8, sys.argv[1])  # warms every path up
base = peak_mb()
found, rows, draft, windows_found, code, out = run_all(2**40, sys.argv[1])
print(peak_mb() - base)
assert found == [("x", f"{2**40} of {2**40} elements (first at [0]: -1)"),
                 ("x", f"{2**40} of {2**40} elements (first at [0]: -1)"),
                 ("y", f"{2**40} of {2**41} elements (first at [0,1]: nan)")], found
assert rows == [1], rows
assert draft == small[2].replace("size 8 ", f"size {2**40} ") and "min: 0" not in draft, (draft, small[2])
assert windows_found.startswith(f"{(2**20 - 63) * 64} of {(2**20 - 63) * 64} elements"), windows_found
assert code == 1 and f"{2**40} of {2**40} elements are not >= 0" in out, out
"""


@pytest.mark.slow
def test_checks_on_a_trillion_element_expanded_tensor_stay_in_bounded_memory(tmp_path):
    """Sample, batch, infer and ``trajschema check`` on tensors of 2**40 logical elements (a few bytes of storage)
    and an overlapping 67M-element view: the peak grows by under 100 MB (before the walk: allocator errors, or
    ~20 GB for 2**31 elements)."""
    script = tmp_path / "peak.py"
    script.write_text(_PEAK_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "big")], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert float(done.stdout.split()[-1]) < 100, done.stdout


# -- the one value set (issue 15 §2): exact for every dtype, against enumeration --------------

import pickle  # noqa: E402

from trajschema.core.values import ValueSet, value_failures  # noqa: E402

#: Dtypes small enough to enumerate every value of (float8 through its 256 bit patterns).
_ENUMERABLE = [torch.bool, torch.uint8, torch.int8, torch.float8_e5m2, torch.float8_e4m3fn]


def _every_value(dtype: torch.dtype) -> list:
    if dtype == torch.bool:
        return [0, 1]
    if dtype.is_floating_point:
        patterns = torch.arange(256, dtype=torch.uint8).view(dtype).to(torch.float64).tolist()
        return [*sorted({v for v in patterns if not math.isnan(v)} | {math.inf, -math.inf}), math.nan]
    info = torch.iinfo(dtype)
    return list(range(info.min, info.max + 1))


def _passes(x, values, lo, hi, finite) -> bool:
    return not value_failures(x, values=values, lo=lo, hi=hi, finite=finite)


_CHECKS = st.tuples(
    st.none() | st.lists(NUMBER, min_size=1, max_size=5).map(tuple),
    st.none() | NUMBER,
    st.none() | NUMBER,
    st.booleans(),
)


@given(dtype=st.sampled_from(_ENUMERABLE), checks=_CHECKS)
def test_a_fields_value_set_holds_exactly_the_values_its_checks_pass(dtype, checks):
    s = ValueSet.passing(*checks, dtype)
    for x in _every_value(dtype):
        assert (x in s) == _passes(x, *checks), (x, s)


@given(dtype=st.sampled_from(_ENUMERABLE), a=_CHECKS, b=_CHECKS)
def test_union_intersection_and_difference_are_exact_and_equal_sets_are_equal(dtype, a, b):
    sa, sb = ValueSet.passing(*a, dtype), ValueSet.passing(*b, dtype)
    both, either, only = sa & sb, sa | sb, sa - sb
    member_a, member_b = [], []
    for x in _every_value(dtype):
        ina, inb = x in sa, x in sb
        member_a.append(ina)
        member_b.append(inb)
        assert (x in both, x in either, x in only) == (ina and inb, ina or inb, ina and not inb), x
    assert (sa == sb) == (member_a == member_b)  # one form per set: the spans are canonical
    numbers = [x for x in _every_value(dtype) if x in only and not math.isnan(x)]
    assert only.example() == min(numbers, key=lambda v: (math.isinf(v), abs(v)), default=None)  # nearest 0


def test_a_set_is_one_form_however_it_was_built():
    """Adjacent spans merge: ints next to each other, float values with none between them."""
    a, b = ValueSet.listed(range(6), torch.int8), ValueSet.at_least(0, torch.int8) & ValueSet.at_most(5.5, torch.int8)
    assert a == b and a.spans == ((0, True, 5, True),)
    assert ValueSet.listed([1, 2], "int") | ValueSet.listed([3], "int") == ValueSet.at_least(
        1, "int"
    ) - ValueSet.at_least(4, "int")
    f8 = torch.float8_e5m2
    small = sorted(v for v in _every_value(f8) if 0 <= v <= 1)
    assert ValueSet.listed(small, f8) == ValueSet.at_least(0, f8) & ValueSet.at_most(1, f8)
    assert len((ValueSet.at_least(0, f8) - ValueSet.listed(small[1:-1], f8)).spans) == 2


# Values around the ends of the wide float dtypes, where rounding a bound goes wrong.
_NEAR = st.sampled_from([0.1, 1e-8, 1e-40, 65504.0, 65520.0, 3.4e38, 3.5e38, 1.0, 0.5, 2.0**-24, 2.0**-149])


@given(
    dtype=st.sampled_from([torch.float16, torch.bfloat16, torch.float32, torch.float64]),
    checks=_CHECKS,
    near=st.lists(_NEAR, max_size=3),
    raw=st.binary(min_size=8, max_size=64),
)
def test_on_the_wide_float_dtypes_membership_is_what_the_checks_pass(dtype, checks, near, raw):
    s = ValueSet.passing(*checks, dtype)
    size = torch.empty((), dtype=dtype).element_size()
    raw = raw[: len(raw) - len(raw) % size]
    xs = torch.frombuffer(bytearray(raw), dtype=dtype).to(torch.float64).tolist() if raw else []
    for v in [*near, *checks[1:3]]:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v:
            xs += [float_bound(v, dtype, up) for up in (True, False)]  # the dtype's values either side
    for x in xs:
        assert (x in s) == _passes(x, *checks), (x, s)
    assert 0.1 not in ValueSet.everything(torch.float32) and 0.5 in ValueSet.everything(torch.float16)


@given(
    kind=st.sampled_from(["int", "float", "bool", "any", "str", "mapping"]),
    a=_CHECKS,
    b=_CHECKS,
    xs=st.lists(NUMBER | st.sampled_from(["x", None]), max_size=12),
)
def test_value_sets_of_kinds_are_exact_and_a_difference_gives_a_witness(kind, a, b, xs):
    from trajschema.core import kind_ok

    sa, sb = ValueSet.passing(*a, kind), ValueSet.passing(*b, kind)
    for x in xs:
        if kind_ok(kind, x) or (kind == "int" and isinstance(x, bool)) or (kind == "bool" and x in (0, 1)):
            number = isinstance(x, (int, float))
            if kind in ("str", "mapping") and number:
                continue
            assert (x in sa) == _passes(x, *a), (x, sa)
            assert (x in sa - sb) == (_passes(x, *a) and not _passes(x, *b)), x
    d = sa - sb
    if d.spans:
        w = d.example()
        assert w in sa and w not in sb
        assert _passes(w, *a) and not _passes(w, *b)


def test_value_sets_refuse_to_mix_domains_and_name_what_they_hold():
    with pytest.raises(ValueError, match="do not combine"):
        ValueSet.everything(torch.int8) & ValueSet.everything(torch.int16)
    with pytest.raises(TypeError, match="combines with a ValueSet"):
        ValueSet.everything("int") | 3
    with pytest.raises(ValueError, match="a dtype or a kind"):
        ValueSet.everything("tensor")
    with pytest.raises(TypeError, match="complex"):
        ValueSet.everything(torch.complex64)
    s = ValueSet.at_least(0.5, torch.int64)
    assert s.spans == ((1, True, 2**63 - 1, True),) and 0 not in s and 1 in s and 0.5 not in s
    assert ValueSet.at_least(1e-8, torch.float16).spans[0][0] == 2.0**-24  # the smallest float16 above
    assert ValueSet.at_most(300, torch.int8) == ValueSet.everything(torch.int8) - ValueSet.listed([], torch.int8)
    assert ValueSet.listed([True, 1, 1.0], "any") == ValueSet.listed([1], "any")
    assert ValueSet.listed([-0.0], torch.float32) == ValueSet.listed([0], torch.float32)
    assert math.nan in ValueSet.everything("float") and math.nan not in ValueSet.at_least(-math.inf, "float")
    assert "x" in ValueSet.at_least(3, "any") and "x" not in ValueSet.listed([3], "any")
    assert ValueSet.everything(torch.bool).points(5) == [0, 1] and ValueSet.nothing("int").empty
    used = ValueSet.passing((1, 2.5, True), 0, 10**400, True, torch.float16)
    assert pickle.loads(pickle.dumps(used)) == used and 2.5 in pickle.loads(pickle.dumps(used))  # after use too


# --- distinct along the last axis, and per-position extremes (issue 16)


def _python_repeats(t: torch.Tensor):
    """(count, first slice index, its repeated values) by looping over Python values, compared by ==."""
    if t.dim() == 0 or t.numel() == 0 or t.shape[-1] < 2:
        return 0, None, set()
    as_python = t.tolist()
    count, first, values = 0, None, set()

    def walk(x, at):
        nonlocal count, first, values
        if not isinstance(x[0], list):
            dup = {x[a] for a in range(len(x)) for b in range(a + 1, len(x)) if x[a] == x[b]}
            if dup:
                count += 1
                if first is None:
                    first, values = at, dup
            return
        for i, row in enumerate(x):
            walk(row, (*at, i))

    if t.shape[:-1].numel():
        walk(as_python, ())
    return count, first, values


@settings(deadline=None)
@given(t=odd_tensors(), budget=st.sampled_from([1, 2, 3, 5, 1 << 20]), pairwise=st.sampled_from([1, 16]))
def test_repeats_match_a_python_loop_over_every_slice(t, budget, pairwise):
    count, first, values = _python_repeats(t)
    with mock.patch.object(_values, "_BUDGET", budget), mock.patch.object(_values, "_PAIRWISE_UP_TO", pairwise):
        got = repeat_summary(t)
        assert has_repeats(t) == (count > 0)
        if t.dim() >= 2:
            for axis in range(t.dim() - 1):
                other = [i for i in range(t.dim() - 1) if i != axis]
                hit = torch.zeros(t.shape[axis], dtype=torch.bool)
                if count:
                    s = t.to(torch.float64) if t.dtype == torch.uint64 else t
                    eq = (s.unsqueeze(-1) == s.unsqueeze(-2)).triu(1).any(-1).any(-1)
                    hit = eq.any(dim=tuple(other)) if other else eq
                assert repeat_positions(t, axis).tolist() == hit.tolist()
    if count == 0:
        assert got is None
        return
    assert got is not None
    assert (got.count, got.first, got.slices) == (count, first, t.numel() // t.shape[-1])
    assert got.value in values


def test_nan_never_repeats_and_signed_zeros_do():
    assert repeat_summary(torch.tensor([[float("nan"), float("nan")]])) is None
    rep = repeat_summary(torch.tensor([[1.0, 2.0], [-0.0, 0.0]]))
    assert rep is not None and (rep.count, rep.first, rep.value) == (1, (1,), 0.0)


def test_repeats_in_an_expanded_tensor_of_a_trillion_slices_are_counted_without_copying():
    t = torch.tensor([3, 1, 3], dtype=torch.int16).expand(10**6, 10**6, 3)
    rep = repeat_summary(t)
    assert rep is not None and (rep.count, rep.slices, rep.first, rep.value) == (10**12, 10**12, (0, 0), 3)
    assert repeat_positions(t, 1).all() and has_repeats(t)
    assert repeat_summary(torch.tensor([1, 2, 3]).expand(10**6, 10**6, 3)) is None
    assert repeat_summary(torch.tensor([1]).expand(4, 2)) is not None  # a stride-0 last axis repeats its element


def test_repeats_need_values_and_a_leading_axis():
    assert repeat_summary(torch.empty(2, 3, device="meta")) is None
    assert not has_repeats(torch.tensor(5))
    with pytest.raises(ValueError, match="leading axis"):
        repeat_positions(torch.tensor([1, 1]), 0)


@settings(deadline=None)
@given(t=odd_tensors(), budget=st.sampled_from([1, 2, 5, 1 << 20]))
def test_position_extremes_match_python_min_and_max(t, budget):
    if t.dim() == 0:
        return
    for axis in range(t.dim()):
        with mock.patch.object(_values, "_BUDGET", budget):
            got = position_extremes(t, axis)
        if t.numel() == 0 or t.dtype == torch.uint64:
            assert got is None
            continue
        assert got is not None
        for i in range(t.shape[axis]):
            row = t.select(axis, i).reshape(-1).tolist()
            lo, hi = got[0][i].item(), got[1][i].item()
            if any(isinstance(x, float) and math.isnan(x) for x in row):
                assert math.isnan(lo) and math.isnan(hi)
            else:
                assert (lo, hi) == (min(row), max(row))


@pytest.mark.parametrize(
    ("dtype", "capacity"),
    [(torch.bool, (0, 1)), (torch.uint8, (0, 255)), (torch.int16, (-32768, 32767)), (torch.float32, None)],
)
def test_integer_capacity(dtype, capacity):
    assert integer_capacity(dtype) == capacity


@given(
    shape=st.lists(st.integers(0, 4), min_size=1, max_size=4),
    seed=st.integers(0, 2**16),
    strided=st.booleans(),
)
def test_any_per_row_is_flatten_any(shape: list[int], seed: int, strided: bool) -> None:
    from trajschema.core import any_per_row

    hit = torch.rand(shape, generator=torch.Generator().manual_seed(seed)) < 0.2
    if strided and hit.dim() > 1:
        hit = hit.transpose(0, -1)
    want = hit.flatten(1).any(1) if hit.dim() > 1 else hit
    got = any_per_row(hit)
    assert got.dtype == torch.bool and got.tolist() == want.tolist()


@given(rows=st.integers(0, 5), width=st.integers(0, 6), seed=st.integers(0, 2**16), flipped=st.booleans())
def test_first_true_is_the_first_index_of_each_row(rows: int, width: int, seed: int, flipped: bool) -> None:
    from trajschema.core import first_true

    hit = torch.rand(rows, width, generator=torch.Generator().manual_seed(seed)) < 0.3
    if flipped:
        hit = hit.flip(1)  # a negative-stride view, as the edge padding reads it
    want = [next((j for j, v in enumerate(r) if v), 0) for r in hit.tolist()]
    assert first_true(hit).tolist() == want


# --- the one-byte screen of distinct (values equal modulo 256 are not repeats)


def _slices(rows: list[list[int]], dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor(rows, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint64])
@pytest.mark.parametrize("colliding", [1, 3, 40])
@pytest.mark.parametrize("budget", [8, 64, 1 << 20])
def test_values_sharing_a_low_byte_are_told_apart_exactly(dtype, colliding, budget):
    # Of 40 slices, `colliding` have values equal modulo 256 (the screen flags them; few are
    # refined one by one, many send their block to the exact comparison), and two hold real repeats.
    rows = [[i, i + 1, i + 2, i + 3] for i in range(40)]
    for i in range(colliding):
        rows[i] = [i, i + 256, i + 512, i + 1]
    rows[7] = [9, 5, 9 + 256, 9]
    rows[33] = [300, 44, 300, 556]
    t = _slices(rows, dtype)
    count, first, values = _python_repeats(t)
    with mock.patch.object(_values, "_BUDGET", budget):
        assert has_repeats(t) and repeat_positions(t.view(10, 4, 4), 0).tolist() == [
            any(r in (7, 33) for r in range(4 * i, 4 * i + 4)) for i in range(10)
        ]
        got = repeat_summary(t)
        assert got is not None and (got.count, got.first) == (count, first) == (2, (7,)) and got.value in values
        rows[7], rows[33] = [9, 5, 9 + 256, 10], [300, 44, 301, 556]
        assert not has_repeats(_slices(rows, dtype)) and repeat_summary(_slices(rows, dtype)) is None


def test_the_screen_gives_way_once_it_stops_paying_off():
    # Every slice collides modulo 256: after the first block, blocks go straight to the exact comparison.
    t = torch.tensor([[i, i + 256, i + 512, i + 768] for i in range(64)], dtype=torch.int16)
    with (
        mock.patch.object(_values, "_BUDGET", 16),
        mock.patch.object(_values, "_byte_screened", wraps=_values._byte_screened) as screened,
    ):
        assert not has_repeats(t)
    assert screened.call_count == 1
