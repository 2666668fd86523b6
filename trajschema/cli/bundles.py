"""Bundles on the command line: which argument names one, where it came from, and ``show BUNDLE``.

A bundle is the directory [`record_batch`][trajschema.record_batch] writes (its
``manifest.json`` beside the payloads). ``check`` checks one against its recorded schema and
layout, or against ``--schema`` after the compatibility of the recorded schema with it
(`bundle_facts`, through the ``diff`` report of `trajschema.cli.schemas`); ``show`` summarizes
one (`show_bundle_report`): where it came from, its rows, each key of its batch, the payloads
and its violations by code.

Telling a bundle from a schema name or a sample file reads no file and imports no torch,
so ``show NAME`` stays as quick as it was.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trajschema.cli.args import CommandError, printable, write
from trajschema.cli.compat import compatibility_report
from trajschema.cli.output import STYLES, emit_json, fold, print_table, table, terminal_width
from trajschema.cli.read import STDIN

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from trajschema.bundle import Bundle
    from trajschema.core import Violation
    from trajschema.schema import Schema

__all__ = [
    "MODE",
    "BundleFacts",
    "KeyRow",
    "bundle_dir",
    "bundle_facts",
    "bundle_rows",
    "key_rows",
    "open_bundle",
    "provenance",
    "run_show_bundle",
    "show_bundle_report",
]

#: The compatibility ``check --schema`` reports of a bundle: can the given schema read what was recorded?
MODE = "backward"
#: The manifest's words on where a bundle came from, as ``check --json``'s ``bundle`` object names them.
_PROVENANCE = ("step", "trainer", "trainer_version", "trajschema", "created", "reason")


def bundle_dir(name: str) -> Path | None:
    """The bundle directory ``name`` names (any directory), or ``None``: a file, ``-`` or nothing there.

    A directory is a bundle's whether or not it holds a manifest: loading it then says no
    bundle is there, which is what a user naming a directory needs to hear. Nothing is
    read and nothing heavy imported: ``show NAME`` asks this of every schema name.
    """
    if name == STDIN or not name.strip():
        return None
    return Path(name) if os.path.isdir(name) else None  # False, not an error, for a name too long for a path


def open_bundle(where: Path) -> Bundle:
    """[`load_bundle`][trajschema.load_bundle] of ``where``, verified, without torch's note on
    ``is_fx_tracing`` on stderr (decoding builds jagged tensors; a command's stderr is its errors).

    Raises:
        BundleError: as `load_bundle` (no bundle there, a payload not the one recorded, a newer format).
    """
    from trajschema.bundle import load_bundle
    from trajschema.check import without_fx_note

    with without_fx_note():
        return load_bundle(where)


def provenance(manifest: Mapping[str, Any]) -> str:
    """Where a bundle came from, in one line: ``step 12, trainer verl 0.5.0, recorded by trajschema
    0.1.0 at 2026-01-02T03:04:05+00:00, reason: every 5 steps`` (what the manifest does not say is left out)."""
    step, trainer, version, reason = (manifest.get(k) for k in ("step", "trainer", "trainer_version", "reason"))
    parts = [] if step is None else [f"step {step}"]
    who = " ".join(str(v) for v in (trainer, version) if v is not None)
    if who:
        parts.append(f"trainer {who}")
    created = manifest.get("created")
    parts.append(f"recorded by trajschema {manifest.get('trajschema')}" + (f" at {created}" if created else ""))
    if reason:
        parts.append(f"reason: {reason}")
    return printable(", ".join(parts))


@dataclasses.dataclass(frozen=True)
class BundleFacts:
    """What ``check`` says of a bundle beside its violations.

    Attributes:
        record: ``check --json``'s ``bundle`` object: path, the manifest's provenance, the
            recorded schema's and layout's names.
        provenance: the line `provenance` makes of the manifest.
        changes: with ``--schema``, the changes from the recorded schema to it (`MODE`).
        compatibility: with ``--schema``, ``diff --json``'s object of them; else ``None``.
    """

    record: dict[str, Any]
    provenance: str
    changes: tuple[Any, ...] = ()
    compatibility: dict[str, Any] | None = None


def bundle_facts(bundle: Bundle, schema: Schema | None) -> BundleFacts:
    """The `BundleFacts` of ``bundle`` checked against ``schema`` (``None``: its recorded one)."""
    manifest = bundle.manifest
    record = {"path": str(bundle.path), **{k: manifest.get(k) for k in _PROVENANCE}}
    record |= {"schema": bundle.schema.name, "layout": None if bundle.layout is None else bundle.layout.name}
    if schema is None:
        return BundleFacts(record, provenance(manifest))
    changes, report = compatibility_report(bundle.schema, schema, MODE)
    return BundleFacts(record, provenance(manifest), tuple(changes), report)


def bundle_rows(bundle: Bundle) -> int | None:
    """The rows (samples) of the bundle's batch (`trajschema.Bundle.rows`: counted in the batch)."""
    return bundle.rows


# -- the keys of a batch --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class KeyRow:
    """One key of a bundle's batch as ``show`` lists it.

    ``kind`` is ``tensor`` (``shape`` is its whole shape: ``(B, ...)`` for a column),
    ``jagged`` or ``nested`` (a nested tensor) or ``tensors`` (one tensor per sample), whose
    ``shape`` is each dim's smallest..largest size over the samples; ``ndarray`` (a numeric
    numpy array); ``values`` (one Python value per sample, ``dtype`` their types, ``shape``
    their count); or ``value`` (one value for the batch). ``bytes`` counts tensor and array
    elements, ``None`` for Python values.
    """

    name: str
    kind: str
    dtype: str
    shape: str
    bytes: int | None


def key_rows(bundle: Bundle) -> list[KeyRow]:
    """A `KeyRow` for each key of the bundle's batch, in the batch's order (metadata as ``metadata.<key>``)."""
    from trajschema.check import batch_view, is_tensordict
    from trajschema.dense import read_dense

    batch = bundle.batch
    try:
        if bundle.layout is None and isinstance(batch, (list, tuple)):
            return _values_rows(list(batch_view(batch).samples or []))
        if bundle.layout is None and is_tensordict(batch) and not batch_view(batch).is_table:  # a lazy stack
            return _values_rows(batch_view(batch).rows())
        view, _ = read_dense(batch)
    except (TypeError, ValueError):  # neither samples nor columns: the batch is one value
        return [_column_row("<batch>", batch)]
    rows = [_column_row(k, v) for k, v in view.columns.items()]
    return rows + [_column_row(f"metadata.{k}", v) for k, v in view.metadata.items()]


def _values_rows(samples: Sequence[Mapping[str, Any]]) -> list[KeyRow]:
    """A `KeyRow` for each field of ``samples``, in order of first appearance, its values gathered across them."""
    names = dict.fromkeys(k for s in samples for k in s)
    return [_values_row(k, [s[k] for s in samples if k in s]) for k in names]


def _column_row(name: str, value: Any) -> KeyRow:
    import torch

    if isinstance(value, torch.Tensor) and value.is_nested:
        from trajschema.check import column_shapes

        kind = "jagged" if value.layout == torch.jagged else "nested"
        sizes = column_shapes(value, int(value.size(0)))
        shapes = [] if sizes is None else [tuple(s) for s in sizes.tolist()]
        parts = [value.values()] if value.layout == torch.jagged else list(value.unbind(0))
        return KeyRow(name, kind, _dtype(value.dtype), _span(shapes), sum(_bytes(p) for p in parts))
    if isinstance(value, torch.Tensor):
        return KeyRow(name, "tensor", _dtype(value.dtype), _dims(value.shape), _bytes(value))
    if _is_array(value) and value.dtype.kind in "biuf":
        return KeyRow(name, "ndarray", str(value.dtype), _dims(value.shape), int(value.nbytes))
    values = _per_row(value)
    if values is None:
        return KeyRow(name, "value", _type(value), "-", None)
    return _values_row(name, values)


def _per_row(value: Any) -> list[Any] | None:
    """``value`` as one value per row (a list, a non-numeric array, a NonTensorStack, a TensorList), or ``None``."""
    kind = type(value).__name__
    if kind == "NonTensorStack":
        return list(value.tolist())
    if isinstance(value, (list, tuple)):
        return list(value)
    if _is_array(value) and value.ndim:
        return list(value)
    tensors = getattr(value, "tensors", None)  # SkyRL's TensorList
    return list(tensors) if isinstance(tensors, list) else None


def _values_row(name: str, values: Sequence[Any]) -> KeyRow:
    import torch

    present = [v for v in values if v is not None]
    if present and all(isinstance(v, torch.Tensor) and not v.is_nested for v in present):
        dtypes = ", ".join(sorted({_dtype(v.dtype) for v in present}))
        return KeyRow(name, "tensors", dtypes, _span([tuple(v.shape) for v in present]), sum(map(_bytes, present)))
    types = ", ".join(sorted({_type(v) for v in present})) or "-"
    return KeyRow(name, "values", types, f"[{len(values)}]", None)


def _span(shapes: Sequence[tuple[int, ...]]) -> str:
    """``[3..9, 4]``: each dim's smallest..largest size over ``shapes`` (one number when all agree)."""
    if not shapes:
        return "-"
    ranks = sorted({len(s) for s in shapes})
    if len(ranks) > 1:
        return f"rank {ranks[0]}..{ranks[-1]}"
    cells = []
    for d in range(ranks[0]):
        lo, hi = min(s[d] for s in shapes), max(s[d] for s in shapes)
        cells.append(str(lo) if lo == hi else f"{lo}..{hi}")
    return "[" + ", ".join(cells) + "]"


def _dims(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(s)) for s in shape) + "]"


def _bytes(t: Any) -> int:
    return int(t.numel()) * int(t.element_size())


def _dtype(dtype: Any) -> str:
    from trajschema.core import dtype_name

    return dtype_name(dtype)


def _is_array(value: Any) -> bool:
    return type(value).__module__ == "numpy" and type(value).__name__ == "ndarray"


def _type(value: Any) -> str:
    if type(value).__name__ == "NonTensorData":
        value = value.data
    return "None" if value is None else type(value).__name__


# -- show BUNDLE ----------------------------------------------------------------------------


def show_bundle_report(bundle: Bundle) -> dict[str, Any]:
    """What ``show BUNDLE --json`` prints (after ``version`` and ``command``) and the summary is made of."""
    manifest = bundle.manifest
    payloads = manifest.get("payloads")
    rows = bundle_rows(bundle)
    report: dict[str, Any] = {"bundle": str(bundle.path), "format": manifest.get("format")}
    report |= {"format_version": manifest.get("version"), **{k: manifest.get(k) for k in _PROVENANCE}}
    report |= {
        "schema": bundle.schema.name,
        "layout": None if bundle.layout is None else bundle.layout.name,
        "rows": rows,
        "padding_rows": manifest.get("padding_rows"),
        "keys": [dataclasses.asdict(k) for k in key_rows(bundle)],
        "payloads": [
            {"name": name, "bytes": entry.get("bytes"), "sha256": entry.get("sha256")}
            for name, entry in (payloads.items() if isinstance(payloads, Mapping) else ())
            if isinstance(entry, Mapping)
        ],
        "depth": "values",
    }
    return report | _violations_report(bundle, rows)


def _violations_report(bundle: Bundle, rows: int | None) -> dict[str, Any]:
    """The batch against its recorded schema: ``valid``, ``violations`` (total, invalid_rows,
    by_code) and ``check_error`` (why the schema cannot read the batch at all, or ``None``)."""
    try:
        found: list[Violation] = bundle.violations(depth="values")
    except (TypeError, ValueError, LookupError) as exc:  # a batch its schema cannot read at all
        return {"valid": None, "violations": None, "check_error": " ".join(str(exc).split()) or type(exc).__name__}
    counts = Counter(v.code for v in found)
    summary = {
        "total": len(found),
        "invalid_rows": len({v.sample for v in found if v.sample is not None}),
        "by_code": dict(sorted(counts.items(), key=lambda item: (-item[1], item[0]))),
    }
    empty = rows == 0 and not found  # nothing was checked: no verdict, as check gives none
    return {"valid": None if empty else not found, "violations": summary, "check_error": None}


def run_show_bundle(where: Path, args: argparse.Namespace, console: Console) -> int:
    """``show BUNDLE``: the summary, or with ``--json`` its report; 0 whatever the violations (``check`` judges)."""
    if args.config is not None:
        raise CommandError(
            "--config pins the dims of a schema named on the command line; a bundle is shown with the schema "
            "recorded in it (check it against another with `trajschema check BUNDLE --schema NAME`)"
        )
    report = show_bundle_report(open_bundle(where))
    if args.json:
        emit_json("show", report)
        return 0
    _print_summary(console, report)
    return 0


def _print_summary(console: Console, r: dict[str, Any]) -> None:
    width = terminal_width(console)
    lines = [f"bundle {r['bundle']}", *fold(provenance(r), width, indent=2)]
    padding = "not recorded" if r["padding_rows"] is None else str(r["padding_rows"])
    for label, value in (
        ("schema: ", f"{r['schema']} (recorded)"),
        ("layout: ", "none (a jagged batch)" if r["layout"] is None else f"{r['layout']} (recorded)"),
        ("rows: ", f"{'unknown' if r['rows'] is None else r['rows']} (padding rows: {padding})"),
        ("format: ", f"{r['format']} version {r['format_version']}"),
    ):
        lines += fold(printable(str(value)), width, indent=2, first=label)
    write("\n".join(printable(line) for line in lines))
    keys = table("keys", ["name", "kind", "dtype", "shape", "bytes"], right=("bytes",))
    for k in r["keys"]:
        keys.add_row(k["name"], k["kind"], k["dtype"], k["shape"], _size(k["bytes"]))
    payloads = table("payloads", ["name", "bytes", "sha256"], right=("bytes",))
    for p in r["payloads"]:
        payloads.add_row(str(p["name"]), _size(p["bytes"]), str(p["sha256"]))
    by_code = (r["violations"] or {}).get("by_code", {})
    codes = table("violations", ["code", "count"], right=("count",))
    for code, count in by_code.items():
        codes.add_row(code, str(count))
    for part in (keys, payloads, *([codes] if by_code else [])):
        write("")
        print_table(console, part)
    write("")
    console.print(_verdict(r))


def _verdict(r: dict[str, Any]) -> Text:
    from rich.text import Text

    schema = f"the recorded schema {r['schema']!r}" + (f" in layout {r['layout']!r}" if r["layout"] else "")
    if r["check_error"] is not None:
        return Text.assemble(("unchecked", STYLES["unusable"]), f": {schema} cannot read the batch: {r['check_error']}")
    found, rows = r["violations"], r["rows"]
    if rows == 0 and not found["total"]:
        return Text.assemble(("empty", STYLES["unusable"]), ": the batch holds no rows; there is nothing to check")
    if not found["total"]:
        return Text.assemble(("valid", STYLES["valid"]), f": all {rows} rows follow {schema} at depth values")
    n = found["total"]
    rest = (
        f": {n} violation{'s' if n != 1 else ''} in {found['invalid_rows']} of {rows} rows of {schema} "
        f"at depth values; `trajschema check {r['bundle']}` lists them"
    )
    return Text.assemble(("invalid", STYLES["invalid"]), rest)


def _size(n: Any) -> str:
    """``812 B``, ``3.1 KiB``, ``12.0 MiB``; ``-`` for no size."""
    if not isinstance(n, int) or isinstance(n, bool):
        return "-"
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"
