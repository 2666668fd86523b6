"""Files below the front door: the strict YAML reader and its limits, the search path of
schema files, and layout files (``layouts/``: reading, checking, resolving a layout or its name).

Internal: the public API is `trajschema`; this front lists what the other rooms take from
this one. It sits below `trajschema.schema`, which resolves ``layout=`` names through it,
so no room has to reach back up for a layout. Importing it imports nothing: each name is
imported from its module when first read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trajschema.core import lazy_front

if TYPE_CHECKING:
    from trajschema.files.dump import layout_from_dump, layout_to_dict
    from trajschema.files.filetext import (
        DIM_NAME,
        DTYPE_HINTS,
        MAX_DIM_CHAIN,
        MAX_EXPR_CHARS,
        MAX_EXPR_DEPTH,
        MAX_EXTENDS_DEPTH,
        SIZE_LIMIT_TEXT,
        is_number,
        join_path,
        num,
        refuse,
        shown,
        string_hint,
    )
    from trajschema.files.layouts import (
        LAYOUT_ENV_VAR,
        AnyLayout,
        as_any_layout,
        as_layout,
        as_packed_layout,
        layout_from_dict,
        layout_names,
        layout_search_path,
        load_layout,
    )
    from trajschema.files.paths import (
        ENV_VAR,
        PATH_SHOWN,
        Found,
        missing_entry_note,
        packaged_dir,
        readable,
        schema_search_path,
        search_path_files,
        shown_name,
    )
    from trajschema.files.problems import (
        Consequence,
        ErrorsMode,
        Problems,
        check_errors_mode,
        reporting,
    )
    from trajschema.files.reader import (
        IS_A_DIRECTORY,
        NOTHING,
        check_tree,
        file_problem,
        os_problem,
        read_yaml,
    )

__all__ = [
    "DIM_NAME",
    "DTYPE_HINTS",
    "ENV_VAR",
    "IS_A_DIRECTORY",
    "LAYOUT_ENV_VAR",
    "MAX_DIM_CHAIN",
    "MAX_EXPR_CHARS",
    "MAX_EXPR_DEPTH",
    "MAX_EXTENDS_DEPTH",
    "NOTHING",
    "PATH_SHOWN",
    "SIZE_LIMIT_TEXT",
    "AnyLayout",
    "Consequence",
    "ErrorsMode",
    "Found",
    "Problems",
    "as_any_layout",
    "as_layout",
    "as_packed_layout",
    "check_errors_mode",
    "check_tree",
    "file_problem",
    "is_number",
    "join_path",
    "layout_from_dict",
    "layout_from_dump",
    "layout_names",
    "layout_search_path",
    "layout_to_dict",
    "load_layout",
    "missing_entry_note",
    "num",
    "os_problem",
    "packaged_dir",
    "read_yaml",
    "readable",
    "refuse",
    "reporting",
    "schema_search_path",
    "search_path_files",
    "shown",
    "shown_name",
    "string_hint",
]

#: Where each name lives: it is imported from there when first read (see `trajschema.core.lazy`).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.files.filetext": (
        "DIM_NAME",
        "DTYPE_HINTS",
        "MAX_DIM_CHAIN",
        "MAX_EXPR_CHARS",
        "MAX_EXPR_DEPTH",
        "MAX_EXTENDS_DEPTH",
        "SIZE_LIMIT_TEXT",
        "is_number",
        "join_path",
        "num",
        "refuse",
        "shown",
        "string_hint",
    ),
    "trajschema.files.dump": ("layout_from_dump", "layout_to_dict"),
    "trajschema.files.layouts": (
        "LAYOUT_ENV_VAR",
        "AnyLayout",
        "as_any_layout",
        "as_layout",
        "as_packed_layout",
        "layout_from_dict",
        "layout_names",
        "layout_search_path",
        "load_layout",
    ),
    "trajschema.files.paths": (
        "ENV_VAR",
        "Found",
        "PATH_SHOWN",
        "missing_entry_note",
        "packaged_dir",
        "readable",
        "schema_search_path",
        "search_path_files",
        "shown_name",
    ),
    "trajschema.files.problems": (
        "Consequence",
        "ErrorsMode",
        "Problems",
        "check_errors_mode",
        "reporting",
    ),
    "trajschema.files.reader": (
        "IS_A_DIRECTORY",
        "NOTHING",
        "check_tree",
        "file_problem",
        "os_problem",
        "read_yaml",
    ),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)
