"""Real TRL 1.16.0 batches, built once per module by TRL's own ``_generate_and_score_completions``.

Each batch comes from a ``GRPOTrainer`` over the tiny random model of ``tests/trl_support.py``;
``variant`` names the settings it was built with (see `VARIANTS`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trl_support import as_vllm_run, grpo_batch, make_trainer, rollout_func, tiny_model

#: The prompts: two groups of different prompt lengths (``w21`` first, standing for an image token).
PROMPTS = ["w21 w1 w2 w3", "w21 w4"]

#: Settings of each real batch: (trainer arguments, tokenizer's pad is its eos, vLLM importance-sampling mode).
VARIANTS: dict[str, tuple[dict[str, Any], bool, str | None]] = {
    "plain": ({}, False, None),
    "pad_to_multiple_of": ({"pad_to_multiple_of": 8, "max_completion_length": 6}, False, None),
    "eos_is_pad": ({}, True, None),
    "bf16_model": ({"model_init_kwargs": {"dtype": "bfloat16"}}, False, None),
    "rollout_token_is": ({"rollout": rollout_func()}, False, "token_truncate"),
    "rollout_sequence_is": ({"rollout": rollout_func()}, False, "sequence_mask"),
    "truncated_masked": ({"rollout": rollout_func(), "mask_truncated_completions": True}, False, "token_mask"),
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[bool, Path]]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is faster, and steady on a shared machine
    yield {pad: tiny_model(tmp_path_factory.mktemp(f"tiny-{pad}"), eos_is_pad=pad) for pad in (False, True)}
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def build(folders: dict[bool, Path]) -> Any:
    """``build(variant)``: the trainer and the real batch of that variant (made once per module)."""
    made: dict[str, tuple[Any, dict[str, Any]]] = {}

    def get(variant: str) -> tuple[Any, dict[str, Any]]:
        if variant not in made:
            config, eos_is_pad, is_mode = VARIANTS[variant]
            trainer = make_trainer(folders[eos_is_pad], **config)
            if is_mode is not None:
                as_vllm_run(trainer, is_mode)
            made[variant] = (trainer, grpo_batch(trainer, PROMPTS))
        return made[variant]

    return get


@pytest.fixture
def batch(build: Any) -> dict[str, Any]:
    """A fresh copy of the plain real batch (each test may break its own)."""
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in build("plain")[1].items()}
