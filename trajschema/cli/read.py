"""Reading sample files for ``check``, ``pad --like`` and ``infer``.

A sample file is what ``torch.save`` wrote: a TensorDict (as TransferQueue returns a
batch), a list of sample dicts, one sample dict, or the ``{"samples": [...], "tags":
[...]}`` envelope that ``trajschema pad --out`` writes. Files are read with
``torch.load(weights_only=True)``, which cannot run code; full unpickling happens only
when the user passes ``--trust``.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trajschema.cli.args import CommandError

__all__ = ["SampleFile", "load_samples", "reason"]

_SHAPES = "a TensorDict, a list of sample dicts, a sample dict or a {'samples': [...], 'tags': [...]} envelope"


@dataclasses.dataclass(frozen=True)
class SampleFile:
    """The samples of one file: ``batch`` is a list of sample mappings or a TensorDict."""

    path: str
    batch: Any
    tags: list[Mapping[str, Any]] | None
    count: int

    def first(self) -> Mapping[str, Any]:
        """The first sample, as a mapping of plain values (a TensorDict row unwrapped)."""
        from trajschema.check import batch_view

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
    import torch

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


def _unreadable(p: Path, exc: BaseException) -> str:
    try:
        with p.open("rb") as f:
            head = f.read(4)
    except OSError:
        head = b""
    if not head or head.startswith(b"PK"):  # empty, or a zip archive (perhaps truncated): torch's reason is clear
        return reason(exc)
    # Not a zip archive, so torch read it as a legacy (pre-1.6) torch.save pickle: its
    # complaint ("KeyError: 105", an opcode it met) says little about the actual file.
    return f"neither a zip archive, as torch.save writes, nor a legacy torch.save file: {reason(exc)}"


def reason(exc: BaseException) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # torch colours parts of its messages
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
