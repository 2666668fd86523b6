"""Packed layout files (``kind: packed``): the same strict reader and key paths as the dense ones."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trajschema.core import ANY, NESTED, PACKED_HELD, PAD_TOKEN, PackedEntry, PackedLayout, did_you_mean, is_int
from trajschema.files.filetext import DIM_NAME, shown
from trajschema.files.layoutkeys import dim_list, known_keys, mapping, refuse, section, string

__all__ = ["PACKED_TOP_KEYS", "packed_from_dict"]

PACKED_TOP_KEYS = (
    "name",
    "kind",
    "description",
    "tokens",
    "parts",
    "offsets",
    "padded_offsets",
    "alignment",
    "positions",
    "dense",
    "fields",
    "overrides",
    "tags",
    "metadata",
)
_ENTRY_KEYS = ("held", "key", "pad", "span", "fill", "alias", "nested_with")
_METADATA = ("index",)  # besides width:<dim>


def packed_from_dict(data: Mapping[str, Any], source: str) -> PackedLayout:
    """A packed layout from a mapping shaped like a packed layout file (checked by the caller's tree walk).

    Raises:
        LayoutDefinitionError: naming ``source`` and the key path.
    """
    known_keys(data, PACKED_TOP_KEYS, source, "")
    name = string(data.get("name"), source, "name", required=True)
    tokens = _dim(data.get("tokens"), source, "tokens")
    parts = dim_list(data["parts"], source, "parts") if "parts" in data else ()
    offsets = string(data.get("offsets"), source, "offsets", required=True)
    dense = string(data.get("dense", ""), source, "dense")
    fields = {n: _entry(v, source, f"fields.{n}", parts) for n, v in section(data, "fields", source).items()}
    overrides = {
        fam: {
            n: _entry(v, source, f"overrides.{fam}.{n}", parts)
            for n, v in mapping(sec, source, f"overrides.{fam}").items()
        }
        for fam, sec in section(data, "overrides", source).items()
    }
    for path, e in _all_entries(fields, overrides):
        if e.held == "dense" and not dense:
            refuse(source, path, "a dense field needs the layout's dense: (the dense layout that holds it)")
        if e.held == "nested" and offsets != NESTED:
            refuse(source, path, f"nested fields take their offsets from the batch: the layout needs offsets: {NESTED}")
    return PackedLayout(
        name=name,
        description=string(data.get("description", ""), source, "description"),
        tokens=tokens,
        parts=parts,
        offsets=offsets,
        padded_offsets=string(data.get("padded_offsets", ""), source, "padded_offsets"),
        alignment=_alignment(data.get("alignment", 1), source),
        positions=string(data.get("positions", ""), source, "positions"),
        dense=dense,
        fields=fields,
        overrides=overrides,
        tags={t: string(k, source, f"tags.{t}", required=True) for t, k in section(data, "tags", source).items()},
        metadata={k: _metadata(v, source, f"metadata.{k}") for k, v in section(data, "metadata", source).items()},
        source=source,
    )


def _all_entries(
    fields: Mapping[str, PackedEntry], overrides: Mapping[str, Mapping[str, PackedEntry]]
) -> list[tuple[str, PackedEntry]]:
    out = [(f"fields.{n}", e) for n, e in fields.items()]
    out += [(f"overrides.{fam}.{n}", e) for fam, sec in overrides.items() for n, e in sec.items()]
    return out


def _dim(v: Any, source: str, path: str) -> str:
    if not isinstance(v, str) or not DIM_NAME.fullmatch(v):
        refuse(source, path, f"expected a dim name (the per-sample dim laid along the run), found {shown(v)}")
    return v


def _alignment(v: Any, source: str) -> int:
    if not is_int(v) or not 1 <= v <= 2**63 - 1:
        refuse(source, "alignment", f"expected an int in 1..2**63-1 (tokens per padded segment), found {shown(v)}")
    return int(v)


def _metadata(v: Any, source: str, path: str) -> str:
    if v in _METADATA or (isinstance(v, str) and v.startswith("width:") and DIM_NAME.fullmatch(v[6:])):
        return str(v)
    return refuse(source, path, f"expected index or width:<dim>, found {shown(v)}")


def _pad(v: Any, source: str, path: str) -> Any:
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float, str))
        or (isinstance(v, str) and v not in (PAD_TOKEN, ANY))
    ):
        refuse(source, path, f"expected a number, pad_token or any, found {shown(v)}")
    return v


def _entry(v: Any, source: str, path: str, parts: tuple[str, ...]) -> PackedEntry:
    short = isinstance(v, str)  # `input_ids: nested`: the entry is its held kind
    if short:
        v = {"held": v}
    v = mapping(v, source, path)
    known_keys(v, _ENTRY_KEYS, source, path)
    held = v.get("held")
    if "alias" in v:
        held = held or "alias"
    if held is not None and held not in PACKED_HELD:
        hint = did_you_mean(str(held), PACKED_HELD) if isinstance(held, str) else ""
        refuse(
            source,
            f"{path}.held" if not short and "held" in v else path,
            f"expected one of {', '.join(PACKED_HELD)}{hint}, found {shown(held)}",
        )
    span = v.get("span")
    if span is not None and (not isinstance(span, str) or span not in parts):
        refuse(
            source,
            f"{path}.span",
            f"expected one of the layout's parts ({', '.join(parts) or 'none declared'}), found {shown(span)}",
        )
    with_ = v.get("nested_with", ())
    if not isinstance(with_, (list, tuple)) or not all(isinstance(x, str) and x for x in with_):
        refuse(source, f"{path}.nested_with", f"expected a list of field names, found {shown(with_)}")
    alias = string(v["alias"], source, f"{path}.alias", required=True) if "alias" in v else None
    if held == "alias" and alias is None:
        refuse(source, path, "an alias field needs alias: <the key it is the same object as>")
    return PackedEntry(
        held=held,
        key=string(v["key"], source, f"{path}.key", required=True) if "key" in v else None,
        pad=_pad(v.get("pad", ANY), source, f"{path}.pad"),
        span=span,
        fill=_pad(v.get("fill", ANY), source, f"{path}.fill"),
        source=alias,
        nested_with=tuple(with_) if with_ else (),
    )
