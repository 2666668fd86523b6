"""The mkdocs hooks (``hooks:`` in ``mkdocs.yml``): generated pages, nav, the padding picture, the API
pages' completeness, the repository URL in the pages, a check of every rendered page for
Markdown left unrendered, and the HTML fixes of `docs_hooks.built_html` (scrolling tables,
console blocks copied without prompts).

mkdocs loads this file by path, with only its own directory on ``sys.path``; the
repository root is added so that ``docs_hooks`` imports as a package (an editable
install has it anyway).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from mkdocs.config.defaults import MkDocsConfig  # noqa: E402
from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File, Files  # noqa: E402
from mkdocs.structure.pages import Page  # noqa: E402

from docs_hooks import (  # noqa: E402
    api_page,
    built_html,
    cli_examples,
    cli_page,
    dense_picture,
    padding_picture,
    rendered,
    schema_pages,
    setup_blocks,
)

log = logging.getLogger("mkdocs.plugins.trajschema")

SCHEMA_INDEX = f"{schema_pages.PAGE_DIR}/index.md"
CLI_PAGE = "cli.md"
CLI_EXAMPLES_PAGE = "cli-by-example.md"
#: The changelog page is the repository's CHANGELOG.md, so it has one home.
CHANGELOG_PAGE = "changelog.md"
CHANGELOG = Path(_ROOT) / "CHANGELOG.md"
PADDING_PAGE = "padding.md"
DENSE_PAGE = "dense.md"
#: What the pages write where the repository's address goes (``git clone <repository URL>``);
#: filled in when the site is built with ``repo_url`` set (``TRAJSCHEMA_REPO_URL``, see mkdocs.yml).
REPO_URL_PLACEHOLDER = "<repository URL>"


def _expand_schema_section(nav: list[Any], schemas: list[schema_pages.PackagedSchema]) -> bool:
    """Turn the nav entry of ``schemas/index.md`` into a section: the index, then one page per schema."""
    for i, item in enumerate(nav):
        if not isinstance(item, dict) or len(item) != 1:
            continue
        ((title, target),) = item.items()
        if target == SCHEMA_INDEX:
            nav[i] = {title: [SCHEMA_INDEX, *({s.name: s.page} for s in schemas)]}
            return True
        if isinstance(target, list) and _expand_schema_section(target, schemas):
            return True
    return False


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    schemas = schema_pages.packaged_schemas()
    if config.nav is not None and not _expand_schema_section(config.nav, schemas):
        raise PluginError(f"mkdocs.yml: the nav has no entry for {SCHEMA_INDEX}, where the schema pages go")
    return config


def _cli_markdown() -> str | None:
    try:
        from trajschema.cli.app import build_parser
    except ModuleNotFoundError as e:
        if e.name != "trajschema.cli.app":
            raise
        log.warning("trajschema.cli.app is missing: %s is not generated", CLI_PAGE)
        return None
    return cli_page.cli_page(cli_page.command_docs(build_parser()))


def _cli_examples_markdown() -> str:
    try:
        return cli_examples.examples_page()
    except cli_examples.ExampleError as e:
        raise PluginError(str(e)) from None


def _generated_pages() -> dict[str, str]:
    schemas = schema_pages.packaged_schemas()
    known = {s.name for s in schemas}
    pages = {SCHEMA_INDEX: schema_pages.index_page(schemas), CHANGELOG_PAGE: CHANGELOG.read_text(encoding="utf-8")}
    pages.update({s.page: schema_pages.schema_page(s, known) for s in schemas})
    cli = _cli_markdown()
    if cli is not None:
        pages[CLI_PAGE] = cli
        pages[CLI_EXAMPLES_PAGE] = _cli_examples_markdown()
    return pages


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for uri, content in _generated_pages().items():
        if files.get_file_from_path(uri) is not None:
            raise PluginError(f"docs/{uri} exists, but that page is generated at build time: delete the file")
        files.append(File.generated(config, uri, content=content))
    api = {f.src_uri: f.content_string for f in files if f.src_uri.startswith(f"{api_page.API_DIR}/")}
    if problems := api_page.api_problems(api_page.all_api_markdown(api)):
        raise PluginError(f"docs/{api_page.API_DIR}/: " + "; ".join(problems))
    return files


def on_serve(server: Any, config: MkDocsConfig, builder: Any) -> Any:
    # `mkdocs serve` rebuilds when a packaged schema file changes, as for a page.
    server.watch(str(schema_pages.packaged_dir()))
    server.watch(str(CHANGELOG))
    return server


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    uri = page.file.src_uri
    try:
        markdown = setup_blocks.strip_setup_blocks(markdown, f"docs/{uri}")
    except setup_blocks.SetupBlockError as e:
        raise PluginError(str(e)) from None
    if config.repo_url:
        # Without a trailing slash, so that `git+<repository URL>@<commit>` stays a valid pip URL.
        markdown = markdown.replace(REPO_URL_PLACEHOLDER, config.repo_url.rstrip("/"))
    if uri == PADDING_PAGE:
        if markdown.count(padding_picture.MARKER) != 1:
            raise PluginError(f"docs/{PADDING_PAGE} must hold the marker {padding_picture.MARKER} exactly once")
        example = padding_picture.example_batch(padding_picture.packaged_text_schema())
        return markdown.replace(padding_picture.MARKER, padding_picture.padding_figure(example))
    if uri == DENSE_PAGE:
        if sorted(m.group(1) for m in dense_picture.MARKER.finditer(markdown)) != sorted(dense_picture.DRAWN):
            raise PluginError(
                f"docs/{DENSE_PAGE} must hold one dense-picture marker per layout of {list(dense_picture.DRAWN)}"
            )
        return dense_picture.replace_markers(markdown)
    return markdown


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    # Markdown whose extension is not enabled renders as text, which --strict alone lets through.
    if problems := rendered.raw_markdown(html):
        raise PluginError(
            f"{page.file.src_uri}: Markdown left unrendered (is its extension enabled in mkdocs.yml?); "
            "in the page's HTML: " + "; ".join(problems[:5])
        )
    return built_html.copy_commands(built_html.wrap_tables(html))
