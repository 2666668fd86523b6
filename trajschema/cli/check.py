"""``trajschema check``: validate files of samples (torch.save or JSON Lines) against a schema, and
bundles against their recorded schema or another (`trajschema.cli.bundles`)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajschema.cli.args import FORMATTER, CommandError, non_negative_int, printable
from trajschema.cli.bundles import MODE, BundleFacts, bundle_dir, bundle_facts, bundle_rows, open_bundle
from trajschema.cli.compat import print_changes
from trajschema.cli.output import PIPED, STYLES, emit_json, print_table, table
from trajschema.cli.read import STDIN, SampleFile, open_source, read_dense_batch, read_jsonl, read_torch, sniff
from trajschema.core import DEPTHS

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from trajschema.core import Layout, Violation
    from trajschema.schema import Schema

__all__ = ["DEFAULT_MAX_VIOLATIONS", "add_check", "group_violations", "run_check"]

#: How many violations a file's report lists by default (the grouped summary counts them all).
DEFAULT_MAX_VIOLATIONS = 20
#: What a check reads, said when a file is of another kind.
READS = "check reads torch.save files (.pt) and JSON Lines (.jsonl, one sample object a line)"
#: The keys of verl's rollout dump (``trainer.rollout_data_dir``): decoded text and the reward, no token ids.
VERL_DUMP_KEYS = frozenset({"input", "output", "gts", "score", "step"})


_DESCRIPTION = (
    "Validate every sample of each FILE against a schema. For each file, check lists the "
    "first violations (sample, field, code, message); then, when the list was cut or a field "
    "and code repeat, a summary grouped by field and code with counts and the samples they "
    "are in; then one line: valid or invalid. On a terminal, verdicts and counts are coloured "
    "(NO_COLOR turns colour off); piped, each record is one line.\n\n"
    "FILE is a torch.save file (a TensorDict, a list of sample dicts, one sample dict, or "
    "the {'samples': [...], 'tags': [...]} envelope that `trajschema pad --out` writes; tags "
    "are checked too), read with torch.load(weights_only=True), which cannot run code; pass "
    "--trust to unpickle other Python objects, only for files you trust. Or FILE is JSON "
    "Lines (.jsonl, or any file whose first line is a JSON object): one sample object a line, "
    "blank lines skipped. Its keys are looked up by name in the schema: a tensor field's "
    "value (a number or nested lists) becomes a tensor of the field's dtype, and any other "
    "key stays as JSON gave it, for the schema's kinds and its extra: policy to judge. "
    "Tables then show line numbers instead of sample indices. A value that does not "
    "convert to its field's tensor (1.5 for int64, a string, a number out of range, ragged "
    "lists) is a violation of its line, named file:line:column and key, and a line that "
    "holds no sample (not JSON, not an object) a violation of field <line>: the rest of the "
    "file is still checked. A FILE of - is standard input, read once (torch.save bytes or "
    "JSON Lines). A file named twice is checked once; when several files are checked, "
    "every violation row names its file.\n\n"
    "With --layout, each FILE is a torch.save file of one dense padded batch in that layout "
    "(a mapping of batch key to (B, ...) tensor such as Schema.to_dense returns, a "
    "TensorDict, or verl's DataProto or a dict of its batch, non_tensor_batch and "
    "meta_info; SkyRL's TrainingInputBatch and verl's DataProto objects need --trust), "
    "checked as Schema.batch_violations(batch, layout=...) checks it: every row's real "
    "region against the schema, and the masks and padded regions against the layout. "
    "Without --layout, a file that looks like a dense batch (its tensors share one leading "
    "size, and more of its keys fit a layout's dense columns than the schema's fields) is "
    "still checked as samples, with a note naming the layout to check it with.\n\n"
    "FILE may be a bundle: the directory trajschema.record_batch (or a drop-in's "
    "install(record=...)) writes, holding manifest.json, tensors.safetensors and "
    "batch.json. Its payloads are verified against "
    "the manifest's SHA-256 first, and it is checked as recorded: without --schema (or with "
    "--schema auto) against its recorded schema, in its recorded layout. With --schema "
    "NAME, the report first says how the recorded schema compares with NAME, as `trajschema "
    "diff RECORDED NAME --mode backward` does (can NAME read what was recorded?), then "
    "checks the batch against NAME in the recorded layout; the comparison does not change "
    "the exit status, the check does. A bundle's report starts with where it came from "
    "(step, trainer and version, the trajschema that recorded it, when, why). A bundle "
    "carries its layout, so --layout is refused for it; bundles and sample files may be "
    "checked together, the sample files against --schema, which they need.\n\n"
    "verl's rollout dump (trainer.rollout_data_dir) is JSON Lines of decoded text: input, "
    "output, gts, score, step and the reward's extra keys, with no token ids. check reads "
    "it as any JSON Lines, and says so when the schema's tensor fields are missing from "
    "it: check a torch.save of the batch for those, or the dump against a schema that "
    "declares its keys (score: {kind: float, pad: 0.0}, ...)."
)

_EPILOG = (
    "Exit status: 0 every file valid; 1 a file invalid (a violation, or a line of JSON "
    "Lines that cannot be read); 2 a file unusable (missing, corrupt, of another kind, no "
    "samples, not a dense batch with --layout, a sample file without --schema, a directory "
    "that holds no bundle, a bundle with a payload that is not the one recorded or of a "
    "newer format, named with the payload or the version), the others still checked and "
    "the unusable ones named, or an unknown schema or layout.\n\n"
    "--json prints one object: {'version': 1, 'command': 'check', 'valid', 'depth', "
    "'layout' (the --layout used, or null), 'totals': {files, valid, invalid, unusable, "
    "samples, violations}, 'files': [...]}, each file with its status, schema, layout, "
    "samples, 'summary' (the groups), 'violations' (as many as --max-violations lets "
    "through, each with its 'file', and 'line' for JSON Lines), 'violations_omitted', "
    "'notes' and 'suggested_layout' (a layout the file looks like a dense batch of, or "
    "null), 'bundle' (for a bundle: path, step, trainer, trainer_version, trajschema, "
    "created, reason, and the recorded schema and layout names; else null) and "
    "'compatibility' (for a bundle checked with --schema NAME: what `trajschema diff "
    "RECORDED NAME --json` prints, old, new, mode, compatible and changes; else null), or "
    "the 'error' that made it unusable.\n\n"
    f"{PIPED}\n\n"
    "Example:\n"
    "  trajschema check rollout.pt --schema vlm_mrope_moe --depth shapes\n"
    "  trajschema check step_*.jsonl --schema mine.yaml --max-violations 0\n"
    "  trajschema check skyrl_batch.pt --schema text --layout skyrl\n"
    "  trajschema check runs/step-00000012\n"
    "  trajschema check runs/step-00000012 --schema ./schemas/my_vlm.yaml --json\n"
    "  cat rollout.pt | trajschema check - --schema auto --quiet"
)


def add_check(sub: Any) -> None:
    """Register ``trajschema check``."""
    p = sub.add_parser(
        "check",
        help="validate files of samples, or bundles, against a schema",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=FORMATTER,
    )
    p.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a torch.save or JSON Lines file of samples, - for stdin, or a bundle directory",
    )
    p.add_argument(
        "--schema",
        metavar="NAME",
        help=(
            "a schema name, a path to a .yaml file, or 'auto' to pick, for each file, the schema that fits "
            "its first sample best (search path files that do not load are left out, and named on stderr); "
            "needed for sample files; a bundle is checked against its recorded schema without it"
        ),
    )
    p.add_argument(
        "--layout",
        metavar="NAME",
        help=(
            "a layout name (verl_dataproto, skyrl, or one on TRAJSCHEMA_LAYOUT_PATH) or a path to a layout "
            ".yaml file: each FILE is then one dense padded batch in that layout (see above); not for "
            "bundles, which carry theirs"
        ),
    )
    p.add_argument(
        "--depth",
        choices=DEPTHS,
        default="values",
        help="'shapes' checks presence, kinds, dtypes, shapes and dims; 'values' also the value checks (default)",
    )
    p.add_argument(
        "--max-violations",
        type=violation_limit,
        default=DEFAULT_MAX_VIOLATIONS,
        metavar="N",
        help=f"list at most N violations of each file, 0 for none, 'all' for all (default {DEFAULT_MAX_VIOLATIONS})",
    )
    p.add_argument(
        "-q", "--quiet", action="store_true", help="print only each file's valid/invalid line (and the totals)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead (--quiet does not change it)")
    p.add_argument("--trust", action="store_true", help="allow full unpickling of torch.save files (runs code in them)")
    p.set_defaults(run=run_check)


def violation_limit(text: str) -> int | None:
    """An argparse type: an integer >= 0, or ``all`` (``None``: no limit)."""
    if text.strip().lower() == "all":
        return None
    try:
        return non_negative_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0 or 'all', found {text!r}") from None


# -- checking -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FileResult:
    """What checking one file found; ``error`` is set when the file could not be checked."""

    file: str
    error: str | None = None
    format: str = ""
    schema: str = ""
    label: str = ""
    samples: int = 0
    found: tuple[Violation, ...] = ()
    lines: tuple[int, ...] | None = None
    depth: str = "values"
    caveat: str = ""
    notes: tuple[str, ...] = ()
    layout: str | None = None
    suggested: str | None = None
    bundle: BundleFacts | None = None

    @property
    def status(self) -> str:
        return "unusable" if self.error is not None else "invalid" if self.found else "valid"

    def where(self, sample: int | None) -> str:
        """How a sample is named in this file: its index, or its line in JSON Lines."""
        if sample is None:
            return "-"
        return str(self.lines[sample]) if self.lines is not None else str(sample)


def run_check(args: argparse.Namespace, console: Console) -> int:
    from trajschema.load import load_schema

    layout = _layout(args.layout) if args.layout is not None else None
    if layout is not None and args.schema is None:
        raise CommandError("--layout checks dense batch files, which hold no schema; name it with --schema")
    if layout is not None and args.schema == "auto":
        raise CommandError(
            "--schema auto picks a schema from a sample, and a dense batch (--layout) has none; name the schema"
        )
    # An unknown schema stops everything; None: auto, or for a bundle its recorded one.
    schema = None if args.schema in (None, "auto") else load_schema(args.schema)
    warned: set[str] = set()
    results = []
    names = _distinct(args.files)
    several = len(names) > 1
    for name in names:
        result = _check_file(name, schema, layout, args, warned)
        if result.error is not None:
            _say("error", result.error)
        elif not args.json:
            _print_file(console, result, args, several)
        results.append(result)
    if args.json:
        used = None if layout is None else layout.name
        emit_json("check", json_report(results, args.depth, args.max_violations, layout=used))
    elif len(results) > 1:
        console.print(_totals_line(results))
    statuses = {r.status for r in results}
    return 2 if "unusable" in statuses else 1 if "invalid" in statuses else 0


def _distinct(names: list[str]) -> list[str]:
    """``names`` with a file named again (by any path) left out, and said on stderr."""
    seen: dict[object, str] = {}
    for name in names:
        key: object = name
        with contextlib.suppress(OSError, ValueError):
            if name != STDIN:
                st = os.stat(name)
                key = (st.st_dev, st.st_ino)
        if key in seen:
            _say("warning", f"{printable(name)} is named more than once; checked once")
        else:
            seen[key] = name
    return list(seen.values())


def _layout(name: str) -> Layout:
    """The layout ``--layout`` names, resolved as the library resolves ``layout=``; a misspelt name gets a guess.

    Raises:
        SchemaNotFoundError: no such layout (with "did you mean" when a name is close).
        LayoutDefinitionError: the layout file is malformed.
    """
    from trajschema.core import SchemaNotFoundError
    from trajschema.files import as_layout

    try:
        return as_layout(name, argument="--layout")
    except SchemaNotFoundError as exc:  # its message has the one "did you mean"
        raise SchemaNotFoundError(f"--layout: {exc}") from None


def _check_file(
    name: str, schema: Schema | None, layout: Layout | None, args: argparse.Namespace, warned: set[str]
) -> FileResult:
    shown = "<stdin>" if name == STDIN else printable(name)
    try:
        where = bundle_dir(name)
        if where is not None:
            return _check_bundle(where, schema, layout, args)
        if args.schema is None:
            raise CommandError(_needs_schema(name, shown))
        if layout is not None and schema is not None:  # run_check refuses --schema auto with --layout
            data, chosen = _read_dense(name, args.trust), schema
            found = tuple(chosen.batch_violations(data.batch, depth=args.depth, layout=layout))
        else:
            data, chosen = _read(name, schema, args.trust, warned)
            checked = chosen.batch_violations(data.batch, tags=data.tags, depth=args.depth)
            found = tuple(data.renumbered(checked))
    except OSError as exc:  # permission denied, an I/O error: the file's, not the command's
        return FileResult(shown, error=f"{shown}: cannot be read: {exc.strerror or exc}")
    except (CommandError, ValueError, TypeError, LookupError) as exc:  # unusable: say so, check the rest
        return FileResult(shown, error=printable(" ".join(str(exc).split())) or type(exc).__name__)
    auto = " (chosen by --schema auto from sample 0)" if schema is None else ""
    path = printable(data.path)
    suggested = _dense_lookalike(data, chosen) if found and layout is None else None
    notes = [_verl_note(data, chosen, found)]
    if suggested is not None:
        notes.append(
            f"{path}: this looks like a dense batch in the {suggested} layout; check it with --layout {suggested}"
        )
    return FileResult(
        path,
        format=data.format,
        schema=chosen.name,
        label=f"schema {chosen.name!r}{auto}" + (f" in layout {layout.name!r}" if layout is not None else ""),
        samples=data.count,
        found=found,
        lines=data.lines,
        depth=args.depth,
        caveat=_meta_note(data, args.depth) if layout is None else "",
        notes=tuple(n for n in notes if n),
        layout=None if layout is None else layout.name,
        suggested=suggested,
    )


def _needs_schema(name: str, shown: str) -> str:
    """Why a FILE that is no bundle cannot be checked without ``--schema``."""
    if name != STDIN and not os.path.lexists(name):
        return f"{shown}: no such file or bundle directory"
    return (
        f"{shown}: is no bundle, and a file of samples is checked against a schema: "
        "name it with --schema (a schema name, a .yaml file, or auto)"
    )


def _check_bundle(where: Path, schema: Schema | None, layout: Layout | None, args: argparse.Namespace) -> FileResult:
    """A bundle checked against its recorded schema (``schema`` None) or ``schema``, in its recorded layout.

    Raises:
        CommandError: ``--layout`` was given, or the bundle holds no rows.
        BundleError: no bundle at ``where``, a payload that is not the one recorded, a newer format.
    """
    shown = printable(str(where))
    if layout is not None:
        raise CommandError(f"{shown}: is a bundle, which carries its own layout; check it without --layout")
    bundle = open_bundle(where)
    rows = bundle_rows(bundle)
    if rows == 0:
        raise CommandError(f"{shown}: the bundle holds a batch of no rows; there is nothing to check")
    chosen = bundle.schema if schema is None else schema
    found = tuple(bundle.violations(schema=chosen, depth=args.depth))
    recorded = None if bundle.layout is None else bundle.layout.name
    label = f"schema {chosen.name!r}" + (" (recorded)" if schema is None else "")
    return FileResult(
        shown,
        format="bundle",
        schema=chosen.name,
        label=label + (f" in layout {recorded!r} (recorded)" if recorded is not None else ""),
        samples=rows or 0,
        found=found,
        depth=args.depth,
        layout=recorded,
        bundle=bundle_facts(bundle, schema),
    )


def _read_dense(name: str, trust: bool) -> SampleFile:
    source = open_source(name)
    if sniff(source, READS) != "torch":
        raise CommandError(f"{source.label}: is JSON Lines; --layout reads one dense batch from a torch.save file")
    return read_dense_batch(source, trust=trust)


def _read(name: str, schema: Schema | None, trust: bool, warned: set[str]) -> tuple[SampleFile, Schema]:
    source = open_source(name)
    if sniff(source, READS) == "torch":
        data = read_torch(source, trust=trust)
        return data, schema or _auto_schema(data.first(), data.first_tag(), warned)
    # JSON Lines: the schema says what the numbers are, so it is chosen from line 1 first.
    chosen = schema or _auto_schema(read_jsonl(source, None, limit=1).first(), None, warned)
    return read_jsonl(source, chosen.fields), chosen


def _auto_schema(sample: Any, tag: Any, warned: set[str]) -> Schema:
    """The schema that fits ``sample`` best, leaving out the search path files that do not load.

    A broken file of someone else's on TRAJSCHEMA_PATH should not stop a check of samples
    it has nothing to do with; what was left out is said once, on stderr, so a file that
    might have been the right one is not left out silently.
    """
    from trajschema.load import choose_schema

    choice = choose_schema(sample, tag, skip_unloadable=True)
    if choice.skipped:
        reasons = "; ".join(" ".join(str(e).split()) for e in choice.skipped)
        if reasons not in warned:
            warned.add(reasons)
            _say("warning", f"--schema auto left out what does not load: {printable(reasons)}")
    return choice.schema


def _say(label: str, message: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):  # stderr is closed (or None): check anyway
        sys.stderr.write(f"trajschema check: {label}: {message}\n")


def _dense_lookalike(data: SampleFile, schema: Schema) -> str | None:
    """The layout a torch.save file read as samples looks like a dense batch of, or ``None``.

    The rule: the file holds one mapping (read as one sample) or a TensorDict (read as its
    rows); every tensor in it has a leading dim, all of one size; and for some layout, more
    of its keys are dense columns of that layout for ``schema`` with the ``(B, ...)`` number
    of dims such a column has, than are tensor fields of ``schema`` with the number of dims
    a sample holds them with. The layout with the most such keys is named (the first by
    name on a tie); a layout that does not load or cannot hold the schema is passed over.
    A real sample's tensors have the schema's dims, so it scores 0 for every layout; a
    TensorDict of dense rows with the schema's own key names scores alike as samples and
    in a layout that keeps those names, and is left alone.
    """
    import torch

    from trajschema.check import batch_view, is_tensordict
    from trajschema.dense import bind_layout
    from trajschema.files import as_layout, layout_names

    batch = data.batch
    if data.lines is not None:
        return None
    if is_tensordict(batch):
        view = batch_view(batch)
        if not view.is_table:  # a lazy stack of ragged rows: samples, never one dense batch
            return None
        columns, row_dims = {k: view.column(k) for k in view.keys()}, 1
    elif isinstance(batch, list) and len(batch) == 1:
        columns, row_dims = dict(batch[0]), 0
    else:
        return None
    tensors = {k: v for k, v in columns.items() if isinstance(v, torch.Tensor)}
    if not tensors or any(t.dim() == 0 for t in tensors.values()):
        return None
    if len({t.shape[0] for t in tensors.values()}) != 1:
        return None

    def fits(declared: dict[str, int], extra: int) -> int:
        return sum(1 for k, t in tensors.items() if declared.get(k, -1) == t.dim() - extra)

    as_samples = fits(
        {n: len(f.shape) for n, f in schema.fields.items() if f.is_tensor and f.shape is not None}, row_dims
    )
    best: tuple[int, str] | None = None
    for name in layout_names():
        try:
            bound = bind_layout(as_layout(name), schema.plan)
        except (ValueError, LookupError, OSError):  # a broken layout file, one that cannot hold this schema
            continue
        dense = {
            p.key: len(p.field.shape)
            for p in bound.columns()
            if p.key is not None and p.field.is_tensor and p.field.shape is not None
        }
        score = fits(dense, 1)
        if score > as_samples and (best is None or score > best[0]):
            best = (score, name)
    return None if best is None else best[1]


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


def _verl_note(data: SampleFile, schema: Schema, found: Iterable[Violation]) -> str:
    """What a verl rollout dump cannot hold, said when the schema's tensor fields are missing from one."""
    if data.lines is None or not VERL_DUMP_KEYS & set(data.first()) >= {"input", "output"}:
        return ""
    missing = list(dict.fromkeys(v.field for v in found if v.code == "missing" and v.field in schema.fields))
    tensors = [f for f in missing if schema.fields[f].is_tensor]
    if not tensors:
        return ""
    return (
        f"this looks like verl's rollout dump (trainer.rollout_data_dir): decoded text (input, output), "
        f"the reward (score, gts) and no token ids, so {', '.join(tensors[:3])}{', ...' if len(tensors) > 3 else ''} "
        "cannot be in it; check a torch.save of the batch for those"
    )


# -- grouping -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Group:
    """The violations of one (field, code): how many, and in which samples (``None``: the batch)."""

    field: str
    code: str
    count: int
    samples: tuple[int | None, ...]


def group_violations(found: Iterable[Violation]) -> list[Group]:
    """``found`` grouped by (field, code), in order of first appearance, each with its distinct samples."""
    counts: dict[tuple[str, str], int] = {}
    samples: dict[tuple[str, str], dict[int | None, None]] = {}
    for v in found:
        key = (v.field, v.code)
        counts[key] = counts.get(key, 0) + 1
        samples.setdefault(key, {})[v.sample] = None
    return [Group(f, c, n, tuple(samples[(f, c)])) for (f, c), n in counts.items()]


def _ranges(where: list[str], numbers: list[int], limit: int = 4) -> str:
    """``0-2, 5, 9-12, ...``: the first ``limit`` runs of consecutive ``numbers``, shown as ``where``."""
    runs: list[tuple[int, int]] = []
    for i, n in enumerate(numbers):
        if runs and n == numbers[runs[-1][1]] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    cells = [where[a] if a == b else f"{where[a]}-{where[b]}" for a, b in runs[:limit]]
    return ", ".join(cells) + (", ..." if len(runs) > limit else "")


def _samples_cell(result: FileResult, group: Group) -> str:
    numbers = sorted(s for s in group.samples if s is not None)
    cell = _ranges([result.where(s) for s in numbers], numbers)
    return ", ".join(c for c in ("batch" if None in group.samples else "", cell) if c)


# -- human output ---------------------------------------------------------------------------


def _print_file(console: Console, result: FileResult, args: argparse.Namespace, several: bool) -> None:
    """One file's report; with ``several`` files checked, every violation row starts with its file."""
    if result.bundle is not None and not args.quiet:
        _print_bundle_head(console, result.file, result.bundle)
    found = result.found
    if found and not args.quiet:
        limit = len(found) if args.max_violations is None else args.max_violations
        if limit:
            _print_violations(console, result, found[:limit], several)
        if len(found) > limit:
            more = len(found) - limit
            of = f" of {result.file}" if several else ""
            console.print(
                f"... and {more} more violation{'s' if more != 1 else ''}{of} (--max-violations all lists them)"
            )
        groups = group_violations(found)
        if len(groups) < len(found) or len(found) > limit:  # else the list above says it all
            _print_groups(console, result, groups, several)
    console.print(_verdict(result))
    if not args.quiet:
        for note in result.notes:
            console.print(f"note: {note}")


def _print_bundle_head(console: Console, file: str, facts: BundleFacts) -> None:
    """Where a bundle came from; with ``--schema``, how its recorded schema compares with it, as ``diff`` says."""
    console.print(f"bundle {file}: {facts.provenance}")
    c = facts.compatibility
    if c is not None:
        console.print(f"compatibility of the recorded schema {c['old']!r} with schema {c['new']!r} ({MODE}):")
        print_changes(console, list(facts.changes), MODE)


def _print_violations(console: Console, result: FileResult, found: tuple[Violation, ...], several: bool) -> None:
    head = "line" if result.lines is not None else "sample"
    first = ["file"] if several else []
    t = table(None, [*first, head, "field", "code", "message"], right=(head,))  # the message wraps; the rest is whole
    for v in found:
        t.add_row(*([result.file] if several else []), result.where(v.sample), v.field, v.code, v.message)
    print_table(console, t)


def _print_groups(console: Console, result: FileResult, groups: list[Group], several: bool) -> None:
    first = ["file"] if several else []
    where = "lines" if result.lines is not None else "samples"
    t = table(None, [*first, "field", "code", "count", where], right=("count",))
    for g in groups:
        t.add_row(*([result.file] if several else []), g.field, g.code, str(g.count), _samples_cell(result, g))
    print_table(console, t)


def _verdict(result: FileResult) -> Text:
    from rich.text import Text

    n, found = result.samples, result.found
    if not found:
        follow = "its sample follows" if n == 1 else f"all {n} samples follow"
        rest = f": {result.file}: {follow} {result.label} at depth {result.depth}{result.caveat}"
        return Text.assemble(("valid", STYLES["valid"]), rest)
    bad = len({v.sample for v in found if v.sample is not None})
    rest = (
        f": {result.file}: {len(found)} violation{'s' if len(found) != 1 else ''} in {bad} of "
        f"{n} sample{'s' if n != 1 else ''} of {result.label} at depth {result.depth}{result.caveat}"
    )
    return Text.assemble(("invalid", STYLES["invalid"]), rest)


def _totals_line(results: list[FileResult]) -> Text:
    from rich.text import Text

    counts = {s: sum(r.status == s for r in results) for s in ("valid", "invalid", "unusable")}
    parts: list[Any] = [f"checked {len(results)} files: "]
    for i, (status, n) in enumerate(counts.items()):
        parts += [", " if i else "", (f"{n} {status}", STYLES[status] if n else "")]
    unusable = [r.file for r in results if r.error is not None]
    if unusable:
        parts.append(f" ({', '.join(unusable)})")
    return Text.assemble(*parts)


# -- machine output -------------------------------------------------------------------------


def json_report(
    results: list[FileResult], depth: str, limit: int | None, *, layout: str | None = None
) -> dict[str, Any]:
    """The ``--json`` object of a check (after ``version`` and ``command``); ``layout``: the ``--layout`` used."""
    files = [_file_json(r, limit) for r in results]
    totals = {
        "files": len(results),
        **{s: sum(r.status == s for r in results) for s in ("valid", "invalid", "unusable")},
    }
    totals |= {"samples": sum(r.samples for r in results), "violations": sum(len(r.found) for r in results)}
    valid = all(r.status == "valid" for r in results)
    return {"valid": valid, "depth": depth, "layout": layout, "totals": totals, "files": files}


#: How many of a group's samples ``--json`` names (``sample_count`` counts them all).
FIRST_SAMPLES = 10


def _group_json(result: FileResult, group: Group) -> dict[str, Any]:
    first = list(group.samples[:FIRST_SAMPLES])
    report = {"field": group.field, "code": group.code, "count": group.count, "sample_count": len(group.samples)}
    report["first_samples"] = first
    if result.lines is not None:
        report["first_lines"] = [None if s is None else result.lines[s] for s in first]
    return report


def _file_json(result: FileResult, limit: int | None) -> dict[str, Any]:
    if result.error is not None:
        return {"file": result.file, "status": "unusable", "error": result.error}
    shown = result.found if limit is None else result.found[:limit]
    violations = [{"file": result.file, **dataclasses.asdict(v)} for v in shown]
    if result.lines is not None:
        for v in violations:
            v["line"] = None if v["sample"] is None else result.lines[v["sample"]]
    summary = [_group_json(result, g) for g in group_violations(result.found)]
    return {
        "file": result.file,
        "status": result.status,
        "format": result.format,
        "schema": result.schema,
        "layout": result.layout,
        "samples": result.samples,
        "invalid_samples": len({v.sample for v in result.found if v.sample is not None}),
        "summary": summary,
        "violations": violations,
        "violations_omitted": len(result.found) - len(shown),
        "notes": [n.lstrip("; ") for n in (result.caveat, *result.notes) if n],
        "suggested_layout": result.suggested,
        "bundle": None if result.bundle is None else result.bundle.record,
        "compatibility": None if result.bundle is None else result.bundle.compatibility,
    }
