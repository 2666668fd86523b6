"""The writer against a TransferQueue with 4 storage units, the shape of a cluster deployment.

TransferQueue's SimpleStorage routes each sample to a storage unit by its global index
(``global_index % units``), so a put and a padding put of one batch land on several
units, and a read gathers them again. The job runs in a subprocess on a Ray of its own:
the test session may already hold a local Ray whose CPUs its TransferQueue reserves.
It reports what it saw as JSON; this test checks it, and that none of the processes it
started (Ray's) outlived it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

pytestmark = [pytest.mark.tq, pytest.mark.slow]

UNITS = 4
REAL = 45
MULTIPLE = 16  # 45 real samples grow to 48: 12 per unit
JOB_TIMEOUT_S = 240
EXIT_WAIT_S = 20

JOB = r'''
import asyncio
import json
import sys

import psutil
import torch

import trajschema as ts
from trajschema.testing import verl_sample

result_path, pids_path, units, real, multiple = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
schema = ts.load_schema("vlm_mrope_moe")
dims = {"layers": 4, "topk": 2}
samples = [verl_sample(schema, 3 + i % 11, 1 + i % 7, uid=f"q{i // 5}", seed=i, **dims) for i in range(real)]
keys = [f"q{i // 5}_{i % 5}_0" for i in range(real)]


def per_unit_keys(tq):
    """Keys each storage unit holds, asked of the units themselves (TransferQueue 0.1.11 internals)."""
    manager = tq.get_client().storage_manager

    async def probe():
        return [await manager._probe_storage_unit(target_storage_unit=u) for u in manager.storage_unit_infos]

    return [body["active_keys"] for body in asyncio.run(probe())]


with ts.start_local_transfer_queue(storage_units=units, timeout_s=120) as tq:
    with open(pids_path, "w") as f:  # Ray's processes, so the test can check they all ended
        json.dump([p.pid for p in psutil.Process().children(recursive=True)], f)
    writer = ts.TransferQueueWriter(schema, partition_id="cluster", eos_token_id=2, dims=dims, client=tq)
    meta = writer.put(keys, samples)
    meta = writer.pad_to_multiple(meta, multiple)
    batch = tq.kv_batch_get(meta.keys, "cluster")
    violations = schema.batch_violations(batch, tags=meta.tags, dims=dims)
    contract = ts.padding_contract_violations(batch, meta.tags, schema)
    stored = tq.kv_list("cluster")["cluster"]
    changed = [
        f"{name}[{i}]"
        for name in ("input_ids", "position_ids", "routed_experts", "loss_mask")
        for i, (got, sample) in enumerate(zip(batch[name].unbind(), samples))
        if got.dtype != sample[name].dtype or not torch.equal(got, sample[name])
    ]
    uids = batch["uid"]
    uids = uids.tolist() if hasattr(uids, "tolist") else list(uids)  # tensordict 0.10 gives a list
    result = {
        "keys": list(meta.keys),
        "rows": int(batch.batch_size[0]),
        "violations": [v.message for v in violations],
        "contract": [v.message for v in contract],
        "stored_is_padding": {k: t.get("is_padding") for k, t in stored.items()},
        "meta_is_padding": [t.get("is_padding") for t in meta.tags],
        "changed": changed,
        "real_uids_kept": uids[:real] == [s["uid"] for s in samples],
        "padding_uids": sorted(set(uids[real:])),
        "per_unit": per_unit_keys(tq),
    }
with open(result_path, "w") as f:
    json.dump(result, f)
'''


def _alive(pids: list[int]) -> list[int]:
    left = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.append(pid)
    return left


def _stop(proc: subprocess.Popen, pids: list[int]) -> None:
    """Kill the job's process group and any Ray process it recorded."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in _alive(pids):
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> dict:
    """Run the 4-unit job once; its JSON result, with ``left``: its processes still alive afterwards."""
    work = tmp_path_factory.mktemp("cluster")
    script, result, pids = work / "job.py", work / "result.json", work / "pids.json"
    script.write_text(JOB, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}  # a Ray of its own
    argv = [sys.executable, str(script), str(result), str(pids), str(UNITS), str(REAL), str(MULTIPLE)]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=JOB_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        recorded = json.loads(pids.read_text()) if pids.exists() else []
        _stop(proc, recorded)
        out, _ = proc.communicate()
        pytest.fail(f"the {UNITS}-unit job did not finish within {JOB_TIMEOUT_S}s:\n{out[-4000:]}")
    recorded = json.loads(pids.read_text()) if pids.exists() else []
    deadline = time.monotonic() + EXIT_WAIT_S
    while _alive(recorded) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = _alive(recorded)
    _stop(proc, left)  # never leave them running, even when the test fails
    assert proc.returncode == 0, f"the {UNITS}-unit job failed (exit {proc.returncode}):\n{out[-4000:]}"
    return {**json.loads(result.read_text()), "left": left, "recorded": recorded}


def test_job_started_and_stopped_ray(job):
    assert job["recorded"], "the job recorded no Ray process: did start_local_transfer_queue start a Ray?"
    assert job["left"] == [], f"processes the job started outlived it: {job['left']}"


def test_padded_batch_reads_back_whole_and_valid(job):
    total = REAL + (-REAL) % MULTIPLE
    assert len(job["keys"]) == job["rows"] == total
    assert job["violations"] == []
    assert job["contract"] == []
    assert job["changed"] == [], "real samples came back different from what was written"
    assert job["real_uids_kept"]
    assert len(job["padding_uids"]) == 1 and job["padding_uids"][0].startswith("pad")


def test_is_padding_tags_stored_and_returned(job):
    want = [False] * REAL + [True] * (len(job["keys"]) - REAL)
    assert job["meta_is_padding"] == want
    assert [job["stored_is_padding"][k] for k in job["keys"]] == want


def test_samples_landed_on_every_storage_unit(job):
    """Each unit reports the keys it holds; the padded batch is spread over all of them."""
    per_unit = job["per_unit"]
    assert len(per_unit) == UNITS
    assert sum(per_unit) == len(job["keys"])
    assert all(n > 0 for n in per_unit), f"keys per storage unit: {per_unit}"
