"""The ``trl_grpo`` layout against batches TRL 1.16.0 built itself (``conftest.py``), and the
mistakes it exists to catch, each made on a copy of such a batch.

The accepted batches are TRL's own, in every setting that changes their shape on CPU; each
test first asserts that its batch really has the feature it is about (a row padded beyond
the longest under ``pad_to_multiple_of``, an eos equal to the pad inside a completion, ...),
so that none passes on a batch without it. The defect catalogue names, for each mistake,
the rows, keys and codes it must be reported at, derived from the mistake as it is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import trajschema as ts
import trajschema.trl as tt
from tests.trl.conftest import PROMPTS, VARIANTS
from tests.trl_support import WORDS

SCHEMA = ts.load_schema("text")
#: The id standing for an image token in the prompts (``w21`` starts each of them).
IMAGE = WORDS.index("w21")
#: Keys TRL's batch does not hold, and which the layout must not ask for.
NOT_IN_TRL = ("uid", "num_turns", "input_ids", "position_ids", "attention_mask")


def found(batch: Any, depth: str = "shapes", layout: Any = "trl_grpo", schema: Any = SCHEMA) -> set[tuple]:
    return {(v.sample, v.field, v.code) for v in schema.batch_violations(batch, layout=layout, depth=depth)}


def copy(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def lengths(batch: dict[str, Any], key: str) -> torch.Tensor:
    return batch[key].sum(1)


def short_row(batch: dict[str, Any], key: str) -> int:
    """A row whose mask ``key`` leaves padding (the defects below need one)."""
    rows = torch.nonzero(lengths(batch, key) < batch[key].shape[1]).flatten().tolist()
    assert rows, f"the real batch has no row shorter than {key}'s width: nothing to pad"
    return rows[0]


# -- TRL's own batches pass ---------------------------------------------------------------


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_trl_batches_pass_in_values_depth(build, variant):
    trainer, batch = build(variant)
    layout = tt.grpo_layout(
        pad_token_id=trainer.processing_class.pad_token_id,
        mask_truncated_completions=trainer.mask_truncated_completions,
    )
    assert not [k for k in NOT_IN_TRL if k in batch]
    assert SCHEMA.batch_violations(batch, layout=layout, depth="values") == []


@pytest.mark.parametrize("name", ts.schema_names())
def test_every_packaged_schema_takes_a_trl_batch(build, name):
    assert found(build("plain")[1], "values", schema=ts.load_schema(name)) == set()


def test_rows_longer_than_the_longest_under_pad_to_multiple_of(build):
    _, batch = build("pad_to_multiple_of")
    for ids, mask in (("prompt_ids", "prompt_mask"), ("completion_ids", "completion_mask")):
        width = batch[ids].shape[1]
        assert width % 8 == 0 and width > int(lengths(batch, mask).max())
    assert found(batch) == set()


def test_eos_equal_to_pad_inside_the_completion_mask(build):
    trainer, batch = build("eos_is_pad")
    pad = trainer.processing_class.pad_token_id
    assert pad == trainer.processing_class.eos_token_id
    c = lengths(batch, "completion_mask")
    last = batch["completion_ids"][torch.arange(len(c)), (c - 1).clamp(min=0)]
    assert bool(((last == pad) & (c < batch["completion_ids"].shape[1])).any())  # an eos that is the pad, inside
    assert found(batch, layout=tt.grpo_layout(pad_token_id=pad)) == set()


def test_tool_mask_is_padded_with_one(build):
    _, batch = build("rollout_token_is")
    c = lengths(batch, "completion_mask")
    padding = torch.arange(batch["tool_mask"].shape[1]) >= c[:, None]
    assert bool(padding.any()) and bool((batch["tool_mask"][padding] == 1).all())
    assert bool((batch["tool_mask"][~padding] == 0).any())  # tool output inside the completion
    assert found(batch) == set()


@pytest.mark.parametrize(("variant", "width"), [("rollout_token_is", "C"), ("rollout_sequence_is", 1)])
def test_importance_sampling_ratio_per_token_or_per_sequence(build, variant, width):
    _, batch = build(variant)
    ratio = batch["importance_sampling_ratio"]
    assert ratio.shape[1] == (batch["completion_ids"].shape[1] if width == "C" else 1)
    if width == "C":
        padding = torch.arange(ratio.shape[1]) >= lengths(batch, "completion_mask")[:, None]
        assert bool(padding.any()) and bool((ratio[padding] == 1.0).all())
    assert found(batch, "values") == set()


def test_truncated_rows_keep_their_tokens_under_mask_truncated_completions(build):
    trainer, batch = build("truncated_masked")
    masked = lengths(batch, "completion_mask") == 0
    assert bool(masked.any()) and bool((batch["completion_ids"][masked] != trainer.processing_class.pad_token_id).any())
    fitted = tt.grpo_layout(pad_token_id=trainer.processing_class.pad_token_id, mask_truncated_completions=True)
    assert found(batch, layout=fitted) == set()
    # the packaged layout, which does not know the setting, sees a zero tool mask in their
    # padding (a broken mask: the row's other fields say nothing more)
    rows = set(torch.nonzero(masked).flatten().tolist())
    assert found(batch) == {(r, "tool_mask", "mask") for r in rows}
    batch = copy(batch)
    del batch["tool_mask"]
    assert {(s, k) for s, k, _ in found(batch)} == {
        (r, k) for r in rows for k in ("completion_ids", "sampling_per_token_logps")
    }


def test_images_flattened_over_the_batch_are_shared_keys(batch):
    n = len(batch["advantages"])
    batch["pixel_values"] = torch.rand(3 * n + 1, 12)  # patches of every image, one after another
    batch["image_grid_thw"] = torch.tensor([[1, 2, 2]] * 3)
    assert found(batch) == set()
    batch["my_patches"] = batch.pop("pixel_values")  # a flattened key the layout does not declare shared
    assert found(batch) == {(None, "my_patches", "batch")}


def test_bf16_log_probs_are_accepted_float64_are_not(batch):
    batch["old_per_token_logps"] = batch["old_per_token_logps"].to(torch.bfloat16)
    assert found(batch, "values") == set()
    batch["old_per_token_logps"] = batch["old_per_token_logps"].double()
    assert found(batch) == {(None, "old_per_token_logps", "dtype")}


# -- odd batches ------------------------------------------------------------------------------


def test_one_row_and_no_rows(batch):
    one = {k: v[2:3] if isinstance(v, torch.Tensor) and v.dim() else v for k, v in batch.items()}
    assert found(one, "values") == set()
    empty = {k: v[:0] if isinstance(v, torch.Tensor) and v.dim() else v for k, v in batch.items()}
    assert found(empty, "values") == set()


def test_meta_tensors_cannot_be_read(batch):
    meta = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    assert (None, "prompt_mask", "mask") in found(meta)


def _seq_types(width: int) -> Callable[[dict[str, Any]], torch.Tensor]:
    """Token types ``width`` columns wider than ``prompt_ids`` and ``completion_ids`` together."""

    def make(b: dict[str, Any]) -> torch.Tensor:
        seq = b["prompt_ids"].shape[1] + b["completion_ids"].shape[1] + width
        return torch.zeros(len(b["advantages"]), seq, dtype=torch.long)

    return make


def _nested(key: str) -> Callable[[dict[str, Any]], torch.Tensor]:
    return lambda b: torch.nested.nested_tensor(list(b[key].reshape(len(b[key]), -1)))


#: id -> (the key, what it becomes, the code reported, what is found).
UNREADABLE: dict[str, tuple[str, Callable[[dict[str, Any]], torch.Tensor], str, str]] = {
    "token_type_ids_one_short": ("token_type_ids", _seq_types(-1), "shape", "int64[8,9]"),
    "mm_token_type_ids_one_long": ("mm_token_type_ids", _seq_types(1), "shape", "int64[8,11]"),
    "advantages_nested": ("advantages", _nested("advantages"), "kind", "f32 strided nested tensor of 8"),
    "completion_mask_nested": ("completion_mask", _nested("completion_mask"), "kind", "i64 strided nested tensor of 8"),
    "logps_nested": ("old_per_token_logps", _nested("old_per_token_logps"), "kind", "f32 strided nested tensor of 8"),
    "completion_mask_sparse": (
        "completion_mask",
        lambda b: b["completion_mask"].to_sparse(),
        "kind",
        "i64[8,6] sparse_coo",
    ),
}


@pytest.mark.parametrize("case", sorted(UNREADABLE))
@pytest.mark.parametrize("depth", ["shapes", "values"])
def test_a_column_of_the_wrong_width_or_kind_is_reported_not_raised(batch, case, depth):
    key, make, code, actual = UNREADABLE[case]
    widths = (len(batch["advantages"]), batch["prompt_ids"].shape[1], batch["completion_ids"].shape[1])
    assert widths == (8, 4, 6), "the cases below are written for the plain batch's widths"
    batch[key] = make(batch)
    (v,) = SCHEMA.batch_violations(batch, layout="trl_grpo", depth=depth)
    assert (v.sample, v.field, v.code, v.actual) == (None, key, code, actual)
    want = {"advantages": "(8)", "token_type_ids": "(8, 10)", "mm_token_type_ids": "(8, 10)"}.get(key, "(8, 6)")
    assert v.expected == (want if code == "shape" else f"a dense (strided) tensor {want}")
    assert want in v.message and actual in v.message
    if code == "shape":
        assert v.message.endswith("; seq = prompt 4 + response 6")


# -- the defect catalogue ---------------------------------------------------------------------


def _grouped_advantages(b: dict[str, Any]) -> set[tuple]:  # TRL #6804
    b["advantages"] = b["advantages"].view(len(PROMPTS), -1)
    return {(None, "advantages", "batch")}


def _mm_types_right_padded(b: dict[str, Any]) -> set[tuple]:  # TRL #5785
    prompt = (b["prompt_ids"] == IMAGE).long() * b["prompt_mask"]
    shift = b["prompt_mask"].shape[1] - lengths(b, "prompt_mask")
    right = torch.stack([row.roll(-int(s)) for row, s in zip(prompt, shift)])
    b["mm_token_type_ids"] = torch.cat([right, torch.zeros_like(b["completion_ids"])], 1)
    return {(r, "mm_token_type_ids", "padded") for r in torch.nonzero(shift).flatten().tolist()}


def _completion_mask_one_short(b: dict[str, Any]) -> set[tuple]:
    c = lengths(b, "completion_mask")
    r = int(torch.nonzero(c >= 2).flatten()[0])
    b["completion_mask"][r, int(c[r]) - 1] = 0  # the last token (its eos) left out of the mask
    return {(r, k, "padded") for k in ("completion_ids", "old_per_token_logps", "ref_per_token_logps")}


def _completion_mask_left_padded(b: dict[str, Any]) -> set[tuple]:
    r = short_row(b, "completion_mask")
    b["completion_mask"][r] = b["completion_mask"][r].flip(0)
    return {(r, "completion_mask", "mask")}


def _prompt_mask_right_padded(b: dict[str, Any]) -> set[tuple]:
    r = short_row(b, "prompt_mask")
    b["prompt_mask"][r] = b["prompt_mask"][r].flip(0)
    return {(r, "prompt_mask", "mask")}


def _logps_off_the_mask(b: dict[str, Any]) -> set[tuple]:
    r = short_row(b, "completion_mask")
    b["old_per_token_logps"][r, int(lengths(b, "completion_mask")[r]) :] = -0.5
    return {(r, "old_per_token_logps", "padded")}


def _token_in_prompt_padding(b: dict[str, Any]) -> set[tuple]:
    r = short_row(b, "prompt_mask")
    b["prompt_ids"][r, 0] = IMAGE
    return {(r, "prompt_ids", "padded")}


def _advantages_per_token(b: dict[str, Any]) -> set[tuple]:
    b["advantages"] = b["advantages"][:, None].expand_as(b["completion_mask"]).contiguous()
    return {(None, "advantages", "shape")}


def _logps_one_column_short(b: dict[str, Any]) -> set[tuple]:
    b["old_per_token_logps"] = b["old_per_token_logps"][:, :-1]
    return {(None, "old_per_token_logps", "shape")}


def _float_completion_mask(b: dict[str, Any]) -> set[tuple]:
    b["completion_mask"] = b["completion_mask"].float() * 0.5
    return {(None, "completion_mask", "mask")} | {(r, "completion_mask", "mask") for r in range(len(b["advantages"]))}


def _positive_ref_logp(b: dict[str, Any]) -> set[tuple]:
    b["ref_per_token_logps"][3, 0] = 0.25
    return {(3, "ref_per_token_logps", "value")}


def _nan_advantage(b: dict[str, Any]) -> set[tuple]:
    b["advantages"][5] = float("nan")
    return {(5, "advantages", "value")}


#: id -> (the mistake, made on a copy of the plain batch, returning where it must be reported; depth).
DEFECTS: dict[str, tuple[Callable[[dict[str, Any]], set[tuple]], str]] = {
    "advantages_grouped_trl6804": (_grouped_advantages, "shapes"),
    "mm_token_type_ids_right_padded_trl5785": (_mm_types_right_padded, "shapes"),
    "completion_mask_one_short": (_completion_mask_one_short, "shapes"),
    "completion_mask_left_padded": (_completion_mask_left_padded, "shapes"),
    "prompt_mask_right_padded": (_prompt_mask_right_padded, "shapes"),
    "logps_nonzero_off_the_mask": (_logps_off_the_mask, "shapes"),
    "token_in_prompt_padding": (_token_in_prompt_padding, "shapes"),
    "advantages_per_token": (_advantages_per_token, "shapes"),
    "logps_one_column_short": (_logps_one_column_short, "shapes"),
    "completion_mask_float_halves": (_float_completion_mask, "shapes"),
    "ref_logp_above_zero": (_positive_ref_logp, "values"),
    "advantage_nan": (_nan_advantage, "values"),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_defect_is_caught_at_its_rows_and_keys(batch, defect):
    make, depth = DEFECTS[defect]
    assert found(batch, depth) == set()
    want = make(batch)
    assert want, "a defect must name where it is reported"
    assert found(batch, depth) == want


def test_left_padded_mm_token_type_ids_pass(batch):
    prompt = (batch["prompt_ids"] == IMAGE).long() * batch["prompt_mask"]
    assert bool(prompt.any())
    batch["mm_token_type_ids"] = torch.cat([prompt, torch.zeros_like(batch["completion_ids"])], 1)
    assert found(batch, "values") == set()


def _tool_mask_padded_with_zero(b: dict[str, Any]) -> set[tuple]:
    r = short_row(b, "completion_mask")
    b["tool_mask"][r, int(lengths(b, "completion_mask")[r]) :] = 0
    return {(r, "tool_mask", "mask")}


def _ratio_not_one_in_padding(b: dict[str, Any]) -> set[tuple]:
    r = short_row(b, "completion_mask")
    b["importance_sampling_ratio"][r, -1] = 0.0
    return {(r, "importance_sampling_ratio", "padded")}


def _sampling_logps_off_the_mask(b: dict[str, Any]) -> set[tuple]:
    r = short_row(b, "completion_mask")
    b["sampling_per_token_logps"][r, -1] = -1.0
    return {(r, "sampling_per_token_logps", "padded")}


@pytest.mark.parametrize("make", [_tool_mask_padded_with_zero, _ratio_not_one_in_padding, _sampling_logps_off_the_mask])
def test_defect_in_a_rollout_batch(build, make):
    b = copy(build("rollout_token_is")[1])
    want = make(b)
    assert found(b) == want
