"""A trainer step end to end on a real Ray + TransferQueue: rollout workers write, the driver pads and trains.

verl's agent-loop workers are Ray actors that attach to the trainer's TransferQueue and
put their prompts' trajectories into one partition; the trainer then reads the whole
batch, grows it to the multiple a PPO/GRPO step needs, computes advantages, the loss and
metrics. These tests run that flow with real actors and check that the padding is inert:
it passes the schema and the is_padding contract, leaves every real sample's advantage
and the loss bit for bit unchanged, and never dilutes a metric.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import zlib
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest
import torch

import trajschema as ts
from trajschema.testing import verl_sample

ray = pytest.importorskip("ray")
KVBatchMeta = pytest.importorskip("transfer_queue").KVBatchMeta

pytestmark = pytest.mark.tq

# Ray workers cannot import this test module (pytest puts the repository root on the
# driver's sys.path only), so the actor class and the helpers it calls travel by value.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

EOS = 2
TIMEOUT_S = 120
#: How TransferQueue 0.1.11 names its controller actor (what ``transfer_queue.init()`` attaches to).
CONTROLLER = ("TransferQueueController", "transfer_queue")
#: verl's ``upsample_batch_to_divisible_size`` for 2 ranks, actor mini-batches of 15 prompts × 8.
VERL_MULTIPLE = ts.required_multiple(2, actor_mini_batch_size=15, rollout_n=8)


def rollout(schema: ts.Schema, prompts: Sequence[tuple[str, Sequence[int]]], salt: str = "") -> tuple[list, list]:
    """Keys ``{uid}_{session}_{index}`` and verl-shaped samples of whole GRPO groups.

    ``prompts`` holds ``(uid, trajectories per session)``: a session (one of the
    ``rollout_n`` answers) may end in several trajectories, as multi-turn agent loops do.
    Lengths, token ids and the outcome score (the last ``rm_scores`` token, in quarters)
    follow from the key alone, so any process rebuilds the very same samples.
    """
    keys, samples = [], []
    for uid, sessions in prompts:
        for session, trajectories in enumerate(sessions):
            for index in range(trajectories):
                key = f"{uid}_{session}_{index}"
                h = zlib.crc32(f"{salt}{key}".encode())  # unlike hash(), the same in every process
                s = verl_sample(schema, 1 + h % 4, 1 + (h >> 4) % 6, uid=uid, seed=h % 10_000)
                s["session_id"] = session
                s["rm_scores"][-1] = ((h >> 8) % 5) / 4
                keys.append(key)
                samples.append(s)
    return keys, samples


def uneven_prompts(first: int, count: int) -> list[tuple[str, list[int]]]:
    """``count`` prompts of up to 8 sessions; some sessions failed, some left 2 or 3 trajectories."""
    prompts = []
    for i in range(first, first + count):
        sessions = [1 + ((i + s) % 4 == 0) + (i == s) for s in range(8 - i % 3)]
        prompts.append((f"q{i}", sessions))
    return prompts


@ray.remote(num_cpus=0)  # the TransferQueue controller and storage unit hold both CPUs of the session's Ray
class RolloutWorker:
    """A rollout worker in its own process, attached to the driver's TransferQueue, writing one partition."""

    def __init__(self, schema_name: str, partition: str) -> None:
        import transfer_queue as tq

        # Without a controller to attach to, tq.init() would start a second TransferQueue
        # that waits forever for CPUs: fail at once instead (ValueError).
        ray.get_actor(CONTROLLER[0], namespace=CONTROLLER[1])
        tq.init()
        self.schema = ts.load_schema(schema_name)
        self.writer = ts.TransferQueueWriter(self.schema, partition_id=partition, eos_token_id=EOS)

    def pid(self) -> int:
        return os.getpid()

    def write(self, prompts: list[tuple[str, list[int]]], salt: str = "") -> list[str]:
        """One put per prompt, in turn; the keys written."""
        written = []
        for prompt in prompts:
            keys, samples = rollout(self.schema, [prompt], salt)
            written += self.writer.put(keys, samples).keys
        return written

    def write_in_event_loop(self, prompts: list[tuple[str, list[int]]], salt: str = "") -> list[str]:
        """One ``async_put`` per prompt, all in flight at once on an ``asyncio.run`` loop; the keys written."""

        async def main() -> list[str]:
            puts = [rollout(self.schema, [prompt], salt) for prompt in prompts]
            metas = await asyncio.gather(*(self.writer.async_put(keys, samples) for keys, samples in puts))
            return [k for meta in metas for k in meta.keys]

        return asyncio.run(main())


@pytest.fixture
def start_workers(tq_client, partition):
    """Start ``RolloutWorker`` actors for the test's partition; ``ray.kill`` the ones still alive afterwards."""
    started = []

    def start(schema_name: str, n: int) -> list[Any]:
        workers = [RolloutWorker.remote(schema_name, partition) for _ in range(n)]
        started.extend(workers)
        pids = ray.get([w.pid.remote() for w in workers], timeout=TIMEOUT_S)
        assert len({*pids, os.getpid()}) == n + 1  # each in a process of its own
        return workers

    yield start
    for worker in started:
        # Never tq.close() in an attached process: it kills the shared controller.
        with contextlib.suppress(Exception):
            ray.kill(worker)


def stored(tq, partition: str) -> dict:
    """``{key: tags}`` of everything in the partition, in creation order."""
    return tq.kv_list(partition).get(partition, {})


def assert_holds(batch, keys: list[str], samples: list[dict]) -> None:
    """The batch's first rows are ``samples`` (every tensor field, uid and session), bit for bit."""
    assert batch.batch_size[0] >= len(samples)
    for name in samples[0]:
        col = batch.get(name)
        if isinstance(col, torch.Tensor):
            got = col.unbind(0)
            for i, s in enumerate(samples):
                assert got[i].dtype == s[name].dtype and torch.equal(got[i], s[name]), (keys[i], name)
        elif name in ("uid", "session_id"):
            assert col.tolist()[: len(samples)] == [s[name] for s in samples], name


# ---------------------------------------------------------------------------------
# rollout workers -> one partition -> the driver pads


def test_two_rollout_workers_write_one_partition_and_the_driver_pads_it(tq_client, partition, start_workers):
    schema = ts.load_schema("vlm_mrope_moe")
    prompts = {"sync": uneven_prompts(0, 5), "event_loop": uneven_prompts(5, 6)}
    expected = {mode: rollout(schema, p) for mode, p in prompts.items()}
    n = sum(len(keys) for keys, _ in expected.values())
    assert 0 < n < VERL_MULTIPLE  # 104 real samples: 16 padding samples are needed

    sync_worker, loop_worker = start_workers("vlm_mrope_moe", 2)
    written = ray.get(
        [sync_worker.write.remote(prompts["sync"]), loop_worker.write_in_event_loop.remote(prompts["event_loop"])],
        timeout=TIMEOUT_S,
    )
    assert [sorted(w) for w in written] == [sorted(expected[m][0]) for m in ("sync", "event_loop")]

    listing = stored(tq_client, partition)
    assert set(listing) == {k for keys, _ in expected.values() for k in keys}
    meta = KVBatchMeta(keys=list(listing), tags=list(listing.values()), partition_id=partition, fields=None)
    driver = ts.TransferQueueWriter(schema, partition_id=partition, eos_token_id=EOS, client=tq_client)
    padded = driver.pad_to_multiple(meta, VERL_MULTIPLE)

    assert len(padded.keys) == VERL_MULTIPLE and padded.keys[:n] == meta.keys
    assert stored(tq_client, partition) == dict(zip(padded.keys, padded.tags))
    batch = tq_client.kv_batch_get(padded.keys, partition)
    schema.validate_batch(batch, tags=padded.tags)
    ts.check_padding_contract(batch, padded.tags, schema)
    assert ts.real_count(padded.tags) == n
    assert ts.real_mask(padded.tags).tolist() == [True] * n + [False] * (VERL_MULTIPLE - n)
    by_key = {k: s for keys, samples in expected.values() for k, s in zip(keys, samples)}
    assert_holds(batch, padded.keys[:n], [by_key[k] for k in padded.keys[:n]])

    # Workers go away without tq.close(); the shared TransferQueue keeps serving the driver.
    for worker in (sync_worker, loop_worker):
        ray.kill(worker)
    assert ts.real_count(list(stored(tq_client, partition).values())) == n


def test_a_worker_cannot_overwrite_another_workers_sample_from_its_event_loop(tq_client, partition, start_workers):
    schema = ts.load_schema("text")
    first, second = start_workers("text", 2)
    theirs = uneven_prompts(0, 2)
    ray.get(first.write.remote(theirs), timeout=TIMEOUT_S)

    # Same uid, other rollouts (e.g. a uid counter per worker): TransferQueue would overwrite.
    with pytest.raises(ts.SchemaError, match="already in partition") as info:
        ray.get(second.write_in_event_loop.remote(theirs[1:], salt="other"), timeout=TIMEOUT_S)
    n_clash = len(rollout(schema, theirs[1:])[0])
    assert [(v.sample, v.code) for v in info.value.cause.violations] == [(i, "key") for i in range(n_clash)]

    ours = uneven_prompts(2, 2)
    ray.get(second.write_in_event_loop.remote(ours, salt="other"), timeout=TIMEOUT_S)
    keys, samples = rollout(schema, theirs)
    our_keys, our_samples = rollout(schema, ours, salt="other")
    listing = list(stored(tq_client, partition))
    # The refused put wrote nothing; the event loop's puts land in whatever order they finish.
    assert listing[: len(keys)] == keys and sorted(listing[len(keys) :]) == sorted(our_keys)
    batch = tq_client.kv_batch_get(keys + our_keys, partition)
    assert_holds(batch, keys + our_keys, samples + our_samples)


# ---------------------------------------------------------------------------------
# the trainer's side: advantages, loss and metrics on the padded batch


def grpo_advantages(batch, eps: float = 1e-6) -> torch.Tensor:
    """Per-sample outcome advantages as verl's ``compute_grpo_outcome_advantage`` (normalised by std)."""
    scores = torch.stack([r.sum() for r in batch["rm_scores"].unbind(0)])
    groups = defaultdict(list)
    # .get(...).tolist() is NonTensorStack.tolist() on every tensordict version; batch["uid"] is a
    # LinkedList, which has no .tolist() on tensordict 0.10.0.
    for i, uid in enumerate(batch.get("uid").tolist()):
        groups[uid].append(i)
    advantages = torch.empty_like(scores)
    for rows in groups.values():
        group = scores[rows]
        if len(rows) == 1:
            mean, std = torch.tensor(0.0), torch.tensor(1.0)
        else:
            mean, std = group.mean(), group.std()
        advantages[rows] = (group - mean) / (std + eps)
    return advantages


def token_mean_loss(batch) -> torch.Tensor:
    """verl's ``token-mean``: sum(per_token_loss * loss_mask) / sum(loss_mask) over the whole batch.

    The per-token loss comes from the token ids in sixteenths, which float32 sums exactly:
    the result cannot depend on the summation order (which changes with the batch length),
    only on what the padding adds to the numerator or the denominator.
    """
    per_token = (batch["responses"].values() % 16).float() / 16
    mask = batch["loss_mask"].values().float()
    return (per_token * mask).sum() / mask.sum()


def rollout_metrics(batch, tags) -> dict[str, float]:
    lengths = torch.tensor([len(r) for r in batch["responses"].unbind(0)], dtype=torch.float64)
    scores = torch.stack([r.sum() for r in batch["rm_scores"].unbind(0)]).double()
    return {
        "response_length/mean": lengths.mean().item(),
        "score/mean": scores.mean().item(),
        "samples": float(len(tags)),
    }


real_rollout_metrics = ts.exclude_padding(rollout_metrics)


def test_padding_changes_no_advantage_loss_or_metric(tq_client, partition):
    schema = ts.load_schema("text")
    keys, samples = rollout(schema, [("q0", [1, 2, 1, 1]), ("q1", [1]), ("q2", [2, 1, 3]), ("q3", [1, 1, 1])])
    truncated = keys.index("q2_0_1")  # a real sample the loss ignores but the metrics count
    samples[truncated]["loss_mask"] = torch.zeros_like(samples[truncated]["loss_mask"])
    multiple = ts.required_multiple(2, actor_mini_batch_size=5, rollout_n=4)  # 20: 5 padding samples
    writer = ts.TransferQueueWriter(schema, partition_id=partition, eos_token_id=EOS, client=tq_client)
    padded = writer.pad_to_multiple(writer.put(keys, samples), multiple)
    n = len(keys)
    assert len(padded.keys) == multiple and n < multiple

    batch = tq_client.kv_batch_get(padded.keys, partition)
    real = tq_client.kv_batch_get(keys, partition)
    schema.validate_batch(batch, tags=padded.tags)
    ts.check_padding_contract(batch, padded.tags, schema)
    real_tags = padded.tags[:n]

    # Padding has a GRPO group of its own and zero masks: real advantages and the loss are untouched.
    assert torch.equal(grpo_advantages(batch)[ts.real_mask(padded.tags)], grpo_advantages(real))
    alone = keys.index("q1_0_0")  # a group of one keeps its score: (score - 0) / (1 + eps)
    assert grpo_advantages(real)[alone] == samples[alone]["rm_scores"].sum() / (1 + 1e-6)
    assert torch.equal(token_mean_loss(batch), token_mean_loss(real))
    real_without_truncated = tq_client.kv_batch_get(keys[:truncated] + keys[truncated + 1 :], partition)
    assert torch.equal(token_mean_loss(real), token_mean_loss(real_without_truncated))

    # Metrics see the real samples only, the truncated one included ...
    metrics = real_rollout_metrics(batch, padded.tags)
    assert metrics == rollout_metrics(real, real_tags)
    assert metrics["samples"] == n
    kept = ts.select_real(batch, padded.tags)
    assert kept.batch_size[0] == n and kept.get("uid").tolist() == [s["uid"] for s in samples]
    assert kept["loss_mask"].unbind(0)[truncated].count_nonzero() == 0
    # ... while unfiltered, padding (1 response token, score 0) dilutes them.
    diluted = rollout_metrics(batch, padded.tags)
    assert diluted["samples"] == multiple
    assert diluted["response_length/mean"] < metrics["response_length/mean"]
    assert diluted["score/mean"] < metrics["score/mean"]

    pad_keys, pad_tags = padded.keys[n:], padded.tags[n:]
    only_padding = tq_client.kv_batch_get(pad_keys, partition)
    with pytest.warns(ts.PaddingOnlyBatchWarning, match=f"all {len(pad_keys)} samples of the batch are padding"):
        assert real_rollout_metrics(only_padding, pad_tags) == {}
    with pytest.warns(ts.PaddingOnlyBatchWarning):
        assert ts.select_real(only_padding, pad_tags) is None
