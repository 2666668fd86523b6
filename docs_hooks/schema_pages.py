"""One documentation page per packaged schema, and their index, written from the YAML files.

The tables come from `trajschema.export.table`, the rows ``trajschema show`` prints,
so the site and the command line describe a schema alike. Only the packaged directory is
read: a ``TRAJSCHEMA_PATH`` set by whoever builds the site changes nothing.
"""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Sequence
from pathlib import Path

import yaml

import trajschema as ts
from trajschema.export.table import dim_rows, extends, field_rows, tag_rows

#: Where the generated pages live in the site (``schemas/index.md``, ``schemas/<name>.md``).
PAGE_DIR = "schemas"


@dataclasses.dataclass(frozen=True)
class PackagedSchema:
    """A packaged schema file and the schema loaded from exactly that file."""

    name: str
    path: Path
    text: str
    schema: ts.Schema

    @property
    def parents(self) -> list[str]:
        """The ``extends:`` entries of the file itself (the direct parents), in file order."""
        declared = yaml.safe_load(self.text).get("extends") or []
        return [declared] if isinstance(declared, str) else list(declared)

    @property
    def page(self) -> str:
        return f"{PAGE_DIR}/{self.name}.md"


def packaged_dir() -> Path:
    """The packaged schema directory: the last entry of the search path, after ``TRAJSCHEMA_PATH``'s."""
    return Path(ts.schema_search_path()[-1])


def packaged_schemas(directory: Path | None = None) -> list[PackagedSchema]:
    """Every schema file of ``directory`` (default: the packaged one), parents before children.

    Names come from `trajschema.schema_names`, kept when the file is in ``directory``;
    each schema is loaded from its path, so a ``TRAJSCHEMA_PATH`` override of the same name
    is not what gets documented.
    """
    directory = packaged_dir() if directory is None else directory
    found = []
    for name in ts.schema_names():
        path = next((p for p in (directory / f"{name}.yaml", directory / f"{name}.yml") if p.is_file()), None)
        if path is not None:
            found.append(PackagedSchema(name, path, path.read_text(encoding="utf-8-sig"), ts.load_schema(path)))
    # A parent's lineage is shorter than its child's, so this lists parents first.
    return sorted(found, key=lambda s: (len(s.schema.lineage), s.name))


def code(text: str) -> str:
    """``text`` as a Markdown code span, whatever backticks it holds.

    >>> code("seq"), code("a`b")
    ('`seq`', '``a`b``')
    """
    if not text:
        return ""
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def prose(text: str) -> str:
    """``text`` safe in Markdown, also in a table cell: its backtick code spans are kept, nothing else is markup.

    >>> prose("a | b <c> *d* `x_y`")
    'a \\\\| b &lt;c&gt; \\\\*d\\\\* `x_y`'
    """
    parts = re.split(r"(`[^`]+`)", " ".join(text.split()))
    return "".join(part if i % 2 else _escape(part) for i, part in enumerate(parts))


def _escape(text: str) -> str:
    return re.sub(r"([\\`*_|\[\]])", r"\\\1", html.escape(text, quote=False))


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, compact: bool = False) -> str:
    """A Markdown table; cells must already be escaped (see `code` and `prose`).

    A ``compact`` table (narrower cell padding, see ``docs/stylesheets/extra.css``) is
    wrapped in a ``<div markdown>`` block (the ``md_in_html`` extension).
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    if compact:
        lines = ['<div class="ts-table" markdown>', "", *lines, "", "</div>"]
    return "\n".join(lines)


def _links(names: Sequence[str], known: set[str]) -> str:
    return ", ".join(f"[{code(n)}]({n}.md)" if n in known else code(n) for n in names) or "—"


def _fields_table(schema: ts.Schema) -> str:
    header = ["field", "shape", "dtype", "required", "pad", "value checks", "description"]
    rows = [
        [code(r.name), code(r.shape), code(r.dtype), r.required, code(r.pad), code(r.checks), prose(r.description)]
        for r in field_rows(schema.plan)
    ]
    return table(header, rows, compact=True)


def _dims_table(schema: ts.Schema) -> str:
    header = ["dim", "kind", "definition", "padding default", "description"]
    rows = [
        [code(r.name), r.kind, prose(r.definition), code(r.padding_default), prose(r.description)]
        for r in dim_rows(schema.plan)
    ]
    return table(header, rows, compact=True)


def _tags_table(schema: ts.Schema) -> str:
    rows = [
        [code(r.name), code(r.kind), code(r.default), code(r.equals), prose(r.description)]
        for r in tag_rows(schema.plan)
    ]
    return table(["tag", "kind", "default", "equals", "description"], rows, compact=True)


#: Front matter for the generated pages: their tables need the width the table of contents takes.
_HIDE_TOC = ["---", "hide:", "  - toc", "---", ""]


def _section(title: str, rows: Sequence[object], text: str, empty: str) -> list[str]:
    return [f"## {title}", "", text if rows else empty, ""]


def _facts(s: PackagedSchema, known: set[str]) -> list[str]:
    schema = s.schema
    facts = [f"- **Extends:** {_links(s.parents, known)}"]
    if extends(schema.plan):
        facts.append(f"- **Resolution order:** {' → '.join(code(n) for n in schema.lineage)}")
    archs = ", ".join(code(a) for a in schema.architectures)
    facts.append(
        f"- **Architectures:** {archs} (`ts.schema_for_architecture` picks this schema for them)"
        if archs
        else "- **Architectures:** none listed"
    )
    facts.append(f"- **Undeclared fields:** `extra: {schema.extra}`")
    facts.append(f"- **File:** `schemas/{s.path.name}`; load it with `ts.load_schema({s.name!r})`")
    return facts


def schema_page(s: PackagedSchema, known: set[str]) -> str:
    """The page of one schema; ``known`` are the schema names that have a page (for links)."""
    schema = s.schema
    fields, dims, tags = field_rows(schema.plan), dim_rows(schema.plan), tag_rows(schema.plan)
    # The tables need the width the table of contents would take.
    lines = [
        "---",
        "hide:",
        "  - toc",
        "---",
        "",
        f"# {code(s.name)}",
        "",
        prose(schema.description) or "No description.",
        "",
        *_facts(s, known),
        "",
    ]
    lines += _section(
        "Fields",
        fields,
        f"{len(fields)} fields{', inherited ones included' if extends(schema.plan) else ''}, in declaration order."
        f"\n\n{_fields_table(schema)}",
        "No fields.",
    )
    lines += _section("Dims", dims, _dims_table(schema), "No dims.")
    lines += _section("Tags", tags, _tags_table(schema), "No tags declared.")
    resolved = "\n".join("    " + line if line else "" for line in schema.to_yaml().rstrip("\n").splitlines())
    lines += [
        "## Source",
        "",
        f"The file `schemas/{s.path.name}`, as packaged:",
        "",
        "```yaml",
        s.text.rstrip("\n"),
        "```",
        "",
        f'??? note "Resolved, with the parents merged in: `ts.load_schema({s.name!r}).to_yaml()`"',
        "",
        "    ```yaml",
        resolved,
        "    ```",
        "",
    ]
    return "\n".join(lines)


def index_page(schemas: Sequence[PackagedSchema]) -> str:
    """The overview of every packaged schema."""
    known = {s.name for s in schemas}
    rows = [
        [
            f"[{code(s.name)}]({s.name}.md)",
            _links(s.parents, known),
            "<br>".join(code(a) for a in s.schema.architectures) or "—",
            prose(s.schema.description),
        ]
        for s in schemas
    ]
    return "\n".join(
        [
            *_HIDE_TOC,
            "# Packaged schemas",
            "",
            f"The {len(schemas)} schemas shipped inside the package (`schemas/` in the repository). "
            "Each page is generated from the YAML file when the site is built. "
            "`trajschema show NAME` prints the same tables in a terminal.",
            "",
            table(["schema", "extends", "architectures", "description"], rows, compact=True),
            "",
            "To add a model family of your own, see [Adding a model family](../adding-a-model-family.md).",
            "",
        ]
    )
