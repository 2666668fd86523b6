"""What a schema file may say, key by key (`trajschema.load.syntax`): the names it refuses, and
the forms it accepts (dims in every form, any field name, empty sections).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import trajschema as ts
from tests.loading_cases import BASE
from tests.loading_cases import edit_base as _edit
from tests.loading_support import check_refused as _check
from tests.loading_support import prefixed
from tests.loading_support import write_schema as _write

# ---------------------------------------------------------------------------
# Names


REFUSED_NAMES = [
    pytest.param(_edit("name: bad", "name: ''"), "name", "an empty schema name", id="empty-schema-name"),
    pytest.param(
        _edit("name: bad", "name: ' bad'"),
        "name",
        "schema name ' bad' has leading or trailing whitespace",
        id="schema-name-whitespace",
    ),
    pytest.param(_edit("name: bad", "name: 3"), "name", "expected a string, found an integer 3", id="schema-name-int"),
    pytest.param(_edit("name: bad", "name: [bad]"), "name", "expected a string, found a list", id="schema-name-list"),
    pytest.param(BASE + "  '': {kind: str, pad: uid}\n", "fields.''", "an empty field name", id="empty-field-name"),
    pytest.param(
        BASE + '  "a\\tb": {kind: str, pad: uid}\n',
        "fields.'a\\tb'",
        "field name 'a\\tb' contains a control character",
        id="field-name-control-char",
    ),
    pytest.param(
        BASE + "  ' x': {kind: str, pad: uid}\n",
        "fields.' x'",
        "field name ' x' has leading or trailing whitespace",
        id="field-name-whitespace",
    ),
    pytest.param(BASE + "tags:\n  '': {kind: int}\n", "tags.''", "an empty tag name", id="empty-tag-name"),
    pytest.param(
        _edit("rope_rows: 4", "séq: 4"),
        "dims.séq",
        "dim name 'séq' is not an identifier (ASCII letters, digits and _)",
        id="dim-name-non-ascii",
    ),
    pytest.param(_edit("rope_rows: 4", "'': 4"), "dims.", "dim name '' is not an identifier", id="empty-dim-name"),
    pytest.param(
        BASE + "architectures: [1, null]\n",
        "architectures[0]",
        "expected a string, found an integer 1",
        id="architecture-int",
    ),
    pytest.param(BASE + "architectures: ['']\n", "architectures[0]", "an empty architecture", id="architecture-empty"),
    pytest.param(
        BASE + "architectures: [A, A]\n",
        "architectures",
        "an architecture is listed twice: ['A', 'A']",
        id="architecture-twice",
    ),
    pytest.param(
        BASE + "architectures: {a: 1}\n",
        "architectures",
        "expected a list, found a mapping",
        id="architectures-mapping",
    ),
    pytest.param(BASE + "extends: [1]\n", "extends[0]", "expected a string, found an integer 1", id="extends-int"),
    pytest.param(BASE + "extends: ['']\n", "extends[0]", "an empty parent", id="extends-empty-string"),
    pytest.param(BASE + "extends: !!set {text}\n", "extends", "expected a list, found a set", id="extends-set"),
    pytest.param(
        BASE + "description: [1]\n", "description", "expected a string, found a list [1]", id="description-list"
    ),
    pytest.param(
        BASE + "description: 2001-01-01\n", "description", "expected a string, found date", id="description-date"
    ),
    pytest.param(
        BASE + "description: !!binary aGVsbG8=\n",
        "description",
        "expected a string, found binary data b'hello'",
        id="description-binary",
    ),
]


#: The table above under the body the other tables of malformed files share; each id is prefixed by its table.
MALFORMED_FILES = prefixed({"name": REFUSED_NAMES})


@pytest.mark.parametrize(("text", "key_path", "problem"), MALFORMED_FILES)
def test_malformed_schema(tmp_path: Path, text: str | bytes, key_path: str, problem: str) -> None:
    """A SchemaDefinitionError at load time naming the file, the key path and the problem (``file: path: problem``)."""
    _check(tmp_path, text, key_path, problem)


# ---------------------------------------------------------------------------
# What is accepted (decisions)


def test_dim_descriptions_are_kept_in_every_form(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "mine",
        "name: mine\ndims:\n"
        "  p: {min: 1, description: prompt tokens}\n"
        "  rows: {size: 3, description: t/h/w rows}\n"
        "  s: {expr: p + 1, description: p plus one}\n"
        "  bare: 4\n"
        "fields:\n  x: {shape: [rows, s, bare], dtype: int64, pad: 0}\n",
    )
    dims = ts.load_schema(path).dims
    assert dims["p"] == ts.FreeDim("p", 1, description="prompt tokens")
    assert dims["rows"] == ts.FixedDim("rows", 3, description="t/h/w rows")
    assert dims["s"].description == "p plus one" and str(dims["s"].expr) == "p + 1"
    assert dims["bare"] == ts.FixedDim("bare", 4)
    assert ts.load_schema("text").dims["prompt"].description.startswith("prompt tokens")


@pytest.mark.parametrize("name", ["a-b", "a.b", "import os", "x'); import os; ('", "日本", "_"])
def test_field_names_need_not_be_identifiers(name: str) -> None:
    """They are TransferQueue keys (any string); only empty, padded and control-character names are refused."""
    schema = ts.schema_from_dict({"name": "odd", "fields": {name: {"kind": "int", "pad": 0}}})
    assert schema.validate({name: 1}) == {}


def test_empty_sections_and_a_null_extra_are_fine(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine", "name: mine\nextends: [text]\ndims:\nfields:\ntags:\npadding:\nextra:\n")
    assert ts.load_schema(path).extra == "allow"
