"""Build hooks for the documentation site: pages generated from the package itself.

``mkdocs.yml`` loads :mod:`docs_hooks.mkdocs_hooks`, which at build time

- writes one page per packaged schema, and their index, from the YAML files
  (:mod:`docs_hooks.schema_pages`), and fills the "Packaged schemas" nav section;
- replaces the marker in ``docs/padding.md`` with a picture of a real padded batch
  (:mod:`docs_hooks.padding_picture`);
- writes the CLI reference from the ``trajschema`` argument parser (:mod:`docs_hooks.cli_page`);
- checks that ``docs/api.md`` documents every public name (:mod:`docs_hooks.api_page`).

The generators are plain functions from package objects to Markdown or HTML strings, so
tests call them without building the site; only ``mkdocs_hooks`` imports mkdocs.
"""
