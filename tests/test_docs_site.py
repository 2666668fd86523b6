"""The documentation site: generated schema pages, the padding picture, the CLI and API references.

The generators (``docs_hooks``) are tested directly, against references built here from
the YAML files, the tensors and the argument parser. The slow tests build the whole
site once with ``mkdocs build --strict`` and read its HTML (every page, for Markdown
left unrendered; the API page, for Sphinx roles), and build a copy of the tree whose
docstrings ``docs_hooks.sphinx_roles --fix`` rewrote.
"""

from __future__ import annotations

import argparse
import doctest
import html
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

import trajschema as ts
from docs_hooks import (
    api_page,
    built_html,
    cli_examples,
    cli_page,
    padding_picture,
    rendered,
    schema_pages,
    setup_blocks,
    sphinx_roles,
)

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = ROOT / "schemas"
PACKAGED_NAMES = sorted(p.stem for p in PACKAGED.glob("*.yaml"))
BUILD_TIMEOUT_S = 240
#: The hand-written Markdown: the site's own pages, and the README, which the site does not build.
MARKDOWN_SOURCES = sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md"])


def needs_docs_extra(module: str) -> Any:
    """``module``, or a skip that says what to install: mkdocs and its Markdown libraries are in the docs extra."""
    return pytest.importorskip(
        module, reason=f'{module} is not installed: install the docs extra, pip install -e ".[docs]"'
    )


# -- reading Markdown tables without a Markdown library (the floor venv has none) ---------


def cells(line: str) -> list[str]:
    """The cells of one Markdown table row, splitting on ``|`` outside code spans."""
    out, cell, fence = [], "", ""
    for run in re.findall(r"`+|\\.|[^`\\]", line.strip().strip("|")):
        if run.startswith("`"):
            fence = "" if run == fence else (fence or run)
        if run == "|" and not fence:
            out.append(cell.strip())
            cell = ""
        else:
            cell += run
    return [*out, cell.strip()]


def table_rows(page: str, header: str) -> dict[str, list[str]]:
    """The rows of the table whose first header cell is ``header``, by their first cell."""
    lines = page.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("|") and cells(ln)[0] == header)
    rows = {}
    for ln in lines[start + 2 :]:
        if not ln.startswith("|"):
            break
        row = cells(ln)
        rows[row[0]] = row
    return rows


def test_cells_respect_code_spans() -> None:
    assert cells("| `a` | `int16 | int32` | x \\| y |") == ["`a`", "`int16 | int32`", "x \\| y"]


# -- the schema pages: an independent reference from the YAML files ------------------------


def _declarations(schema: ts.Schema, section: str) -> dict[str, Any]:
    """``section`` of the schema as its files declare it: the first file of the lineage that declares a name wins."""
    found: dict[str, Any] = {}
    for name in schema.lineage:
        for key, value in (yaml.safe_load((PACKAGED / f"{name}.yaml").read_text()).get(section) or {}).items():
            found.setdefault(key, value)
    return found


def _shape(decl: dict[str, Any]) -> str:
    return "[" + ", ".join(str(e) for e in decl["shape"]) + "]" if "shape" in decl else ""


def _dtype(decl: dict[str, Any]) -> str:
    if "dtype" not in decl:
        return decl["kind"]
    return " | ".join(decl["dtype"]) if isinstance(decl["dtype"], list) else decl["dtype"]


def _dim_kind(decl: Any) -> str:
    if isinstance(decl, int) or (isinstance(decl, dict) and "size" in decl):
        return "fixed"
    if isinstance(decl, str) or (isinstance(decl, dict) and "expr" in decl):
        return "derived"
    return "free"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    schemas = schema_pages.packaged_schemas(PACKAGED)
    known = {s.name for s in schemas}
    return {"index": schema_pages.index_page(schemas)} | {s.name: schema_pages.schema_page(s, known) for s in schemas}


def test_every_packaged_schema_and_only_those(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A TRAJSCHEMA_PATH that adds and overrides schemas changes nothing on the site."""
    (tmp_path / "mine.yaml").write_text("name: mine\nextends: [text]\n")
    (tmp_path / "text.yaml").write_text("name: text\nfields:\n  x: {kind: int, pad: 0}\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    assert "mine" in ts.schema_names()
    found = schema_pages.packaged_schemas()
    assert sorted(s.name for s in found) == PACKAGED_NAMES
    text = next(s for s in found if s.name == "text")
    assert text.text == (PACKAGED / "text.yaml").read_text() and "x" not in text.schema.fields
    # Parents come before their children, so the nav reads top down.
    order = [s.name for s in found]
    assert all(order.index(p) < order.index(s.name) for s in found for p in s.schema.lineage[1:])


@pytest.mark.parametrize("name", PACKAGED_NAMES)
def test_schema_page_matches_the_yaml(name: str, pages: dict[str, str]) -> None:
    page, schema = pages[name], ts.load_schema(PACKAGED / f"{name}.yaml")
    fields = table_rows(page, "field")
    for field, decl in _declarations(schema, "fields").items():
        row = fields.pop(f"`{field}`")
        assert row[1:3] == [f"`{_shape(decl)}`" if "shape" in decl else "", f"`{_dtype(decl)}`"], field
        assert row[3] == ("no" if decl.get("required") is False else "yes"), field
    assert not fields, f"rows for undeclared fields: {list(fields)}"
    dims = table_rows(page, "dim")
    padding = _declarations(schema, "padding")
    for dim, decl in _declarations(schema, "dims").items():
        row = dims.pop(f"`{dim}`")
        assert row[1] == _dim_kind(decl) and row[3] == (f"`{padding[dim]}`" if dim in padding else ""), dim
    assert not dims
    tags = _declarations(schema, "tags")
    assert set(table_rows(page, "tag") if tags else {}) == {f"`{t}`" for t in tags}
    source = page.split("## Source", 1)[1].split("```yaml\n", 1)[1].split("\n```\n", 1)[0]
    assert source + "\n" == (PACKAGED / f"{name}.yaml").read_text()
    resolved = "\n".join("    " + ln if ln else "" for ln in schema.to_yaml().rstrip("\n").splitlines())
    assert f"    ```yaml\n{resolved}\n    ```" in page  # the resolved form, in a collapsed note


def test_schema_index_links_every_page(pages: dict[str, str]) -> None:
    rows = table_rows(pages["index"], "schema")
    assert set(rows) == {f"[`{n}`]({n}.md)" for n in PACKAGED_NAMES}
    for name in PACKAGED_NAMES:
        parents = yaml.safe_load((PACKAGED / f"{name}.yaml").read_text()).get("extends") or []
        assert rows[f"[`{name}`]({name}.md)"][1] == (", ".join(f"[`{p}`]({p}.md)" for p in parents) or "—")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a | b", "a \\| b", id="pipe"),
        pytest.param("<b>x</b>", "&lt;b&gt;x&lt;/b&gt;", id="html"),
        pytest.param("*a* _b_ [c]", "\\*a\\* \\_b\\_ \\[c\\]", id="emphasis-and-links"),
        pytest.param("use `x | y`", "use `x | y`", id="code-span-kept"),
        pytest.param("two\n  lines", "two lines", id="whitespace"),
    ],
)
def test_prose_is_inert(text: str, expected: str) -> None:
    assert schema_pages.prose(text) == expected


@pytest.mark.parametrize("text", ["seq", "a`b", "`x", "``", "x | y"])
def test_code_spans_survive_backticks(text: str) -> None:
    span = schema_pages.code(text)
    fence = re.match(r"`+", span)
    assert fence is not None
    inner = span[len(fence[0]) : -len(fence[0])]
    assert inner.strip(" ") == text and fence[0] not in inner


# -- the padding picture ---------------------------------------------------------------------

_GROUP = re.compile(r'<g class="ts-sample ts-sample-(\w+)"([^>]*)>(.*?)</g>', re.S)


def _groups(svg: str) -> list[tuple[str, dict[str, str], str]]:
    return [
        (kind, dict(re.findall(r'data-([\w-]+)="([^"]*)"', attrs)), body) for kind, attrs, body in _GROUP.findall(svg)
    ]


@pytest.fixture(scope="module")
def example() -> padding_picture.Example:
    return padding_picture.example_batch(padding_picture.packaged_text_schema())


def test_picture_rows_are_the_padded_batch(example: padding_picture.Example) -> None:
    groups = _groups(padding_picture.padding_figure(example))
    assert len(groups) == len(example.samples)
    padding = [attrs for kind, attrs, _ in groups if kind == "padding"]
    assert len(padding) == len(example.padding) == ts.padding_needed(5, padding_picture.DP_SIZE) == 3
    assert {a["uid"] for a in padding} == {example.padding.uid}
    assert [kind == "padding" for kind, _, _ in groups] == [not m for m in ts.real_mask(example.tags).tolist()]
    for (_, attrs, body), sample in zip(groups, example.samples):
        assert attrs["uid"] == sample["uid"]
        assert int(attrs["prompt"]) == sample["prompts"].numel()
        assert int(attrs["response"]) == sample["responses"].numel()
        shown = [p for p in padding_picture.display_columns(sample["input_ids"].numel()) if p is not None]
        eos = sum(int(sample["input_ids"][p]) == padding_picture.EOS_TOKEN_ID for p in shown)
        assert body.count(" ts-eos") == eos
        prompt = sample["prompts"].numel()
        masks = {"attention_mask": 0, "response_mask": prompt, "loss_mask": prompt}  # mask -> its first position
        zeros = sum(
            int(v) == 0 for m, offset in masks.items() for i, v in enumerate(sample[m].tolist()) if offset + i in shown
        )
        assert body.count('class="ts-zero"') == zeros
    assert "is_padding: true" in groups[-1][2] and "is_padding: false" in groups[0][2]


def test_picture_refuses_a_tag_it_would_have_to_guess(example: padding_picture.Example) -> None:
    tags = [dict(t) for t in example.tags]
    tags[-1]["is_padding"] = 1
    with pytest.raises(TypeError, match="is_padding must be True or False"):
        padding_picture.picture_rows(example.samples, tags)


@pytest.mark.parametrize("length", [0, 1, padding_picture.MAX_CELLS, padding_picture.MAX_CELLS + 1, 128, 5000])
def test_display_columns(length: int) -> None:
    cols = padding_picture.display_columns(length)
    shown = [c for c in cols if c is not None]
    assert len(cols) <= padding_picture.MAX_CELLS and shown == sorted(set(shown))
    if length <= padding_picture.MAX_CELLS:
        assert shown == list(range(length))
    else:
        assert shown[-1] == length - 1
        row = padding_picture.PictureRow("u", None, False, length - 1, [5] * length, None, [1], [1])
        svg = padding_picture.padding_svg([row])
        assert f"…{length - len(shown)}…" in svg  # the gap says how many positions it hides


# -- the CLI reference -------------------------------------------------------------------------


def _tiny_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tool", description="A tiny tool.")
    p.add_argument("--version", action="version", version="1")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = sub.add_parser(
        "check",
        aliases=["c"],
        help="check | files",
        description="Check FILE.\n\n  indented  a table\n  kept      as is",
        epilog="Example:\n  tool check x.pt --depth shapes",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("file", metavar="FILE", help="the file")
    check.add_argument("--depth", choices=["shapes", "values"], default="values", help="depth (default: %(default)s)")
    check.add_argument("--dim", action="append", default=[], metavar="NAME=SIZE", help="repeatable")
    check.add_argument("--secret", help=argparse.SUPPRESS)
    check.add_argument("--schema", required=True, help="a schema")
    group = sub.add_parser("schema", help="schema commands").add_subparsers(dest="what")
    group.add_parser("show", help="show one")
    return p


def test_cli_page_of_a_tiny_parser() -> None:
    doc = cli_page.command_docs(_tiny_parser())
    assert [c.path for c in cli_page.all_commands(doc)] == [
        ("tool",),
        ("tool", "check"),
        ("tool", "schema"),
        ("tool", "schema", "show"),
    ]
    page = cli_page.cli_page(doc)
    assert "## `tool check` {#check}" in page and "## `tool schema show` {#schema-show}" in page
    rows = table_rows(page.split("{#check}")[1], "argument")
    assert rows["`--depth`"] == ["`--depth`", "`{shapes,values}`", "`values`", "depth (default: values)"]
    assert rows["`--schema`"][3] == "a schema **(required)**"
    assert rows["`FILE`"][1] == "positional" and rows["`--dim`"][2] == ""  # no "[]" default
    assert "--secret" not in page and not any("--help" in k for k in rows)
    assert "check \\| files" in page  # summaries are escaped for the table
    assert "```text\nindented  a table\nkept      as is\n```" in page
    assert "```text\ntool check x.pt --depth shapes\n```" in page  # not "trajschema": no bash
    usage = page.split("{#check}")[1].split("```text\nusage: ", 1)[1].split("\n```", 1)[0]
    assert usage.startswith("tool check") and max(map(len, usage.splitlines())) <= cli_page.USAGE_WIDTH


def test_help_text_blocks() -> None:
    assert cli_page.help_text("Example:\n  trajschema show text\n  A=1 trajschema list") == [
        "Example:",
        "",
        "```bash",
        "trajschema show text",
        "A=1 trajschema list",
        "```",
        "",
    ]


@pytest.mark.skipif(
    importlib.util.find_spec("trajschema.cli.app") is None, reason="trajschema.cli.app is not written yet"
)
def test_cli_page_lists_every_subcommand_and_option() -> None:
    from trajschema.cli.app import build_parser

    parser = build_parser()
    page = cli_page.cli_page(cli_page.command_docs(parser))
    sub_action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert sub_action.choices, "build_parser() has no subcommands"
    for name, sub in sub_action.choices.items():
        section = page.split(f"## `trajschema {name}`", 1)[1].split("\n## ", 1)[0]
        assert " ".join(sub.format_usage().split()) in " ".join(section.split()), name
        options = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", sub.format_usage()))
        assert all(f"`{o}`" in section for o in options), (name, options)


# -- the API reference ---------------------------------------------------------------------------


def test_api_pages_document_every_public_name_once() -> None:
    pages = api_page.api_pages()
    assert api_page.api_problems(api_page.all_api_markdown(pages)) == []
    where: dict[str, list[str]] = {}
    for page, text in pages.items():
        for name in api_page.documented_names(text):
            where.setdefault(name, []).append(page)
    for module in api_page.PUBLIC_MODULES:
        for name in importlib.import_module(module).__all__:
            assert len(where.get(f"{module}.{name}", [])) == 1, (name, where.get(f"{module}.{name}"))


def test_api_reference_is_split_by_room() -> None:
    pages = api_page.api_pages()
    rooms = {"schemas", "validation", "padding", "dense", "bundles", "transferqueue", "testing"}
    rooms |= {"verl", "skyrl", "trl", "openrlhf"}
    assert {f"{api_page.API_DIR}/{r}.md" for r in rooms} | {f"{api_page.API_DIR}/index.md"} == set(pages)
    assert {Path(p).stem for p, text in pages.items() if api_page.documented_names(text)} == rooms
    # Each module's names stay on its own page.
    for module in ("verl", "skyrl", "trl", "openrlhf", "testing"):
        names = api_page.documented_names(pages[f"{api_page.API_DIR}/{module}.md"])
        assert names and all(n.startswith(f"trajschema.{module}.") for n in names)
    assert "::: trajschema.load_schema" in pages[f"{api_page.API_DIR}/schemas.md"]


def test_api_check_can_fail() -> None:
    text = api_page.all_api_markdown()
    missing = text.replace("::: trajschema.load_schema\n", "")
    assert api_page.api_problems(missing) == [
        "trajschema.load_schema is public but has no '::: trajschema.load_schema' block"
    ]
    extra = text + "\n::: trajschema.not_a_name\n\n::: trajschema.export.table.field_rows\n"
    assert [p.split("'")[1] for p in api_page.api_problems(extra)] == [
        "::: trajschema.not_a_name",
        "::: trajschema.export.table.field_rows",
    ]
    # The same name on two pages is a repeat too.
    pages = api_page.api_pages()
    pages["api/verl.md"] += "\n::: trajschema.Schema\n"
    assert "appears 2 times" in api_page.api_problems(api_page.all_api_markdown(pages))[0]


@pytest.mark.parametrize(
    "module",
    [api_page, built_html, cli_examples, cli_page, padding_picture, rendered, schema_pages, setup_blocks, sphinx_roles],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module: Any) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


# -- the nav ------------------------------------------------------------------------------------


def test_nav_gets_a_section_of_schema_pages() -> None:
    needs_docs_extra("mkdocs")
    from docs_hooks import mkdocs_hooks

    schemas = schema_pages.packaged_schemas()
    nav: list[Any] = [{"Home": "index.md"}, {"Reference": [{"Packaged schemas": "schemas/index.md"}]}]
    assert mkdocs_hooks._expand_schema_section(nav, schemas)
    section = nav[1]["Reference"][0]["Packaged schemas"]
    assert section[0] == "schemas/index.md"
    assert section[1:] == [{s.name: f"schemas/{s.name}.md"} for s in schemas]
    assert not mkdocs_hooks._expand_schema_section([{"Home": "index.md"}], schemas)


# -- the repository URL: set by whoever publishes the site ------------------------------------------

EXAMPLE_REPO_URL = "https://git.example.org/ml/trajschema"


@pytest.mark.parametrize(
    ("env", "expected"),
    [pytest.param(None, None, id="unset"), pytest.param(EXAMPLE_REPO_URL, EXAMPLE_REPO_URL, id="set")],
)
def test_repo_url_comes_from_the_environment(
    env: str | None, expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs_docs_extra("mkdocs")
    from mkdocs.config import load_config

    if env is None:
        monkeypatch.delenv("TRAJSCHEMA_REPO_URL", raising=False)
    else:
        monkeypatch.setenv("TRAJSCHEMA_REPO_URL", env)
    assert load_config(str(ROOT / "mkdocs.yml")).repo_url == expected
    assert _mkdocs_yml()["repo_url"] == expected  # and the tests' reader of mkdocs.yml agrees


def test_pages_show_the_repository_url_when_the_site_has_one() -> None:
    needs_docs_extra("mkdocs")
    from docs_hooks import mkdocs_hooks

    page: Any = SimpleNamespace(file=SimpleNamespace(src_uri="getting-started.md"))
    text = "$ git clone <repository URL> trajschema\n`pip install git+<repository URL>@<commit hash>`\n"
    assert mkdocs_hooks.on_page_markdown(text, page, SimpleNamespace(repo_url=None), None) == text  # type: ignore[arg-type]
    filled = mkdocs_hooks.on_page_markdown(text, page, SimpleNamespace(repo_url=EXAMPLE_REPO_URL + "/"), None)  # type: ignore[arg-type]
    assert filled == (
        f"$ git clone {EXAMPLE_REPO_URL} trajschema\n`pip install git+{EXAMPLE_REPO_URL}@<commit hash>`\n"
    )
    clone = "git clone <repository URL> trajschema && cd trajschema"
    assert clone in (ROOT / "docs" / "getting-started.md").read_text()
    assert mkdocs_hooks.REPO_URL_PLACEHOLDER in clone


# -- Markdown left unrendered ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("page", "finds"),
    [
        pytest.param('<p>??? note "Resolved"</p>', 1, id="details-opener"),
        pytest.param("<p>!!! warning</p>", 1, id="admonition-opener"),
        pytest.param("<p>a ``` b</p>", 1, id="fence-in-text"),
        pytest.param("<p>&#96;&#96;&#96;python</p>", 1, id="fence-as-entities"),
        pytest.param("<svg><text>???</text></svg>", 1, id="svg-text-is-text"),
        pytest.param("<pre><code>\n\n```yaml\na: 1\n```</code></pre>", 1, id="block-opening-with-a-fence"),
        pytest.param("<PRE><CODE>~~~\nx</CODE></PRE>", 1, id="upper-case-tags-tilde-fence"),
        pytest.param("<p><code>???</code> and <code>```</code> <kbd>!!!</kbd></p>", 0, id="inline-code"),
        pytest.param("<pre><code>a\n```\n</code></pre>", 0, id="fence-inside-a-block"),
        pytest.param('<script>x = "???"</script><style>/* ``` */</style>', 0, id="script-and-style"),
        pytest.param("<details><summary>Resolved</summary><pre><code>name: x</code></pre></details>", 0, id="rendered"),
        pytest.param("<p>Why?? Not three.</p><!-- ??? -->", 0, id="two-marks-and-a-comment"),
        pytest.param("<p>**bold** text</p>", 2, id="emphasis"),
        pytest.param("<p>see [the page](x.md)</p>", 1, id="link"),
        pytest.param("<p>[<code>Schema</code>][trajschema.Schema]</p>", 1, id="failed-autoref"),
        pytest.param("<p>text\n{: .note }</p>", 1, id="attr-list"),
        pytest.param("<p>::: trajschema.Schema</p>", 1, id="mkdocstrings-block"),
        pytest.param("<p>a `code span that never closed</p>", 1, id="backtick"),
        pytest.param("<p>2**24 elements, x ** 2, [a] [b] (c)</p>", 0, id="arithmetic-and-brackets"),
        pytest.param("<p>It checks:\n- shapes;\n- dtypes.</p>", 2, id="dash-list-in-a-paragraph"),
        pytest.param("<p>Either\n* this\n  + or that</p>", 2, id="star-and-plus-list-in-a-paragraph"),
        pytest.param("<p>Three steps:\n1. write;\n12. read.</p>", 2, id="numbered-list-in-a-paragraph"),
        pytest.param("<p>The flag\n<code>- x</code> and <code>1. y</code>\nare code.</p>", 0, id="code-at-line-start"),
        pytest.param("<p>a - b, 3. c, 1.5 d</p><ul><li>a list</li></ul><pre><code>- x</code></pre>", 0, id="not-lists"),
    ],
)
def test_raw_markdown_finds(page: str, finds: int) -> None:
    assert len(rendered.raw_markdown(page)) == finds


@pytest.mark.parametrize("source", MARKDOWN_SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_list_inside_a_paragraph(source: Path) -> None:
    """A list needs a blank line before it; without one it renders as part of the sentence above."""
    out = _render(source.read_text(), *_markdown_extensions())
    assert rendered.lists_in_paragraphs(out) == []


def test_a_list_right_under_its_sentence_is_found() -> None:
    names, options = _markdown_extensions()
    page = "It checks:\n- shapes;\n- dtypes.\n\nIt checks:\n\n- shapes;\n- dtypes.\n"
    assert [p.split(": ", 1)[0] for p in rendered.lists_in_paragraphs(_render(page, names, options))] == [
        "line 2",
        "line 3",
    ]


class _MkdocsYaml(yaml.SafeLoader):
    """Reads ``mkdocs.yml`` as mkdocs does: ``!ENV NAME`` or ``!ENV [NAME, ..., default]`` is the variable's value."""


def _env_tag(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return os.environ.get(loader.construct_scalar(node))
    *names, default = loader.construct_sequence(node)  # type: ignore[arg-type]
    return next((os.environ[n] for n in names if n in os.environ), default)


_MkdocsYaml.add_constructor("!ENV", _env_tag)


def _mkdocs_yml() -> dict[str, Any]:
    config: dict[str, Any] = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_MkdocsYaml)
    return config


def _markdown_extensions() -> tuple[list[str], dict[str, Any]]:
    """The Markdown extensions ``mkdocs.yml`` enables, and their options."""
    names, options = [], {}
    for entry in _mkdocs_yml()["markdown_extensions"]:
        name, opts = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
        names.append(name)
        if opts:
            options[name] = opts
    return names, options


def _render(page: str, names: list[str], options: dict[str, Any]) -> str:
    markdown = needs_docs_extra("markdown")
    needs_docs_extra("pymdownx")
    body = re.sub(r"\A---\n.*?\n---\n", "", page, flags=re.S)  # front matter is mkdocs', not Markdown's
    return markdown.Markdown(extensions=names, extension_configs=options).convert(body)


def test_generated_pages_render_with_the_extensions_mkdocs_yml_enables(pages: dict[str, str]) -> None:
    names, options = _markdown_extensions()
    for name, page in pages.items():
        out = _render(page, names, options)
        assert rendered.raw_markdown(out) == [], name
        if name != "index":
            assert "<details" in out and "<summary>Resolved, with the parents merged in" in out, name


def test_without_the_details_extension_the_check_finds_the_resolved_note(pages: dict[str, str]) -> None:
    names, options = _markdown_extensions()
    names.remove("pymdownx.details")
    for name in PACKAGED_NAMES:
        problems = rendered.raw_markdown(_render(pages[name], names, options))
        assert any("??? note" in p for p in problems) and any("starting with a fence: '```yaml'" in p for p in problems)


def test_the_build_fails_on_a_page_with_raw_markdown() -> None:
    needs_docs_extra("mkdocs")
    from mkdocs.exceptions import PluginError

    from docs_hooks import mkdocs_hooks

    page: Any = SimpleNamespace(file=SimpleNamespace(src_uri="x.md"))
    assert mkdocs_hooks.on_page_content("<p>fine</p>", page, None, None) == "<p>fine</p>"  # type: ignore[arg-type]
    with pytest.raises(PluginError, match=r"x\.md: Markdown left unrendered.*\?\?\? note"):
        mkdocs_hooks.on_page_content('<p>??? note "x"</p>', page, None, None)  # type: ignore[arg-type]


# -- the whole site --------------------------------------------------------------------------------

#: The roles the docstring pass must remove (what `docs_hooks.sphinx_roles` rewrites).
SPHINX_ROLE = re.compile(r":(?:py:)?(?:func|class|meth|attr|data|exc|mod|obj|const):")


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _build(root: Path, site: Path, **env: str) -> None:
    """``mkdocs build --strict`` of the tree at ``root``, its package first on the path."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(root), **env}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


def _api_html(site: Path) -> str:
    """The built API pages, one after the other."""
    pages = sorted((site / api_page.API_DIR).rglob("index.html"))
    assert len(pages) == len(api_page.api_pages()), pages
    return "\n".join(p.read_text() for p in pages)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    needs_docs_extra("mkdocs")
    tmp = tmp_path_factory.mktemp("docs_site")
    extra = tmp / "extra_schemas"
    extra.mkdir()
    (extra / "mine.yaml").write_text("name: mine\nextends: [text]\n")
    _build(ROOT, tmp / "site", TRAJSCHEMA_PATH=str(extra), TRAJSCHEMA_REPO_URL=EXAMPLE_REPO_URL)
    return tmp / "site"


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_site_builds_strict(site: Path, example: padding_picture.Example) -> None:
    assert not (site / "schemas" / "mine").exists()  # TRAJSCHEMA_PATH is not documented
    for name in PACKAGED_NAMES:
        page = (site / "schemas" / name / "index.html").read_text()
        for field, decl in _declarations(ts.load_schema(PACKAGED / f"{name}.yaml"), "fields").items():
            shape = f"<code>{html.escape(_shape(decl))}</code>" if "shape" in decl else ""
            cols = [f"<code>{html.escape(field)}</code>", shape, f"<code>{_dtype(decl)}</code>"]
            row = "<tr>\n" + "\n".join(f"<td>{c}</td>" for c in cols)
            assert row in page, (name, field, row)
        code = page.split('id="source"', 1)[1].split('<div class="highlight"><pre>', 1)[1].split("</code>", 1)[0]
        assert _text(code).rstrip("\n") == (PACKAGED / f"{name}.yaml").read_text().rstrip("\n"), name
        # The resolved form: a collapsed block holding the YAML, not a paragraph and a fence.
        assert "<details" in page, f"{name}: the resolved note is not a collapsible block"
        details = page.split("<details", 1)[1].split("</details>", 1)[0]
        assert "<summary>Resolved, with the parents merged in" in details, name
        resolved = details.split("<pre>", 1)[1].split("</code>", 1)[0]
        assert _text(resolved).rstrip("\n") == ts.load_schema(PACKAGED / f"{name}.yaml").to_yaml().rstrip("\n")
    padding = (site / "padding" / "index.html").read_text()
    assert padding_picture.MARKER not in padding
    assert padding.count('class="ts-sample ts-sample-padding"') == len(example.padding)
    assert padding.count('class="ts-sample ts-sample-real"') == len(example.samples) - len(example.padding)
    api = _api_html(site)
    missing = [n for n in api_page.public_names() if f'id="{n}"' not in api]
    assert not missing, f"the API pages render no entry for {missing}"
    if importlib.util.find_spec("trajschema.cli.app") is not None:
        from trajschema.cli.app import build_parser

        cli = (site / "cli" / "index.html").read_text()
        doc = cli_page.command_docs(build_parser())
        assert all(f'id="{c.anchor}"' in cli for c in cli_page.all_commands(doc)[1:])


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_no_built_page_shows_unrendered_markdown(site: Path) -> None:
    built = sorted(site.rglob("*.html"))
    # Every page is walked: each hand-written page, each schema page, the 404 page.
    expected = {f"{p.stem}/index.html" for p in (ROOT / "docs").glob("*.md") if p.stem != "index"}
    expected |= {f"{uri[:-3].removesuffix('index')}/index.html".replace("//", "/") for uri in api_page.api_pages()}
    expected |= {"cli-by-example/index.html", "changelog/index.html"}
    expected |= {"index.html", "404.html", "schemas/index.html", *(f"schemas/{n}/index.html" for n in PACKAGED_NAMES)}
    assert expected <= {p.relative_to(site).as_posix() for p in built}
    problems = {p.relative_to(site).as_posix(): rendered.raw_markdown(p.read_text()) for p in built}
    assert {page: found for page, found in problems.items() if found} == {}


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_the_rewriter_links_exactly_the_anchors_of_the_api_page(site: Path) -> None:
    anchors = set(re.findall(r'id="(trajschema\.[^"]+)"', _api_html(site)))
    assert set(sphinx_roles.documented_objects()) == anchors


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_api_page_shows_no_sphinx_role(site: Path) -> None:
    text = _text(_api_html(site))
    found = [text[max(0, m.start() - 30) : m.end() + 30].replace("\n", " ") for m in SPHINX_ROLE.finditer(text)]
    assert not found, f"{len(found)} Sphinx roles on the API page, e.g. {found[:3]}"
    # mkdocstrings cross-references all resolved: none is left on the page as literal text.
    assert "][trajschema." not in _api_html(site)


# -- built HTML: scrolling tables, console blocks copied without prompts --------------------------


class _Tables(HTMLParser):
    """For each ``<table>``, whether an element around it is Material's scrolling wrapper."""

    VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, bool]] = []
        self.tables: list[bool] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "table":
            self.tables.append(any(scrolls for _, scrolls in self.stack))
        if tag not in self.VOID:
            self.stack.append((tag, built_html.SCROLLWRAP in classes))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return


def _tables(page: str) -> list[bool]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables


_PRE = re.compile(r"<pre([^>]*)>.*?<code[^>]*>(.*?)</code>", re.S)


def _console_blocks(page: str) -> list[tuple[str | None, str]]:
    """Each code block with prompts: (its data-copy attribute or None, its text)."""
    found = []
    for attrs, code in _PRE.findall(page):
        if 'class="gp"' in code:
            copy = re.search(r'data-copy="([^"]*)"', attrs)
            found.append((html.unescape(copy[1]) if copy else None, _text(code)))
    return found


@pytest.mark.parametrize(
    ("page", "tables"),
    [
        pytest.param("<table><tr><td><table></table></td></tr></table>", [True, True], id="nested"),
        pytest.param("<p>a</p><TABLE class='x'></TABLE><table></table>", [True, True], id="two-and-upper-case"),
        pytest.param("<div><table></table>", [True], id="unclosed-div"),
    ],
)
def test_wrap_tables(page: str, tables: list[bool]) -> None:
    assert _tables(page) == [False] * len(tables)  # the check can fail
    wrapped = built_html.wrap_tables(page)
    assert _tables(wrapped) == tables and built_html.wrap_tables(wrapped) == wrapped
    assert _text(wrapped) == _text(page)


def test_copy_commands_keeps_commands_only() -> None:
    anchor = '<a id="__codelineno-0-{}" name="x" href="#x"></a>'
    code = "\n".join(
        [
            anchor.format(1) + '<span class="gp">$ </span>pip<span class="w"> </span>install -e &quot;.[tq]&quot;',
            anchor.format(2) + '<span class="go">$ not a prompt: output</span>',
            anchor.format(3) + '<span class="gp">$ </span>trajschema check a.pt \\',
            anchor.format(4) + "  --schema text",
            anchor.format(5) + '<span class="go">valid</span>',
        ]
    )
    page = f'<div class="highlight"><pre><span></span><code>{code}</code></pre></div><pre><code>plain</code></pre>'
    out = built_html.copy_commands(page)
    assert _console_blocks(out) == [('pip install -e ".[tq]"\ntrajschema check a.pt \\\n  --schema text', _text(code))]
    assert out.endswith("<pre><code>plain</code></pre>") and built_html.copy_commands(out) == out


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_every_built_table_scrolls(site: Path) -> None:
    found = {p.relative_to(site).as_posix(): _tables(p.read_text()) for p in sorted(site.rglob("*.html"))}
    assert sum(map(len, found.values())) > 50  # the schema pages alone hold more
    assert {page: t for page, t in found.items() if not all(t)} == {}
    verl = (site / "verl" / "index.html").read_text()
    replaced = verl.split("replaced in <code>trainer_base</code>", 1)[0].rsplit("<table", 1)[0]
    assert replaced.rstrip().endswith('<div class="md-typeset__table">')


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_console_blocks_copy_without_prompts(site: Path) -> None:
    blocks = [(p, b) for p in sorted(site.rglob("*.html")) for b in _console_blocks(p.read_text())]
    assert len(blocks) > 20
    for page, (copy, text) in blocks:
        assert copy is not None, (page, text[:80])
        commands = [ln[2:] for ln in text.splitlines() if ln.startswith("$ ")]
        if commands and not any(c.endswith("\\") for c in commands):
            assert copy.splitlines() == commands, page
        assert not any(ln.startswith(("$ ", ">>> ")) for ln in copy.splitlines()), (page, copy)


# -- CLI by example ---------------------------------------------------------------------------------


def test_cli_example_runs_as_an_80_column_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "mine.yaml").write_text("name: mine\nextends: [text]\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path / "mine"))
    monkeypatch.setenv("COLUMNS", "300")
    monkeypatch.delenv("NO_COLOR", raising=False)
    from trajschema.cli import output

    env, cwd, is_terminal = dict(os.environ), Path.cwd(), output.is_terminal
    r = cli_examples.run(cli_examples.Example("t", "", ("list",)), tmp_path)
    assert (dict(os.environ), Path.cwd(), output.is_terminal) == (env, cwd, is_terminal)
    assert r.status == 0 and "vlm_mrope_moe" in r.output and "mine" not in r.output  # the build's path is not shown
    assert max(map(len, r.output.splitlines())) <= cli_examples.COLUMNS and "\x1b" not in r.output


def test_cli_example_with_another_exit_status_fails_the_build(tmp_path: Path) -> None:
    wrong = cli_examples.Example("t", "", ("check", "missing.pt", "--schema", "text"))
    with pytest.raises(
        cli_examples.ExampleError, match=r"`trajschema check missing.pt --schema text` exited with status 2"
    ):
        cli_examples.run(wrong, tmp_path)
    with pytest.raises(cli_examples.ExampleError, match="did not print one JSON object"):
        cli_examples._machine_section([cli_examples.Run(wrong, 0, "hello", "hello")])


def test_json_examples_follow_the_parser() -> None:
    parser = argparse.ArgumentParser(prog="trajschema")
    sub = parser.add_subparsers()
    sub.add_parser("check").add_argument("--json", action="store_true")
    sub.add_parser("list")
    assert cli_examples.json_commands(parser) == ["check"]
    (example,) = cli_examples.json_examples(parser)
    assert example.argv == ("check", "broken.pt", "--schema", "text", "--json") and example.status == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("source: {repo}/schemas/text.yaml", "source: <repo>/schemas/text.yaml", id="repository"),
        pytest.param('"source": "{repo}/schemas/text.yaml",', '"source": "<repo>/schemas/text.yaml",', id="json"),
        pytest.param("wrote {work}/pad.pt", "wrote ./pad.pt", id="working-directory"),
        pytest.param("wrote {real}/pad.pt", "wrote ./pad.pt", id="working-directory-resolved"),
        pytest.param("{home}/.cache/x", "~/.cache/x", id="home"),
        pytest.param("{repo}-old/x {home}2/x", "~/trajschema-old/x {home}2/x", id="whole-paths-only"),
    ],
)
def test_cli_examples_hide_the_build_machines_paths(text: str, expected: str, tmp_path: Path) -> None:
    home, real = tmp_path / "home" / "me", tmp_path / "real"
    repo, work = home / "trajschema", tmp_path / "work"
    real.mkdir()
    work.symlink_to(real)  # the working directory may print in its resolved form
    places = {"repo": repo, "home": home, "work": work, "real": real}
    assert cli_examples.portable(text.format(**places), work, repo=repo, home=home) == expected.format(**places)


def test_cli_examples_show_the_repository_as_repo(tmp_path: Path) -> None:
    shown = cli_examples.run(cli_examples.Example("t", "", ("show", "text")), tmp_path)
    assert "  source: <repo>/schemas/text.yaml" in shown.output.splitlines() and str(ROOT) not in shown.output
    report = cli_examples.run(cli_examples.Example("t", "", ("show", "text", "--json")), tmp_path)
    assert json.loads(report.stdout)["source"] == "<repo>/schemas/text.yaml"


#: An absolute path of a build machine: under /root, /home or /tmp.
_MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:root|home|tmp)(?![\w.-])")


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_no_built_page_shows_the_build_machines_paths(site: Path) -> None:
    built = [*sorted(site.rglob("*.html")), site / "search" / "search_index.json"]
    assert {p.relative_to(site).as_posix() for p in built if str(ROOT) in p.read_text()} == set()
    page = _text((site / "cli-by-example" / "index.html").read_text())
    assert _MACHINE_PATH.findall(page) == [] and "source: <repo>/schemas/text.yaml" in page
    assert _MACHINE_PATH.findall("source: /root/x, /home/me, /tmp, ~/x, /tmpfile, a/tmp/b") == [
        "/root",
        "/home",
        "/tmp",
    ]


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_cli_by_example_page_shows_each_command_and_its_output(site: Path) -> None:
    from trajschema.cli.app import build_parser

    page = (site / "cli-by-example" / "index.html").read_text()
    blocks = {text.splitlines()[0][2:]: text.splitlines()[1:] for _, text in _console_blocks(page)}
    examples = [*cli_examples.EXAMPLES, *cli_examples.json_examples(build_parser())]
    assert {e.command for e in examples} == set(blocks)
    for e in examples:
        shown = "\n".join(blocks[e.command])
        assert shown.strip(), e.command
        assert "Traceback" not in shown and "trajschema-cli-examples" not in shown, e.command
        if e.status == 0:
            assert not re.search(r"\b(error|invalid):", shown), (e.command, shown[:300])
        if e.argv[0] == "check" and "--json" not in e.argv:
            verdict = "valid:" if e.status == 0 else "invalid:"
            assert any(line.startswith(verdict) for line in shown.splitlines()), (e.command, shown[-300:])
    json_commands = cli_examples.json_commands(build_parser())
    assert {"check", "plan", "diff"} <= set(json_commands)
    for name in json_commands:
        (command,) = [c for c in blocks if c.startswith(f"trajschema {name} ") and c.endswith(" --json")]
        report = json.loads("\n".join(ln for ln in blocks[command] if not ln.startswith("trajschema ")))
        assert report["version"] == 1 and report["command"] == name
    assert 'id="machine-output"' in page


# -- setup blocks, changelog, licence ------------------------------------------------------------------


def test_setup_marker_without_its_block_is_refused() -> None:
    with pytest.raises(setup_blocks.SetupBlockError, match=r"docs/x\.md: a '<!-- setup"):
        setup_blocks.strip_setup_blocks("<!-- setup: x -->\n\n```python\nx = 1\n```\n", "docs/x.md")
    text = "<!-- setup: x -->\n````python\nx = 1\n```\ny = 2\n````\nafter\n"
    assert setup_blocks.strip_setup_blocks(text) == "after\n"


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_setup_blocks_and_test_wording_are_not_shown(site: Path) -> None:
    marked = [p for p in (ROOT / "docs").rglob("*.md") if "<!-- setup:" in p.read_text()]
    assert ROOT / "docs" / "verl.md" in marked
    for source in marked:
        built = (site / source.relative_to(ROOT / "docs").with_suffix("") / "index.html").read_text()
        for hidden in setup_blocks.MARKER.finditer(source.read_text()):
            longest = max(hidden[0].splitlines()[2:-1], key=len).strip()
            assert longest and longest not in _text(built), (source, longest)
        assert "setup:" not in built, source
    text = _text((site / "verl" / "index.html").read_text())
    assert "Stand-ins" not in text and "A test runs" not in text and "MemoryTransferQueue()" not in text


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_the_site_links_the_repository_it_was_built_with(site: Path) -> None:
    page = (site / "getting-started" / "index.html").read_text()
    assert f'href="{EXAMPLE_REPO_URL}"' in page  # the header's repository link
    clone, _ = _console_blocks(page)[0]
    assert clone == f"git clone {EXAMPLE_REPO_URL} trajschema && cd trajschema"
    assert "<repository URL>" not in _text(page)


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_changelog_page_is_the_changelog(site: Path) -> None:
    page = _text((site / "changelog" / "index.html").read_text())
    headings = re.findall(r"^#{2,3} (.+)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert "0.1.0 (unreleased)" in headings and len(headings) > 5
    assert all(_text(h).replace("`", "") in page for h in headings)


def test_licence_and_metadata_agree() -> None:
    licence = (ROOT / "LICENSE").read_text()
    assert "Apache License\n                           Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence and len(licence.splitlines()) == 202
    project = (ROOT / "pyproject.toml").read_text().split("[project]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^license = "Apache-2.0"$', project, re.M)
