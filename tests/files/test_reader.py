"""Reading a schema file strictly (`trajschema.files.reader`): its bytes (a regular file, UTF-8,
at most 1 MiB), its YAML (no key given twice, no merge keys, string keys only) and the parsed
tree (nothing that contains itself, nests too deep or expands too far), each refusal a
SchemaDefinitionError naming the file, through `ts.load_schema` and the reader itself.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import trajschema as ts
from tests.loading_cases import BASE, LAUGHS
from tests.loading_cases import edit_base as _edit
from tests.loading_support import check_refused as _check
from tests.loading_support import load_error as _load_error
from tests.loading_support import needs_posix, prefixed
from tests.loading_support import within as _within
from tests.loading_support import write_schema as _write
from trajschema.files.filetext import MAX_DEPTH, MAX_NODES
from trajschema.files.reader import read_text

# ---------------------------------------------------------------------------
# YAML: duplicate keys (at any depth), merge keys, non-string keys


REFUSED_YAML_KEYS = [
    pytest.param(BASE + "name: other\n", "name", "key 'name' is given twice (lines 1 and 10)", id="dup-top-level"),
    pytest.param(
        BASE + "'name': other\n", "name", "key 'name' is given twice (lines 1 and 10)", id="dup-quoted-spelling"
    ),
    pytest.param(
        BASE + "  uid: {kind: str, pad: uid}\n",
        "fields.uid",
        "key 'uid' is given twice (lines 9 and 10)",
        id="dup-field",
    ),
    pytest.param(
        _edit("pad: eos}", "pad: eos, pad: 0}"),
        "fields.input_ids.pad",
        "key 'pad' is given twice (line 8, columns 43 and 53); YAML would keep only the last",
        id="dup-in-flow-field",
    ),
    pytest.param(
        BASE + "  extra_ids:\n    shape: [seq]\n    dtype: int64\n    dtype: int32\n    pad: 0\n",
        "fields.extra_ids.dtype",
        "key 'dtype' is given twice (lines 12 and 13)",
        id="dup-in-block-field",
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  rope_rows: 3\n"),
        "dims.rope_rows",
        "key 'rope_rows' is given twice (lines 6 and 7)",
        id="dup-dim",
    ),
    pytest.param(
        _edit("prompt: {min: 1}", "prompt: {min: 1, min: 2}"),
        "dims.prompt.min",
        "key 'min' is given twice (line 3, columns 12 and 20)",
        id="dup-in-free-dim",
    ),
    pytest.param(
        BASE + "tags:\n  plen: {equals: prompt}\n  plen: {equals: seq}\n",
        "tags.plen",
        "key 'plen' is given twice (lines 11 and 12)",
        id="dup-tag",
    ),
    pytest.param(
        BASE + "padding:\n  prompt: 3\n  prompt: 4\n",
        "padding.prompt",
        "key 'prompt' is given twice (lines 11 and 12)",
        id="dup-padding",
    ),
    pytest.param(
        BASE + "  x: &x {shape: [seq], dtype: int64, pad: 0}\n  y: {<<: *x, dtype: int32}\n",
        "fields.y.<<",
        "YAML merge keys (<<, line 11) are not supported: they override keys silently",
        id="merge-key",
    ),
    pytest.param(
        "base: &b {name: bad}\n<<: *b\n", "<<", "YAML merge keys (<<, line 2) are not supported", id="merge-top-level"
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  1: 4\n"),
        "dims",
        "key 1 on line 6 is an integer, not a string; quote it if a name is meant",
        id="int-key-in-dims",
    ),
    pytest.param(
        BASE + "  null: {kind: str, pad: uid}\n", "fields", "key null on line 10 is null, not a string", id="null-key"
    ),
    pytest.param(
        BASE + "tags:\n  true: {kind: bool}\n", "tags", "key true on line 11 is a boolean, not a string", id="true-key"
    ),
    pytest.param(
        BASE + "  on: {kind: int, pad: 0}\n",
        "fields",
        "key true on line 10 is a boolean, not a string; quote it if a name is meant "
        "(YAML reads 1, null, true, on, off, yes and no as numbers, null and booleans)",
        id="yaml11-on-key",
    ),
    pytest.param(BASE + "1.5: x\n", "", "key 1.5 on line 10 is a number, not a string", id="float-key-top-level"),
    pytest.param(BASE + "? [a]\n: 1\n", "", "key ['a'] on line 10 is a list, not a string", id="list-key"),
]


# ---------------------------------------------------------------------------
# Aliases and nesting: self-reference, deep nesting, billion laughs


REFUSED_NESTING = [
    pytest.param(
        BASE + "architectures: &x [*x]\n",
        "architectures[0]",
        "contains itself (as a YAML alias inside its own anchor does: a: &x [*x])",
        id="self-referencing-list",
    ),
    pytest.param(BASE + "description: &d {a: *d}\n", "description.a", "contains itself", id="self-referencing-mapping"),
    pytest.param(
        BASE + "  x: &f {shape: [seq], dtype: int64, pad: 0, values: [*f]}\n",
        "fields.x.values[0]",
        "contains itself",
        id="self-referencing-field",
    ),
    pytest.param(
        "name: bad\ndescription: " + "[" * 5000 + "]" * 5000 + "\n",
        "line 2, column 29",
        f"nested more than {MAX_DEPTH} levels deep; a schema needs 5",
        id="deep-flow-lists",
    ),
    pytest.param(
        "name: bad\ndescription: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n",
        "line 2, column 71",
        f"nested more than {MAX_DEPTH} levels deep",
        id="deep-flow-mappings",
    ),
    pytest.param(
        "name: bad\ndescription:\n" + "".join("  " * i + "- \n" for i in range(1, 40)),
        "line 18, column 33",
        f"nested more than {MAX_DEPTH} levels deep",
        id="deep-block-lists",
    ),
    pytest.param(LAUGHS, "", f"expands to more than {MAX_NODES} values (aliases of aliases?)", id="billion-laughs"),
]


def test_billion_laughs_under_a_real_key(tmp_path: Path) -> None:
    """A bomb where a list of strings is expected is refused before validation walks it."""
    bomb = "".join(line.split(": ", 1)[1] + ", " for line in LAUGHS.splitlines()[1:])
    text = BASE + f"description: {{bombs: [{bomb.rstrip(', ')}]}}\narchitectures: [*h, *h]\n"
    err = _load_error(_write(tmp_path, "bad", text))
    assert (err.path, err.problem) == (
        "",
        f"expands to more than {MAX_NODES} values (aliases of aliases?); a schema needs hundreds",
    )


# ---------------------------------------------------------------------------
# Whole files: encodings, not-a-file, empty, scalar, size, YAML-level junk


REFUSED_WHOLE_FILES = [
    pytest.param(
        "name: bad\ndescription: café\n".encode("latin-1"),
        "line 2",
        "not UTF-8 text: byte 0xe9 at offset 26 (invalid continuation byte); schema files are UTF-8",
        id="latin-1",
    ),
    pytest.param("name: bad\n".encode("utf-16"), "line 1", "not UTF-8 text: byte 0xff at offset 0", id="utf-16"),
    pytest.param(b"name: bad\n\xff\xfe\n", "line 2", "not UTF-8 text: byte 0xff at offset 10", id="stray-bytes"),
    pytest.param("# nothing here\n", "", "found an empty file", id="only-a-comment"),
    pytest.param("~\n", "", "found an empty file", id="null-document"),
    pytest.param("hello\n", "", "found a string 'hello'", id="scalar"),
    pytest.param("3\n", "", "found an integer 3", id="number"),
    pytest.param("- name: bad\n", "", "found a list [{'name': 'bad'}]", id="list"),
    pytest.param(
        "name: bad\n---\nname: other\n",
        "line 2, column 1",
        "invalid YAML: but found another document (expected a single document in the stream)",
        id="two-documents",
    ),
    pytest.param(
        "name: bad\ndescription: a\x00b\n",
        "line 2",
        "invalid YAML: unacceptable character #x0000: special characters are not allowed",
        id="nul-character",
    ),
    pytest.param(
        BASE + "description: 2001-02-30\n",
        "description",
        "invalid date '2001-02-30': day is out of range for month",
        id="impossible-date",
    ),
    pytest.param(
        BASE + "description: !!python/object:os.system x\n",
        "line 10, column 14",
        "invalid YAML: could not determine a constructor for the tag 'tag:yaml.org,2002:python/object:os.system'",
        id="python-tag",
    ),
    pytest.param(
        BASE + "description: !custom x\n",
        "line 10, column 14",
        "could not determine a constructor for the tag '!custom'",
        id="custom-tag",
    ),
    pytest.param(
        "name: bad\ndescription: '" + "x" * (1 << 20) + "'\n",
        "",
        "larger than 1 MiB; a schema file is a few KiB",
        id="too-big",
    ),
]


#: Every table of malformed files above, under one body; each id is prefixed by its table.
MALFORMED_FILES = prefixed({"yaml": REFUSED_YAML_KEYS, "nesting": REFUSED_NESTING, "file": REFUSED_WHOLE_FILES})


@pytest.mark.parametrize(("text", "key_path", "problem"), MALFORMED_FILES)
def test_malformed_schema(tmp_path: Path, text: str | bytes, key_path: str, problem: str) -> None:
    """A SchemaDefinitionError at load time naming the file, the key path and the problem (``file: path: problem``)."""
    _check(tmp_path, text, key_path, problem)


# ---------------------------------------------------------------------------
# Files that are not schema text: a byte order mark, a FIFO


def test_a_utf8_byte_order_mark_is_fine(tmp_path: Path) -> None:
    path = _write(tmp_path, "bom", b"\xef\xbb\xbfname: bom\nextends: [text]\n")
    assert ts.load_schema(path).name == "bom"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")  # opening it for reading would block forever
    err = _load_error(tmp_path / "pipe.yaml")
    assert (err.path, err.problem) == ("", "is not a regular file (a FIFO)")


# ---------------------------------------------------------------------------
# The reader checks the open file, and names why a file cannot be read


@needs_posix
def test_a_fifo_put_in_place_after_the_search_is_not_read(tmp_path: Path) -> None:
    """The reader checks the open file, not only the path it looked at: a swap cannot make it block."""
    os.mkfifo(tmp_path / "pipe.yaml")
    with _within(10), pytest.raises(ts.SchemaDefinitionError, match=r"is not a regular file \(a FIFO\)$"):
        read_text(tmp_path / "pipe.yaml")


@needs_posix
def test_a_directory_named_like_a_schema_file_is_refused_by_the_reader_too(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(ts.SchemaDefinitionError, match=r"d\.yaml: is a directory, not a schema file$"):
        read_text(tmp_path / "d.yaml")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads files whatever their mode")
def test_a_file_without_read_permission_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "secret", "name: secret\n")
    path.chmod(0)
    try:
        assert _load_error(path).problem == "cannot be read: Permission denied"
    finally:
        path.chmod(0o644)


def test_an_open_that_fails_is_named_with_its_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What chmod 0 gives a non-root user, simulated (CI runs as root)."""
    path = _write(tmp_path, "secret", "name: secret\n")
    real = os.open

    def refuse(p: Any, *args: Any, **kwargs: Any) -> int:
        if os.fspath(p) == str(path):
            raise PermissionError(13, "Permission denied", str(p))
        return real(p, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    err = _load_error(path)
    assert (err.source, err.path, err.problem) == (str(path), "", "cannot be read: Permission denied")


# ---------------------------------------------------------------------------
# What the reader accepts


def test_an_alias_reuses_a_whole_entry(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "mine",
        "name: mine\nextends: [text]\nfields:\n"
        "  a_mask: &mask {shape: [response], dtype: int64, values: [0, 1], pad: 0}\n"
        "  b_mask: *mask\n",
    )
    schema = ts.load_schema(path)
    assert schema.fields["b_mask"].values == schema.fields["a_mask"].values == (0, 1)
