"""A layout as the mapping its file would hold: the reader's inverse, for what carries a layout
along (a recorded batch's bundle) rather than naming a file.

``layout_from_dict(layout_to_dict(x))`` equals ``x`` for every layout the reader makes, and
for one a trainer fitted in code (a pinned pad id, a field's pad made ``any``): the pinned
pad id is a key of its own, ``pad_token_id``, which a layout file does not have (the
tokenizer's pad id is the trainer's, pinned with ``with_pad_token``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trajschema.core import ABSENT, ANY, Field, FieldEntry, Layout, PackedEntry, PackedLayout

__all__ = ["layout_from_dump", "layout_to_dict"]


def layout_to_dict(layout: Layout | PackedLayout) -> dict[str, Any]:
    """``layout`` as a mapping shaped like its file, plus ``pad_token_id`` when one is pinned.

    Raises:
        TypeError: ``layout`` is neither a `Layout` nor a `PackedLayout`.

    Examples:
        >>> out = layout_to_dict(ts.load_layout("skyrl"))
        >>> out["axes"]["seq"], out["fields"]["prompts"]
        ({'pad_side': 'left', 'length': 'max', 'holds': ['prompt', 'response']}, {'slice_of': 'input_ids'})
    """
    if isinstance(layout, PackedLayout):
        out = _packed(layout)
    elif isinstance(layout, Layout):
        out = _dense(layout)
    else:
        raise TypeError(f"layout must be a trajschema Layout or PackedLayout, found {type(layout).__name__}")
    if layout.pad_token_id is not None:
        out["pad_token_id"] = layout.pad_token_id
    return out


def layout_from_dump(data: Mapping[str, Any], *, source: str = "<dump>") -> Layout | PackedLayout:
    """The layout `layout_to_dict` gave ``data`` for (its ``pad_token_id`` pinned again).

    Raises:
        LayoutDefinitionError: ``data`` is no layout's mapping, naming ``source`` and the key path.
    """
    from trajschema.files.layoutkeys import refuse
    from trajschema.files.layouts import layout_from_dict

    if not isinstance(data, Mapping):
        refuse(source, "", f"expected a layout's mapping, found {type(data).__name__}")
    body = {k: v for k, v in data.items() if k != "pad_token_id"}
    layout = layout_from_dict(body, source=source)
    pad = data.get("pad_token_id")
    if pad is None:
        return layout
    if isinstance(pad, bool) or not isinstance(pad, int):
        refuse(source, "pad_token_id", f"expected an int, found {type(pad).__name__} {pad!r}")
    return layout.with_pad_token(pad)


def _dense(layout: Layout) -> dict[str, Any]:
    axes: dict[str, Any] = {}
    for dim, axis in layout.axes.items():
        if axis.concat:
            axes[dim] = {"concat": [b.dim for b in axis.blocks]}
        elif axis.blocks[0].dim == dim:
            b = axis.blocks[0]
            axes[dim] = {"pad_side": b.pad_side, "length": b.length, **({"holds": list(b.holds)} if b.holds else {})}
    out: dict[str, Any] = {
        "name": layout.name,
        "description": layout.description,
        "axes": axes,
        "sizes": dict(layout.sizes),
        "fields": {n: _entry(e) for n, e in layout.fields.items()},
        "overrides": {fam: {n: _entry(e) for n, e in sec.items()} for fam, sec in layout.overrides.items()},
        "tags": dict(layout.tags),
    }
    if layout.adds:
        out["adds"] = {n: _added(f) for n, f in layout.adds.items()}
    if layout.shared:
        out["shared"] = list(layout.shared)
    return out


def _entry(e: FieldEntry) -> Any:
    if e.held == ABSENT:
        return ABSENT
    out: dict[str, Any] = {}
    if e.held == "slice":
        out["slice_of"] = e.source
    elif e.held == "same_as":
        out["same_as"] = e.source
    elif e.held == "gather":
        out["gather"] = list(e.gather)
    elif e.key is not None:
        out["key"] = e.key
    if e.pad != ANY:
        out["pad"] = e.pad
    if e.dtype is not None:
        out["dtype"] = str(e.dtype).removeprefix("torch.")
    if e.broadcast:
        out["broadcast"] = True
    return out


def _added(f: Field) -> dict[str, Any]:
    out: dict[str, Any] = {
        "shape": [e.args[0] if e.is_name or e.is_int else str(e) for e in f.shape or ()],
        "dtype": list(f.dtype_names),
    }
    for key, value in (("values", list(f.values) if f.values is not None else None), ("min", f.min), ("max", f.max)):
        if value is not None:
            out[key] = value
    if f.finite:
        out["finite"] = True
    if not f.required:
        out["required"] = False
    if f.description:
        out["description"] = f.description
    return out


def _packed(layout: PackedLayout) -> dict[str, Any]:
    return {
        "name": layout.name,
        "kind": "packed",
        "description": layout.description,
        "tokens": layout.tokens,
        "parts": list(layout.parts),
        "offsets": layout.offsets,
        "padded_offsets": layout.padded_offsets,
        "alignment": layout.alignment,
        "positions": layout.positions,
        "dense": layout.dense,
        "fields": _packed_entries(layout.fields),
        "overrides": {fam: _packed_entries(sec) for fam, sec in layout.overrides.items()},
        "tags": dict(layout.tags),
        "metadata": dict(layout.metadata),
    }


def _packed_entries(entries: Mapping[str, PackedEntry]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, e in entries.items():
        d: dict[str, Any] = {}
        if e.held is not None and not (e.held == "alias" and e.source is not None):
            d["held"] = e.held
        for key, value in (("key", e.key), ("span", e.span), ("alias", e.source)):
            if value is not None:
                d[key] = value
        if e.pad != ANY:
            d["pad"] = e.pad
        if e.fill != ANY:
            d["fill"] = e.fill
        if e.nested_with:
            d["nested_with"] = list(e.nested_with)
        out[name] = d
    return out
