"""Samples with the field layouts TransferQueue must carry; shared by the layout tests.

Values are arbitrary (token ids are random, not prompt + response), so these samples
exercise storage layouts, not schemas: schema tests use ``trajschema.testing.verl_sample``.
"""

from __future__ import annotations

import torch

from trajschema.testing import random_routes


def layout_sample(p: int, r: int, *, mrope: int = 0, layers: int = 2, topk: int = 3, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    s = p + r
    pos = torch.arange(s)
    return {
        "prompts": torch.randint(0, 1000, (p,), generator=g),
        "responses": torch.randint(0, 1000, (r,), generator=g),
        "input_ids": torch.randint(0, 1000, (s,), generator=g),
        "position_ids": pos.expand(mrope, s).clone() if mrope else pos,
        "response_mask": torch.ones(r, dtype=torch.int64),
        "loss_mask": torch.ones(r, dtype=torch.int64),
        "rollout_log_probs": torch.randn(r, generator=g),
        "routed_experts": random_routes(s, layers, topk, experts=64, generator=g),
        "num_turns": 1 + seed,
        "uid": f"uid-{seed}",
        "multi_modal_inputs": {"image_grid_thw": torch.tensor([[1, 2, 2]])} if mrope else {},
    }
