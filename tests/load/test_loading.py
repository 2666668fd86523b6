"""Finding, parsing, composing (``extends``) and compiling schema files."""

from __future__ import annotations

import os
import pickle
import re
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from loading_cases import BASE
from loading_cases import edit_base as _edit

import trajschema as ts
from trajschema.load import resolve_schema, shown_name
from trajschema.testing import verl_sample

PACKAGED = ts.schema_names()
PACKAGED_DIR = ts.schema_search_path()[-1]


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path.resolve()


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


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


@pytest.mark.parametrize("name", [5, None, b"text", ["text"], _BytesPath()], ids=repr)
def test_a_name_that_is_neither_a_string_nor_a_path_is_a_type_error(name) -> None:
    """Before: os.fspath's or str.endswith's own TypeError, from inside."""
    with pytest.raises(TypeError, match=r"^name_or_path must be a schema name or a path, found "):
        ts.load_schema(name)


@pytest.mark.parametrize("architecture", [5, None, b"LlamaForCausalLM", ["LlamaForCausalLM"]], ids=repr)
def test_an_architecture_that_is_not_a_string_is_a_type_error(architecture) -> None:
    with pytest.raises(TypeError, match=r"^architecture must be a str, found "):
        ts.schema_for_architecture(architecture)


def test_schema_not_found_error_is_a_lookup_error() -> None:
    assert issubclass(ts.SchemaNotFoundError, LookupError)
    assert ts.SchemaNotFoundError.__module__ == "trajschema"


# ---------------------------------------------------------------------------
# extends and C3


def test_vlm_mrope_moe_composes_its_parents() -> None:
    schema = ts.load_schema("vlm_mrope_moe")
    assert schema.lineage == ("vlm_mrope_moe", "vlm_mrope", "moe_routed", "text")
    # position_ids comes from vlm_mrope (2-D), not from text (1-D) via moe_routed.
    assert tuple(str(e) for e in schema.fields["position_ids"].shape) == ("rope_rows", "seq")
    assert schema.dims["rope_rows"] == ts.FixedDim("rope_rows", 4)
    assert tuple(str(e) for e in schema.fields["routed_experts"].shape) == ("seq", "layers", "topk")
    assert schema.fields["routed_experts"].dtypes == (torch.int16, torch.int32, torch.int64)
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
    assert str(info.value) == f"{path}: extends: unknown parent schema 'vlm_mrop'; did you mean 'vlm_mrope'?"


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


def test_trajschema_path_overrides_a_packaged_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    override = _write(tmp_path, "text", (PACKAGED_DIR / "text.yaml").read_text(encoding="utf-8"))
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    assert ts.schema_names().count("text") == 1
    assert Path(ts.load_schema("text").source) == override


# ---------------------------------------------------------------------------
# Malformed schema files: file, key path and problem in every message

MALFORMED = [
    pytest.param(
        _edit("[seq]", "[sq]"),
        "fields.input_ids.shape[0]",
        "unknown dim 'sq'; did you mean 'seq'?",
        id="unknown-dim-in-shape",
    ),
    pytest.param(
        _edit("int64", "flaot32"),
        "fields.input_ids.dtype",
        "unknown dtype 'flaot32'; did you mean 'float32'?",
        id="unknown-dtype",
    ),
    pytest.param(
        _edit("int64", "int"), "fields.input_ids.dtype", "ambiguous dtype 'int'; did you mean int64", id="dtype-int"
    ),
    pytest.param(
        _edit("int64", "long"), "fields.input_ids.dtype", "ambiguous dtype 'long'; did you mean int64?", id="dtype-long"
    ),
    pytest.param(
        _edit("int64", "float"),
        "fields.input_ids.dtype",
        "ambiguous dtype 'float'; did you mean float32",
        id="dtype-float",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: []"),
        "fields.input_ids.dtype",
        "an empty dtype list allows nothing",
        id="dtype-empty-list",
    ),
    pytest.param(
        _edit("pad: eos", "pad: eso"),
        "fields.input_ids.pad",
        "unknown pad rule 'eso'; did you mean 'eos'?",
        id="unknown-pad-rule",
    ),
    pytest.param(
        _edit(", pad: eos", ""), "fields.input_ids.pad", "field 'input_ids' has no pad rule", id="missing-pad-rule"
    ),
    pytest.param(
        _edit("kind: str", "kind: string"),
        "fields.uid.kind",
        "unknown kind 'string'; did you mean 'str'?",
        id="unknown-kind",
    ),
    pytest.param(
        _edit(", dtype: int64", ""),
        "fields.input_ids",
        "needs both shape and dtype (dtype is missing)",
        id="tensor-without-dtype",
    ),
    pytest.param(
        _edit("{shape: [seq], ", "{"),
        "fields.input_ids",
        "needs both shape and dtype (shape is missing)",
        id="tensor-without-shape",
    ),
    pytest.param(
        _edit("kind: str,", "kind: str, shape: [seq],"),
        "fields.uid",
        "a 'str' field has no shape or dtype",
        id="kind-with-shape",
    ),
    pytest.param(
        _edit("pad: eos", "pad: uid"),
        "fields.input_ids.pad",
        "pad rule 'uid' does not fit a 'tensor' field",
        id="uid-pad-on-tensor",
    ),
    pytest.param(
        _edit("pad: uid", "pad: positions"),
        "fields.uid.pad",
        "pad rule 'positions' does not fit a 'str' field",
        id="positions-pad-on-str",
    ),
    pytest.param(
        _edit("pad: uid", "pad: 0"),
        "fields.uid.pad",
        "a 'str' field cannot be filled with the number 0",
        id="number-pad-on-str",
    ),
    pytest.param(
        _edit("pad: eos", "pad: 0.5"),
        "fields.input_ids.pad",
        "fill 0.5 does not fit dtype int64: it is not an integer",
        id="fractional-pad-on-int-tensor",
    ),
    pytest.param(
        _edit("pad: uid}", "pad: uid, min: 0}"),
        "fields.uid.min",
        "min applies to tensors, int and float",
        id="min-on-str",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: prompt +"),
        "dims.seq",
        "'prompt +' ends too early",
        id="bad-derived-dim-expression",
    ),
    pytest.param(
        _edit("[seq]", "['prompt, response']"),
        "fields.input_ids.shape[0]",
        "contains a comma; list each dim as its own item: [prompt, response]",
        id="comma-in-shape",
    ),
    pytest.param(
        _edit("[seq]", "['seq / 2']"), "fields.input_ids.shape[0]", "division is not supported", id="division-in-shape"
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  a: b + 1\n  b: a - 1\n"),
        "dims.a",
        "dims depend on each other in a cycle: a -> b -> a",
        id="derived-dim-cycle",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: -1"),
        "dims.rope_rows",
        "a fixed dim cannot be negative",
        id="negative-fixed-dim",
    ),
    pytest.param(
        _edit("response: {}", "response: {min: 5, max: 2}"), "dims.response", "max 2 is below min 5", id="max-below-min"
    ),
    pytest.param(_edit("rope_rows: 4", "2rows: 4"), "dims.2rows", "is not an identifier", id="dim-name-not-identifier"),
    pytest.param(
        BASE + "tags:\n  plen: {equals: promt}\n",
        "tags.plen.equals",
        "unknown dim 'promt'; did you mean",
        id="tag-equals-unknown-dim",
    ),
    pytest.param(
        _edit("fields:", "feilds:"),
        "",
        "unknown key 'feilds'; did you mean 'fields'?",
        id="unknown-top-level-key",
    ),
    pytest.param(
        _edit("pad: eos}", "pad: eos, requried: false}"),
        "fields.input_ids",
        "unknown key 'requried'; did you mean 'required'?",
        id="unknown-key-in-field",
    ),
    pytest.param(
        _edit("prompt: {min: 1}", "prompt: {minn: 1}"),
        "dims.prompt",
        "unknown key 'minn'",
        id="unknown-key-in-free-dim",
    ),
    pytest.param(BASE.replace("name: bad\n", ""), "", "missing required key 'name'", id="missing-name"),
    pytest.param(
        BASE + "padding:\n  promt: 3\n",
        "padding.promt",
        "unknown dim 'promt'; did you mean 'prompt'?",
        id="padding-unknown-dim",
    ),
    pytest.param(
        BASE + "padding:\n  rope_rows: 4\n",
        "padding.rope_rows",
        "only free dims take a padding size",
        id="padding-fixed-dim",
    ),
    pytest.param(
        BASE + "padding:\n  seq: 4\n", "padding.seq", "only free dims take a padding size", id="padding-derived-dim"
    ),
    pytest.param(
        BASE + "padding:\n  prompt: 0\n",
        "padding.prompt",
        "padding size 0 breaks the dim's bounds (>= 1)",
        id="padding-below-min",
    ),
    pytest.param(
        "name: bad\nfields:\n  input_ids: {shape: [seq, dtype: int64, pad: eos}\n",
        "line 3, column 50",
        "invalid YAML",
        id="invalid-yaml",
    ),
    pytest.param(
        "- a\n- b\n", "", "expected a mapping at the top level (name:, fields:, ...), found a list", id="top-level-list"
    ),
    pytest.param(
        "", "", "expected a mapping at the top level (name:, fields:, ...), found an empty file", id="empty-file"
    ),
    pytest.param(
        BASE + "extra: maybe\n", "extra", "expected 'allow' or 'forbid', found a string 'maybe'", id="extra-maybe"
    ),
    pytest.param(BASE + "extends: 3\n", "extends", "expected a list, found an integer 3", id="extends-not-a-list"),
]


@pytest.mark.parametrize(("text", "key_path", "problem"), MALFORMED)
def test_malformed_schema(tmp_path: Path, text: str, key_path: str, problem: str) -> None:
    path = _write(tmp_path, "bad", text)
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(path)
    err = info.value
    assert err.source == str(path)
    assert err.path == key_path
    assert problem in err.problem
    where = f"{path}: {key_path}" if key_path else str(path)
    assert str(err) == f"{where}: {err.problem}"


def test_enough_malformed_cases() -> None:
    assert len(MALFORMED) >= 15


# Exact wording of the messages people read most (jaxtyping's test_messages idea).
MESSAGES = [
    pytest.param(
        _edit("pad: eos", "pad: eso"),
        "{file}: fields.input_ids.pad: unknown pad rule 'eso'; did you mean 'eos'? "
        "(known: eos, positions, uid, index, empty, copy)",
        id="pad-rule-typo",
    ),
    pytest.param(
        _edit("int64", "int"),
        "{file}: fields.input_ids.dtype: ambiguous dtype 'int'; did you mean int64 "
        "(torch.int is int32; say int32 if that is meant)?",
        id="dtype-int",
    ),
    pytest.param(
        _edit("[seq]", "['prompt, response']"),
        "{file}: fields.input_ids.shape[0]: dim expression 'prompt, response' contains a comma; "
        "list each dim as its own item: [prompt, response]",
        id="comma",
    ),
    pytest.param(
        _edit("[seq]", "[sq]"),
        "{file}: fields.input_ids.shape[0]: unknown dim 'sq'; did you mean 'seq'? "
        "(known: prompt, response, seq, rope_rows); declare it under dims:",
        id="unknown-dim",
    ),
    pytest.param(
        _edit("pad: eos}", "pad: eos, requried: false}"),
        "{file}: fields.input_ids: unknown key 'requried'; did you mean 'required'?",
        id="field-key-typo",
    ),
    pytest.param(
        _edit("fields:", "feilds:"),
        "{file}: unknown key 'feilds'; did you mean 'fields'?",
        id="top-level-key-typo",
    ),
]


@pytest.mark.parametrize(("text", "message"), MESSAGES)
def test_message_wording(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, "bad", text)
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(path)
    assert str(info.value) == message.format(file=path)


# ---------------------------------------------------------------------------
# SchemaDefinitionError itself, and reloading


def test_schema_definition_error_is_a_value_error_under_the_package() -> None:
    assert issubclass(ts.SchemaDefinitionError, ValueError)
    assert ts.SchemaDefinitionError.__module__ == "trajschema"


def test_schema_definition_error_pickles(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad", _edit("pad: eos", "pad: eso"))
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(path)
    err = info.value
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ts.SchemaDefinitionError
    assert str(back) == str(err)
    assert (back.source, back.path, back.problem) == (str(path), "fields.input_ids.pad", err.problem)
    assert back.args == err.args


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
# Search-path honesty (issue 15): one name rule, long names cut, missing entries told


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


def test_an_unknown_long_name_is_shown_cut_with_its_length() -> None:
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema("x" * 5000)
    message = str(info.value)
    assert f"no schema {'x' * 60!r}…(5000 chars) known: " in message
    assert "x" * 61 not in message and len(message) < 400


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=300).filter(lambda t: os.sep not in t and not t.endswith((".yaml", ".yml"))))
def test_a_not_found_message_never_grows_with_the_name(name: str) -> None:
    if name in PACKAGED:
        return
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema(name)
    shown = repr(name) if len(name) <= 60 else f"{name[:60]!r}…({len(name)} chars)"
    assert f"no schema {shown}" in str(info.value)
    assert shown_name(name) == shown


def test_a_long_path_is_shown_cut_and_one_the_file_system_refuses_is_not_found(tmp_path: Path) -> None:
    refused = str(tmp_path / ("x" * 5000 + ".yaml"))  # longer than any file name may be
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema(refused)
    assert str(info.value) == f"no schema file at {refused[:60]!r}…({len(refused)} chars): File name too long"
    deep = tmp_path.joinpath(*["d" * 200] * 6, "absent.yaml")  # each part allowed, the whole not there
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema(deep)
    assert str(info.value).startswith(f"no schema file at {str(deep)[:1000]!r}…({len(str(deep))} chars)")


def _warnings_of(call) -> list[str]:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_a_missing_search_path_entry_is_warned_about_once_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    first, second = tmp_path / "gone", tmp_path / "never"
    note = "does not exist; schemas are looked up without it (check TRAJSCHEMA_PATH)"
    monkeypatch.setenv("TRAJSCHEMA_PATH", os.pathsep.join([str(first), str(tmp_path)]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ts.load_schema("text").name == "text"  # the lookup goes on without it
    (w,) = caught
    assert w.category is UserWarning and w.filename == __file__  # it points at the caller's line
    assert str(w.message) == f"search path entry {first} {note}"
    # Once per entry per process: later lookups of any kind say nothing more about it ...
    assert (
        _warnings_of(
            lambda: (
                ts.schema_names(),
                ts.load_schema("text"),
                ts.schema_for_architecture("Qwen2VLForConditionalGeneration"),
            )
        )
        == []
    )
    # ... and another missing entry is told in its turn, by any lookup (here a parent's).
    monkeypatch.setenv("TRAJSCHEMA_PATH", os.pathsep.join([str(second), str(first)]))
    child = _write(tmp_path, "kid", "name: kid\nextends: [text]\n")
    assert _warnings_of(lambda: ts.load_schema(child)) == [f"search path entry {second} {note}"]
    assert _warnings_of(lambda: ts.load_schema("text")) == []


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
        (_BytesPath(), "test_loading._BytesPath"),
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
