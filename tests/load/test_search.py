"""Finding and composing schema files (`trajschema.load.search`): by name, path or architecture,
``extends`` and C3, the cache and reloading, `resolve_schema`, `schema_from_dict`, the wording
of the messages people read most, and a fuzzer: whatever the text, only SchemaDefinitionError.

Reading a file is `tests/files/test_reader.py`, the search path `tests/files/test_paths.py`,
what a file may say `test_syntax.py` and compiling it `test_compile.py`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajschema as ts
from tests.loading_cases import BASE, HUGE, LAUGHS
from tests.loading_cases import edit_base as _edit
from tests.loading_cases import with_field as _field
from tests.loading_support import bump_mtime as _bump_mtime
from tests.loading_support import child_schema as _child
from tests.loading_support import load_error as _load_error
from tests.loading_support import pad_and_validate as _pad_and_validate
from tests.loading_support import write_schema as _write
from trajschema.load import resolve_schema
from trajschema.testing import verl_sample

PACKAGED = ts.schema_names()
PACKAGED_DIR = ts.schema_search_path()[-1]


def _free_dim_sizes(schema: ts.Schema) -> dict[str, int]:
    """Sizes for the free dims that have no padding default (layers, topk, ...)."""
    return {
        n: max(d.min, 2) for n, d in schema.dims.items() if isinstance(d, ts.FreeDim) and n not in schema.padding_sizes
    }


def _text_sample(prompt: int = 5, response: int = 3) -> dict:
    """A sample laid out as verl's TransferQueue trainer writes a text rollout."""
    return {**verl_sample("text", prompt, response, uid="q-0001", optional=False), "multi_modal_inputs": {}}


def _mrope_sample(rows: int, prompt: int = 5, response: int = 3) -> dict:
    sample = _text_sample(prompt, response)
    seq = prompt + response
    sample["position_ids"] = torch.arange(seq, dtype=torch.int64).expand(rows, seq).clone()
    return sample


# ---------------------------------------------------------------------------
# Packaged schemas


@pytest.mark.parametrize("name", PACKAGED)
def test_every_packaged_schema_loads(name: str) -> None:
    schema = ts.load_schema(name)
    assert schema.name == name
    assert schema.lineage[0] == name
    assert schema.lineage[-1] == "text"
    assert Path(schema.source) == (PACKAGED_DIR / f"{name}.yaml").resolve()
    assert schema.fields, "a packaged schema declares fields"
    text = schema.describe()
    for field in schema.fields:
        assert field in text


@pytest.mark.parametrize("name", PACKAGED)
def test_every_packaged_schema_pads_to_valid_samples(name: str) -> None:
    schema = ts.load_schema(name)
    pad = schema.padding(3, eos_token_id=2, dims=_free_dim_sizes(schema))
    assert len(pad) == 3
    schema.validate_batch(pad.fields, tags=pad.tags)


@pytest.mark.parametrize("name", PACKAGED)
@pytest.mark.parametrize("as_path", [pytest.param(str, id="str-path"), pytest.param(Path, id="pathlib-path")])
def test_load_by_path_matches_load_by_name(name: str, as_path) -> None:
    by_name = ts.load_schema(name)
    by_path = ts.load_schema(as_path(PACKAGED_DIR / f"{name}.yaml"))
    assert by_path.name == by_name.name
    assert by_path.lineage == by_name.lineage
    assert by_path.fields == by_name.fields
    assert by_path.dims == by_name.dims
    assert by_path.padding_sizes == by_name.padding_sizes


def test_schema_names_is_sorted_and_complete() -> None:
    names = ts.schema_names()
    assert names == sorted(names)
    assert len(names) == len(set(names))
    assert {"text", "vlm_mrope", "moe_routed", "vlm_mrope_moe", "distill"} <= set(names)


def test_loading_twice_returns_the_cached_schema() -> None:
    assert ts.load_schema("text") is ts.load_schema("text")


@pytest.mark.parametrize(
    ("architecture", "name"),
    [
        pytest.param("Qwen2VLForConditionalGeneration", "vlm_mrope", id="qwen2-vl"),
        pytest.param("Qwen2_5_VLForConditionalGeneration", "vlm_mrope", id="qwen2.5-vl"),
        pytest.param("LlamaForCausalLM", "text", id="llama"),
        pytest.param("Qwen3MoeForCausalLM", "moe_routed", id="qwen3-moe"),
        pytest.param("Qwen3VLMoeForConditionalGeneration", "vlm_mrope_moe", id="qwen3-vl-moe"),
    ],
)
def test_schema_for_architecture(architecture: str, name: str) -> None:
    assert ts.schema_for_architecture(architecture).name == name


def test_unknown_architecture_suggests_a_close_match() -> None:
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.schema_for_architecture("Qwen2VLForConditionalGenerator")
    msg = str(info.value)
    assert msg.startswith(
        "no schema for architecture 'Qwen2VLForConditionalGenerator'; did you mean 'Qwen2VLForConditionalGeneration'?"
    )
    assert "TRAJSCHEMA_PATH" in msg


def test_architecture_claimed_twice_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "my_llama", "name: my_llama\nextends: [text]\narchitectures: [LlamaForCausalLM]\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    with pytest.raises(ts.SchemaNotFoundError, match=r"claimed by several schemas: .*my_llama"):
        ts.schema_for_architecture("LlamaForCausalLM")


@pytest.mark.parametrize(
    ("name", "match"),
    [
        pytest.param("vlm_mrop", r"^no schema 'vlm_mrop'; did you mean 'vlm_mrope'\? known: distill, ", id="typo"),
        pytest.param("txet", r"^no schema 'txet'; did you mean 'text'\?", id="transposition"),
        pytest.param("zzzzzz", r"^no schema 'zzzzzz' known: ", id="nothing-close"),
    ],
)
def test_unknown_schema_name(name: str, match: str) -> None:
    with pytest.raises(ts.SchemaNotFoundError, match=match):
        ts.load_schema(name)


def test_missing_schema_file(tmp_path: Path) -> None:
    with pytest.raises(ts.SchemaNotFoundError, match="no schema file at"):
        ts.load_schema(tmp_path / "absent.yaml")


class _BytesPath:
    def __fspath__(self) -> bytes:
        return b"text.yaml"


@pytest.mark.parametrize("name", [5, None, b"text", ["text"], _BytesPath()])
def test_a_name_that_is_neither_a_string_nor_a_path_is_a_type_error(name) -> None:
    """Before: os.fspath's or str.endswith's own TypeError, from inside."""
    with pytest.raises(TypeError, match=r"^name_or_path must be a schema name or a path, found "):
        ts.load_schema(name)


@pytest.mark.parametrize("architecture", [5, None, b"LlamaForCausalLM", ["LlamaForCausalLM"]], ids=repr)
def test_an_architecture_that_is_not_a_string_is_a_type_error(architecture) -> None:
    with pytest.raises(TypeError, match=r"^architecture must be a str, found "):
        ts.schema_for_architecture(architecture)


# ---------------------------------------------------------------------------
# extends and C3


def test_vlm_mrope_moe_composes_its_parents() -> None:
    schema = ts.load_schema("vlm_mrope_moe")
    assert schema.lineage == ("vlm_mrope_moe", "vlm_mrope", "moe_routed", "text")
    # position_ids comes from vlm_mrope (2-D), not from text (1-D) via moe_routed.
    assert tuple(str(e) for e in schema.fields["position_ids"].shape) == ("rope_rows", "seq")
    assert schema.dims["rope_rows"] == ts.FixedDim("rope_rows", 4)
    assert tuple(str(e) for e in schema.fields["routed_experts"].shape) == ("seq", "layers", "topk")
    assert schema.fields["routed_experts"].dtypes == (torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16)
    # vlm_mrope makes multi_modal_inputs required; text declares it optional.
    assert schema.fields["multi_modal_inputs"].required
    assert not ts.load_schema("text").fields["multi_modal_inputs"].required


def test_a_child_field_replaces_the_inherited_entry_whole(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "child",
        "name: child\nextends: [text]\nfields:\n  attention_mask: {shape: [seq], dtype: int32, pad: 1}\n",
    )
    child = ts.load_schema(path).fields["attention_mask"]
    parent = ts.load_schema("text").fields["attention_mask"]
    assert parent.required is False
    assert parent.values == (0, 1)
    # Nothing of the parent's entry survives: required falls back to its default, values to None.
    assert child.required is True
    assert child.values is None
    assert child.dtypes == (torch.int32,)


def test_a_partial_child_field_is_not_merged_with_the_parent(tmp_path: Path) -> None:
    path = _write(tmp_path, "child", "name: child\nextends: [text]\nfields:\n  response_mask: {pad: 1}\n")
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(path)
    assert info.value.source == str(path)
    assert info.value.path == "fields.response_mask"
    assert "needs both shape and dtype" in info.value.problem


def test_lineage_follows_c3_order(tmp_path: Path) -> None:
    _write(tmp_path, "left", "name: left\nextends: [text]\n")
    _write(tmp_path, "right", "name: right\nextends: [text]\n")
    child = _write(tmp_path, "child", "name: child\nextends: [left, right]\n")
    assert ts.load_schema(child).lineage == ("child", "left", "right", "text")


def test_inconsistent_parent_order_is_an_error(tmp_path: Path) -> None:
    _write(tmp_path, "left", "name: left\nextends: [text]\n")
    child = _write(tmp_path, "child", "name: child\nextends: [text, left]\n")
    with pytest.raises(ts.SchemaDefinitionError, match="no C3 linearization"):
        ts.load_schema(child)


_CONFLICTS = [
    pytest.param(
        "fields",
        "extra_ids",
        "fields:\n  extra_ids: {shape: [seq], dtype: int64, pad: 0}\n",
        "fields:\n  extra_ids: {shape: [seq], dtype: int32, pad: 0}\n",
        "field",
        id="field",
    ),
    pytest.param("dims", "vocab", "dims:\n  vocab: 10\n", "dims:\n  vocab: 12\n", "dim", id="dim"),
    pytest.param(
        "padding", "prompt", "padding:\n  prompt: 3\n", "padding:\n  prompt: 5\n", "padding size", id="padding"
    ),
    pytest.param("tags", "source", "tags:\n  source: {kind: str}\n", "tags:\n  source: {kind: int}\n", "tag", id="tag"),
]


@pytest.mark.parametrize(("section", "key", "left", "right", "what"), _CONFLICTS)
def test_unrelated_parents_that_disagree_conflict(
    tmp_path: Path, section: str, key: str, left: str, right: str, what: str
) -> None:
    _write(tmp_path, "left", f"name: left\nextends: [text]\n{left}")
    _write(tmp_path, "right", f"name: right\nextends: [text]\n{right}")
    child = _write(tmp_path, "child", "name: child\nextends: [left, right]\n")
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(child)
    assert str(info.value) == (
        f"{child}: {section}.{key}: parents left and right declare {what} {key!r} differently; "
        f"declare it in 'child' to choose"
    )


@pytest.mark.parametrize(("section", "key", "left", "right", "what"), _CONFLICTS)
def test_the_child_resolves_a_conflict_by_declaring_the_key(
    tmp_path: Path, section: str, key: str, left: str, right: str, what: str
) -> None:
    _write(tmp_path, "left", f"name: left\nextends: [text]\n{left}")
    _write(tmp_path, "right", f"name: right\nextends: [text]\n{right}")
    child = _write(tmp_path, "child", f"name: child\nextends: [left, right]\n{right}")
    schema = ts.load_schema(child)
    right_schema = ts.load_schema(tmp_path / "right.yaml")
    attr = {"fields": "fields", "dims": "dims", "padding": "padding_sizes", "tags": "tags"}[section]
    assert getattr(schema, attr)[key] == getattr(right_schema, attr)[key]
    assert getattr(schema, attr)[key] != getattr(ts.load_schema(tmp_path / "left.yaml"), attr)[key]


@pytest.mark.parametrize(("section", "key", "left", "right", "what"), _CONFLICTS)
def test_parents_that_agree_do_not_conflict(
    tmp_path: Path, section: str, key: str, left: str, right: str, what: str
) -> None:
    _write(tmp_path, "left", f"name: left\nextends: [text]\n{left}")
    _write(tmp_path, "right", f"name: right\nextends: [text]\n{left}")
    child = _write(tmp_path, "child", "name: child\nextends: [left, right]\n")
    assert ts.load_schema(child).lineage == ("child", "left", "right", "text")


@pytest.mark.parametrize(
    ("files", "load", "match"),
    [
        pytest.param(
            {"a": "name: a\nextends: [b]\n", "b": "name: b\nextends: [a]\n"},
            "a",
            r"extends: cycle in extends: a -> b -> a$",
            id="two-files",
        ),
        pytest.param({"c": "name: c\nextends: [c]\n"}, "c", r"extends: cycle in extends: c -> c$", id="self"),
        pytest.param(
            {"a": "name: a\nextends: [b]\n", "b": "name: b\nextends: [c]\n", "c": "name: c\nextends: [a]\n"},
            "a",
            r"extends: cycle in extends: a -> b -> c -> a$",
            id="three-files",
        ),
    ],
)
def test_cycle_in_extends(tmp_path: Path, files: dict[str, str], load: str, match: str) -> None:
    for name, text in files.items():
        _write(tmp_path, name, text)
    with pytest.raises(ts.SchemaDefinitionError, match=match):
        ts.load_schema(tmp_path / f"{load}.yaml")


def test_unknown_parent_suggests_a_close_match(tmp_path: Path) -> None:
    path = _write(tmp_path, "child", "name: child\nextends: [vlm_mrop]\n")
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(path)
    # at the extends: key (line 2, column 1): the problem is the list's
    assert str(info.value) == f"{path}:2:1: extends: unknown parent schema 'vlm_mrop'; did you mean 'vlm_mrope'?"


def test_a_parent_listed_twice_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, "child", "name: child\nextends: [text, text]\n")
    with pytest.raises(ts.SchemaDefinitionError, match=r"^.*: extends: a parent is listed twice: \['text', 'text'\]$"):
        ts.load_schema(path)


def test_an_error_in_a_parent_names_the_parent_file(tmp_path: Path) -> None:
    parent = _write(
        tmp_path, "base", "name: base\nextends: [text]\nfields:\n  extra_ids: {shape: [seq], dtype: int64, pad: eso}\n"
    )
    child = _write(tmp_path, "child", "name: child\nextends: [base]\n")
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(child)
    assert info.value.source == str(parent)
    assert info.value.path == "fields.extra_ids.pad"


def test_a_malformed_parent_names_the_parent_file(tmp_path: Path) -> None:
    parent = _write(tmp_path, "base", "name: base\nextends: [text]\nfeilds: {}\n")
    child = _write(tmp_path, "child", "name: child\nextends: [base]\n")
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(child)
    assert info.value.source == str(parent)


def test_schema_from_dict(tmp_path: Path) -> None:
    _write(tmp_path, "base", "name: base\nextends: [text]\ndims:\n  vocab: 7\n")
    schema = ts.schema_from_dict({"name": "mine", "extends": "base"}, base_dir=tmp_path)
    assert schema.lineage == ("mine", "base", "text")
    assert schema.dims["vocab"] == ts.FixedDim("vocab", 7)
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_from_dict({"name": "mine", "dims": {"seq": "prompt +"}})
    assert info.value.source == "<mapping>"
    assert info.value.path == "dims.seq"


# ---------------------------------------------------------------------------
# Adding a model family needs only a YAML file


MY_VLM = """\
name: my_vlm
description: a VLM whose trainer writes only the t/h/w rows of position_ids
extends: [vlm_mrope]
dims:
  rope_rows: 3
fields:
  mm_token_type_ids: {shape: [seq], dtype: int64, values: [0, 1, 2], pad: 0}
"""


@pytest.fixture
def my_vlm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ts.Schema:
    _write(tmp_path, "my_vlm", MY_VLM)
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    return ts.load_schema("my_vlm")


def test_a_new_family_is_found_on_trajschema_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path, "my_vlm", MY_VLM)
    monkeypatch.delenv("TRAJSCHEMA_PATH", raising=False)
    assert "my_vlm" not in ts.schema_names()
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    names = ts.schema_names()
    assert "my_vlm" in names
    assert names == sorted(names)
    assert ts.schema_search_path()[0] == tmp_path


def test_a_new_family_loads_by_name(my_vlm: ts.Schema) -> None:
    assert my_vlm.name == "my_vlm"
    assert my_vlm.lineage == ("my_vlm", "vlm_mrope", "text")
    assert my_vlm.dims["rope_rows"] == ts.FixedDim("rope_rows", 3)
    assert tuple(str(e) for e in my_vlm.fields["position_ids"].shape) == ("rope_rows", "seq")
    assert my_vlm.fields["mm_token_type_ids"].values == (0, 1, 2)
    # The parent is untouched.
    assert ts.load_schema("vlm_mrope").dims["rope_rows"] == ts.FixedDim("rope_rows", 4)


def test_a_new_family_pads_to_valid_samples(my_vlm: ts.Schema) -> None:
    pad = my_vlm.padding(4, eos_token_id=0)
    assert len(pad.samples) == 4
    for sample, tag in zip(pad.samples, pad.tags):
        assert tuple(sample["position_ids"].shape) == (3, pad.dims["seq"])
        assert tuple(sample["mm_token_type_ids"].shape) == (pad.dims["seq"],)
        my_vlm.validate(sample, tag=tag)


def test_a_new_family_validates_a_realistic_sample(my_vlm: ts.Schema) -> None:
    sample = _mrope_sample(rows=3, prompt=5, response=3)
    sample["mm_token_type_ids"] = torch.tensor([0, 1, 1, 2, 0, 0, 0, 0], dtype=torch.int64)
    assert my_vlm.validate(sample) == {"prompt": 5, "response": 3, "seq": 8, "rope_rows": 3}


def test_a_new_family_rejects_four_rope_rows(my_vlm: ts.Schema) -> None:
    sample = _mrope_sample(rows=4, prompt=5, response=3)
    sample["mm_token_type_ids"] = torch.zeros(8, dtype=torch.int64)
    with pytest.raises(ts.SchemaError) as info:
        my_vlm.validate(sample)
    assert [(v.field, v.code) for v in info.value.violations] == [("position_ids", "shape")]
    # ... which the packaged parent accepts.
    del sample["mm_token_type_ids"]
    assert ts.load_schema("vlm_mrope").validate(sample)["rope_rows"] == 4


def test_a_new_family_checks_its_declared_values(my_vlm: ts.Schema) -> None:
    sample = _mrope_sample(rows=3)
    sample["mm_token_type_ids"] = torch.tensor([0, 1, 3, 0, 0, 0, 0, 0], dtype=torch.int64)
    with pytest.raises(ts.SchemaError) as info:
        my_vlm.validate(sample)
    assert [(v.field, v.code) for v in info.value.violations] == [("mm_token_type_ids", "value")]


# ---------------------------------------------------------------------------
# Exact wording of the messages people read most (jaxtyping's test_messages idea)


MESSAGES = [
    pytest.param(
        _edit("pad: eos", "pad: eso"),
        "{at}: fields.input_ids.pad: unknown pad rule 'eso'; did you mean 'eos'? "
        "(known: eos, positions, uid, index, empty, copy)",
        id="pad-rule-typo",
    ),
    pytest.param(
        _edit("int64", "int"),
        "{at}: fields.input_ids.dtype: ambiguous dtype 'int'; did you mean int64 "
        "(torch.int is int32; say int32 if that is meant)?",
        id="dtype-int",
    ),
    pytest.param(
        _edit("[seq]", "['prompt, response']"),
        "{at}: fields.input_ids.shape[0]: dim expression 'prompt, response' contains a comma; "
        "list each dim as its own item: [prompt, response]",
        id="comma",
    ),
    pytest.param(
        _edit("[seq]", "[sq]"),
        "{at}: fields.input_ids.shape[0]: unknown dim 'sq'; did you mean 'seq'? "
        "(known: prompt, response, seq, rope_rows); declare it under dims:",
        id="unknown-dim",
    ),
    pytest.param(
        _edit("pad: eos}", "pad: eos, requried: false}"),
        "{at}: fields.input_ids: unknown key 'requried'; did you mean 'required'?",
        id="field-key-typo",
    ),
    pytest.param(
        _edit("fields:", "feilds:"),
        "{at}: unknown key 'feilds'; did you mean 'fields'?",
        id="top-level-key-typo",
    ),
    pytest.param(
        _edit("pad: eos}", "pad: eos, pad: 0}"),
        "{at}: fields.input_ids.pad: key 'pad' is given twice (line 8, columns 43 and 53); "
        "YAML would keep only the last",
        id="duplicate-key",
    ),
    pytest.param(
        BASE + "  y: {<<: {kind: int}, pad: 0}\n",
        "{at}: fields.y.<<: YAML merge keys (<<, line 10) are not supported: they override keys silently; "
        "write the entry out, or reuse a whole entry with an alias (*name)",
        id="merge-key",
    ),
    pytest.param(
        BASE + "architectures: &x [*x]\n",
        "{at}: architectures[0]: contains itself (as a YAML alias inside its own anchor does: a: &x [*x])",
        id="self-alias",
    ),
    pytest.param(
        LAUGHS,
        "{file}: expands to more than 100000 values (aliases of aliases?); a schema needs hundreds",
        id="billion-laughs",
    ),
    pytest.param(
        "name: bad\ndescription: " + "[" * 100,
        "{at}: nested more than 16 levels deep; a schema needs 5",
        id="deep-nesting",
    ),
    pytest.param(
        "name: bad\ndescription: café\n".encode("latin-1"),
        "{at}: not UTF-8 text: byte 0xe9 at offset 26 (invalid continuation byte); schema files are UTF-8",
        id="not-utf8",
    ),
    pytest.param(
        "", "{file}: expected a mapping at the top level (name:, fields:, ...), found an empty file", id="empty-file"
    ),
    pytest.param(
        BASE + "  null: {kind: str, pad: uid}\n",
        "{at}: fields: key null on line 10 is null, not a string; quote it if a name is meant "
        "(YAML reads 1, null, true, on, off, yes and no as numbers, null and booleans)",
        id="null-key",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int8, pad: 300"),
        "{at}: fields.x.pad: fill 300 does not fit dtype int8: int8 holds -128..127",
        id="pad-int8",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: true"),
        "{at}: fields.x.pad: fill true does not fit dtype int64: a boolean fills only a bool tensor; "
        "write 1 for the number",
        id="pad-bool-on-int",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.1"),
        "{at}: fields.x.pad: fill 0.1 does not fit dtype float32: not exactly a float32 value "
        "(the nearest is 0.10000000149011612)",
        id="pad-inexact-float",
    ),
    pytest.param(
        _edit("rope_rows: 4", f"rope_rows: {HUGE}"),
        f"{{at}}: dims.rope_rows: a fixed dim of {HUGE} is larger than 2**63 - 1, the largest size torch can hold",
        id="huge-fixed-dim",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, min: .nan"),
        "{at}: fields.x.min: min must be finite, found nan; leave min out for no bound",
        id="nan-min",
    ),
]


@pytest.mark.parametrize(("text", "message"), MESSAGES)
def test_message_wording(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, "bad", text)
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(path)
    err = info.value
    assert ("{at}" in message) == (err.line is not None), str(err)
    assert str(err) == message.format(file=path, at=f"{path}:{err.line}:{err.column}")


# ---------------------------------------------------------------------------
# Reloading


def test_editing_a_file_reloads_it(tmp_path: Path) -> None:
    path = _write(
        tmp_path, "mine", "name: mine\nextends: [text]\nfields:\n  extra_ids: {shape: [seq], dtype: int64, pad: 0}\n"
    )
    first = ts.load_schema(path)
    assert first.fields["extra_ids"].dtypes == (torch.int64,)
    path.write_text(path.read_text().replace("int64", "int32"), encoding="utf-8")
    _bump_mtime(path)
    second = ts.load_schema(path)
    assert second is not first
    assert second.fields["extra_ids"].dtypes == (torch.int32,)


def test_editing_a_file_into_an_error_reports_it(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine", "name: mine\nextends: [text]\n")
    ts.load_schema(path)
    path.write_text("name: mine\nextends: [text]\nfeilds: {}\n", encoding="utf-8")
    _bump_mtime(path)
    with pytest.raises(ts.SchemaDefinitionError, match=re.escape("unknown key 'feilds'")):
        ts.load_schema(path)


def test_editing_a_parent_file_reloads_the_child(tmp_path: Path) -> None:
    parent = _write(
        tmp_path, "base", "name: base\nextends: [text]\nfields:\n  extra_ids: {shape: [seq], dtype: int64, pad: 0}\n"
    )
    child = _write(tmp_path, "child", "name: child\nextends: [base]\n")
    assert ts.load_schema(child).fields["extra_ids"].dtypes == (torch.int64,)
    parent.write_text(parent.read_text().replace("int64", "int32"), encoding="utf-8")
    _bump_mtime(parent)
    assert ts.load_schema(parent).fields["extra_ids"].dtypes == (torch.int32,)
    assert ts.load_schema(child).fields["extra_ids"].dtypes == (torch.int32,)


# ---------------------------------------------------------------------------
# Search-path honesty (issue 15): a file found by name declares that name; a path
# the file system refuses is not found


def test_a_file_found_by_name_must_declare_that_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `list` showed typo3, `load_schema("typo3")` gave schema 'other' and 'other' was not found."""
    path = _write(tmp_path, "typo3", "name: other\nextends: [text]\narchitectures: [TypoForCausalLM]\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    assert "typo3" in ts.schema_names() and "other" not in ts.schema_names()
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema("typo3")
    err = info.value
    assert (err.source, err.path) == (str(path), "name")
    assert err.problem.startswith("this file is found as 'typo3' (its file name) but declares name 'other'; ")
    with pytest.raises(ts.SchemaNotFoundError, match=r"^no schema 'other'"):
        ts.load_schema("other")
    # By architecture it is found by name too, so the same rule holds; by path any name is fine.
    with pytest.raises(ts.SchemaDefinitionError, match="declares name 'other'"):
        ts.schema_for_architecture("TypoForCausalLM")
    assert ts.load_schema(path).name == "other"


def test_a_file_that_declares_its_own_name_loads_by_name_and_by_path_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, "mine", "name: mine\nextends: [text]\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    assert ts.load_schema("mine") is ts.load_schema(path)


def test_a_long_path_is_shown_cut_and_one_the_file_system_refuses_is_not_found(tmp_path: Path) -> None:
    refused = str(tmp_path / ("x" * 5000 + ".yaml"))  # longer than any file name may be
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema(refused)
    assert str(info.value) == f"no schema file at {refused[:60]!r}…({len(refused)} chars): File name too long"
    deep = tmp_path.joinpath(*["d" * 200] * 6, "absent.yaml")  # each part allowed, the whole not there
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema(deep)
    assert str(info.value).startswith(f"no schema file at {str(deep)[:1000]!r}…({len(str(deep))} chars)")


# ---------------------------------------------------------------------------
# resolve_schema: one way to take "a Schema or a schema name"


class _RaisingPath:
    def __fspath__(self) -> str:
        raise RuntimeError("a path that cannot say where it is")


def test_resolve_schema_takes_a_schema_a_name_or_a_path() -> None:
    text = ts.load_schema("text")
    assert resolve_schema(text) is text
    assert resolve_schema("text") is text
    assert resolve_schema(PACKAGED_DIR / "text.yaml") is text
    assert resolve_schema(str(PACKAGED_DIR / "text.yaml")) is text


@pytest.mark.parametrize(
    ("value", "found"),
    [
        (3, "int 3"),
        (None, "NoneType"),
        (b"text", "bytes"),
        (["text"], "list of 1"),
        (_BytesPath(), "tests._BytesPath"),  # a type is named by its top-level package
    ],
    ids=["int", "none", "bytes", "list", "bytes-path"],
)
def test_resolve_schema_names_what_it_was_given_instead(value, found) -> None:
    with pytest.raises(TypeError) as info:
        resolve_schema(value)
    assert str(info.value) == f"schema must be a trajschema.Schema or a schema name, found {found}"
    with pytest.raises(TypeError, match=r"^base must be a trajschema\.Schema or a schema name, found "):
        resolve_schema(value, argument="base")


def test_a_path_whose_fspath_fails_is_no_name() -> None:
    """Before: the object's own RuntimeError, from inside load_schema."""
    with pytest.raises(TypeError, match=r"found \S*_RaisingPath$"):
        resolve_schema(_RaisingPath())
    with pytest.raises(TypeError, match=r"^name_or_path must be a schema name or a path, found _RaisingPath$"):
        ts.load_schema(_RaisingPath())


def test_resolve_schema_refuses_an_unknown_name_as_load_schema_does() -> None:
    with pytest.raises(ts.SchemaNotFoundError, match=r"^no schema 'txet'; did you mean 'text'\?"):
        resolve_schema("txet")


def test_every_taker_of_a_schema_or_a_name_resolves_it_the_same_way(tmp_path: Path) -> None:
    """The contract, @checked and infer_schema: one resolution, so one set of accepted values and refusals."""
    real = verl_sample("text", 5, 3, uid="q0")
    path = PACKAGED_DIR / "text.yaml"
    assert ts.padding_contract_violations([real], None, path) == []
    assert ts.checked(path, arg="sample")(lambda sample: "ran")(real) == "ran"
    assert ts.infer_schema([real], name="draft", base=path).lineage[1] == "text"
    takers = {
        "contract": lambda v: ts.padding_contract_violations([real], None, v),
        "checked": lambda v: ts.checked(v),
        "infer": lambda v: ts.infer_schema([real], name="draft", base=v),
    }
    for take in takers.values():
        with pytest.raises(TypeError, match=r"found int 3"):
            take(3)
        with pytest.raises(ts.SchemaNotFoundError, match=r"did you mean 'text'\?"):
            take("txet")
        with pytest.raises(ts.SchemaNotFoundError, match=re.escape("(5000 chars)")):
            take("x" * 5000)


# ---------------------------------------------------------------------------
# A malformed file on the path


def test_a_malformed_file_on_the_path_fails_architecture_lookup_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: ``architecture in 3`` raised TypeError.
    path = _write(tmp_path, "weird", "name: weird\narchitectures: 3\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_for_architecture("LlamaForCausalLM")
    assert str(info.value) == f"{path}:2:16: architectures: expected a list, found an integer 3"  # at the 3


# ---------------------------------------------------------------------------
# extends: cycles through names and files, name clashes, depth


def test_a_file_that_extends_itself(tmp_path: Path) -> None:
    path = _write(tmp_path, "c", "name: c\nextends: [c]\n")
    err = _load_error(path)
    assert (err.path, err.problem) == ("extends", "cycle in extends: c -> c")


def test_two_files_that_extend_each_other(tmp_path: Path) -> None:
    _write(tmp_path, "b", "name: b\nextends: [a]\n")
    a = _write(tmp_path, "a", "name: a\nextends: [b]\n")
    err = _load_error(a)
    assert err.source == str(tmp_path / "b.yaml")  # the file whose extends closes the cycle
    assert (err.path, err.problem) == ("extends", "cycle in extends: a -> b -> a")


def test_a_file_named_differently_that_extends_its_own_file_name(tmp_path: Path) -> None:
    # Before: RecursionError (the file was found again under its file name, forever).
    path = _write(tmp_path, "foo", "name: bar\nextends: [foo]\n")
    err = _load_error(path)
    assert err.source == str(path)
    assert (err.path, err.problem) == (
        "extends",
        "cycle in extends: bar -> foo (foo.yaml, found as 'foo', is the file of 'bar')",
    )


def test_a_parent_whose_name_is_not_its_file_name(tmp_path: Path) -> None:
    # Before: KeyError 'notp' while composing.
    parent = _write(tmp_path, "p", "name: notp\nextends: [text]\n")
    child = _write(tmp_path, "c", "name: c\nextends: [p]\n")
    err = _load_error(child)
    assert err.source == str(parent)
    assert (err.path, err.problem) == (
        "name",
        "this file is found as 'p' (its file name) but declares name 'notp'; a parent's name must be its file name",
    )


def test_a_schema_named_like_the_parent_it_extends(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine", "name: text\nextends: [text]\n")
    err = _load_error(path)
    packaged = ts.schema_search_path()[-1] / "text.yaml"
    assert (err.path, err.problem) == (
        "extends",
        f"two schemas are named 'text': {path} and {packaged.resolve()}, which it extends",
    )


def test_a_mapping_named_like_the_parent_it_extends() -> None:
    with pytest.raises(
        ts.SchemaDefinitionError, match=r"^<mapping>: extends: two schemas are named 'text': the mapping"
    ):
        ts.schema_from_dict({"name": "text", "extends": ["text"]})


def test_two_parents_of_one_name_in_different_directories(tmp_path: Path) -> None:
    """``base`` beside ``left`` and another ``base`` beside ``right``: not silently the first one."""
    (tmp_path / "l").mkdir()
    (tmp_path / "r").mkdir()
    _write(tmp_path / "l", "base", "name: base\nextends: [text]\n")
    right_base = _write(tmp_path / "r", "base", "name: base\nextends: [text]\ndims: {k: 2}\n")
    _write(tmp_path / "l", "left", "name: left\nextends: [base]\n")
    right = _write(tmp_path / "r", "right", "name: right\nextends: [base]\n")
    child = _write(tmp_path / "l", "child", "name: child\nextends: [left, right]\n")
    os.symlink(right, tmp_path / "l" / "right.yaml")
    err = _load_error(child)
    assert err.path == "extends"
    assert err.problem == f"two schemas are named 'base': {tmp_path / 'l' / 'base.yaml'} and {right_base}"


def test_a_very_long_extends_chain(tmp_path: Path) -> None:
    for i in range(100):
        _write(tmp_path, f"s{i}", f"name: s{i}\nextends: [s{i + 1}]\n" if i < 99 else f"name: s{i}\n")
    err = _load_error(tmp_path / "s0.yaml")
    assert (err.path, err.problem) == ("extends", "extends chains more than 64 schemas deep")


def test_a_long_chain_below_the_limit_loads(tmp_path: Path) -> None:
    for i in range(40):
        _write(tmp_path, f"s{i}", f"name: s{i}\nextends: [s{i + 1}]\n" if i < 39 else "name: s39\nextends: [text]\n")
    assert len(ts.load_schema(tmp_path / "s0.yaml").lineage) == 41


# ---------------------------------------------------------------------------
# extends: parents that declare a key differently name the file that joins them
# (the other files named by a check across extends are `test_compile.py`'s)


def test_a_conflict_brought_in_by_a_parent_names_that_parent(tmp_path: Path) -> None:
    _child(tmp_path, "dims: {vocab: 10}\n", "left")
    _child(tmp_path, "dims: {vocab: 12}\n", "right")
    middle = _child(tmp_path, "", "middle", parents="left, right")
    child = _child(tmp_path, "description: adds nothing\n", parents="middle")
    err = _load_error(child)
    assert (err.source, err.path) == (str(middle), "dims.vocab")  # before: child.yaml, 'declare it in child'
    assert err.problem == "parents left and right declare dim 'vocab' differently; declare it in 'middle' to choose"


def test_a_conflict_between_an_ancestor_and_a_parent_names_the_file_that_joins_them(tmp_path: Path) -> None:
    _child(tmp_path, "padding: {prompt: 3}\n", "left")
    _child(tmp_path, "description: passes it on\n", "middle", parents="left")
    _child(tmp_path, "padding: {prompt: 5}\n", "right")
    child = _child(tmp_path, "", parents="middle, right")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "padding.prompt")
    assert (
        err.problem
        == "ancestors left and right declare padding size 'prompt' differently; declare it in 'child' to choose"
    )


# ---------------------------------------------------------------------------
# schema_from_dict: Python structures YAML cannot even write


def _self_list() -> list:
    x: list = []
    x.append(x)
    return x


def _deep(n: int) -> dict:
    d: dict = {}
    for _ in range(n):
        d = {"a": d}
    return d


def _laughs() -> list:
    x: list = ["x"] * 10
    for _ in range(8):
        x = [x] * 10
    return x


REFUSED_MAPPINGS = [
    pytest.param([("name", "x")], "", "expected a mapping at the top level", id="not-a-mapping"),
    pytest.param(None, "", "found an empty file", id="none"),
    pytest.param({"name": "x", "architectures": _self_list()}, "architectures[0]", "contains itself", id="self-list"),
    pytest.param({"name": "x", "description": _deep(10_000)}, "description" + ".a" * 15, "nested more than", id="deep"),
    pytest.param({"name": "x", "architectures": _laughs()}, "", "expands to more than", id="laughs"),
    pytest.param({"name": "x", "fields": {1: {}}}, "fields", "key 1 is an integer, not a string", id="int-key"),
    pytest.param({"name": "x", 2: 3}, "", "key 2 is an integer, not a string", id="int-key-top-level"),
    pytest.param(
        {"name": "x", "dims": {"n": {}}, "fields": {"a": {"shape": {"n"}, "dtype": "int64", "pad": 0}}},
        "fields.a.shape",
        "expected a list, found a set {'n'}",
        id="set-shape",
    ),
    pytest.param(
        {"name": "x", "fields": {"a": {"kind": "float", "pad": 0, "max": -(10**5000)}}},
        "fields.a.pad",
        "fill 0 must itself pass the field's value checks (be <= max <an integer of 5001 digits>)",
        id="int-of-5000-digits",
    ),
    pytest.param(
        {"name": "x", "fields": {"a": {"kind": "int", "pad": object()}}},
        "fields.a.pad",
        "expected a number or a pad rule",
        id="object-pad",
    ),
    pytest.param({"name": b"x"}, "name", "expected a string, found binary data b'x'", id="bytes-name"),
]


@pytest.mark.parametrize(("data", "key_path", "problem"), REFUSED_MAPPINGS)
def test_schema_from_dict_refuses_a_malformed_mapping(data, key_path: str, problem: str) -> None:
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_from_dict(data)
    err = info.value
    assert err.source == "<mapping>"
    assert err.path == key_path
    assert problem in err.problem, err.problem


# ---------------------------------------------------------------------------
# What is accepted (decisions)


def test_the_bare_and_mapping_forms_of_a_dim_do_not_conflict(tmp_path: Path) -> None:
    _write(tmp_path, "left", "name: left\nextends: [text]\ndims: {k: 4}\n")
    _write(tmp_path, "right", "name: right\nextends: [text]\ndims: {k: {size: 4}}\n")
    child = _write(tmp_path, "child", "name: child\nextends: [left, right]\n")
    assert ts.load_schema(child).dims["k"] == ts.FixedDim("k", 4)


def test_a_child_that_fixes_an_inherited_free_dim_drops_its_padding_size(tmp_path: Path) -> None:
    path = _write(tmp_path, "child", "name: child\nextends: [text]\ndims:\n  prompt: 4\n")
    schema = ts.load_schema(path)
    assert schema.padding_sizes == {"response": 1}
    pad = schema.padding(2, eos_token_id=0)
    assert tuple(pad.samples[0]["prompts"].shape) == (4,)


# ---------------------------------------------------------------------------
# Fuzz: whatever the text, only SchemaDefinitionError; whatever loads, pads and validates
# (the fuzzer of declarations rather than text is `test_compile.py`'s)


_FUZZ_BASE = """\
name: fz
dims:
  prompt: {min: 1, description: p}
  response: {}
  seq: prompt + response
  rope_rows: 4
fields:
  input_ids: {shape: [seq], dtype: int64, pad: eos}
  mask: {shape: [rope_rows, seq], dtype: [int8, bool], values: [0, 1], pad: 0, min: 0, max: 1}
  f: {shape: [response], dtype: float16, pad: 0.5, finite: true}
  uid: {kind: str, pad: uid}
  n: {kind: int, pad: index, min: 0}
tags:
  plen: {equals: prompt}
  is_padding: {kind: bool, default: false}
padding: {prompt: 3, response: 1}
extra: forbid
"""


@settings(suppress_health_check=list(HealthCheck))
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(_FUZZ_BASE)),
            st.integers(0, 4),
            st.text(alphabet="[]{}:,-&*!|>'\"#\n 0123456789.eabn<~%@`\t\\", max_size=4),
        ),
        max_size=4,
    )
)
def test_mangled_text_raises_only_schema_definition_errors(tmp_path_factory, edits) -> None:
    text = _FUZZ_BASE
    for pos, cut, insert in edits:
        pos = min(pos, len(text))
        text = text[:pos] + insert + text[pos + cut :]
    path = _write(tmp_path_factory.mktemp("fz"), "fz", text)
    try:
        schema = ts.load_schema(path)
    except (ts.SchemaDefinitionError, ts.SchemaNotFoundError):
        return
    _pad_and_validate(schema)
