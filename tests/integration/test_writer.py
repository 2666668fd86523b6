"""TransferQueueWriter against a real local TransferQueue: all-or-nothing puts and schema-driven padding."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import types
import uuid

import pytest
import torch

import trajschema as ts
import trajschema.testing
import trajschema.verl
from trajschema.contract.contract import check_padding_contract
from trajschema.testing import tq_batch, verl_sample
from trajschema.tq.writer import TransferQueueWriter

pytestmark = pytest.mark.tq

EOS = 2


def stored(tq, partition: str) -> dict:
    """``{key: tags}`` of everything in the partition."""
    return tq.kv_list(partition).get(partition, {})


def group(schema: ts.Schema, uid: str, lengths: list[tuple[int, int]], seed: int = 0) -> tuple[list, list]:
    """Keys ``{uid}_{session}_0`` and realistic samples of one GRPO group, one per (P, R)."""
    keys, samples = [], []
    for j, (p, r) in enumerate(lengths):
        s = verl_sample(schema, p, r, uid=uid, seed=seed + j)
        s["session_id"] = j
        keys.append(f"{uid}_{j}_0")
        samples.append(s)
    return keys, samples


def writer_for(schema, partition, tq, **kw) -> TransferQueueWriter:
    return TransferQueueWriter(schema, partition_id=partition, eos_token_id=EOS, client=tq, **kw)


def codes(err: ts.SchemaError) -> list[tuple]:
    return [(v.sample, v.field, v.code) for v in err.violations]


# ---------------------------------------------------------------------------------
# put


def test_put_round_trip(schema, tq_client, partition):
    keys, samples = group(schema, "q0", [(3, 4), (2, 0), (5, 1)])
    meta = writer_for(schema, partition, tq_client).put(keys, samples)

    assert meta.keys == keys and meta.partition_id == partition
    assert set(meta.fields) == set(samples[0])
    assert meta.tags == [
        {"is_padding": False, "prompt_len": p, "response_len": r, "seq_len": p + r} for p, r in [(3, 4), (2, 0), (5, 1)]
    ]
    assert stored(tq_client, partition) == dict(zip(keys, meta.tags, strict=True))
    batch = tq_client.kv_batch_get(keys, partition)
    schema.validate_batch(batch, tags=meta.tags)
    assert torch.equal(batch["responses"][2], samples[2]["responses"])


def test_put_accepts_a_tensordict_and_keeps_given_tags(tq_client, partition):
    schema = ts.load_schema("vlm_mrope_moe")
    keys, samples = group(schema, "q1", [(3, 4), (4, 4)])
    tags = [{"seq_len": 7, "global_steps": 3}, {}]
    meta = writer_for(schema, partition, tq_client).put(keys, tq_batch(samples), tags=tags)

    assert meta.tags[0] == {"seq_len": 7, "global_steps": 3, "is_padding": False, "prompt_len": 3, "response_len": 4}
    assert tags == [{"seq_len": 7, "global_steps": 3}, {}]  # the caller's dicts are not modified
    schema.validate_batch(tq_client.kv_batch_get(keys, partition), tags=meta.tags)


def test_a_bad_sample_rejects_the_whole_put(tq_client, partition):
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4)] * 4)
    samples[1]["loss_mask"] = samples[1]["loss_mask"].float()  # reported once, by the schema
    samples[2]["loss_mask"] = torch.ones(5, dtype=torch.int64)  # one token too many
    samples[3]["response_mask"][0] = 2

    with pytest.raises(ts.SchemaError) as info:
        writer_for(schema, partition, tq_client).put(keys, samples)
    assert codes(info.value) == [
        (1, "loss_mask", "dtype"),
        (2, "loss_mask", "dim_mismatch"),
        (3, "response_mask", "value"),
    ]
    assert stored(tq_client, partition) == {}


def test_a_length_tag_that_disagrees_rejects_the_put(tq_client, partition):
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4), (3, 5)])
    with pytest.raises(ts.SchemaError) as info:
        writer_for(schema, partition, tq_client).put(keys, samples, tags=[{}, {"seq_len": 7}])
    assert codes(info.value) == [(1, "seq_len", "tag")]
    assert stored(tq_client, partition) == {}


def test_duplicate_keys_in_one_put_are_refused(tq_client, partition):
    schema = ts.load_schema("text")
    _, samples = group(schema, "q0", [(3, 4)] * 3)
    with pytest.raises(ts.SchemaError, match="repeats sample 0's key") as info:
        writer_for(schema, partition, tq_client).put(["a", "b", "a"], samples)
    assert codes(info.value) == [(2, "<key>", "key")]
    assert stored(tq_client, partition) == {}


def test_keys_already_in_the_partition_are_refused(tq_client, partition):
    schema = ts.load_schema("text")
    writer = writer_for(schema, partition, tq_client)
    keys, samples = group(schema, "q0", [(3, 4)] * 2)
    first = writer.put(keys, samples)

    keys2, samples2 = group(schema, "q1", [(2, 2)] * 2, seed=5)
    with pytest.raises(ts.SchemaError, match="already in partition") as info:
        # Another writer: the check reads the partition, not the writer's memory.
        writer_for(schema, partition, tq_client).put([keys2[0], keys[1]], samples2)
    assert codes(info.value) == [(1, "<key>", "key")]
    assert stored(tq_client, partition) == dict(zip(keys, first.tags, strict=True))
    assert torch.equal(tq_client.kv_batch_get([keys[1]], partition)["responses"][0], samples[1]["responses"])


def test_a_dtype_differing_from_an_earlier_put_is_refused(tq_client, partition):
    schema = ts.load_schema("moe_routed")  # routed_experts may be int16, int32 or int64
    writer = writer_for(schema, partition, tq_client)
    keys, samples = group(schema, "q0", [(3, 4)])
    writer.put(keys, samples)

    keys2, samples2 = group(schema, "q1", [(3, 4)] * 2)
    samples2[1]["routed_experts"] = samples2[1]["routed_experts"].to(torch.int32)
    with pytest.raises(ts.SchemaError, match="differs from i16") as info:
        writer.put(keys2, samples2)
    assert codes(info.value) == [(1, "routed_experts", "dtype")]  # within the put

    for s in samples2:
        s["routed_experts"] = s["routed_experts"].to(torch.int32)
    with pytest.raises(ts.SchemaError, match="earlier puts") as info:
        writer.put(keys2, samples2)
    assert codes(info.value) == [(0, "routed_experts", "dtype")]
    assert list(stored(tq_client, partition)) == keys


def test_a_field_set_differing_within_or_across_puts_is_refused(tq_client, partition):
    schema = ts.load_schema("text")
    writer = writer_for(schema, partition, tq_client)
    keys, samples = group(schema, "q0", [(3, 4)] * 2)
    samples[1]["rollout_log_probs"] = None  # None means absent
    with pytest.raises(ts.SchemaError) as info:
        writer.put(keys, samples)
    assert codes(info.value) == [(1, "rollout_log_probs", "missing")]

    del samples[0]["rollout_log_probs"]
    writer.put(keys, samples)
    keys2, samples2 = group(schema, "q1", [(3, 4)])
    with pytest.raises(ts.SchemaError) as info:
        writer.put(keys2, samples2)
    assert codes(info.value) == [(None, "rollout_log_probs", "batch")]
    assert list(stored(tq_client, partition)) == keys


def test_an_extra_field_mixing_tensors_and_other_values_is_refused(tq_client, partition):
    schema = ts.load_schema("text")  # extra: allow, so only the writer sees the mix
    keys, samples = group(schema, "q0", [(3, 4)] * 3)
    samples[0]["advantages"] = torch.zeros(4)
    samples[1]["advantages"] = 0.5
    samples[2]["advantages"] = torch.zeros(4, dtype=torch.float64)
    with pytest.raises(ts.SchemaError, match="read the column back as a NonTensorStack") as info:
        writer_for(schema, partition, tq_client).put(keys, samples)
    assert codes(info.value) == [(1, "advantages", "kind"), (2, "advantages", "dtype")]
    assert stored(tq_client, partition) == {}


class _Hung:
    """The real TransferQueue, except that its listing calls hang until released (fault injection)."""

    def __init__(self, real):
        self.real = real
        self.release = threading.Event()

    def kv_list(self, *args, **kwargs):
        self.release.wait(60)
        return self.real.kv_list(*args, **kwargs)

    async def async_kv_list(self, *args, **kwargs):
        while not self.release.is_set():
            await asyncio.sleep(0.01)
        return await self.real.async_kv_list(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_a_hung_call_times_out(tq_client, partition):
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4)])
    hung = _Hung(tq_client)
    writer = writer_for(schema, partition, hung, timeout_s=0.5)
    try:
        with pytest.raises(TimeoutError, match="kv_list did not return"):
            writer.put(keys, samples)
        with pytest.raises(TimeoutError, match="async_kv_list did not return"):
            asyncio.run(writer.async_put(keys, samples))
    finally:
        hung.release.set()
    assert stored(tq_client, partition) == {}


# ---------------------------------------------------------------------------------
# pad_to_multiple


def verl_example(schema: ts.Schema) -> tuple[list, list]:
    """45 prompts with uneven multi-trajectory outputs: 353 samples."""
    counts = [8] * 45
    for i in range(7):
        counts[6 * i] -= 1
    counts[1] += 2
    counts[4] -= 2
    assert sum(counts) == 353
    keys, samples = [], []
    for i, n in enumerate(counts):
        k, s = group(schema, f"q{i}", [(1 + (i + j) % 3, (i * j) % 4) for j in range(n)], seed=i * 16)
        keys += k
        samples += s
    return keys, samples


def test_pad_to_multiple_the_verl_example(tq_client, partition):
    schema = ts.load_schema("text")
    multiple = ts.required_multiple(2, actor_mini_batch_size=15, rollout_n=8)
    assert multiple == 120
    keys, samples = verl_example(schema)
    writer = writer_for(schema, partition, tq_client)
    meta = writer.put(keys, samples, tags=[{"global_steps": 1} for _ in keys])

    padded = writer.pad_to_multiple(meta, multiple)

    assert len(padded.keys) == 360 and padded.keys[:353] == keys
    assert padded.partition_id == partition and padded.fields == meta.fields
    assert padded.extra_info == meta.extra_info
    assert [t["is_padding"] for t in padded.tags] == [False] * 353 + [True] * 7
    assert stored(tq_client, partition) == dict(zip(padded.keys, padded.tags, strict=True))
    batch = tq_client.kv_batch_get(padded.keys, partition)
    schema.validate_batch(batch, tags=padded.tags)
    check_padding_contract(batch, padded.tags, schema)
    uids = batch.get("uid").tolist()
    assert len(set(uids[353:])) == 1 and not set(uids[353:]) & set(uids[:353])
    # Padding inherits the real sample's undeclared tags, as verl's padding does.
    assert padded.tags[-1] == {
        "global_steps": 1,
        "is_padding": True,
        "prompt_len": 127,
        "response_len": 1,
        "seq_len": 128,
    }
    assert ts.real_count(padded.tags) == 353


def test_pad_to_multiple_each_schema(schema, tq_client, partition):
    keys, samples = group(schema, "q0", [(3, 4), (2, 1), (4, 3), (2, 2), (3, 0)])
    writer = writer_for(schema, partition, tq_client)
    padded = writer.pad_to_multiple(writer.put(keys, samples), 8)

    assert len(padded.keys) == 8 and ts.real_count(padded.tags) == 5
    batch = tq_client.kv_batch_get(padded.keys, partition)
    assert set(batch.keys()) == set(samples[0])
    if "multi_modal_inputs" in batch.keys():
        # The shared read-only {} of padding comes back as ordinary, separate dicts.
        mm = batch.get("multi_modal_inputs").tolist()[5:]
        assert all(type(m) is dict and m == {} for m in mm) and mm[0] is not mm[1]
    schema.validate_batch(batch, tags=padded.tags)
    check_padding_contract(batch, padded.tags, schema)


def test_pad_to_multiple_leaves_a_full_batch_alone(tq_client, partition):
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4)] * 4)
    writer = writer_for(schema, partition, tq_client)
    meta = writer.put(keys, samples)
    assert writer.pad_to_multiple(meta, 4) is meta
    assert writer.pad_to_multiple(meta, 2) is meta
    assert list(stored(tq_client, partition)) == keys


def test_pad_to_multiple_refuses_empty_and_all_padding_batches(tq_client, partition):
    schema = ts.load_schema("text")
    writer = writer_for(schema, partition, tq_client)
    with pytest.raises(ValueError, match="empty batch"):
        writer.pad_to_multiple(tq_client.KVBatchMeta(keys=[], tags=[], partition_id=partition), 8)
    pad = schema.padding(3, eos_token_id=EOS, dims={"prompt": 2, "response": 1})
    meta = tq_client.kv_batch_put(pad.keys, partition, fields=pad.fields, tags=pad.tags)
    with pytest.raises(ValueError, match="no real sample"):
        writer.pad_to_multiple(meta, 8)
    with pytest.raises(ValueError, match="partition"):
        writer_for(schema, "elsewhere", tq_client).pad_to_multiple(meta, 8)
    assert list(stored(tq_client, partition)) == pad.keys


def test_pad_to_multiple_accepts_a_meta_naming_a_subset_of_the_stored_fields(tq_client, partition):
    # A trainer may carry a KVBatchMeta whose .fields names only what it reads next; the
    # padding must still store every field the real samples store (TransferQueue drops a
    # field from reads of any batch where some sample lacks it).
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4)] * 3)
    writer = writer_for(schema, partition, tq_client)
    meta = writer.put(keys, samples)
    narrowed = tq_client.KVBatchMeta(keys=meta.keys, tags=meta.tags, partition_id=partition, fields=["responses"])
    padded = writer.pad_to_multiple(narrowed, 4)
    assert padded.fields == ["responses"] and len(padded.keys) == 4
    back = tq_client.kv_batch_get(padded.keys, partition)
    assert set(back.keys()) == set(samples[0])


def test_pad_to_multiple_refuses_a_meta_naming_a_field_the_samples_lack(tq_client, partition):
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4)] * 3)
    writer = writer_for(schema, partition, tq_client)
    meta = writer.put(keys, samples)
    widened = tq_client.KVBatchMeta(
        keys=meta.keys, tags=meta.tags, partition_id=partition, fields=["responses", "advantages"]
    )
    with pytest.raises(ValueError, match=r"meta\.fields names \[advantages\]"):
        writer.pad_to_multiple(widened, 4)
    assert list(stored(tq_client, partition)) == keys


# ---------------------------------------------------------------------------------
# async


def test_async_put_and_pad(tq_client, partition):
    schema = ts.load_schema("vlm_mrope_moe")
    writer = writer_for(schema, partition, tq_client)
    keys_a, samples_a = group(schema, "q0", [(3, 4), (2, 2), (5, 1)])
    keys_b, samples_b = group(schema, "q1", [(4, 4), (2, 3)], seed=9)

    async def main():
        metas = await asyncio.gather(writer.async_put(keys_a, samples_a), writer.async_put(keys_b, samples_b))
        meta = tq_client.KVBatchMeta.concat(metas)
        with pytest.raises(ts.SchemaError, match="already in partition"):
            await writer.async_put(keys_a[:1], samples_a[:1])
        return await writer.async_pad_to_multiple(meta, 8)

    padded = asyncio.run(main())
    assert len(padded.keys) == 8 and ts.real_count(padded.tags) == 5
    batch = tq_client.kv_batch_get(padded.keys, partition)
    schema.validate_batch(batch, tags=padded.tags)
    check_padding_contract(batch, padded.tags, schema)


class _CountingClient:
    """The real TransferQueue module, with its calls counted (no behaviour changed)."""

    def __init__(self, tq) -> None:
        self._tq = tq
        self.calls: list[str] = []

    def __getattr__(self, name):
        fn = getattr(self._tq, name)
        if name.startswith(("kv_", "async_kv_")):
            return lambda *a, **k: (self.calls.append(name), fn(*a, **k))[1]
        return fn


def test_a_writer_pads_its_own_batch_without_reading_back(tq_client, partition):
    schema = ts.load_schema("moe_routed")
    keys, samples = group(schema, "q0", [(3, 4), (2, 1), (4, 3)])
    client = _CountingClient(tq_client)
    writer = ts.TransferQueueWriter(schema, partition_id=partition, eos_token_id=2, client=client)
    meta = writer.put(keys, samples)
    client.calls.clear()
    padded = writer.pad_to_multiple(meta, 4)
    assert client.calls == ["kv_batch_put"]  # the last sample it put is the reference
    # A fresh writer (the trainer driver) must read one real sample first.
    driver_client = _CountingClient(tq_client)
    driver = ts.TransferQueueWriter(schema, partition_id=partition, eos_token_id=2, client=driver_client)
    again = driver.pad_to_multiple(meta, 8)
    assert driver_client.calls == ["kv_batch_get", "kv_batch_put"]
    batch = tq_client.kv_batch_get(padded.keys + again.keys[3:], partition)
    schema.validate_batch(batch, tags=padded.tags + again.tags[3:])


# ---------------------------------------------------------------------------------
# Every write lands whole or not at all: what TransferQueue cannot carry, and faults
# inside a put. Each runs on the in-memory TransferQueue and on the real one.


@pytest.fixture(params=["memory", "real"])
def any_tq(request):
    """``(client, partition)``: a fresh MemoryTransferQueue, or the session's real TransferQueue."""
    if request.param == "memory":
        return ts.testing.MemoryTransferQueue(), f"test-{uuid.uuid4().hex[:12]}"
    return request.getfixturevalue("tq_client"), request.getfixturevalue("partition")


class _Unpicklable:
    """An object pickle refuses (as a lock, a socket or a CUDA stream would be)."""

    def __reduce__(self):
        raise TypeError("cannot pickle _Unpicklable")


class _BadLoad:
    """An object that pickles but cannot be unpickled on the other side."""

    def __reduce__(self):
        return (int, ("not a number",))


def _carry_cases():
    """``(id, mutate(sample, tag), field)``: a value or tag TransferQueue cannot carry, and where it is."""

    def field(name, value):
        return lambda s, t: s.__setitem__(name, value)

    def tag(name, value):
        return lambda s, t: t.__setitem__(name, value)

    return [
        ("lock-field", field("handle", threading.Lock()), "handle"),
        ("unpicklable-field", field("handle", _Unpicklable()), "handle"),
        ("bad-load-field", field("handle", _BadLoad()), "handle"),
        ("meta-tensor-field", field("old_log_probs", torch.zeros(4, device="meta")), "old_log_probs"),
        ("sparse-tensor-field", field("extra", torch.zeros(3, 3).to_sparse()), "extra"),
        ("lock-tag", tag("handle", threading.Lock()), "handle"),
        ("unpicklable-tag", tag("handle", _Unpicklable()), "handle"),
        ("nested-unpicklable-tag", tag("info", {"a": [1, _Unpicklable()]}), "info"),
    ]


@pytest.mark.parametrize(("mutate", "where"), [c[1:] for c in _carry_cases()], ids=[c[0] for c in _carry_cases()])
def test_a_value_transferqueue_cannot_carry_is_a_violation_and_writes_nothing(any_tq, mutate, where):
    client, pid = any_tq
    schema = ts.load_schema("text")  # extra: allow, so undeclared fields reach the writer
    keys, samples = group(schema, "q0", [(3, 4), (2, 5), (4, 1)])
    tags = [{} for _ in keys]
    mutate(samples[1], tags[1])
    with pytest.raises(ts.SchemaError) as info:
        writer_for(schema, pid, client).put(keys, samples, tags)
    assert (1, where, "transport") in codes(info.value)
    assert any(v.message.startswith("TransferQueue cannot carry") for v in info.value.violations)
    assert stored(client, pid) == {}
    # Once the value is gone, the same keys are accepted: nothing was registered.
    samples[1].pop(where, None)
    tags[1].pop(where, None)
    writer_for(schema, pid, client).put(keys, samples, tags)
    assert list(stored(client, pid)) == keys


def test_padding_inheriting_a_tag_that_cannot_travel_writes_nothing(any_tq):
    client, pid = any_tq
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4), (2, 5), (4, 1)])
    meta = writer_for(schema, pid, client).put(keys, samples)
    meta.tags[0]["handle"] = _Unpicklable()  # what the caller holds, inherited by padding
    before = stored(client, pid)
    with pytest.raises(ts.SchemaError, match="inherited by the padding") as info:
        writer_for(schema, pid, client).pad_to_multiple(meta, 4)
    assert [v.code for v in info.value.violations] == ["transport"]
    assert stored(client, pid) == before


class _Faulty:
    """A TransferQueue whose put registers its keys and then fails, as a dying storage unit makes it fail."""

    def __init__(self, real, fail_times: int = 1):
        self.real, self.fail_times, self.puts = real, fail_times, 0

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None, data_parser=None):
        self.puts += 1
        if self.puts <= self.fail_times:
            self.real.kv_batch_put(keys, partition_id, tags=[{} for _ in keys])  # the keys are registered ...
            raise RuntimeError("storage unit TQ_STORAGE_UNIT_0 lost")  # ... and the data never arrives
        return self.real.kv_batch_put(keys, partition_id, fields=fields, tags=tags, data_parser=data_parser)

    async def async_kv_batch_put(self, keys, partition_id, fields=None, tags=None, data_parser=None):
        return self.kv_batch_put(keys, partition_id, fields=fields, tags=tags, data_parser=data_parser)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.parametrize("how", ["sync", "async", "pad"])
def test_a_put_failing_after_keys_were_registered_is_undone(any_tq, how):
    client, pid = any_tq
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4), (2, 5), (4, 1)])
    faulty = _Faulty(client)
    writer = writer_for(schema, pid, faulty)
    if how == "pad":
        meta = writer_for(schema, pid, client).put(keys, samples)
        before = stored(client, pid)
        with pytest.raises(RuntimeError, match="storage unit") as info:
            writer.pad_to_multiple(meta, 8)
        assert stored(client, pid) == before
        meta = writer.pad_to_multiple(meta, 8)  # the same call, retried
        assert len(meta.keys) == 8 and len(stored(client, pid)) == 8
        return
    run = (
        (lambda: writer.put(keys, samples)) if how == "sync" else (lambda: asyncio.run(writer.async_put(keys, samples)))
    )
    with pytest.raises(RuntimeError, match="storage unit") as info:
        run()
    assert "the put was undone" in "".join(info.value.__notes__)
    assert stored(client, pid) == {}
    meta = run()  # the same call, retried
    assert list(stored(client, pid)) == keys == meta.keys
    got = client.kv_batch_get(keys, pid)
    assert torch.equal(got["responses"][1], samples[1]["responses"])


def _failing_storage(monkeypatch, tq_client, delay_s: float | None):
    """Fault injection inside the real TransferQueue client: its storage put fails, or stalls ``delay_s`` first.

    The keys are registered with the controller before the storage put runs, as in any real put.
    """
    client = tq_client.get_client()
    real_put = client.storage_manager.put_data

    async def put_data(*args, **kwargs):
        if delay_s is None:
            raise RuntimeError("Error in put to storage unit TQ_STORAGE_UNIT_0: connection lost")
        await asyncio.sleep(delay_s)
        return await real_put(*args, **kwargs)

    monkeypatch.setattr(client.storage_manager, "put_data", put_data)
    return lambda: monkeypatch.setattr(client.storage_manager, "put_data", real_put)


def test_a_storage_unit_failing_the_put_leaves_the_partition_as_before(tq_client, partition, monkeypatch):
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4), (2, 5)])
    heal = _failing_storage(monkeypatch, tq_client, None)
    writer = writer_for(schema, partition, tq_client)
    with pytest.raises(RuntimeError, match="connection lost"):
        writer.put(keys, samples)
    assert stored(tq_client, partition) == {}
    heal()
    writer.put(keys, samples)
    assert list(stored(tq_client, partition)) == keys
    assert torch.equal(tq_client.kv_batch_get(keys, partition)["prompts"][0], samples[0]["prompts"])


def test_a_put_that_times_out_is_cleared_and_can_be_retried(tq_client, partition, monkeypatch):
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4), (2, 5)])
    heal = _failing_storage(monkeypatch, tq_client, 2.0)
    with pytest.raises(TimeoutError, match="nothing of this put is kept"):
        writer_for(schema, partition, tq_client, timeout_s=0.5).put(keys, samples)
    heal()
    assert stored(tq_client, partition) == {}
    # A retry waits for the abandoned put to end and be cleared, then writes.
    retry = [dict(s, responses=s["responses"] + 1) for s in samples]
    writer_for(schema, partition, tq_client, timeout_s=30).put(keys, retry)
    time.sleep(0.5)  # nothing of the abandoned put may land after the retry
    assert list(stored(tq_client, partition)) == keys
    got = tq_client.kv_batch_get(keys, partition)
    assert all(torch.equal(got["responses"][i], retry[i]["responses"]) for i in range(2))


def test_an_async_put_that_times_out_is_cleared(tq_client, partition, monkeypatch):
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4)])
    heal = _failing_storage(monkeypatch, tq_client, 5.0)
    with pytest.raises(TimeoutError, match="the put was undone"):
        asyncio.run(writer_for(schema, partition, tq_client, timeout_s=0.5).async_put(keys, samples))
    heal()
    assert stored(tq_client, partition) == {}
    asyncio.run(writer_for(schema, partition, tq_client).async_put(keys, samples))
    assert list(stored(tq_client, partition)) == keys


@dataclasses.dataclass
class _LooksLikeMeta:
    keys: list
    tags: list
    partition_id: str | None = None


def _bad_metas(meta):
    """``(id, meta, exception)``: batch metas padding must refuse before it writes anything."""
    short = dataclasses.replace(meta)
    short.tags = short.tags[:-1]  # a KVBatchMeta checks itself only when built
    repeated = dataclasses.replace(meta)
    repeated.keys = [*meta.keys[:-1], meta.keys[0]]
    not_str = dataclasses.replace(meta)
    not_str.keys = [*meta.keys[:-1], 7]
    bad_tag = dataclasses.replace(meta)
    bad_tag.tags = [*meta.tags[:-1], "is_padding"]
    return [
        ("tags-short", short, ValueError),
        ("key-repeated", repeated, ValueError),
        ("key-not-str", not_str, TypeError),
        ("tag-not-dict", bad_tag, TypeError),
        ("lookalike", _LooksLikeMeta(list(meta.keys), list(meta.tags), meta.partition_id), TypeError),
        ("namespace", types.SimpleNamespace(keys=meta.keys, tags=meta.tags, partition_id=meta.partition_id), TypeError),
    ]


@pytest.mark.parametrize(
    "case", range(6), ids=["tags-short", "key-repeated", "key-not-str", "tag-not-dict", "lookalike", "namespace"]
)
@pytest.mark.parametrize("entry", ["writer", "verl"])
def test_padding_refuses_an_inconsistent_batch_before_writing(any_tq, case, entry):
    client, pid = any_tq
    schema = ts.load_schema("text")
    keys, samples = group(schema, "q0", [(3, 4), (2, 5), (4, 1)])
    meta = writer_for(schema, pid, client).put(keys, samples)
    name, bad, exc = _bad_metas(meta)[case]
    before = stored(client, pid)
    if entry == "writer":
        pad = lambda: writer_for(schema, pid, client).pad_to_multiple(bad, 8)  # noqa: E731
    else:
        pad = lambda: ts.verl.upsample_batch_to_divisible_size(bad, 8, EOS, client=client)  # noqa: E731
    with pytest.raises(exc):
        pad()
    assert stored(client, pid) == before, name
