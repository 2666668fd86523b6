"""Hostile-user attacks on the public API: each test asserts the correct behaviour and failed when written.

Ordered roughly by severity. Every case runs offline (no Ray, no TransferQueue): batches are
laid out by ``trajschema.testing.tq_batch`` exactly as ``kv_batch_get`` returns them, and
the writer talks to a small in-memory fake client.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import LazyStackedTensorDict, NonTensorStack, TensorDict

import trajschema as ts
from trajschema.check.columns import batch_view
from trajschema.testing import tq_batch, verl_sample
from trajschema.tq.layout import tq_layout

TEXT = ts.load_schema("text")
VLM = ts.load_schema("vlm_mrope")
MOE = ts.load_schema("vlm_mrope_moe")


def _codes(found: list[ts.Violation]) -> list[tuple[Any, str, str]]:
    return [(v.sample, v.field, v.code) for v in found]


def _jagged_on_meta(col: torch.Tensor) -> torch.Tensor:
    return torch.nested.nested_tensor_from_jagged(
        col.values().to("meta"), col.offsets().to("meta"), jagged_dim=col._ragged_idx
    )


def _on_meta(td: TensorDict, only: set[str] | None = None) -> TensorDict:
    """``td`` with its tensor columns (or only the ``only`` ones) moved to the meta device."""
    out = TensorDict({}, batch_size=td.batch_size)
    for k in td.keys():
        col = td.get(k)
        if only is not None and k not in only:
            out[k] = col
        elif isinstance(col, torch.Tensor) and col.is_nested and col.layout == torch.jagged:
            out[k] = _jagged_on_meta(col)
        elif isinstance(col, torch.Tensor):
            out[k] = col.to("meta")
        else:
            out[k] = col
    return out


@dataclasses.dataclass
class _Meta:
    """The fields of TransferQueue 0.1.11's KVBatchMeta that the writer reads."""

    keys: list = dataclasses.field(default_factory=list)
    tags: list = dataclasses.field(default_factory=list)
    partition_id: Any = None
    fields: Any = None
    extra_info: Any = dataclasses.field(default_factory=dict)


class _FakeTQ:
    """An in-memory TransferQueue: stores each sample's values, reads them back with tq_layout."""

    def __init__(self) -> None:
        self.store: dict[str, dict[str, tuple[dict[str, Any], dict[str, Any]]]] = {}

    def kv_list(self, partition_id=None):
        return {p: {k: t for k, (_, t) in d.items()} for p, d in self.store.items() if partition_id in (None, p)}

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        rows = batch_view(fields).rows()
        d = self.store.setdefault(partition_id, {})
        for k, r, t in zip(keys, rows, tags, strict=True):
            d[k] = (r, t)
        return _Meta(keys=list(keys), tags=list(tags), partition_id=partition_id, fields=sorted(fields.keys()))

    def kv_batch_get(self, keys, partition_id, fields=None):
        return tq_layout([self.store[partition_id][k][0] for k in keys])

    async def async_kv_list(self, *a, **k):
        return self.kv_list(*a, **k)

    async def async_kv_batch_put(self, *a, **k):
        return self.kv_batch_put(*a, **k)

    async def async_kv_batch_get(self, *a, **k):
        return self.kv_batch_get(*a, **k)


def _writer(schema: ts.Schema = TEXT, **kw: Any) -> tuple[ts.TransferQueueWriter, _FakeTQ]:
    client = _FakeTQ()
    return ts.TransferQueueWriter(schema, partition_id="p", eos_token_id=2, client=client, **kw), client


# -- meta and mixed-device batches ----------------------------------------------------------


def test_meta_jagged_batch_with_a_bad_dtype_reports_it():
    """A jagged meta batch whose column has a wrong dtype gets dtype violations, not a torch RuntimeError."""
    samples = [verl_sample(VLM, 5, 3), verl_sample(VLM, 4, 2)]
    for s in samples:
        s["loss_mask"] = s["loss_mask"].to(torch.int32)
    found = VLM.batch_violations(_on_meta(tq_batch(samples)), depth="shapes")
    assert {(v.sample, v.code) for v in found if v.field == "loss_mask"} == {(0, "dtype"), (1, "dtype")}


def test_meta_jagged_batch_with_a_bad_non_tensor_reports_it():
    """A jagged meta batch with a non-str uid in one row reports (0, uid, kind) instead of crashing on the row cut."""
    samples = [verl_sample(VLM, 5, 3), verl_sample(VLM, 4, 2)]
    samples[0]["uid"] = 5
    found = VLM.batch_violations(_on_meta(tq_batch(samples)), depth="shapes")
    assert (0, "uid", "kind") in _codes(found)


def test_jagged_meta_and_dense_meta_columns_mix():
    """Sizes of jagged columns (their device) and dense columns (host) bind together, without a device error."""
    samples = [verl_sample(TEXT, 5, 3), verl_sample(TEXT, 4, 3)]
    td = _on_meta(tq_batch(samples))
    for k in ["responses", "response_mask", "loss_mask", "rollout_log_probs", "rm_scores"]:
        td[k] = torch.stack([s[k] for s in samples]).to("meta")  # same response length: dense (B, R)
    assert TEXT.batch_violations(td, depth="shapes") == []


def test_columns_on_different_devices_bind_together():
    """A batch whose columns sit on different devices (one jagged column on meta) is checked, never a device error."""
    samples = [verl_sample(TEXT, 5, 3), verl_sample(TEXT, 4, 2)]
    td = _on_meta(tq_batch(samples), only={"input_ids"})
    assert TEXT.batch_violations(td, depth="shapes") == []


def test_padding_contract_on_a_meta_batch_matches_the_list_of_meta_samples():
    """padding_contract_violations on a meta TensorDict reads no values, like it does for a list of meta samples."""
    samples = [verl_sample(TEXT, 5, 3), verl_sample(TEXT, 4, 3)]
    tags = [{}, {"is_padding": True}]
    as_list = [{k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in s.items()} for s in samples]
    expected = ts.padding_contract_violations(as_list, tags, TEXT)
    assert ts.padding_contract_violations(_on_meta(tq_batch(samples)), tags, TEXT) == expected


# -- a TensorDict batch and the list of the same samples must agree --------------------------


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


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
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


def test_padding_contract_reports_a_non_int_length_tag_on_a_tensordict():
    """A padding sample tagged seq_len='128' breaks the contract on a TensorDict batch as on the list."""
    real = verl_sample(TEXT, 5, 3, uid="q0")
    pad = TEXT.padding(2, eos_token_id=2, like=real)
    batch, tags = [real, *pad.samples], [{}, *[dict(t) for t in pad.tags]]
    tags[1]["seq_len"] = "128"
    expected = _codes(ts.padding_contract_violations(batch, tags, TEXT))
    assert expected == [(1, "seq_len", "tag")]
    assert _codes(ts.padding_contract_violations(tq_batch(batch), tags, TEXT)) == expected


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
    s = verl_sample(MOE, 5, 3, layers=2, topk=2)

    def outcome(batch):
        try:
            return _codes(MOE.batch_violations(batch, dims={"layers": 2**63}))
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


# -- value checks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [np.float32("nan"), np.float16("inf"), np.float32("-inf")], ids=["f32-nan", "f16-inf", "f32-neginf"]
)
def test_finite_rejects_numpy_float_nan_and_inf(value):
    """finite: true breaks for any non-finite float, numpy float32/float16 included (not only Python floats)."""
    schema = ts.schema_from_dict({"name": "f", "fields": {"r": {"kind": "float", "finite": True, "pad": 0.0}}})
    assert _codes(schema.violations({"r": value})) == [(None, "r", "value")]
    with pytest.raises(ts.SchemaError):
        schema.validate({"r": value})


# -- the writer ------------------------------------------------------------------------------


def test_writer_put_with_none_tags():
    """put(tags=[None, ...]) treats None as an empty tag dict (as real_mask does) or refuses with a clear error."""
    writer, _ = _writer()
    samples = [verl_sample(TEXT, 5, 3, uid="a"), verl_sample(TEXT, 4, 2, uid="b")]
    try:
        meta = writer.put(["k0", "k1"], samples, tags=[None, None])
    except (ValueError, TypeError) as e:
        message = str(e)
    else:
        assert [t["is_padding"] for t in meta.tags] == [False, False]
        return
    assert "tag" in message


def test_writer_padding_keeps_a_zero_dim_tensor_column_a_tensor_column():
    """Padding must not turn a column written as 0-d tensors (num_turns) into a NonTensorStack on read."""
    writer, client = _writer()
    samples = [verl_sample(TEXT, 5, 3, uid=u) for u in "abc"]
    for s in samples:
        s["num_turns"] = torch.tensor(1)
        s["session_id"] = torch.tensor(0)
    meta = writer.put(["k0", "k1", "k2"], samples)
    assert isinstance(tq_layout([client.store["p"][k][0] for k in meta.keys]).get("num_turns"), torch.Tensor)
    try:
        meta = writer.pad_to_multiple(meta, 4)
    except ValueError:  # refusing (a SchemaError is a ValueError) is also correct
        return
    read = tq_layout([client.store["p"][k][0] for k in meta.keys])
    assert isinstance(read.get("num_turns"), torch.Tensor) and isinstance(read.get("session_id"), torch.Tensor)


def test_writer_with_an_infinite_timeout_puts():
    """timeout_s=float('inf') works for put as it does for async_put (or is refused when the writer is built)."""
    samples = [verl_sample(TEXT, 5, 3, uid="a")]
    try:
        writer, _ = _writer(timeout_s=float("inf"))
    except ValueError:
        return
    assert asyncio.run(writer.async_put(["k0"], samples)).keys == ["k0"]
    assert writer.put(["k1"], samples).keys == ["k1"]


def test_writer_put_of_a_batch_with_a_sub_tensordict_column():
    """Each sample of a batch TensorDict gets its own row of a sub-TensorDict column (or the put is refused clearly)."""
    writer, client = _writer()
    td = tq_batch([verl_sample(TEXT, 5, 3, uid="a"), verl_sample(TEXT, 5, 3, uid="b")])
    td["extra_td"] = TensorDict({"a": torch.tensor([10, 20])}, batch_size=[2])
    try:
        writer.put(["k0", "k1"], td)
    except (ValueError, TypeError):
        return
    stored = client.store["p"]["k1"][0]["extra_td"]
    assert stored.batch_size == torch.Size([]) and int(stored["a"]) == 20


# -- odd keys, odd arguments ------------------------------------------------------------------


@pytest.mark.parametrize("key", [1, (1, 2)], ids=["int", "tuple"])
def test_a_non_str_extra_key_is_reported_as_a_schema_error(key):
    """extra: forbid with a non-str key gives a SchemaError that renders (field as text), not Type/AttributeError."""
    schema = ts.schema_from_dict(
        {
            "name": "f",
            "dims": {"n": {}},
            "fields": {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}},
            "extra": "forbid",
        }
    )
    sample = {"x": torch.arange(3), key: 2}
    found = schema.violations(sample)
    assert [v.code for v in found] == ["extra"] and isinstance(found[0].field, str)
    with pytest.raises(ts.SchemaError) as info:
        schema.validate(sample)
    assert str(key) in str(info.value)


@pytest.mark.parametrize("extra", [torch.zeros(3), "x"], ids=["tensor", "str"])
def test_padding_like_a_sample_with_a_non_str_key(extra):
    """An undeclared non-str key in like= is refused by a Value/TypeError naming it, not a KeyError/IndexError."""
    like = {**verl_sample(TEXT, 2, 2), 1: extra}
    with pytest.raises((ValueError, TypeError), match="1"):
        TEXT.padding(1, eos_token_id=2, like=like)


def test_padding_like_a_sample_with_an_undeclared_strided_nested_tensor():
    """An undeclared strided nested tensor in like= is copied or refused clearly, not a NestedTensorImpl error."""
    nested = torch.nested.nested_tensor([torch.zeros(3), torch.zeros(8)])
    try:
        pad = TEXT.padding(2, eos_token_id=2, like={**verl_sample(TEXT, 5, 3), "extra": nested})
    except (ValueError, TypeError):
        return
    assert len(pad) == 2


@pytest.mark.parametrize(
    "kwargs",
    [{"count": 2**63}, {"count": 1, "dims": {"layers": 2**63}}],
    ids=["count", "dims"],
)
def test_padding_sizes_beyond_int64_are_a_value_error(kwargs):
    """count=2**63 or dims beyond int64 raise the documented ValueError naming the argument, not a torch error."""
    like = verl_sample(MOE, 5, 3, layers=2, topk=2)
    count = kwargs.pop("count")
    with pytest.raises(ValueError, match=r"count|layers"):
        MOE.padding(count, eos_token_id=2, like=like, **kwargs)


@pytest.mark.parametrize("schema", [123, None], ids=["int", "None"])
def test_padding_contract_with_a_non_schema(schema):
    """padding_contract_violations(schema=<not a Schema or name>) is a TypeError naming it, not an AttributeError."""
    with pytest.raises(TypeError, match="schema"):
        ts.padding_contract_violations([verl_sample(TEXT, 5, 3)], [{}], schema)


def test_schema_for_sample_with_one_candidate_name():
    """candidates='text' means the schema 'text' (or is a TypeError), never a lookup of the schemas 't', 'e', 'x'."""
    try:
        chosen = ts.schema_for_sample(verl_sample(TEXT, 5, 3), candidates="text")
    except TypeError:
        return
    assert chosen.name == "text"


# -- padding values ----------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "n"), [("bfloat16", 513), ("float16", 4097)])
def test_float_positions_are_exact_or_refused(dtype, n):
    """pad: positions fills exactly 0..n-1, or refuses the size when the float dtype cannot hold every position."""
    schema = ts.schema_from_dict(
        {"name": "p", "dims": {"n": {}}, "fields": {"pos": {"shape": ["n"], "dtype": dtype, "pad": "positions"}}}
    )
    try:
        pad = schema.padding(1, eos_token_id=2, dims={"n": n})
    except ValueError:
        return
    assert pad.fields["pos"][0].tolist() == list(range(n))


def test_padding_like_a_deeply_nested_undeclared_value():
    """A deeply nested undeclared value in like= is copied or refused with a clear error, not a RecursionError."""
    deep: list = []
    cur = deep
    for _ in range(5000):
        cur.append([])
        cur = cur[0]
    try:
        pad = TEXT.padding(1, eos_token_id=2, like={**verl_sample(TEXT, 5, 3), "extra": deep})
    except (ValueError, TypeError):
        return
    assert len(pad) == 1
