"""Reading sample files for ``check``, ``pad --like`` and ``infer``.

A sample file is what ``torch.save`` wrote: a TensorDict (as TransferQueue returns a
batch), a list of sample dicts, one sample dict, or the ``{"samples": [...], "tags":
[...]}`` envelope that ``trajschema pad --out`` writes. Files are read with
``torch.load(weights_only=True)``, which cannot run code; full unpickling happens only
when the user passes ``--trust``. ``check`` also reads JSON Lines (`read_jsonl`), one
sample object a line, as verl's rollout dump is written. ``-`` names standard input,
read once, as bytes.

What a file holds is sniffed from its first bytes before anything parses it, so a YAML
schema, a JSON document or plain text given by mistake is named as such instead of
being fed to the unpickler.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import io
import json
import math
import re
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from trajschema.cli.args import CommandError, uncoloured

if TYPE_CHECKING:
    import torch

    from trajschema.core import Field

__all__ = [
    "STDIN",
    "TORCH_ONLY",
    "SampleFile",
    "Source",
    "load_samples",
    "open_source",
    "read_jsonl",
    "read_torch",
    "reason",
    "sniff",
]

#: The file name that means standard input.
STDIN = "-"
#: What ``pad --like`` and ``infer`` read (``check`` says its own).
TORCH_ONLY = "this command reads torch.save files"

_SHAPES = "a TensorDict, a list of sample dicts, a sample dict or a {'samples': [...], 'tags': [...]} envelope"
#: The first bytes of what torch.load reads: a zip archive (torch.save since 1.6), a pickle
#: (protocol 2 and up), or the legacy format's magic number pickled with protocol 0 or 1.
#: Anything else is no torch file: unpickling it only produces misleading advice (--trust).
_TORCH_HEADS = (b"PK", b"\x80", b"L119547037146038801333356")
_SNIFF_BYTES = 4096
_YAML_LINE = re.compile(r"(---|%YAML|[A-Za-z_][\w.-]*[ \t]*:([ \t]|$))")


@dataclasses.dataclass(frozen=True)
class SampleFile:
    """The samples of one file: ``batch`` is a list of sample mappings or a TensorDict.

    ``lines`` holds, for JSON Lines, the line number of each sample (blank lines hold none).
    """

    path: str
    batch: Any
    tags: list[Mapping[str, Any]] | None
    count: int
    format: str = "torch.save"
    lines: tuple[int, ...] | None = None

    def first(self) -> Mapping[str, Any]:
        """The first sample, as a mapping of plain values (a TensorDict row unwrapped)."""
        from trajschema.check import batch_view

        return batch_view(self.batch).row(0)

    def first_tag(self) -> Mapping[str, Any] | None:
        return self.tags[0] if self.tags else None


@dataclasses.dataclass(frozen=True)
class Source:
    """One input named on the command line: a regular file, or standard input's bytes (read once)."""

    name: str
    path: Path | None
    data: bytes | None = None

    @property
    def label(self) -> str:
        """How messages name it: the path as given, or ``<stdin>``."""
        return "<stdin>" if self.path is None else self.name

    def open(self) -> BinaryIO:
        return io.BytesIO(self.data or b"") if self.path is None else self.path.open("rb")

    def head(self) -> bytes:
        if self.path is None:
            return (self.data or b"")[:_SNIFF_BYTES]
        with self.path.open("rb") as f:
            return f.read(_SNIFF_BYTES)


def open_source(name: str) -> Source:
    """The input ``name`` names, checked to be readable without blocking (``-`` reads stdin now).

    Raises:
        CommandError: an empty name, no such file, a directory, a FIFO or device, stdin closed.
    """
    if name == STDIN:
        return Source(name, None, _read_stdin())
    if not name.strip():  # Path("") is the current directory
        raise CommandError("an empty file name; name the file to read, or - for stdin")
    p = Path(name)
    if not p.exists():
        raise CommandError(f"{name}: no such file")
    if p.is_dir():
        raise CommandError(f"{name}: is a directory, not a sample file")
    if not p.is_file():  # a FIFO or a device: reading it could block forever
        raise CommandError(f"{name}: is not a regular file (pipe it to stdin and name it -)")
    return Source(name, p)


def _read_stdin() -> bytes:
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None or stream.closed:  # started with stdin closed (`<&-`), or no stdin at all
        raise CommandError("<stdin>: standard input is closed; pipe the samples in, or name a file")
    try:
        return bytes(stream.read())
    except (OSError, ValueError) as exc:  # a descriptor closed under us, or a harness that forbids reading
        raise CommandError(f"<stdin>: cannot be read ({reason(exc)})") from None


def sniff(source: Source, reads: str) -> str:
    """``"torch"`` or ``"jsonl"``: what ``source`` holds, from its name and first bytes.

    Raises:
        CommandError: it is empty, or looks like YAML, a JSON document or text; the message
            says what it looks like and what the command ``reads``.
    """
    head = source.head()
    if not head.strip():
        raise CommandError(f"{source.label}: is empty{'' if not head else ' (blank)'}; {reads}")
    if head.startswith(_TORCH_HEADS):
        return "torch"
    if source.path is not None and source.path.suffix.lower() in (".jsonl", ".ndjson"):
        return "jsonl"
    text = _text_of(head)
    if text is None:
        raise CommandError(
            f"{source.label}: not a torch.save file: neither a zip archive, as torch.save writes, nor a legacy "
            f"torch.save file (it starts with bytes {head[:4].hex(' ')}); {reads}"
        )
    first, _, rest = text.lstrip().partition("\n")
    if first.startswith("{") and ((not rest and len(head) == _SNIFF_BYTES) or _is_object(first)):
        return "jsonl"  # an object on the first line (perhaps longer than the head)
    raise CommandError(f"{source.label}: looks like {_looks_like(text)}, not samples; {reads}")


def _text_of(head: bytes) -> str | None:
    """``head`` as text, or None for binary (a character cut by the end of a full head still counts as text)."""
    head = head.removeprefix(codecs.BOM_UTF8)
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if len(head) < _SNIFF_BYTES - 3 or exc.start < len(head) - 3:
            return None
        text = head[: exc.start].decode("utf-8", errors="replace")
    return text if all(c.isprintable() or c in "\t\r\n" for c in text) else None


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _looks_like(text: str) -> str:
    body = text.lstrip()
    if body.startswith(("{", "[")):
        return "a JSON document (JSON Lines has one sample object on each line)"
    lines = [ln for ln in body.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    if lines and _YAML_LINE.match(lines[0]):
        keys = {ln.split(":", 1)[0] for ln in lines if not ln.startswith((" ", "\t", "-"))}
        if "name" in keys and keys & {"fields", "extends", "dims"}:
            return "YAML, a schema file (pass a schema with --schema)"
        return "YAML (a schema file? pass a schema with --schema)"
    return "text"


def load_samples(path: str, *, trust: bool = False) -> SampleFile:
    """Read a torch.save sample file (see the module docstring for the shapes it may hold).

    Raises:
        CommandError: the file is missing, unreadable, corrupt, needs ``--trust``, is of
            another kind (JSON Lines, YAML, text), holds something else or no samples at all.
    """
    source = open_source(path)
    if sniff(source, TORCH_ONLY) == "jsonl":
        raise CommandError(f"{source.label}: is JSON Lines; {TORCH_ONLY} (trajschema check reads JSON Lines too)")
    return read_torch(source, trust=trust)


def read_torch(source: Source, *, trust: bool = False) -> SampleFile:
    """The samples of a torch.save file or stream (`load_samples` without the sniffing)."""
    return _samples_of(_torch_load(source, trust), source.label)


def _torch_load(source: Source, trust: bool) -> Any:
    import torch

    path = source.label
    try:
        with warnings.catch_warnings(), torch.serialization.safe_globals(_tensordict_globals()):
            warnings.simplefilter("ignore")  # torch warns about pickle protocols of files it then refuses
            with source.open() as f:
                return torch.load(f, map_location="cpu", weights_only=True)
    except OSError as exc:
        raise CommandError(f"{path}: cannot be read: {exc.strerror or reason(exc)}") from None
    except Exception as exc:  # torch.load raises KeyError, EOFError, RuntimeError, ... for non-torch bytes
        if not _needs_unpickling(exc):
            raise CommandError(f"{path}: not a readable torch.save file ({_unreadable(source, exc)})") from None
        if not trust:
            raise CommandError(f"{path}: {_refusal(exc)}; rerun with --trust if you trust the file") from None
    try:
        with source.open() as f:
            return torch.load(f, map_location="cpu", weights_only=False)
    except Exception as exc:  # unpickling runs arbitrary code: any error is the file's
        raise CommandError(f"{path}: not a readable torch.save file, even with --trust ({reason(exc)})") from None


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


def _unreadable(source: Source, exc: BaseException) -> str:
    try:
        head = source.head()[:4]
    except OSError:
        head = b""
    if not head or head.startswith(b"PK"):  # empty, or a zip archive (perhaps truncated): torch's reason is clear
        return reason(exc)
    # Not a zip archive, so torch read it as a legacy (pre-1.6) torch.save pickle: its
    # complaint ("KeyError: 105", an opcode it met) says little about the actual file.
    return f"neither a zip archive, as torch.save writes, nor a legacy torch.save file: {reason(exc)}"


def reason(exc: BaseException) -> str:
    text = uncoloured(str(exc)).strip()
    first = text.splitlines()[0].strip().split(". ")[0] if text else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _samples_of(obj: Any, path: str) -> SampleFile:
    from trajschema.check import is_tensordict

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


# -- JSON Lines -----------------------------------------------------------------------------


def read_jsonl(source: Source, fields: Mapping[str, Field] | None, *, limit: int | None = None) -> SampleFile:
    """The samples of a JSON Lines file or stream: one JSON object a line, blank lines skipped.

    Each key a tensor field of ``fields`` names becomes a tensor of the field's (first)
    dtype, nested lists giving its shape; every other value stays as JSON gave it, for the
    schema's ``extra:`` policy and non-tensor ``kind``s to judge. ``fields=None`` reads
    integers as int64 and other numbers as float32, as every packaged schema declares them
    (to choose a schema with ``--schema auto``). Lines are parsed one at a time.

    Raises:
        CommandError: naming the file, the line and the key: a line that is not UTF-8 or
            not a JSON object, a key given twice, a tensor value of the wrong JSON type, a
            ragged list or a number its dtype cannot hold; or no sample in the file.
    """
    samples: list[dict[str, Any]] = []
    lines: list[int] = []
    for number, obj in _objects(source):
        where = f"{source.label}: line {number}"
        samples.append({k: _value(v, fields, k, f"{where}: key {k!r}") for k, v in obj.items()})
        lines.append(number)
        if limit is not None and len(samples) >= limit:
            break
    if not samples:
        raise CommandError(f"{source.label}: holds no samples (no JSON object on any line)")
    return SampleFile(source.label, samples, None, len(samples), format="JSON Lines", lines=tuple(lines))


def _objects(source: Source) -> Iterator[tuple[int, dict[str, Any]]]:
    with source.open() as f:
        for number, raw in enumerate(f, 1):
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            if not raw.strip():  # blank lines (a trailing newline, CRLF ends) hold no sample
                continue
            where = f"{source.label}: line {number}"
            try:  # without its line end, so that a column in a message counts on this line
                obj = json.loads(raw.rstrip(b"\r\n").decode("utf-8"), object_pairs_hook=_unique_keys)
            except UnicodeDecodeError as exc:
                raise CommandError(f"{where}: not UTF-8 text (byte {exc.start + 1})") from None
            except json.JSONDecodeError as exc:
                raise CommandError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
            except _DuplicateKey as exc:
                raise CommandError(f"{where}: key {exc.args[0]!r} appears twice in one object") from None
            if not isinstance(obj, dict):
                raise CommandError(f"{where}: {_json_name(obj)}, not a sample (a JSON object of field name to value)")
            yield number, obj


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return obj


def _value(value: Any, fields: Mapping[str, Field] | None, key: str, where: str) -> Any:
    import torch

    if fields is None:  # no schema yet: numbers and lists of them as the packaged schemas hold them
        if type(value) in (int, float, list):
            with contextlib.suppress(CommandError):  # not a tensor: left for the schema to judge
                _, leaves = _nested(value, where)
                if {type(x) for x in leaves} <= {int, float}:
                    dtype = torch.int64 if all(type(x) is int for x in leaves) else torch.float32
                    return _tensor(value, (dtype,), str(dtype), where)
        return value
    field = fields.get(key)
    if field is None or not field.is_tensor:  # extra keys and non-tensor kinds: the check judges them
        return value
    return _tensor(value, field.dtypes, field.describe(), where)


def _tensor(value: Any, dtypes: tuple[torch.dtype, ...], declared: str, where: str) -> torch.Tensor:
    """``value`` as a tensor of the first of ``dtypes`` that holds its numbers exactly."""
    import torch

    shape, leaves = _nested(value, where)
    kinds = set(map(type, leaves))
    usable = [d for d in dtypes if kinds <= _JSON_TYPES[_dtype_class(d)]]
    if not usable:
        bad = next(x for x in leaves if type(x) not in _JSON_TYPES[_dtype_class(dtypes[0])])
        found = f"a list holding {_json_name(bad)}" if shape else _json_name(bad)
        raise CommandError(f"{where}: expected {_dtype_class(dtypes[0])} for {declared}, found {found}")
    for dtype in usable:
        if _fits(leaves, dtype):
            return torch.tensor(leaves, dtype=dtype).reshape(shape)
    big = max(leaves, key=lambda x: abs(x) if type(x) is int or math.isfinite(x) else 0)
    raise CommandError(f"{where}: {big} does not fit {declared}")


#: What JSON values each class of dtype takes: integers are not booleans, and 1.0 is no integer.
_JSON_TYPES: dict[str, set[type]] = {"true/false": {bool}, "integers": {int}, "numbers": {int, float}}


def _dtype_class(dtype: torch.dtype) -> str:
    import torch

    return "true/false" if dtype is torch.bool else "numbers" if dtype.is_floating_point else "integers"


def _fits(leaves: list[Any], dtype: torch.dtype) -> bool:
    """Whether every number converts to ``dtype`` exactly (torch wraps -1 to 255 in uint8, 1e300 to inf)."""
    import torch

    if not leaves or dtype is torch.bool:
        return True
    if dtype.is_floating_point:
        finite = [abs(x) for x in leaves if type(x) is int or math.isfinite(x)]  # ints may pass float's range
        return not finite or max(finite) <= torch.finfo(dtype).max
    info = torch.iinfo(dtype)
    return info.min <= min(leaves) and max(leaves) <= info.max


def _nested(value: Any, where: str) -> tuple[list[int], list[Any]]:
    """The shape of nested JSON lists and their leaves, flat; ragged lists are an error."""
    shape: list[int] = []
    level = [value]
    while any(type(x) is list for x in level):
        if not all(type(x) is list for x in level):
            raise CommandError(f"{where}: ragged: lists and single values mixed at depth {len(shape) + 1}")
        lengths = sorted({len(x) for x in level})
        if len(lengths) > 1:
            raise CommandError(
                f"{where}: ragged: lists of {lengths[0]} and {lengths[-1]} items at depth {len(shape) + 1}"
            )
        shape.append(lengths[0])
        level = [y for x in level for y in x]
    return shape, level


def _json_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return "a string" if len(value) > 20 else f"the string {value!r}"
    return "an object" if isinstance(value, dict) else "a list"
