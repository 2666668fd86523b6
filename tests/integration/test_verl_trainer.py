"""verl 0.9.1's own trainer methods on a real local TransferQueue, with verl's padding and with ``install()``.

A stub ``PPOTrainer`` (verl's class, with the config, tokenizer and worker-group
attributes its methods read) runs verl's real ``_balance_batch``, ``_compute_advantage``
and ``_compute_metrics`` on rollout samples written as verl's agent loop writes them.
Three runs of the same samples, each in its own partition:

- *baseline*: the real samples alone, never padded (in the order the padded run sees them);
- *verl*: verl's own padding and metrics filter;
- *trajschema*: the same flow under ``trajschema.verl.install()``.

Under ``install()`` data metrics equal the baseline's, real advantages are bit-identical
to it, padding advantages are exact zeros, and timing/throughput stay verl's.
"""

from __future__ import annotations

import math
import uuid
import zlib
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import trajschema as ts
import trajschema.verl as tv
from tests.verl_support import verl_module
from trajschema.testing import verl_sample

pytestmark = [pytest.mark.tq, pytest.mark.verl]

EOS = 2
TIMING_RAW = {"step": 2.0, "gen": 0.5, "ref": 0.2, "adv": 0.1, "update_actor": 0.7}
TIMING_PREFIXES = (
    "timing_s/",
    "timing_per_token_ms/",
    "perf/total_num_tokens",
    "perf/time_per_step",
    "perf/throughput",
)
#: Registered estimators that run on CPU with no critic and no extra config.
CPU_ESTIMATORS = (
    "gpg",
    "grpo",
    "grpo_passk",
    "grpo_vectorized",
    "opo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "rloo",
    "rloo_vectorized",
)
#: The others, and what each needs that a CPU test without workers does not have.
NEEDS_MORE = {
    "gae": "a critic's values",
    "gdpo": "algorithm.gdpo_reward_keys and per-component rewards",
    "optimal_token_baseline": "sum_pi_squared from the actor's forward pass",
    "tir_optimal_token_baseline": "sum_pi_squared from the actor's forward pass",
    "remax": "reward_baselines from an extra greedy rollout",
}


@pytest.fixture(scope="module")
def tb():
    return verl_module("verl.trainer.ppo.v1.trainer_base")


@pytest.fixture
def partitions(tq_client):
    """A factory of fresh partition ids, all cleared after the test."""
    made: list[str] = []

    def new() -> str:
        made.append(f"verl-{uuid.uuid4().hex[:10]}")
        return made[-1]

    yield new
    for pid in made:
        keys = list(tq_client.kv_list(pid).get(pid, {}))
        if keys:
            tq_client.kv_clear(keys, pid)


@pytest.fixture(autouse=True)
def _never_left_installed():
    yield
    tv.uninstall()


def config(estimator: str = "grpo", loss_agg_mode: str = "token-mean", **actor: Any) -> Any:
    omegaconf = pytest.importorskip("omegaconf")
    return omegaconf.OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"n": 4, "moe_load_balance_metrics_interval": 0},
                "actor": {"ppo_mini_batch_size": 3, "loss_agg_mode": loss_agg_mode, "strategy": "fsdp", **actor},
                "model": {},
            },
            "critic": {"enable": False, "ppo_mini_batch_size": 3},
            "algorithm": {
                "adv_estimator": estimator,
                "gamma": 1.0,
                "lam": 1.0,
                "use_kl_in_reward": False,
                "norm_adv_by_std_in_grpo": True,
            },
            "trainer": {"critic_warmup": 0},
        }
    )


def trainer(tb, cfg) -> Any:
    """verl's PPOTrainer with exactly the attributes the tested methods read (no workers, no Ray actors)."""
    stub_cls = type("StubTrainer", (tb.PPOTrainer,), {m: lambda self: None for m in tb.PPOTrainer.__abstractmethods__})
    t = object.__new__(stub_cls)
    t.config = cfg
    t.global_steps = 1
    t.use_critic = False
    t.tokenizer = SimpleNamespace(eos_token_id=EOS)
    t.actor_rollout_wg = SimpleNamespace(_dispatch_info={"actor": [0, 0, 1, 1]})  # dp_size 2
    t.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 4)
    t._rollout_moe_lb_metrics_accumulator = None
    return t


def rollout(schema_name: str = "text", prompts: int = 5, seed: int = 0) -> tuple[list[str], list[dict], list[dict]]:
    """Keys ``{uid}_{session}_{index}``, samples and tags as verl's agent loop writes them (uneven trajectories)."""
    schema = ts.load_schema(schema_name)
    keys, samples, tags = [], [], []
    for p in range(prompts):
        uid = f"q{seed}x{p}"
        for session in range(4):
            for index in range(1 + (zlib.crc32(f"{uid}{session}".encode()) % 3 == 0)):
                key = f"{uid}_{session}_{index}"
                h = zlib.crc32(key.encode())
                prompt, response = 3 + h % 20, 1 + (h >> 5) % 9
                s = verl_sample(schema, prompt, response, uid=uid, seed=h % 10_000, layers=2, topk=2)
                s["session_id"] = session
                s["rm_scores"] = torch.zeros(response)
                s["rm_scores"][-1] = ((h >> 9) % 5) / 4
                keys.append(key)
                samples.append(s)
                tags.append({"status": "finished", "global_steps": 1, "min_global_steps": 0, "max_global_steps": 1})
    return keys, samples, tags


def write(tq, partition: str, keys, samples, tags) -> Any:
    writer = ts.TransferQueueWriter(
        ts.schema_for_sample(samples[0]), partition_id=partition, eos_token_id=EOS, client=tq
    )
    return writer.put(keys, samples, tags)


def step(t, meta, *, balance: bool) -> tuple[Any, dict[str, Any]]:
    """verl's own ``_balance_batch`` (optional), ``_compute_advantage`` and ``_compute_metrics`` of one step."""
    metrics: dict[str, Any] = {}
    if balance:
        meta = t._balance_batch(meta, metrics)
    meta = t._compute_advantage(meta, metrics)
    t._compute_metrics(meta, metrics, dict(TIMING_RAW), 1, 0)
    return meta, metrics


def baseline(tq, tb, cfg, partitions, order: list[str], by_key: dict) -> tuple[Any, dict[str, Any]]:
    """The never-padded run, with the real samples in ``order``."""
    pid = partitions()
    meta = write(tq, pid, order, [by_key[k][0] for k in order], [by_key[k][1] for k in order])
    return step(trainer(tb, cfg), meta, balance=False)


def real_keys(meta) -> list[str]:
    return [k for k, tag in zip(meta.keys, meta.tags, strict=True) if not ts.is_padding(tag)]


def is_data_metric(name: str) -> bool:
    return not name.startswith((*TIMING_PREFIXES, "padding/", "global_seqlen/"))


def same(a: Any, b: Any) -> bool:
    a, b = float(a), float(b)
    return a == b or (math.isnan(a) and math.isnan(b))


def advantages(tq, meta, keys: list[str]) -> list[torch.Tensor]:
    got = tq.kv_batch_get(keys=keys, partition_id=meta.partition_id, select_fields=["advantages", "returns"])
    return [got["advantages"][i] for i in range(len(keys))], [got["returns"][i] for i in range(len(keys))]


def test_the_cpu_estimator_list_covers_every_registered_estimator():
    core_algos = verl_module("verl.trainer.ppo.core_algos")
    assert set(core_algos.ADV_ESTIMATOR_REGISTRY) == set(CPU_ESTIMATORS) | set(NEEDS_MORE)


def run_installed(tq_client, tb, partitions, cfg, keys, samples, tags):
    tv.install()
    meta = write(tq_client, partitions(), keys, samples, tags)
    padded, metrics = step(trainer(tb, cfg), meta, balance=True)
    tv.uninstall()
    return padded, metrics


@pytest.mark.parametrize("estimator", CPU_ESTIMATORS)
def test_under_install_real_advantages_are_bit_identical_and_padding_rows_are_zero(
    tq_client, tb, partitions, estimator
):
    keys, samples, tags = rollout(seed=1)
    cfg = config(estimator)
    padded, _ = run_installed(tq_client, tb, partitions, cfg, keys, samples, tags)
    assert len(padded.keys) % 12 == 0 and len(padded.keys) > len(keys)  # lcm(dp 2, 3 prompts x n 4)
    by_key = {k: (s, t) for k, s, t in zip(keys, samples, tags, strict=True)}
    order = real_keys(padded)
    base, _ = baseline(tq_client, tb, cfg, partitions, order, by_key)
    ours_adv, ours_ret = advantages(tq_client, padded, order)
    base_adv, base_ret = advantages(tq_client, base, order)
    for key, a, b, r, q in zip(order, ours_adv, base_adv, ours_ret, base_ret, strict=True):
        assert torch.equal(a, b) and torch.equal(r, q), f"{estimator}: real sample {key} changed by padding"
    pad = [k for k in padded.keys if k not in by_key]
    pad_adv, pad_ret = advantages(tq_client, padded, pad)
    for key, a, r in zip(pad, pad_adv, pad_ret, strict=True):
        assert torch.isfinite(a).all() and not a.any() and not r.any(), f"{estimator}: padding {key} got {a}"


def test_verl_alone_lets_padding_into_advantages_of_gpg_and_opo(tq_client, tb, partitions):
    """The hazard install() removes: verl's own flow gives OPO's padding NaN advantages."""
    keys, samples, tags = rollout(seed=6)
    meta = write(tq_client, partitions(), keys, samples, tags)
    padded, _ = step(trainer(tb, config("opo")), meta, balance=True)
    pad = [k for k, tag in zip(padded.keys, padded.tags, strict=True) if ts.is_padding(tag)]
    assert pad, "the rollout must need padding"
    pad_adv, _ = advantages(tq_client, padded, pad)
    assert any(not torch.isfinite(a).all() for a in pad_adv), "verl 0.9.1's OPO no longer makes NaN padding"


def data_metric_differences(ours: dict, base: dict) -> list[str]:
    return [
        f"{name}: {ours.get(name)!r} != {value!r}"
        for name, value in base.items()
        if is_data_metric(name) and not (name in ours and same(ours[name], value))
    ]


@pytest.mark.parametrize("schema_name", ["text", "vlm_mrope_moe"])
def test_the_trainer_flow_under_install_matches_the_never_padded_run(tq_client, tb, partitions, schema_name):
    keys, samples, tags = rollout(schema_name, seed=3)
    by_key = {k: (s, t) for k, s, t in zip(keys, samples, tags, strict=True)}
    cfg = config("grpo", loss_agg_mode="seq-mean-token-mean")
    # verl alone: its own padding and metrics filter.
    meta = write(tq_client, partitions(), keys, samples, tags)
    verl_padded, verl_metrics = step(trainer(tb, cfg), meta, balance=True)
    _, verl_base_metrics = baseline(tq_client, tb, cfg, partitions, real_keys(verl_padded), by_key)
    leaks = data_metric_differences(verl_metrics, verl_base_metrics)
    # The 127-token padding prompt widens the padded prompts, so no real prompt is "clipped".
    assert [leak.split(":")[0] for leak in leaks] == ["prompt_length/clip_ratio"], leaks
    # Under install(): every data metric equals the never-padded run's.
    padded, metrics = run_installed(tq_client, tb, partitions, cfg, keys, samples, tags)
    _, base_metrics = baseline(tq_client, tb, cfg, partitions, real_keys(padded), by_key)
    assert data_metric_differences(metrics, base_metrics) == []
    assert set(base_metrics) - set(metrics) == set()
    # Timing and throughput stay verl's, over the padded batch (same padding lengths as verl's).
    timing = {k: v for k, v in verl_metrics.items() if k.startswith(TIMING_PREFIXES)}
    assert timing and {k: metrics[k] for k in timing} == timing
    n_pad = len(padded.keys) - len(keys)
    assert metrics["padding/samples"] == n_pad == len(verl_padded.keys) - len(keys)
    assert metrics["padding/tokens"] == 128 * n_pad
    assert metrics["padding/share"] == n_pad / len(padded.keys)
    assert metrics["padding/seq_mean_loss_scale"] == len(keys) / len(padded.keys)
    assert verl_base_metrics.keys() == base_metrics.keys()


def test_the_drop_in_alone_keeps_verls_metrics_working(tq_client, tb, partitions):
    """Our padding inherits verl's own tags (min/max_global_steps, ...): verl's _compute_metrics reads them."""
    keys, samples, tags = rollout(seed=4)
    t = trainer(tb, config())
    meta = write(tq_client, partitions(), keys, samples, tags)
    padded = tv.upsample_batch_to_divisible_size(meta, 12, EOS)
    pad_tags = [tag for tag in padded.tags if ts.is_padding(tag)]
    assert pad_tags and all(tag["min_global_steps"] == 0 and tag["status"] == "finished" for tag in pad_tags)
    metrics: dict[str, Any] = {}
    t._compute_metrics(t._compute_advantage(padded, metrics), metrics, dict(TIMING_RAW), 1, 0)
    assert metrics["training/off_policy/trajectory_spans/max"] == 2


def test_install_follows_the_trainers_parallel_layout(tq_client, tb, partitions):
    keys, samples, tags = rollout(seed=5, prompts=2)
    cfg = config(strategy="megatron", megatron={"tensor_model_parallel_size": 8, "context_parallel_size": 16})
    tv.install()
    meta = write(tq_client, partitions(), keys, samples, tags)
    padded = trainer(tb, cfg)._balance_batch(meta, {})
    pad_tags = [tag for tag in padded.tags if ts.is_padding(tag)]
    assert pad_tags and {tag["seq_len"] for tag in pad_tags} == {256}  # 2*8*16 = 256 >= 128
    tv.install(dims={"prompt": 63, "response": 1})
    meta = write(tq_client, partitions(), keys, samples, tags)
    padded = trainer(tb, cfg)._balance_batch(meta, {})
    assert {tag["seq_len"] for tag in padded.tags if ts.is_padding(tag)} == {64}
