"""The command line's schema side: the ``list``, ``show``, ``export``, ``infer`` and ``diff`` commands.

Each ``add_*`` function registers one subcommand (its help, description and epilog are
the text of the generated CLI reference) and each ``run_*`` function runs it, returning
the exit status. Bad input raises a library error or :class:`~trajschema.cli.data.CommandError`;
``trajschema.cli.app`` prints it as one line and exits 2.
"""

from __future__ import annotations

import argparse
import json
import keyword
import re
from typing import TYPE_CHECKING, Any

from trajschema._schema import Schema
from trajschema.cli.data import FORMATTER, CommandError, load_samples, print_table, printable, table, write
from trajschema.core import KINDS, Field, SchemaDefinitionError, SchemaNotFoundError, dtype_name
from trajschema.export import JAXTYPING_DTYPE, dim_rows, extends, field_rows, tag_rows
from trajschema.load import infer_schema, load_schema, packaged_dir, schema_search_path, search_path_files

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "add_diff",
    "add_export",
    "add_infer",
    "add_list",
    "add_show",
    "jaxtyping_source",
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
            "a FIFO, a device, a file without permission, text that is not UTF-8) is listed with its\n"
            "error, and so, first, is a TRAJSCHEMA_PATH entry that cannot be listed (a directory\n"
            "without permission, a file, a broken link); the listing goes on. A missing directory\n"
            "is skipped, as a shell skips a missing PATH entry."
        ),
        epilog=(
            "Exit status: 0 when every schema loads, 1 when some schema file or search path entry\n"
            "is broken.\n\n"
            "Example:\n"
            "  trajschema list\n"
            "  TRAJSCHEMA_PATH=./my_schemas trajschema list"
        ),
        formatter_class=FORMATTER,
    )
    p.set_defaults(run=run_list)


def schema_listing() -> list[tuple[str, str, str, str, str | None]]:
    """``(name, extends, architectures, source, error)`` for every schema on the search path.

    A search path entry that cannot be listed comes first, as a row with an empty name (no
    file's name is empty) whose source is the entry; a file that cannot be read is a row
    with its error, as a file that does not load is.
    """
    packaged = packaged_dir().resolve()
    search = search_path_files(schema_search_path())
    rows: list[tuple[str, str, str, str, str | None]] = [
        ("", "", "", str(d), str(SchemaDefinitionError(str(d), "", why))) for d, why in search.unlisted
    ]
    for name, hit in sorted(search.files.items()):
        source = "packaged" if hit.path.parent.resolve() == packaged else str(hit.path.parent)
        try:
            schema = load_schema(hit.path)
        except (SchemaDefinitionError, SchemaNotFoundError, OSError) as exc:
            rows.append((name, "", "", source, " ".join(str(exc).split())))
            continue
        rows.append((name, ", ".join(extends(schema)), ", ".join(schema.architectures), source, None))
    return rows


def run_list(args: argparse.Namespace, console: Console) -> int:
    rows = schema_listing()
    listing = table(None, ["name", "extends", "architectures", "from"])
    for name, parents, archs, source, error in rows:
        # File names and errors come from the file system: keep each row one inert line.
        cells = (name or "-", parents or "-", f"error: {error}" if error else archs or "-", source)
        listing.add_row(*map(printable, cells))
    print_table(console, listing)
    directories = sum(1 for r in rows if not r[0])
    files = len(rows) - directories
    broken = sum(1 for r in rows if r[4] is not None) - directories
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
            "it validates."
        ),
        epilog="Exit status: 0 success, 2 unusable input (unknown schema, a file that does not load).\n\n"
        "Example:\n  trajschema show vlm_mrope_moe",
        formatter_class=FORMATTER,
    )
    p.add_argument("name", metavar="NAME", help=_NAME_HELP)
    p.set_defaults(run=run_show)


def run_show(args: argparse.Namespace, console: Console) -> int:
    schema = load_schema(args.name)
    console.print(f"schema {schema.name}")
    if schema.description:
        console.print(f"  {printable(' '.join(schema.description.split()))}")
    console.print(f"  extends: {', '.join(extends(schema)) or '-'}")
    console.print(f"  architectures: {', '.join(schema.architectures) or '-'}")
    console.print(
        f"  undeclared fields: {'allowed' if schema.extra == 'allow' else 'forbidden'} (extra: {schema.extra})"
    )
    console.print(f"  source: {schema.source}")
    fields = table("fields", ["name", "shape", "dtype", "required", "pad", "checks", "description"])
    for f in field_rows(schema):
        fields.add_row(*map(printable, (f.name, f.shape, f.dtype, f.required, f.pad, f.checks, f.description)))
    dims = table("dims", ["name", "kind", "definition", "padding default", "description"])
    for d in dim_rows(schema):
        dims.add_row(*map(printable, (d.name, d.kind, d.definition, d.padding_default, d.description)))
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
    schema = load_schema(args.name)
    if args.format == "yaml":
        write(schema.to_yaml())
    elif args.format == "json-schema":
        write(json.dumps(schema.to_json_schema(), indent=2))
    else:
        write(jaxtyping_source(schema))
    return 0


_PY_KIND = {"int": "int", "float": "float", "bool": "bool", "str": "str", "mapping": "dict[str, Any]", "any": "Any"}
assert set(_PY_KIND) == set(KINDS) - {"tensor"}, "every non-tensor kind needs a Python type"


def _py_str(text: str) -> str:
    return f'"{text}"' if text.isprintable() and '"' not in text and "\\" not in text else repr(text)


def _class_name(schema_name: str) -> str:
    words = [w for w in re.split(r"[^0-9A-Za-z]+", schema_name) if w]
    name = "".join(w[0].upper() + w[1:] for w in words) + "Sample"
    return name if name[0].isalpha() else "Schema" + name


def _dtype_source(f: Field, imports: set[str], defs: dict[str, str]) -> str:
    """The name of a tensor field's jaxtyping dtype in the generated source (defining a dtype set when needed)."""
    names = [JAXTYPING_DTYPE[dtype_name(d)] for d in f.dtypes]
    if len(names) == 1:
        imports.add(names[0])
        return names[0]
    # The same dtype set Schema.annotations() uses: an AbstractDtype listing exactly these.
    cls = "Or".join(names)
    listed = ", ".join(_py_str(dtype_name(d)) for d in f.dtypes)
    defs[cls] = f"class {cls}(AbstractDtype):\n    dtypes = [{listed}]\n"
    imports.add("AbstractDtype")
    return cls


def _field_types(schema: Schema, imports: set[str], defs: dict[str, str]) -> list[tuple[str, str, bool]]:
    annotations = schema.annotations()
    out = []
    for f in schema.fields.values():
        if f.name in annotations:
            text = f"{_dtype_source(f, imports, defs)}[torch.Tensor, {_py_str(annotations[f.name].dim_str)}]"
        else:
            text = _PY_KIND[f.kind]
        out.append((f.name, text, f.required))
    return out


def jaxtyping_source(schema: Schema) -> str:
    """Python source defining ``<Name>Sample``, a TypedDict of the schema's fields with jaxtyping annotations.

    Tensor fields carry :meth:`Schema.annotations`; other fields their kind's Python type.
    Required fields are keys of one base class, optional ones of a ``total=False`` one;
    a base whose field names are not all identifiers uses TypedDict's functional form.
    """
    imports: set[str] = set()
    defs: dict[str, str] = {}
    types = _field_types(schema, imports, defs)
    cls = _class_name(schema.name)
    lines = [
        f"# Sample types of trajschema schema {schema.name!r}: its tensor fields carry jaxtyping annotations.",
        f"# Generated by `trajschema export {schema.name} --format jaxtyping`; regenerate it when the schema changes.",
        "",
        "from typing import Any, TypedDict",
        "",
        "import torch",
    ]
    if imports:
        lines.append(f"from jaxtyping import {', '.join(sorted(imports))}")
    for d in defs.values():
        lines += ["", "", *d.splitlines()]
    lines += _typed_dict(f"_{cls}Required", [(n, t) for n, t, r in types if r], total=True)
    lines += _typed_dict(f"_{cls}Optional", [(n, t) for n, t, r in types if not r], total=False)
    lines += [
        "",
        "",
        f"class {cls}(_{cls}Required, _{cls}Optional):",
        '    """One sample: the required fields and the optional ones."""',
    ]
    return "\n".join(lines).rstrip() + "\n"


def _typed_dict(name: str, entries: list[tuple[str, str]], *, total: bool) -> list[str]:
    total_kw = "" if total else ", total=False"
    if all(n.isidentifier() and not keyword.iskeyword(n) for n, _ in entries):
        body = [f"    {n}: {t}" for n, t in entries] or ["    pass"]
        return ["", "", f"class {name}(TypedDict{total_kw}):", *body]
    # TypedDict's functional form takes any string as a key.
    items = [f"        {_py_str(n)}: {t}," for n, t in entries]
    return ["", "", f"{name} = TypedDict(", f"    {_py_str(name)},", "    {", *items, "    }" + total_kw + ",", ")"]


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
    data = load_samples(args.file, trust=args.trust)
    base = load_schema(args.base) if args.base is not None else None  # --base "" is no schema, not no base
    try:
        draft = infer_schema(data.batch, name=args.name, base=base)
    except SchemaDefinitionError as exc:
        if exc.source == "<mapping>" and exc.path == "name":  # the draft's name is what --name said
            raise CommandError(f"--name {args.name!r}: {exc.problem}") from None
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
        write(json.dumps(report, indent=2))
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
