"""Bundles on disk: one recorded batch with everything needed to check it again anywhere.

A bundle is one directory (so any ``safetensors`` or JSON tool reads its parts, each part
is verified on its own, and it is written whole or not at all: into a temporary sibling,
then renamed):

- ``tensors.safetensors``: every tensor of the batch (`trajschema.bundle.codec`), loaded
  without pickle;
- ``batch.json``: the batch's structure and its non-tensor values, and the tags;
- ``manifest.json``: the format and its version, the schema's YAML (with each ancestor's,
  so it reloads on a machine without that family) and the layout's mapping inline with
  the SHA-256 of each, the step, the trainer and its version, trajschema's version, the
  time, why it was recorded, and the size and SHA-256 of the two payloads.

[`load_bundle`][trajschema.load_bundle] refuses a payload whose bytes are not the ones
recorded ([`BundleIntegrityError`][trajschema.BundleIntegrityError], naming it) and a
format newer than it reads ([`BundleVersionError`][trajschema.BundleVersionError]).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trajschema.core import VERSION, BundleError, BundleIntegrityError, BundleVersionError, Layout, PackedLayout
from trajschema.files import as_any_layout, layout_to_dict
from trajschema.load import resolve_schema
from trajschema.schema import Schema

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "PAYLOADS", "record_batch", "write_bundle"]

#: What ``manifest.json``'s ``format`` says; ``version`` the format's version this trajschema writes and reads.
FORMAT, FORMAT_VERSION = "trajschema-bundle", 1
MANIFEST = "manifest.json"
TENSORS, BATCH = "tensors.safetensors", "batch.json"
PAYLOADS = (TENSORS, BATCH)


def record_batch(
    batch: Any,
    path: str | os.PathLike[str],
    *,
    schema: Schema | str,
    layout: Layout | PackedLayout | str | None = None,
    tags: Sequence[Mapping[str, Any]] | None = None,
    step: int | None = None,
    trainer: str | None = None,
    trainer_version: str | None = None,
    reason: str | None = None,
    extras: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``batch`` as a bundle at ``path`` (a directory), with the schema and layout it is checked against.

    Examples:
        >>> batch = ts.testing.tq_batch(ts.load_schema("text"), 4)  # doctest: +SKIP
        >>> ts.record_batch(batch, "step-12", schema="text", step=12)  # doctest: +SKIP
        PosixPath('step-12')

    Args:
        batch: the batch as the trainer holds it: a list of samples or a jagged TensorDict
            (no layout), a dense mapping, TensorDict, verl ``DataProto`` or SkyRL
            ``TrainingInputBatch`` (a dense layout), a packed TensorDict (a packed layout).
        path: the bundle's directory; it must not exist (unless ``overwrite``).
        schema: the schema (or its name) the batch is checked against.
        layout: the batch's layout (or its name); ``None`` for a jagged batch.
        tags: one tag dict per sample (TransferQueue's), JSON values only.
        step: the training step (an int >= 0), for the manifest.
        trainer: the trainer's name, for the manifest.
        trainer_version: the trainer's version, for the manifest.
        reason: why it was recorded, for the manifest.
        extras: other data of the step kept beside the batch, by name (OpenRLHF's raw
            experiences beside their samples), recorded as the batch is; not checked.
        overwrite: replace a bundle already at ``path``.

    Raises:
        BundleError: ``path`` is taken, or the batch holds a value no bundle holds (a meta
            or sparse tensor, an object that is not data), naming its path in the batch.
        TypeError / ValueError: a bad argument; TypeError also for a batch of a form its
            layout cannot read (a list of samples given a dense layout).
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a directory path (a str or a path), found {type(path).__name__} {path!r}")
    chosen = resolve_schema(schema)
    fitted = None if layout is None else as_any_layout(layout)
    _readable(batch, fitted)
    meta = _provenance(step, trainer, trainer_version, reason)
    if extras is not None and not isinstance(extras, Mapping):
        raise TypeError(f"extras must be a mapping of name to data or None, found {type(extras).__name__}")
    return write_bundle(
        batch, Path(os.fspath(path)), chosen, fitted, tags, meta, extras=dict(extras or {}), overwrite=overwrite
    )


def _readable(batch: Any, layout: Layout | PackedLayout | None) -> None:
    """Refuse, before anything is written, a batch of a form its layout cannot read (a list of
    samples given a dense layout): every check of the bundle would raise. Its values are not
    checked: a batch that breaks its schema is what a bundle is for."""
    if layout is None:
        return
    from trajschema.dense import read_dense
    from trajschema.packed import read_packed

    try:
        read_dense(batch) if isinstance(layout, Layout) else read_packed(batch)
    except TypeError as exc:
        raise TypeError(f"batch: layout {layout.name!r} cannot read it: {exc}") from None


def _provenance(step: Any, trainer: Any, version: Any, reason: Any) -> dict[str, Any]:
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise TypeError(f"step must be an int >= 0 or None, found {type(step).__name__} {step!r}")
    for name, value in (("trainer", trainer), ("trainer_version", version), ("reason", reason)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str or None, found {type(value).__name__}")
    return {"step": step, "trainer": trainer, "trainer_version": version, "reason": reason}


def write_bundle(
    batch: Any,
    path: Path,
    schema: Schema,
    layout: Layout | PackedLayout | None,
    tags: Sequence[Mapping[str, Any]] | None,
    meta: Mapping[str, Any],
    *,
    extras: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """`record_batch` once its arguments are read: encode, write into a temporary sibling, rename."""
    from safetensors.torch import save_file

    from trajschema.bundle.codec import encode

    _check_target(path, overwrite)
    if tags is not None and (isinstance(tags, (str, bytes, Mapping)) or not isinstance(tags, Sequence)):
        raise TypeError(f"tags must be a sequence of tag dicts (one per sample) or None, found {type(tags).__name__}")
    tensors, tree = encode({"batch": batch, "tags": None if tags is None else list(tags), "extras": dict(extras or {})})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        work = path.parent / f".tsb-{uuid.uuid4().hex}"
        work.mkdir()  # not mkdtemp, whose 0700 would keep the bundle from anyone the umask shares with
    except OSError as exc:
        raise BundleError(f"{path}: its folder cannot be made or written to ({exc.strerror or exc})") from None
    try:
        save_file(tensors, str(work / TENSORS))
        _write_json(work / BATCH, tree)
        os.chmod(work / TENSORS, (work / BATCH).stat().st_mode & 0o777)  # safetensors writes 0600
        manifest = _manifest(work, schema, layout, tags, batch, meta)
        _write_json(work / MANIFEST, manifest)
        if path.exists():
            shutil.rmtree(path)
        os.replace(work, path)
    except OSError as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise BundleError(f"{path}: cannot be written ({exc.strerror or exc})") from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return path


def _check_target(path: Path, overwrite: bool) -> None:
    """Refuse a path taken (``overwrite`` replaces a bundle only, never another folder or a
    file), or whose parent is a file."""
    if path.parent.exists() and not path.parent.is_dir():
        raise BundleError(f"{path}: its parent {path.parent} is a file, not a folder")
    if not path.exists() and not path.is_symlink():
        return
    if not overwrite:
        raise BundleError(f"{path}: already exists (pass overwrite=True to replace a bundle)")
    if path.is_symlink() or not path.is_dir() or not is_bundle(path):
        what = "a link" if path.is_symlink() else "a file" if not path.is_dir() else "a folder that is no bundle"
        raise BundleError(f"{path}: is {what}; overwrite=True replaces only a bundle")


def is_bundle(path: Path) -> bool:
    """Whether ``path`` is a folder holding a trajschema bundle's manifest."""
    try:
        data = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, Mapping) and data.get("format") == FORMAT


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, allow_nan=False, ensure_ascii=False), encoding="utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def schema_texts(schema: Schema) -> dict[str, str]:
    """The YAML of ``schema`` and of each schema it extends, by name (what reloads it anywhere)."""
    from trajschema.core import SchemaDefinitionError, SchemaNotFoundError
    from trajschema.load import load_schema

    out = {schema.name: schema.to_yaml()}
    for name in schema.plan.lineage[1:]:
        try:
            out[name] = load_schema(name).to_yaml()
        except (SchemaNotFoundError, SchemaDefinitionError) as exc:
            raise BundleError(
                f"schema {schema.name!r} extends {name!r}, which the search path does not give ({exc}); "
                "a bundle carries every schema it extends"
            ) from None
    return out


def _manifest(
    work: Path,
    schema: Schema,
    layout: Layout | PackedLayout | None,
    tags: Sequence[Mapping[str, Any]] | None,
    batch: Any,
    meta: Mapping[str, Any],
) -> dict[str, Any]:
    texts = schema_texts(schema)
    layout_doc = None if layout is None else layout_to_dict(layout)
    flags = [t.get("is_padding", False) if isinstance(t, Mapping) else None for t in tags or ()]
    known = all(isinstance(f, bool) for f in flags)
    padding = (sum(flags) if known else None) if tags is not None else _tagged_padding(batch, layout)
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "trajschema": VERSION,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **meta,
        "rows": count_rows(batch, layout),
        "padding_rows": padding,
        "schema": {"name": schema.name, "yaml": texts, "sha256": sha256(_canonical(texts))},
        "layout": None
        if layout_doc is None
        else {"name": layout_doc["name"], "mapping": layout_doc, "sha256": sha256(_canonical(layout_doc))},
        "payloads": {
            name: {"bytes": (work / name).stat().st_size, "sha256": sha256((work / name).read_bytes())}
            for name in PAYLOADS
        },
    }


def _canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, allow_nan=False).encode("utf-8")


def _tagged_padding(batch: Any, layout: Layout | PackedLayout | None) -> int | None:
    """The rows a dense batch tags ``is_padding`` in the column its layout names (SkyRL's
    ``metadata.is_padding``); ``None`` when the batch holds no such tags."""
    key = layout.tags.get("is_padding") if isinstance(layout, Layout) else None
    if key is None:
        return None
    try:
        from trajschema.dense import read_dense

        view = read_dense(batch)[0]
        if not view.has(key):
            return None
        return sum(1 for flag in view.rows(key) if bool(flag))
    except (TypeError, ValueError, RuntimeError):  # tags the check reports itself
        return None


def count_rows(batch: Any, layout: Layout | PackedLayout | None) -> int | None:
    """The rows (samples) of ``batch`` as the check reads it in ``layout`` (``None``: it cannot tell):
    a jagged batch's samples, a dense batch's rows, a packed batch's sequences (its offsets'
    length less one, or a nested column's rows)."""
    from trajschema.check import batch_view, is_tensordict

    if isinstance(layout, PackedLayout):
        return _packed_rows(batch, layout)
    try:
        if layout is None and (is_tensordict(batch) or isinstance(batch, (list, tuple))):
            return batch_view(batch).n
        from trajschema.dense import read_dense

        return read_dense(batch)[0].n
    except (TypeError, ValueError):  # no batch the check reads: the check says so itself
        return None


def _packed_rows(batch: Any, layout: PackedLayout) -> int | None:
    import torch

    if not isinstance(batch, Mapping) and not hasattr(batch, "batch_size"):
        return None
    if not layout.is_nested:
        offsets = batch.get(layout.offsets)
        ok = isinstance(offsets, torch.Tensor) and not offsets.is_nested and offsets.dim() == 1 and len(offsets)
        return len(offsets) - 1 if ok else None
    nested = (batch.get(k) for k in batch.keys())
    first = next((v for v in nested if isinstance(v, torch.Tensor) and v.is_nested), None)
    return None if first is None else int(first.size(0))


def check_version(manifest: Mapping[str, Any], where: str) -> None:
    """Refuse a manifest that is no bundle's or of a newer format version."""
    if manifest.get("format") != FORMAT:
        raise BundleError(f"{where}: not a trajschema bundle (its manifest's format is {manifest.get('format')!r})")
    found = manifest.get("version")
    if isinstance(found, bool) or not isinstance(found, int) or found < 1:
        raise BundleError(f"{where}: the manifest's version must be an int >= 1, found {found!r}")
    if found > FORMAT_VERSION:
        raise BundleVersionError(
            f"{where}: written in bundle format version {found} (by trajschema {manifest.get('trajschema')}); "
            f"this trajschema {VERSION} reads up to version {FORMAT_VERSION}: upgrade trajschema to read it",
            found,
            FORMAT_VERSION,
        )


def verify(path: Path, manifest: Mapping[str, Any]) -> None:
    """Each payload's size and SHA-256, and the schema's and layout's, as the manifest recorded them."""
    payloads = manifest.get("payloads")
    if not isinstance(payloads, Mapping):
        raise BundleError(f"{path}: the manifest lists no payloads")
    for name in PAYLOADS:
        want = payloads.get(name)
        if not isinstance(want, Mapping):
            raise BundleIntegrityError(f"{path}: the manifest records no payload {name}", name)
        file = path / name
        if not file.is_file():
            raise BundleIntegrityError(f"{path}: payload {name} is missing", name)
        data = file.read_bytes()
        if len(data) != want.get("bytes") or sha256(data) != want.get("sha256"):
            raise BundleIntegrityError(
                f"{path}: payload {name} is not the one recorded (SHA-256 {sha256(data)[:16]}..., "
                f"{len(data)} bytes; recorded {str(want.get('sha256'))[:16]}..., {want.get('bytes')} bytes): "
                "corrupted or edited",
                name,
            )
    for name, key in (("schema", "yaml"), ("layout", "mapping")):
        entry = manifest.get(name)
        if entry is None and name == "layout":
            continue
        if not isinstance(entry, Mapping) or key not in entry:
            raise BundleIntegrityError(f"{path}: the manifest holds no {name}", name)
        if sha256(_canonical(entry[key])) != entry.get("sha256"):
            raise BundleIntegrityError(f"{path}: the {name} in the manifest is not the one recorded: edited", name)
