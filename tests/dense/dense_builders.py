"""Hand-built dense batches for the dense checks: the two packaged layouts, from per-row
prompt and response lengths, written out the way the trainers write them (no trajschema
code involved, so the checks are tested against an independent construction)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

PAD = 0
LAYERS, TOPK, EXPERTS, ROPE_ROWS, TEACHER_K = 2, 2, 8, 4, 3


class TensorBatch(dict):
    """SkyRL's ``TensorBatch``: a dict with ``.metadata`` (duck-typed, as the check reads it)."""

    metadata: dict


class DataProto:
    """verl's ``DataProto``, duck-typed: ``.batch``, ``.non_tensor_batch``, ``.meta_info``."""

    def __init__(self, batch: Any, non_tensor_batch: dict, meta_info: dict | None = None) -> None:
        self.batch, self.non_tensor_batch, self.meta_info = batch, non_tensor_batch, meta_info or {}


def _tokens(n: int, seed: int) -> torch.Tensor:
    return torch.arange(1, n + 1, dtype=torch.int64) + 100 * seed


def _routes(n: int) -> torch.Tensor:
    tok = torch.arange(n)[:, None, None]
    return ((tok + torch.arange(LAYERS)[None, :, None] + torch.arange(TOPK)[None, None, :]) % EXPERTS).to(torch.int32)


def skyrl_batch(schema: str, lengths: Sequence[tuple[int, int]]) -> TensorBatch:
    """A SkyRL 0.3.0 ``TrainingInputBatch`` layout: one left-padded block per sequence,
    response-level tensors right-aligned in ``(B, max R)``."""
    b = len(lengths)
    s = max((p + r for p, r in lengths), default=0)
    rm = max((r for _, r in lengths), default=0)
    seq = torch.full((b, s), PAD, dtype=torch.int64)
    att = torch.zeros((b, s), dtype=torch.int64)
    act = torch.zeros((b, rm), dtype=torch.int64)
    routes = torch.zeros((b, s, LAYERS, TOPK), dtype=torch.int32)
    for i, (p, r) in enumerate(lengths):
        seq[i, s - p - r :] = _tokens(p + r, i)
        att[i, s - p - r :] = 1
        act[i, rm - r :] = 1
        routes[i, s - p - r :] = _routes(p + r)
    out = TensorBatch(
        sequences=seq,
        attention_mask=att,
        response_mask=act,
        rewards=act.float() * 0.5,
        loss_mask=act.float(),
        rollout_logprobs=act.float() * -0.25,
    )
    if "moe" in schema:
        out["rollout_expert_indices"] = routes.to(torch.uint8)
    if "vlm" in schema:
        out["pixel_values"] = [torch.zeros(2, 3) for _ in range(b)]
        out["image_grid_thw"] = [torch.tensor([[1, 1, 2]]) for _ in range(b)]
    out.metadata = {"uids": [f"u{i // 2}" for i in range(b)]}
    return out


def verl_batch(schema: str, lengths: Sequence[tuple[int, int]], extra: int = 2, as_dict: bool = True) -> Any:
    """verl 0.9.1's ``DataProto`` layout: prompts left-padded to a fixed length, responses
    right-padded to a fixed length, full-sequence tensors their concatenation."""
    b = len(lengths)
    pm = max((p for p, _ in lengths), default=0) + extra
    rm = max((r for _, r in lengths), default=0) + extra
    prompts = torch.full((b, pm), PAD, dtype=torch.int64)
    responses = torch.full((b, rm), PAD, dtype=torch.int64)
    pmask = torch.zeros((b, pm), dtype=torch.int64)
    rmask = torch.zeros((b, rm), dtype=torch.int64)
    for i, (p, r) in enumerate(lengths):
        tokens = _tokens(p + r, i)
        prompts[i, pm - p :], responses[i, :r] = tokens[:p], tokens[p:]
        pmask[i, pm - p :], rmask[i, :r] = 1, 1
    att = torch.cat([pmask, rmask], 1)
    pos = torch.clip(torch.cumsum(att, 1) - 1, min=0)
    out: dict[str, Any] = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], 1),
        "attention_mask": att,
        "position_ids": pos,
        "response_mask": rmask.clone(),
        "rollout_log_probs": rmask.float() * -0.25,
        "rm_scores": rmask.float() * 0.5,
    }
    if "mrope" in schema:
        out["position_ids"] = torch.where(att.bool()[:, None, :], pos[:, None, :].expand(b, ROPE_ROWS, -1), 1)
    if "moe" in schema:
        routes = torch.zeros((b, pm + rm, LAYERS, TOPK), dtype=torch.int16)
        for i, (p, r) in enumerate(lengths):
            routes[i, pm - p : pm + r] = _routes(p + r).to(torch.int16)
        out["routed_experts"] = routes
    if schema == "distill":
        t = torch.arange(TEACHER_K)[None, None, :] + torch.zeros((b, pm + rm, 1), dtype=torch.int64)
        out["teacher_ids"] = torch.where(att.bool()[..., None], t + 1, PAD)
        out["teacher_logprobs"] = att[..., None].float().expand(-1, -1, TEACHER_K) * -1.0
    non_tensor = {
        "uid": np.array([f"u{i // 2}" for i in range(b)], dtype=object),
        "__num_turns__": np.array([1] * b, dtype=np.int32),
    }
    if "vlm" in schema:
        non_tensor["multi_modal_inputs"] = np.array(
            [{"pixel_values": torch.zeros(2, 3)} for _ in range(b)], dtype=object
        )
    if as_dict:
        return {**out, **non_tensor}
    from tensordict import TensorDict

    return DataProto(TensorDict(out, batch_size=[b]), non_tensor)
