"""Schema files: their syntax, compiling a file into a Schema, composing (``extends``),
choosing a schema for a sample or a model config (and pinning the dims the config gives),
and drafting one from samples. The reader, the search path and layout files are one floor
down, in `trajschema.files`.

Internal: the public API is `trajschema` (and `trajschema.verl`, `trajschema.testing`); this
front lists what the other rooms take from this one. Every room that accepts "a Schema or a
schema name" resolves it with `resolve_schema`. Importing it imports nothing: each name is
imported from its module when first read, so reading a schema file imports no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.load.config import ModelConfig, ModelConfigError, config_sizes, pin_config_dims, read_model_config
    from trajschema.load.infer import infer_schema
    from trajschema.load.search import (
        load_found,
        load_schema,
        resolve_schema,
        schema_for_architecture,
        schema_for_config,
        schema_from_dict,
        schema_names,
    )
    from trajschema.load.select import SchemaChoice, choose_schema, schema_for_sample

__all__ = [
    "ModelConfig",
    "ModelConfigError",
    "SchemaChoice",
    "choose_schema",
    "config_sizes",
    "infer_schema",
    "load_found",
    "load_schema",
    "pin_config_dims",
    "read_model_config",
    "resolve_schema",
    "schema_for_architecture",
    "schema_for_config",
    "schema_for_sample",
    "schema_from_dict",
    "schema_names",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.load.config": (
        "ModelConfig",
        "ModelConfigError",
        "config_sizes",
        "pin_config_dims",
        "read_model_config",
    ),
    "trajschema.load.infer": ("infer_schema",),
    "trajschema.load.search": (
        "load_found",
        "load_schema",
        "resolve_schema",
        "schema_for_architecture",
        "schema_for_config",
        "schema_from_dict",
        "schema_names",
    ),
    "trajschema.load.select": ("SchemaChoice", "choose_schema", "schema_for_sample"),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
