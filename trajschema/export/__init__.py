"""A schema in other languages: JSON Schema, jaxtyping annotations, YAML, a pandera
``TensorDictSchema``, a tensordict ``TypedTensorDict``, and the display rows of `show` and the docs.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one. Importing it imports nothing: each name
is imported from its module when first read, so the YAML, JSON Schema and table exports and
the generated jaxtyping source need no torch (the live jaxtyping annotations do), and nothing
imports pandera until a pandera export is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.export.columns import TensorDictColumns, tensordict_columns
    from trajschema.export.jaxtyping import (
        JAXTYPING_DTYPE,
        all_annotations,
        dense_annotations,
        field_annotation,
    )
    from trajschema.export.jaxtyping_class import jaxtyping_source
    from trajschema.export.jsonschema import json_schema
    from trajschema.export.pandera_tensordict import pandera_schema, pandera_source
    from trajschema.export.table import dim_rows, extends, field_rows, tag_rows
    from trajschema.export.typed_tensordict import typed_tensordict_class, typed_tensordict_source
    from trajschema.export.yaml import dim_entry, field_entry, schema_sections, schema_to_yaml, tag_entry

__all__ = [
    "JAXTYPING_DTYPE",
    "TensorDictColumns",
    "all_annotations",
    "dense_annotations",
    "dim_entry",
    "dim_rows",
    "extends",
    "field_annotation",
    "field_entry",
    "field_rows",
    "jaxtyping_source",
    "json_schema",
    "pandera_schema",
    "pandera_source",
    "schema_sections",
    "schema_to_yaml",
    "tag_entry",
    "tag_rows",
    "tensordict_columns",
    "typed_tensordict_class",
    "typed_tensordict_source",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.export.jaxtyping": ("JAXTYPING_DTYPE", "all_annotations", "dense_annotations", "field_annotation"),
    "trajschema.export.columns": ("TensorDictColumns", "tensordict_columns"),
    "trajschema.export.jaxtyping_class": ("jaxtyping_source",),
    "trajschema.export.jsonschema": ("json_schema",),
    "trajschema.export.pandera_tensordict": ("pandera_schema", "pandera_source"),
    "trajschema.export.table": ("dim_rows", "extends", "field_rows", "tag_rows"),
    "trajschema.export.typed_tensordict": ("typed_tensordict_class", "typed_tensordict_source"),
    "trajschema.export.yaml": ("dim_entry", "field_entry", "schema_sections", "schema_to_yaml", "tag_entry"),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
