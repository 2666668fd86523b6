"""The three binding paths — one sample, the generated fast path, the vectorized batch screen — agree.

Random schemas (free, fixed and derived dims; inline expressions; literal axes; optional
fields) and random samples (consistent sizes, then a few axes knocked off) go through
all three; they must give identical answers: the same dims bound, and the same
samples found bad.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import trajschema as ts
from trajschema.check.batch import fast_bindings
from trajschema.check.binding import ScalarSizes, TensorSizes, bind
from trajschema.check.columns import batch_view
from trajschema.check.sample import check_sample
from trajschema.check.screen import suspicious_rows
from trajschema.tq.wire import wire_batch


@st.composite
def expressions(draw, names: list[str], depth: int = 2):
    """A dim expression over ``names``: ints, names, ``+ - *`` and unary minus."""
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(names)) if names and draw(st.booleans()) else str(draw(st.integers(0, 4)))
    op = draw(st.sampled_from(["+", "-", "*", "neg"]))
    left = draw(expressions(names, depth - 1))
    if op == "neg":
        return f"-({left})"
    return f"({left}) {op} ({draw(expressions(names, depth - 1))})"


@st.composite
def schemas(draw):
    dims: dict = {}
    names: list[str] = []
    for i in range(draw(st.integers(1, 4))):
        name = f"f{i}"
        bounds = {}
        if draw(st.booleans()):
            bounds["min"] = draw(st.integers(0, 2))
        if draw(st.booleans()):
            bounds["max"] = draw(st.integers(3, 9))
        if draw(st.booleans()):
            bounds["multiple_of"] = draw(st.integers(1, 3))
        dims[name] = bounds
        names.append(name)
    if draw(st.booleans()):
        dims["k"] = draw(st.integers(0, 3))
        names.append("k")
    for i in range(draw(st.integers(0, 2))):
        dims[f"g{i}"] = draw(expressions(list(names)))
        names.append(f"g{i}")
    fields = {}
    for i in range(draw(st.integers(1, 5))):
        axes = []
        for _ in range(draw(st.integers(0, 3))):
            kind = draw(st.integers(0, 5))
            axes.append(
                draw(st.integers(0, 3))
                if kind == 0
                else draw(expressions(names))
                if kind == 1
                else draw(st.sampled_from(names))
            )
        fields[f"x{i}"] = {"shape": axes, "dtype": "int64", "pad": 0, "required": draw(st.booleans()) or i == 0}
    fields["n"] = {"kind": "int", "pad": 0}
    try:
        return ts.schema_from_dict({"name": "random", "dims": dims, "fields": fields})
    except ts.SchemaDefinitionError:  # e.g. a constant expression below zero: not a schema
        reject()


def _sizes(schema: ts.Schema, draw) -> dict[str, int]:
    """Sizes for the free dims, then fixed and derived dims computed (possibly negative: a bad sample)."""
    env: dict[str, int] = {}
    for name, d in schema.dims.items():
        if isinstance(d, ts.FreeDim):
            env[name] = draw(st.integers(0, 7))
        elif isinstance(d, ts.FixedDim):
            env[name] = d.size
        else:
            env[name] = d.expr.evaluate(env)
    return env


@st.composite
def sample_for(draw, schema: ts.Schema, present: frozenset[str]):
    env = _sizes(schema, draw)
    out: dict = {"n": 1}
    for f in schema.fields.values():
        if not f.is_tensor or (not f.required and f.name not in present):
            continue
        shape = [e.evaluate(env) for e in f.shape or ()]
        if draw(st.integers(0, 4)) == 0 and shape:
            i = draw(st.integers(0, len(shape) - 1))
            shape[i] += draw(st.sampled_from([-1, 1, 2]))
        out[f.name] = torch.zeros([max(s, 0) for s in shape], dtype=torch.int64)
    return out


@st.composite
def cases(draw):
    schema = draw(schemas())
    optional = [f.name for f in schema.fields.values() if f.is_tensor and not f.required]
    present = frozenset(draw(st.sets(st.sampled_from(optional))) if optional else ())
    samples = draw(st.lists(sample_for(schema, present), min_size=1, max_size=6))
    free = [n for n, d in schema.dims.items() if isinstance(d, ts.FreeDim)]
    pinned = {}
    if free and draw(st.integers(0, 3)) == 0:
        pinned[draw(st.sampled_from(free))] = draw(st.integers(0, 7))
    return schema, samples, pinned


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_one_sample_the_fast_path_and_the_batch_screen_agree(case):
    schema, samples, pinned = case
    plan = schema.plan
    results = [check_sample(plan, s, dims=pinned, depth="shapes") for s in samples]
    bad = [i for i, (_, found) in enumerate(results) if found]
    for s, (bound, found) in zip(samples, results):
        fast = fast_bindings(plan, s, None, pinned, "shapes")
        if found:
            assert fast is None
        elif fast is not None:
            assert fast == bound
    view = batch_view(wire_batch(samples))
    assert suspicious_rows(plan, view, tags=None, dims=pinned, depth="shapes") == bad
    # And the public answers are identical for a list and for TransferQueue's layout.
    as_list = schema.batch_violations(samples, dims=pinned, depth="shapes")
    as_table = schema.batch_violations(wire_batch(samples), dims=pinned, depth="shapes")
    assert as_list == as_table


@settings(deadline=None)
@given(
    obs=st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=5), min_size=1, max_size=4),
    preferred=st.none() | st.integers(0, 4),
)
def test_majority_is_the_same_on_ints_and_on_tensors(obs, preferred):
    n = min(len(o) for o in obs)
    columns = [o[:n] for o in obs]
    vec = TensorSizes(n, torch.device("cpu"))
    got = vec.majority([torch.tensor(c) for c in columns], None if preferred is None else vec.lift(preferred))
    for j in range(n):
        assert got[j].item() == ScalarSizes().majority([c[j] for c in columns], preferred)


def test_ties_go_to_the_computed_size_then_to_the_first_observer():
    sizes = ScalarSizes()
    assert sizes.majority([3, 4], None) == 3
    assert sizes.majority([3, 4], 4) == 4
    assert sizes.majority([3, 4, 4], 3) == 3  # 3 (with the computed vote) ties 4: computed wins


@pytest.mark.parametrize("sizes", [ScalarSizes(), TensorSizes(1, torch.device("cpu"))], ids=["ints", "tensors"])
def test_bind_solves_a_derived_dim_for_its_one_unbound_input(sizes):
    schema = ts.schema_from_dict(
        {
            "name": "s",
            "dims": {"p": {}, "r": {}, "s": "p + r"},
            "fields": {"a": {"shape": ["p"], "dtype": "int64", "pad": 0}},
        }
    )
    plan = schema.plan.dim_plan
    lift = sizes.lift
    b = bind(plan, {"p": [("a", lift(3))], "s": [("b", lift(8))]}, {}, sizes)
    assert int(b.env["r"]) == 5
    assert not any(bool(m) for *_, m in b.relations)
