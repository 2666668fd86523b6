"""trajschema.verl.upsample_batch_to_divisible_size on a real local TransferQueue (verl itself not needed)."""

from __future__ import annotations

import threading

import pytest
import torch

import trajschema as ts
import trajschema.verl as tv
from trajschema.testing import verl_sample

pytestmark = pytest.mark.tq

EOS = 2
VERL_TAGS = {"status": "finished", "global_steps": 3, "min_global_steps": 2, "max_global_steps": 3}


def written(tq, partition, schema_name="vlm_mrope_moe", n=5):
    schema = ts.load_schema(schema_name)
    keys = [f"q{i // 2}_{i % 2}_0" for i in range(n)]
    samples = [verl_sample(schema, 4 + i, 2 + i, uid=f"q{i // 2}", layers=3, topk=2, seed=i) for i in range(n)]
    writer = ts.TransferQueueWriter(schema, partition_id=partition, eos_token_id=EOS, client=tq)
    return writer.put(keys, samples, [dict(VERL_TAGS) for _ in keys]), samples


def stored_keys(tq, partition):
    return list(tq.kv_list(partition).get(partition, {}))


def test_pads_with_the_schema_picked_from_the_first_real_sample(tq_client, partition):
    meta, _ = written(tq_client, partition)
    padded = tv.upsample_batch_to_divisible_size(meta, 8, EOS)
    assert len(padded.keys) == 8 and padded.keys[:5] == meta.keys
    back = tq_client.kv_batch_get(padded.keys, partition)
    ts.load_schema("vlm_mrope_moe").validate_batch(back, tags=padded.tags)
    ts.check_padding_contract(back, padded.tags, "vlm_mrope_moe")
    pad_tags = padded.tags[5:]
    assert all(t["is_padding"] and t["seq_len"] == 128 and t["min_global_steps"] == 2 for t in pad_tags)
    assert all(t["status"] == "finished" and t["global_steps"] == 3 for t in pad_tags)
    # routed_experts of the padding is per token, at the padding's own length (never the reference's).
    assert all(row.shape[0] == 128 for row in back["routed_experts"].unbind()[5:])


def test_a_batch_already_a_multiple_is_returned_as_is(tq_client, partition):
    meta, _ = written(tq_client, partition, n=4)
    assert tv.upsample_batch_to_divisible_size(meta, 4, EOS) is meta
    assert len(stored_keys(tq_client, partition)) == 4


class _Recording:
    """The real client, recording the keys each ``kv_batch_get`` asks for."""

    def __init__(self, tq):
        self.tq, self.reads = tq, []

    def __getattr__(self, name):
        return getattr(self.tq, name)

    def kv_batch_get(self, *args, **kwargs):
        self.reads.append(list(kwargs.get("keys", args[0] if args else [])))
        return self.tq.kv_batch_get(*args, **kwargs)


def test_exactly_one_sample_is_read_the_first_real_one_never_a_padding_one(tq_client, partition):
    meta, _ = written(tq_client, partition)
    padded = tv.upsample_batch_to_divisible_size(meta, 6, EOS, dims={"prompt": 31, "response": 1})
    flipped = tq_client.KVBatchMeta(
        keys=padded.keys[5:] + padded.keys[:5], tags=padded.tags[5:] + padded.tags[:5], partition_id=partition
    )
    client = _Recording(tq_client)
    again = tv.upsample_batch_to_divisible_size(flipped, 8, EOS, client=client)
    assert client.reads == [[meta.keys[0]]]
    assert len(again.keys) == 8 and {t["seq_len"] for t in again.tags[6:]} == {128}


def test_an_all_padding_batch_is_refused_and_nothing_is_written(tq_client, partition):
    meta, _ = written(tq_client, partition, n=3)
    padded = tv.upsample_batch_to_divisible_size(meta, 4, EOS)
    only_padding = tq_client.KVBatchMeta(keys=padded.keys[3:], tags=padded.tags[3:], partition_id=partition)
    before = stored_keys(tq_client, partition)
    with pytest.raises(ValueError, match="no real one"):
        tv.upsample_batch_to_divisible_size(only_padding, 4, EOS)
    assert stored_keys(tq_client, partition) == before


def test_a_meta_naming_a_subset_of_the_stored_fields(tq_client, partition):
    meta, samples = written(tq_client, partition, schema_name="text")
    narrowed = tq_client.KVBatchMeta(keys=meta.keys, tags=meta.tags, partition_id=partition, fields=["responses"])
    padded = tv.upsample_batch_to_divisible_size(narrowed, 8, EOS)
    assert padded.fields == ["responses"]
    assert set(tq_client.kv_batch_get(padded.keys, partition).keys()) == set(samples[0])


def test_the_wrong_schema_is_an_error_that_writes_nothing(tq_client, partition):
    meta, _ = written(tq_client, partition)
    with pytest.raises(ts.SchemaError):
        tv.upsample_batch_to_divisible_size(meta, 8, EOS, schema=ts.load_schema("text"))
    assert len(stored_keys(tq_client, partition)) == 5


@pytest.mark.parametrize("multiple", [0, -3, 2.0, True, "8"])
def test_a_bad_multiple_is_a_value_error(tq_client, partition, multiple):
    meta, _ = written(tq_client, partition, n=1)
    with pytest.raises(ValueError, match="batch_multiple"):
        tv.upsample_batch_to_divisible_size(meta, multiple, EOS)


def test_a_bad_eos_writes_nothing(tq_client, partition):
    meta, _ = written(tq_client, partition, n=3)
    with pytest.raises(ValueError, match="eos_token_id"):
        tv.upsample_batch_to_divisible_size(meta, 4, -1)
    assert len(stored_keys(tq_client, partition)) == 3


class _Hung:
    """A TransferQueue client whose reads never return (fault injection)."""

    def __init__(self):
        self.release = threading.Event()

    def kv_batch_get(self, **_):
        self.release.wait(30)
        raise RuntimeError("released")


def test_a_hung_read_times_out(tq_client, partition):
    meta, _ = written(tq_client, partition, n=3)
    hung = _Hung()
    try:
        with pytest.raises(TimeoutError, match="kv_batch_get"):
            tv.upsample_batch_to_divisible_size(meta, 4, EOS, client=hung, timeout_s=0.5)
    finally:
        hung.release.set()


def test_a_batch_without_a_partition_is_refused(tq_client):
    meta = tq_client.KVBatchMeta(keys=["a_0_0"], tags=[{}], partition_id=None)
    with pytest.raises(ValueError, match="partition_id"):
        tv.upsample_batch_to_divisible_size(meta, 2, EOS)


def test_padding_tensors_stay_on_the_reference_device(tq_client, partition):
    meta, _ = written(tq_client, partition, n=3)
    padded = tv.upsample_batch_to_divisible_size(meta, 4, EOS)
    back = tq_client.kv_batch_get(padded.keys[3:], partition)
    assert all(v.device == torch.device("cpu") for v in back.values() if isinstance(v, torch.Tensor))


@pytest.mark.parametrize("batch", [[], {"keys": ["a"]}, None], ids=["list", "dict", "None"])
def test_a_batch_that_is_not_a_kv_batch_meta_is_a_type_error(batch):
    with pytest.raises(TypeError, match="KVBatchMeta"):
        tv.upsample_batch_to_divisible_size(batch, 2, EOS)


def test_a_non_bool_is_padding_tag_is_a_type_error_that_writes_nothing(tq_client, partition):
    meta, _ = written(tq_client, partition, n=3)
    bad = tq_client.KVBatchMeta(keys=meta.keys, tags=[{"is_padding": "false"}, *meta.tags[1:]], partition_id=partition)
    with pytest.raises(TypeError, match="is_padding"):
        tv.upsample_batch_to_divisible_size(bad, 4, EOS)
    assert len(stored_keys(tq_client, partition)) == 3


def test_padding_routes_spread_over_the_real_samples_experts(tq_client, partition):
    """A schema with pad: {spread: experts} and nothing pinned: the first real sample's largest id + 1 (issue 16)."""
    schema = ts.schema_from_dict(
        {
            "name": "moe_spread",
            "extends": ["vlm_mrope_moe"],
            "dims": {"experts": {"min": 1}},
            "fields": {
                "routed_experts": {
                    "shape": ["seq", "layers", "topk"],
                    "dtype": ["int16", "int32", "int64"],
                    "min": 0,
                    "max": "experts - 1",
                    "pad": {"spread": "experts"},
                }
            },
        }
    )
    keys = [f"q{i}_0_0" for i in range(3)]
    samples = [verl_sample(schema, 4 + i, 2 + i, uid=f"q{i}", layers=3, topk=2, seed=i) for i in range(3)]
    for s in samples:  # 10 experts, the largest used
        n = s["routed_experts"].shape[0]
        s["routed_experts"] = (torch.arange(n * 3 * 2).view(n, 3, 2) % 10).to(s["routed_experts"].dtype)
    writer = ts.TransferQueueWriter(schema, partition_id=partition, eos_token_id=EOS, client=tq_client)
    meta = writer.put(keys, samples, [dict(VERL_TAGS) for _ in keys])
    padded = tv.upsample_batch_to_divisible_size(meta, 8, EOS, schema=schema)
    back = tq_client.kv_batch_get(padded.keys, partition)
    schema.with_dims({"experts": 10}).validate_batch(back, tags=padded.tags)
    routes = torch.stack(back["routed_experts"].unbind()[3:])  # 5 padding rows x 128 tokens x 3 layers x 2
    assert int(routes.max()) == 9 and (routes[..., 0] != routes[..., 1]).all()
    for layer in range(3):
        assert torch.bincount(routes[:, :, layer].flatten().long(), minlength=10).tolist() == [128] * 10
