"""Helpers the schema-loading tests share (``tests/load``, ``tests/files``, and the loaders' errors in
``tests/core``): writing a schema file, the error loading it raises, the body the tables of
malformed files share, and small schemas built in Python."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

import pytest
import yaml

import trajschema as ts


def write_schema(directory: Path, name: str, text: str | bytes) -> Path:
    path = directory / f"{name}.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path.resolve()


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def child_schema(directory: Path, body: str, name: str = "child", parents: str = "text") -> Path:
    return write_schema(directory, name, f"name: {name}\nextends: [{parents}]\n{body}")


def load_error(path: Path) -> ts.SchemaDefinitionError:
    """The SchemaDefinitionError loading ``path`` raises, checked for its file and format
    (``file:line:col: path: problem``, under a header when there are several)."""
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(path)
    err = info.value
    at = f"{err.source}:{err.line}:{err.column}" if err.line is not None else err.source
    where = f"{at}: {err.path}" if err.path else at
    if len(err.errors) == 1:
        assert str(err) == f"{where}: {err.problem}"
    else:  # [1, null] where names are meant: two problems
        head, first = str(err).splitlines()[:2]
        assert head.startswith(f"{len(err.errors)} problems in ") and first == f"  {where}: {err.problem}"
    return err


# Where the YAML reader says a problem is: the line (and column), not a key path.
_PLACE = re.compile(r"line (\d+)(?:, column (\d+))?")


def check_refused(tmp_path: Path, text: str | bytes, key_path: str, problem: str, name: str = "bad") -> None:
    """Loading ``text`` is refused at ``key_path`` (or at ``line N, column M``) with ``problem`` in its words."""
    path = write_schema(tmp_path, name, text)
    err = load_error(path)
    assert err.source == str(path)
    place = _PLACE.fullmatch(key_path)
    if place:
        assert (err.path, err.line) == ("", int(place[1]))
        assert place[2] is None or err.column == int(place[2])
    else:
        assert err.path == key_path
    assert problem in err.problem, err.problem


def prefixed(tables: dict[str, list]) -> list:
    """The rows of the tables of malformed files as one parameter list, each id prefixed by its table."""
    return [
        pytest.param(*row.values, id=f"{table}-{row.id}", marks=row.marks)
        for table, rows in tables.items()
        for row in rows
    ]


@contextlib.contextmanager
def within(seconds: float):
    """Fail instead of hanging: opening a FIFO for reading blocks until a writer comes, forever here."""

    def expire(signum, frame):
        raise TimeoutError(f"still blocked after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


needs_posix = pytest.mark.skipif(os.name != "posix", reason="needs symbolic links, FIFOs and SIGALRM")


def routes_schema(dtype: str = "[uint8, int16]", pad: str = "0", extra: str = "") -> ts.Schema:
    """Routes whose ids are bounded by a dim (``max: experts - 1``), as issue 16 writes them."""
    return ts.schema_from_dict(
        yaml.safe_load(
            f"""
name: routes
dims:
  seq: {{min: 1}}
  topk: {{min: 1}}
  experts: {{min: 1}}
fields:
  routed_experts: {{shape: [seq, topk], dtype: {dtype}, min: 0, max: experts - 1, pad: {pad}{extra}}}
"""
        )
    )


def smallest_free_sizes(schema: ts.Schema) -> dict[str, int]:
    """A size for every free dim without a padding size: the smallest its bounds allow (>= 1 if they can)."""
    out = {}
    for name, d in schema.dims.items():
        if isinstance(d, ts.FreeDim) and name not in schema.padding_sizes:
            step = d.multiple_of or 1
            size = -(-max(d.min, 1) // step) * step
            out[name] = size if d.max is None or size <= d.max else -(-d.min // step) * step
    return out


def pad_and_validate(schema: ts.Schema) -> None:
    """What a schema that loads promises: its padding validates (the fuzzers' check)."""
    try:
        pad = schema.padding(2, eos_token_id=1, dims=smallest_free_sizes(schema))
    except ValueError as exc:
        # What the schema cannot decide: the caller's eos_token_id, and sizes the caller picks.
        if not any(s in str(exc) for s in ("eos_token_id=1", "< 0", "positions")):
            raise
        return
    free = {n: v for n, v in pad.dims.items() if isinstance(schema.dims.get(n), ts.FreeDim)}
    schema.validate_batch(pad.fields, tags=pad.tags, dims=free)
