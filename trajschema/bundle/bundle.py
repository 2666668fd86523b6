"""A bundle read back: [`load_bundle`][trajschema.load_bundle] and the [`Bundle`][trajschema.Bundle] it answers."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from trajschema.core import BundleError, BundleIntegrityError, Depth, Layout, PackedLayout, Violation
from trajschema.schema import Schema

__all__ = ["Bundle", "load_bundle"]


@dataclasses.dataclass(frozen=True)
class Bundle:
    """One recorded batch, as [`load_bundle`][trajschema.load_bundle] reads it.

    Attributes:
        path: the bundle's directory.
        batch: the batch, as it was recorded (the same containers, every tensor bit-exact).
            A verl ``DataProto`` or SkyRL ``TrainingInputBatch`` is read back as its class
            where its trainer imports, else as the same parts (a
            [`RecordedDataProto`][trajschema.RecordedDataProto], a `DenseBatch`), which every check reads alike.
        schema: the schema recorded with it (rebuilt from its YAML, ancestors included).
        layout: its layout (``None``: a jagged batch).
        tags: the tag dicts recorded with it, or ``None``.
        extras: other data recorded beside the batch, by name (empty when none).
        manifest: ``manifest.json`` as read (``step``, ``trainer``, ``trainer_version``,
            ``trajschema``, ``created``, ``reason``, ``rows``, ``padding_rows``, ...).
    """

    path: Path
    batch: Any
    schema: Schema
    layout: Layout | PackedLayout | None
    tags: list[dict[str, Any]] | None
    manifest: Mapping[str, Any]
    extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def step(self) -> int | None:
        return self.manifest.get("step")

    @property
    def trainer(self) -> str | None:
        return self.manifest.get("trainer")

    @property
    def rows(self) -> int | None:
        """The batch's rows (samples), counted in the batch as read back (the manifest's
        ``rows`` is not under its checksums); ``None`` when the batch does not say."""
        from trajschema.bundle.store import count_rows

        return count_rows(self.batch, self.layout)

    def violations(self, *, schema: Schema | str | None = None, depth: Depth = "values") -> list[Violation]:
        """Every violation of the batch against its recorded schema (or ``schema``) in its layout."""
        from trajschema.load import resolve_schema

        chosen = self.schema if schema is None else resolve_schema(schema)
        return chosen.batch_violations(self.batch, tags=self.tags, depth=depth, layout=self.layout)

    def validate(self, *, schema: Schema | str | None = None, depth: Depth = "values") -> None:
        """Raise [`SchemaError`][trajschema.SchemaError] with every violation, as `violations` finds them."""
        from trajschema.core import SchemaError
        from trajschema.load import resolve_schema

        chosen = self.schema if schema is None else resolve_schema(schema)
        found = self.violations(schema=chosen, depth=depth)
        if found:
            raise SchemaError(found, schema_name=chosen.name)


def load_bundle(path: str | os.PathLike[str], *, verify: bool = True) -> Bundle:
    """Read the bundle at ``path`` (a directory [`record_batch`][trajschema.record_batch] wrote).

    Examples:
        >>> b = ts.load_bundle("step-12")  # doctest: +SKIP
        >>> b.step, b.schema.name, b.violations()  # doctest: +SKIP
        (12, 'text', [])

    Args:
        path: the bundle's directory.
        verify: check every payload's SHA-256 against the manifest first (default).

    Raises:
        BundleIntegrityError: a payload, the schema or the layout is not the one recorded
            (its ``payload`` names which).
        BundleVersionError: the bundle's format is newer than this trajschema reads.
        BundleError: no bundle at ``path``, or a malformed one, naming what.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from trajschema.bundle.codec import decode
    from trajschema.bundle.store import BATCH, MANIFEST, TENSORS, check_version
    from trajschema.bundle.store import verify as verify_payloads

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a bundle's directory (a str or a path), found {type(path).__name__} {path!r}")
    where = Path(os.fspath(path))
    manifest = _json(where / MANIFEST, where, "manifest")
    if not isinstance(manifest, Mapping):
        raise BundleError(f"{where}: the manifest is no JSON object")
    check_version(manifest, str(where))
    if verify:
        verify_payloads(where, manifest)
    try:
        tensors = load_file(str(where / TENSORS))
    except (SafetensorError, OSError) as exc:
        raise BundleIntegrityError(f"{where}: payload {TENSORS} cannot be read ({exc})", TENSORS) from None
    tree = decode(tensors, _json(where / BATCH, where, BATCH))
    if not isinstance(tree, dict) or set(tree) != {"batch", "tags", "extras"}:
        raise BundleError(f"{where}: {BATCH} holds no batch, tags and extras")
    return Bundle(
        path=where,
        batch=tree["batch"],
        schema=_schema(manifest, where),
        layout=_layout(manifest, where),
        tags=tree["tags"],
        manifest=manifest,
        extras=tree["extras"],
    )


def _json(file: Path, where: Path, what: str) -> Any:
    if not file.is_file():
        if what == "manifest":
            raise BundleError(f"{where}: no bundle here (no {file.name})")
        raise BundleIntegrityError(f"{where}: payload {file.name} is missing", file.name)
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        if what == "manifest":
            raise BundleError(f"{where}: the manifest is not JSON ({exc})") from None
        raise BundleIntegrityError(f"{where}: payload {file.name} is not JSON ({exc})", file.name) from None


def _schema(manifest: Mapping[str, Any], where: Path) -> Schema:
    """The recorded schema, compiled from its YAML with its ancestors' beside it (no search path read)."""
    from trajschema.core import SchemaDefinitionError
    from trajschema.load import schema_from_dict

    entry = manifest.get("schema")
    texts = entry.get("yaml") if isinstance(entry, Mapping) else None
    name = entry.get("name") if isinstance(entry, Mapping) else None
    if not isinstance(name, str) or not isinstance(texts, Mapping) or name not in texts:
        raise BundleError(f"{where}: the manifest holds no schema YAML for {name!r}")
    for parent, text in texts.items():
        if not isinstance(parent, str) or not _SCHEMA_NAME.fullmatch(parent) or not isinstance(text, str):
            raise BundleError(
                f"{where}: the manifest's schemas must be YAML texts under schema names (identifiers), "
                f"found {type(text).__name__} under {parent!r}"
            )
    with tempfile.TemporaryDirectory(prefix="trajschema-bundle-") as tmp:
        for parent, text in texts.items():
            if parent != name:
                Path(tmp, f"{parent}.yaml").write_text(text, encoding="utf-8")
        try:
            return schema_from_dict(yaml.safe_load(texts[name]), base_dir=tmp)
        except (SchemaDefinitionError, yaml.YAMLError, RecursionError, TypeError, ValueError) as exc:
            raise BundleError(f"{where}: the recorded schema {name!r} does not compile: {exc}") from None


#: What a recorded schema (or ancestor) may be named: a file name of no folder.
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,199}")


def _layout(manifest: Mapping[str, Any], where: Path) -> Layout | PackedLayout | None:
    from trajschema.core import LayoutDefinitionError
    from trajschema.files import layout_from_dump

    entry = manifest.get("layout")
    if entry is None:
        return None
    if not isinstance(entry, Mapping) or not isinstance(entry.get("mapping"), Mapping):
        raise BundleError(f"{where}: the manifest's layout holds no mapping")
    try:
        return layout_from_dump(entry["mapping"], source=f"{where} (recorded layout)")
    except LayoutDefinitionError as exc:
        raise BundleError(f"{where}: the recorded layout does not read: {exc}") from None
