"""trajschema.verl.upsample_batch_to_divisible_size without Ray: every argument is checked before anything is read.

Against a real TransferQueue and verl's own function as the oracle: ``tests/integration/test_verl_upsample.py``.
"""

from __future__ import annotations

import dataclasses
import math
import types

import pytest

import trajschema as ts
from trajschema.testing import MemoryTransferQueue, verl_sample
from trajschema.verl import upsample_batch_to_divisible_size

TEXT = ts.load_schema("text")


class _Recording(MemoryTransferQueue):
    """The in-memory TransferQueue, counting every call made after the batch was written."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __getattribute__(self, name):
        if name.startswith(("kv_", "async_kv_")):
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)


def _batch():
    client = _Recording()
    writer = ts.TransferQueueWriter(TEXT, partition_id="p", eos_token_id=2, client=client)
    meta = writer.put(["a", "b", "c"], [verl_sample(TEXT, 3, 2 + i, seed=i) for i in range(3)])
    client.calls.clear()
    return client, meta


def _short_tags(meta):
    bad = dataclasses.replace(meta)
    bad.tags = bad.tags[:2]
    return bad


BAD = [
    ("multiple-zero", lambda m: {"batch_multiple": 0}, ValueError, "batch_multiple"),
    ("multiple-bool", lambda m: {"batch_multiple": True}, ValueError, "batch_multiple"),
    ("eos-negative", lambda m: {"eos_token_id": -1}, ValueError, "eos_token_id"),
    ("eos-str", lambda m: {"eos_token_id": "2"}, ValueError, "eos_token_id"),
    ("timeout-nan", lambda m: {"timeout_s": math.nan}, ValueError, "timeout_s"),
    ("timeout-zero", lambda m: {"timeout_s": 0}, ValueError, "timeout_s"),
    ("timeout-negative", lambda m: {"timeout_s": -5}, ValueError, "timeout_s"),
    ("timeout-bool", lambda m: {"timeout_s": True}, ValueError, "timeout_s"),
    ("schema-name", lambda m: {"schema": "text"}, TypeError, "schema must be"),
    ("batch-none", lambda m: {"batch": None}, TypeError, "batch must be a KVBatchMeta"),
    (
        "batch-namespace",
        lambda m: {"batch": types.SimpleNamespace(keys=m.keys, tags=m.tags, partition_id="p")},
        TypeError,
        "batch must be a KVBatchMeta",
    ),
    ("tags-short", lambda m: {"batch": _short_tags(m)}, ValueError, "one tag dict per key"),
]


@pytest.mark.parametrize(("change", "exc", "match"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_arguments_are_refused_before_any_call(change, exc, match):
    client, meta = _batch()
    args = {"batch": meta, "batch_multiple": 4, "eos_token_id": 2, "client": client, "timeout_s": 5, **change(meta)}
    with pytest.raises(exc, match=match):
        upsample_batch_to_divisible_size(
            args.pop("batch"), args.pop("batch_multiple"), args.pop("eos_token_id"), **args
        )
    assert client.calls == []


def test_good_arguments_pad():
    client, meta = _batch()
    out = upsample_batch_to_divisible_size(meta, 4, 2, client=client, timeout_s=5)
    assert len(out.keys) == 4 and out.tags[-1]["is_padding"] is True
