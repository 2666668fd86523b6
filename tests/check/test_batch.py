"""Batch validation: lists of samples and TransferQueue-shaped TensorDicts."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import NonTensorStack, TensorDict

import trajschema as ts
from tests.meta_support import on_meta
from trajschema.check import batch as _check
from trajschema.testing import tq_batch, verl_sample

VLM_MOE = ts.load_schema("vlm_mrope_moe")
VLM = ts.load_schema("vlm_mrope")
TEXT = ts.load_schema("text")

LENGTHS = [(5, 3), (9, 1), (4, 12), (30, 7), (1, 0)]


def realistic(schema, lengths=LENGTHS, **kw):
    return [verl_sample(schema, p, r, uid=f"q{i // 2}", seed=i, **kw) for i, (p, r) in enumerate(lengths)]


def test_jagged_batch_of_every_schema_validates(schema):
    samples = realistic(schema)
    batch = tq_batch(samples)
    assert batch["input_ids"].layout == torch.jagged
    schema.validate_batch(batch)
    schema.validate_batch(samples)
    tags = [{"is_padding": False, "seq_len": p + r} for p, r in LENGTHS]
    schema.validate_batch(batch, tags=tags)


def test_ragged_dim_need_not_be_the_first():
    batch = tq_batch(realistic(VLM_MOE))
    assert batch["position_ids"]._ragged_idx == 2  # (B, 4, S): S is ragged
    VLM_MOE.validate_batch(batch)


def test_equal_lengths_still_jagged():
    batch = tq_batch(realistic(VLM_MOE, [(6, 2)] * 4))
    assert batch["routed_experts"].is_nested
    VLM_MOE.validate_batch(batch)


def test_dense_columns_are_accepted():
    samples = realistic(TEXT, [(6, 2)] * 3, optional=False)
    dense = TensorDict(
        {k: torch.stack([s[k] for s in samples]) for k in samples[0] if isinstance(samples[0][k], torch.Tensor)},
        batch_size=[3],
    )
    dense["num_turns"] = torch.tensor([1, 2, 3])
    dense["uid"] = NonTensorStack.from_list([s["uid"] for s in samples])
    TEXT.validate_batch(dense)
    dense["num_turns"] = torch.tensor([1, -2, 3])
    with pytest.raises(ts.SchemaError) as info:
        TEXT.validate_batch(dense)
    assert [(v.sample, v.field, v.code) for v in info.value.violations] == [(1, "num_turns", "value")]


def test_strided_fallback_with_mixed_rope_rows():
    samples = realistic(VLM)
    samples[1]["position_ids"] = samples[1]["position_ids"][1:]
    samples[3]["position_ids"] = samples[3]["position_ids"][1:]
    batch = tq_batch(samples)
    assert batch["position_ids"].layout == torch.strided and batch["position_ids"].is_nested
    with pytest.raises(ts.SchemaError) as info:
        VLM.validate_batch(batch)
    assert [(v.sample, v.field, v.code) for v in info.value.violations] == [
        (1, "position_ids", "shape"),
        (3, "position_ids", "shape"),
    ]


def test_every_bad_sample_is_reported_with_its_index():
    samples = realistic(VLM_MOE)
    samples[0]["response_mask"] = torch.ones(4, dtype=torch.int64)
    samples[2]["routed_experts"] = samples[2]["routed_experts"][:-1]
    samples[3]["loss_mask"][5] = 3
    samples[4]["uid"] = 5
    expected = [
        (0, "response_mask", "dim_mismatch"),
        (2, "routed_experts", "dim_mismatch"),
        (3, "loss_mask", "value"),
        (4, "uid", "kind"),
    ]
    for batch in (samples, tq_batch(samples)):
        with pytest.raises(ts.SchemaError) as info:
            VLM_MOE.validate_batch(batch)
        assert [(v.sample, v.field, v.code) for v in info.value.violations] == expected
        assert VLM_MOE.batch_violations(batch, depth="shapes") == [
            v for v in info.value.violations if v.code != "value"
        ]


def test_tags_are_checked_per_sample():
    samples = realistic(TEXT)
    tags = [{"seq_len": p + r} for p, r in LENGTHS]
    tags[3]["seq_len"] += 1
    for batch in (samples, tq_batch(samples)):
        with pytest.raises(ts.SchemaError) as info:
            TEXT.validate_batch(batch, tags=tags)
        assert [(v.sample, v.field, v.code) for v in info.value.violations] == [(3, "seq_len", "tag")]


def test_tags_of_the_wrong_length():
    samples = realistic(TEXT)
    (v,) = TEXT.batch_violations(tq_batch(samples), tags=[{}])
    assert (v.sample, v.field, v.code) == (None, "<tags>", "batch")
    assert "expected 5, found 1" in v.message


def test_column_wide_problems_reach_every_sample():
    samples = realistic(VLM_MOE)
    batch = tq_batch(samples)
    batch["routed_experts"] = torch.nested.nested_tensor(
        [s["routed_experts"].float() for s in samples], layout=torch.jagged
    )
    del batch["uid"]
    found = VLM_MOE.batch_violations(batch)
    assert sorted({(v.field, v.code) for v in found}) == [("routed_experts", "dtype"), ("uid", "missing")]
    assert sorted({v.sample for v in found}) == list(range(len(samples)))


def test_a_clean_jagged_batch_is_never_unbound_per_sample(monkeypatch):
    calls = []
    real = _check.check_sample
    monkeypatch.setattr(_check, "check_sample", lambda *a, **k: calls.append(1) or real(*a, **k))
    batch = tq_batch(realistic(VLM_MOE, [(p, r) for p in range(1, 9) for r in range(8)]))
    VLM_MOE.validate_batch(batch)
    assert calls == []
    bad = realistic(VLM_MOE)
    bad[1]["loss_mask"][0] = 7
    assert len(VLM_MOE.batch_violations(tq_batch(bad))) == 1
    assert len(calls) == 1  # only the suspicious row gets a closer look


def test_not_a_batch():
    with pytest.raises(TypeError, match="list of sample mappings or a TensorDict"):
        TEXT.validate_batch(42)
    with pytest.raises(TypeError, match="mapping"):
        TEXT.validate_batch([verl_sample(TEXT, 3, 2), "not a sample"])


def test_empty_batches_are_fine():
    TEXT.validate_batch([])
    TEXT.validate_batch(TensorDict({}, batch_size=[0]))


def test_a_two_dim_batch_size_is_a_batch_violation():
    (v,) = TEXT.batch_violations(TensorDict({}, batch_size=[2, 3]))
    assert (v.field, v.code) == ("<batch>", "batch")


# The vectorized screen and the per-sample check must agree on every batch: the batch
# report equals the per-sample reports with their indices.

MUTATIONS = {
    "mask_len": lambda s: s.update(response_mask=torch.ones(s["response_mask"].numel() + 1, dtype=torch.int64)),
    "rope_rows": lambda s: s.update(position_ids=s["position_ids"][:3]),
    "experts_short": lambda s: s.update(routed_experts=s["routed_experts"][:-1]),
    "mask_value": lambda s: s["loss_mask"].__setitem__(0, 2) if s["loss_mask"].numel() else None,
    "seq_all": lambda s: [
        s.update({k: torch.cat([s[k], s[k][..., -1:]], dim=-1)})
        for k in ("input_ids", "position_ids", "attention_mask")
    ],
    "nan_logprob": lambda s: (
        s["rollout_log_probs"].__setitem__(0, float("nan")) if s["rollout_log_probs"].numel() else None
    ),
    "uid_int": lambda s: s.update(uid=1),
    "turns_negative": lambda s: s.update(num_turns=-1),
}


@settings(deadline=None)
@given(
    lengths=st.lists(st.tuples(st.integers(1, 12), st.integers(0, 6)), min_size=1, max_size=8),
    mutations=st.lists(st.tuples(st.integers(0, 7), st.sampled_from(sorted(MUTATIONS))), max_size=4),
    depth=st.sampled_from(["shapes", "values"]),
)
def test_batch_report_equals_per_sample_reports(lengths, mutations, depth):
    samples = realistic(VLM_MOE, lengths)
    for index, name in mutations:
        MUTATIONS[name](samples[index % len(samples)])
    per_sample = []
    for i, s in enumerate(samples):
        per_sample += [
            ts.Violation(i, v.field, v.code, v.expected, v.actual, v.message)
            for v in VLM_MOE.violations(s, depth=depth)
        ]
    assert VLM_MOE.batch_violations(samples, depth=depth) == per_sample
    try:
        batch = tq_batch(samples)
    except (RuntimeError, ValueError):
        return  # shapes no nested tensor can hold together; TransferQueue could not return them either
    assert VLM_MOE.batch_violations(batch, depth=depth) == per_sample


@st.composite
def _odd_columns(draw, n):
    kind = draw(st.sampled_from(["dense", "jagged", "strided", "nontensor", "meta", "scalar-col"]))
    dtype = draw(st.sampled_from([torch.int64, torch.int32, torch.int16, torch.bool, torch.float32]))
    if kind == "dense":
        return torch.zeros((n, *draw(st.lists(st.integers(0, 4), max_size=3))), dtype=dtype)
    if kind == "jagged":
        tail = draw(st.lists(st.integers(1, 3), max_size=2))
        return torch.nested.nested_tensor(
            [torch.zeros((draw(st.integers(0, 5)), *tail), dtype=dtype) for _ in range(n)], layout=torch.jagged
        )
    if kind == "strided":
        return torch.nested.nested_tensor([torch.zeros(draw(st.integers(1, 3)), i + 1, dtype=dtype) for i in range(n)])
    if kind == "nontensor":
        return NonTensorStack.from_list(
            draw(st.lists(st.one_of(st.integers(), st.text(max_size=2), st.none()), min_size=n, max_size=n))
        )
    if kind == "meta":
        return torch.empty((n, 3), device="meta", dtype=dtype)
    return torch.arange(n, dtype=dtype) if dtype != torch.bool else torch.ones(n, dtype=dtype)


@settings(deadline=None)
@given(data=st.data(), depth=st.sampled_from(["shapes", "values"]))
def test_any_tensordict_batch_gets_violations_never_a_crash(data, depth):
    samples = realistic(VLM_MOE, [(3, 2), (5, 1), (2, 4)])
    batch = tq_batch(samples)
    for name in data.draw(st.lists(st.sampled_from(sorted(batch.keys())), max_size=3, unique=True)):
        batch[name] = data.draw(_odd_columns(3))
    found = VLM_MOE.batch_violations(batch, depth=depth)
    assert all(isinstance(v, ts.Violation) for v in found)
    if found:
        with pytest.raises(ts.SchemaError):
            VLM_MOE.validate_batch(batch, depth=depth)
    else:
        VLM_MOE.validate_batch(batch, depth=depth)


# --- batches of every odd kind (issue 14): a TypeError naming what is wrong, or violations

import re  # noqa: E402

import numpy as np  # noqa: E402
from tensordict import LazyStackedTensorDict  # noqa: E402

_ONE = verl_sample(TEXT, 3, 2)

#: id -> (batch, message regex of the TypeError: it names the batch, or the sample by index).
NOT_A_BATCH = {
    "int": (42, r"^a batch must be a list of sample mappings or a TensorDict, found int 42$"),
    "none": (None, r"^a batch must be .*found NoneType$"),
    "str": ("ab", r"^a batch must be .*found str 'ab'$"),
    "bytes": (b"ab", r"^a batch must be .*found bytes$"),
    "one-sample-dict": (_ONE, rf"^a batch must be .*found dict with {len(_ONE)} keys$"),
    "tensor": (torch.zeros(3), r"^a batch must be .*found f32\[3\]$"),
    "ndarray": (np.zeros(2), r"^a batch must be .*found numpy\.ndarray$"),
    "generator": ((s for s in [_ONE]), r"^a batch must be .*found generator$"),
    "list-of-ints": ([1, 2], r"^batch\[0\]: a sample must be a mapping .*found int 1$"),
    "none-among-samples": ([_ONE, _ONE, None], r"^batch\[2\]: a sample must be a mapping .*found NoneType$"),
    "str-among-samples": ((_ONE, "q0"), r"^batch\[1\]: a sample must be a mapping .*found str 'q0'$"),
    "list-of-lists": ([[_ONE]], r"^batch\[0\]: a sample must be a mapping .*found list of 1$"),
}


@pytest.mark.parametrize("method", ["validate_batch", "batch_violations"])
@pytest.mark.parametrize(("batch", "match"), list(NOT_A_BATCH.values()), ids=list(NOT_A_BATCH))
def test_what_is_not_a_batch_is_a_type_error_naming_it(method, batch, match):
    with pytest.raises(TypeError) as info:
        getattr(TEXT, method)(batch)
    assert re.search(match, str(info.value)), str(info.value)


_TWO = [verl_sample(TEXT, 3, 2), verl_sample(TEXT, 5, 1, seed=1)]

#: id -> (batch, tags, the (sample, field, code) of every violation): tags and batch shapes are data.
ODD_TAGS_AND_BATCH_SHAPES = {
    "empty-list": ([], None, []),
    "empty-tuple": ((), None, []),
    "tensordict-batch-dims-0": (TensorDict({}, batch_size=[]), None, [(None, "<batch>", "batch")]),
    "tensordict-batch-dims-2": (TensorDict({}, batch_size=[2, 2]), None, [(None, "<batch>", "batch")]),
    "tags-short": (_TWO, [{}], [(None, "<tags>", "batch")]),
    "tags-long": (_TWO, [{}, {}, {}], [(None, "<tags>", "batch")]),
    "tags-a-dict": (_TWO, {"seq_len": 5}, [(None, "<tags>", "batch")]),
    "tags-a-str": (_TWO, "ab", [(None, "<tags>", "batch")]),
    "tags-an-iterator": (_TWO, iter([{}, {}]), [(None, "<tags>", "batch")]),
    "tags-an-ndarray": (_TWO, np.array([{}, {}]), [(None, "<tags>", "batch")]),
    "tags-of-ints": (_TWO, [1, None], [(0, "<tag>", "tag")]),
    "tags-a-tuple": (_TWO, ({}, {"seq_len": 6}), []),
    "tags-wrong-kind": (_TWO, [{"seq_len": "5"}, {"seq_len": 6.0}], [(0, "seq_len", "tag"), (1, "seq_len", "tag")]),
}


@pytest.mark.parametrize("layout", ["list", "tensordict"])
@pytest.mark.parametrize(
    ("batch", "tags", "expected"), list(ODD_TAGS_AND_BATCH_SHAPES.values()), ids=list(ODD_TAGS_AND_BATCH_SHAPES)
)
def test_odd_tags_and_batch_shapes_are_violations(layout, batch, tags, expected):
    if layout == "tensordict" and isinstance(batch, (list, tuple)):
        batch = tq_batch(list(batch))
    if isinstance(tags, type(iter([]))):
        tags = iter(list(tags))  # each run gets a fresh iterator
    found = TEXT.batch_violations(batch, tags=tags)
    assert [(v.sample, v.field, v.code) for v in found] == expected
    if expected:
        with pytest.raises(ts.SchemaError) as info:
            TEXT.validate_batch(batch, tags=tags)
        assert [(v.sample, v.field, v.code) for v in info.value.violations] == expected


def _lazy(samples):
    rows = [TensorDict({k: v for k, v in s.items() if isinstance(v, torch.Tensor)}, batch_size=[]) for s in samples]
    for row, s in zip(rows, samples, strict=True):
        for k, v in s.items():
            if not isinstance(v, torch.Tensor):
                row.set_non_tensor(k, v)
    return LazyStackedTensorDict.lazy_stack(rows)


@settings(deadline=None)
@given(lengths=st.lists(st.tuples(st.integers(1, 9), st.integers(0, 5)), min_size=1, max_size=5), bad=st.integers(0, 4))
def test_a_lazy_stack_of_ragged_samples_is_checked_like_the_list(lengths, bad):
    samples = realistic(TEXT, lengths)
    i = bad % len(samples)
    samples[i]["loss_mask"] = samples[i]["loss_mask"][:-1] if len(samples[i]["loss_mask"]) else torch.ones(1)
    want = TEXT.batch_violations(samples)
    assert want  # the one short loss mask
    assert TEXT.batch_violations(_lazy(samples)) == want


# -- value checks in bounded memory ----------------------------------------------------

import itertools  # noqa: E402
from unittest import mock  # noqa: E402

from trajschema.check import columns as _columns  # noqa: E402
from trajschema.check import screen as _screen  # noqa: E402
from trajschema.core import elements as _values  # noqa: E402

_X = ts.schema_from_dict(
    {
        "name": "xs",
        "dims": {"n": {}, "w": {}},
        "fields": {"x": {"shape": ["n", "w"], "dtype": "int64", "pad": "copy", "min": 0, "values": [0, 1, 3]}},
    }
)


def test_expanded_dense_and_jagged_columns_of_a_trillion_elements():
    big = 2**40  # logical elements: a full-size mask would fail to allocate
    dense = TensorDict({"x": torch.tensor([[[0]], [[5]], [[1]]]).expand(3, big, 1)}, batch_size=[3])
    want = f"{big} of {big} elements are not in {{0, 1, 3}} (first at [0,0]: 5)"
    assert [(v.sample, v.message) for v in _X.batch_violations(dense)] == [(1, want)]
    offsets = torch.tensor([0, big, 2 * big])
    jagged = torch.nested.nested_tensor_from_jagged(torch.tensor([[-1, 0]]).expand(2 * big, 2), offsets)
    found = [(v.sample, v.expected, v.actual) for v in _X.batch_violations(TensorDict({"x": jagged}, batch_size=[2]))]
    each = f"{big} of {2 * big} elements (first at [0,0]: -1)"
    assert found == [(i, e, each) for i in (0, 1) for e in ("in {0, 1, 3}", ">= 0")]


@st.composite
def _jagged_columns(draw):
    """A jagged ``x`` column and its rows as plain tensors: ragged first or second, gaps between rows
    (a narrowed column) holding bad values that belong to no sample, or values repeated by expand."""
    width = draw(st.integers(1, 3))
    lengths = draw(st.lists(st.integers(0, 5), min_size=1, max_size=6))
    gaps = [draw(st.integers(0, 2)) for _ in lengths]
    total = sum(lengths) + sum(gaps)
    if draw(st.booleans()):
        flat = torch.tensor([[draw(st.integers(-1, 3))] * width]).expand(total, width)
    else:
        flat = torch.tensor(draw(st.lists(st.integers(-1, 3), min_size=total * width, max_size=total * width)))
        flat = flat.reshape(total, width)
    offsets = torch.tensor([0, *itertools.accumulate(n + g for n, g in zip(lengths, gaps))])
    rows = [flat[int(offsets[i]) : int(offsets[i]) + n] for i, n in enumerate(lengths)]
    narrowed = torch.tensor(lengths) if any(gaps) else None
    if draw(st.booleans()):  # ragged at dim 2 of (B, w, S), like mrope position ids
        col = torch.nested.nested_tensor_from_jagged(flat.t(), offsets, lengths=narrowed, jagged_dim=2)
        return col, [r.t() for r in rows]
    return torch.nested.nested_tensor_from_jagged(flat, offsets, lengths=narrowed), rows


@settings(deadline=None)
@given(case=_jagged_columns(), chunk=st.sampled_from([1, 2, 3, 7, 1 << 20]), budget=st.sampled_from([1, 2, 5, 1 << 20]))
def test_jagged_rows_are_screened_in_chunks_as_the_samples_check(case, chunk, budget):
    col, rows = case
    f = _X.fields["x"]
    want = [_values.tensor_has_failures(f, r) for r in rows]  # each sample alone, whole
    nonzero = [int((r != 0).sum()) for r in rows]
    with mock.patch.object(_columns, "_ROWS_CHUNK", chunk), mock.patch.object(_values, "_BUDGET", budget):
        assert _screen._bad_value_rows(f, col, len(rows)).tolist() == want
        counts = _columns.nonzero_per_row(col, len(rows))
    assert counts is not None
    assert counts[0].tolist() == nonzero and counts[1].tolist() == [r.numel() for r in rows]


def test_the_padding_contract_counts_an_expanded_mask_without_copying_it():
    schema = ts.schema_from_dict(
        {
            "name": "m",
            "dims": {"n": {}},
            "fields": {"mask": {"shape": ["n"], "dtype": "int64", "pad": 0, "values": [0, 1]}},
            "tags": {"is_padding": {"kind": "bool", "default": False}},
        }
    )
    big = 2**40  # logical elements: the old reshape copied them, and a full-size mask would not fit
    dense = TensorDict({"mask": torch.tensor([[0], [1]]).expand(2, big)}, batch_size=[2])
    found = ts.padding_contract_violations(dense, [{"is_padding": True}] * 2, schema)
    assert [(v.sample, v.actual) for v in found] == [(1, f"{big} of {big} elements non-zero")]
    offsets = torch.tensor([0, big, 2 * big])
    jagged = torch.nested.nested_tensor_from_jagged(torch.tensor([1]).expand(2 * big), offsets)
    found = ts.padding_contract_violations(
        TensorDict({"mask": jagged}, batch_size=[2]), [{}, {"is_padding": True}], schema
    )
    assert [(v.sample, v.actual) for v in found] == [(1, f"{big} of {big} elements non-zero")]


# -- meta and mixed-device batches (each test failed when written) --------------------


def _codes(found: list[ts.Violation]) -> list[tuple[object, str, str]]:
    return [(v.sample, v.field, v.code) for v in found]


def test_jagged_meta_batches_check_at_depth_shapes():
    samples = [verl_sample(VLM_MOE, p, r, layers=2, topk=2, seed=p) for p, r in [(5, 3), (7, 1), (2, 9)]]
    meta = on_meta(tq_batch(samples))
    assert meta["input_ids"].device.type == "meta"
    VLM_MOE.validate_batch(meta, depth="shapes")  # nothing to read, nothing raised
    assert VLM_MOE.batch_violations(meta, depth="values") == []  # meta has no values to check


def test_meta_batches_still_report_what_their_static_shapes_show():
    samples = [verl_sample(VLM, 5, 3), verl_sample(VLM, 6, 2)]
    td = tq_batch(samples)
    td["position_ids"] = torch.zeros(2, 3, 8, dtype=torch.int64, device="meta")  # 3 rope rows, not 4
    codes = {(v.sample, v.field, v.code) for v in VLM.batch_violations(td, depth="shapes")}
    assert (0, "position_ids", "shape") in codes and (1, "position_ids", "shape") in codes


def test_meta_jagged_batch_with_a_bad_dtype_reports_it():
    """A jagged meta batch whose column has a wrong dtype gets dtype violations, not a torch RuntimeError."""
    samples = [verl_sample(VLM, 5, 3), verl_sample(VLM, 4, 2)]
    for s in samples:
        s["loss_mask"] = s["loss_mask"].to(torch.int32)
    found = VLM.batch_violations(on_meta(tq_batch(samples)), depth="shapes")
    assert {(v.sample, v.code) for v in found if v.field == "loss_mask"} == {(0, "dtype"), (1, "dtype")}


def test_meta_jagged_batch_with_a_bad_non_tensor_reports_it():
    """A jagged meta batch with a non-str uid in one row reports (0, uid, kind) instead of crashing on the row cut."""
    samples = [verl_sample(VLM, 5, 3), verl_sample(VLM, 4, 2)]
    samples[0]["uid"] = 5
    found = VLM.batch_violations(on_meta(tq_batch(samples)), depth="shapes")
    assert (0, "uid", "kind") in _codes(found)


def test_jagged_meta_and_dense_meta_columns_mix():
    """Sizes of jagged columns (their device) and dense columns (host) bind together, without a device error."""
    samples = [verl_sample(TEXT, 5, 3), verl_sample(TEXT, 4, 3)]
    td = on_meta(tq_batch(samples))
    for k in ["responses", "response_mask", "loss_mask", "rollout_log_probs", "rm_scores"]:
        td[k] = torch.stack([s[k] for s in samples]).to("meta")  # same response length: dense (B, R)
    assert TEXT.batch_violations(td, depth="shapes") == []


def test_columns_on_different_devices_bind_together():
    """A batch whose columns sit on different devices (one jagged column on meta) is checked, never a device error."""
    samples = [verl_sample(TEXT, 5, 3), verl_sample(TEXT, 4, 2)]
    td = on_meta(tq_batch(samples), only={"input_ids"})
    assert TEXT.batch_violations(td, depth="shapes") == []


# -- a TensorDict batch and the list of the same samples must agree -------------------


@pytest.mark.parametrize(
    "value",
    [True, False, 8.0, 8.5, "8", None, torch.tensor(8), np.float64(8.5), [8]],
    ids=["True", "False", "float-8.0", "float-8.5", "str", "None", "tensor", "np-float", "list"],
)
def test_a_length_tag_of_the_wrong_kind_is_reported_for_a_tensordict_batch(value):
    """seq_len must be an int: validate_batch on a TensorDict reports it exactly as on the list of samples."""
    samples = [verl_sample(TEXT, 5, 3), verl_sample(TEXT, 5, 3)]
    tags = [{"seq_len": value}, {}]
    expected = _codes(TEXT.batch_violations(samples, tags=tags))
    assert expected == [(0, "seq_len", "tag")]
    assert _codes(TEXT.batch_violations(tq_batch(samples), tags=tags)) == expected


_TAG_VALUES = st.one_of(
    st.integers(-3, 300),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.none(),
    st.sampled_from([np.int64(8), np.int32(5), np.uint64(3), np.float32(8.0), np.bool_(True)]),
)


@settings(suppress_health_check=list(HealthCheck))
@given(
    lengths=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 4)), min_size=1, max_size=4),
    tag_dicts=st.lists(
        st.dictionaries(
            st.sampled_from(["is_padding", "prompt_len", "response_len", "seq_len", "status"]), _TAG_VALUES
        ),
        min_size=4,
        max_size=4,
    ),
)
def test_tag_reports_of_a_tensordict_equal_those_of_the_list(lengths, tag_dicts):
    """Any tag dicts: validate_batch on tq_batch(samples) reports what it reports on the samples themselves."""
    samples = [verl_sample(TEXT, p, r, seed=i) for i, (p, r) in enumerate(lengths)]
    tags = tag_dicts[: len(samples)]
    assert TEXT.batch_violations(tq_batch(samples), tags=tags) == TEXT.batch_violations(samples, tags=tags)


def test_a_tags_argument_that_is_a_string_is_reported_plainly():
    (v,) = TEXT.batch_violations([verl_sample(TEXT, 3, 2)], tags="x")
    assert v.actual == "str 'x'"


def test_numpy_arrays_in_a_required_non_tensor_column_are_kind_violations():
    """Numpy arrays in a required non-tensor column are kind violations, not numpy's truth-value error."""
    samples = [verl_sample(VLM, 5, 3), verl_sample(VLM, 4, 3)]
    for s in samples:
        s["num_turns"] = np.array([1, 2])
    expected = _codes(VLM.batch_violations(samples))
    assert expected == [(0, "num_turns", "kind"), (1, "num_turns", "kind")]
    assert _codes(VLM.batch_violations(tq_batch(samples))) == expected


@pytest.mark.parametrize("depth", ["shapes", "values"])
def test_a_sparse_column_is_a_kind_violation_like_a_sparse_sample(depth):
    """A sparse tensor column in a TensorDict batch is reported (kind), as each sparse sample of a list is."""
    samples = [verl_sample(TEXT, 3, 2), verl_sample(TEXT, 3, 2)]
    tensors = [k for k, v in samples[0].items() if isinstance(v, torch.Tensor)]
    td = TensorDict({k: torch.stack([s[k] for s in samples]) for k in tensors}, batch_size=[2])
    td["num_turns"] = torch.tensor([1, 1])
    td["uid"] = NonTensorStack("a", "b")
    td["response_mask"] = td["response_mask"].to_sparse()
    as_list = [dict(s, response_mask=s["response_mask"].to_sparse(), num_turns=torch.tensor(1)) for s in samples]
    expected = _codes(TEXT.batch_violations(as_list, depth=depth))
    assert expected == [(0, "response_mask", "kind"), (1, "response_mask", "kind")]
    assert _codes(TEXT.batch_violations(td, depth=depth)) == expected


def test_dims_beyond_int64_give_the_same_answer_for_a_list_and_a_tensordict():
    """dims={'layers': 2**63} is refused or reported alike for a list and a TensorDict, never a torch overflow."""
    s = verl_sample(VLM_MOE, 5, 3, layers=2, topk=2)

    def outcome(batch):
        try:
            return _codes(VLM_MOE.batch_violations(batch, dims={"layers": 2**63}))
        except ValueError as e:
            return type(e).__name__

    assert outcome(tq_batch([s])) == outcome([s])


def test_a_lazy_stacked_batch_is_checked_like_its_rows():
    """A LazyStackedTensorDict of ragged per-sample rows is validated like its rows, not a stacking error."""
    samples = [verl_sample(TEXT, 5, 3, uid="a"), verl_sample(TEXT, 4, 2, uid="b")]
    samples[1]["loss_mask"] = torch.tensor([0, 5])
    rows = []
    for s in samples:
        row = TensorDict({k: v for k, v in s.items() if isinstance(v, torch.Tensor)}, batch_size=[])
        row["num_turns"] = torch.tensor(s["num_turns"])
        row.set_non_tensor("uid", s["uid"])
        rows.append(row)
    lazy = LazyStackedTensorDict.lazy_stack(rows, 0)
    assert _codes(TEXT.batch_violations(lazy)) == [(1, "loss_mask", "value")]


# --- bounds written in dims and distinct slices (issue 16): every layout agrees with the samples' reports


def _bounded_schema(dtype, lo, hi, distinct: bool) -> ts.Schema:
    field = {"shape": ["seq", "k"], "dtype": dtype, "pad": "copy", "distinct": distinct}
    if lo is not None:
        field["min"] = lo
    if hi is not None:
        field["max"] = hi
    return ts.schema_from_dict(
        {"name": "bounded", "dims": {"seq": {"min": 0}, "k": {"min": 1}, "experts": {"min": 1}}, "fields": {"r": field}}
    )


def _reference_codes(rows, k, dtype, lo, hi, distinct, experts, depth):
    """What a sample breaks, by looping over its elements in Python: no shared code with the package.

    ``k`` is every sample's row width: a sample with no rows is a ``(0, k)`` tensor, whose
    shape still says ``k``.
    """
    out = []
    for i, r in enumerate(rows):
        env = {"seq": len(r), "k": k, "experts": experts}
        bounds = [_eval(e, env) for e in (lo, hi)]
        codes = set()
        info = torch.iinfo(dtype)
        if (bounds[1] is not None and bounds[1] > info.max) or (bounds[0] is not None and bounds[0] < info.min):
            codes.add("dtype")
        if depth == "values":
            flat = [x for row in r for x in row]
            if bounds[0] is not None and any(x < bounds[0] for x in flat):
                codes.add("value")
            if bounds[1] is not None and any(x > bounds[1] for x in flat):
                codes.add("value")
            if distinct and any(row[a] == row[b] for row in r for a in range(len(row)) for b in range(a + 1, len(row))):
                codes.add("repeated")
        out += [(i, "r", c) for c in sorted(codes)]
    return out


def _eval(expr, env):
    if expr is None or any(env[n] is None for n in env if n in expr):
        return None
    return eval(expr, {}, dict(env))  # the test's own tiny expressions: a reference independent of parse_expr


_BOUNDS_LO = [None, "k - 2", "seq - 3"]
_BOUNDS_HI = [None, "experts - 1", "seq", "2 * k + seq - 4"]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    dtype=st.sampled_from([torch.int16, torch.uint8, torch.int32, torch.int64]),
    lo=st.sampled_from(_BOUNDS_LO),
    hi=st.sampled_from(_BOUNDS_HI),
    distinct=st.booleans(),
    experts=st.sampled_from([None, 3, 300]),
    depth=st.sampled_from(["shapes", "values"]),
)
def test_dim_bounds_and_distinct_agree_in_every_layout_with_a_python_reference(
    data, dtype, lo, hi, distinct, experts, depth
):
    schema = _bounded_schema(str(dtype).removeprefix("torch."), lo, hi, distinct)
    k = data.draw(st.integers(1, 4))
    n = data.draw(st.integers(1, 5))
    low = 0 if dtype == torch.uint8 else -2
    seqs = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    top = data.draw(st.sampled_from([1, 4, 9]))  # a narrow range makes repeats common, a wide one bounds break
    rows = [[data.draw(st.lists(st.integers(low, top), min_size=k, max_size=k)) for _ in range(s)] for s in seqs]
    samples = [{"r": torch.tensor(r, dtype=dtype).reshape(len(r), k)} for r in rows]
    dims = None if experts is None else {"experts": experts}
    expected = _reference_codes(rows, k, dtype, lo, hi, distinct, experts, depth)

    def got(batch):
        return sorted({(v.sample, v.field, v.code) for v in schema.batch_violations(batch, dims=dims, depth=depth)})

    per_sample = sorted(
        {(i, v.field, v.code) for i, s in enumerate(samples) for v in schema.violations(s, dims=dims, depth=depth)}
    )
    assert per_sample == expected
    assert got(samples) == expected
    assert got(tq_batch(samples)) == expected
    if len(set(seqs)) == 1:  # a dense column, as a trainer's padded batch holds it
        assert got(TensorDict({"r": torch.stack([s["r"] for s in samples])}, batch_size=[n])) == expected
    for i, s in enumerate(samples):  # the fast path agrees with the full check on a clean sample
        if not any(e[0] == i for e in expected):
            schema.validate(s, dims=dims, depth=depth)


@pytest.mark.parametrize("rows", [2, 0])
def test_one_bound_the_dtype_cannot_hold_is_caught_while_the_other_waits_for_its_dim(rows):
    # min: k - 2 is -1 at k=1, below uint8; max: experts - 1 waits for experts. The fast path
    # skipped the field until every dim of either bound was known, so validate() and a list
    # batch passed what violations() refused (found by the python reference above).
    schema = _bounded_schema("uint8", "k - 2", "experts - 1", False)
    sample = {"r": torch.zeros(rows, 1, dtype=torch.uint8)}
    want = [(0, "r", "dtype")]
    with pytest.raises(ts.SchemaError, match=r"uint8 cannot hold -1, the smallest value min k - 2 allows \(k=1\)"):
        schema.validate(sample, depth="shapes")
    for batch in ([sample], tq_batch([sample])):
        assert [(v.sample, v.field, v.code) for v in schema.batch_violations(batch, depth="shapes")] == want
    schema.validate({"r": torch.zeros(rows, 2, dtype=torch.uint8)}, depth="shapes")  # k=2: min 0 fits


def test_a_routed_expert_beyond_the_experts_is_a_value_violation_with_its_sample_and_field():
    schema = _bounded_schema("int16", 0, "experts - 1", True)
    good = torch.tensor([[0, 1], [2, 3]], dtype=torch.int16)
    bad = torch.tensor([[0, 1], [2, 8]], dtype=torch.int16)
    for batch in ([{"r": good}, {"r": bad}], tq_batch([{"r": good}, {"r": bad}])):
        (v,) = schema.batch_violations(batch, dims={"experts": 8})
        assert (v.sample, v.field, v.code, v.expected) == (1, "r", "value", "<= 7")
        assert v.actual == "1 of 4 elements (first at [1,1]: 8)"
        assert schema.batch_violations(batch) == []  # experts unknown: the bound waits for it


def test_a_repeated_expert_is_its_own_code_in_a_jagged_batch():
    schema = _bounded_schema("int16", None, None, True)
    rows = [torch.tensor([[0, 1]] * 3, dtype=torch.int16), torch.tensor([[0, 1], [4, 4], [5, 5]], dtype=torch.int16)]
    (v,) = schema.batch_violations(tq_batch([{"r": r} for r in rows]))
    assert (v.sample, v.field, v.code) == (1, "r", "repeated")
    assert v.actual == "2 of 3 slices (first at [1]: 4 repeats)"


def test_distinct_along_a_ragged_last_axis_never_mixes_samples():
    # The flat values of a jagged column run samples together along the ragged axis; when that is
    # the last axis, 3 then 3 must not read as a repeat.
    schema = ts.schema_from_dict(
        {
            "name": "d",
            "dims": {"n": {"min": 0}},
            "fields": {"ids": {"shape": ["n"], "dtype": "int64", "pad": "copy", "distinct": True}},
        }
    )
    samples = [{"ids": torch.tensor([1, 3])}, {"ids": torch.tensor([3, 4])}, {"ids": torch.tensor([5, 5])}]
    batch = tq_batch(samples)
    assert [(v.sample, v.code) for v in schema.batch_violations(batch)] == [(2, "repeated")]


def test_a_per_sample_dim_bound_is_checked_per_row_on_a_float_column():
    schema = ts.schema_from_dict(
        {
            "name": "f",
            "dims": {"n": {"min": 0}},
            "fields": {"x": {"shape": ["n"], "dtype": "float32", "pad": 0.0, "max": "n"}},
        }
    )
    samples = [
        {"x": torch.tensor([2.0, 2.0])},
        {"x": torch.tensor([3.5, 0.0, 0.0])},  # 3.5 > 3
        {"x": torch.tensor([float("nan")])},  # NaN breaks every bound
        {"x": torch.tensor([], dtype=torch.float32)},
    ]
    for batch in (samples, tq_batch(samples)):
        assert [(v.sample, v.code) for v in schema.batch_violations(batch)] == [(1, "value"), (2, "value")]


def test_a_batch_in_a_dtype_too_small_for_the_pinned_experts_is_a_dtype_violation():
    schema = _bounded_schema(["uint8", "int16"], 0, "experts - 1", False)
    samples = [{"r": torch.zeros(2, 2, dtype=torch.uint8)}, {"r": torch.zeros(2, 2, dtype=torch.int16)}]
    for batch in (samples, tq_batch(samples[:1])):
        found = schema.batch_violations(batch, dims={"experts": 300}, depth="shapes")
        assert [(v.sample, v.code) for v in found] == [(0, "dtype")]
        assert found[0].message == (
            "dtype uint8 cannot hold 299, the largest value max experts - 1 allows (experts=300); uint8 holds 0..255"
        )
    assert schema.batch_violations(samples, dims={"experts": 256}) == []


@pytest.mark.parametrize("pinned", [None, {"n": 3}])
def test_a_non_tensor_field_bounded_by_a_dim_is_checked_in_every_layout(pinned):
    schema = ts.schema_from_dict(
        {
            "name": "turns",
            "dims": {"n": {"min": 0}},
            "fields": {
                "ids": {"shape": ["n"], "dtype": "int64", "pad": 0},
                "turns": {"kind": "int", "pad": 0, "max": "n"},
            },
        }
    )
    samples = [{"ids": torch.zeros(n, dtype=torch.int64), "turns": t} for n, t in ((3, 3), (3, 4), (3, 0))]
    expected = [(1, "turns", "value")]
    dense_ids = torch.zeros(3, 3, dtype=torch.int64)
    layouts = [
        samples,
        tq_batch(samples),
        TensorDict({"ids": dense_ids, "turns": NonTensorStack.from_list([3, 4, 0])}, batch_size=[3]),
        TensorDict({"ids": dense_ids, "turns": torch.tensor([3, 4, 0])}, batch_size=[3]),
    ]
    for batch in layouts:
        assert [(v.sample, v.field, v.code) for v in schema.batch_violations(batch, dims=pinned)] == expected
    assert schema.violations(samples[0], dims=pinned) == []
    assert [v.code for v in schema.violations(samples[1], dims=pinned)] == ["value"]


def test_a_per_sample_bound_beyond_int64_is_checked_exactly_not_wrapped():
    # min: n * n * n * 2**40 is 2**64 for n = 2**8: int64 arithmetic would wrap it to 0 and pass every element.
    schema = ts.schema_from_dict(
        {
            "name": "huge",
            "dims": {"n": {"min": 0}, "m": {"min": 0}},
            "fields": {"x": {"shape": ["m"], "dtype": "int64", "pad": 0, "min": "n * n * n * 1099511627776"}},
        }
    )
    samples = [{"x": torch.zeros(1, dtype=torch.int64)}, {"x": torch.zeros(2, dtype=torch.int64)}]
    for batch in (samples, tq_batch(samples)):
        found = schema.batch_violations(batch, dims={"n": 256})
        assert [(v.sample, v.code) for v in found] == [(0, "value"), (1, "value")]
    m_bound = ts.schema_from_dict(
        {
            "name": "huge2",
            "dims": {"m": {"min": 0}},
            "fields": {"x": {"shape": ["m"], "dtype": "int64", "pad": 0, "min": "m * m * m * m * m * m * m * m"}},
        }
    )
    rows = [{"x": torch.zeros(k, dtype=torch.int64)} for k in (1, 256)]  # 1**8 = 1 > 0; 256**8 = 2**64 wraps to 0
    for batch in (rows, tq_batch(rows)):
        assert [(v.sample, v.code) for v in m_bound.batch_violations(batch)] == [(0, "value"), (1, "value")]


# --- a list of samples screened on its packed TensorDict (the writer's check)


def _broken_samples():
    """Samples of vlm_mrope_moe, four with a problem of their values; their tags, two with a problem."""
    samples = realistic(VLM_MOE, LENGTHS * 2, layers=2, topk=4, experts=16)
    samples[1]["routed_experts"][0, 1, 2] = samples[1]["routed_experts"][0, 1, 0]  # a repeated expert
    samples[3]["routed_experts"][2, 0, 0] = -1  # below the experts
    samples[6]["rm_scores"] = samples[6]["rm_scores"] * float("nan")
    tags = [{"is_padding": False, "seq_len": p + r} for p, r in LENGTHS * 2]
    tags[8]["seq_len"] += 1  # a length tag that disagrees
    tags[2] = {"is_padding": "no"}  # a tag of the wrong kind, and no seq_len
    return samples, tags


@pytest.mark.parametrize("depth", ["values", "shapes"])
@pytest.mark.parametrize("with_bound", [True, False])
def test_the_packed_screen_finds_what_the_per_sample_check_finds(depth, with_bound):
    samples, tags = _broken_samples()
    want_bound: list = []
    want, _ = _check.check_batch(VLM_MOE.plan, samples, tags=tags, dims=None, depth=depth, bound_out=want_bound)
    bound: list | None = [] if with_bound else None
    got = _check.check_packed_batch(
        VLM_MOE.plan, samples, tq_batch(samples), tags=tags, dims=None, depth=depth, bound_out=bound
    )
    assert got == want
    assert {(v.sample, v.code) for v in got} >= (
        {(8, "tag"), (2, "tag")} | ({(1, "repeated")} if depth == "values" else set())
    )
    assert bound is None or bound == want_bound


def test_the_packed_screen_checks_every_sample_in_full_when_the_table_is_not_one():
    samples, tags = _broken_samples()
    want, _ = _check.check_batch(VLM_MOE.plan, samples, tags=tags, dims=None, depth="values")
    lazy = [dict(s) for s in samples]  # not a TensorDict: nothing to screen, every sample is checked
    assert _check.check_packed_batch(VLM_MOE.plan, samples, lazy, tags=tags, dims=None, depth="values") == want
