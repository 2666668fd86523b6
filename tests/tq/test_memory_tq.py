"""MemoryTransferQueue on its own: a reference model, threads, pickling, its own KVBatchMeta, malformed input.

What it shares with the real TransferQueue is held by tests/integration/test_tq_contract.py;
these tests need neither Ray nor TransferQueue.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import inspect
import pickle
import subprocess
import sys
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import NonTensorStack, TensorDict

import trajschema as ts
import trajschema.tq.memory as memory_tq
from trajschema.testing import MemoryTransferQueue, verl_sample
from trajschema.tq.memory import _KVBatchMeta
from trajschema.tq.wire import to_tq_fields, wire_batch

EOS = 2


def one_field(value: int, field: str = "x") -> TensorDict:
    return TensorDict({field: torch.full((1, 2), value)}, batch_size=[1])


# ---------------------------------------------------------------------------------
# A random sequence of operations against a plain-dict reference

KEYS = st.sampled_from(["a", "b", "c", "d"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.lists(KEYS, min_size=1, max_size=4), st.sampled_from(["x", "y"])),
        st.tuples(st.just("tag"), st.lists(KEYS, min_size=1, max_size=4), st.sampled_from(["s", "t"])),
        st.tuples(st.just("clear"), st.lists(KEYS, min_size=1, max_size=3), st.none()),
    ),
    max_size=12,
)


def reference_apply(ref: dict, op: str, keys: list[str], name, step: int) -> None:
    """The documented semantics, as simply as possible: {key: (fields, tags)}."""
    if op == "clear":
        for k in keys:
            ref.pop(k, None)
        return
    last = {k: i for i, k in enumerate(keys)}
    for k in keys:
        ref.setdefault(k, ({}, {}))
    for k, i in last.items():
        fields, tags = ref[k]
        if op == "put":
            fields[name] = step * 10 + i
        else:
            tags[name] = step * 10 + i


def run_op(tq: MemoryTransferQueue, op: str, keys: list[str], name, step: int) -> None:
    if op == "put":
        values = torch.tensor([step * 10 + i for i in range(len(keys))])
        tq.kv_batch_put(keys, "p", fields=TensorDict({name: values}, batch_size=[len(keys)]))
    elif op == "tag":
        tq.kv_batch_put(keys, "p", tags=[{name: step * 10 + i} for i in range(len(keys))])
    else:
        tq.kv_clear(keys, "p")


@settings(deadline=None)
@given(OPS)
def test_random_operations_match_a_reference_model(ops):
    tq = MemoryTransferQueue()
    ref: dict = {}
    for step, (op, keys, name) in enumerate(ops):
        if len(set(keys)) != len(keys) and op != "clear":
            with pytest.raises(ValueError, match="repeat"):
                run_op(tq, op, keys, name, step)
        else:
            run_op(tq, op, keys, name, step)
        reference_apply(ref, op, keys, name, step)
        assert tq.kv_list("p").get("p", {}) == {k: tags for k, (_, tags) in ref.items()}
        for k, (fields, _) in ref.items():
            if fields:
                got = tq.kv_batch_get([k], "p")
                assert {n: got[n].item() for n in got.keys()} == fields
            else:
                with pytest.raises(ValueError, match="no field in common"):
                    tq.kv_batch_get([k], "p")


# ---------------------------------------------------------------------------------
# Threads, pickling, async


def test_threads_putting_and_reading_at_once_lose_nothing():
    tq = MemoryTransferQueue()
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for i in range(50):
                tq.kv_batch_put([f"{t}-{i}"], "p", fields=one_field(i), tags=[{"t": t}])
                tq.kv_batch_put([f"{t}-{i}"], "p", tags=[{"i": i}])
                assert tq.kv_batch_get([f"{t}-{i}"], "p")["x"].values().tolist() == [i, i]
                tq.kv_list()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert errors == []
    listing = tq.kv_list("p")["p"]
    assert listing == {f"{t}-{i}": {"t": t, "i": i} for t in range(6) for i in range(50)}


def test_a_used_client_pickles_with_its_data_and_stays_usable():
    tq = MemoryTransferQueue()
    sample = verl_sample("vlm_mrope_moe", 4, 3, layers=2, topk=2)
    tq.kv_batch_put(["a"], "p", fields=to_tq_fields([sample]), tags=[{"i": 1}])
    clone = pickle.loads(pickle.dumps(tq))
    assert clone.kv_list() == tq.kv_list() == {"p": {"a": {"i": 1}}}
    clone.kv_batch_put(["b"], "p", tags=[{}])
    assert list(tq.kv_list("p")["p"]) == ["a"] and list(clone.kv_list("p")["p"]) == ["a", "b"]
    assert repr(clone) == "<MemoryTransferQueue partitions={'p': 2}>"


def test_async_calls_are_coroutines():
    tq = MemoryTransferQueue()
    coro = tq.async_kv_list()
    assert asyncio.iscoroutine(coro)
    assert asyncio.run(coro) == {}


# ---------------------------------------------------------------------------------
# Its own KVBatchMeta, without TransferQueue


def test_the_fallback_kv_batch_meta_has_the_same_fields_and_checks():
    names = [f.name for f in dataclasses.fields(_KVBatchMeta)]
    assert names == ["keys", "tags", "partition_id", "fields", "extra_info"]
    meta = _KVBatchMeta(keys=["a", "b"], tags=[{"x": [1]}, {}], partition_id="p")
    assert (meta.size, len(meta), meta.fields, meta.extra_info) == (2, 2, None, {})
    for kwargs in (
        {"keys": ["a"]},
        {"keys": ["a", "a"], "tags": [{}, {}]},
        {"keys": ["a"], "tags": [{}], "fields": ["x", "x"]},
    ):
        with pytest.raises(ValueError):
            _KVBatchMeta(**kwargs)
    tags = [{"x": [1]}]
    assert _KVBatchMeta(keys=["a"], tags=tags).tags[0]["x"] is not tags[0]["x"]
    tq_meta = pytest.importorskip("transfer_queue").KVBatchMeta
    assert [f.name for f in dataclasses.fields(tq_meta)] == names
    assert MemoryTransferQueue.KVBatchMeta is tq_meta


def test_writer_and_upsample_work_with_the_fallback_meta(monkeypatch):
    """What a machine without the ``tq`` extra runs: the fake returns its own KVBatchMeta."""
    import trajschema.verl as tv

    monkeypatch.setattr(memory_tq, "KVBatchMeta", _KVBatchMeta)
    tq = MemoryTransferQueue()
    schema = ts.load_schema("text")
    samples = [verl_sample(schema, 3 + i, 2, uid=f"q{i}", seed=i) for i in range(3)]
    writer = ts.TransferQueueWriter(schema, partition_id="p", eos_token_id=EOS, client=tq)
    meta = writer.put(["k0", "k1", "k2"], samples)
    assert type(meta) is _KVBatchMeta
    padded = writer.pad_to_multiple(meta, 4)
    assert type(padded) is _KVBatchMeta and len(padded.keys) == 4 and padded.tags[-1]["is_padding"] is True
    padded8 = tv.upsample_batch_to_divisible_size(padded, 8, EOS, client=tq)
    batch = tq.kv_batch_get(padded8.keys, "p")
    schema.validate_batch(batch, tags=padded8.tags)
    ts.check_padding_contract(batch, padded8.tags, schema)


# ---------------------------------------------------------------------------------
# Malformed input and odd values


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda tq: tq.kv_batch_put(["a"], "p", fields={"x": torch.ones(1)}), TypeError, "TensorDict"),
        (lambda tq: tq.kv_batch_put("a", "p", tags=[{}]), TypeError, "list of str"),
        (lambda tq: tq.kv_batch_put(None, "p", tags=[{}]), TypeError, "keys must be"),
        (
            lambda tq: tq.kv_batch_put(["a"], "p", fields=TensorDict({"x": torch.ones(1, 2)}, batch_size=[1, 2])),
            ValueError,
            "one batch dim",
        ),
        (lambda tq: tq.kv_batch_put(["a"], "p", tags={"x": 1}), ValueError, "one dict per key"),
        (lambda tq: tq.kv_batch_get([], "p"), ValueError, "empty"),
        (lambda tq: tq.kv_batch_get(["a"], "p", select_fields=3), TypeError, "select_fields"),
        (lambda tq: tq.kv_batch_get_by_meta(_KVBatchMeta(keys=["a"], tags=[{}])), ValueError, "partition_id"),
    ],
)
def test_malformed_calls_raise_typed_errors_naming_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call(MemoryTransferQueue())


def test_meta_tensors_cannot_be_stored():
    tq = MemoryTransferQueue()
    fields = TensorDict({"x": torch.empty(1, 3, device="meta")}, batch_size=[1])
    with pytest.raises(RuntimeError, match="meta tensor"):
        tq.kv_batch_put(["a"], "p", fields=fields)


def test_stored_tensors_are_detached_contiguous_copies():
    tq = MemoryTransferQueue()
    base = torch.arange(12.0).reshape(3, 4).t().requires_grad_(False)
    leaf = torch.ones(4, 2, requires_grad=True)
    tq.kv_batch_put(["a", "b", "c", "d"], "p", fields=TensorDict({"nc": base, "g": leaf * 2}, batch_size=[4]))
    got = tq.kv_batch_get(["a", "c"], "p")
    assert got["nc"].values().tolist() == [0.0, 4.0, 8.0, 2.0, 6.0, 10.0]
    assert not got["g"].requires_grad


def test_self_referential_and_odd_values_copy_like_a_pickle():
    tq = MemoryTransferQueue()
    loop: list = [1]
    loop.append(loop)
    fields = TensorDict({"o": NonTensorStack(loop, bytearray(b"x"), 2**70)}, batch_size=[3])
    tq.kv_batch_put(["a", "b", "c"], "p", fields=fields)
    back = tq.kv_batch_get(["a", "b", "c"], "p").get("o").tolist()
    assert back[0][1] is back[0] and back[0] is not loop
    assert back[1:] == [b"x", 2**70]


def test_data_parser_sees_batched_values_and_may_change_them():
    tq = MemoryTransferQueue()
    seen = {}

    def parser(batch: dict) -> None:
        seen.update({k: type(v).__name__ for k, v in batch.items()})
        batch["url"][:] = [u.upper() for u in batch["url"]]

    samples = [{"url": "a", "x": torch.arange(2)}, {"url": "b", "x": torch.arange(3)}]
    fields = to_tq_fields(samples)
    fields["d"] = torch.tensor([1, 2])
    tq.kv_batch_put(["a", "b"], "p", fields=fields, data_parser=parser)
    assert seen == {"d": "Tensor", "url": "list", "x": "list"}
    assert tq.kv_batch_get(["a", "b"], "p").get("url").tolist() == ["A", "B"]


def test_empty_and_zero_length_values_read_like_tq_layout():
    tq = MemoryTransferQueue()
    samples = [
        {"r": torch.zeros(0, dtype=torch.bfloat16), "m": {}},
        {"r": torch.ones(2, dtype=torch.bfloat16), "m": {}},
    ]
    tq.kv_batch_put(["a", "b"], "p", fields=to_tq_fields(copy.deepcopy(samples)))
    got = tq.kv_batch_get(["a", "b"], "p")
    want = wire_batch(samples)
    assert got["r"].offsets().tolist() == want["r"].offsets().tolist() == [0, 0, 2]
    assert got.get("m").tolist() == [{}, {}]


# ---------------------------------------------------------------------------------
# The same API as the transfer_queue module

API = [
    "kv_batch_put",
    "kv_batch_get",
    "kv_batch_get_by_meta",
    "kv_list",
    "kv_clear",
    "async_kv_batch_put",
    "async_kv_batch_get",
    "async_kv_batch_get_by_meta",
    "async_kv_list",
    "async_kv_clear",
]


@pytest.mark.parametrize("name", API)
def test_signatures_match_transfer_queue(name):
    tq_module = pytest.importorskip("transfer_queue")
    theirs = inspect.signature(getattr(tq_module, name)).parameters.values()
    ours = inspect.signature(getattr(MemoryTransferQueue(), name)).parameters.values()
    assert [(p.name, p.kind, p.default) for p in ours] == [(p.name, p.kind, p.default) for p in theirs]
    assert inspect.iscoroutinefunction(getattr(MemoryTransferQueue, name)) == name.startswith("async_")


def test_works_without_transfer_queue_installed():
    # An interpreter of its own, not one of the import claims of tests/test_public_api.py: the
    # in-memory TransferQueue must be imported fresh under the poison, and that interpreter has
    # imported it already (and this one uses it, too).
    code = """
import sys
sys.modules["transfer_queue"] = None  # import transfer_queue now raises ImportError
from trajschema.testing import MemoryTransferQueue
from trajschema.tq.memory import _KVBatchMeta
from tensordict import TensorDict
import torch
tq = MemoryTransferQueue()
meta = tq.kv_batch_put(["a"], "p", fields=TensorDict({"x": torch.ones(1, 2)}, batch_size=[1]))
assert type(meta) is _KVBatchMeta and MemoryTransferQueue.KVBatchMeta is _KVBatchMeta, type(meta)
assert "ray" not in sys.modules
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
