"""The API reference's completeness: the pages of ``docs/api/`` document every public name, once.

The API pages are written by hand, one per part of the package (schemas, validation,
padding, ...), to group the names for a reader; each name has its own
``::: module.name`` block (rendered by mkdocstrings). The build fails when a name of a
public module's ``__all__`` has no block on any of them, a block names something that
is not public, or a name has blocks on two pages.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

#: The modules whose ``__all__`` make up the public API.
PUBLIC_MODULES = (
    "trajschema",
    "trajschema.verl",
    "trajschema.skyrl",
    "trajschema.trl",
    "trajschema.openrlhf",
    "trajschema.testing",
)

#: The folder of ``docs/`` that holds the API pages.
API_DIR = "api"

_ENTRY = re.compile(r"^:::[ \t]*(\S+)", re.MULTILINE)


def api_pages(docs_dir: Path | None = None) -> dict[str, str]:
    """The API pages' Markdown by their path under ``docs/`` (``api/schemas.md``), sorted."""
    docs_dir = Path(__file__).resolve().parent.parent / "docs" if docs_dir is None else docs_dir
    return {
        p.relative_to(docs_dir).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted((docs_dir / API_DIR).glob("*.md"))
    }


def all_api_markdown(pages: dict[str, str] | None = None) -> str:
    """Every API page's Markdown, one after the other (what `api_problems` and the role rewriter read)."""
    return "\n\n".join((api_pages() if pages is None else pages).values())


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
    """What is wrong with the API pages (``markdown``: all of them, see `all_api_markdown`).

    Public names without a block, blocks naming no public name, names with more than one block.
    """
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
