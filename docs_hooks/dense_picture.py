"""The pictures of dense padded batches in ``docs/dense.md``, drawn from real batches.

`dense_example` lays three ``text`` samples out in a packaged layout with
[`Schema.to_dense`][trajschema.Schema.to_dense] and checks the result with
``validate_batch(..., layout=...)``; `dense_figure` draws some of its columns, one grid
per batch key (rows are samples, columns are positions along the padded axis), each cell
coloured by what the layout says it is: a prompt or response position, or padding.
Which cells are padding is worked out from the layout's blocks (`region_rows`), not from
the values, so a picture of a wrong batch would show the wrong values in the right places.
Colours come from the padding picture's CSS classes (``docs/stylesheets/extra.css``).
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

import torch

import trajschema as ts
from docs_hooks.schema_pages import packaged_dir
from trajschema.dense import bind_layout
from trajschema.testing import verl_sample

#: ``<!-- trajschema:dense-picture LAYOUT -->`` in a Markdown page becomes the picture of LAYOUT.
MARKER = re.compile(r"<!-- trajschema:dense-picture (\w+) -->")

PAD_TOKEN_ID = 0
EOS_TOKEN_ID = 2
#: (prompt, response) lengths of the three samples.
LENGTHS = ((3, 4), (4, 1), (2, 2))
#: The schema fields drawn for each packaged layout, in order.
DRAWN = {
    "verl_dataproto": ("prompts", "responses", "input_ids", "attention_mask", "position_ids", "response_mask"),
    "skyrl": ("input_ids", "attention_mask", "response_mask", "loss_mask"),
    "trl_grpo": ("prompts", "prompt_mask", "responses", "response_mask"),
}

_CELL = 30
_STEP = _CELL + 2
_LEFT = 200  # where the cells start
_ROW_H, _ROW_GAP, _TITLE_H, _PANEL_GAP = 18, 3, 22, 14
_LEGEND_H = 70


@dataclasses.dataclass(frozen=True)
class DenseExample:
    """One dense batch of the picture and what it was made from."""

    layout: ts.Layout
    schema: ts.Schema
    samples: list[dict[str, Any]]
    batch: ts.DenseBatch
    call: str  # the conversion, as the caption prints it


def dense_example(layout_name: str, schema: ts.Schema | None = None) -> DenseExample:
    """Three ``text`` samples laid out in the packaged layout ``layout_name``, checked clean."""
    schema = schema if schema is not None else ts.load_schema(packaged_dir() / "text.yaml")
    layout = ts.load_layout(layout_name)
    samples = [verl_sample(schema, p, r, uid=f"q{i // 2}", vocab=1000, seed=i) for i, (p, r) in enumerate(LENGTHS)]
    for sample, (p, r) in zip(samples, LENGTHS):
        sample.update(_added(layout, {"prompt": p, "response": r, "seq": p + r}))
    batch = schema.to_dense(samples, layout=layout, pad_token_id=PAD_TOKEN_ID)
    # The picture must show a batch that passes its own check, or it teaches the wrong thing.
    schema.validate_batch(batch, layout=layout.with_pad_token(PAD_TOKEN_ID))
    call = f'schema.to_dense(samples, layout="{layout_name}", pad_token_id={PAD_TOKEN_ID})'
    return DenseExample(layout, schema, samples, batch, call)


def _added(layout: ts.Layout, sizes: dict[str, int]) -> dict[str, torch.Tensor]:
    """The fields the layout adds that a sample must carry (TRL's ``prompt_mask``, ``advantages``):
    a 0/1 mask all ones over its real region, anything else its pad value."""
    out = {}
    for name, f in layout.adds.items():
        if f.required:
            shape = [e.evaluate(sizes) for e in f.shape or ()]
            fill = 1 if f.values is not None and set(f.values) <= {0, 1} else f.pad.value
            out[name] = torch.full(shape, fill, dtype=f.dtypes[0])
    return out


def _block_widths(example: DenseExample) -> dict[str, int]:
    """The padded width of every one-block axis, read from the batch."""
    bound = bind_layout(example.layout, example.schema.plan)
    widths: dict[str, int] = {}
    for p in bound.columns():
        value = example.batch.get(p.key) if p.key else None
        if p.dim is not None and p.axis is not None and isinstance(value, torch.Tensor):
            axis = example.layout.axes[p.dim]
            if not axis.concat:
                widths[axis.blocks[0].dim] = int(value.shape[p.axis])
    return widths


def region_rows(example: DenseExample, field: str) -> list[list[str]]:
    """For each sample, what each position of ``field``'s padded axis is: a dim name, or ``"pad"``."""
    bound = bind_layout(example.layout, example.schema.plan)
    dim = bound.placed[field].dim
    assert dim is not None, f"{field} has no padded axis in {example.layout.name}"
    widths = _block_widths(example)
    lengths = {"prompt": [p for p, _ in LENGTHS], "response": [r for _, r in LENGTHS]}
    rows = []
    for i in range(len(LENGTHS)):
        row: list[str] = []
        for block in example.layout.axes[dim].blocks:
            parts = block.holds or (block.dim,)
            real = [d for d in parts for _ in range(lengths[d][i])]
            pad = ["pad"] * (widths[block.dim] - len(real))
            row += pad + real if block.pad_side == "left" else real + pad
        rows.append(row)
    return rows


def _text(x: float, y: float, text: str, cls: str, anchor: str = "middle") -> str:
    return (
        f'<text x="{x}" y="{y}" class="{cls}" text-anchor="{anchor}" dominant-baseline="central">'
        f"{html.escape(text)}</text>"
    )


def _cell(column: int, y: int, text: str, cls: str) -> str:
    x = _LEFT + column * _STEP
    return f'<rect x="{x}" y="{y}" width="{_CELL}" height="{_ROW_H}" rx="3" class="{cls}"/>' + _text(
        x + _CELL / 2, y + _ROW_H / 2, text, "ts-cell-text"
    )


def _shown(value: Any) -> str:
    number = float(value)
    return str(int(number)) if number.is_integer() else f"{number:.1f}"


def _cell_class(region: str, value: Any, is_mask: bool) -> str:
    if region == "pad":
        return "ts-pad-cell"
    if is_mask:
        return "ts-one" if value else "ts-zero"
    cls = "ts-prompt" if region == "prompt" else "ts-response"
    return cls + " ts-eos" if value == EOS_TOKEN_ID else cls


def _panel(example: DenseExample, field: str, y0: int) -> tuple[str, int]:
    """One batch key: a title, then one row of cells per sample; returns the SVG and its height."""
    placed = bind_layout(example.layout, example.schema.plan).placed[field]
    tensor = example.batch[placed.key]
    values = tensor.tolist() if tensor.dim() == 2 else tensor[:, 0].tolist()  # mrope: its text row
    is_mask = placed.field.values is not None and set(placed.field.values) <= {0, 1}
    regions = region_rows(example, field)
    shape = "×".join(map(str, tensor.shape))
    title = f"{placed.key}  ({shape}, {str(tensor.dtype).removeprefix('torch.')})"
    if placed.key != field:
        title += f"  = schema field {field}"
    parts = [f'<g class="ts-dense-key" data-key="{html.escape(placed.key)}" data-field="{html.escape(field)}">']
    parts.append(_text(8, y0 + _TITLE_H / 2, title, "ts-field", "start"))
    y = y0 + _TITLE_H
    for i, (row, region) in enumerate(zip(values, regions)):
        parts.append(_text(_LEFT - 8, y + _ROW_H / 2, f"sample {i}", "ts-note", "end"))
        for column, (v, r) in enumerate(zip(row, region)):
            parts.append(_cell(column, y, _shown(v), _cell_class(r, v, is_mask)))
        y += _ROW_H + _ROW_GAP
    parts.append("</g>")
    return "".join(parts), y - y0


_LEGEND = (
    ("ts-prompt", "", "prompt position"),
    ("ts-response", "", "response position"),
    ("ts-response ts-eos", str(EOS_TOKEN_ID), "eos_token_id"),
    ("ts-one", "1", "mask 1"),
    ("ts-zero", "0", "mask 0 (real position)"),
    ("ts-pad-cell", str(PAD_TOKEN_ID), "padding (the layout's pad value)"),
)


def _legend(y: int) -> str:
    parts, x = ['<g class="ts-legend">'], 8
    for i, (cls, text, label) in enumerate(_LEGEND):
        if i == 3:
            x, y = 8, y + _ROW_H + 8
        parts.append(f'<rect x="{x}" y="{y}" width="{_CELL}" height="{_ROW_H}" rx="3" class="{cls}"/>')
        if text:
            parts.append(_text(x + _CELL / 2, y + _ROW_H / 2, text, "ts-cell-text"))
        parts.append(_text(x + _CELL + 6, y + _ROW_H / 2, label, "ts-legend-text", "start"))
        x += _CELL + 6 + 7 * len(label) + 22
    parts.append("</g>")
    return "".join(parts)


def dense_svg(example: DenseExample, fields: Sequence[str]) -> str:
    """An inline SVG: a legend, then one grid per drawn field."""
    panels, y = [], _LEGEND_H
    widest = 0
    for field in fields:
        svg, height = _panel(example, field, y)
        panels.append(svg)
        y += height + _PANEL_GAP
        widest = max(widest, len(region_rows(example, field)[0]))
    width = max(_LEFT + widest * _STEP + 4, 640)
    title = f"a dense batch of {len(LENGTHS)} samples in the {example.layout.name} layout"
    return (
        f'<svg class="ts-padding-picture ts-dense-picture" viewBox="0 0 {width} {y}" width="{width}" '
        f'role="img" aria-label="{html.escape(title)}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{html.escape(title)}</title>"
        + _text(8, 12, "rows: samples; columns: positions along the padded axis", "ts-note", "start")
        + _legend(26)
        + "".join(panels)
        + "</svg>"
    )


def dense_figure(example: DenseExample, fields: Sequence[str] | None = None) -> str:
    """The picture and its caption, as one raw-HTML block for a Markdown page."""
    fields = DRAWN[example.layout.name] if fields is None else fields
    lengths = ", ".join(f"{p} + {r}" for p, r in LENGTHS)
    caption = (
        f"Three samples of the <code>text</code> schema ({lengths} tokens) laid out by "
        f"<code>{html.escape(example.call)}</code> when the site was built; the batch passes "
        f'<code>validate_batch(batch, layout="{example.layout.name}")</code>. Grey cells are padding, '
        "placed where the layout's blocks say it goes."
    )
    return (
        '<figure class="ts-figure">\n<div class="ts-scroll">'
        + dense_svg(example, fields)
        + f"</div>\n<figcaption>{caption}</figcaption>\n</figure>"
    )


def replace_markers(markdown: str, examples: Mapping[str, DenseExample] | None = None) -> str:
    """``markdown`` with every dense-picture marker replaced by the picture of its layout."""

    def figure(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in DRAWN:
            raise ValueError(f"no dense picture for layout {name!r} (known: {', '.join(DRAWN)})")
        return dense_figure(examples[name] if examples else dense_example(name))

    return MARKER.sub(figure, markdown)
