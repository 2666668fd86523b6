"""Packed batches for the tests: real samples of a packaged schema packed in ``thd``."""

from __future__ import annotations

from typing import Any

import trajschema as ts
from trajschema.testing import verl_sample

SCHEMAS = ["text", "vlm_mrope", "moe_routed", "distill", "vlm_mrope_moe"]
LENGTHS = [(3, 2), (1, 0), (5, 4), (2, 3)]


def rows_of(schema: str, lengths: list[tuple[int, int]] = LENGTHS) -> list[dict[str, Any]]:
    rows = [verl_sample(schema, p, r, seed=i, uid=f"q{i // 2}") for i, (p, r) in enumerate(lengths)]
    for r in rows:
        r["loss_mask"] = r["response_mask"].clone()
    return rows


def thd(alignment: int = 4, pad: int = 0) -> ts.PackedLayout:
    layout = ts.load_layout("thd")
    assert isinstance(layout, ts.PackedLayout)
    return layout.with_pad_token(pad).with_alignment(alignment)


def packed(schema: str = "text", lengths: list[tuple[int, int]] = LENGTHS, alignment: int = 4) -> ts.PackedBatch:
    rows = rows_of(schema, lengths)
    return ts.load_schema(schema).to_packed(rows, layout=thd(alignment), tags=[{"is_padding": False}] * len(rows))


def codes(found: list[ts.Violation]) -> list[tuple[int | None, str, str]]:
    return [(v.sample, v.field, v.code) for v in found]
