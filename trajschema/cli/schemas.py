"""The command line's schema side: the ``list``, ``show``, ``export``, ``infer`` and ``diff`` commands.

Each ``add_*`` function registers one subcommand (its help, description and epilog are
the text of the generated CLI reference) and each ``run_*`` function runs it, returning
the exit status. Bad input raises a library error or `CommandError`;
``trajschema.cli.app`` prints it as one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

from trajschema.cli.args import FORMATTER, CommandError, printable, write
from trajschema.cli.compat import compatibility_report, print_changes
from trajschema.cli.output import PIPED, emit_json, fold, print_table, table, terminal_width
from trajschema.cli.read import load_samples

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console

    from trajschema.schema import Schema

__all__ = [
    "add_diff",
    "add_export",
    "add_infer",
    "add_list",
    "add_show",
    "schema_listing",
]

_NAME_HELP = "a schema name (see `trajschema list`) or a path to a .yaml file"


# -- list -----------------------------------------------------------------------------------


def add_list(sub: Any) -> None:
    """Register ``trajschema list``."""
    p = sub.add_parser(
        "list",
        help="list the packaged and TRAJSCHEMA_PATH schemas",
        description=(
            "List every schema on the search path: the directories of TRAJSCHEMA_PATH first, then\n"
            "the packaged schemas. A name found in several directories is the first one's (a\n"
            "TRAJSCHEMA_PATH file overrides a packaged schema of its name). Each row shows what the\n"
            "schema extends, the Hugging Face architectures it claims and where it comes from. A\n"
            "schema file that does not load or cannot be read (a dangling or looping symbolic link,\n"
            "a FIFO, a device, a file without permission, text that is not UTF-8, a name: that is\n"
            "not its file name) is listed with its error, and so, first, is a TRAJSCHEMA_PATH entry\n"
            "that cannot be listed (a directory without permission, a file, a broken link); the\n"
            "listing goes on. An entry that does not exist is listed with a warning: lookups go on\n"
            "without it."
        ),
        epilog=(
            f"{PIPED}\n\n"
            '--json prints one object: version (1), command ("list"), schemas (one object per\n'
            'schema file: name, extends and architectures as lists, source ("packaged" or its\n'
            "directory), error (null when it loads)), search_path (entries that cannot be listed\n"
            "or do not exist: entry, error, warning), broken (schema files that do not load),\n"
            "unlisted (entries that cannot be listed).\n\n"
            "Exit status: 0 when every schema loads (an entry that does not exist is only a\n"
            "warning), 1 when some schema file or search path entry is broken.\n\n"
            "Example:\n"
            "  trajschema list\n"
            "  TRAJSCHEMA_PATH=./my_schemas trajschema list"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_list)


class ListingRow(NamedTuple):
    """One row of `trajschema list`: a schema file, or (with an empty name) a search path entry."""

    name: str
    extends: str
    architectures: str
    source: str
    error: str | None
    warning: str | None = None


def schema_listing() -> list[ListingRow]:
    """A row for every schema on the search path, after one for each entry that is not a directory one can list.

    A search path entry that cannot be listed, or does not exist, comes first, in search
    order, as a row with an empty name (no file's name is empty) whose source is the
    entry: with its error, or a warning for one that does not exist. A file that cannot
    be read is a row with its error, as a file that does not load is, and a file whose
    ``name:`` is not its file name (it cannot be loaded by the name it is listed under).
    """
    from trajschema.core import SchemaDefinitionError, SchemaNotFoundError
    from trajschema.files import missing_entry_note, packaged_dir, schema_search_path, search_path_files
    from trajschema.load import load_found

    packaged = packaged_dir().resolve()
    dirs = schema_search_path()
    search = search_path_files(dirs, quiet=True)  # the missing entries are rows here, not warnings too
    entries = {
        d: ListingRow("", "", "", str(d), str(SchemaDefinitionError(str(d), "", why))) for d, why in search.unlisted
    }
    entries.update({d: ListingRow("", "", "", str(d), None, missing_entry_note(d)) for d in search.missing})
    rows = [entries[d] for d in dict.fromkeys(dirs) if d in entries]
    for name, hit in sorted(search.files.items()):
        source = "packaged" if hit.path.parent.resolve() == packaged else str(hit.path.parent)
        try:
            schema = load_found(name, hit)
        except (SchemaDefinitionError, SchemaNotFoundError, OSError) as exc:
            rows.append(ListingRow(name, "", "", source, _listed_error(exc)))
            continue
        rows.append(ListingRow(name, ", ".join(schema.lineage[1:]), ", ".join(schema.architectures), source, None))
    return rows


def _names(joined: str) -> list[str]:
    return joined.split(", ") if joined else []


def _listing_report(rows: list[ListingRow]) -> dict[str, Any]:
    """What ``list --json`` prints: the rows, as the table shows them, and the counts of the summary."""
    return {
        "schemas": [
            {
                "name": r.name,
                "extends": _names(r.extends),
                "architectures": _names(r.architectures),
                "source": r.source,
                "error": r.error,
            }
            for r in rows
            if r.name
        ],
        "search_path": [{"entry": r.source, "error": r.error, "warning": r.warning} for r in rows if not r.name],
        "broken": sum(1 for r in rows if r.name and r.error),
        "unlisted": sum(1 for r in rows if not r.name and r.error),
    }


def _listed_error(exc: BaseException) -> str:
    """A schema file's error as one row: a file with several problems by its count and first one."""
    problems: tuple[Any, ...] = getattr(exc, "errors", ())
    if len(problems) > 1:
        return f"{len(problems)} problems; first: {' '.join(str(problems[0]).split())}"
    return " ".join(str(exc).split())


def run_list(args: argparse.Namespace, console: Console) -> int:
    report = _listing_report(schema_listing())
    broken, directories = report["broken"], report["unlisted"]
    if args.json:
        emit_json("list", report)
        return 1 if broken or directories else 0
    listing = table(None, ["name", "extends", "architectures", "from"], whole=("name", "from"))
    for e in report["search_path"]:
        note = f"error: {e['error']}" if e["error"] else f"warning: {e['warning']}"
        listing.add_row("-", "-", note, e["entry"])
    for r in report["schemas"]:
        note = f"error: {r['error']}" if r["error"] else ", ".join(r["architectures"]) or "-"
        listing.add_row(r["name"], ", ".join(r["extends"]) or "-", note, r["source"])
    print_table(console, listing)
    if broken or directories:
        parts = [f"{broken} of {len(report['schemas'])} schema files do not load"] if broken else []
        if directories:
            parts.append(f"{directories} search path entr{'y' if directories == 1 else 'ies'} cannot be listed")
        console.print(f"{'; '.join(parts)} (see the error rows)")
    return 1 if broken or directories else 0


# -- show -----------------------------------------------------------------------------------


def add_show(sub: Any) -> None:
    """Register ``trajschema show``."""
    p = sub.add_parser(
        "show",
        help="show a schema's fields, dims and tags, or summarize a bundle",
        description=(
            "Show a schema as tables: its fields (shape, dtype, whether required, pad rule, value\n"
            "checks, description), its dims (fixed sizes, bounds of free dims, derived expressions\n"
            "and padding defaults) and its tags, after what it extends, the architectures it\n"
            "claims and its description. Inherited entries are included: this is the schema as\n"
            "it validates. With --config, the dims the schema reads from a model config\n"
            "(from_config:) are shown fixed at the sizes that config gives, each with its key.\n\n"
            "When NAME is a directory, it is a bundle (the directory trajschema.record_batch\n"
            "writes), and show summarizes it: where it came from (step,\n"
            "trainer and version, the trajschema that recorded it, when, why), its recorded schema\n"
            "and layout, its rows and padding rows, a table of the keys of its batch (kind, dtype,\n"
            "shape, bytes), its payloads (bytes, SHA-256) and its violations by code, checked\n"
            "against the recorded schema at depth values (`trajschema check BUNDLE` lists them).\n"
            "A schema's name is a schema even where a directory of that name exists: write\n"
            "./NAME for the directory. A key's kind is tensor (its shape is the whole shape:\n"
            "(B, ...) for a column), jagged or nested (a nested tensor) or tensors (one tensor per\n"
            "sample), whose shape is each dim's smallest..largest size over the samples, ndarray,\n"
            "values (one Python value per sample: dtype their types, shape their count) or value\n"
            "(one for the batch, such as metadata.<key>)."
        ),
        epilog=(
            f"{PIPED}\n\n"
            '--json prints one object: version (1), command ("show"), name, description,\n'
            "extends and architectures (lists), extra, source, model_config (the --config given,\n"
            "or null), fields (name, shape, dtype, required, pad, checks, description), dims\n"
            "(name, kind, definition, padding_default, description) and tags (name, kind,\n"
            "default, equals, description): the cells of the tables, as strings.\n\n"
            '--json of a bundle prints one object: version (1), command ("show"), bundle (its\n'
            "path), format and format_version, trajschema, created, step, trainer,\n"
            "trainer_version and reason (null when not recorded), schema, layout (null for a\n"
            "jagged batch), rows (null when the batch does not say), padding_rows (null when not\n"
            "recorded), keys (name, kind, dtype, shape as the table shows them, bytes as a number\n"
            "or null), payloads (name, bytes, sha256), depth (values), valid (null when nothing\n"
            "was checked: no rows, or a check_error), violations (total, invalid_rows, by_code:\n"
            "code -> count; null with a check_error) and check_error (why the recorded schema\n"
            "cannot read the batch, or null).\n\n"
            "Exit status: 0 success (a bundle's violations are counted, not judged: check judges),\n"
            "2 unusable input (unknown schema, a file that does not load, a model config that\n"
            "cannot be read or lacks a key the schema reads, --config with a bundle, a directory\n"
            "that holds no bundle, a bundle whose payload is not the one recorded or of a newer\n"
            "format).\n\n"
            "Example:\n  trajschema show vlm_mrope_moe\n  trajschema show moe_routed --config ~/models/Qwen3-30B-A3B\n"
            "  trajschema show runs/step-00000012 --json"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("name", metavar="NAME", help=_NAME_HELP + ", or a bundle directory")
    p.add_argument("--config", metavar="PATH", help=_CONFIG_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_show)


_CONFIG_HELP = "a model's config.json, or its model directory: pin the dims the schema reads from it"


def show_report(schema: Schema, config: str | None) -> dict[str, Any]:
    """Everything ``show`` prints, as strings: what ``show --json`` prints and the tables are made of."""
    import dataclasses

    from trajschema.core import provenance
    from trajschema.export import dim_rows, extends, field_rows, tag_rows

    plan = schema.plan
    dims = [
        {**dataclasses.asdict(d), "definition": d.definition + provenance(schema.dims[d.name])} for d in dim_rows(plan)
    ]
    return {
        "name": schema.name,
        "description": " ".join(schema.description.split()),
        "extends": extends(plan),
        "architectures": list(schema.architectures),
        "extra": schema.extra,
        "source": str(schema.source),
        "model_config": config,
        "fields": [dataclasses.asdict(f) for f in field_rows(plan)],
        "dims": dims,
        "tags": [dataclasses.asdict(t) for t in tag_rows(plan)],
    }


def _named_bundle(name: str) -> Path | None:
    """The bundle directory ``show NAME`` names, or ``None``: a schema's name is the schema's,
    even where a directory of that name is in the current directory (``./NAME`` is the directory).

    Raises:
        CommandError: ``name`` is a path, not a ``.yaml`` file's, and nothing is there.
    """
    from trajschema.cli.bundles import bundle_dir  # it imports this module: asked for when run
    from trajschema.load import schema_names

    where = bundle_dir(name)
    a_path = "/" in name.replace(os.sep, "/") and not name.endswith((".yaml", ".yml"))
    if where is None and a_path and not os.path.lexists(name):  # no schema file's path: a bundle's, mistyped
        raise CommandError(f"{printable(name)}: no such bundle directory or schema file")
    return None if where is None or name in schema_names() else where


def run_show(args: argparse.Namespace, console: Console) -> int:
    from trajschema.load import load_schema, schema_for_config

    where = _named_bundle(args.name)
    if where is not None:
        from trajschema.cli.bundles import run_show_bundle

        return run_show_bundle(where, args, console)
    schema = load_schema(args.name)
    if args.config is not None:
        schema = schema_for_config(args.config, schema=schema)
    r = show_report(schema, args.config)
    if args.json:
        emit_json("show", r)
        return 0
    width = terminal_width(console)
    lines = [f"schema {r['name']}"]
    lines += fold(r["description"], width, indent=2) if r["description"] else []
    extra = "allowed" if r["extra"] == "allow" else "forbidden"
    for label, value in (
        ("extends: ", ", ".join(r["extends"]) or "-"),
        ("architectures: ", ", ".join(r["architectures"]) or "-"),
        ("undeclared fields: ", f"{extra} (extra: {r['extra']})"),
        ("source: ", r["source"]),
        *([("model config: ", str(args.config))] if args.config is not None else []),
    ):
        lines += fold(printable(value), width, indent=2, first=label)
    write("\n".join(printable(line) for line in lines))
    sections = [
        ("fields", ["name", "shape", "dtype", "required", "pad", "checks", "description"], ("checks",)),
        ("dims", ["name", "kind", "definition", "padding_default", "description"], ("definition",)),
        ("tags", ["name", "kind", "default", "equals", "description"], ("equals",)),
    ]
    for title, keys, wrapping in sections:
        if not r[title] and title == "tags":
            continue
        headers = [k.replace("_", " ") for k in keys]
        whole = [h for h in headers[:-1] if h not in wrapping]
        part = table(title, headers, whole=whole, notes=("description",))
        for row in r[title]:
            part.add_row(*(row[k] for k in keys))
        write("")
        print_table(console, part)
    return 0


# -- export ---------------------------------------------------------------------------------

FORMATS = ("yaml", "json-schema", "jaxtyping", "pandera", "typed-tensordict")
#: The formats that describe a TensorDict, which ``--layout`` applies to.
TENSORDICT_FORMATS = ("pandera", "typed-tensordict")


def add_export(sub: Any) -> None:
    """Register ``trajschema export``."""
    p = sub.add_parser(
        "export",
        help="print a schema as YAML, JSON Schema, a checked jaxtyping class, pandera or a TypedTensorDict",
        description=(
            "Print a schema in another form, derived from the same declaration:\n"
            "  yaml              the resolved schema as a YAML file that load_schema accepts\n"
            "                    (inherited entries restated);\n"
            "  json-schema       a JSON Schema (2020-12) document describing one sample, with each\n"
            "                    tensor written as {'shape': [...], 'dtype': ...};\n"
            "  jaxtyping         Python source of a frozen dataclass that jaxtyping and beartype check\n"
            "                    when it is built (every field's presence, type, dtype, shape and\n"
            "                    shared dims), and check_NAME(sample), which builds one from a\n"
            "                    sample dict;\n"
            "  pandera           Python source of a pandera TensorDictSchema (pandera >= 0.35) for a\n"
            "                    TensorDict of samples, or with --layout the layout's dense batch:\n"
            "                    presence, dtypes, ranks, fixed sizes and value checks, its header\n"
            "                    listing what only trajschema checks;\n"
            "  typed-tensordict  Python source of a tensordict TypedTensorDict subclass (tensordict\n"
            "                    >= 0.12) declaring the same keys for type checkers; from_tensordict\n"
            "                    checks that every required field is present."
        ),
        epilog=(
            '--json prints one object: version (1), command ("export"), name (the schema\'s),\n'
            "format, layout (or null), and output (the text printed without --json, as one string).\n\n"
            "Exit status: 0 success, 2 unusable input (unknown schema or layout, a file that does not\n"
            "load, --layout with a format that takes none, pandera or TypedTensorDict not installed).\n\n"
            "Example:\n  trajschema export vlm_mrope_moe --format jaxtyping > vlm_mrope_moe_types.py\n"
            "  trajschema export text --format pandera --layout verl_dataproto > text_pandera.py"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("name", metavar="NAME", help=_NAME_HELP)
    p.add_argument("--format", choices=FORMATS, default="yaml", help="what to print (default: yaml)")
    p.add_argument(
        "--layout",
        metavar="LAYOUT",
        help="for pandera and typed-tensordict: a dense layout's name or file (default: a TensorDict of samples)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object holding the output")
    p.set_defaults(run=run_export)


def _export_text(schema: Schema, fmt: str, layout: str | None) -> str:
    """The text ``trajschema export`` prints for ``schema`` in format ``fmt``."""
    from trajschema.export import jaxtyping_source, pandera_source, typed_tensordict_source

    if layout is not None and fmt not in TENSORDICT_FORMATS:
        raise CommandError(f"--layout applies to --format {' and '.join(TENSORDICT_FORMATS)}, not {fmt}")
    if fmt == "yaml":
        return schema.to_yaml()
    if fmt == "json-schema":
        return json.dumps(schema.to_json_schema(), indent=2)
    if fmt == "jaxtyping":
        return jaxtyping_source(schema.plan)
    bound = None
    if layout is not None:
        from trajschema.dense import bind_layout
        from trajschema.files import as_layout

        bound = bind_layout(as_layout(layout, argument="--layout"), schema.plan)
    if fmt == "pandera":
        return pandera_source(schema.plan, bound)
    return typed_tensordict_source(schema.plan, bound)


def run_export(args: argparse.Namespace, console: Console) -> int:
    from trajschema.load import load_schema

    schema = load_schema(args.name)
    text = _export_text(schema, args.format, args.layout)
    text = text if text.endswith("\n") else text + "\n"
    if args.json:
        emit_json("export", {"name": schema.name, "format": args.format, "layout": args.layout, "output": text})
    else:
        write(text)
    return 0


# -- infer ----------------------------------------------------------------------------------


def add_infer(sub: Any) -> None:
    """Register ``trajschema infer``."""
    p = sub.add_parser(
        "infer",
        help="draft a schema from a file of real samples",
        description=(
            "Draft a schema from the samples of FILE (any file `trajschema check` reads) and print\n"
            "it as YAML. The draft finds fields, dtypes, shared dims and sums such as\n"
            "seq = prompt + response that hold on every sample; pad rules and value checks come\n"
            "from known schemas where field names match, and guesses are written as comments.\n"
            "With --base the draft extends that schema and holds only what differs. Review the\n"
            "draft before using it: it knows only the samples it saw."
        ),
        epilog=(
            "Without --base, when the samples match a packaged schema exactly (every sample\n"
            "passes it at depth values and carries only fields it declares), a note on stderr\n"
            "says so: use that schema, or extend it with --base.\n\n"
            '--json prints one object: version (1), command ("infer"), name, base (or null),\n'
            "file, samples (how many), matches (the packaged schema they match exactly, or\n"
            "null) and yaml (the draft, as printed without --json).\n\n"
            "Exit status: 0 success, 2 unusable input (as for `check`, or a draft name a schema cannot have).\n\n"
            "Example:\n  trajschema infer rollout.pt --name my_vlm --base vlm_mrope > my_vlm.yaml"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("file", metavar="FILE", help="a torch.save file of samples")
    p.add_argument("--name", required=True, help="the draft schema's name (its file is NAME.yaml)")
    p.add_argument("--base", metavar="NAME", help="a schema the draft extends: " + _NAME_HELP)
    p.add_argument("--trust", action="store_true", help="allow full unpickling of FILE (runs code in it)")
    p.add_argument("--json", action="store_true", help="print one JSON object holding the draft")
    p.set_defaults(run=run_infer)


#: A draft's name: what is looked up as NAME.yaml and typed unquoted in `--base NAME`.
_DRAFT_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def _draft_name_problem(name: str, base: Any) -> str | None:
    """Why ``--name`` cannot name the draft, in the command line's words (``None``: it can).

    First the rule of every schema file's ``name:`` (a schema of that name alone is
    compiled to ask it), then what a name needs to be found and typed: its file name,
    unquoted; then the names ``--base`` already brings.
    """
    from trajschema.core import SchemaDefinitionError
    from trajschema.files import shown_name
    from trajschema.load import schema_from_dict

    shown = shown_name(name)
    try:
        schema_from_dict({"name": name})
    except SchemaDefinitionError as exc:
        if exc.path != "name":
            raise
        return f"--name {shown}: {exc.problem.replace(repr(name), shown)}"  # the name cut there too
    if not _DRAFT_NAME.fullmatch(name) or name.endswith((".yaml", ".yml")):
        fixed = re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip()).removesuffix(".yaml").removesuffix(".yml") or "my_schema"
        return (
            f"--name {shown}: a schema is found by its file name (NAME.yaml) and named unquoted on command "
            f"lines; use letters, digits, _, - and . (e.g. --name {shown_name(fixed.lstrip('.-') or 'my_schema')})"
        )
    if base is not None and name == base.name:
        return f"--name {shown} is the name of --base; choose another name for the draft"
    if base is not None and name in base.lineage:
        return f"--name {shown} is the name of a schema --base {base.name} extends; choose another name for the draft"
    return None


def packaged_match(data: Any) -> str | None:
    """The packaged schema the samples match exactly, if any: every sample passes it (depth values, with
    its tags) and carries only fields it declares. Of several, the one declaring the most fields."""
    from trajschema.check import batch_view
    from trajschema.files import packaged_dir
    from trajschema.load import load_schema

    keys = batch_view(data.batch).keys()
    matches = []
    for path in sorted(packaged_dir().glob("*.yaml")):
        schema = load_schema(path)
        if keys <= set(schema.fields) and not schema.batch_violations(data.batch, tags=data.tags, depth="values"):
            matches.append(schema)
    return max(matches, key=lambda s: (len(s.fields), len(s.lineage))).name if matches else None


def run_infer(args: argparse.Namespace, console: Console) -> int:
    from trajschema.load import infer_schema, load_schema

    base = load_schema(args.base) if args.base is not None else None  # --base "" is no schema, not no base
    problem = _draft_name_problem(args.name, base)
    if problem is not None:
        raise CommandError(problem)
    data = load_samples(args.file, trust=args.trust)
    draft = infer_schema(data.batch, name=args.name, base=base)
    match = packaged_match(data) if base is None else None
    if match is not None:
        sys.stderr.write(
            f"trajschema infer: note: these samples match packaged schema {match!r} exactly; "
            f"use it, or extend it with --base {match}\n"
        )
    yaml_text = draft.to_yaml()
    if args.json:
        report = {"name": draft.name, "base": None if base is None else base.name, "file": data.path}
        emit_json("infer", {**report, "samples": data.count, "matches": match, "yaml": yaml_text})
    else:
        write(yaml_text)
    return 0


# -- diff -----------------------------------------------------------------------------------

MODES = ("backward", "forward", "full")


def add_diff(sub: Any) -> None:
    """Register ``trajschema diff``."""
    p = sub.add_parser(
        "diff",
        help="compare two schemas and flag breaking changes",
        description=(
            "Compare schema OLD with schema NEW and print every change, marking the breaking ones.\n"
            "  backward  NEW must accept every sample OLD accepts (readers upgrade first);\n"
            "  forward   OLD must accept every sample NEW accepts (writers upgrade first);\n"
            "  full      both."
        ),
        epilog=(
            "Each change is a line 'BREAKING PATH  WHAT' or 'ok PATH  WHAT' (PATH its key path in\n"
            "the schema file, WHAT old -> new), then why it breaks or not: on a terminal wrapped\n"
            "under it (BREAKING in red, ok in green), piped on the same line in parentheses.\n"
            "The last line sums up: compatible, incompatible or no changes.\n\n"
            '--json prints one object: version (1), command ("diff"), old, new (their names),\n'
            "mode, compatible (true or false), changes (one object each: path, kind, breaking,\n"
            "backward_breaking, forward_breaking, message (the whole line), what, why).\n\n"
            "Exit status: 0 when no change breaks the mode, 1 when one does, 2 for unusable input.\n\n"
            "Example:\n"
            "  trajschema diff vlm_mrope ./schemas/my_vlm.yaml --mode backward"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("old", metavar="OLD", help="the old schema: " + _NAME_HELP)
    p.add_argument("new", metavar="NEW", help="the new schema: " + _NAME_HELP)
    p.add_argument("--mode", choices=MODES, default="backward", help="which compatibility to check (default: backward)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_diff)


def run_diff(args: argparse.Namespace, console: Console) -> int:
    from trajschema.load import load_schema

    old, new = load_schema(args.old), load_schema(args.new)
    changes, report = compatibility_report(old, new, args.mode)
    if args.json:
        emit_json("diff", report)
    else:
        print_changes(console, changes, args.mode)
    return 0 if report["compatible"] else 1
