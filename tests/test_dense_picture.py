"""The dense-batch pictures of ``docs/dense.md`` (``docs_hooks.dense_picture``).

Checked against references computed here from the lengths and the layout files' words
(which side pads, which dims a block holds), not from the helper's own arithmetic.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import trajschema as ts
from docs_hooks import dense_picture

ROOT = Path(__file__).resolve().parents[1]
P = [p for p, _ in dense_picture.LENGTHS]
R = [r for _, r in dense_picture.LENGTHS]


@pytest.fixture(scope="module", params=sorted(dense_picture.DRAWN))
def example(request: pytest.FixtureRequest) -> dense_picture.DenseExample:
    return dense_picture.dense_example(request.param)


def _expected_regions(layout: str, field: str) -> list[list[str]]:
    """What each position is, written out from the two layouts' descriptions."""
    pm, rm, sm = max(P), max(R), max(p + r for p, r in dense_picture.LENGTHS)
    rows = []
    for p, r in dense_picture.LENGTHS:
        prompt_block = ["pad"] * (pm - p) + ["prompt"] * p  # left-padded prompts (verl)
        response_block = ["response"] * r + ["pad"] * (rm - r)  # right-padded responses (verl)
        right_aligned = ["pad"] * (rm - r) + ["response"] * r  # SkyRL's response-level tensors
        one_block = ["pad"] * (sm - p - r) + ["prompt"] * p + ["response"] * r  # SkyRL's sequences
        rows.append(
            {
                ("verl_dataproto", "prompts"): prompt_block,
                ("verl_dataproto", "responses"): response_block,
                ("verl_dataproto", "response_mask"): response_block,
                ("verl_dataproto", "seq"): prompt_block + response_block,
                ("skyrl", "response"): right_aligned,
                ("skyrl", "seq"): one_block,
                ("trl_grpo", "prompts"): prompt_block,  # TRL pads as verl, without the full sequence
                ("trl_grpo", "prompt_mask"): prompt_block,
                ("trl_grpo", "responses"): response_block,
                ("trl_grpo", "response_mask"): response_block,
            }[(layout, field)]
        )
    return rows


def _key(layout: str, field: str) -> str:
    if field in ("input_ids", "attention_mask", "position_ids"):
        return "seq"
    if layout == "skyrl":
        return "response"
    return field


def test_regions_follow_the_layout(example: dense_picture.DenseExample) -> None:
    name = example.layout.name
    for field in dense_picture.DRAWN[name]:
        assert dense_picture.region_rows(example, field) == _expected_regions(name, _key(name, field)), field


def test_the_pictured_batch_is_clean_and_round_trips(example: dense_picture.DenseExample) -> None:
    layout = example.layout.with_pad_token(dense_picture.PAD_TOKEN_ID)
    assert example.schema.batch_violations(example.batch, layout=layout) == []
    back = example.schema.from_dense(example.batch, layout=layout)
    assert [s["prompts"].tolist() for s in back] == [s["prompts"].tolist() for s in example.samples]


def test_cells_show_the_tensors(example: dense_picture.DenseExample) -> None:
    """Each drawn key: one cell per position and row, its text the value, padding cells where the regions say."""
    svg = dense_picture.dense_figure(example)
    groups = re.findall(r'<g class="ts-dense-key" data-key="([^"]+)" data-field="([^"]+)">(.*?)</g>', svg)
    assert [f for _, f, _ in groups] == list(dense_picture.DRAWN[example.layout.name])
    for key, field, body in groups:
        tensor = example.batch[key]
        values = tensor.tolist() if tensor.dim() == 2 else tensor[:, 0].tolist()
        cells = re.findall(r'class="([^"]+)"/><text [^>]*class="ts-cell-text"[^>]*>([^<]*)</text>', body)
        assert len(cells) == tensor.shape[0] * tensor.shape[-1 if tensor.dim() == 2 else 2], key
        flat = [v for row in values for v in row]
        assert [text for _, text in cells] == [dense_picture._shown(v) for v in flat], key
        regions = [r for row in dense_picture.region_rows(example, field) for r in row]
        assert [cls == "ts-pad-cell" for cls, _ in cells] == [r == "pad" for r in regions], key


def test_a_shifted_batch_is_drawn_where_the_layout_says(example: dense_picture.DenseExample) -> None:
    """The regions come from the layout, not the values: a broken batch shows its wrong values in padding cells."""
    name = example.layout.name
    key = {"skyrl": "sequences", "trl_grpo": "completion_ids"}.get(name, "input_ids")
    example.batch[key][2] = example.batch[key][2].roll(-1)
    try:
        svg = dense_picture.dense_figure(example)
        assert example.schema.batch_violations(example.batch, layout=example.layout.with_pad_token(0))
    finally:
        example.batch[key][2] = example.batch[key][2].roll(1)
    group = re.search(rf'data-key="{key}".*?</g>', svg)
    assert group is not None
    pad_texts = re.findall(r'class="ts-pad-cell"/><text [^>]*>([^<]*)</text>', group.group(0))
    assert any(t != str(dense_picture.PAD_TOKEN_ID) for t in pad_texts)


def test_markers_are_replaced_and_unknown_layouts_refused() -> None:
    page = (ROOT / "docs" / "dense.md").read_text(encoding="utf-8")
    assert sorted(m.group(1) for m in dense_picture.MARKER.finditer(page)) == sorted(dense_picture.DRAWN)
    examples = {n: dense_picture.dense_example(n) for n in dense_picture.DRAWN}
    out = dense_picture.replace_markers(page, examples)
    assert not dense_picture.MARKER.search(out)
    assert out.count('<svg class="ts-padding-picture ts-dense-picture"') == len(dense_picture.DRAWN)
    with pytest.raises(ValueError, match="no dense picture for layout 'nope'"):
        dense_picture.replace_markers("<!-- trajschema:dense-picture nope -->")


def test_every_packaged_layout_is_drawn() -> None:
    dense = [n for n in ts.layout_names() if isinstance(ts.load_layout(n), ts.Layout)]
    assert sorted(dense_picture.DRAWN) == dense
