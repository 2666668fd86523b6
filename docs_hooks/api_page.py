"""The API reference's completeness: ``docs/api.md`` must document every public name, and only those.

``api.md`` is written by hand, to group the names for a reader; each name has its own
``::: module.name`` block (rendered by mkdocstrings). The build fails when a name of a
public module's ``__all__`` has no block, or a block names something that is not public.
"""

from __future__ import annotations

import importlib
import re

#: The modules whose ``__all__`` make up the public API.
PUBLIC_MODULES = ("trajschema", "trajschema.verl", "trajschema.skyrl", "trajschema.testing")

_ENTRY = re.compile(r"^:::[ \t]*(\S+)", re.MULTILINE)


def public_names() -> list[str]:
    """Every public name, dotted (``trajschema.load_schema``), module by module in ``__all__`` order."""
    names = []
    for module in PUBLIC_MODULES:
        names += [f"{module}.{name}" for name in importlib.import_module(module).__all__]
    return names


def documented_names(markdown: str) -> list[str]:
    """The targets of the page's ``::: name`` blocks, in page order.

    >>> documented_names("# API\\n\\n::: trajschema.load_schema\\n    options: {}\\n")
    ['trajschema.load_schema']
    """
    return _ENTRY.findall(markdown)


def api_problems(markdown: str) -> list[str]:
    """What is wrong with an API page: public names without a block, blocks naming no public name, repeats."""
    public = public_names()
    documented = documented_names(markdown)
    problems = [f"{name} is public but has no '::: {name}' block" for name in public if name not in documented]
    problems += [
        f"'::: {name}' names no public name (not in the __all__ of {', '.join(PUBLIC_MODULES)})"
        for name in documented
        if name not in public
    ]
    problems += [
        f"'::: {name}' appears {documented.count(name)} times"
        for name in dict.fromkeys(documented)
        if documented.count(name) > 1
    ]
    return problems
