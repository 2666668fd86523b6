"""`trajschema.skyrl.pad_training_input_batch` on SkyRL 0.3.0's SFT batches, SkyRL's own
``collate_sft_batch`` and ``pad_training_input_batch`` as the oracle.

``skyrl.train.sft_trainer`` imports SkyRL's trainer stack, which needs jaxtyping >= 0.3.0: the
floor run (jaxtyping 0.2.36) leaves this file out, as it does ``test_patch.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trajschema.skyrl as sk
from tests.skyrl_support import TRAINING_BATCH, import_skyrl, tokens


def theirs(batch: Any, pad: int) -> Any:
    return import_skyrl(TRAINING_BATCH).pad_training_input_batch(batch, pad)


def entries(col: Any) -> list[torch.Tensor]:
    return list(col.tensors)


SFT = "skyrl.train.sft_trainer"


def sft_batch(images: bool = False) -> Any:
    """Three examples collated by SkyRL's own ``collate_sft_batch`` (left-padded, loss masks per action)."""
    lens, actions = [5, 3, 7], [3, 2, 4]
    examples = []
    g = torch.Generator().manual_seed(1)
    for i, (n, a) in enumerate(zip(lens, actions)):
        ex: dict[str, Any] = {
            "input_ids": tokens(n, 10 * (i + 1)),
            "attention_mask": [1] * n,
            "num_actions": a,
            "loss_mask": [1] * (a - 1) + [0],
        }
        if images:
            ex["pixel_values"] = torch.randn(4 * (i + 1), 6, generator=g)
            ex["image_grid_thw"] = torch.tensor([[1, 2, 2 * (i + 1)]])
        examples.append(ex)
    return import_skyrl(SFT).collate_sft_batch(examples, type("Tok", (), {"pad_token_id": 0})())


@pytest.mark.parametrize("images", [False, True], ids=["text", "vlm"])
def test_sft_batches_pad_like_skyrls_without_row_0s_tokens_or_images(images):
    batch = sft_batch(images)
    assert sk.is_sft_batch(batch)
    ours, ref = sk.pad_training_input_batch(sft_batch(images), 2), theirs(sft_batch(images), 2)
    assert type(ours) is type(ref) and list(ours) == list(ref)
    for key, col in ref.items():
        if col is None:
            assert ours[key] is None
        elif isinstance(col, torch.Tensor):
            assert ours[key].shape == col.shape and ours[key].dtype == col.dtype, key
            assert torch.equal(ours[key][:3], batch[key]), key
        else:
            assert len(ours[key]) == len(col) == 5
            assert all(torch.equal(a, b) for a, b in zip(entries(ours[key])[:3], entries(batch[key])))
            assert [t.shape[0] for t in entries(ours[key])[3:]] == [0, 0]  # SkyRL: row 0's images again
            assert all(torch.equal(t, entries(batch[key])[0]) for t in entries(col)[3:])
    assert ours.metadata["is_padding"] == [False] * 3 + [True] * 2
    assert ours.metadata["pad_size"] == 2 and ours.metadata["response_length"] == batch.metadata["response_length"]
    pad_att, pad_seq = ours["attention_mask"][3:], ours["sequences"][3:]
    assert pad_att.sum(1).tolist() == [1, 1] and pad_att[:, -1].tolist() == [1, 1]  # one real token, at the end
    assert not ours["loss_mask"][3:].any()
    assert (pad_seq[:, :-1] == 0).all() and pad_seq[:, -1].tolist() == [int(batch["sequences"][0, -1])] * 2
    assert torch.equal(ref["sequences"][3], batch["sequences"][0])  # what SkyRL pads with: row 0


@pytest.mark.parametrize(
    ("key", "value", "error"),
    [
        ("attention_mask", torch.ones(3, 2, dtype=torch.long), ValueError),
        ("loss_mask", torch.full((3, 4), 2, dtype=torch.long), ValueError),
        ("sequences", torch.zeros(3, dtype=torch.long), TypeError),
        ("loss_mask", torch.zeros(3, 4, device="meta"), TypeError),
    ],
)
def test_a_malformed_sft_batch_is_refused_before_anything_is_built(key, value, error):
    batch = sft_batch()
    batch[key] = value
    with pytest.raises(error, match=key):
        sk.pad_training_input_batch(batch, 2)
