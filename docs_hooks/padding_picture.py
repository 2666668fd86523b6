"""The picture of a padded batch in ``docs/padding.md``, drawn from a real ``PaddingBatch``.

`example_batch` pads five realistic ``text`` samples to the multiple a 4-rank
data-parallel step needs; `padding_figure` draws every sample as a block of rows
(input_ids, attention_mask, response_mask, loss_mask; columns are token positions), with
its uid and its ``is_padding`` tag. Colours come from CSS classes (``docs/stylesheets/
extra.css``) so the picture follows the light and dark palettes.
"""

from __future__ import annotations

import dataclasses
import html
from collections.abc import Mapping, Sequence
from typing import Any

import trajschema as ts
from docs_hooks.schema_pages import packaged_dir
from trajschema.testing import verl_sample

#: The marker in a Markdown page that `padding_figure` replaces.
MARKER = "<!-- trajschema:padding-picture -->"

EOS_TOKEN_ID = 2
DP_SIZE = 4
#: (prompt, response) lengths of the real samples, and their GRPO groups.
REAL_LENGTHS = ((3, 4), (5, 2), (4, 6), (2, 5), (6, 3))
REAL_UIDS = ("q0", "q0", "q0", "q1", "q1")

_CELL = 30  # width of one token position
_STEP = _CELL + 2
_LEFT = 270  # where the token columns start
_ID_H, _MASK_H, _LINE_GAP, _BLOCK_GAP = 20, 14, 3, 12
_LEGEND_H = 84
#: Token positions drawn per row; a longer row shows its head, a gap and its last 3 tokens.
MAX_CELLS = 16
_TAIL = 3


@dataclasses.dataclass(frozen=True)
class Example:
    """The padded batch the picture shows."""

    samples: list[dict[str, Any]]
    tags: list[dict[str, Any]]
    padding: ts.PaddingBatch
    call: str  # the padding call, as the caption prints it


@dataclasses.dataclass(frozen=True)
class PictureRow:
    """One sample as drawn: plain lists, so the picture never depends on tensor layout."""

    uid: str
    tag_is_padding: bool | None  # the tag's value; None when the tag dict has no is_padding
    is_padding: bool  # what ts.is_padding says
    prompt_len: int
    input_ids: list[int]
    attention_mask: list[int] | None
    response_mask: list[int]
    loss_mask: list[int]


def example_batch(schema: ts.Schema) -> Example:
    """Five real samples of ``schema`` and the padding that grows them to a multiple of ``DP_SIZE``."""
    real = [
        verl_sample(schema, p, r, uid=uid, vocab=1000, seed=i)
        for i, ((p, r), uid) in enumerate(zip(REAL_LENGTHS, REAL_UIDS))
    ]
    tags = [{"is_padding": False, "prompt_len": p, "response_len": r, "seq_len": p + r} for p, r in REAL_LENGTHS]
    count = ts.padding_needed(len(real), ts.required_multiple(DP_SIZE))
    pad = schema.padding(count, eos_token_id=EOS_TOKEN_ID, like=real[0])
    samples, all_tags = real + pad.samples, tags + pad.tags
    # The picture must show a batch that keeps the contract, or it teaches the wrong thing.
    schema.validate_batch(samples, tags=all_tags)
    ts.check_padding_contract(samples, all_tags, schema)
    call = f"schema.padding({count}, eos_token_id={EOS_TOKEN_ID}, like=samples[0])"
    return Example(samples, all_tags, pad, call)


def picture_rows(samples: Sequence[Mapping[str, Any]], tags: Sequence[Mapping[str, Any]]) -> list[PictureRow]:
    """The drawn form of each sample (masks as int lists, the tag's ``is_padding`` as found)."""
    rows = []
    for sample, tag in zip(samples, tags, strict=True):
        attention = sample.get("attention_mask")
        rows.append(
            PictureRow(
                uid=str(sample["uid"]),
                tag_is_padding=tag.get("is_padding"),
                is_padding=ts.is_padding(tag),
                prompt_len=int(sample["prompts"].numel()),
                input_ids=[int(v) for v in sample["input_ids"].tolist()],
                attention_mask=None if attention is None else [int(v) for v in attention.tolist()],
                response_mask=[int(v) for v in sample["response_mask"].tolist()],
                loss_mask=[int(v) for v in sample["loss_mask"].tolist()],
            )
        )
    return rows


def display_columns(length: int) -> list[int | None]:
    """The token position drawn in each column of a row of ``length`` tokens; ``None`` is the gap.

    The gap takes two columns, so a row never needs more than ``MAX_CELLS`` columns.

    >>> display_columns(3)
    [0, 1, 2]
    >>> cols = display_columns(128)
    >>> len(cols), cols[11:], cols.count(None)
    (16, [None, None, 125, 126, 127], 2)
    """
    if length <= MAX_CELLS:
        return list(range(length))
    head = MAX_CELLS - 2 - _TAIL
    return [*range(head), None, None, *range(length - _TAIL, length)]


def _x(column: int) -> int:
    return _LEFT + column * _STEP


def _text(x: float, y: float, text: str, cls: str, anchor: str = "middle") -> str:
    return (
        f'<text x="{x}" y="{y}" class="{cls}" text-anchor="{anchor}" dominant-baseline="central">'
        f"{html.escape(text)}</text>"
    )


def _cell(column: int, y: int, h: int, text: str, cls: str) -> str:
    x = _x(column)
    return f'<rect x="{x}" y="{y}" width="{_CELL}" height="{h}" rx="3" class="{cls}"/>' + _text(
        x + _CELL / 2, y + h / 2, text, "ts-cell-text"
    )


def _line(values: list[int], offset: int, columns: list[int | None], y: int, h: int, classes: Any) -> list[str]:
    """Cells for ``values``, whose element ``i`` is token position ``offset + i``; a gap says how many are hidden.

    ``classes(position, value)`` gives the CSS classes of a cell.
    """
    shown = {pos: column for column, pos in enumerate(columns) if pos is not None}
    parts = []
    for i, v in enumerate(values):
        column = shown.get(offset + i)
        if column is not None:
            parts.append(_cell(column, y, h, str(v), classes(offset + i, v)))
    hidden = len(values) - sum(offset + i in shown for i in range(len(values)))
    if hidden:
        x = _x(columns.index(None))
        parts.append(_text(x + _STEP - 1, y + h / 2, f"…{hidden}…", "ts-gap-text"))
    return parts


def _token_classes(row: PictureRow) -> Any:
    def classes(pos: int, value: int) -> str:
        cls = "ts-prompt" if pos < row.prompt_len else "ts-response"
        return cls + " ts-eos" if value == EOS_TOKEN_ID else cls

    return classes


def _mask_classes(pos: int, value: int) -> str:
    return "ts-one" if value else "ts-zero"


def _block_height(row: PictureRow) -> int:
    lines = 2 + (row.attention_mask is not None)
    return _ID_H + lines * (_MASK_H + _LINE_GAP) + _LINE_GAP


def _block(row: PictureRow, y0: int, width: int) -> str:
    """One sample: a header (uid, is_padding tag, lengths), then one line per field."""
    columns = display_columns(len(row.input_ids))
    height = _block_height(row)
    response = len(row.input_ids) - row.prompt_len
    kind = "padding" if row.is_padding else "real"
    tag = "absent" if row.tag_is_padding is None else str(row.tag_is_padding).lower()
    uid = row.uid if len(row.uid) <= 12 else row.uid[:9] + "…"
    parts = [
        f'<g class="ts-sample ts-sample-{kind}" data-uid="{html.escape(row.uid)}" '
        f'data-is-padding="{str(row.is_padding).lower()}" data-prompt="{row.prompt_len}" '
        f'data-response="{response}">'
    ]
    if row.is_padding:
        parts.append(f'<rect x="0" y="{y0 - 5}" width="{width}" height="{height + 10}" rx="6" class="ts-pad-band"/>')
    parts.append(f"<title>uid {html.escape(row.uid)}</title>")
    parts.append(_text(8, y0 + 9, f"uid {uid}", "ts-uid", "start"))
    parts.append(_text(8, y0 + 27, f"is_padding: {tag}", f"ts-tag ts-tag-{tag}", "start"))
    parts.append(_text(8, y0 + 45, f"{row.prompt_len} + {response} tokens", "ts-note", "start"))
    lines: list[tuple[str, list[int], int, int, Any]] = [("input_ids", row.input_ids, 0, _ID_H, _token_classes(row))]
    if row.attention_mask is not None:
        lines.append(("attention_mask", row.attention_mask, 0, _MASK_H, _mask_classes))
    lines.append(("response_mask", row.response_mask, row.prompt_len, _MASK_H, _mask_classes))
    lines.append(("loss_mask", row.loss_mask, row.prompt_len, _MASK_H, _mask_classes))
    y = y0
    for name, values, offset, h, classes in lines:
        parts.append(_text(_LEFT - 8, y + h / 2, name, "ts-field", "end"))
        parts.extend(_line(values, offset, columns, y, h, classes))
        y += h + _LINE_GAP
    parts.append("</g>")
    return "".join(parts)


#: The legend, one tuple of (classes, cell text, label) per line of the legend.
_LEGEND = (
    (
        ("ts-prompt", "", "prompt token"),
        ("ts-response", "", "response token"),
        ("ts-prompt ts-eos", str(EOS_TOKEN_ID), "eos_token_id in the prompt"),
        ("ts-response ts-eos", str(EOS_TOKEN_ID), "eos_token_id in the response"),
    ),
    (
        ("ts-one", "1", "mask 1"),
        ("ts-zero", "0", "mask 0"),
        ("ts-pad-band", "", "padding sample"),
    ),
)


def _legend(y: int) -> str:
    parts = ['<g class="ts-legend">']
    for line in _LEGEND:
        x = 8
        for cls, text, label in line:
            parts.append(f'<rect x="{x}" y="{y}" width="{_CELL}" height="{_MASK_H}" rx="3" class="{cls}"/>')
            if text:
                parts.append(_text(x + _CELL / 2, y + _MASK_H / 2, text, "ts-cell-text"))
            parts.append(_text(x + _CELL + 6, y + _MASK_H / 2, label, "ts-legend-text", "start"))
            x += _CELL + 6 + 7 * len(label) + 22
        y += _MASK_H + 8
    parts.append("</g>")
    return "".join(parts)


def padding_svg(rows: Sequence[PictureRow]) -> str:
    """An inline SVG of ``rows``: a legend, then one block per sample, padding blocks banded."""
    width = _LEFT + MAX_CELLS * _STEP + 4
    blocks, y = [], _LEGEND_H
    for row in rows:
        blocks.append(_block(row, y, width))
        y += _block_height(row) + _BLOCK_GAP
    height = y
    title = f"{len(rows)} samples: {sum(r.is_padding for r in rows)} of them padding"
    return (
        f'<svg class="ts-padding-picture" viewBox="0 0 {width} {height}" width="{width}" '
        f'role="img" aria-label="{html.escape(title)}" xmlns="http://www.w3.org/2000/svg">'
        f"<title>{html.escape(title)}</title>"
        + _text(8, 14, "columns: token positions; a …n… gap hides n positions", "ts-note", "start")
        + _legend(30)
        + "".join(blocks)
        + "</svg>"
    )


def padding_figure(example: Example) -> str:
    """The picture and its caption, as one raw-HTML block for a Markdown page."""
    rows = picture_rows(example.samples, example.tags)
    real = [r for r in rows if not r.is_padding]
    groups = ", ".join(dict.fromkeys(r.uid for r in real))
    caption = (
        f"The batch a {DP_SIZE}-rank data-parallel step receives: {len(real)} real samples "
        f"(GRPO groups {html.escape(groups)}) and the {len(example.padding)} padding samples of "
        f"<code>{html.escape(example.call)}</code>, drawn from the tensors when the site was built. "
        "Padding carries <code>is_padding: true</code> and a uid of its own; its response and loss "
        "masks are zero, its attention mask is one."
    )
    return (
        '<figure class="ts-figure">\n<div class="ts-scroll">'
        + padding_svg(rows)
        + f"</div>\n<figcaption>{caption}</figcaption>\n</figure>"
    )


def packaged_text_schema() -> ts.Schema:
    """The packaged ``text`` schema, whatever ``TRAJSCHEMA_PATH`` the builder has set."""
    return ts.load_schema(packaged_dir() / "text.yaml")
