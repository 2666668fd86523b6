"""SkyRL 0.3.0 for the oracle tests: its modules (through the Python 3.11 import shim of
``tests/skyrl_shim.py``, which says why it is needed and what it touches) and batch builders.

A missing SkyRL skips the test that needs it, naming why; ``.ci/run`` sets
``TRAJSCHEMA_REQUIRE_SKYRL=1``, and then a missing SkyRL fails the test instead. A
``skyrl`` that is no installed SkyRL (a namespace package, a folder of ``tests/``) counts
as missing (``tests/trainer_import.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch

from tests.skyrl_shim import import_skyrl_module, shimmed_modules

__all__ = ["import_skyrl", "routes", "shimmed_modules", "skyrl_batch", "tokens"]

REQUIRED = os.environ.get("TRAJSCHEMA_REQUIRE_SKYRL") == "1"
PREPROCESS = "skyrl.train.dataset.preprocess"
TRAINING_BATCH = "skyrl.backends.skyrl_train.training_batch"


def import_skyrl(name: str) -> ModuleType:
    """``importlib.import_module(name)`` of a SkyRL module (through the 3.11 shim), or skip
    (fail under ``TRAJSCHEMA_REQUIRE_SKYRL=1``) naming why."""
    try:
        return import_skyrl_module(name)
    except ImportError as exc:
        why = (
            f"SkyRL 0.3.0 is not importable ({exc}); "
            "install it with pip install --no-deps -r .ci/skyrl-requirements.txt"
        )
        if REQUIRED:
            pytest.fail(f"TRAJSCHEMA_REQUIRE_SKYRL=1 but {why}")
        pytest.skip(why)


# -- batches as SkyRL builds them ------------------------------------------------------

#: The pad id of the tokenizer stand-in (``convert_prompts_responses_to_batch_tensors``
#: reads only ``tokenizer.pad_token_id``).
PAD = 0


def skyrl_batch(
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    *,
    loss_masks: Sequence[Sequence[int]] | None = None,
    rewards: Sequence[Sequence[float]] | None = None,
    logprobs: Sequence[Sequence[float]] | None = None,
    experts: Sequence[Any] | None = None,
    images: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None,
    uids: Sequence[str] | None = None,
) -> Any:
    """A ``TrainingInputBatch`` built as ``RayPPOTrainer.convert_to_training_input`` builds it.

    SkyRL's own ``convert_prompts_responses_to_batch_tensors`` pads; the wrapping (keys,
    ``TensorList`` images, ``metadata = {"uids": ...}``) is the trainer's step 3, copied
    because the method itself needs a whole trainer (config, Ray, tracker) around it.
    ``experts[i]`` is a ``(P_i + R_i, layers, topk)`` nested list or tensor.
    """
    preprocess = import_skyrl(PREPROCESS)
    tb = import_skyrl(TRAINING_BATCH)
    n = len(prompts)
    loss_masks = loss_masks if loss_masks is not None else [[1] * len(r) for r in responses]
    rewards = rewards if rewards is not None else [[0.0] * (len(r) - 1) + [1.0] if r else [] for r in responses]
    routes = [e.tolist() if isinstance(e, torch.Tensor) else e for e in experts] if experts is not None else None
    seqs, attn, resp, rew, loss, lp, idx = preprocess.convert_prompts_responses_to_batch_tensors(
        SimpleNamespace(pad_token_id=PAD),
        [list(p) for p in prompts],
        [list(r) for r in responses],
        [list(x) for x in rewards],
        [list(m) for m in loss_masks],
        [list(x) for x in logprobs] if logprobs is not None else None,
        routes,
    )
    batch = tb.TrainingInputBatch(
        {
            "sequences": seqs,
            "attention_mask": attn,
            "response_mask": resp,
            "rewards": rew,
            "loss_mask": loss,
            "rollout_logprobs": lp,
            "rollout_expert_indices": idx,
            "pixel_values": tb.TensorList([im[0] for im in images]) if images is not None else None,
            "image_grid_thw": tb.TensorList([im[1] for im in images]) if images is not None else None,
        }
    )
    batch.metadata = {"uids": list(uids) if uids is not None else [f"u{i // 2}" for i in range(n)]}
    return batch


def tokens(n: int, start: int = 1) -> list[int]:
    """``n`` non-pad token ids."""
    return [start + (i % 97) for i in range(n)]


def routes(length: int, layers: int, topk: int, experts: int, seed: int = 0) -> torch.Tensor:
    """``(length, layers, topk)`` distinct expert ids per token, all ``< experts``."""
    g = torch.Generator().manual_seed(seed)
    if length == 0:
        return torch.zeros(0, layers, topk, dtype=torch.int64)
    return torch.rand(length, layers, experts, generator=g).argsort(-1)[..., :topk]
