"""Limits and wording shared by the schema-file reader and compiler: what a message may quote, and how."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, NoReturn

from trajschema.core import REPR, SchemaDefinitionError
from trajschema.files.problems import place

#: Environment variable: extra schema directories (``os.pathsep``-separated),
#: searched before the packaged ones so a project can add or override families.

# Limits. A real schema file is a few KiB, nests 5 levels (fields.x.shape[0]) and holds
# a few hundred values; these are far above that and far below what hurts.
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 16
MAX_NODES = 100_000
MAX_INT_CHARS = 100  # int("1" * 10**6) is quadratic; Python refuses > 4300 digits anyway
MAX_EXTENDS_DEPTH = 64
MAX_DIM_CHAIN = 32  # derived dims of derived dims ...: resolved recursively at run time
MAX_EXPR_CHARS = 200  # the expression parser is recursive-descent
MAX_EXPR_DEPTH = 32
#: torch sizes are int64 (the limit itself is core's ``MAX_SIZE``).
SIZE_LIMIT_TEXT = "2**63 - 1, the largest size torch can hold"

# torch's own aliases are traps: torch.int is int32 and torch.float is float32.
DTYPE_HINTS = {
    "int": "int64 (torch.int is int32; say int32 if that is meant)",
    "long": "int64",
    "float": "float32 (or float64)",
    "double": "float64",
    "half": "float16",
    "short": "int16",
    "bfloat": "bfloat16",
}
# What the expression parser reads as a name (str.isidentifier also admits non-ASCII).
DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def refuse(
    source: str, path: str, problem: str, *, key: str | None = None, mark: tuple[int, int] | None = None
) -> NoReturn:
    """Raise ``problem`` at ``path`` of ``source``, with the line and column of ``mark``, else of the
    key path ``key`` (its key: ``fields.x.dtpye`` for an unknown key named at ``fields.x``), else of
    ``path`` (see `Places.of`), when the load under way read that file."""
    if mark is None:
        mark = place(source, key, key=True) if key is not None else place(source, path)
    line, column = mark if mark is not None else (None, None)
    raise SchemaDefinitionError(source, path, problem, line=line, column=column)


def join_path(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


# ---------------------------------------------------------------------------
# Showing values in messages (bounded: a message never grows with the input)

_KIND_WORDS = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
_KIND_WORDS.update({tuple: "a list", dict: "a mapping", bytes: "binary data", set: "a set"})


def num(v: Any) -> str:
    """A number as a message shows it: YAML's ``true``/``false``, huge ints abridged."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int) and v.bit_length() > 200:  # repr() refuses > 4300 digits
        return f"<an integer of {int(v.bit_length() * math.log10(2)) + 1} digits>"
    return repr(v)


def _word(v: Any) -> str:
    """What YAML calls the type of ``v``: ``an integer``, ``a string``, ``null``, ..."""
    if v is None:
        return "null"
    word = next((w for t, w in _KIND_WORDS.items() if type(v) is t), None)
    return word or ("a mapping" if isinstance(v, Mapping) else type(v).__name__)


def _text(v: Any) -> str:
    """``v`` itself, abridged: ``3``, ``true``, ``'maybe'``, ``[1, 2, ...]``."""
    if v is None:
        return "null"
    if isinstance(v, (bool, int, float)):
        return num(v)
    try:
        return REPR.repr(v)
    except Exception:  # a huge int inside a list, an odd object: say what it is
        return f"<{type(v).__name__}>"


def shown(v: Any) -> str:
    """``an integer 3``, ``a string 'maybe'``, ``a list [1, 2]``, ``null``."""
    return "null" if v is None else f"{_word(v)} {_text(v)}"


def is_number(v: Any) -> bool:
    return isinstance(v, (bool, int, float))


_EXPONENT_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def string_hint(v: Any) -> str:
    """YAML 1.1 reads ``1e5`` and ``1.0e5`` as strings (a float needs a dot and a signed exponent)."""
    if isinstance(v, str) and _EXPONENT_FLOAT.fullmatch(v.strip()):
        return f" (YAML reads {v!r} as a string: write a float with a dot and a signed exponent, e.g. 1.0e+5)"
    return ""
