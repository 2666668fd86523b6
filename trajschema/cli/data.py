"""The command line's data side: reading sample files, and the ``check``, ``plan`` and ``pad`` commands.

A sample file is what ``torch.save`` wrote: a TensorDict (as TransferQueue returns a
batch), a list of sample dicts, one sample dict, or the ``{"samples": [...], "tags":
[...]}`` envelope that ``trajschema pad --out`` writes. Files are read with
``torch.load(weights_only=True)``, which cannot run code; full unpickling happens only
when the user passes ``--trust``.

Bad input raises `CommandError` (or a library error) with a one-line message;
``trajschema.cli.app`` turns it into ``trajschema <command>: error: ...`` and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import json
import os
import re
import sys
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trajschema._schema import Schema
from trajschema.check import batch_view, is_tensordict
from trajschema.core import DEPTHS, MAX_SIZE, SPREAD, FixedDim, SchemaError, Violation
from trajschema.load import choose_schema, config_sizes, load_schema, read_model_config
from trajschema.padding import (
    PaddingMemoryError,
    PaddingSizeError,
    format_bytes,
    padding_needed,
    required_multiple,
    resolve_padding,
)
from trajschema.verl.config import padding_dims

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "CommandError",
    "SampleFile",
    "add_check",
    "add_pad",
    "add_plan",
    "dim_setting",
    "load_samples",
    "non_negative_int",
    "positive_int",
    "positive_size",
    "print_table",
    "printable",
    "size_int",
    "table",
    "write",
]

#: How a subcommand's help is laid out: descriptions and epilogs keep their line breaks.
FORMATTER = argparse.RawDescriptionHelpFormatter

_SHAPES = "a TensorDict, a list of sample dicts, a sample dict or a {'samples': [...], 'tags': [...]} envelope"


class CommandError(ValueError):
    """Input the command line cannot use; its message is the one line printed after ``error:``."""


def write(text: str) -> None:
    """Print ``text`` to stdout as it is (YAML, JSON, source code: nothing rich may rewrap)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def print_table(console: Console, table: Any) -> None:
    """Print a rich table without the blanks rich pads its last column with."""
    with console.capture() as captured:
        console.print(table)
    write("\n".join(line.rstrip() for line in captured.get().splitlines()))


def table(title: str | None, columns: list[str], *, right: tuple[str, ...] = ()) -> Any:
    """A rich table of plain cells: a header rule, no outer edge."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in columns:
        t.add_column(column, justify="right" if column in right else "left")
    return t


# -- argument types (argparse reports their errors as one usage line) -----------------------


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


def positive_size(text: str) -> int:
    """An argparse type: an integer from 1 to ``2**63 - 1`` (a count torch can hold)."""
    return _int_at_least(text, 1, "a positive integer", MAX_SIZE)


def size_int(text: str) -> int:
    """An argparse type: an integer from 0 to ``2**63 - 1`` (a size or token id torch can hold)."""
    return _int_at_least(text, 0, "an integer >= 0", MAX_SIZE)


def _decimal(text: str) -> int | None:
    # int() also takes "1_000", non-ASCII digits ("١٢") and inner blanks; a command line wants plain digits.
    text = text.strip()
    return int(text, 10) if re.fullmatch(r"[+-]?[0-9]+", text) else None


def _int_at_least(text: str, minimum: int, what: str, maximum: int | None = None) -> int:
    value = _decimal(text)
    if value is None or value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, found {text!r}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"expected {what} up to 2**63-1 (a torch size), found {text}")
    return value


def dim_setting(text: str) -> tuple[str, int]:
    """An argparse type: ``NAME=SIZE`` with SIZE an integer from 0 to ``2**63 - 1`` (``prompt=15``)."""
    name, sep, size = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE (e.g. prompt=15), found {text!r}")
    value = _decimal(size)
    if value is None:
        raise argparse.ArgumentTypeError(f"size of dim {name!r} must be an integer, found {size!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"size of dim {name!r} must be >= 0, found {value}")
    if value > MAX_SIZE:
        raise argparse.ArgumentTypeError(f"size of dim {name!r} must be at most 2**63-1 (a torch size), found {value}")
    return name, value


def printable(text: str) -> str:
    """``text`` with control characters written as escapes (``\\n``, ``\\x1b``), so it prints as one inert line.

    Field names and values come from data files: a key holding a newline or a terminal
    escape sequence must not split a table row or recolour the user's terminal.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


# -- reading sample files -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SampleFile:
    """The samples of one file: ``batch`` is a list of sample mappings or a TensorDict."""

    path: str
    batch: Any
    tags: list[Mapping[str, Any]] | None
    count: int

    def first(self) -> Mapping[str, Any]:
        """The first sample, as a mapping of plain values (a TensorDict row unwrapped)."""
        return batch_view(self.batch).row(0)

    def first_tag(self) -> Mapping[str, Any] | None:
        return self.tags[0] if self.tags else None


def load_samples(path: str, *, trust: bool = False) -> SampleFile:
    """Read a sample file (see the module docstring for the shapes it may hold).

    Raises:
        CommandError: the file is missing, unreadable, corrupt, needs ``--trust``, holds
            something else or no samples at all.
    """
    return _samples_of(_torch_load(path, trust), path)


def _torch_load(path: str, trust: bool) -> Any:
    if not path.strip():  # Path("") is the current directory
        raise CommandError("an empty file name; name the torch.save file to read")
    p = Path(path)
    if not p.exists():
        raise CommandError(f"{path}: no such file")
    if p.is_dir():
        raise CommandError(f"{path}: is a directory, not a sample file")
    if not p.is_file():  # a FIFO or a device: reading it could block forever
        raise CommandError(f"{path}: is not a regular file")
    try:
        with warnings.catch_warnings(), torch.serialization.safe_globals(_tensordict_globals()):
            warnings.simplefilter("ignore")  # torch warns about pickle protocols of files it then refuses
            return torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch.load raises KeyError, EOFError, RuntimeError, ... for non-torch bytes
        if not _needs_unpickling(exc):
            raise CommandError(f"{path}: not a readable torch.save file ({_unreadable(p, exc)})") from None
        if not trust:
            raise CommandError(f"{path}: {_refusal(exc)}; rerun with --trust if you trust the file") from None
    try:
        return torch.load(p, map_location="cpu", weights_only=False)
    except Exception as exc:  # unpickling runs arbitrary code: any error is the file's
        raise CommandError(f"{path}: not a readable torch.save file, even with --trust ({_reason(exc)})") from None


def _tensordict_globals() -> list[Any]:
    """What the pickle of a TensorDict references, for torch's weights_only loader.

    tensordict 0.15 allowlists exactly these itself when imported; 0.10.0 (the floor) does
    not, so without this a TensorDict file would need --trust there. None of them imports
    a module named in the file or unpickles nested data: every value inside still passes
    the restricted loader.
    """
    from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict, _reductions

    rebuilders = [getattr(_reductions, n, None) for n in ("_make_td", "_rebuild_tensordict_files_consolidated")]
    return [TensorDict, LazyStackedTensorDict, NonTensorData, NonTensorStack, *(f for f in rebuilders if f)]


def _needs_unpickling(exc: Exception) -> bool:
    # torch wraps every refusal of its restricted unpickler in one UnpicklingError message.
    return "Weights only load failed" in str(exc)


def _refusal(exc: Exception) -> str:
    """Why torch's restricted unpickler refused a file, from its message (which varies with what it met)."""
    text = str(exc)
    # "Unsupported global: GLOBAL x.y was not an allowed global ..." or, for a blocked
    # module such as os or posix, "Trying to load unsupported GLOBAL posix.system whose ...".
    found = re.search(r"(?:Unsupported global: |unsupported )GLOBAL ([\w.]+)", text)
    if found:
        return (
            f"holds an object of type {found.group(1)}, which only full unpickling can load "
            "and which can run arbitrary code"
        )
    opcode = re.search(r"Unsupported operand (\d+)", text)
    if opcode:
        return (
            f"was pickled with an instruction (opcode {opcode.group(1)}) that torch.load(weights_only=True) "
            "does not read: written with a pickle_protocol above 2, or not by torch.save; full unpickling "
            "can run arbitrary code"
        )
    return (
        "holds Python objects beyond tensors and plain values, which only full unpickling can load "
        "and which can run arbitrary code"
    )


def _unreadable(p: Path, exc: BaseException) -> str:
    try:
        with p.open("rb") as f:
            head = f.read(4)
    except OSError:
        head = b""
    if not head or head.startswith(b"PK"):  # empty, or a zip archive (perhaps truncated): torch's reason is clear
        return _reason(exc)
    # Not a zip archive, so torch read it as a legacy (pre-1.6) torch.save pickle: its
    # complaint ("KeyError: 105", an opcode it met) says little about the actual file.
    return f"neither a zip archive, as torch.save writes, nor a legacy torch.save file: {_reason(exc)}"


def _reason(exc: BaseException) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # torch colours parts of its messages
    first = text.splitlines()[0].strip().split(". ")[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _samples_of(obj: Any, path: str) -> SampleFile:
    tags: Any = None
    if is_tensordict(obj):  # before Mapping: a TensorDict may register as one
        pass
    elif isinstance(obj, Mapping) and "samples" in obj and set(obj) <= {"samples", "tags"}:
        obj, tags = obj["samples"], obj.get("tags")
    elif isinstance(obj, Mapping):
        if not all(isinstance(k, str) for k in obj):
            raise CommandError(f"{path}: holds a mapping whose keys are not all field names (str); expected {_SHAPES}")
        obj = [obj]  # one sample
    if is_tensordict(obj):
        if obj.batch_dims != 1:
            raise CommandError(f"{path}: a TensorDict of samples needs one batch dim, found {list(obj.batch_size)}")
        count = int(obj.batch_size[0])
    elif isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)):
        obj = list(obj)
        for i, s in enumerate(obj):
            if not isinstance(s, Mapping) or not all(isinstance(k, str) for k in s):
                raise CommandError(f"{path}: item {i} is {_what(s)}, not a sample (a dict of field name to value)")
        count = len(obj)
    else:
        raise CommandError(f"{path}: holds {_what(obj)}; expected {_SHAPES}")
    if count == 0:
        raise CommandError(f"{path}: holds no samples")
    return SampleFile(path, obj, _tags_of(tags, count, path), count)


def _tags_of(tags: Any, count: int, path: str) -> list[Mapping[str, Any]] | None:
    if tags is None:
        return None
    if not isinstance(tags, Sequence) or isinstance(tags, (str, bytes)):
        raise CommandError(f"{path}: 'tags' must be a list of tag dicts (one per sample), found {_what(tags)}")
    if len(tags) != count:
        raise CommandError(f"{path}: 'tags' has {len(tags)} entries for {count} samples (one per sample)")
    for i, t in enumerate(tags):
        if not isinstance(t, Mapping):
            raise CommandError(f"{path}: tags[{i}] is {_what(t)}, not a tag dict")
    return list(tags)


def _what(obj: Any) -> str:
    if obj is None:
        return "None"
    if isinstance(obj, Mapping):
        return "a mapping with non-str keys"
    name = type(obj).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


# -- check ----------------------------------------------------------------------------------


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
        write(json.dumps(report, indent=2))
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


# -- plan -----------------------------------------------------------------------------------


def add_plan(sub: Any) -> None:
    """Register ``trajschema plan``."""
    p = sub.add_parser(
        "plan",
        help="how much padding a PPO/GRPO batch needs",
        description=(
            "Plan the padding of one training batch. The batch must grow to a multiple of\n"
            "lcm(dp_size, critic_mini_batch_size * rollout_n, actor_mini_batch_size * rollout_n)\n"
            "(verl's rule), so every data-parallel rank gets as many samples and every PPO\n"
            "mini-batch is full. Prints that multiple, how many padding samples reach it, their\n"
            "share of the padded batch, and how long each padding sample must be for the tensor x\n"
            "context parallel layout (a multiple of 2 * tp_size * cp_size, at least 128 tokens)."
        ),
        epilog=(
            "Exit status: 0 success, 2 a usage error.\n\n"
            "Example:\n  trajschema plan --dp-size 2 --batch-size 353 --rollout-n 8 --actor-mini-batch-size 15"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("--dp-size", type=positive_int, required=True, metavar="N", help="data-parallel ranks")
    p.add_argument(
        "--batch-size",
        type=positive_int,
        required=True,
        metavar="B",
        help="samples (trajectories) in the batch, before padding",
    )
    p.add_argument(
        "--rollout-n", type=positive_int, required=True, metavar="K", help="the rollout's n (responses per prompt)"
    )
    p.add_argument(
        "--actor-mini-batch-size", type=positive_int, required=True, metavar="M", help="the actor's ppo_mini_batch_size"
    )
    p.add_argument(
        "--critic-mini-batch-size",
        type=positive_int,
        metavar="C",
        help="the critic's ppo_mini_batch_size (only when a critic is trained)",
    )
    p.add_argument("--tp-size", type=positive_int, default=1, metavar="TP", help="tensor-parallel size (default 1)")
    p.add_argument("--cp-size", type=positive_int, default=1, metavar="CP", help="context-parallel size (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_plan)


def plan_report(args: argparse.Namespace) -> dict[str, Any]:
    """The numbers ``plan`` prints, as a JSON-ready dict."""
    multiple = required_multiple(
        args.dp_size,
        actor_mini_batch_size=args.actor_mini_batch_size,
        critic_mini_batch_size=args.critic_mini_batch_size,
        rollout_n=args.rollout_n,
    )
    pad = padding_needed(args.batch_size, multiple)
    dims = padding_dims(tp_size=args.tp_size, cp_size=args.cp_size)
    return {
        "dp_size": args.dp_size,
        "batch_size": args.batch_size,
        "rollout_n": args.rollout_n,
        "actor_mini_batch_size": args.actor_mini_batch_size,
        "critic_mini_batch_size": args.critic_mini_batch_size,
        "tp_size": args.tp_size,
        "cp_size": args.cp_size,
        "required_multiple": multiple,
        "padding_samples": pad,
        "padded_batch_size": args.batch_size + pad,
        "padding_share": pad / (args.batch_size + pad),
        "padding_dims": dims,
        "padding_length": sum(dims.values()),
    }


def run_plan(args: argparse.Namespace, console: Console) -> int:
    r = plan_report(args)
    if args.json:
        write(json.dumps(r, indent=2))
        return 0
    terms = [f"dp_size {r['dp_size']}"]
    if r["critic_mini_batch_size"] is not None:
        terms.append(f"critic_mini_batch_size {r['critic_mini_batch_size']} x rollout_n {r['rollout_n']}")
    terms.append(f"actor_mini_batch_size {r['actor_mini_batch_size']} x rollout_n {r['rollout_n']}")
    layout = 2 * r["tp_size"] * r["cp_size"]
    dims = r["padding_dims"]
    rows = [
        ("required multiple", str(r["required_multiple"]), f"lcm({', '.join(terms)})"),
        ("batch size", str(r["batch_size"]), "samples"),
        (
            "padding samples",
            str(r["padding_samples"]),
            f"{r['padding_share']:.1%} of the padded batch of {r['padded_batch_size']}",
        ),
        (
            "padding length",
            str(r["padding_length"]),
            f"tokens per padding sample: prompt {dims['prompt']} + response {dims['response']} "
            f"(a multiple of 2 x tp_size {r['tp_size']} x cp_size {r['cp_size']} = {layout}, at least 128)",
        ),
    ]
    width = max(len(v) for _, v, _ in rows)
    for label, value, note in rows:
        write(f"{label:<18} {value:>{width}}  {note}")
    return 0


# -- pad ------------------------------------------------------------------------------------


def add_pad(sub: Any) -> None:
    """Register ``trajschema pad``."""
    p = sub.add_parser(
        "pad",
        help="write padding samples derived from a schema",
        description=(
            "Derive --count padding samples from a schema's pad rules and write them to a file with\n"
            "torch.save, as the {'samples': [...], 'tags': [...]} envelope that `trajschema check`\n"
            "reads. Every padding sample validates, has zero loss and response masks, carries\n"
            "is_padding=True in its tags, and all of them share one fresh uid. The file holds only\n"
            "tensors, strings, numbers, booleans, lists and dicts, so torch.load(weights_only=True)\n"
            "loads it. Free dims without a padding size in the schema (layers, topk, ...) come from\n"
            "--like (a real sample of the batch) or --dim, or --config: the dims the schema reads\n"
            "from a model config (from_config:) are fixed at the sizes that config.json gives."
        ),
        epilog=(
            "Exit status: 0 written; 2 unusable input: an unknown schema or dim, sizes the schema\n"
            "refuses or that would not fit in memory, a --like sample of another schema, an --out\n"
            "that cannot be written, a --config that cannot be read or lacks a key the schema reads.\n\n"
            "Example:\n"
            "  trajschema pad vlm_mrope_moe --count 7 --eos-token-id 2 --like rollout.pt --out pad.pt\n"
            "  trajschema pad text --count 2 --eos-token-id 2 --dim prompt=255 --dim response=1 --out pad.pt\n"
            "  trajschema pad moe_routed --count 2 --eos-token-id 2 --config ~/models/Qwen3-30B-A3B --out pad.pt"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("name", metavar="NAME", help="a schema name or a path to a .yaml file")
    p.add_argument("--count", type=positive_size, required=True, metavar="N", help="how many padding samples")
    p.add_argument("--eos-token-id", type=size_int, required=True, metavar="E", help="the EOS id for 'pad: eos' fields")
    p.add_argument(
        "--like", metavar="FILE", help="a sample file as `check` reads it; its first sample is the reference"
    )
    p.add_argument(
        "--dim",
        type=dim_setting,
        action="append",
        default=[],
        metavar="NAME=SIZE",
        help="the size of a free dim in the padding (repeatable), e.g. --dim prompt=255",
    )
    p.add_argument("--trust", action="store_true", help="allow full unpickling of the --like file (runs code in it)")
    p.add_argument(
        "--config",
        metavar="PATH",
        help="a model's config.json or model directory: the dims the schema reads from it (from_config:) "
        "are fixed at its sizes",
    )
    p.add_argument("--out", required=True, metavar="FILE", help="where to write the padding samples")
    p.set_defaults(run=run_pad)


def _config_schema(schema: Schema, config: str | None, settings: list[tuple[str, int]]) -> Schema:
    """``schema`` with the dims ``--config`` gives fixed; a ``--dim`` of another size for one of them is refused."""
    if config is None:
        return schema
    sizes = config_sizes(schema, read_model_config(config))
    for name, size in settings:
        if name in sizes and sizes[name][0] != size:
            given, source = sizes[name]
            raise CommandError(f"--dim {name}={size}: --config {config} gives {name} = {given} ({source})")
    return schema.with_dims({n: v for n, (v, _) in sizes.items()}, sources={n: src for n, (_, src) in sizes.items()})


def run_pad(args: argparse.Namespace, console: Console) -> int:
    schema = _config_schema(load_schema(args.name), args.config, args.dim)
    target = _out_target(args.out)
    dims = _dims_for(schema, args.dim)
    like = load_samples(args.like, trust=args.trust).first() if args.like is not None else None
    try:
        # The sizes first, bounded by what pad writes; then the padding, which checks its own bound.
        resolve_padding(schema._compiled(), args.count, like=like, dims=dims or None).check_memory(PAD_MEMORY_LIMIT)
        pad = schema.padding(args.count, eos_token_id=args.eos_token_id, like=like, dims=dims or None)
    except SchemaError as exc:  # only `like` can break the schema here
        n = len(exc.violations)
        first = f"; first: {exc.violations[0]}" if exc.violations else ""
        raise CommandError(
            f"--like {args.like}: sample 0 breaks schema {schema.name!r} ({n} violation{'s' if n != 1 else ''}{first})"
        ) from None
    except PaddingMemoryError as exc:
        raise CommandError(_memory_refusal(exc)) from None
    except PaddingSizeError as exc:
        remedy = f" or --dim {exc.dim}=SIZE" if exc.dim is not None else ""
        raise CommandError(f"{exc.problem}\npass --like FILE (a real sample){remedy}") from None
    envelope = {
        "samples": [_plain(s, f"padding sample {i}") for i, s in enumerate(pad.samples)],
        "tags": [_plain(t, f"tags of padding sample {i}") for i, t in enumerate(pad.tags)],
    }
    _save(envelope, target, args.out)
    sizes = ", ".join(f"{k}={v}" for k, v in pad.dims.items())
    console.print(
        f"wrote {len(pad)} padding sample{'s' if len(pad) != 1 else ''} of schema {schema.name!r} to {args.out} "
        f"(uid {pad.uid}; {sizes})"
    )
    for line in spread_notes(schema, pad.dims, getattr(pad, "sources", {})):
        console.print(printable(line))
    return 0


#: Where a padding size came from (`PaddingBatch.sources`), in the command line's words.
_SIZE_SOURCES = {
    "dims": "--dim",
    "like": "the --like sample (its largest id + 1)",
    "padding default": "the schema's padding sizes",
    "schema": "the schema (a fixed dim)",
    "derived": "derived from other dims",
}


def spread_notes(schema: Schema, dims: Mapping[str, int], sources: Mapping[str, str]) -> list[str]:
    """One line per field padded with ``pad: {spread: DIM}``: the ids it spread over, and where that count came from.

    A count read from the model config names its key (``config: num_experts``).
    """
    out = []
    for f in schema.fields.values():
        over = f.pad.over if f.pad.rule == SPREAD else None
        if over is None or over not in dims:
            continue
        d = schema.dims.get(over)
        source = sources.get(over, "")
        if source == "config" or (isinstance(d, FixedDim) and d.source.startswith("config")):
            words = f"the model config ({d.source})" if isinstance(d, FixedDim) and d.source else "the model config"
        else:
            words = _SIZE_SOURCES.get(source, source or "unknown")
        out.append(f"{f.name}: padding ids spread over {over}={dims[over]} (from {words})")
    return out


#: The most memory ``pad`` lets its samples take. A batch needs fewer padding samples than
#: its required multiple (hundreds), so more is a typo in --count or --dim; it would
#: otherwise end in the kernel's out-of-memory killer, with no message at all.
PAD_MEMORY_LIMIT = 2 * 2**30


def _memory_refusal(exc: PaddingMemoryError) -> str:
    """The padding's refusal in the command line's words (its flags, its own limit), from the error's fields."""
    bound = (
        f"more than this machine has ({format_bytes(exc.limit)})"
        if exc.machine
        else f"pad writes at most {format_bytes(exc.limit)}"
    )
    return (
        f"--count {exc.count}: {exc.estimate}; {bound}\n"
        "lower --count or the --dim sizes (a batch needs fewer padding samples than its required multiple; "
        "see `trajschema plan`)"
    )


def padding_bytes(
    schema: Schema, like: Mapping[str, Any] | None, dims: Mapping[str, int]
) -> tuple[int, dict[str, int]]:
    """The tensor bytes of one padding sample, and every dim size padding would use; nothing is allocated.

    What `trajschema.padding.resolve_padding` finds for one sample, which is what
    `Schema.padding` builds: it raises as padding does for sizes it cannot resolve.
    """
    sizes = resolve_padding(schema._compiled(), 1, like=like, dims=dims or None)
    return sizes.sample_bytes, dict(sizes.dims)


def _dims_for(schema: Schema, settings: list[tuple[str, int]]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for name, size in settings:
        if name not in schema.dims:
            close = difflib.get_close_matches(name, list(schema.dims), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise CommandError(
                f"--dim {name}={size}: schema {schema.name!r} has no dim {name!r}{hint} "
                f"(its dims: {', '.join(schema.dims)})"
            )
        if name in dims and dims[name] != size:
            raise CommandError(f"--dim {name} is given twice, as {dims[name]} and {size}")
        dims[name] = size
    return dims


def _plain(value: Any, where: str) -> Any:
    """``value`` as plain tensors, str, int, float, bool, None, lists and dicts (what weights_only loads)."""
    if isinstance(value, torch.Tensor):
        if value.is_nested or value.layout != torch.strided or value.device.type == "meta":
            raise CommandError(f"{where}: a {value.layout} tensor on {value.device} cannot be written as plain data")
        return value.detach().as_subclass(torch.Tensor).cpu().clone()
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if type(k) not in (str, int):
                raise CommandError(f"{where}: key {k!r} of a mapping is not a str or an int")
            out[k] = _plain(v, f"{where}, {k!r}")
        return out
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    raise CommandError(f"{where}: a {type(value).__name__} cannot be written as plain data")


def _out_target(out: str) -> Path:
    """The file ``--out`` names, checked before any work: through a symlink, never a device or a FIFO.

    The samples are written beside the target and renamed over it; renaming over
    ``/dev/null`` would replace the device itself (as root), and over a symlink would
    replace the link rather than write its target.
    """
    if not out.strip():
        raise CommandError("--out: an empty path; name the file to write")
    path = Path(out)
    if path.is_symlink():
        path = path.resolve()
    if path.is_dir():
        raise CommandError(f"--out {out}: is a directory")
    if path.exists() and not path.is_file():
        raise CommandError(f"--out {out}: is not a regular file (a device, FIFO or socket); pad writes a file")
    if not path.parent.is_dir():
        raise CommandError(f"--out {out}: directory {str(path.parent)!r} does not exist")
    return path


def _save(obj: Any, path: Path, out: str) -> None:
    # Write beside the target and rename, so a failure never leaves a half-written file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        raise CommandError(f"--out {out}: cannot write ({_reason(exc)})") from None
    finally:
        tmp.unlink(missing_ok=True)
