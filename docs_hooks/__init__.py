"""Build hooks for the documentation site: pages generated from the package itself.

`mkdocs.yml` loads `docs_hooks.mkdocs_hooks`, which at build time

- writes one page per packaged schema, and their index, from the YAML files
  (`docs_hooks.schema_pages`), and fills the "Packaged schemas" nav section;
- replaces the marker in `docs/padding.md` with a picture of a real padded batch
  (`docs_hooks.padding_picture`), and the markers in `docs/dense.md` with pictures of
  real dense batches in the packaged layouts (`docs_hooks.dense_picture`);
- writes the CLI reference from the `trajschema` argument parser (`docs_hooks.cli_page`),
  and "CLI by example" from real runs of the command line, the build machine's paths
  rewritten (`docs_hooks.cli_examples`);
- fills the pages' `<repository URL>` placeholders with `repo_url`, when the site is built
  with one (`TRAJSCHEMA_REPO_URL`);
- writes the changelog page from the repository's `CHANGELOG.md`;
- checks that the pages of `docs/api/` document every public name once (`docs_hooks.api_page`);
- removes the setup blocks a page's examples need only as a test (`docs_hooks.setup_blocks`);
- fails the build when a rendered page shows Markdown that was not rendered, such as a
  block whose extension `mkdocs.yml` does not enable, or a list with no blank line before
  it (`docs_hooks.rendered`);
- wraps every table in a scrolling wrapper, and makes console blocks copy their commands
  without prompts or output (`docs_hooks.built_html`).

`docs_hooks.sphinx_roles` is not a hook but a tool: it rewrites Sphinx roles in
docstrings into mkdocstrings cross-references (`python -m docs_hooks.sphinx_roles --fix PATH`).

The generators are plain functions from package objects to Markdown or HTML strings, so
tests call them without building the site; only `mkdocs_hooks` imports mkdocs.
"""
