"""``trajschema check``: validate files of samples against a schema."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from typing import TYPE_CHECKING, Any

from trajschema.cli.args import FORMATTER, printable
from trajschema.cli.output import emit_json, print_table, table
from trajschema.cli.read import SampleFile, load_samples
from trajschema.core.types import DEPTHS

if TYPE_CHECKING:
    from rich.console import Console

    from trajschema._schema import Schema
    from trajschema.core import Violation

__all__ = ["add_check", "run_check"]


def add_check(sub: Any) -> None:
    """Register ``trajschema check``."""
    p = sub.add_parser(
        "check",
        help="validate a file of samples against a schema",
        description=(
            "Validate every sample of FILE against a schema and print every violation (sample index,\n"
            "field, code, message), then a summary line. FILE is what torch.save wrote: a TensorDict,\n"
            "a list of sample dicts, one sample dict, or the {'samples': [...], 'tags': [...]} envelope\n"
            "that `trajschema pad --out` writes (tags are checked too). It is read with\n"
            "torch.load(weights_only=True), which cannot run code; pass --trust to unpickle other\n"
            "Python objects, only for files you trust."
        ),
        epilog=(
            "Exit status: 0 valid, 1 invalid, 2 unusable input (missing or corrupt file, unknown\n"
            "schema, unsupported content, no samples).\n\n"
            "Example:\n"
            "  trajschema check rollout.pt --schema vlm_mrope_moe --depth shapes"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("file", metavar="FILE", help="the torch.save file to check")
    p.add_argument(
        "--schema",
        required=True,
        metavar="NAME",
        help=(
            "a schema name, a path to a .yaml file, or 'auto' to pick the schema that fits the first sample best "
            "(search path files that do not load are left out, and named on stderr)"
        ),
    )
    p.add_argument(
        "--depth",
        choices=DEPTHS,
        default="values",
        help="'shapes' checks presence, kinds, dtypes, shapes and dims; 'values' also the value checks (default)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--trust", action="store_true", help="allow full unpickling of FILE (runs code in it)")
    p.set_defaults(run=run_check)


def run_check(args: argparse.Namespace, console: Console) -> int:
    from trajschema.load import load_schema

    data = load_samples(args.file, trust=args.trust)
    if args.schema == "auto":
        schema = _auto_schema(data)
        label = f"schema {schema.name!r} (chosen by --schema auto from sample 0)"
    else:
        schema = load_schema(args.schema)
        label = f"schema {schema.name!r}"
    found = schema.batch_violations(data.batch, tags=data.tags, depth=args.depth)
    if args.json:
        report = {
            "valid": not found,
            "schema": schema.name,
            "file": data.path,
            "depth": args.depth,
            "samples": data.count,
            "violations": [dataclasses.asdict(v) for v in found],
        }
        emit_json("check", report)
    else:
        if found:
            print_table(console, _violation_table(found))
        console.print(_check_summary(found, data, label, args.depth) + _meta_note(data, args.depth))
    return 1 if found else 0


def _auto_schema(data: SampleFile) -> Schema:
    """The schema that fits sample 0 best, leaving out the search path files that do not load.

    A broken file of someone else's on TRAJSCHEMA_PATH should not stop a check of samples
    it has nothing to do with; what was left out is said once, on stderr, so a file that
    might have been the right one is not left out silently.
    """
    from trajschema.load import choose_schema

    choice = choose_schema(data.first(), data.first_tag(), skip_unloadable=True)
    if choice.skipped:
        reasons = "; ".join(" ".join(str(e).split()) for e in choice.skipped)
        line = f"trajschema check: warning: --schema auto left out what does not load: {printable(reasons)}\n"
        with contextlib.suppress(OSError, ValueError, AttributeError):  # stderr is closed (or None): check anyway
            sys.stderr.write(line)
    return choice.schema


def _violation_table(found: list[Violation]) -> Any:
    t = table(None, ["sample", "field", "code", "message"], right=("sample",))
    for v in found:
        t.add_row("-" if v.sample is None else str(v.sample), printable(v.field), v.code, printable(v.message))
    return t


def _meta_note(data: SampleFile, depth: str) -> str:
    """A caveat when ``values`` could not be read: ``meta`` tensors have shapes but no elements."""
    if depth != "values":
        return ""
    import torch

    from trajschema.check import batch_view

    view = batch_view(data.batch)  # a lazy stack of ragged rows has no columns to get(): read its rows
    if view.is_table:
        columns = [view.column(k) for k in view.keys()]
    else:
        columns = [v for s in view.samples or () for v in s.values()]
    if not any(isinstance(c, torch.Tensor) and c.is_meta for c in columns):
        return ""
    return "; its meta tensors have no values, so only their shapes were checked"


def _check_summary(found: list[Violation], data: SampleFile, schema: str, depth: str) -> str:
    n = data.count
    if not found:
        follow = "its sample follows" if n == 1 else f"all {n} samples follow"
        return f"valid: {data.path}: {follow} {schema} at depth {depth}"
    bad = len({v.sample for v in found if v.sample is not None})
    return (
        f"invalid: {data.path}: {len(found)} violation{'s' if len(found) != 1 else ''} in {bad} of "
        f"{n} sample{'s' if n != 1 else ''} of {schema} at depth {depth}"
    )
