"""Package fronts that import their names on first use (PEP 562), so that importing a front is cheap.

``import trajschema`` used to import torch and tensordict (seconds) because its front
imported every room; ``trajschema --help`` paid for that. A lazy front keeps the same
``__all__`` and the same ``from trajschema import Schema``, and imports a room only
when one of its names is read. Each front also imports its names under
``if TYPE_CHECKING:`` so that type checkers and IDEs see them.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_front"]


def lazy_front(
    package: str, rooms: Mapping[str, tuple[str, ...]], *, public_module: str | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of the front ``package``, which takes each name of ``rooms`` from its module.

    ``rooms`` maps a module to the names the front takes from it, as the ``from module
    import names`` statements of an eager front would. Reading a name imports its module
    only (a module may itself defer a costly name, as `trajschema.core.types` defers
    ``Batch``). With ``public_module``, a class reports itself under that module (as
    ``trajschema.Schema``, not ``trajschema.schema.Schema``) once read from the front.

    Examples:
        >>> getattr_, dir_ = lazy_front("trajschema.core", {"trajschema.core.version": ("VERSION",)})
        >>> from trajschema.core import version
        >>> getattr_("VERSION") is version.VERSION
        True
        >>> getattr_("nothing")
        Traceback (most recent call last):
        AttributeError: module 'trajschema.core' has no attribute 'nothing'
    """
    where = {name: module for module, names in rooms.items() for name in names}

    def __getattr__(name: str) -> Any:
        module_name = where.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name), name)
        front = sys.modules[package]
        setattr(front, name, value)  # later reads are plain attribute lookups
        if public_module is not None and isinstance(value, type):
            value.__module__ = public_module
            # typing.get_type_hints resolves a class's string annotations in the namespace of its
            # __module__: the front names they mention must be in it, as an eager front had them.
            for word in sorted(_annotation_words(value) & where.keys() - vars(front).keys()):
                __getattr__(word)
            _resolve_method_annotations(value, where.keys(), __getattr__)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__


def _annotation_words(cls: type) -> set[str]:
    """The identifiers in the string annotations of ``cls`` and its bases (``"Expr | None"`` -> Expr, None)."""
    words: set[str] = set()
    for base in cls.__mro__:
        for annotation in vars(base).get("__annotations__", {}).values():
            if isinstance(annotation, str):
                words.update(re.findall(r"[A-Za-z_]\w*", annotation))
    return words


def _resolve_method_annotations(cls: type, names: Any, read: Callable[[str], Any]) -> None:
    """Put the front names a method's string annotations mention into the method's module globals.

    A module may import names used only in annotations under ``TYPE_CHECKING`` (so that
    reading a schema imports no tensordict for ``Batch``); ``typing.get_type_hints`` of its
    methods evaluates them in the method's ``__globals__``, so they are set there when the
    class is read from the front, as an eager import had them.
    """
    for fn in vars(cls).values():
        fn = getattr(fn, "__func__", fn)  # classmethod, staticmethod
        annotations = getattr(fn, "__annotations__", None)
        spaces = getattr(fn, "__globals__", None)
        if not isinstance(annotations, dict) or not isinstance(spaces, dict):
            continue
        words = {w for a in annotations.values() if isinstance(a, str) for w in re.findall(r"[A-Za-z_]\w*", a)}
        for word in sorted(words & set(names) - spaces.keys()):
            spaces[word] = read(word)
