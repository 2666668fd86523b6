"""One contract, two clients: every test runs on MemoryTransferQueue and on a real local TransferQueue 0.1.11.

The expectations come from oracles where one exists (``wire_batch`` for the read layout,
the samples written for the values) and from ``docs/transferqueue-notes.md`` otherwise;
each was first observed on the real TransferQueue. The last tests run the same writer
and verl-upsample flow on both clients and compare the results directly.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import re
import threading
import types
import uuid

import pytest
import torch
from tensordict import NonTensorStack, TensorDict

import trajschema as ts
import trajschema.verl as tv
from tests.integration.test_tq_roundtrip import assert_same_batch
from trajschema.testing import MemoryTransferQueue, random_routes, verl_sample
from trajschema.tq.wire import to_tq_fields, wire_batch

pytestmark = pytest.mark.tq

EOS = 2


@pytest.fixture(params=["memory", "real"])
def tq(request):
    """``(client, partition)``: a fresh MemoryTransferQueue, or the session's real TransferQueue."""
    if request.param == "memory":
        return MemoryTransferQueue(), f"test-{uuid.uuid4().hex[:12]}"
    return request.getfixturevalue("tq_client"), request.getfixturevalue("partition")


def sample_for(name: str, p: int, r: int, seed: int = 0, **kw) -> dict:
    schema = ts.load_schema(name)
    dims = {k: 2 for k in ("layers", "topk", "teacher_topk") if k in schema.dims}
    return verl_sample(schema, p, r, uid=f"q{seed}", seed=seed, **{**dims, **kw})


def put(client, pid, keys, samples, tags=None):
    return client.kv_batch_put(keys, pid, fields=to_tq_fields(samples), tags=tags)


def listed(client, pid) -> dict:
    return client.kv_list(pid).get(pid, {})


def values(col) -> list:
    """One value per row: tensors for tensor columns, Python values otherwise."""
    return col.tolist() if isinstance(col, NonTensorStack) else list(col.unbind(0))


# ---------------------------------------------------------------------------------
# Read layout


LENGTHS = {"unequal": [(5, 3), (2, 7), (4, 0)], "equal": [(4, 3), (4, 3)], "single": [(6, 2)]}


@pytest.mark.parametrize("lengths", sorted(LENGTHS))
@pytest.mark.parametrize("schema", ts.schema_names())
def test_realistic_batches_read_back_as_tq_layout(tq, schema, lengths):
    client, pid = tq
    samples = [sample_for(schema, p, r, seed=i) for i, (p, r) in enumerate(LENGTHS[lengths])]
    keys = [f"k{i}" for i in range(len(samples))]
    meta = put(client, pid, keys, samples, tags=[{"i": i} for i in range(len(keys))])
    assert (meta.keys, meta.partition_id, meta.fields, meta.extra_info) == (keys, pid, sorted(samples[0]), {})
    assert meta.tags == [{"i": i} for i in range(len(keys))]
    got = client.kv_batch_get(keys, pid)
    assert_same_batch(got, wire_batch(samples))
    # Equal shapes still come back jagged, never dense.
    assert got["responses"].layout == torch.jagged
    assert_same_batch(client.kv_batch_get(keys[::-1], pid), wire_batch(samples[::-1]))


def test_mrope_rows_3_and_4_take_the_strided_fallback_or_jagged_dim_1(tq):
    client, pid = tq
    s3 = sample_for("vlm_mrope", 3, 5, seed=0)
    s3["position_ids"] = s3["position_ids"][1:].clone()  # 3 rope rows
    s4, s4_same = sample_for("vlm_mrope", 4, 2, seed=1), sample_for("vlm_mrope", 4, 4, seed=2)
    for k, s in zip(["r3", "r4", "r4s"], [s3, s4, s4_same], strict=True):
        put(client, pid, [k], [s])
    strided = client.kv_batch_get(["r3", "r4"], pid)["position_ids"]
    assert strided.is_nested and strided.layout == torch.strided
    jagged = client.kv_batch_get(["r3", "r4s"], pid)["position_ids"]
    assert jagged.layout == torch.jagged and jagged._ragged_idx == 1
    assert_same_batch(client.kv_batch_get(["r3", "r4", "r4s"], pid), wire_batch([s3, s4, s4_same]))


ODD_DTYPES = [torch.bool, torch.int8, torch.uint8, torch.bfloat16, torch.float16, torch.int16]


@pytest.mark.parametrize("dtype", ODD_DTYPES, ids=str)
def test_odd_dtypes_are_kept_jagged_and_dense(tq, dtype):
    client, pid = tq
    samples = [
        {
            "routed_experts": random_routes(s, 3, 2, experts=2, seed=i, dtype=torch.int64).to(dtype),
            "flag": torch.tensor(i % 2).to(dtype),
            "mask": torch.ones(s).to(dtype),
        }
        for i, s in enumerate([4, 0, 2])
    ]
    put(client, pid, ["a", "b", "c"], samples)
    got = client.kv_batch_get(["a", "b", "c"], pid)
    assert_same_batch(got, wire_batch(samples))
    assert got["routed_experts"].dtype == dtype and got["flag"].shape == (3,) and got["flag"].dtype == dtype


def test_mixed_dtypes_across_puts_are_cast_to_the_first_fetched(tq):
    client, pid = tq
    a = {"x": torch.tensor([1, 2]), "z": torch.tensor(1)}
    b = {"x": torch.tensor([0.5, 0.25, 2.0]), "z": torch.tensor(0.5)}
    put(client, pid, ["a"], [a])
    put(client, pid, ["b"], [b])
    for order in (["a", "b"], ["b", "a"]):
        got = client.kv_batch_get(order, pid)
        want = wire_batch([{"a": a, "b": b}[k] for k in order])
        assert_same_batch(got, want)
    assert client.kv_batch_get(["a", "b"], pid)["x"].unbind()[1].tolist() == [0, 0, 2]


def test_non_tensor_values_come_back_as_msgpack_gives_them(tq):
    @dataclasses.dataclass
    class Point:
        x: int = 1

    client, pid = tq
    vals = ["s", 7, 1.5, None, b"by", {"t": (1, 2), "e": torch.tensor([1.0], dtype=torch.bfloat16)}, (1, (2, 3))]
    vals += [{3, 4}, Point(), [1, {"a": (5,)}]]
    fields = TensorDict({"o": NonTensorStack(*vals)}, batch_size=[len(vals)])
    keys = [f"v{i}" for i in range(len(vals))]
    client.kv_batch_put(keys, pid, fields=fields)
    got = client.kv_batch_get(keys, pid).get("o")
    assert isinstance(got, NonTensorStack)
    out = got.tolist()
    assert out[:5] == vals[:5]
    assert out[5]["t"] == [1, 2] and out[5]["e"].dtype == torch.bfloat16
    assert out[6:] == [[1, [2, 3]], [3, 4], {"x": 1}, [1, {"a": [5]}]]
    one = client.kv_batch_get(["v0"], pid).get("o")
    assert isinstance(one, NonTensorStack) and one.tolist() == ["s"]


def test_tensors_of_different_ranks_and_none_read_back_as_non_tensor_stacks(tq):
    client, pid = tq
    fields = TensorDict({"m": NonTensorStack(torch.arange(3), torch.ones(2, 2), None)}, batch_size=[3])
    client.kv_batch_put(["a", "b", "c"], pid, fields=fields)
    got = client.kv_batch_get(["a", "b", "c"], pid).get("m")
    assert isinstance(got, NonTensorStack) and got.tolist()[2] is None
    assert torch.equal(got.tolist()[1], torch.ones(2, 2))
    ranks = client.kv_batch_get(["a", "b"], pid).get("m")
    assert isinstance(ranks, NonTensorStack)
    alone = client.kv_batch_get(["a"], pid)["m"]
    assert alone.layout == torch.jagged and torch.equal(alone.unbind()[0], torch.arange(3))


# ---------------------------------------------------------------------------------
# Keys, overwrites, missing fields


def test_a_repeated_key_is_written_last_wins_then_raises(tq):
    client, pid = tq
    samples = [sample_for("text", 3, i + 1, seed=i) for i in range(3)]
    with pytest.raises(ValueError):
        put(client, pid, ["k0", "k1", "k0"], samples, tags=[{"i": 0, "first": 1}, {"i": 1}, {"i": 2}])
    assert listed(client, pid) == {"k0": {"i": 2}, "k1": {"i": 1}}
    assert_same_batch(client.kv_batch_get(["k0", "k1"], pid), wire_batch([samples[2], samples[1]]))


def test_a_repeated_existing_key_merges_its_last_occurrence_only(tq):
    client, pid = tq
    client.kv_batch_put(["k"], pid, tags=[{"old": 0}])
    with pytest.raises(ValueError):
        client.kv_batch_put(["k", "k"], pid, tags=[{"a": 1, "b": 1}, {"b": 2}])
    assert listed(client, pid) == {"k": {"old": 0, "b": 2}}


def test_an_existing_key_is_overwritten_fields_added_tags_merged(tq):
    client, pid = tq
    one = TensorDict({"x": torch.ones(2, 2)}, batch_size=[2])
    meta = client.kv_batch_put(["a", "b"], pid, fields=one, tags=[{"t": 1}, {"t": 2}])
    assert meta.fields == ["x"]
    two = TensorDict({"y": torch.zeros(2, 1), "x": torch.full((2, 2), 5.0)}, batch_size=[2])
    meta = client.kv_batch_put(["b", "c"], pid, fields=two, tags=[{"s": 1}, {}])
    assert meta.fields == ["x", "y"] and meta.tags == [{"t": 2, "s": 1}, {}]
    three = TensorDict({"z": torch.zeros(1, 3)}, batch_size=[1])
    assert client.kv_batch_put(["a"], pid, fields=three).fields == ["x", "z"]
    assert listed(client, pid) == {"a": {"t": 1}, "b": {"t": 2, "s": 1}, "c": {}}
    got = client.kv_batch_get(["b", "a"], pid)
    assert list(got.keys()) == ["x"]  # y and z are each missing from one of them
    assert [v.tolist() for v in got["x"].unbind()] == [[5.0, 5.0], [1.0, 1.0]]


def test_tags_only_puts_create_and_merge_tags(tq):
    client, pid = tq
    meta = client.kv_batch_put(["t0"], pid, tags=[{"z": 1}])
    assert (meta.keys, meta.tags, meta.fields) == (["t0"], [{"z": 1}], [])
    put(client, pid, ["k"], [{"x": torch.arange(2)}], tags=[{"i": 1}])
    meta = client.kv_batch_put(["k"], pid, tags=[{"z": 1}])
    assert (meta.tags, meta.fields) == ([{"i": 1, "z": 1}], ["x"])
    meta = client.kv_batch_put(["k", "t1"], pid, tags=[{"w": 1}, {"w": 2}])
    assert (meta.tags, meta.fields) == ([{"i": 1, "z": 1, "w": 1}, {"w": 2}], [])
    assert listed(client, pid) == {"t0": {"z": 1}, "k": {"i": 1, "z": 1, "w": 1}, "t1": {"w": 2}}
    with pytest.raises(ValueError):
        client.kv_batch_get(["t0"], pid)  # tags only: no data to read
    with pytest.raises(ValueError):
        client.kv_batch_get(["k", "t1"], pid)  # no field in common


def test_returned_tags_are_copies(tq):
    client, pid = tq
    given = [{"a": [1]}]
    meta = client.kv_batch_put(["k"], pid, tags=given)
    assert meta.tags == given and meta.tags[0] is not given[0] and meta.tags[0]["a"] is not given[0]["a"]
    listing = client.kv_list(pid)
    listing[pid]["k"]["a"].append(2)
    assert listed(client, pid) == {"k": {"a": [1]}}


def test_select_fields(tq):
    client, pid = tq
    client.kv_batch_put(["a", "b"], pid, fields=TensorDict({"x": torch.ones(2, 2)}, batch_size=[2]))
    client.kv_batch_put(["b", "c"], pid, fields=TensorDict({"y": torch.zeros(2, 1)}, batch_size=[2]))
    assert list(client.kv_batch_get(["b"], pid, select_fields=["y", "x"]).keys()) == ["x", "y"]
    assert list(client.kv_batch_get(["b"], pid, select_fields="y").keys()) == ["y"]
    assert list(client.kv_batch_get(["b"], pid, select_fields=["y", "y"]).keys()) == ["y"]
    assert list(client.kv_batch_get(["a", "b"], pid, select_fields=["x", "y"]).keys()) == ["x"]
    for keys, select in ((["c"], "x"), (["b"], ["nosuch"]), (["b"], [])):
        empty = client.kv_batch_get(keys, pid, select_fields=select)
        assert empty.batch_size == torch.Size([0]) and list(empty.keys()) == []
    with pytest.raises(ValueError):
        client.kv_batch_get(["a", "c"], pid, select_fields=["x", "y"])  # a and c share no field


def test_unknown_repeated_and_single_keys_in_a_get(tq):
    client, pid = tq
    samples = [sample_for("moe_routed", 3, 2, seed=0), sample_for("moe_routed", 2, 5, seed=1)]
    put(client, pid, ["a", "b"], samples)
    assert_same_batch(client.kv_batch_get(["zz", "b", "a", "b"], pid), wire_batch([samples[1], samples[0], samples[1]]))
    assert_same_batch(client.kv_batch_get("a", pid), wire_batch([samples[0]]))
    for keys, where in ((["zz"], pid), (["a"], f"{pid}-none")):
        with pytest.raises(ValueError):
            client.kv_batch_get(keys, where)


def test_get_by_meta(tq):
    client, pid = tq
    samples = [sample_for("text", 3, 2, seed=0), sample_for("text", 2, 5, seed=1)]
    meta = put(client, pid, ["a", "b"], samples)
    assert_same_batch(client.kv_batch_get_by_meta(meta), wire_batch(samples))
    sub = client.KVBatchMeta
    narrow = sub(keys=["b"], tags=[{}], partition_id=pid, fields=["responses"])
    got = client.kv_batch_get_by_meta(narrow)
    assert list(got.keys()) == ["responses"] and torch.equal(got["responses"].unbind()[0], samples[1]["responses"])
    with pytest.raises(ValueError):
        client.kv_batch_get_by_meta(narrow, select_fields="prompts")
    with pytest.raises(ValueError):
        sub(keys=["a", "b"], partition_id=pid)  # one tag dict per key is required
    with pytest.raises(ValueError):
        sub(keys=["a", "a"], tags=[{}, {}], partition_id=pid)


# ---------------------------------------------------------------------------------
# Bad puts


def test_puts_refused_before_any_key_is_registered(tq):
    client, pid = tq
    two = TensorDict({"x": torch.ones(2, 2)}, batch_size=[2])
    for args, kwargs, error in [
        ((["a"], pid), {}, ValueError),  # neither fields nor tags
        ((["a"], pid), {"fields": two}, ValueError),  # batch size != number of keys
        (([], pid), {"tags": []}, ValueError),
        ((("a", "b"), pid), {"fields": two}, TypeError),
        ((["a", 5], pid), {"fields": two}, TypeError),
    ]:
        with pytest.raises(error):
            client.kv_batch_put(*args, **kwargs)
    assert listed(client, pid) == {}


def test_puts_failing_on_tags_or_data_leave_their_keys_registered_empty(tq):
    client, pid = tq
    put(client, pid, ["c"], [{"x": torch.ones(2)}], tags=[{"q": 1}])
    proxy = types.MappingProxyType({"k": 1})
    with pytest.raises(ValueError):  # tags not one per key
        put(client, pid, ["m0", "m1"], [{"x": torch.ones(2)}] * 2, tags=[{}])
    with pytest.raises(TypeError):  # a tag that is not a dict
        client.kv_batch_put(["n0"], pid, tags=[None])
    with pytest.raises(TypeError):  # a tag value pickle refuses
        client.kv_batch_put(["n1"], pid, tags=[{"m": proxy}])
    bad = TensorDict({"o": NonTensorStack(proxy), "x": torch.zeros(1, 2)}, batch_size=[1])
    with pytest.raises(RuntimeError):  # a field value pickle refuses: neither data nor tags change
        client.kv_batch_put(["c"], pid, fields=bad, tags=[{"q": 2}])
    with pytest.raises(RuntimeError):
        client.kv_batch_put(["n2"], pid, fields=bad, tags=[{"q": 2}])
    with pytest.raises(RuntimeError):  # a meta tensor has no data to send
        client.kv_batch_put(["me"], pid, fields=TensorDict({"x": torch.empty(1, 3, device="meta")}, batch_size=[1]))
    with pytest.raises(TypeError):  # a NonTensorData column, one value broadcast to every row
        client.kv_batch_put(["u0", "u1"], pid, fields=TensorDict({"u": "same"}, batch_size=[2]), tags=[{}, {}])
    assert listed(client, pid) == {
        "c": {"q": 1},
        "m0": {},
        "m1": {},
        "n0": {},
        "n1": {},
        "n2": {},
        "me": {},
        "u0": {},
        "u1": {},
    }
    assert client.kv_batch_get(["c"], pid)["x"].unbind()[0].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError):
        client.kv_batch_get(["m0", "n2"], pid)


# ---------------------------------------------------------------------------------
# kv_list, kv_clear


def test_kv_list_and_kv_clear(tq):
    client, pid = tq
    put(client, pid, ["a", "b", "c"], [sample_for("text", 2, 1, seed=i) for i in range(3)], tags=[{"i": 0}, {}, {}])
    assert list(listed(client, pid)) == ["a", "b", "c"]
    assert pid in client.kv_list() and client.kv_list(f"{pid}-none") == {}
    assert client.kv_list(pid)[pid]["a"] == {"i": 0}
    client.kv_clear("a", pid)
    client.kv_clear(["zz", "b", "b"], pid)
    client.kv_clear(["a"], f"{pid}-none")
    assert list(listed(client, pid)) == ["c"]
    put(client, pid, ["a"], [sample_for("text", 2, 1)])
    assert list(listed(client, pid)) == ["c", "a"]  # a cleared key written again comes last
    client.kv_clear(["a", "c"], pid)
    assert client.kv_list(pid) == {pid: {}}
    for keys, error in (([], ValueError), ([1], TypeError)):
        with pytest.raises(error):
            client.kv_clear(keys, pid)


def test_tags_hold_python_values_as_msgpack_gives_them(tq):
    client, pid = tq
    client.kv_batch_put(["k"], pid, tags=[{"t": (1, 2), "ten": torch.arange(2), "n": None, "d": {"x": [1]}}])
    got = listed(client, pid)["k"]
    assert got["t"] == [1, 2] and torch.equal(got["ten"], torch.arange(2)) and got["n"] is None
    assert got["d"] == {"x": [1]}


# ---------------------------------------------------------------------------------
# By value, async, threads


def test_values_are_stored_and_returned_by_value(tq):
    client, pid = tq
    sample = sample_for("vlm_mrope_moe", 4, 3)
    want = wire_batch([copy.deepcopy(sample)])
    fields = to_tq_fields([sample])
    client.kv_batch_put(["a"], pid, fields=fields)
    for v in [*sample.values(), *sample["multi_modal_inputs"].values()]:
        if isinstance(v, torch.Tensor):
            v.fill_(0)
    fields["input_ids"].values().fill_(-1)
    first = client.kv_batch_get(["a"], pid)
    assert_same_batch(first, want)
    first["input_ids"].values().fill_(-2)
    first.get("multi_modal_inputs").tolist()[0]["image_grid_thw"].fill_(0)
    assert_same_batch(client.kv_batch_get(["a"], pid), want)


def test_async_api_matches_sync(tq):
    client, pid = tq
    samples = [sample_for("distill", 3 + i, 2, seed=i) for i in range(20)]

    async def main():
        await asyncio.gather(
            *(client.async_kv_batch_put([f"k{i}"], pid, fields=to_tq_fields([s])) for i, s in enumerate(samples))
        )
        await client.async_kv_batch_put(["k0"], pid, tags=[{"x": 1}])
        got = await client.async_kv_batch_get([f"k{i}" for i in range(20)], pid)
        by_meta = await client.async_kv_batch_get_by_meta(
            client.KVBatchMeta(keys=["k1"], tags=[{}], partition_id=pid, fields=["responses"])
        )
        listing = await client.async_kv_list(pid)
        await client.async_kv_clear(["k19"], pid)
        return got, by_meta, listing, await client.async_kv_list(pid)

    got, by_meta, listing, after = asyncio.run(main())
    assert_same_batch(got, wire_batch(samples))
    assert torch.equal(by_meta["responses"].unbind()[0], samples[1]["responses"])
    assert listing[pid]["k0"] == {"x": 1} and len(listing[pid]) == 20 and len(after[pid]) == 19


def test_concurrent_puts_from_threads_all_land(tq):
    client, pid = tq
    samples = [sample_for("moe_routed", 2 + i % 5, 1 + i % 3, seed=i) for i in range(24)]
    errors = []

    def worker(t: int) -> None:
        try:
            for i in range(t, 24, 4):
                put(client, pid, [f"k{i}"], [samples[i]], tags=[{"i": i}])
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert errors == []
    keys = [f"k{i}" for i in range(24)]
    assert {k: t["i"] for k, t in listed(client, pid).items()} == {k: i for i, k in enumerate(keys)}
    assert_same_batch(client.kv_batch_get(keys, pid), wire_batch(samples))


# ---------------------------------------------------------------------------------
# trajschema's own users of the client behave identically on both


_PAD_UID = re.compile(r"pad[0-9a-f]{32}")


def canon(x):
    """``x`` with every padding uid replaced by ``PAD`` (they are random), tensors as (dtype, shape, values)."""
    if isinstance(x, str):
        return _PAD_UID.sub("PAD", x)
    if isinstance(x, torch.Tensor):
        rows = x.unbind() if x.is_nested else [x]
        return (str(x.dtype), x.layout, [(tuple(r.shape), r.tolist()) for r in rows])
    if isinstance(x, dict):
        return {canon(k): canon(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [canon(v) for v in x]
    return x


def snapshot(client, pid, meta) -> dict:
    batch = client.kv_batch_get(meta.keys, pid)
    cols = {
        n: canon(values(batch.get(n)) if isinstance(batch.get(n), NonTensorStack) else batch.get(n))
        for n in batch.keys()
    }
    return {
        "keys": canon(meta.keys),
        "tags": canon(meta.tags),
        "fields": meta.fields,
        "listed": canon(listed(client, pid)),
        "columns": cols,
    }


def writer_flow(client, pid) -> list[dict]:
    schema = ts.load_schema("vlm_mrope_moe")
    keys = [f"q{i // 2}_{i % 2}_0" for i in range(5)]
    samples = [verl_sample(schema, 4 + i, 2 + i, uid=f"q{i // 2}", layers=3, topk=2, seed=i) for i in range(5)]
    writer = ts.TransferQueueWriter(schema, partition_id=pid, eos_token_id=EOS, client=client)
    meta = writer.put(keys[:3], samples[:3])
    first = snapshot(client, pid, meta)
    meta2 = writer.put(keys[3:], samples[3:])
    joined = dataclasses.replace(meta, keys=meta.keys + meta2.keys, tags=meta.tags + meta2.tags)
    padded = ts.TransferQueueWriter(schema, partition_id=pid, eos_token_id=EOS, client=client).pad_to_multiple(
        joined, 8
    )
    return [first, snapshot(client, pid, padded)]


def upsample_flow(client, pid) -> list[dict]:
    schema = ts.load_schema("distill")
    keys = [f"u{i}_0_0" for i in range(3)]
    samples = [verl_sample(schema, 3 + i, 2, uid=f"u{i}", teacher_topk=2, seed=i) for i in range(3)]
    tags = [{"status": "finished", "global_steps": 3} for _ in keys]
    meta = ts.TransferQueueWriter(schema, partition_id=pid, eos_token_id=EOS, client=client).put(keys, samples, tags)
    padded = tv.upsample_batch_to_divisible_size(meta, 4, EOS, client=client)
    again = tv.upsample_batch_to_divisible_size(padded, 4, EOS, client=client)
    assert again is padded
    return [snapshot(client, pid, padded)]


@pytest.mark.parametrize("flow", [writer_flow, upsample_flow], ids=["writer", "upsample"])
def test_writer_and_upsample_behave_identically_on_both(tq_client, partition, flow):
    real = flow(tq_client, partition)
    fake = flow(MemoryTransferQueue(), partition)
    assert fake == real
    last = real[-1]
    assert len(last["keys"]) % 4 == 0 and sum(t["is_padding"] for t in last["tags"]) >= 1
