"""Reading sample files for ``check``, ``pad --like`` and ``infer``.

A sample file is what ``torch.save`` wrote: a TensorDict (as TransferQueue returns a
batch), a list of sample dicts, one sample dict, or the ``{"samples": [...], "tags":
[...]}`` envelope that ``trajschema pad --out`` writes. Files are read with
``torch.load(weights_only=True)``, which cannot run code; full unpickling happens only
when the user passes ``--trust``. ``check`` also reads JSON Lines (`read_jsonl`), one
sample object a line, as verl's rollout dump is written, and one dense padded batch
(`read_dense_batch`, for ``check --layout``). ``-`` names standard input, read once, as
bytes.

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from trajschema.cli.args import CommandError, uncoloured

if TYPE_CHECKING:
    import torch

    from trajschema.core import Field, Violation, ViolationCode

__all__ = [
    "LINE",
    "STDIN",
    "TORCH_ONLY",
    "DataProtoParts",
    "SampleFile",
    "Source",
    "load_samples",
    "open_source",
    "read_dense_batch",
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
    """The samples of one file: ``batch`` is a list of sample mappings or a TensorDict (or,
    from `read_dense_batch`, one dense batch of ``count`` rows).

    For JSON Lines, every non-blank line is one sample, numbered from 0 in file order:
    ``lines`` holds each one's line number, ``problems`` what could not be read (a line
    that holds no sample, a value that did not convert), and ``kept`` the number of each
    sample of ``batch`` when some line is not in it (``None``: all are). `renumbered`
    puts a check of ``batch`` and the problems together.
    """

    path: str
    batch: Any
    tags: list[Mapping[str, Any]] | None
    count: int
    format: str = "torch.save"
    lines: tuple[int, ...] | None = None
    problems: tuple[Violation, ...] = ()
    kept: tuple[int, ...] | None = None

    def renumbered(self, found: Iterable[Violation]) -> list[Violation]:
        """``found`` (a check of ``batch``) with the reading problems, in sample order.

        Samples are renumbered as the file numbers them (a line left out of ``batch`` keeps
        its number), and a key left out of a sample because its value did not convert is
        not also reported ``missing``: its problem says why it is not there.
        """
        if not self.problems:
            return list(found)
        kept = self.kept
        left_out = {(p.sample, p.field) for p in self.problems}
        merged = list(self.problems)
        for v in found:
            if kept is not None and v.sample is not None:
                v = dataclasses.replace(v, sample=kept[v.sample])
            if v.code != "missing" or (v.sample, v.field) not in left_out:
                merged.append(v)
        # Stable: each sample's reading problems first, then the check's in its own order.
        return sorted(merged, key=lambda v: -1 if v.sample is None else v.sample)

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
        with warnings.catch_warnings(), torch.serialization.safe_globals(_safe_globals()):
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


def _safe_globals() -> list[Any]:
    """What the pickle of a TensorDict or a `DenseBatch` references, for torch's weights_only loader.

    tensordict 0.15 allowlists its classes itself when imported; 0.10.0 (the floor) does
    not, so without this a TensorDict file would need --trust there. A `DenseBatch` (what
    ``Schema.to_dense`` returns) is a dict with a ``metadata`` dict. None of them imports a
    module named in the file or unpickles nested data: every value inside still passes the
    restricted loader.
    """
    from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict, _reductions

    from trajschema.core import DenseBatch

    rebuilders = [getattr(_reductions, n, None) for n in ("_make_td", "_rebuild_tensordict_files_consolidated")]
    return [TensorDict, LazyStackedTensorDict, NonTensorData, NonTensorStack, DenseBatch, *(f for f in rebuilders if f)]


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


#: What ``check --layout`` reads from a file.
_DENSE_SHAPES = (
    "a mapping of batch key to (B, ...) tensor or per-sample list (what Schema.to_dense returns, "
    "SkyRL's TrainingInputBatch), a TensorDict, or verl's DataProto (or a dict of its batch, "
    "non_tensor_batch and meta_info)"
)
_DATAPROTO_KEYS = frozenset({"batch", "non_tensor_batch", "meta_info"})


@dataclasses.dataclass(frozen=True)
class DataProtoParts:
    """verl's ``DataProto`` as a file holds it without the class: ``torch.save({"batch": dp.batch,
    "non_tensor_batch": dp.non_tensor_batch, "meta_info": dp.meta_info})``.

    It has the three attributes a ``DataProto`` has, so a dense check reads it as one.
    """

    batch: Any
    non_tensor_batch: Mapping[str, Any]
    meta_info: Mapping[str, Any]


def read_dense_batch(source: Source, *, trust: bool = False) -> SampleFile:
    """The one dense padded batch of a torch.save file or stream (for ``check --layout``).

    The batch is handed to the check as the file holds it: a mapping (a dict, a
    ``DenseBatch`` with its ``metadata``, SkyRL's ``TrainingInputBatch`` under ``--trust``),
    a TensorDict, verl's ``DataProto`` (under ``--trust``), or a dict of a DataProto's
    ``batch``, ``non_tensor_batch`` and ``meta_info``, read as a DataProto. ``count`` is its
    rows, as the check counts them.

    Raises:
        CommandError: as `read_torch`, or the file holds samples (a list of them, the
            ``pad --out`` envelope) or something else, or a batch of no rows.
    """
    from trajschema.dense import read_dense

    path = source.label
    batch = _dense_of(_torch_load(source, trust), path)
    try:
        view, _ = read_dense(batch)
    except TypeError:  # a DataProto-like object whose parts are not what a DataProto holds
        raise CommandError(
            f"{path}: holds {_what(batch)} that is not a dense batch; expected {_DENSE_SHAPES}"
        ) from None
    if view.n == 0:
        raise CommandError(f"{path}: holds a dense batch of no rows")
    return SampleFile(path, batch, None, view.n)


def _dense_of(obj: Any, path: str) -> Any:
    from trajschema.check import is_tensordict

    if is_tensordict(obj) or all(hasattr(obj, a) for a in _DATAPROTO_KEYS):
        return obj
    if isinstance(obj, Mapping):
        if not all(isinstance(k, str) for k in obj):
            raise CommandError(
                f"{path}: holds a mapping whose keys are not all batch keys (str); expected {_DENSE_SHAPES}"
            )
        if "samples" in obj and set(obj) <= {"samples", "tags"}:
            raise CommandError(
                f"{path}: holds samples (the envelope pad --out writes), not a dense batch; check it without --layout"
            )
        if "batch" in obj and set(obj) <= _DATAPROTO_KEYS:
            if not is_tensordict(obj["batch"]) and obj["batch"] is not None:
                raise CommandError(
                    f"{path}: 'batch' of a DataProto's parts must be a TensorDict (as DataProto.batch is), "
                    f"found {_what(obj['batch'])}"
                )
            parts = {k: obj.get(k) or {} for k in ("non_tensor_batch", "meta_info")}
            for key, part in parts.items():
                if not isinstance(part, Mapping):
                    raise CommandError(f"{path}: {key!r} of a DataProto's parts must be a dict, found {_what(part)}")
            return DataProtoParts(obj["batch"], parts["non_tensor_batch"], parts["meta_info"])
        return obj
    if isinstance(obj, Sequence) and not isinstance(obj, (str, bytes)) and all(isinstance(s, Mapping) for s in obj):
        n = len(obj)
        raise CommandError(
            f"{path}: holds a list of {n} sample{'s' if n != 1 else ''}, not a dense batch; check it without --layout"
        )
    raise CommandError(f"{path}: holds {_what(obj)}; expected {_DENSE_SHAPES}")


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
    if isinstance(obj, Mapping) and not all(isinstance(k, str) for k in obj):
        return "a mapping with non-str keys"
    name = type(obj).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


# -- JSON Lines -----------------------------------------------------------------------------

#: The ``field`` of a violation that concerns a whole line of JSON Lines, not one of its keys.
LINE = "<line>"
#: What every non-blank line of JSON Lines must be.
_SAMPLE_OBJECT = "a JSON object of field name to value"


def read_jsonl(source: Source, fields: Mapping[str, Field] | None, *, limit: int | None = None) -> SampleFile:
    """The samples of a JSON Lines file or stream: one JSON object a line, blank lines skipped.

    Each key a tensor field of ``fields`` names becomes a tensor of the field's (first)
    dtype, nested lists giving its shape; every other value stays as JSON gave it (``null``
    as None), for the schema's ``extra:`` policy and non-tensor ``kind``s to judge.
    ``fields=None`` reads integers as int64 and other numbers as float32, as every
    packaged schema declares them (to choose a schema with ``--schema auto``). Lines are
    parsed one at a time; ``limit`` stops after that many samples.

    Reading is lazy in the way a schema check is: what cannot be read is a violation of
    its line (``SampleFile.problems``, numbered like the samples: every non-blank line is
    one) and the rest is still read. A value that does not convert to its field's tensor
    leaves that key out of the sample, with a violation naming ``file:line:column`` and the
    key: ``kind`` (strings, objects or nulls where numbers belong), ``dtype`` (numbers of
    another class: ``1.5`` or ``true`` for integers), ``shape`` (ragged lists) or ``value``
    (a number the dtype cannot hold). A line that is no sample (not UTF-8, not JSON, not an
    object, a key given twice, nested too deeply) is a ``kind`` violation of field ``<line>``.

    Raises:
        CommandError: no line holds a sample (naming the first line's problem).
    """
    samples: list[dict[str, Any]] = []
    lines: list[int] = []
    kept: list[int] = []
    problems: list[Violation] = []
    for number, record in _records(source):
        index = len(lines)
        lines.append(number)
        if isinstance(record, _Unreadable):
            problems.append(record.violation(index))
            continue
        obj, text = record
        sample: dict[str, Any] = {}
        for key, value in obj.items():
            try:
                sample[key] = _value(value, fields, key)
            except _Unconvertible as exc:
                where = f"{source.label}:{number}"
                column = _value_column(text, key)
                where += f":{column}" if column is not None else ""
                problems.append(exc.violation(index, key, f"{where}: key {key!r}: {exc.reason}"))
        samples.append(sample)
        kept.append(index)
        if limit is not None and len(samples) >= limit:
            break
    if not samples:
        if not problems:
            raise CommandError(f"{source.label}: holds no samples (no JSON object on any line)")
        more = len(problems) - 1
        rest = f" (and {more} more line{'s' if more != 1 else ''} like it)" if more else ""
        raise CommandError(f"{problems[0].message}{rest}; no line holds a sample")
    return SampleFile(
        source.label,
        samples,
        None,
        len(lines),
        format="JSON Lines",
        lines=tuple(lines),
        problems=tuple(problems),
        kept=tuple(kept) if len(kept) < len(lines) else None,
    )


@dataclasses.dataclass(frozen=True)
class _Unreadable:
    """A line that holds no sample: ``where`` (``file:line[:column]``), what it is, and why."""

    where: str
    actual: str
    why: str

    def violation(self, index: int) -> Violation:
        from trajschema.core import Violation

        return Violation(index, LINE, "kind", _SAMPLE_OBJECT, self.actual, f"{self.where}: {self.why}")


def _records(source: Source) -> Iterator[tuple[int, tuple[dict[str, Any], str] | _Unreadable]]:
    """Each non-blank line's number and its object with its text, or why it holds no sample."""
    with source.open() as f:
        for number, raw in enumerate(f, 1):
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            if not raw.strip():  # blank lines (a trailing newline, CRLF ends) hold no sample
                continue
            where = f"{source.label}:{number}"
            try:  # without its line end, so that a column in a message counts on this line
                text = raw.rstrip(b"\r\n").decode("utf-8")
            except UnicodeDecodeError as exc:
                yield number, _Unreadable(where, "not UTF-8", f"not UTF-8 text (byte {exc.start + 1})")
                continue
            try:
                obj = json.loads(text, object_pairs_hook=_unique_keys)
            except json.JSONDecodeError as exc:
                yield number, _Unreadable(f"{where}:{exc.colno}", "not JSON", f"not JSON ({exc.msg})")
                continue
            except _DuplicateKey as exc:
                why = f"key {exc.args[0]!r} appears twice in one object"
                yield number, _Unreadable(where, f"key {exc.args[0]!r} twice", why)
                continue
            except RecursionError:  # json recurses once per nesting level
                yield number, _Unreadable(where, "nested too deeply", "nested too deeply to read")
                continue
            if not isinstance(obj, dict):
                what = _json_name(obj)
                yield number, _Unreadable(where, what, f"{what}, not a sample ({_SAMPLE_OBJECT})")
                continue
            yield number, (obj, text)


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return obj


_DECODER = json.JSONDecoder()


def _value_column(text: str, key: str) -> int | None:
    """The column (from 1, as ``json`` counts) where ``key``'s value starts on a line holding one object.

    Called only for a value that did not convert, so a line is scanned again only then.
    """
    try:
        at = _blanks(text, 0)
        if text[at : at + 1] != "{":
            return None
        at = _blanks(text, at + 1)
        while text[at : at + 1] == '"':
            name, at = _DECODER.raw_decode(text, at)
            at = _blanks(text, at)
            if text[at : at + 1] != ":":
                return None
            at = _blanks(text, at + 1)
            if name == key:
                return at + 1
            _, at = _DECODER.raw_decode(text, at)
            at = _blanks(text, at)
            if text[at : at + 1] != ",":
                return None
            at = _blanks(text, at + 1)
        return None
    except (ValueError, RecursionError):
        return None


def _blanks(text: str, at: int) -> int:
    """Where the JSON whitespace from ``at`` ends."""
    while at < len(text) and text[at] in " \t\n\r":
        at += 1
    return at


class _Unconvertible(ValueError):
    """A JSON value that is not the tensor its field declares: a violation ``code``, and why."""

    def __init__(self, code: ViolationCode, expected: str, actual: str, reason: str) -> None:
        super().__init__(reason)
        self.code, self.expected, self.actual, self.reason = code, expected, actual, reason

    def violation(self, sample: int, key: str, message: str) -> Violation:
        from trajschema.core import Violation

        return Violation(sample, key, self.code, self.expected, self.actual, message)


def _value(value: Any, fields: Mapping[str, Field] | None, key: str) -> Any:
    import torch

    if fields is None:  # no schema yet: numbers and lists of them as the packaged schemas hold them
        if type(value) in (int, float, list):
            with contextlib.suppress(_Unconvertible):  # not a tensor: left for the schema to judge
                _, leaves = _nested(value, "")
                if {type(x) for x in leaves} <= {int, float}:
                    dtype = torch.int64 if all(type(x) is int for x in leaves) else torch.float32
                    return _tensor(value, (dtype,), str(dtype))
        return value
    field = fields.get(key)
    if field is None or not field.is_tensor or value is None:  # extra keys, non-tensor kinds, null: the check judges
        return value
    return _tensor(value, field.dtypes, field.describe())


def _tensor(value: Any, dtypes: tuple[torch.dtype, ...], declared: str) -> torch.Tensor:
    """``value`` as a tensor of the first of ``dtypes`` that holds its numbers exactly.

    Raises:
        _Unconvertible: ``kind`` (a leaf that is no number or true/false), ``dtype`` (numbers
            of another class), ``shape`` (ragged lists) or ``value`` (a number no dtype holds).
    """
    import torch

    shape, leaves = _nested(value, declared)
    kinds = set(map(type, leaves))
    usable = [d for d in dtypes if kinds <= _JSON_TYPES[_dtype_class(d)]]
    if not usable:
        wanted = _dtype_class(dtypes[0])
        bad = next(x for x in leaves if type(x) not in _JSON_TYPES[wanted])
        found = f"a list holding {_json_name(bad)}" if shape else _json_name(bad)
        code: ViolationCode = "dtype" if type(bad) in (int, float, bool) else "kind"
        raise _Unconvertible(code, declared, found, f"expected {wanted} for {declared}, found {found}")
    for dtype in usable:
        if _fits(leaves, dtype):
            return torch.tensor(leaves, dtype=dtype).reshape(shape)
    big = max(leaves, key=lambda x: abs(x) if type(x) is int or math.isfinite(x) else 0)
    raise _Unconvertible("value", declared, str(big), f"{big} does not fit {declared}")


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


def _nested(value: Any, declared: str) -> tuple[list[int], list[Any]]:
    """The shape of nested JSON lists and their leaves, flat.

    Raises:
        _Unconvertible: ``shape``: the lists are ragged.
    """
    shape: list[int] = []
    level = [value]
    while any(type(x) is list for x in level):
        depth = len(shape) + 1
        if not all(type(x) is list for x in level):
            actual = f"lists and single values mixed at depth {depth}"
            raise _Unconvertible("shape", declared, actual, f"ragged: {actual}")
        lengths = sorted({len(x) for x in level})
        if len(lengths) > 1:
            actual = f"lists of {lengths[0]} and {lengths[-1]} items at depth {depth}"
            raise _Unconvertible("shape", declared, actual, f"ragged: {actual}")
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
