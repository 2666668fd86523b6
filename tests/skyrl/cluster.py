"""An in-process SkyRL 0.3.0 for the oracle tests: its own trainer, dispatch and workers on CPU.

SkyRL's ``RayPPOTrainer``, ``WorkerDispatch``, ``MeshDispatch``, ``PPORayActorGroup``
dispatch, micro-batch iterators, ``PolicyWorkerBase`` / ``CriticWorkerBase`` /
``RefWorkerBase`` methods, loss functions, ``HFModelWrapper`` and critic model class run
unmodified. Replaced, only where they need GPUs, Ray or a process group:

- **Ray.** ``ray.put`` is the identity and ``ray.get`` runs the workers' calls in this
  process, rank after rank (`InProcessRay`); an actor handle's ``.method.remote(...)`` is a
  deferred call (`Handle`).
- **The data-parallel process group.** ``strategy.all_reduce`` records what each rank
  hands it; once every rank has run, `InProcessRay` reduces the records across ranks with
  the op SkyRL asked for (mean, min, max, sum; in float64, where NCCL would round to
  float32) and gives each rank's ``WorkerOutput`` the reduced metrics, as the all-reduce
  would have. ``TokenBasedBatchIterator``'s all-reduce (MAX) of the micro-batch count is
  the same maximum, computed over the ranks' chunks with SkyRL's own packer.
- **FSDP.** One model object serves every rank, so its ``.grad`` holds the sum over ranks
  and micro-batches (FSDP would then divide by dp_size); ``optimizer_step`` records those
  gradients and zeroes them instead of stepping, so every run starts from the same weights.
- **CUDA.** ``torch.cuda.current_device()`` is the CPU (the caller patches it: `patch_cuda`).
- **Inference engines.** ``init_weight_sync_state`` and ``save_weights_for_sampler`` do
  nothing (`InProcessDispatch`); the generator returns a fixed rollout (`FixedGenerator`).

SkyRL's ``model_wrapper`` imports flash-attn, a CUDA-only package, at the top: it is
imported through the stub of ``tests/skyrl_shim.py``, which says why that is safe. The
models are tiny Llamas built from a config (no download, seeded): the policy and the ref
(other weights) in SkyRL's ``HFModelWrapper``, the critic in SkyRL's own critic class.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import torch

from tests.skyrl_support import import_skyrl

__all__ = [
    "Cluster",
    "FixedGenerator",
    "InProcessRay",
    "Models",
    "config",
    "patch_cuda",
    "skyrl_modules",
    "tiny_models",
    "train_one_step",
]

#: The tiny Llama every test model is built from (vocab covers the token ids the tests use).
MODEL_CONFIG = {
    "vocab_size": 256,
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 64,
}

_MODULES = {
    "tb": "skyrl.backends.skyrl_train.training_batch",
    "trainer": "skyrl.train.trainer",
    "dispatch": "skyrl.backends.skyrl_train.distributed.dispatch",
    "worker_dispatch": "skyrl.backends.skyrl_train.workers.worker_dispatch",
    "wu": "skyrl.backends.skyrl_train.workers.worker_utils",
    "worker": "skyrl.backends.skyrl_train.workers.worker",
    "wrapper": "skyrl.backends.skyrl_train.workers.model_wrapper",
    "ppo": "skyrl.backends.skyrl_train.utils.ppo_utils",
    "config": "skyrl.train.config",
    "packing": "skyrl.train.dataset.bin_packing",
    "callbacks": "skyrl.train.utils.callbacks",
    "trainer_utils": "skyrl.train.utils.trainer_utils",
    "preprocess": "skyrl.train.dataset.preprocess",
}


def skyrl_modules() -> SimpleNamespace:
    """SkyRL's modules the cluster drives, by short name (``tb``, ``trainer``, ``worker``, ...)."""
    import_skyrl(_MODULES["tb"])  # the 3.11 shim runs before anything imports skyrl.backends
    return SimpleNamespace(**{k: import_skyrl(v) for k, v in _MODULES.items()})


@dataclasses.dataclass
class Models:
    policy: Any
    ref: Any
    critic: Any


def tiny_models(skyrl: SimpleNamespace) -> Models:
    """The policy and ref (SkyRL's ``HFModelWrapper``) and the critic (SkyRL's critic class), seeded."""
    import transformers

    config = transformers.LlamaConfig(**MODEL_CONFIG)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    policy = skyrl.wrapper.HFModelWrapper(transformers.LlamaForCausalLM(config))
    ref = skyrl.wrapper.HFModelWrapper(transformers.LlamaForCausalLM(config))  # other weights: a KL to measure
    critic_cls = skyrl.wrapper._get_critic_model(transformers.LlamaPreTrainedModel, transformers.LlamaModel)
    critic = critic_cls(config)
    return Models(policy=policy, ref=ref, critic=critic)


def patch_cuda(monkeypatch: Any) -> None:
    """``torch.cuda.current_device()`` is the CPU: SkyRL's workers move every micro-batch there."""
    monkeypatch.setattr(torch.cuda, "current_device", lambda: torch.device("cpu"))


def config(
    skyrl: SimpleNamespace,
    *,
    prompts: int,
    samples: int,
    mini_batch: int,
    micro: int = 1,
    max_tokens: int = -1,
    critic: bool = False,
    **algorithm: Any,
) -> Any:
    """SkyRL's ``SkyRLTrainConfig`` for one batch of ``prompts`` x ``samples`` rollouts in
    mini-batches of ``mini_batch`` prompts: no checkpoints, no eval, nothing colocated;
    ``algorithm`` overrides ``trainer.algorithm`` (temperature 1.0 unless given)."""
    cfg = skyrl.config.SkyRLTrainConfig()
    t = cfg.trainer
    t.resume_mode, t.ckpt_interval, t.hf_save_interval = "none", 0, -1
    t.eval_interval, t.eval_before_train, t.print_example_interval = -1, False, 0
    t.train_batch_size, t.policy_mini_batch_size, t.critic_mini_batch_size = prompts, mini_batch, mini_batch
    t.micro_train_batch_size_per_gpu = t.micro_forward_batch_size_per_gpu = micro
    t.max_tokens_per_microbatch = max_tokens
    t.placement.colocate_all = t.placement.colocate_policy_ref = False
    t.critic.model.path = "tiny-critic" if critic else None
    for key, value in {"temperature": 1.0, **algorithm}.items():
        setattr(t.algorithm, key, value)
    cfg.generator.n_samples_per_prompt = samples
    return cfg


# -- Ray, the actors and the process group ---------------------------------------------------


@dataclasses.dataclass
class Call:
    """``handle.method.remote(*args, **kwargs)``, run when `InProcessRay.get` asks for it."""

    worker: Any
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


class Handle:
    """A Ray actor handle: ``handle.forward_backward.remote(chunk)`` is a deferred `Call`."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    def __getattr__(self, method: str) -> Any:
        worker = self.worker
        return SimpleNamespace(remote=lambda *args, **kwargs: Call(worker, method, args, kwargs))


class Strategy:
    """A rank's distributed strategy: plain backward, recorded all-reduces, recorded gradients."""

    def __init__(self, cluster: Cluster, rank: int, dp: int) -> None:
        self.cluster, self.rank, self.world_size = cluster, rank, dp

    def backward(self, loss: torch.Tensor, model: Any, optimizer: Any, **kwargs: Any) -> None:
        loss.backward()

    def all_reduce(self, data: Any, op: str = "mean", group: Any = None) -> Any:
        self.cluster.reduces.setdefault(self.rank, []).append((op, dict(data)))
        return dict(data)

    def optimizer_step(self, optimizer: Any, model: Any, scheduler: Any, name: str = "model", **kw: Any) -> None:
        if self.rank == 0:  # one model serves every rank: record its gradients once
            self.cluster.record_gradients(name, model)


def _reduce(op: str, values: Sequence[float]) -> float:
    if op == "mean":
        return sum(values) / len(values)
    if op == "sum":
        return sum(values)
    return max(values) if op == "max" else min(values)


class InProcessRay:
    """Stands in for the ``ray`` module of SkyRL's dispatch modules (``put``, ``get``)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def put(self, value: Any) -> Any:
        return value

    def get(self, refs: Any) -> Any:
        if isinstance(refs, list):
            return self.cluster.run(refs)
        return self.cluster.run([refs])[0]


class Cluster:
    """The policy, critic and ref workers of ``dp`` ranks, and what they recorded.

    Attributes:
        reduces: per rank, the ``(op, metrics)`` each ``strategy.all_reduce`` got (one call's worth).
        gradients: per optimizer name (``actor``, ``critic``), the gradients of each optimizer step.
        chunks: the chunks of the call running now, one per rank (for the micro-batch count sync).
    """

    def __init__(self, skyrl: SimpleNamespace, cfg: Any, models: Models, dp: int) -> None:
        self.skyrl, self.cfg, self.dp = skyrl, cfg, dp
        self.reduces: dict[int, list[tuple[str, dict[str, Any]]]] = {}
        self.gradients: dict[str, list[dict[str, torch.Tensor]]] = {}
        self.chunks: list[Any] = []
        self.groups = {
            "policy": self._group(skyrl.worker.PolicyWorkerBase, models.policy),
            "ref": self._group(skyrl.worker.RefWorkerBase, models.ref),
            "critic": self._group(skyrl.worker.CriticWorkerBase, models.critic),
        }
        for model in (models.policy, models.critic):
            model.zero_grad(set_to_none=True)

    def _group(self, cls: type, model: Any) -> Any:
        group = object.__new__(self.skyrl.worker.PPORayActorGroup)
        group.actor_infos = [
            self.skyrl.dispatch.ActorInfo(handle=Handle(self._worker(cls, model, rank)), rank=self._rank(rank))
            for rank in range(self.dp)
        ]
        return group

    def _rank(self, rank: int) -> Any:
        return self.skyrl.dispatch.MeshRank(dp=rank, sp=0, tp=0, pp=0, world_size=self.dp, dp_size=self.dp, pp_size=1)

    def _worker(self, cls: type, model: Any, rank: int) -> Any:
        worker = object.__new__(cls)
        worker.cfg = self.cfg.trainer
        worker.model = model
        worker.strategy = Strategy(self, rank, self.dp)
        worker.mesh_rank = self._rank(rank)
        worker.device_mesh = SimpleNamespace(get_group=lambda name: None)
        worker.scheduler = SimpleNamespace(get_last_lr=lambda: [1e-6])
        worker.optimizer = None
        worker.record_memory = False
        worker.profiler = None
        if cls is self.skyrl.worker.PolicyWorkerBase:
            worker.policy_loss_fn = self.skyrl.ppo.PolicyLossRegistry.get(self.cfg.trainer.algorithm.policy_loss_type)
        if cls is self.skyrl.worker.CriticWorkerBase:
            worker.critic_loss_fn = self.skyrl.ppo.ppo_critic_loss
            worker._micro_batches_accumulated = 0
        return worker

    def worker(self, role: str, rank: int) -> Any:
        return self.groups[role].actor_infos[rank].handle.worker

    # -- running calls ----------------------------------------------------------------------

    def run(self, calls: list[Any]) -> list[Any]:
        """Run each rank's call, then hand every rank the all-reduced metrics."""
        self.reduces = {}
        self.chunks = [c.args[0] if c.args else c.kwargs.get("data") for c in calls if isinstance(c, Call)]
        results = [getattr(c.worker, c.method)(*c.args, **c.kwargs) if isinstance(c, Call) else c for c in calls]
        if not self.reduces:
            return results
        reduced = self.all_reduced()
        return [dataclasses.replace(r, metrics=dict(reduced)) if hasattr(r, "metrics") else r for r in results]

    def all_reduced(self) -> dict[str, float]:
        """The recorded all-reduces, reduced across ranks (every rank must have handed the same keys)."""
        ranks = sorted(self.reduces)
        out: dict[str, float] = {}
        for i, (op, first) in enumerate(self.reduces[ranks[0]]):
            per_rank = [self.reduces[r][i][1] for r in ranks]
            keys = [sorted(m) for m in per_rank]
            assert all(k == keys[0] for k in keys), f"ranks all-reduce different keys ({op}): {keys}"
            out.update({k: _reduce(op, [m[k] for m in per_rank]) for k in first})
        return out

    def record_gradients(self, name: str, model: Any) -> None:
        model = getattr(model, "model", model) if name == "actor" else model
        grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
        self.gradients.setdefault(name, []).append(grads)
        model.zero_grad(set_to_none=True)

    def sync_microbatch_count(self, iterator: Any) -> int:
        """``TokenBasedBatchIterator._sync_num_microbatches``: the MAX over the ranks' chunks."""
        packer = self.skyrl.packing.make_seq_packer("balanced", bin_capacity=iterator._max_tokens_per_microbatch)
        counts = [len(packer.pack(c["attention_mask"].sum(1).tolist())) for c in self.chunks if c is not None]
        return max(counts, default=len(iterator._microbatches))


def patch_cluster(monkeypatch: Any, cluster: Cluster) -> None:
    """Point SkyRL's dispatch modules at the in-process Ray and the micro-batch count at the cluster."""
    skyrl = cluster.skyrl
    ray = InProcessRay(cluster)
    for module in (skyrl.dispatch, skyrl.worker_dispatch):
        monkeypatch.setattr(module, "ray", ray)
    monkeypatch.setattr(
        skyrl.wu.TokenBasedBatchIterator, "_sync_num_microbatches", lambda it: cluster.sync_microbatch_count(it)
    )
    patch_cuda(monkeypatch)


# -- the trainer ------------------------------------------------------------------------------


class FixedGenerator:
    """SkyRL's generator, returning one fixed rollout (a deep copy each time)."""

    def __init__(self, output: dict[str, Any]) -> None:
        self.output = output

    async def generate(self, generator_input: Any) -> dict[str, Any]:
        return {**copy.deepcopy(self.output), "rollout_metrics": None}


class Tracker:
    """SkyRL's tracker: keeps what ``train()`` logs."""

    def __init__(self) -> None:
        self.logged: list[dict[str, Any]] = []

    def log(self, data: dict[str, Any], step: int, commit: bool = False) -> None:
        self.logged.append(dict(data))

    def finish(self) -> None:
        pass


def in_process_dispatch(skyrl: SimpleNamespace) -> type:
    """SkyRL's ``WorkerDispatch`` without the inference engines (nothing to sync weights to)."""

    class InProcessDispatch(skyrl.worker_dispatch.WorkerDispatch):  # type: ignore[misc,name-defined]
        def init_weight_sync_state(self, inference_engine_client: Any) -> None:
            pass

        async def save_weights_for_sampler(self, model_id: Any = None) -> None:
            pass

    return InProcessDispatch


def trainer(cluster: Cluster, generator: FixedGenerator, prompts: list[dict[str, Any]]) -> Any:
    """A ``RayPPOTrainer`` with what ``__init__`` sets, one batch of ``prompts`` to train on."""
    skyrl, cfg = cluster.skyrl, cluster.cfg
    t = object.__new__(skyrl.trainer.RayPPOTrainer)
    algorithm = cfg.trainer.algorithm
    uses_ref = algorithm.use_kl_loss or algorithm.use_kl_in_reward
    has_critic = bool(cfg.trainer.critic.model.path)
    vars(t).update(
        cfg=cfg,
        colocate_all=False,
        tracker=Tracker(),
        tokenizer=SimpleNamespace(pad_token_id=0, eos_token_id=2, decode=lambda ids: ""),
        train_dataset=None,
        eval_dataset=None,
        inference_engine_client=None,
        generator=generator,
        train_dataloader=[prompts],
        total_training_steps=1,
        eval_dataloader=None,
        colocate_pg=None,
        resume_mode=skyrl.trainer_utils.ResumeMode.NONE,
        all_metrics={},
        all_timings={},
        global_step=0,
        _vllm_metrics_scraper=None,
        _ray_gpu_monitor=None,
        trajectory_logger=None,
        policy_model=cluster.groups["policy"],
        critic_model=cluster.groups["critic"] if has_critic else None,
        ref_model=cluster.groups["ref"] if uses_ref else None,
        _node_ids=None,
        dynamic_sampling_state=None,
        reward_kl_controller=None,
        _callback_handler=skyrl.callbacks.CallbackHandler(None),
        _training_control=skyrl.callbacks.TrainingControl(),
        _current_epoch=0,
        _num_training_gpus=cluster.dp,
    )
    groups = {k: cluster.groups[k] for k in ("policy", "critic", "ref")}
    t.dispatch = in_process_dispatch(skyrl)(
        cfg,
        groups["policy"],
        critic_actor_group=groups["critic"] if has_critic else None,
        ref_actor_group=groups["ref"] if uses_ref else None,
    )
    return t


def train_one_step(t: Any) -> dict[str, Any]:
    """SkyRL's own ``RayPPOTrainer.train()`` over its one batch: what it logged for the step."""
    asyncio.run(t.train())
    return t.tracker.logged[-1]
