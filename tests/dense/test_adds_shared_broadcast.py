"""Three keys of the dense layout language a trainer's own columns need (TRL's GRPO batch first):
``adds`` (fields no schema declares, checked over the schema's dims), ``shared`` (keys held
once for the batch, not one entry per row) and ``broadcast`` (a field held with size 1 along
its padded axis). Real TRL batches are checked in ``tests/trl/``; these pin the rules on
small hand-made batches of a layout written here."""

from __future__ import annotations

import pytest
import torch

import trajschema as ts
from trajschema.files import layout_from_dict

SCHEMA = ts.load_schema("text")
LAYOUT = layout_from_dict(
    {
        "name": "two_halves",
        "axes": {"prompt": {"pad_side": "left"}, "response": {"pad_side": "right"}},
        "sizes": {"prompt": "prompt_mask", "response": "response_mask"},
        "adds": {
            "prompt_mask": {"shape": ["prompt"], "dtype": "int64", "values": [0, 1]},
            "score": {"shape": [], "dtype": "float32", "finite": True},
            "ratio": {"shape": ["response"], "dtype": "float32", "min": 0, "required": False},
        },
        "fields": {
            "prompts": {"pad": 0},
            "responses": {"pad": 0},
            "response_mask": {"pad": 0},
            "ratio": {"pad": 1.0, "broadcast": True},
            **dict.fromkeys(("input_ids", "position_ids", "loss_mask", "num_turns", "uid"), "absent"),
        },
        "shared": ["patches"],
    },
    source="two_halves.yaml",
)


def batch() -> dict:
    return {
        "prompts": torch.tensor([[0, 5, 6], [7, 8, 9]]),
        "prompt_mask": torch.tensor([[0, 1, 1], [1, 1, 1]]),
        "responses": torch.tensor([[3, 4], [2, 0]]),
        "response_mask": torch.tensor([[1, 1], [1, 0]]),
        "score": torch.tensor([0.5, -0.5]),
        "ratio": torch.tensor([[0.9, 1.1], [0.8, 1.0]]),
    }


def found(b: dict, depth: str = "shapes") -> set[tuple]:
    return {(v.sample, v.field, v.code) for v in SCHEMA.batch_violations(b, layout=LAYOUT, depth=depth)}


def test_a_clean_batch_passes_and_added_fields_come_back_from_dense() -> None:
    assert found(batch(), "values") == set()
    rows = SCHEMA.from_dense(batch(), layout=LAYOUT)
    assert rows[0]["prompt_mask"].tolist() == [1, 1] and rows[1]["ratio"].tolist() == pytest.approx([0.8])
    assert float(rows[0]["score"]) == 0.5


def test_added_fields_are_checked_like_the_schemas_own() -> None:
    b = batch()
    del b["score"]
    assert found(b) == {(None, "score", "missing")}
    b = batch()
    b["score"] = torch.tensor([float("nan"), 0.0])
    assert found(b, "values") == {(0, "score", "value")}
    b = batch()
    b["prompt_mask"] = torch.tensor([[1, 1, 0], [1, 1, 1]])  # padded on the right
    assert found(b) == {(0, "prompt_mask", "mask")}
    b = batch()
    del b["ratio"]  # required: false
    assert found(b) == set()


def test_a_broadcast_field_is_size_one_or_the_axis_width() -> None:
    b = batch()
    b["ratio"] = torch.tensor([[1.2], [0.7]])
    assert found(b, "values") == set()
    assert SCHEMA.from_dense(b, layout=LAYOUT)[0]["ratio"].tolist() == pytest.approx([1.2, 1.2])
    b["ratio"] = torch.tensor([[-1.0], [0.7]])
    assert found(b, "values") == {(0, "ratio", "value")}
    b["ratio"] = torch.ones(2, 3)
    assert found(b) == {(None, "ratio", "shape")}
    b = batch()
    b["ratio"][1, 1] = 0.0  # the per-token form still holds its pad
    assert found(b) == {(1, "ratio", "padded")}


def test_shared_keys_are_not_counted_as_rows() -> None:
    b = batch()
    b["patches"] = torch.rand(5, 4)
    assert found(b) == set()
    b["others"] = torch.rand(5, 4)
    assert found(b) == {(None, "others", "batch")}
