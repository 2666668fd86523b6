"""verl 0.9.1's trainer step under ``install()``, driven in the order ``PPOTrainer._step_once`` calls it.

``_balance_batch``, ``_compute_advantage``, the actor update, then ``fit``'s
``_compute_metrics``, on a stub trainer, with the in-memory TransferQueue standing in for
the ``transfer_queue`` module (no Ray; the ``tb`` and ``tq`` fixtures of
``tests/verl/conftest.py``). The actor update is what verl's worker does with the batch,
without a model: TransferQueue's ``KVBatchMeta.chunk`` gives each data-parallel rank its
rows, verl's ``tensordict_utils.make_iterator`` splits them into mini-batches, and verl's
``compute_policy_loss_vanilla`` (``agg_loss`` inside) gives each rank's loss with the global
sizes verl's engine passes.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import torch

import trajschema as ts
import trajschema.verl as tv
from tests.verl_support import verl_module
from trajschema.testing import verl_sample

EOS = 2
TIMING_RAW = {"step": 2.0, "gen": 0.5, "adv": 0.1, "update_actor": 0.7}
#: A fault written into TransferQueue between two of the step's calls: (the client, the batch so far).
Inject = Callable[[Any, Any], None]


def step_config(estimator: str, mode: str, **actor: Any) -> Any:
    """A trainer config with what the driven methods read; the actor's split keys at verl's defaults unless given."""
    omegaconf = verl_module("omegaconf")
    actor = {"ppo_epochs": 1, "shuffle": False, "data_loader_seed": 42, **actor}
    return omegaconf.OmegaConf.create(
        {
            "actor_rollout_ref": {
                "rollout": {"n": 4, "moe_load_balance_metrics_interval": 0},
                "actor": {"ppo_mini_batch_size": 3, "loss_agg_mode": mode, "strategy": "fsdp", **actor},
                "model": {},
            },
            "critic": {"enable": False, "ppo_mini_batch_size": 3},
            "algorithm": {"adv_estimator": estimator, "gamma": 1.0, "lam": 1.0, "use_kl_in_reward": False},
            "trainer": {"critic_warmup": 0},
        }
    )


def stub_trainer(tb, config: Any, dp: int) -> Any:
    """verl's PPOTrainer with exactly the attributes the driven methods read (no workers, no Ray)."""
    stub = type("StubTrainer", (tb.PPOTrainer,), {m: lambda self: None for m in tb.PPOTrainer.__abstractmethods__})
    t = object.__new__(stub)
    t.config, t.global_steps, t.use_critic = config, 1, False
    t.tokenizer = SimpleNamespace(eos_token_id=EOS)
    t.actor_rollout_wg = SimpleNamespace(_dispatch_info={"actor": [r for r in range(dp) for _ in range(2)]})
    t.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 2 * dp)
    t._rollout_moe_lb_metrics_accumulator = None
    return t


def rollout(
    rows: int, schema: str = "text", routes_dtype: torch.dtype | None = None, **dims: int
) -> tuple[list[str], list[dict], list[dict]]:
    """``rows`` samples of ``schema`` keyed ``{uid}_{session}_0`` as verl's agent loop writes them: 4 sessions a
    prompt, the last prompt taking the rest (every group has two rows at least, as pass@k needs); ``dims`` are
    `verl_sample`'s (``layers``, ``topk``, ``experts``), ``routes_dtype`` the ``routed_experts`` dtype."""
    loaded = ts.load_schema(schema)
    keys, samples, tags = [], [], []
    last = max(0, (rows - 2) // 4)
    for i in range(rows):
        group = min(i // 4, last)
        uid, session = f"q{group}", i - 4 * group
        key = f"{uid}_{session}_0"
        h = zlib.crc32(key.encode())
        prompt, response = 3 + h % 20, 1 + (h >> 5) % 9
        s = verl_sample(loaded, prompt, response, uid=uid, seed=h % 10_000, **dims)
        s["rm_scores"] = torch.zeros(response)
        s["rm_scores"][-1] = ((h >> 9) % 5) / 4
        if routes_dtype is not None:
            s["routed_experts"] = s["routed_experts"].to(routes_dtype)
        keys.append(key)
        samples.append(s)
        tags.append({"status": "finished", "global_steps": 1, "min_global_steps": 0, "max_global_steps": 1})
    return keys, samples, tags


def write(tq, partition: str, keys, samples, tags, schema: str = "text") -> Any:
    writer = ts.TransferQueueWriter(ts.load_schema(schema), partition_id=partition, eos_token_id=EOS, client=tq)
    return writer.put(keys, samples, tags)


def _log_probs(key: str, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The old and current log-probs of a row: drawn from its key, so the same row has the same bits in every run."""
    g = torch.Generator().manual_seed(zlib.crc32(key.encode()))
    old = -torch.rand(width, generator=g) * 3
    return old, old + (torch.rand(width, generator=g) - 0.5) * 0.4


def _rank_loss(tq, meta, keys: list[str], mode: str, sizes: dict[str, Any]) -> torch.Tensor:
    """verl's PPO loss (``ppo_loss``'s two terms) of one rank's rows of a mini-batch, with the global sizes its
    engine passes."""
    core_algos = verl_module("verl.trainer.ppo.core_algos")
    actor_config = verl_module("verl.workers.config.actor").FSDPActorConfig
    got = tq.kv_batch_get(keys=keys, partition_id=meta.partition_id, select_fields=["advantages", "response_mask"])
    advantages = got["advantages"].to_padded_tensor(0.0)
    mask = got["response_mask"].to_padded_tensor(0).bool()
    old, new = (torch.stack(t) for t in zip(*(_log_probs(k, mask.shape[1]) for k in keys), strict=True))
    config = actor_config(strategy="fsdp", ppo_mini_batch_size=3, rollout_n=4, ppo_micro_batch_size_per_gpu=1)
    config.global_batch_info.update(sizes)
    loss, _ = core_algos.compute_policy_loss_vanilla(old, new, advantages, mask, loss_agg_mode=mode, config=config)
    # ppo_loss's entropy term, with -old as the entropy: no real row's loss is 0 then, zero advantages or not
    entropy = core_algos.agg_loss(loss_mat=-old, loss_mask=mask, loss_agg_mode=mode, **config.global_batch_info)
    return loss - 0.01 * entropy


def _mini_batch_loss(tq, meta, ranks: list[list[str]], mode: str, global_size: int) -> float:
    """A global mini-batch's loss as its gradient sees it: the mean of the ranks' losses (DP averages gradients)."""
    tokens = 0
    for keys in ranks:
        if keys:
            got = tq.kv_batch_get(keys=keys, partition_id=meta.partition_id, select_fields=["response_mask"])
            tokens += int(got["response_mask"].values().sum())
    sizes = {"dp_size": len(ranks), "batch_num_tokens": tokens, "global_batch_size": global_size}
    losses = [_rank_loss(tq, meta, keys, mode, sizes) if keys else torch.tensor(0.0) for keys in ranks]
    return float(torch.stack(losses).mean())


def actor_update(tq, meta, config: Any, dp: int, real: set[str]) -> list[tuple[float, float, int]]:
    """Per global mini-batch: (verl's loss of it, verl's loss of its real rows alone, real rows), in training order.

    The rows reach each rank as verl dispatches them (TransferQueue's ``chunk``) and are split
    by verl's ``make_iterator`` with what ``_update_actor`` passes: the global size is
    ``ppo_mini_batch_size * rollout.n`` padding included, and the never-padded loss of the
    same real rows divides by their own count.
    """
    make_iterator = verl_module("verl.utils.tensordict_utils").make_iterator
    actor = config.actor_rollout_ref.actor
    size = actor.ppo_mini_batch_size * config.actor_rollout_ref.rollout.n
    per_rank = []
    for rank, chunk in enumerate(meta.chunk(dp)):
        positions = verl_module("tensordict").TensorDict(
            {"position": torch.arange(len(chunk.keys))}, batch_size=[len(chunk.keys)]
        )
        it = make_iterator(
            positions, size // dp, actor.ppo_epochs, seed=actor.data_loader_seed + rank,
            dataloader_kwargs={"shuffle": actor.shuffle},
        )  # fmt: skip
        per_rank.append([[chunk.keys[i] for i in b["position"].tolist()] for b in it])
    out = []
    for j in range(len(per_rank[0])):
        ranks = [keys[j] for keys in per_rank]
        real_ranks = [[k for k in keys if k in real] for keys in ranks]
        n_real = sum(map(len, real_ranks))
        padded = _mini_batch_loss(tq, meta, ranks, actor.loss_agg_mode, size)
        alone = _mini_batch_loss(tq, meta, real_ranks, actor.loss_agg_mode, n_real) if n_real else 0.0
        out.append((padded, alone, n_real))
    return out


def installed_step(
    tb,
    tq,
    config: Any,
    dp: int,
    rows: int,
    *,
    schema: str = "text",
    sample_dims: Mapping[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    after_balance: Inject | None = None,
    after_advantage: Inject | None = None,
    **install: Any,
) -> tuple[Any, dict[str, Any], list]:
    """One step under ``install(**install)``: verl's _balance_batch, _compute_advantage, the actor update,
    _compute_metrics; ``after_*`` inject a fault after that call. ``metrics`` (filled in place) is the step's."""
    tv.install(**install)
    try:
        return driven_step(
            tq,
            stub_trainer(tb, config, dp),
            dp,
            rows,
            schema=schema,
            sample_dims=sample_dims,
            metrics=metrics,
            after_balance=after_balance,
            after_advantage=after_advantage,
        )
    finally:
        tv.uninstall()


def driven_step(
    tq,
    t: Any,
    dp: int,
    rows: int,
    *,
    schema: str = "text",
    sample_dims: Mapping[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    after_balance: Inject | None = None,
    after_advantage: Inject | None = None,
    global_steps: int = 1,
) -> tuple[Any, dict[str, Any], list]:
    """Step ``global_steps`` of the trainer ``t`` (a `stub_trainer` of ``dp`` ranks) under the install in
    effect, as `installed_step` runs it."""
    keys, samples, tags = rollout(rows, schema, **(sample_dims or {}))
    t.global_steps = global_steps
    metrics = {} if metrics is None else metrics
    meta = t._balance_batch(write(tq, "padded", keys, samples, tags, schema), metrics=metrics)
    if after_balance is not None:
        after_balance(tq, meta)
    meta = t._compute_advantage(meta, metrics)
    if after_advantage is not None:
        after_advantage(tq, meta)
    losses = actor_update(tq, meta, t.config, dp, set(keys))
    t._compute_metrics(meta, metrics, dict(TIMING_RAW), global_steps, 0)
    return meta, metrics, losses
