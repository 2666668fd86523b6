"""The demo's data: a synthetic multi-trajectory rollout, and the metrics a trainer logs for it.

`build_rollout` makes what a verl-style rollout writes for one PPO/GRPO step:
every prompt gets an uneven number of trajectories (a multi-turn agent ends some early
and branches others), responses are cut at `MAX_RESPONSE_LEN` tokens the way a
rollout engine truncates them, and each trajectory carries an outcome reward on its
last token. `rollout_metrics` computes the numbers verl's data metrics log for
such a batch, from the tensors alone; wrapped in [`exclude_padding`][trajschema.exclude_padding] it
sees real samples only.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from trajschema.check import batch_view
from trajschema.schema import Schema
from trajschema.testing import verl_sample

__all__ = ["EOS_TOKEN_ID", "MAX_RESPONSE_LEN", "Rollout", "build_rollout", "rollout_metrics"]

#: Qwen's ``<|endoftext|>``, the EOS id padding samples are filled with.
EOS_TOKEN_ID = 151643
#: The rollout's ``max_response_length``: longer responses are truncated to it (clipped).
MAX_RESPONSE_LEN = 64
# MoE routing of a Qwen3-VL-MoE-sized model, for schemas with routed_experts.
_LAYERS, _TOPK = 48, 8
# Prompts are 8..96 tokens; responses are drawn up to a quarter past the cap, so about
# one in five is clipped, as in a rollout whose max_response_length is a little short.
_PROMPT_LEN = (8, 96)
_RESPONSE_DRAW = (1, MAX_RESPONSE_LEN + MAX_RESPONSE_LEN // 4)


@dataclasses.dataclass(frozen=True)
class Rollout:
    """One step's rollout: a key (``{uid}_{trajectory}_0``, verl's layout) per sample, and the samples."""

    keys: list[str]
    samples: list[dict[str, Any]]
    prompts: int

    @property
    def trajectories_per_prompt(self) -> tuple[int, int]:
        """(fewest, most) trajectories any prompt got."""
        counts: dict[str, int] = {}
        for sample in self.samples:
            counts[sample["uid"]] = counts.get(sample["uid"], 0) + 1
        return min(counts.values()), max(counts.values())


def build_rollout(schema: Schema, prompts: int, rollout_n: int, seed: int) -> Rollout:
    """Samples of ``prompts`` GRPO groups with 1 to ``2 * rollout_n - 1`` trajectories each, for ``schema``.

    Deterministic for a given ``seed``. Each prompt has a difficulty: the chance that a
    trajectory of it earns reward 1.

    Examples:
        >>> import trajschema as ts
        >>> rollout = build_rollout(ts.load_schema("text"), prompts=3, rollout_n=2, seed=0)
        >>> len(rollout.keys) == len(rollout.samples), rollout.keys[0]
        (True, 'prompt0_0_0')
    """
    rng = random.Random(seed)
    keys: list[str] = []
    samples: list[dict[str, Any]] = []
    for p in range(prompts):
        uid = f"prompt{p}"
        prompt_len = rng.randint(*_PROMPT_LEN)
        solve_rate = rng.random()
        for t in range(rng.randint(1, 2 * rollout_n - 1)):
            response_len = min(rng.randint(*_RESPONSE_DRAW), MAX_RESPONSE_LEN)
            sample_seed = seed * 1_000_003 + 1000 * p + t
            sample = verl_sample(
                schema, prompt_len, response_len, uid=uid, layers=_LAYERS, topk=_TOPK, seed=sample_seed
            )
            sample["session_id"] = t
            sample["num_turns"] = rng.randint(1, 3)
            sample["rm_scores"] = torch.zeros(response_len)
            sample["rm_scores"][-1] = float(rng.random() < solve_rate)
            keys.append(f"{uid}_{t}_0")
            samples.append(sample)
    return Rollout(keys=keys, samples=samples, prompts=prompts)


def rollout_metrics(batch: Any, tags: Sequence[Mapping[str, Any] | None]) -> dict[str, float]:
    """verl-style data metrics of a batch: mean score, response and prompt length, response clip ratio.

    Lengths come from the tensors (``response_mask`` summed, as verl does, and the
    ``prompts`` row length), the score is ``rm_scores`` summed per sample; ``tags`` are
    not read (they are there for [`exclude_padding`][trajschema.exclude_padding]). A padding sample
    counts like any other, which is the point of comparing with the filtered version.

    Examples:
        >>> import trajschema as ts
        >>> rollout = build_rollout(ts.load_schema("text"), prompts=2, rollout_n=2, seed=0)
        >>> sorted(rollout_metrics(rollout.samples, [{}] * len(rollout.samples)))
        ['prompt_length/mean', 'response_length/clip_ratio', 'response_length/mean', 'score/mean']
    """
    view = batch_view(batch)
    f64 = torch.float64  # means of a few hundred values, exact to the digits printed
    response = torch.tensor([float(m.sum()) for m in view.values_of("response_mask")], dtype=f64)
    prompt = torch.tensor([float(p.numel()) for p in view.values_of("prompts")], dtype=f64)
    score = torch.tensor([float(s.sum()) for s in view.values_of("rm_scores")], dtype=f64)
    return {
        "score/mean": score.mean().item(),
        "response_length/mean": response.mean().item(),
        "response_length/clip_ratio": (response >= MAX_RESPONSE_LEN).to(f64).mean().item(),
        "prompt_length/mean": prompt.mean().item(),
    }
