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
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

import trajschema as ts
from docs_hooks import api_page, cli_page, padding_picture, rendered, schema_pages, sphinx_roles

ROOT = Path(__file__).resolve().parents[1]
PACKAGED = ROOT / "schemas"
PACKAGED_NAMES = sorted(p.stem for p in PACKAGED.glob("*.yaml"))
BUILD_TIMEOUT_S = 240

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


def test_api_page_documents_every_public_name() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    assert api_page.api_problems(text) == []
    documented = api_page.documented_names(text)
    for module in api_page.PUBLIC_MODULES:
        for name in importlib.import_module(module).__all__:
            assert f"{module}.{name}" in documented


def test_api_check_can_fail() -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    missing = text.replace("::: trajschema.load_schema\n", "")
    assert api_page.api_problems(missing) == [
        "trajschema.load_schema is public but has no '::: trajschema.load_schema' block"
    ]
    extra = text + "\n::: trajschema.not_a_name\n\n::: trajschema.export.table.field_rows\n"
    assert [p.split("'")[1] for p in api_page.api_problems(extra)] == [
        "::: trajschema.not_a_name",
        "::: trajschema.export.table.field_rows",
    ]
    assert "appears 2 times" in api_page.api_problems(text + "\n::: trajschema.Schema\n")[0]


@pytest.mark.parametrize(
    "module", [api_page, cli_page, padding_picture, rendered, schema_pages, sphinx_roles], ids=lambda m: m.__name__
)
def test_docstring_examples(module: Any) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


# -- the nav ------------------------------------------------------------------------------------


def test_nav_gets_a_section_of_schema_pages() -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the docs extra")
    from docs_hooks import mkdocs_hooks

    schemas = schema_pages.packaged_schemas()
    nav: list[Any] = [{"Home": "index.md"}, {"Reference": [{"Packaged schemas": "schemas/index.md"}]}]
    assert mkdocs_hooks._expand_schema_section(nav, schemas)
    section = nav[1]["Reference"][0]["Packaged schemas"]
    assert section[0] == "schemas/index.md"
    assert section[1:] == [{s.name: f"schemas/{s.name}.md"} for s in schemas]
    assert not mkdocs_hooks._expand_schema_section([{"Home": "index.md"}], schemas)


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
    ],
)
def test_raw_markdown_finds(page: str, finds: int) -> None:
    assert len(rendered.raw_markdown(page)) == finds


def _markdown_extensions() -> tuple[list[str], dict[str, Any]]:
    """The Markdown extensions ``mkdocs.yml`` enables, and their options."""
    names, options = [], {}
    for entry in yaml.safe_load((ROOT / "mkdocs.yml").read_text())["markdown_extensions"]:
        name, opts = next(iter(entry.items())) if isinstance(entry, dict) else (entry, None)
        names.append(name)
        if opts:
            options[name] = opts
    return names, options


def _render(page: str, names: list[str], options: dict[str, Any]) -> str:
    markdown = pytest.importorskip("markdown", reason="Markdown comes with mkdocs, in the docs extra")
    pytest.importorskip("pymdownx", reason="pymdown-extensions comes with mkdocs-material, in the docs extra")
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
    pytest.importorskip("mkdocs", reason="mkdocs is in the docs extra")
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


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="mkdocs is in the docs extra")
    tmp = tmp_path_factory.mktemp("docs_site")
    extra = tmp / "extra_schemas"
    extra.mkdir()
    (extra / "mine.yaml").write_text("name: mine\nextends: [text]\n")
    _build(ROOT, tmp / "site", TRAJSCHEMA_PATH=str(extra))
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
    api = (site / "api" / "index.html").read_text()
    missing = [n for n in api_page.public_names() if f'id="{n}"' not in api]
    assert not missing, f"api.md renders no entry for {missing}"
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
    expected |= {"index.html", "404.html", "schemas/index.html", *(f"schemas/{n}/index.html" for n in PACKAGED_NAMES)}
    assert expected <= {p.relative_to(site).as_posix() for p in built}
    problems = {p.relative_to(site).as_posix(): rendered.raw_markdown(p.read_text()) for p in built}
    assert {page: found for page, found in problems.items() if found} == {}


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_the_rewriter_links_exactly_the_anchors_of_the_api_page(site: Path) -> None:
    anchors = set(re.findall(r'id="(trajschema\.[^"]+)"', (site / "api" / "index.html").read_text()))
    assert set(sphinx_roles.documented_objects()) == anchors


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 30)
def test_api_page_shows_no_sphinx_role(site: Path) -> None:
    text = _text((site / "api" / "index.html").read_text())
    found = [text[max(0, m.start() - 30) : m.end() + 30].replace("\n", " ") for m in SPHINX_ROLE.finditer(text)]
    assert not found, f"{len(found)} Sphinx roles on the API page, e.g. {found[:3]}"
    # mkdocstrings cross-references all resolved: none is left on the page as literal text.
    assert "][trajschema." not in (site / "api" / "index.html").read_text()
