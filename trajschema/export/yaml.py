"""Writing a schema back out as a YAML document that the loader accepts and compiles to an equal schema.

It reads a schema's plan (`Schema.to_yaml` delegates here): ``name``, ``description``,
``architectures``, ``lineage``, ``dims``, ``fields``, ``tags``, ``padding_sizes`` and
``extra``. A schema
with ancestors is written with ``extends:`` (its resolution order, which C3 reproduces)
and every entry restated, so it reloads with the same lineage and the same declarations.

A drafted schema (from [`infer_schema`][trajschema.infer_schema]) carries the declarations it was
compiled from as ``_draft`` and the guesses behind them as ``_comments`` (``"fields.uid"``
-> text); both are plain data outside ``Schema.__eq__``/``__hash__``; `Schema.to_yaml`
hands them here, and the comments are written as YAML comments on their entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml

from trajschema.core import SPREAD, DerivedDim, Expr, Field, FixedDim, Tag

if TYPE_CHECKING:
    from trajschema.check import Plan

__all__ = ["dim_entry", "field_entry", "pad_entry", "schema_sections", "schema_to_yaml", "tag_entry"]

_SECTIONS = ("dims", "fields", "tags", "padding")


def _expr_entry(e: Expr) -> int | str:
    return int(e.args[0]) if e.is_int else str(e)


def dim_entry(d: Any) -> Any:
    """One dim as the loader reads it: ``4``, ``"prompt + response"`` or ``{min: 1, ...}``.

    Examples:
        >>> from trajschema.core.dims import FreeDim
        >>> dim_entry(FreeDim("prompt", min=1))
        {'min': 1}
    """
    desc = {"description": d.description} if d.description else {}
    if isinstance(d, FixedDim):
        return {"size": d.size, **desc} if desc else d.size
    if isinstance(d, DerivedDim):
        return {"expr": str(d.expr), **desc} if desc else str(d.expr)
    out: dict[str, Any] = {}
    if d.min:
        out["min"] = d.min
    if d.max is not None:
        out["max"] = d.max
    if d.multiple_of is not None:
        out["multiple_of"] = d.multiple_of
    keys = [str(e) for e in d.from_config]
    if keys:
        out["from_config"] = keys[0] if len(keys) == 1 else keys
    return {**out, **desc}


def _bound_entry(field: str, side: str, literal: int | float | None, expr: Expr | None) -> int | float | str | None:
    """A field's ``min`` or ``max``: the literal (``0``) or the dim bound's text (``"experts - 1"``).

    Raises:
        ValueError: the field holds both on one side (built by hand: a schema file holds
            one ``max`` per field, so no document says it).
    """
    if expr is None:
        return literal
    if literal is None:
        return _expr_entry(expr)
    raise ValueError(
        f"field {field}: {side}: both {literal!r} and {expr} are declared; a schema file holds one {side} per field "
        f"(keep one, or pin the dims of {expr} so that Field.bounded folds it)"
    )


def pad_entry(f: Field) -> Any:
    """A field's pad rule as the loader reads it: ``0``, ``"eos"`` or ``{"spread": "experts"}``."""
    if f.pad.rule == "fill":
        return f.pad.value
    if f.pad.rule == SPREAD:
        return {SPREAD: f.pad.over}
    return f.pad.rule


def field_entry(f: Field) -> dict[str, Any]:
    """One field as the loader reads it (keys in the order the packaged files use).

    Examples:
        >>> field_entry(ts.load_schema("text").fields["input_ids"])
        {'shape': ['seq'], 'dtype': 'int64', 'pad': 'eos'}
    """
    out: dict[str, Any] = {}
    if f.is_tensor:
        out["shape"] = [_expr_entry(e) for e in f.shape or ()]
        names = list(f.dtype_names)
        out["dtype"] = names[0] if len(names) == 1 else names
    else:
        out["kind"] = f.kind
    if f.values is not None:
        out["values"] = list(f.values)
    for side, literal, expr in (("min", f.min, f.min_expr), ("max", f.max, f.max_expr)):
        if (bound := _bound_entry(f.name, side, literal, expr)) is not None:
            out[side] = bound
    if f.finite:
        out["finite"] = True
    if f.distinct:
        out["distinct"] = True
    out["pad"] = pad_entry(f)
    if not f.required:
        out["required"] = False
    if f.description:
        out["description"] = f.description
    return out


def tag_entry(t: Tag) -> dict[str, Any]:
    """One tag as the loader reads it.

    Examples:
        >>> tag_entry(ts.load_schema("text").tags["seq_len"])
        {'kind': 'int', 'equals': 'seq'}
    """
    out: dict[str, Any] = {}
    if t.kind is not None:
        out["kind"] = t.kind
    if t.default is not None:
        out["default"] = t.default
    if t.equals is not None:
        out["equals"] = _expr_entry(t.equals)
    if t.description:
        out["description"] = t.description
    return out


def schema_sections(plan: Plan) -> dict[str, Any]:
    """Every declaration of the schema of ``plan`` restated, as the mapping a schema file holds.

    Examples:
        >>> doc = schema_sections(ts.load_schema("vlm_mrope_moe").plan)
        >>> doc["extends"], doc["dims"]["seq"]
        (['vlm_mrope', 'moe_routed', 'text'], 'prompt + response')
    """
    doc: dict[str, Any] = {"name": plan.name}
    if plan.description:
        doc["description"] = plan.description
    if plan.architectures:
        doc["architectures"] = list(plan.architectures)
    if len(plan.lineage) > 1:
        doc["extends"] = list(plan.lineage[1:])
    doc["dims"] = {n: dim_entry(d) for n, d in plan.dims.items()}
    doc["fields"] = {n: field_entry(f) for n, f in plan.fields.items()}
    doc["tags"] = {n: tag_entry(t) for n, t in plan.tags.items()}
    doc["padding"] = dict(plan.padding_sizes)
    doc["extra"] = plan.extra
    return doc


def _flow(value: Any) -> str:
    """``value`` as one line of flow-style YAML."""
    text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=2**31 - 1, allow_unicode=True)
    if yaml.safe_load(text) != value:
        # PyYAML writes some characters raw that its reader then folds (NEL, U+2028/9 line
        # breaks): escape everything outside ASCII instead.
        text = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=2**31 - 1)
    text = text.strip()
    return text.removesuffix("...").strip() if not isinstance(value, (dict, list)) else text


def _line(indent: str, key: str, value: Any, comment: str | None) -> str:
    pair = _flow({key: value})[1:-1]  # "{key: value}" without the braces: the key quoted as YAML needs
    return f"{indent}{pair}" + (f"  # {_one_line(comment)}" if comment else "")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def render(doc: Mapping[str, Any], comments: Mapping[str, str] | None = None) -> str:
    """A schema mapping as YAML text: one line per entry, ``comments`` (``"fields.uid"`` -> text) beside them.

    Examples:
        >>> print(render({"name": "x", "dims": {"d0": {}}}, {"dims.d0": "a guess"}), end="")
        name: x
        dims:
          d0: {}  # a guess
    """
    comments = comments or {}
    lines = [f"# {_one_line(comments[''])}"] if comments.get("") else []
    for key, value in doc.items():
        if key in _SECTIONS:
            if not value:
                continue
            lines.append(f"{key}:" + (f"  # {_one_line(comments[key])}" if comments.get(key) else ""))
            lines.extend(_line("  ", str(n), v, comments.get(f"{key}.{n}")) for n, v in value.items())
        else:
            lines.append(_line("", key, value, comments.get(key)))
    return "\n".join(lines) + "\n"


def schema_to_yaml(
    plan: Plan, draft: Mapping[str, Any] | None = None, comments: Mapping[str, str] | None = None
) -> str:
    """The schema of ``plan`` as YAML that [`load_schema`][trajschema.load_schema] compiles to an equal schema.

    A drafted schema writes the declarations it was compiled from, ``draft`` (for a
    draft with ``base=``, only what differs from the base), and its guesses,
    ``comments``, as comments; any other schema restates every entry.

    Examples:
        >>> text = ts.load_schema("text").to_yaml()
        >>> ts.schema_from_dict(__import__("yaml").safe_load(text)) == ts.load_schema("text")
        True
    """
    doc = draft if isinstance(draft, Mapping) else schema_sections(plan)
    return render(doc, comments if isinstance(comments, Mapping) else None)
