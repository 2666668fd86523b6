"""The key checks every layout file shares, dense or packed: each names the file, the key
path and, when the file was read, its line and column."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from trajschema.core import LayoutDefinitionError, did_you_mean
from trajschema.files.filetext import DIM_NAME, shown
from trajschema.files.problems import place

__all__ = ["dim_list", "known_keys", "mapping", "refuse", "section", "string"]


def refuse(source: str, path: str, problem: str, *, key: bool = False) -> NoReturn:
    """Raise ``problem`` at ``path`` (its key, with ``key``), with its line and column when the file was read."""
    mark = place(source, path, key=key)
    line, column = mark if mark is not None else (None, None)
    raise LayoutDefinitionError(source, path, problem, line=line, column=column)


def known_keys(data: Mapping[str, Any], known: tuple[str, ...], source: str, path: str) -> None:
    for k in data:
        if k not in known:
            hint = did_you_mean(k, known) or f" (known: {', '.join(known)})"
            refuse(source, f"{path}.{k}" if path else str(k), f"unknown key {k!r}{hint}", key=True)


def string(v: Any, source: str, path: str, *, required: bool = False) -> str:
    if v is None and not required:
        return ""
    if not isinstance(v, str) or (required and not v.strip()):
        refuse(source, path, f"expected a non-empty string, found {shown(v)}")
    return v


def mapping(v: Any, source: str, path: str) -> Mapping[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        refuse(source, path, f"expected a mapping, found {shown(v)}")
    return v


def section(data: Mapping[str, Any], key: str, source: str, *, required: bool = False) -> Mapping[str, Any]:
    if required and not data.get(key):
        refuse(source, key, f"missing required key {key!r}" if key not in data else f"{key}: must not be empty")
    return mapping(data.get(key), source, key)


def dim_list(v: Any, source: str, path: str) -> tuple[str, ...]:
    if not isinstance(v, (list, tuple)) or len(v) < 2:
        refuse(source, path, f"expected a list of at least two dim names, found {shown(v)}")
    for i, d in enumerate(v):
        if not isinstance(d, str) or not DIM_NAME.fullmatch(d):
            refuse(source, f"{path}[{i}]", f"expected a dim name, found {shown(d)}")
    if len(set(v)) != len(v):
        refuse(source, path, f"a dim is listed twice: {list(v)}")
    return tuple(v)
