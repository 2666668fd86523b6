"""OpenRLHF 0.11.2 for the oracle tests: its modules, loaded from the installed source, and
a ``BasePPOTrainer.train_step`` driven on CPU in the order OpenRLHF's own step runs.

Only OpenRLHF's batch layer imports on CPU: the experience maker and the trainer import
``openrlhf.models`` (flash-attn, deepspeed), the launcher and the sample generator import
vLLM. So the modules under test (``experience_maker``, ``ppo_trainer``, ``launcher``,
``samples_generator``, ``ppo_actor``, ``ppo_trainer_async``) are imported unchanged from the installed OpenRLHF with
**stand-ins for those imports only** (`STAND_INS`): ``deepspeed`` (an empty module:
``models/utils.py`` uses it only inside a function no test calls), ``openrlhf.models``
(the package without its ``__init__``, so ``models/utils.py``, ``models/actor.py`` and
``models/loss.py`` load from their files: ``Actor``, ``PolicyLoss`` and ``aggregate_loss``
are OpenRLHF's own; ``get_llm_for_sequence_regression`` is never called),
``openrlhf.utils.deepspeed`` (``DeepspeedStrategy``, an annotation, and its
``deepspeed_utils`` offloading, never called), ``flash_attn`` (the ring-attention padding
helpers ``models/ring_attn_utils.py`` imports; no test packs samples), ``openrlhf.datasets``
(``PromptDataset``, ``blending_datasets``: the dataset preparation no test runs), vLLM's
``SamplingParams`` and ``openrlhf.trainer.ray.vllm_engine`` (its engine calls). In
`TrainStep`, Ray's ``put``/``get`` are the identity (each model actor runs in this process)
and the model actors' ``forward`` is a deterministic function of each row's own tokens; the
split over actors is OpenRLHF's own ``RayActorGroup.async_run_method_batch`` and
``BaseModelActor.execute_batch``, and each actor's ``append`` is OpenRLHF's own
``NaiveReplayBuffer.append``. In `ActorFit`, ``ActorPPOTrainer.ppo_train`` runs unchanged
(its DataLoader, ``iter_grad_accum_global_norm``, ``training_step``, the metric merging) on
a tiny randomly initialised Llama wrapped in OpenRLHF's own ``Actor``, with `Engine`
standing in for the DeepSpeed strategy of one rank (``backward``, an ``optimizer_step``
that records the gradient and leaves the weights, ``all_reduce`` the identity).

A missing OpenRLHF skips the test that needs it, naming why; ``TRAJSCHEMA_REQUIRE_OPENRLHF=1``
makes it fail instead.
"""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, NoReturn

import pytest
import torch

from tests.trainer_import import import_installed

__all__ = ["REQUIRED", "ActorFit", "Engine", "TrainStep", "actor_args", "args_for", "async_fit", "load", "rollout"]

REQUIRED = os.environ.get("TRAJSCHEMA_REQUIRE_OPENRLHF") == "1"
EXPERIENCE = "openrlhf.trainer.ppo_utils.experience"
#: The modules loaded from the installed source under the stand-ins.
UNDER_TEST = (
    "openrlhf.trainer.ray.launcher",
    "openrlhf.trainer.ppo_utils.experience_maker",
    "openrlhf.trainer.ppo_utils.samples_generator",
    "openrlhf.trainer.ppo_trainer",
    "openrlhf.trainer.ray.ppo_actor",
    "openrlhf.trainer.ppo_trainer_async",
)
#: The real model code ``ppo_actor`` takes from ``openrlhf.models`` (loaded from their files,
#: under the package stand-in): the actor's forward pass, the policy loss, its aggregation.
MODEL_CODE = {"openrlhf.models.actor": ("Actor",), "openrlhf.models.loss": ("PolicyLoss", "aggregate_loss")}


def _module(name: str, path: Path | None = None, **attrs: Any) -> ModuleType:
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [str(path)]
    for k, v in attrs.items():
        setattr(module, k, v)
    return module


class _Unused:
    """A name the modules under test import but no test calls."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a stand-in of the OpenRLHF oracle tests was called")


def stand_ins(root: Path) -> dict[str, ModuleType]:
    """The stand-in modules (see the module docstring), by name."""
    return {
        "deepspeed": _module("deepspeed"),
        "vllm": _module("vllm", SamplingParams=_Unused),
        "openrlhf.models": _module(
            "openrlhf.models", root / "models", Actor=_Unused, get_llm_for_sequence_regression=_Unused
        ),
        "openrlhf.utils.deepspeed": _module(
            "openrlhf.utils.deepspeed", root / "utils" / "deepspeed", DeepspeedStrategy=_Unused
        ),
        "openrlhf.utils.deepspeed.deepspeed_utils": _module(
            "openrlhf.utils.deepspeed.deepspeed_utils",
            offload_deepspeed_states=_Unused,
            reload_deepspeed_states=_Unused,
        ),
        "flash_attn": _module("flash_attn"),
        "flash_attn.bert_padding": _module(
            "flash_attn.bert_padding",
            index_first_axis=_Unused,
            pad_input=_Unused,
            rearrange=_Unused,
            unpad_input=_Unused,
        ),
        "flash_attn.utils": _module("flash_attn.utils"),
        "flash_attn.utils.distributed": _module("flash_attn.utils.distributed", all_gather=_Unused),
        "openrlhf.datasets": _module("openrlhf.datasets", root / "datasets", PromptDataset=_Unused),
        "openrlhf.datasets.utils": _module("openrlhf.datasets.utils", blending_datasets=_Unused),
        "openrlhf.trainer.ray": _module("openrlhf.trainer.ray", root / "trainer" / "ray"),
        "openrlhf.trainer.ray.vllm_engine": _module("openrlhf.trainer.ray.vllm_engine", batch_vllm_engine_call=_Unused),
    }


_LOADED: dict[str, ModuleType] = {}


def load() -> SimpleNamespace:
    """OpenRLHF's modules under test (each loaded once per session), or skip / fail naming why."""
    try:
        experience = import_installed(EXPERIENCE)
    except ImportError as exc:
        _missing(f"OpenRLHF 0.11.2 is not importable ({exc}); install it with", ".ci/openrlhf-requirements.txt")
    try:  # before the stand-in deepspeed: peft's and transformers' availability checks read deepspeed's spec
        import peft  # noqa: F401
        import transformers.integrations.deepspeed  # noqa: F401
    except ImportError as exc:
        _missing(
            f"OpenRLHF's actor model code needs peft and transformers ({exc}); install them with",
            ".ci/verl-requirements.txt",
        )
    if not _LOADED:
        _load_under_stand_ins(Path(sys.modules["openrlhf"].__file__).parent)
    return SimpleNamespace(
        experience=experience,
        replay_buffer=import_installed("openrlhf.trainer.ppo_utils.replay_buffer"),
        kl_controller=import_installed("openrlhf.trainer.ppo_utils.kl_controller"),
        **_LOADED,
    )


def _missing(why: str, requirements: str) -> NoReturn:
    why = f"{why} pip install --no-deps -r {requirements}"
    if REQUIRED:
        pytest.fail(f"TRAJSCHEMA_REQUIRE_OPENRLHF=1 but {why}")
    pytest.skip(why)


def _load_under_stand_ins(root: Path) -> None:
    added = [name for name, module in stand_ins(root).items() if sys.modules.setdefault(name, module) is module]
    try:
        for name, attrs in MODEL_CODE.items():
            code = import_installed(name)
            for attr in attrs:
                setattr(sys.modules["openrlhf.models"], attr, getattr(code, attr))
        for name in UNDER_TEST:
            _LOADED[name.rpartition(".")[2]] = import_installed(name)
    except BaseException:
        _LOADED.clear()  # all or nothing: a later call tries again rather than returning half the modules
        raise
    finally:
        # The modules under test hold the stand-ins they imported; other libraries must not
        # see a stand-in ``vllm`` or ``deepspeed`` (TRL's import checks read their specs).
        for name in added:
            if not name.startswith("openrlhf"):
                del sys.modules[name]


# -- OpenRLHF's args, rollout and train step -----------------------------------------------


def args_for(
    *,
    actors: int = 4,
    estimator: str = "reinforce_baseline",
    n_samples: int = 1,
    rollout_mbs: int = 1,
    train_mbs: int = 1,
    dynamic: bool = False,
    critic: bool = False,
) -> SimpleNamespace:
    """The parts of OpenRLHF's ``args`` (``cli/train_ppo_ray.py``'s names) the step reads."""
    group = SimpleNamespace(num_nodes=1, num_gpus_per_node=actors)
    return SimpleNamespace(
        actor=group,
        critic=group if critic else SimpleNamespace(num_nodes=1, num_gpus_per_node=8),
        ref=SimpleNamespace(num_nodes=1, num_gpus_per_node=8),
        ds=SimpleNamespace(ring_attn_size=1, tensor_parallel_size=1),
        rollout=SimpleNamespace(micro_batch_size=rollout_mbs, n_samples_per_prompt=n_samples, max_tokens_per_gpu=64),
        train=SimpleNamespace(
            micro_batch_size=train_mbs,
            dynamic_batch_enable=dynamic,
            colocate_all=False,
            colocate_actor_ref=False,
            colocate_critic_reward=False,
        ),
        algo=SimpleNamespace(
            advantage=SimpleNamespace(estimator=estimator, gamma=1.0, lambd=0.95, no_std_norm=False),
            kl=SimpleNamespace(use_loss=False, estimator="k1", init_coef=0.01),
            dynamic_filtering_enable=False,
        ),
        reward=SimpleNamespace(clip_range=(-10.0, 10.0), num_nodes=1, num_gpus_per_node=8),
        overlong_buffer_len=None,
        stop_properly_penalty_coef=None,
    )


def rollout(mods: SimpleNamespace, lengths: Sequence[tuple[int, int]], rewards: Sequence[float]) -> list[Any]:
    """One ``Experience`` per ``(prompt, response)`` length, made by OpenRLHF's own
    ``SamplesGenerator._process_response_into_experience`` from a vLLM-like response."""
    made = []
    for i, ((p, r), reward) in enumerate(zip(lengths, rewards, strict=True)):
        tokens = [3 + (i * 7 + j) % 50 for j in range(p + r - 1)] + [EOS]
        response = {
            "observation_tokens": tokens,
            "action_ranges": [(p, p + r)],
            "reward": reward,
            "scores": reward,
            "rollout_log_probs": None,
            "prompt": f"prompt {i}",
            "label": f"label {i}",
        }
        made.append(mods.samples_generator.SamplesGenerator._process_response_into_experience(None, response))
    return made


EOS = 2
PAD = 0


class _Tokenizer:
    eos_token_id, pad_token_id = EOS, PAD

    def decode(self, ids: torch.Tensor, skip_special_tokens: bool = True) -> list[str]:
        return [" ".join(str(int(t)) for t in ids.flatten())]


class _ModelActor:
    """One model actor: OpenRLHF's ``execute_batch`` calls its ``forward`` / ``append``."""

    def __init__(self, mods: SimpleNamespace, offset: float) -> None:
        self.strategy = SimpleNamespace(is_rank_0=lambda: False)
        self.offset = offset
        buffer = object.__new__(mods.replay_buffer.NaiveReplayBuffer)
        buffer.__dict__.update(cpu_offload=False, items=[], limit=0, packing_samples=False, dynamic_batch=False)
        self.buffer = buffer

    def forward(self, sequences: torch.Tensor, action_mask: torch.Tensor, attention_mask: torch.Tensor, **_: Any):
        # A function of each row's own tokens: the same for a row in any batch it lands in.
        tokens = sequences[:, 1:].float()
        return -((tokens * 0.37 + self.offset) % 1.0) * action_mask.shape[1] / action_mask.shape[1]

    def append(self, experience: Any) -> None:
        self.buffer.append(experience)


class _Handle:
    def __init__(self, actor: _ModelActor, launcher: ModuleType) -> None:
        run = launcher.BaseModelActor.execute_batch
        self.execute_batch = SimpleNamespace(remote=lambda *a: run(actor, *a))


def group(mods: SimpleNamespace, count: int, offset: float) -> Any:
    """OpenRLHF's ``RayActorGroup`` over ``count`` in-process model actors."""
    made = object.__new__(mods.launcher.RayActorGroup)
    made.actors = [_ModelActor(mods, offset) for _ in range(count)]
    made._actor_handlers = [_Handle(a, mods.launcher) for a in made.actors]
    made.duplicate_actors = 1
    return made


_RAY = SimpleNamespace(put=lambda value: value, get=lambda refs: refs)


class TrainStep:
    """``BasePPOTrainer.train_step`` on CPU (see the module docstring): OpenRLHF's own code from
    the rollout to each actor's replay buffer; ``ppo_train`` (the actors' GPU fit) returns ``{}``."""

    def __init__(
        self, mods: SimpleNamespace, args: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, trainer_class: Any = None
    ) -> None:
        for name in ("launcher", "experience_maker", "ppo_trainer"):
            monkeypatch.setattr(getattr(mods, name), "ray", _RAY)
        strategy = SimpleNamespace(args=args)
        self.actors = group(mods, args.actor.num_gpus_per_node, 0.0)
        critic = group(mods, args.critic.num_gpus_per_node, 0.5) if args.algo.advantage.estimator == "gae" else None
        trainer = object.__new__(trainer_class or mods.ppo_trainer.BasePPOTrainer)
        trainer.__dict__.update(
            strategy=strategy,
            args=args,
            actor_model_group=self.actors,
            critic_model_group=critic,
            vllm_engines=None,
            tokenizer=_Tokenizer(),
            kl_ctl=mods.kl_controller.FixedKLController(0.01),
        )
        trainer.experience_maker = mods.experience_maker.RemoteExperienceMaker(
            self.actors, critic, None, None, trainer.kl_ctl, strategy, trainer.tokenizer
        )
        trainer.ppo_train = lambda step: {}
        self.trainer, self.critic = trainer, critic
        self.made: list[Any] = []
        maker = trainer.experience_maker
        own = maker.make_experience_batch
        maker.make_experience_batch = lambda samples: self._kept(own(samples))

    def _kept(self, experiences: list[Any]) -> list[Any]:
        self.made.extend(experiences)
        return experiences

    def run(self, samples: list[Any]) -> dict[str, Any]:
        status, _ = self.trainer.train_step(samples, 0)
        return status

    def stored(self) -> list[list[Any]]:
        """Each actor's replay buffer items (one unpadded ``Experience`` per sample)."""
        return [a.buffer.items for a in self.actors.actors]

    def trained(self, mods: SimpleNamespace, micro: int) -> list[list[Any]]:
        """Each actor's micro-batches as ``ActorPPOTrainer.ppo_train``'s DataLoader makes them
        (``drop_last=True``, OpenRLHF's ``collate_fn``; not shuffled, to be read back)."""
        loader = torch.utils.data.DataLoader
        return [
            list(loader(a.buffer, batch_size=micro, shuffle=False, drop_last=True, collate_fn=a.buffer.collate_fn))
            for a in self.actors.actors
        ]


class _Queue:
    """Ray's ``Queue`` as ``TrainingActor.fit`` reads it, over a list (``get`` of an empty one: ``done``)."""

    def __init__(self, items: Sequence[Any] = ()) -> None:
        self.items = list(items)

    def get(self, block: bool = True) -> Any:
        return self.items.pop(0) if self.items else "done"

    def put(self, item: Any, block: bool = True) -> None:
        self.items.append(item)


def async_fit(mods: SimpleNamespace, args: SimpleNamespace, monkeypatch: pytest.MonkeyPatch, rollouts: Sequence[Any]):
    """``ppo_trainer_async.TrainingActor.fit`` (the async trainer's loop, its class without
    Ray's actor wrapper) over ``rollouts`` as the generator actor queues them; the `TrainStep`
    it drove, and each step's status (what its ``save_logs_and_checkpoints`` was given)."""
    actor_class = mods.ppo_trainer_async.TrainingActor.__ray_actor_class__
    step = TrainStep(mods, args, monkeypatch, trainer_class=actor_class)
    logged: list[dict[str, Any]] = []
    payloads = [(list(r), {}, 1.0, 0.0) for r in rollouts]
    step.trainer.__dict__.update(
        rollout_queue=_Queue(payloads),
        rollout_slots=_Queue(),
        wandb_logger=None,
        tensorboard_logger=None,
        save_logs_and_checkpoints=lambda global_step, status, states: logged.append(status),
    )
    step.trainer.fit()
    return step, logged


# -- OpenRLHF's actor fit -------------------------------------------------------------------


class Engine:
    """The DeepSpeed strategy of one data-parallel rank, as ``ActorPPOTrainer`` uses it: the
    loss scaled by ``1 / accumulated_gradient`` on ``backward``; ``optimizer_step`` records
    the accumulated gradient at each window's end and zeroes it (the weights stay, so every
    micro-batch is scored by the same model); ``all_reduce`` over a world of one."""

    def __init__(self, args: SimpleNamespace, accumulated_gradient: int) -> None:
        self.args, self.accumulated_gradient = args, accumulated_gradient
        self.ring_attn_group, self.world_size, self.calls = None, 1, 0
        self.gradients: list[dict[str, torch.Tensor]] = []

    def is_rank_0(self) -> bool:
        return True

    def backward(self, loss: torch.Tensor, model: Any, optimizer: Any, **_: Any) -> None:
        (loss / self.accumulated_gradient).backward()

    def optimizer_step(self, optimizer: Any, model: Any, scheduler: Any, name: str = "model", **_: Any) -> None:
        self.calls += 1
        if self.calls % self.accumulated_gradient == 0:
            self.gradients.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
            model.zero_grad(set_to_none=True)

    def get_grad_norm(self, model: Any) -> float:
        return 0.0

    def all_reduce(self, data: Any, op: str = "mean") -> Any:
        return data


def actor_args(*, loss_agg_mode: str = "token-mean", kl_loss: bool = True, is_level: str = "off") -> SimpleNamespace:
    """The parts of OpenRLHF's ``args`` the actor's ``ppo_train`` and ``training_step`` read
    (``ds.tensor_parallel_size=2`` only turns the DataLoader's shuffling off, so the tests
    know each micro-batch)."""
    return SimpleNamespace(
        train=SimpleNamespace(max_epochs=1, dynamic_batch_enable=False),
        ds=SimpleNamespace(tensor_parallel_size=2, packing_samples=False),
        actor=SimpleNamespace(aux_loss_coef=0.0, entropy_coef=0.01, loss_agg_mode=loss_agg_mode),
        algo=SimpleNamespace(
            advantage=SimpleNamespace(is_correction_level=is_level),
            kl=SimpleNamespace(use_loss=kl_loss, init_coef=0.01, estimator="k3", unbiased_gradient=False),
        ),
    )


def tiny_actor(mods: SimpleNamespace, seed: int = 0) -> Any:
    """OpenRLHF's ``Actor`` around a 2-layer Llama of 40 tokens, initialised from ``seed``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    config._attn_implementation = "eager"
    actor = sys.modules["openrlhf.models"].Actor(LlamaForCausalLM(config))
    actor.packing_samples = False  # Actor(nn.Module) leaves it unset when given a model
    return actor


class ActorFit:
    """``ActorPPOTrainer.ppo_train`` over ``experiences`` (batched, as ``train_step`` sends them to an
    actor; OpenRLHF's own replay buffer ``append`` splits them) in micro-batches of ``micro``, in
    that order, ``window`` micro-batches per optimizer step."""

    def __init__(self, mods: SimpleNamespace, args: SimpleNamespace, micro: int, window: int) -> None:
        self.mods, self.args, self.micro, self.window = mods, args, micro, window

    def run(self, experiences: Sequence[Any], monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, float], Engine]:
        import copy

        monkeypatch.setattr(torch.cuda, "current_device", lambda: "cpu")
        buffer = object.__new__(self.mods.replay_buffer.NaiveReplayBuffer)
        buffer.__dict__.update(
            sample_batch_size=self.micro,
            cpu_offload=False,
            items=[],
            limit=0,
            packing_samples=False,
            dynamic_batch=False,
        )
        for exp in copy.deepcopy(list(experiences)):
            buffer.append(exp)
        engine = self.engine = Engine(self.args, self.window)  # kept: a test reads it after ppo_train raised
        trainer = object.__new__(self.mods.ppo_actor.ActorPPOTrainer)
        level = self.args.algo.advantage.is_correction_level
        trainer.__dict__.update(
            strategy=engine,
            args=self.args,
            actor=tiny_actor(self.mods),
            ema_model=None,
            actor_optim=None,
            actor_scheduler=SimpleNamespace(get_last_lr=lambda: [1e-6]),
            micro_train_batch_size=self.micro,
            max_epochs=1,
            dataloader_pin_memory=False,
            aux_loss=False,
            replay_buffer=buffer,
            actor_loss_fn=sys.modules["openrlhf.models"].PolicyLoss(
                clip_eps_low=0.2,
                clip_eps_high=0.2,
                token_level_loss=self.args.actor.loss_agg_mode == "token-mean",
                is_correction_level=level,
                is_correction_mode="mask",
                is_correction_threshold=(0.5, 5.0),
            ),
        )
        return trainer.ppo_train(kl_ctl=0.01), engine
