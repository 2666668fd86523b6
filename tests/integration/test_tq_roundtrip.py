"""Round trips through a real TransferQueue 0.1.11: kv_batch_get must match wire_batch."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch
from tensordict import NonTensorStack, TensorDict

from tests.layout_cases import layout_sample
from trajschema.tq.local import TransferQueueStartError, start_local_transfer_queue
from trajschema.tq.wire import to_tq_fields, wire_batch

pytestmark = pytest.mark.tq


def _equal(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def assert_same_batch(got: TensorDict, want: TensorDict) -> None:
    """Same fields in the same order, and per field the same layout, ragged dim, dtype, shapes and values."""
    assert got.batch_size == want.batch_size
    assert list(got.keys()) == list(want.keys())
    for name in want.keys():
        g, w = got.get(name), want.get(name)
        assert type(g) is type(w), (name, type(g), type(w))
        if isinstance(w, torch.Tensor):
            assert (g.is_nested, g.layout, g.dtype) == (w.is_nested, w.layout, w.dtype), name
            if w.layout == torch.jagged:
                assert g._ragged_idx == w._ragged_idx, name
                assert g.lengths() is None and w.lengths() is None, name
                assert torch.equal(g.offsets(), w.offsets()), name
                assert g.values().shape == w.values().shape and torch.equal(g.values(), w.values()), name
            elif w.is_nested:
                gs, ws = g.unbind(), w.unbind()
                assert [t.shape for t in gs] == [t.shape for t in ws], name
                assert all(torch.equal(x, y) for x, y in zip(gs, ws)), name
            else:
                assert g.shape == w.shape and torch.equal(g, w), name
        else:
            assert isinstance(w, NonTensorStack), name
            assert _equal(g.tolist(), w.tolist()), name


def keys_for(n: int, prefix: str = "k") -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


CASES = {
    "equal_lengths": [layout_sample(3, 5, seed=i) for i in range(3)],
    "unequal_lengths": [layout_sample(3, 5, seed=0), layout_sample(4, 2, seed=1), layout_sample(2, 7, seed=2)],
    "mrope_ragged_seq": [layout_sample(3, 5, mrope=4, seed=0), layout_sample(4, 2, mrope=4, seed=1)],
    "mrope_equal_seq": [layout_sample(3, 5, mrope=4, seed=i) for i in range(3)],
    "mrope_3_and_4_rows": [layout_sample(3, 5, mrope=3, seed=0), layout_sample(4, 2, mrope=4, seed=1)],
    "mrope_3_and_4_rows_equal_seq": [layout_sample(3, 5, mrope=3, seed=0), layout_sample(4, 4, mrope=4, seed=1)],
    "moe_wide": [layout_sample(5, 3, layers=8, topk=4, seed=0), layout_sample(2, 9, layers=8, topk=4, seed=1)],
    "empty_response": [layout_sample(3, 0, seed=0), layout_sample(2, 4, seed=1)],
    "single_sample": [layout_sample(3, 5, mrope=4, seed=7)],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_put_round_trip_matches_tq_layout(tq_client, partition, case):
    samples = CASES[case]
    keys = keys_for(len(samples))
    meta = tq_client.kv_batch_put(
        keys, partition, fields=to_tq_fields(samples), tags=[{"i": i} for i in range(len(keys))]
    )
    assert meta.keys == keys and meta.partition_id == partition
    assert meta.fields == sorted(samples[0])
    assert_same_batch(tq_client.kv_batch_get(keys, partition), wire_batch(samples))


@pytest.mark.parametrize("case", ["unequal_lengths", "mrope_ragged_seq", "mrope_3_and_4_rows"])
def test_per_sample_puts_read_back_like_one_put(tq_client, partition, case):
    samples = CASES[case]
    keys = keys_for(len(samples))
    for k, s in zip(keys, samples):
        tq_client.kv_batch_put([k], partition, fields=to_tq_fields([s]))
    assert_same_batch(tq_client.kv_batch_get(keys, partition), wire_batch(samples))
    # Any subset, in any order, is laid out from that subset's values alone.
    sub = [keys[-1], keys[0]]
    assert_same_batch(tq_client.kv_batch_get(sub, partition), wire_batch([samples[-1], samples[0]]))


def test_writer_layout_does_not_matter(tq_client, partition):
    samples = CASES["mrope_equal_seq"]
    dense = TensorDict(
        {
            name: torch.stack([s[name] for s in samples])
            for name in samples[0]
            if isinstance(samples[0][name], torch.Tensor)
        },
        batch_size=[len(samples)],
    )
    keys = keys_for(len(samples))
    tq_client.kv_batch_put(keys, partition, fields=dense)
    got = tq_client.kv_batch_get(keys, partition)
    want = wire_batch([{k: v for k, v in s.items() if isinstance(v, torch.Tensor)} for s in samples])
    assert_same_batch(got, want)
    assert got.get("responses").layout == torch.jagged  # dense in, jagged out


def test_mixed_dtypes_across_puts_are_cast_like_tq_layout(tq_client, partition):
    a = {"lp": torch.tensor([0.5, 0.25]), "score": torch.tensor(1.5)}
    b = {"lp": torch.tensor([1, 2, 3]), "score": torch.tensor(2)}
    tq_client.kv_batch_put(["a"], partition, fields=to_tq_fields([a]))
    tq_client.kv_batch_put(["b"], partition, fields=to_tq_fields([b]))
    for order in (["a", "b"], ["b", "a"]):
        samples = [{"a": a, "b": b}[k] for k in order]
        assert_same_batch(tq_client.kv_batch_get(order, partition), wire_batch(samples))
    got = tq_client.kv_batch_get(["b", "a"], partition).get("lp")
    assert got.layout == torch.strided and got.dtype == torch.int64
    assert got.unbind()[1].tolist() == [0, 0]  # 0.5, 0.25 truncated to the first sample's int64


def test_field_missing_from_some_samples_is_dropped_silently(tq_client, partition):
    full = {"x": torch.ones(2), "extra": torch.ones(1)}
    lean = {"x": torch.ones(3)}
    tq_client.kv_batch_put(["full"], partition, fields=to_tq_fields([full]))
    tq_client.kv_batch_put(["lean"], partition, fields=to_tq_fields([lean]))
    got = tq_client.kv_batch_get(["full", "lean"], partition)
    assert_same_batch(got, wire_batch([full, lean]))
    assert "extra" not in got.keys()
    # Even asking for it by name does not raise.
    assert list(tq_client.kv_batch_get(["full", "lean"], partition, select_fields=["x", "extra"]).keys()) == ["x"]


def test_mixed_ranks_and_none_round_trip_as_non_tensor_stacks(tq_client, partition):
    samples = [{"pos": torch.arange(3), "opt": torch.ones(2)}, {"pos": torch.arange(8).reshape(4, 2), "opt": None}]
    fields = TensorDict(
        {"pos": NonTensorStack(*[s["pos"] for s in samples]), "opt": NonTensorStack(*[s["opt"] for s in samples])},
        batch_size=[2],
    )
    tq_client.kv_batch_put(["r0", "r1"], partition, fields=fields)
    assert_same_batch(tq_client.kv_batch_get(["r0", "r1"], partition), wire_batch(samples))


def test_existing_key_is_overwritten_and_tags_merge(tq_client, partition):
    tq_client.kv_batch_put(["k"], partition, fields=to_tq_fields([{"x": torch.ones(2)}]), tags=[{"a": 1}])
    meta = tq_client.kv_batch_put(["k"], partition, fields=to_tq_fields([{"x": torch.zeros(5)}]), tags=[{"b": 2}])
    assert meta.tags == [{"a": 1, "b": 2}]
    assert tq_client.kv_list(partition) == {partition: {"k": {"a": 1, "b": 2}}}
    assert tq_client.kv_batch_get(["k"], partition).get("x").unbind()[0].tolist() == [0.0] * 5


def test_duplicate_keys_in_one_put_raise_after_writing(tq_client, partition):
    fields = to_tq_fields([{"x": torch.tensor([1])}, {"x": torch.tensor([2])}, {"x": torch.tensor([3])}])
    with pytest.raises(ValueError, match="duplicated keys"):
        tq_client.kv_batch_put(["d", "e", "d"], partition, fields=fields, tags=[{"t": 0}, {"t": 1}, {"t": 2}])
    assert tq_client.kv_list(partition) == {partition: {"d": {"t": 2}, "e": {"t": 1}}}
    assert [t.tolist() for t in tq_client.kv_batch_get(["d", "e"], partition).get("x").unbind()] == [[3], [2]]


def test_unknown_keys_are_dropped_from_a_get(tq_client, partition):
    tq_client.kv_batch_put(["k"], partition, fields=to_tq_fields([{"x": torch.ones(2)}]))
    assert tq_client.kv_batch_get(["k", "nope"], partition).batch_size == torch.Size([1])
    with pytest.raises(ValueError, match="not found"):
        tq_client.kv_batch_get(["nope"], partition)


def test_kv_batch_meta_construction_and_get_by_meta(tq_client, partition):
    samples = CASES["unequal_lengths"]
    keys = keys_for(len(samples))
    tq_client.kv_batch_put(keys, partition, fields=to_tq_fields(samples))
    with pytest.raises(ValueError, match="same length"):
        tq_client.KVBatchMeta(keys=keys, partition_id=partition)  # tags are required, one per key
    meta = tq_client.KVBatchMeta(keys=keys, tags=[{} for _ in keys], partition_id=partition, fields=["responses"])
    got = tq_client.kv_batch_get_by_meta(meta)
    assert list(got.keys()) == ["responses"]
    assert_same_batch(got, wire_batch([{"responses": s["responses"]} for s in samples]))


def test_async_api_matches_sync(tq_client, partition):
    samples = CASES["mrope_ragged_seq"]
    keys = keys_for(len(samples))

    async def go():
        await tq_client.async_kv_batch_put(keys, partition, fields=to_tq_fields(samples))
        got = await tq_client.async_kv_batch_get(keys, partition)
        listed = await tq_client.async_kv_list(partition)
        return got, listed

    got, listed = asyncio.run(asyncio.wait_for(go(), 60))
    assert_same_batch(got, wire_batch(samples))
    assert sorted(listed[partition]) == keys


def test_kv_clear_removes_keys(tq_client, partition):
    tq_client.kv_batch_put(["a", "b"], partition, fields=to_tq_fields([{"x": torch.ones(1)}, {"x": torch.ones(2)}]))
    tq_client.kv_clear(["a", "missing"], partition)
    assert list(tq_client.kv_list(partition)[partition]) == ["b"]


@pytest.mark.parametrize(("num_cpus", "units"), [(1, 1), (2, 2)])
def test_too_few_cpus_fail_fast_with_a_clear_error(num_cpus, units):
    start = time.monotonic()
    expected = rf"num_cpus={num_cpus} is too small.*reserve {units + 1} CPUs"
    with (
        pytest.raises(TransferQueueStartError, match=expected),
        start_local_transfer_queue(num_cpus=num_cpus, storage_units=units),
    ):
        pass
    assert time.monotonic() - start < 1.0
    assert TransferQueueStartError.__module__ == "trajschema"
    assert issubclass(TransferQueueStartError, RuntimeError)
