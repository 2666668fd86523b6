"""TRL 1.16.0 for the ``trl_grpo`` tests: a tiny random model and tokenizer made on disk, and
`GRPOTrainer` built around them, whose own ``_generate_and_score_completions`` makes the batches.

Nothing is downloaded: the tokenizer is a word-level ``tokenizers`` model over a 24-word
vocabulary, the model a 1-layer Llama of hidden size 16 made from a config in the test, both
saved to a temporary folder so that TRL loads its reference model from there as it would
from the Hub. A missing TRL skips the test that needs it, naming why; ``.ci/run`` should set
``TRAJSCHEMA_REQUIRE_TRL=1``, and then a missing TRL fails the test instead. A ``trl`` that
is no installed TRL (``tests/trl/`` seen as a namespace package) counts as missing
(``tests/trainer_import.py``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from tests.trainer_import import import_installed

__all__ = [
    "EOS",
    "PAD",
    "WORDS",
    "as_vllm_run",
    "grpo_batch",
    "import_trl",
    "make_trainer",
    "rollout_func",
    "tiny_model",
]

REQUIRED = os.environ.get("TRAJSCHEMA_REQUIRE_TRL") == "1"
#: The vocabulary: two specials, then words ``w0 .. w21``.
WORDS = ["<pad>", "<eos>", *(f"w{i}" for i in range(22))]
PAD, EOS = 0, 1


def import_trl(name: str = "trl") -> ModuleType:
    """``importlib.import_module(name)`` of a TRL module, or skip (fail under ``TRAJSCHEMA_REQUIRE_TRL=1``)."""
    try:
        return import_installed(name)
    except ImportError as exc:
        why = f"TRL 1.16.0 is not importable ({exc}); install it with pip install --no-deps -r .ci/trl-requirements.txt"
        if REQUIRED:
            pytest.fail(f"TRAJSCHEMA_REQUIRE_TRL=1 but {why}")
        pytest.skip(why)


def tiny_model(folder: Path, *, eos_is_pad: bool = False, seed: int = 0) -> Path:
    """A random 1-layer Llama and its word-level tokenizer saved in ``folder`` (left padding, as TRL asks)."""
    import_trl()
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    pad = "<eos>" if eos_is_pad else "<pad>"
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=pad, eos_token="<eos>", padding_side="left")
    pad_id = EOS if eos_is_pad else PAD
    config = LlamaConfig(
        vocab_size=len(WORDS),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=pad_id,
        eos_token_id=EOS,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # make <eos> likely enough that completions end at varied lengths
        model.lm_head.weight[EOS] *= 60.0
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _reward(completions: Sequence[str], **_: Any) -> list[float]:
    return [float(len(c.split())) for c in completions]


def make_trainer(
    folder: Path, *, generations: int = 4, prompts: int = 2, rollout: Callable[..., Any] | None = None, **config: Any
) -> Any:
    """A ``GRPOTrainer`` on CPU over the tiny model in ``folder`` (``tiny_model``); ``config``
    overrides `GRPOConfig` arguments (``beta``, ``pad_to_multiple_of``, ``max_completion_length``, ...)."""
    trl = import_trl()
    from datasets import Dataset
    from transformers import AutoTokenizer

    args = {
        "output_dir": str(folder / "out"),
        "use_cpu": True,
        "report_to": "none",
        "per_device_train_batch_size": generations * prompts,
        "num_generations": generations,
        "max_completion_length": 8,
        "num_iterations": 2,  # old_per_token_logps: generation every 2 steps, 1 accumulation step
        "beta": 0.1,  # ref_per_token_logps, from a reference model loaded from `folder`
        "temperature": 1.0,
        "logging_steps": 1,
        "save_strategy": "no",
        "disable_tqdm": True,
        "seed": 0,
        **config,
    }
    data = Dataset.from_dict({"prompt": [" ".join(f"w{(3 * i + j) % 22}" for j in range(1 + i % 4)) for i in range(8)]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return trl.GRPOTrainer(
            model=str(folder),
            reward_funcs=_reward,
            args=trl.GRPOConfig(**args),
            train_dataset=data,
            processing_class=AutoTokenizer.from_pretrained(folder),
            rollout_func=rollout,
        )


def grpo_batch(trainer: Any, prompts: Sequence[str], *, seed: int = 0) -> dict[str, Any]:
    """The dict TRL's own ``_generate_and_score_completions`` returns for ``prompts``, each
    repeated ``num_generations`` times as TRL's sampler repeats them."""
    torch.manual_seed(seed)
    rows = [{"prompt": p} for p in prompts for _ in range(trainer.num_generations)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return trainer._generate_and_score_completions(rows)


def rollout_func(seed: int = 0, *, eos_every: int = 2) -> Callable[[list[str], Any], dict[str, Any]]:
    """A ``rollout_func`` (TRL's public hook for custom generation, as an environment
    would give one): random completions of 1..``max_completion_length`` tokens, every
    ``eos_every``-th ending in ``<eos>``, the generator's log-probs, and an ``env_mask`` of
    model tokens (1) then tool output (0), which TRL keeps as ``tool_mask``."""

    def rollout(prompts: list[str], trainer: Any) -> dict[str, Any]:
        tok = trainer.processing_class
        gen = torch.Generator().manual_seed(seed)
        top = trainer.max_completion_length
        out: dict[str, list[Any]] = {"completion_ids": [], "logprobs": [], "env_mask": []}
        for i in range(len(prompts)):
            n = int(torch.randint(1, top + 1, (1,), generator=gen))
            ids = torch.randint(2, len(WORDS), (n,), generator=gen).tolist()
            if i % eos_every == 0:
                ids[-1] = EOS
            out["completion_ids"].append(ids)
            out["logprobs"].append((-3 * torch.rand(n, generator=gen)).tolist())
            out["env_mask"].append([1] * (n - n // 3) + [0] * (n // 3))
        return {"prompt_ids": [tok(p)["input_ids"] for p in prompts], **out}

    return rollout


def as_vllm_run(trainer: Any, mode: str) -> Any:
    """``trainer`` switched, after it was built without vLLM, to the attributes a vLLM run has
    (``use_vllm``, importance sampling in ``mode``), so that TRL's own step computes
    ``importance_sampling_ratio`` from its ``rollout_func``'s log-probs; no vLLM runs (the
    rollout_func generates) and no weights are synced (the sync step is marked done)."""
    trainer.use_vllm = True
    trainer.vllm_importance_sampling_correction = True
    trainer.vllm_importance_sampling_mode = mode
    trainer._last_loaded_step = trainer.state.global_step
    return trainer
