"""A schema in other languages: JSON Schema, jaxtyping annotations, YAML, and the display rows of
`show` and the docs.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one.
"""

from trajschema.export.jaxtyping import (
    JAXTYPING_DTYPE,
    all_annotations,
    dense_annotations,
    field_annotation,
)
from trajschema.export.jaxtyping_class import jaxtyping_source
from trajschema.export.jsonschema import json_schema
from trajschema.export.table import dim_rows, extends, field_rows, tag_rows
from trajschema.export.yaml import dim_entry, field_entry, schema_sections, schema_to_yaml, tag_entry

__all__ = [
    "JAXTYPING_DTYPE",
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
    "schema_sections",
    "schema_to_yaml",
    "tag_entry",
    "tag_rows",
]
