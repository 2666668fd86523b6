"""``trajschema pad``: write padding samples derived from a schema."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajschema.cli.args import FORMATTER, CommandError, add_shared, dim_setting, printable
from trajschema.cli.output import emit_json
from trajschema.cli.read import load_samples, reason
from trajschema.core import did_you_mean

if TYPE_CHECKING:
    from rich.console import Console

    from trajschema.padding import PaddingMemoryError
    from trajschema.schema import Schema

__all__ = ["PAD_MEMORY_LIMIT", "add_pad", "cli_words", "padding_bytes", "run_pad", "spread_notes"]


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
            '--json prints one object: version (1), command ("pad"), file (the --out written),\n'
            "schema, count, uid (shared by every padding sample), dims (the size of each dim in\n"
            "the padding) and notes (one line per field padded with spread ids, as printed).\n\n"
            "Example:\n"
            "  trajschema pad vlm_mrope_moe --count 7 --eos-token-id 2 --like rollout.pt --out pad.pt\n"
            "  trajschema pad text --count 2 --eos-token-id 2 --dim prompt=255 --dim response=1 --out pad.pt\n"
            "  trajschema pad moe_routed --count 2 --eos-token-id 2 --config ~/models/Qwen3-30B-A3B --out pad.pt"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("name", metavar="NAME", help="a schema name or a path to a .yaml file")
    add_shared(p, "count", required=True)
    add_shared(p, "eos_token_id", required=True)
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
    p.add_argument("--json", action="store_true", help="print what was written as one JSON object")
    p.set_defaults(run=run_pad)


def _config_schema(schema: Schema, config: str | None, settings: list[tuple[str, int]]) -> Schema:
    """``schema`` with the dims ``--config`` gives fixed; a ``--dim`` of another size for one of them is refused."""
    if config is None:
        return schema
    from trajschema.load import config_sizes, read_model_config

    sizes = config_sizes(schema, read_model_config(config))
    for name, size in settings:
        if name in sizes and sizes[name][0] != size:
            given, source = sizes[name]
            raise CommandError(f"--dim {name}={size}: --config {config} gives {name} = {given} ({source})")
    return schema.with_dims({n: v for n, (v, _) in sizes.items()}, sources={n: src for n, (_, src) in sizes.items()})


def run_pad(args: argparse.Namespace, console: Console) -> int:
    from trajschema.core import SchemaError
    from trajschema.load import load_schema
    from trajschema.padding import PaddingMemoryError, PaddingSizeError, resolve_padding

    schema = _config_schema(load_schema(args.name), args.config, args.dim)
    target = _out_target(args.out)
    dims = _dims_for(schema, args.dim)
    like = load_samples(args.like, trust=args.trust).first() if args.like is not None else None
    try:
        # The sizes first, bounded by what pad writes; then the padding, which checks its own bound.
        resolve_padding(schema.plan, args.count, like=like, dims=dims or None).check_memory(PAD_MEMORY_LIMIT)
        pad = schema.padding(args.count, eos_token_id=args.eos_token_id, like=like, dims=dims or None)
    except SchemaError as exc:  # only `like` can break the schema here
        n = len(exc.violations)
        first = f"; first: {cli_words(str(exc.violations[0]))}" if exc.violations else ""
        raise CommandError(
            f"--like {args.like}: sample 0 breaks schema {schema.name!r} ({n} violation{'s' if n != 1 else ''}{first})"
        ) from None
    except PaddingMemoryError as exc:
        raise CommandError(_memory_refusal(exc)) from None
    except PaddingSizeError as exc:
        remedy = f" or --dim {exc.dim}=SIZE" if exc.dim is not None else ""
        raise CommandError(f"{cli_words(exc.problem)}\npass --like FILE (a real sample){remedy}") from None
    except (ValueError, TypeError) as exc:  # any other refusal of the sizes, the fills or the --like sample
        raise CommandError(cli_words(str(exc))) from None
    envelope = {
        "samples": [_plain(s, f"padding sample {i}") for i, s in enumerate(pad.samples)],
        "tags": [_plain(t, f"tags of padding sample {i}") for i, t in enumerate(pad.tags)],
    }
    _save(envelope, target, args.out)
    notes = spread_notes(schema, pad.dims, getattr(pad, "sources", {}))
    if args.json:
        report = {"file": args.out, "schema": schema.name, "count": len(pad), "uid": pad.uid}
        emit_json("pad", {**report, "dims": dict(pad.dims), "notes": notes})
        return 0
    sizes = ", ".join(f"{k}={v}" for k, v in pad.dims.items())
    console.print(
        printable(
            f"wrote {len(pad)} padding sample{'s' if len(pad) != 1 else ''} of schema {schema.name!r} to {args.out} "
            f"(uid {pad.uid}; {sizes})"
        )
    )
    for line in notes:
        console.print(printable(line))
    return 0


def _derived(m: re.Match[str]) -> str:
    names = [n.strip() for n in m[2].split(",")]
    return f"is derived ({m[1]}); set " + " and ".join(f"--dim {n}=SIZE" for n in names) + " instead"


#: How the padding's messages name its Python arguments, and what the command line calls them: the
#: most specific first, so that ``padding size prompt=0 (from dims=)`` reads ``--dim prompt=0``.
_CLI_WORDS: tuple[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]], ...] = tuple(
    (re.compile(pattern), words)
    for pattern, words in (
        (r"padding size ([^\s=]+)=(\d+) \(from dims=\)", r"--dim \1=\2"),
        (r"\bdims\[(['\"])(.+?)\1\]=(\d+)", r"--dim \2=\3"),
        (r"\bdims\[(['\"])(.+?)\1\]", r"--dim \2"),
        (r"is derived \((.+?)\); set (.+?) instead", _derived),
        (r"\(from dims=\)", "(from --dim)"),
        (r"\bother dims=", "other --dim sizes"),
        (r"\beos_token_id=", "--eos-token-id "),
        (r"\bof like=", "of the --like sample"),
        (r"\bthe like= sample\b", "the --like sample"),
        (r"\blike= sample\b", "--like sample"),
        (r"\bdims=", "--dim"),
        (r"\blike=", "--like"),
    )
)


def cli_words(message: str) -> str:
    """A message of the padding, naming its arguments as the command line spells them.

    `Schema.padding` words its errors for a Python caller (``dims=``, ``like=``,
    ``eos_token_id=``); ``pad`` passes the flags ``--dim``, ``--like`` and
    ``--eos-token-id`` in their place, so every refusal it reports names the flag typed.

    Examples:
        >>> cli_words("padding size prompt=0 (from dims=) breaks the dim's bounds (>= 1)")
        "--dim prompt=0 breaks the dim's bounds (>= 1)"
        >>> cli_words("padding field 'tiny' with eos_token_id=300 does not fit dtype torch.int8")
        "padding field 'tiny' with --eos-token-id 300 does not fit dtype torch.int8"
    """
    for pattern, words in _CLI_WORDS:
        message = pattern.sub(words, message)
    return message


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
    from trajschema.core import SPREAD, FixedDim

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
    from trajschema.padding import format_bytes

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
    from trajschema.padding import resolve_padding

    sizes = resolve_padding(schema.plan, 1, like=like, dims=dims or None)
    return sizes.sample_bytes, dict(sizes.dims)


def _dims_for(schema: Schema, settings: list[tuple[str, int]]) -> dict[str, int]:
    dims: dict[str, int] = {}
    for name, size in settings:
        if name not in schema.dims:
            hint = did_you_mean(name, schema.dims)
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
    import torch

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
    import torch

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        torch.save(obj, tmp)
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        raise CommandError(f"--out {out}: cannot write ({reason(exc)})") from None
    finally:
        tmp.unlink(missing_ok=True)
