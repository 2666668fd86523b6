"""The command line's schema side: the ``list``, ``show``, ``export``, ``infer`` and ``diff`` commands.

Each ``add_*`` function registers one subcommand (its help, description and epilog are
the text of the generated CLI reference) and each ``run_*`` function runs it, returning
the exit status. Bad input raises a library error or `CommandError`;
``trajschema.cli.app`` prints it as one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, NamedTuple

from trajschema.cli.args import FORMATTER, CommandError, printable, write
from trajschema.cli.output import emit_json, print_table, table
from trajschema.cli.read import load_samples

if TYPE_CHECKING:
    from rich.console import Console

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
            "Exit status: 0 when every schema loads (an entry that does not exist is only a\n"
            "warning), 1 when some schema file or search path entry is broken.\n\n"
            "Example:\n"
            "  trajschema list\n"
            "  TRAJSCHEMA_PATH=./my_schemas trajschema list"
        ),
        formatter_class=FORMATTER,
    )
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
    from trajschema.export import extends
    from trajschema.load import load_found, missing_entry_note, packaged_dir, schema_search_path, search_path_files

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
            rows.append(ListingRow(name, "", "", source, " ".join(str(exc).split())))
            continue
        rows.append(ListingRow(name, ", ".join(extends(schema)), ", ".join(schema.architectures), source, None))
    return rows


def run_list(args: argparse.Namespace, console: Console) -> int:
    rows = schema_listing()
    listing = table(None, ["name", "extends", "architectures", "from"])
    for r in rows:
        note = f"error: {r.error}" if r.error else f"warning: {r.warning}" if r.warning else r.architectures or "-"
        # File names and errors come from the file system: keep each row one inert line.
        listing.add_row(*map(printable, (r.name or "-", r.extends or "-", note, r.source)))
    print_table(console, listing)
    directories = sum(1 for r in rows if not r.name and r.error)
    files = sum(1 for r in rows if r.name)
    broken = sum(1 for r in rows if r.name and r.error)
    if broken or directories:
        parts = [f"{broken} of {files} schema files do not load"] if broken else []
        if directories:
            parts.append(f"{directories} search path entr{'y' if directories == 1 else 'ies'} cannot be listed")
        console.print(f"{'; '.join(parts)} (see the error rows)")
    return 1 if broken or directories else 0


# -- show -----------------------------------------------------------------------------------


def add_show(sub: Any) -> None:
    """Register ``trajschema show``."""
    p = sub.add_parser(
        "show",
        help="show a schema's fields, dims and tags",
        description=(
            "Show a schema as tables: its fields (shape, dtype, whether required, pad rule, value\n"
            "checks, description), its dims (fixed sizes, bounds of free dims, derived expressions\n"
            "and padding defaults) and its tags, after what it extends, the architectures it\n"
            "claims and its description. Inherited entries are included: this is the schema as\n"
            "it validates. With --config, the dims the schema reads from a model config\n"
            "(from_config:) are shown fixed at the sizes that config gives, each with its key."
        ),
        epilog="Exit status: 0 success, 2 unusable input (unknown schema, a file that does not load,\n"
        "a model config that cannot be read or lacks a key the schema reads).\n\n"
        "Example:\n  trajschema show vlm_mrope_moe\n  trajschema show moe_routed --config ~/models/Qwen3-30B-A3B",
        formatter_class=FORMATTER,
    )
    p.add_argument("name", metavar="NAME", help=_NAME_HELP)
    p.add_argument("--config", metavar="PATH", help=_CONFIG_HELP)
    p.set_defaults(run=run_show)


_CONFIG_HELP = "a model's config.json, or its model directory: pin the dims the schema reads from it"


def _where_from(d: object) -> str:
    """Where a dim's size comes from, beside its definition: the key that pinned it, or the keys it is read from."""
    from trajschema.core import FixedDim, FreeDim

    if isinstance(d, FixedDim) and d.source:
        return f" ({d.source})"
    if isinstance(d, FreeDim) and d.from_config:
        return f" (from config: {' | '.join(map(str, d.from_config))})"
    return ""


def run_show(args: argparse.Namespace, console: Console) -> int:
    from trajschema.export import dim_rows, extends, field_rows, tag_rows
    from trajschema.load import load_schema, schema_for_config

    schema = load_schema(args.name)
    if args.config is not None:
        schema = schema_for_config(args.config, schema=schema)
    console.print(f"schema {schema.name}")
    if schema.description:
        console.print(f"  {printable(' '.join(schema.description.split()))}")
    console.print(f"  extends: {', '.join(extends(schema)) or '-'}")
    console.print(f"  architectures: {', '.join(schema.architectures) or '-'}")
    console.print(
        f"  undeclared fields: {'allowed' if schema.extra == 'allow' else 'forbidden'} (extra: {schema.extra})"
    )
    console.print(f"  source: {schema.source}")
    if args.config is not None:
        console.print(f"  model config: {printable(str(args.config))}")
    fields = table("fields", ["name", "shape", "dtype", "required", "pad", "checks", "description"])
    for f in field_rows(schema):
        fields.add_row(*map(printable, (f.name, f.shape, f.dtype, f.required, f.pad, f.checks, f.description)))
    dims = table("dims", ["name", "kind", "definition", "padding default", "description"])
    for d in dim_rows(schema):
        definition = d.definition + _where_from(schema.dims[d.name])
        dims.add_row(*map(printable, (d.name, d.kind, definition, d.padding_default, d.description)))
    for part in (fields, dims):
        write("")
        print_table(console, part)
    if schema.tags:
        tags = table("tags", ["name", "kind", "default", "equals", "description"])
        for t in tag_rows(schema):
            tags.add_row(*map(printable, (t.name, t.kind, t.default, t.equals, t.description)))
        write("")
        print_table(console, tags)
    return 0


# -- export ---------------------------------------------------------------------------------

FORMATS = ("yaml", "json-schema", "jaxtyping")


def add_export(sub: Any) -> None:
    """Register ``trajschema export``."""
    p = sub.add_parser(
        "export",
        help="print a schema as YAML, JSON Schema or jaxtyping annotations",
        description=(
            "Print a schema in another form, derived from the same declaration:\n"
            "  yaml         the resolved schema as a YAML file that load_schema accepts\n"
            "               (inherited entries restated);\n"
            "  json-schema  a JSON Schema (2020-12) document describing one sample, with each\n"
            "               tensor written as {'shape': [...], 'dtype': ...};\n"
            "  jaxtyping    Python source of a TypedDict whose tensor fields carry the jaxtyping\n"
            "               annotations of Schema.annotations(), for functions checked with\n"
            "               @jaxtyped."
        ),
        epilog=(
            "Exit status: 0 success, 2 unusable input (unknown schema, a file that does not load).\n\n"
            "Example:\n  trajschema export vlm_mrope_moe --format jaxtyping > vlm_mrope_moe_types.py"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("name", metavar="NAME", help=_NAME_HELP)
    p.add_argument("--format", choices=FORMATS, default="yaml", help="what to print (default: yaml)")
    p.set_defaults(run=run_export)


def run_export(args: argparse.Namespace, console: Console) -> int:
    from trajschema.export import jaxtyping_source
    from trajschema.load import load_schema

    schema = load_schema(args.name)
    if args.format == "yaml":
        write(schema.to_yaml())
    elif args.format == "json-schema":
        write(json.dumps(schema.to_json_schema(), indent=2))
    else:
        write(jaxtyping_source(schema))
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
            "Exit status: 0 success, 2 unusable input (as for `check`, or a draft name a schema cannot have).\n\n"
            "Example:\n  trajschema infer rollout.pt --name my_vlm --base vlm_mrope > my_vlm.yaml"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("file", metavar="FILE", help="a torch.save file of samples")
    p.add_argument("--name", required=True, help="the draft schema's name")
    p.add_argument("--base", metavar="NAME", help="a schema the draft extends: " + _NAME_HELP)
    p.add_argument("--trust", action="store_true", help="allow full unpickling of FILE (runs code in it)")
    p.set_defaults(run=run_infer)


def run_infer(args: argparse.Namespace, console: Console) -> int:
    from trajschema.core import SchemaDefinitionError
    from trajschema.load import infer_schema, load_schema, shown_name

    data = load_samples(args.file, trust=args.trust)
    base = load_schema(args.base) if args.base is not None else None  # --base "" is no schema, not no base
    try:
        draft = infer_schema(data.batch, name=args.name, base=base)
    except SchemaDefinitionError as exc:
        if exc.source == "<mapping>" and exc.path == "name":  # the draft's name is what --name said
            problem = exc.problem.replace(repr(args.name), shown_name(args.name))  # the name cut there too
            raise CommandError(f"--name {shown_name(args.name)}: {problem}") from None
        raise
    write(draft.to_yaml())
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


def _change_record(c: Any) -> dict[str, Any]:
    return {
        "path": c.path,
        "kind": c.kind,
        "breaking": c.breaking,
        "backward_breaking": c.backward_breaking,
        "forward_breaking": c.forward_breaking,
        "message": c.message,
    }


def run_diff(args: argparse.Namespace, console: Console) -> int:
    from trajschema.load import load_schema

    old, new = load_schema(args.old), load_schema(args.new)
    changes = old.compatibility(new, mode=args.mode)
    breaking = [c for c in changes if c.breaking]
    if args.json:
        report = {
            "old": old.name,
            "new": new.name,
            "mode": args.mode,
            "compatible": not breaking,
            "changes": [_change_record(c) for c in changes],
        }
        emit_json("diff", report)
        return 1 if breaking else 0
    for c in changes:
        console.print(str(c))  # one line, marked BREAKING or ok
    n = len(changes)
    if breaking:
        console.print(f"incompatible ({args.mode}): {len(breaking)} breaking of {n} change{'s' if n != 1 else ''}")
    elif changes:
        console.print(f"compatible ({args.mode}): {n} non-breaking change{'s' if n != 1 else ''}")
    else:
        console.print("no changes")
    return 1 if breaking else 0
