"""TransferQueueWriter without Ray: its argument checks, bounded calls, whole-or-nothing puts and transportability.

The same promises against a real TransferQueue (with fault injection inside its client):
``tests/integration/test_writer.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import pickle
import threading
import time

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from tensordict import TensorDict

import trajschema as ts
from trajschema.testing import MemoryTransferQueue, tq_batch, verl_sample
from trajschema.tq.calls import bounded, check_meta, check_timeout, put_whole
from trajschema.tq.transport import carry_problem, transport_violations
from trajschema.tq.wire import to_tq_fields

TEXT = ts.load_schema("text")


def writer(client=None, **kw):
    args = {"partition_id": "p", "eos_token_id": 2, "client": client or MemoryTransferQueue(), **kw}
    return ts.TransferQueueWriter(TEXT, **args)


def sample(p=3, r=4, seed=0):
    return verl_sample(TEXT, p, r, seed=seed)


def listed(client, pid="p"):
    return client.kv_list(pid).get(pid, {})


# ---------------------------------------------------------------------------------
# Arguments: checked before any effect, with the documented exception and the argument's name

BAD_CONSTRUCTOR = [
    ("timeout-zero", {"timeout_s": 0}, ValueError, "timeout_s"),
    ("timeout-negative", {"timeout_s": -1}, ValueError, "timeout_s"),
    ("timeout-nan", {"timeout_s": math.nan}, ValueError, "timeout_s"),
    ("timeout-inf", {"timeout_s": math.inf}, ValueError, "timeout_s"),
    ("timeout-bool", {"timeout_s": True}, ValueError, "timeout_s"),
    ("timeout-str", {"timeout_s": "5"}, ValueError, "timeout_s"),
    ("timeout-past-threading", {"timeout_s": 1e300}, ValueError, "timeout_s"),
    ("eos-bool", {"eos_token_id": True}, ValueError, "eos_token_id"),
    ("eos-negative", {"eos_token_id": -1}, ValueError, "eos_token_id"),
    ("eos-float", {"eos_token_id": 2.0}, ValueError, "eos_token_id"),
    ("eos-past-int64", {"eos_token_id": 2**63}, ValueError, "eos_token_id"),
    ("partition-empty", {"partition_id": ""}, ValueError, "partition_id"),
    ("partition-bytes", {"partition_id": b"p"}, ValueError, "partition_id"),
    ("depth-typo", {"depth": "value"}, ValueError, "depth"),
    ("dims-bool", {"dims": {"prompt": True}}, ValueError, "dims"),
    ("dims-list", {"dims": [1]}, ValueError, "dims"),
]


@pytest.mark.parametrize(("kw", "exc", "name"), [c[1:] for c in BAD_CONSTRUCTOR], ids=[c[0] for c in BAD_CONSTRUCTOR])
def test_the_constructor_refuses_bad_arguments(kw, exc, name):
    with pytest.raises(exc, match=name):
        writer(**kw)


def test_a_schema_name_is_not_a_schema():
    with pytest.raises(TypeError, match=r"schema must be a trajschema\.Schema"):
        ts.TransferQueueWriter("text", partition_id="p", eos_token_id=2)


BAD_PUTS = [
    ("keys-str", lambda s: ("k", [s], None), ValueError, "keys must be a list"),
    ("keys-none", lambda s: (None, [s], None), ValueError, "keys must be a list"),
    ("keys-generator", lambda s: ((k for k in ["a"]), [s], None), ValueError, "keys must be a list"),
    ("keys-fewer", lambda s: ([], [s], None), ValueError, "0 keys for 1 samples"),
    ("no-samples", lambda s: ([], [], None), ValueError, "at least one sample"),
    ("samples-none", lambda s: (["a"], None, None), TypeError, "batch must be"),
    ("one-mapping", lambda s: (["a"], s, None), TypeError, "single mapping"),
    ("sample-int", lambda s: (["a"], [5], None), TypeError, "a sample must be a mapping"),
    ("tags-str", lambda s: (["a"], [s], "x"), ValueError, "tags must be a list"),
    ("tags-dict", lambda s: (["a"], [s], {"a": 1}), ValueError, "tags must be a list"),
    ("tags-fewer", lambda s: (["a", "b"], [s, s], [{}]), ValueError, "1 tag dicts for 2 samples"),
]


@pytest.mark.parametrize(("args", "exc", "match"), [c[1:] for c in BAD_PUTS], ids=[c[0] for c in BAD_PUTS])
def test_put_refuses_bad_arguments_and_writes_nothing(args, exc, match):
    client = MemoryTransferQueue()
    with pytest.raises(exc, match=match):
        writer(client).put(*args(sample()))
    assert client.kv_list() == {}


def test_a_field_named_by_a_non_str_is_a_violation_not_a_crash():
    client = MemoryTransferQueue()
    w = writer(client)
    w.put(["a"], [sample()])
    with pytest.raises(ts.SchemaError) as info:
        w.put(["b"], [{**sample(), 5: torch.zeros(1)}])
    assert (0, "5", "transport") in [(v.sample, v.field, v.code) for v in info.value.violations]
    assert "5" in str(info.value)  # the report renders the name
    assert list(listed(client)) == ["a"]


def _meta(client):
    return writer(client).put(["a", "b", "c"], [sample(seed=i) for i in range(3)])


BAD_PADS = [
    ("multiple-zero", lambda m: (m, 0), {}, ValueError, "multiple"),
    ("multiple-bool", lambda m: (m, True), {}, ValueError, "multiple"),
    ("multiple-nan", lambda m: (m, math.nan), {}, ValueError, "multiple"),
    ("multiple-str", lambda m: (m, "4"), {}, ValueError, "multiple"),
    ("meta-none", lambda m: (None, 4), {}, TypeError, "meta must be a KVBatchMeta"),
    ("meta-dict", lambda m: ({"keys": ["a"], "tags": [{}]}, 4), {}, TypeError, "meta must be a KVBatchMeta"),
    ("reference-str", lambda m: (m, 4), {"reference": "a"}, TypeError, "reference must be a"),
    ("reference-triple", lambda m: (m, 4), {"reference": ("a", {}, 1)}, TypeError, "reference must be a"),
    ("reference-unknown", lambda m: (m, 4), {"reference": ("zz", {})}, ValueError, "not a real sample"),
    ("reference-not-mapping", lambda m: (m, 4), {"reference": ("a", 5)}, TypeError, "must be a mapping"),
]


@pytest.mark.parametrize(("args", "kw", "exc", "match"), [c[1:] for c in BAD_PADS], ids=[c[0] for c in BAD_PADS])
def test_pad_to_multiple_refuses_bad_arguments_and_writes_nothing(args, kw, exc, match):
    client = MemoryTransferQueue()
    meta = _meta(client)
    before = listed(client)
    with pytest.raises(exc, match=match):
        writer(client).pad_to_multiple(*args(meta), **kw)
    assert listed(client) == before


def test_padding_refuses_a_meta_changed_after_it_was_built():
    client = MemoryTransferQueue()
    meta = _meta(client)
    meta.tags.pop()  # KVBatchMeta checks itself only in __post_init__
    with pytest.raises(ValueError, match="one tag dict per key: 3 keys, 2 tags"):
        writer(client).pad_to_multiple(meta, 4)
    assert len(listed(client)) == 3


def test_async_padding_checks_its_arguments_first():
    client = MemoryTransferQueue()
    meta = _meta(client)
    with pytest.raises(ValueError, match="multiple"):
        asyncio.run(writer(client).async_pad_to_multiple(meta, 0))
    assert len(listed(client)) == 3


# ---------------------------------------------------------------------------------
# check_timeout, check_meta, bounded


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.booleans(), st.none(), st.text()))
def test_check_timeout_accepts_exactly_positive_finite_seconds(value):
    ok = value is None or (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= threading.TIMEOUT_MAX
    )
    if ok:
        assert check_timeout(value) == (None if value is None else float(value))
    else:
        with pytest.raises(ValueError, match="timeout_s must be a positive, finite number"):
            check_timeout(value)


def test_check_timeout_can_refuse_none():
    with pytest.raises(ValueError, match=r"found None"):
        check_timeout(None, none_ok=False)


def test_check_meta_reads_a_real_meta_and_refuses_lookalikes():
    meta = MemoryTransferQueue.KVBatchMeta(keys=["a"], tags=[{}], partition_id="p", fields=["x"])
    view = check_meta(meta)
    assert (view.keys, view.partition_id, view.fields) == (["a"], "p", ["x"])

    @dataclasses.dataclass
    class Half:
        keys: list
        tags: list

    with pytest.raises(TypeError, match="lacks the fields"):
        check_meta(Half(["a"], [{}]))
    with pytest.raises(TypeError, match="must be a KVBatchMeta"):
        check_meta(MemoryTransferQueue.KVBatchMeta)  # the class, not an instance
    bad = dataclasses.replace(meta)
    bad.fields = "x"
    with pytest.raises(TypeError, match="fields must be a list of str"):
        check_meta(bad)
    bad = dataclasses.replace(meta)
    bad.partition_id = 3
    with pytest.raises(TypeError, match="partition_id must be a str"):
        check_meta(bad)


def test_bounded_returns_raises_and_gives_up():
    assert bounded(lambda: 3, 1.0, "x") == 3
    with pytest.raises(KeyError):
        bounded(lambda: {}["k"], 1.0, "x")
    release = threading.Event()
    with pytest.raises(TimeoutError, match=r"transfer_queue slow did not return within timeout_s=0\.1s"):
        bounded(lambda: release.wait(10), 0.1, "slow")
    release.set()


# ---------------------------------------------------------------------------------
# put_whole: a put that fails after registering its keys is undone


class _RegistersThenFails(MemoryTransferQueue):
    """Registers the keys (as TransferQueue's controller does) and fails before the data arrives."""

    def __init__(self, fails=1, delay_s=0.0):
        super().__init__()
        self.fails, self.delay_s, self.calls = fails, delay_s, 0

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None, data_parser=None):
        self.calls += 1
        if self.calls <= self.fails:
            super().kv_batch_put(keys, partition_id, tags=[{} for _ in keys])
            if self.delay_s:
                time.sleep(self.delay_s)
                return super().kv_batch_put(keys, partition_id, fields=fields, tags=tags)  # lands late
            raise ConnectionError("storage unit lost")
        return super().kv_batch_put(keys, partition_id, fields=fields, tags=tags, data_parser=data_parser)


def _fields(n=2):
    return to_tq_fields([{"x": torch.arange(i + 1)} for i in range(n)])


def test_a_failed_put_is_cleared_and_says_so():
    client = _RegistersThenFails()
    with pytest.raises(ConnectionError) as info:
        put_whole(client, ["a", "b"], "p", _fields(), [{}, {}], 1.0)
    assert listed(client) == {}
    assert any("the put was undone" in n for n in info.value.__notes__)
    put_whole(client, ["a", "b"], "p", _fields(), [{}, {}], 1.0)
    assert list(listed(client)) == ["a", "b"]


def test_a_failed_cleanup_is_reported_with_the_keys_left():
    class CannotClear(_RegistersThenFails):
        def kv_clear(self, keys, partition_id):
            raise ConnectionError("controller gone")

    client = CannotClear()
    with pytest.raises(ConnectionError, match="storage unit lost") as info:
        put_whole(client, ["a"], "p", _fields(1), [{}], None)
    notes = "".join(info.value.__notes__)
    assert "undoing the put failed too" in notes and "'a'" in notes


def test_a_put_abandoned_on_timeout_is_cleared_when_it_lands_and_a_retry_waits_for_it():
    client = _RegistersThenFails(delay_s=0.6)
    with pytest.raises(TimeoutError, match="nothing of this put is kept"):
        put_whole(client, ["a", "b"], "p", _fields(), [{}, {}], 0.1)
    with pytest.raises(TimeoutError, match="still running"):
        put_whole(client, ["b"], "p", _fields(1), [{}], 0.1)  # an overlapping retry, too impatient
    retry = to_tq_fields([{"x": torch.full((i + 1,), 7)} for i in range(2)])
    put_whole(client, ["a", "b"], "p", retry, [{"r": 1}, {"r": 1}], 5.0)
    time.sleep(0.2)
    assert listed(client) == {"a": {"r": 1}, "b": {"r": 1}}
    assert client.kv_batch_get(["b"], "p")["x"][0].tolist() == [7, 7]


def test_other_keys_do_not_wait_for_an_abandoned_put():
    client = _RegistersThenFails(delay_s=0.5)
    with pytest.raises(TimeoutError):
        put_whole(client, ["a"], "p", _fields(1), [{}], 0.1)
    started = time.monotonic()
    put_whole(client, ["z"], "p", _fields(1), [{}], 0.1)
    assert time.monotonic() - started < 0.1 + 0.3
    time.sleep(0.6)
    assert list(listed(client)) == ["z"]


def test_an_async_put_that_fails_is_cleared():
    class AsyncFails(_RegistersThenFails):
        async def async_kv_batch_put(self, keys, partition_id, fields=None, tags=None, data_parser=None):
            return self.kv_batch_put(keys, partition_id, fields=fields, tags=tags)

    client = AsyncFails()
    w = writer(client)
    with pytest.raises(ConnectionError):
        asyncio.run(w.async_put(["a"], [sample()]))
    assert listed(client) == {}
    asyncio.run(w.async_put(["a"], [sample()]))
    assert list(listed(client)) == ["a"]


# ---------------------------------------------------------------------------------
# Transportability


class _Unpicklable:
    def __reduce__(self):
        raise TypeError("no")


CARRY = [
    ("cpu-tensor", torch.zeros(3), None),
    ("bf16", torch.zeros(3, dtype=torch.bfloat16), None),
    ("uint16", torch.zeros(3, dtype=torch.uint16), None),
    ("non-contiguous", torch.zeros(4, 3).t(), None),
    ("expanded", torch.zeros(1).expand(10), None),
    ("requires-grad", torch.zeros(3, requires_grad=True), None),
    ("str", "uid-1", None),
    ("bigint", 2**70, None),
    ("dict", {"a": [1, (2, 3)]}, None),
    ("meta", torch.zeros(3, device="meta"), "meta tensor"),
    ("sparse", torch.zeros(3, 3).to_sparse(), "serializing it fails"),
    ("lock", threading.Lock(), "serializing it fails"),
    ("unpicklable", _Unpicklable(), "serializing it fails"),
    ("nested-unpicklable", [1, {"x": _Unpicklable()}], "serializing it fails"),
]


@pytest.mark.parametrize(("value", "problem"), [c[1:] for c in CARRY], ids=[c[0] for c in CARRY])
def test_carry_problem(value, problem):
    got = carry_problem(value)
    assert (got is None) == (problem is None), got
    if problem is not None:
        assert problem in got


def test_a_self_referential_value_is_reported_not_raised():
    loop: list = []
    loop.append(loop)
    assert carry_problem(loop) is None  # pickle carries cycles
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert carry_problem(deep) is not None


def test_transport_violations_name_sample_field_and_tag():
    found = transport_violations(
        [{"x": torch.zeros(1)}, {"x": torch.zeros(1, device="meta")}],
        [{"t": 1}, {"t": threading.Lock()}],
        first_sample=5,
    )
    assert [(v.sample, v.field, v.code) for v in found] == [(6, "x", "transport"), (6, "t", "transport")]
    assert "tag 't'" in found[1].message
    pickle.loads(pickle.dumps(found))  # violations stay light and picklable


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(), st.lists, max_leaves=8))
def test_plain_python_values_always_travel(value):
    assert carry_problem(value) is None


# ---------------------------------------------------------------------------------
# Odd tags, columns and timeouts (each test failed when written, against an in-memory client as here)


def test_writer_put_with_none_tags():
    """put(tags=[None, ...]) treats None as an empty tag dict (as real_mask does) or refuses with a clear error."""
    samples = [verl_sample(TEXT, 5, 3, uid="a"), verl_sample(TEXT, 4, 2, uid="b")]
    try:
        meta = writer().put(["k0", "k1"], samples, tags=[None, None])
    except (ValueError, TypeError) as e:
        message = str(e)
    else:
        assert [t["is_padding"] for t in meta.tags] == [False, False]
        return
    assert "tag" in message


def test_writer_padding_keeps_a_zero_dim_tensor_column_a_tensor_column():
    """Padding must not turn a column written as 0-d tensors (num_turns) into a NonTensorStack on read."""
    client = MemoryTransferQueue()
    w = writer(client)
    samples = [verl_sample(TEXT, 5, 3, uid=u) for u in "abc"]
    for s in samples:
        s["num_turns"] = torch.tensor(1)
        s["session_id"] = torch.tensor(0)
    meta = w.put(["k0", "k1", "k2"], samples)
    assert isinstance(client.kv_batch_get(meta.keys, "p").get("num_turns"), torch.Tensor)
    try:
        meta = w.pad_to_multiple(meta, 4)
    except ValueError:  # refusing (a SchemaError is a ValueError) is also correct
        return
    read = client.kv_batch_get(meta.keys, "p")
    assert isinstance(read.get("num_turns"), torch.Tensor) and isinstance(read.get("session_id"), torch.Tensor)


def test_writer_with_an_infinite_timeout_puts():
    """timeout_s=float('inf') works for put as it does for async_put (or is refused when the writer is built)."""
    samples = [verl_sample(TEXT, 5, 3, uid="a")]
    try:
        w = writer(timeout_s=float("inf"))
    except ValueError:
        return
    assert asyncio.run(w.async_put(["k0"], samples)).keys == ["k0"]
    assert w.put(["k1"], samples).keys == ["k1"]


def test_writer_put_of_a_batch_with_a_sub_tensordict_column():
    """Each sample of a batch TensorDict gets its own row of a sub-TensorDict column (or the put is refused clearly)."""
    client = MemoryTransferQueue()
    td = tq_batch([verl_sample(TEXT, 5, 3, uid="a"), verl_sample(TEXT, 5, 3, uid="b")])
    td["extra_td"] = TensorDict({"a": torch.tensor([10, 20])}, batch_size=[2])
    try:
        writer(client).put(["k0", "k1"], td)
    except (ValueError, TypeError):
        return
    stored = client.kv_batch_get(["k1"], "p")["extra_td"][0]
    assert stored.batch_size == torch.Size([]) and int(stored["a"]) == 20


def _spread_schema() -> ts.Schema:
    routes = {"shape": ["seq", "layers", "topk"], "dtype": ["int16", "int32", "int64"], "min": 0}
    return ts.schema_from_dict(
        {
            "name": "moe_spread",
            "extends": ["moe_routed"],
            "dims": {"experts": {"min": 1}},
            "fields": {"routed_experts": {**routes, "max": "experts - 1", "pad": {"spread": "experts"}}},
        }
    )


@pytest.mark.parametrize("pinned", [None, 16])
def test_writer_padding_spreads_routes_over_the_experts(pinned):
    """pad_to_multiple passes its real sample as like=: spread over its experts, or the writer's dims (issue 16)."""
    schema = _spread_schema()
    client = MemoryTransferQueue()
    w = ts.TransferQueueWriter(
        schema, partition_id="p", eos_token_id=2, client=client, dims=None if pinned is None else {"experts": pinned}
    )
    samples = [verl_sample(schema, 5, 3, uid=u, layers=2, topk=2, seed=i) for i, u in enumerate("abc")]
    for s in samples:  # ids 0..5 of 6 experts, distinct in every token
        s["routed_experts"] = (torch.arange(8 * 2 * 2).view(8, 2, 2) % 6).to(s["routed_experts"].dtype)
    meta = w.pad_to_multiple(w.put(["k0", "k1", "k2"], samples), 8)
    routes = client.kv_batch_get(meta.keys[3:], "p")["routed_experts"]
    rows = routes.unbind() if routes.is_nested else list(routes)
    experts = 6 if pinned is None else pinned
    ids = torch.stack(rows)
    assert int(ids.max()) == experts - 1  # 5 rows x 128 tokens x 2 slots reach every expert
    assert (ids[..., 0] != ids[..., 1]).all()
    counts = torch.bincount(ids[:, :, 0].flatten().long(), minlength=experts)
    assert int(counts.max()) <= math.ceil(5 * 128 * 2 / experts)


# ---------------------------------------------------------------------------------
# What the put hands TransferQueue


class _Recording(MemoryTransferQueue):
    def __init__(self) -> None:
        super().__init__()
        self.fields: list[TensorDict] = []

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None, **kw):
        self.fields.append(fields)
        return super().kv_batch_put(keys, partition_id, fields=fields, tags=tags, **kw)


def test_put_hands_over_strided_views_of_the_packed_columns_that_read_back_as_written():
    client = _Recording()
    samples = [sample(3, 4, seed=0), sample(5, 1, seed=1), sample(2, 0, seed=2)]
    writer(client).put(["a", "b", "c"], samples)
    (fields,) = client.fields
    ids = fields.get("input_ids")
    assert ids.is_nested and ids.layout == torch.strided  # TransferQueue unbinds these natively
    back = client.kv_batch_get(["a", "b", "c"], "p")
    want = to_tq_fields(samples)
    for k in want.keys():
        got = back.get(k)
        if isinstance(got, torch.Tensor):
            assert got.layout == want.get(k).layout
            assert all(torch.equal(x, y) for x, y in zip(got.unbind(), want.get(k).unbind(), strict=True)), k
        else:
            assert got.tolist() == want.get(k).tolist()


def test_stated_length_tags_are_checked_and_kept():
    samples = [sample(3, 4, seed=0), sample(5, 1, seed=1)]
    full = [
        {"is_padding": False, "prompt_len": 3, "response_len": 4, "seq_len": 7},
        {"prompt_len": 5, "response_len": 1, "seq_len": 6},
    ]
    client = MemoryTransferQueue()
    meta = writer(client).put(["a", "b"], samples, [dict(t) for t in full])
    assert meta.tags == [full[0], {**full[1], "is_padding": False}]
    wrong = [dict(t) for t in full]
    wrong[1]["seq_len"] = 7
    with pytest.raises(ts.SchemaError) as e:
        writer(client).put(["c", "d"], samples, wrong)
    assert [(v.sample, v.field, v.code) for v in e.value.violations] == [(1, "seq_len", "tag")]
    assert sorted(listed(client)) == ["a", "b"]
