"""Finding, parsing, composing (``extends``) and compiling schema files, and the loader read as an attacker would.

Every malformed schema is a SchemaDefinitionError at load time naming the file, the key path
and the problem: never a Python error (KeyError, TypeError, RecursionError, UnicodeDecodeError,
OverflowError, ...), never a torch error, and never a failure later, at first use. The tables
of malformed files share one body; then files that cannot be read, ``extends``,
`trajschema.schema_from_dict`, decisions that accept things, pinned messages and two fuzzers.
The pad fill against dtypes and value checks is `test_compile.py`.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import os
import pickle
import re
import signal
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajschema as ts
from tests.loading_cases import BASE
from tests.loading_cases import edit_base as _edit
from trajschema.files import shown_name
from trajschema.files.filetext import MAX_DEPTH, MAX_NODES
from trajschema.files.reader import read_text
from trajschema.load import resolve_schema
from trajschema.testing import verl_sample

PACKAGED = ts.schema_names()
PACKAGED_DIR = ts.schema_search_path()[-1]


def _write(directory: Path, name: str, text: str | bytes) -> Path:
    path = directory / f"{name}.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
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


@pytest.mark.parametrize("name", [5, None, b"text", ["text"], _BytesPath()])
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


def _field(spec: str, name: str = "x") -> str:
    """BASE plus one field, written as a flow mapping."""
    return BASE + f"  {name}: {{{spec}}}\n"


def _load_error(path: Path) -> ts.SchemaDefinitionError:
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


def _check(tmp_path: Path, text: str | bytes, key_path: str, problem: str, name: str = "bad") -> None:
    path = _write(tmp_path, name, text)
    err = _load_error(path)
    assert err.source == str(path)
    place = _PLACE.fullmatch(key_path)
    if place:
        assert (err.path, err.line) == ("", int(place[1]))
        assert place[2] is None or err.column == int(place[2])
    else:
        assert err.path == key_path
    assert problem in err.problem, err.problem


# ---------------------------------------------------------------------------
# YAML: duplicate keys (at any depth), merge keys, non-string keys

YAML_ATTACKS = [
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

LAUGHS = "name: bad\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefg", "bcdefgh")
)

NESTING_ATTACKS = [
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
# Names

NAME_ATTACKS = [
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


# ---------------------------------------------------------------------------
# Numbers: NaN/inf, bounds, values, bools where ints are meant, YAML 1.1 floats

NUMBER_ATTACKS = [
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, min: .nan"),
        "fields.x.min",
        "min must be finite, found nan; leave min out for no bound",
        id="min-nan",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, max: .inf"),
        "fields.x.max",
        "max must be finite, found inf",
        id="max-inf",
    ),
    pytest.param(
        _field("kind: float, pad: 0.0, min: -.inf"),
        "fields.x.min",
        "min must be finite, found -inf",
        id="min-minus-inf",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, values: [.nan, 0.0]"),
        "fields.x.values[0]",
        "nan equals nothing, not even itself; drop it",
        id="values-nan",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [0, .inf]"),
        "fields.x.values[1]",
        "inf can never match: no int64 value equals it (it is not an integer)",
        id="values-inf-on-int",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: .nan"),
        "fields.x.pad",
        "fill nan does not fit dtype int64: it is not an integer",
        id="pad-nan-on-int",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: .inf, finite: true"),
        "fields.x.pad",
        "fill inf must itself pass the field's value checks (be finite)",
        id="pad-inf-finite",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: .nan, min: 0"),
        "fields.x.pad",
        "fill nan must itself pass the field's value checks (be >= min 0)",
        id="pad-nan-breaks-min",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, min: 5, max: 1"),
        "fields.x",
        "min 5 is above max 1; no value passes",
        id="min-above-max",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [0, a]"),
        "fields.x.values[1]",
        "expected a number, found a string 'a'",
        id="values-string",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [0, [1]]"),
        "fields.x.values[1]",
        "expected a number, found a list [1]",
        id="values-nested-list",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: []"),
        "fields.x.values",
        "an empty values list allows nothing",
        id="values-empty",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: 0"),
        "fields.x.values",
        "expected a list, found an integer 0",
        id="values-scalar",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [0, 1, 0.0]"),
        "fields.x.values[2]",
        "0.0 is listed twice (as Python compares: true == 1, 0.0 == 0)",
        id="values-twice",
    ),
    pytest.param(
        _field("kind: any, pad: 0, values: [0, 1, true]"),
        "fields.x.values[2]",
        "true is listed twice",
        id="values-true-is-1",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, values: [no, yes]"),
        "fields.x.values[0]",
        "false can never match: it is a boolean, but the field holds none; write 0 for the number",
        id="values-yaml11-booleans",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int8, pad: 0, values: [0, 300]"),
        "fields.x.values[1]",
        "300 can never match: no int8 value equals it (int8 holds -128..127)",
        id="values-beyond-dtype",
    ),
    pytest.param(
        _field("shape: [seq], dtype: [int8, uint8], pad: 0, values: [0, -200]"),
        "fields.x.values[1]",
        "no int8 value equals it (int8 holds -128..127); no uint8 value equals it (uint8 holds 0..255)",
        id="values-beyond-every-dtype",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float16, pad: 0.0, values: [0.0, 0.1]"),
        "fields.x.values[1]",
        "no float16 value equals it (not exactly a float16 value (the nearest is 0.0999755859375))",
        id="values-not-exact-float",
    ),
    pytest.param(
        _field("kind: int, pad: 0, values: [0, 0.5]"),
        "fields.x.values[1]",
        "0.5 can never match: no value of an 'int' field equals it",
        id="values-fraction-on-int-kind",
    ),
    pytest.param(
        _field("kind: bool, pad: false, values: [false, 2]"),
        "fields.x.values[1]",
        "a 'bool' field holds only true and false",
        id="values-2-on-bool-kind",
    ),
    pytest.param(
        _edit("pad: uid}", "pad: uid, values: [1]}"),
        "fields.uid.values",
        "values lists numbers; it does not apply to a 'str' field",
        id="values-on-str",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, min: true"),
        "fields.x.min",
        "expected a number or a dim expression (experts - 1), found a boolean true",
        id="min-bool",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, max: 1e5"),
        "fields.x.max",
        "expected a number or a dim expression (experts - 1), found a string '1e5' (YAML reads '1e5' as a "
        "string: write a float with a dot "
        "and a signed exponent, e.g. 1.0e+5)",
        id="max-yaml11-exponent",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 1.0e5"),
        "fields.x.pad",
        "unknown pad rule '1.0e5'",
        id="pad-yaml11-exponent",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, min: 1000000000000000000000000000000"),
        "fields.x.min",
        "min 1000000000000000000000000000000 is above every value of int64; no element passes",
        id="min-10e30-on-int64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: [uint8, bool], pad: 0, max: -1"),
        "fields.x.max",
        "max -1 is below every value of uint8 and bool; no element passes",
        id="max-below-every-dtype",
    ),
    pytest.param(
        _field("kind: str, pad: uid, finite: true"),
        "fields.x.finite",
        "finite applies to tensors and float, not 'str'",
        id="finite-on-str",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, finite: 1"),
        "fields.x.finite",
        "expected true or false, found an integer 1",
        id="finite-int",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.0, required: 'no'"),
        "fields.x.required",
        "expected true or false, found a string 'no'",
        id="required-string",
    ),
    pytest.param(
        BASE.replace("  rope_rows: 4\n", "  a: " + "9" * 5000 + "\n"),
        "dims.a",
        "an integer literal of 5000 characters (line 6); the limit is 100",
        id="int-literal-5000-digits",
    ),
]


# ---------------------------------------------------------------------------
# Dims, shapes and expressions: sizes torch cannot hold, recursion, cycles

HUGE = str(2**70)  # 1180591620717411303424

DIM_ATTACKS = [
    pytest.param(
        _edit("rope_rows: 4", f"rope_rows: {HUGE}"),
        "dims.rope_rows",
        f"a fixed dim of {HUGE} is larger than 2**63 - 1, the largest size torch can hold",
        id="fixed-dim-2**70",
    ),
    pytest.param(
        _edit("rope_rows: 4", f"rope_rows: {{size: {HUGE}}}"),
        "dims.rope_rows.size",
        f"{HUGE} is larger than 2**63 - 1",
        id="fixed-dim-mapping-2**70",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: {size: -1}"),
        "dims.rope_rows.size",
        "must be >= 0, found -1",
        id="fixed-dim-mapping-negative",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: true"),
        "dims.rope_rows",
        "expected a size (4), an expression (prompt + response) or a mapping ({min: 1}), found a boolean true",
        id="dim-bool",
    ),
    pytest.param(_edit("rope_rows: 4", "rope_rows: 4.0"), "dims.rope_rows", "found a number 4.0", id="dim-float"),
    pytest.param(_edit("rope_rows: 4", "rope_rows:"), "dims.rope_rows", "found null", id="dim-null"),
    pytest.param(_edit("rope_rows: 4", "rope_rows: [4]"), "dims.rope_rows", "found a list [4]", id="dim-list"),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: {size: 4, min: 1}"),
        "dims.rope_rows",
        "a dim is fixed (size), derived (expr) or free (min, max, multiple_of), not "
        "fixed (size) and free (min, max, multiple_of) at once",
        id="dim-fixed-and-free",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: {size: 4, expr: prompt}"),
        "dims.rope_rows",
        "not fixed (size) and derived (expr) at once",
        id="dim-fixed-and-derived",
    ),
    pytest.param(
        _edit("rope_rows: 4", "rope_rows: {size: 4, descripton: rows}"),
        "dims.rope_rows",
        "unknown key 'descripton'; did you mean 'description'?",
        id="dim-mapping-unknown-key",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: {expr: 3}"),
        "dims.seq.expr",
        "expected a string, found an integer 3",
        id="derived-dim-expr-int",
    ),
    pytest.param(
        _edit("response: {}", "response: {description: 3}"),
        "dims.response.description",
        "expected a string, found an integer 3",
        id="dim-description-int",
    ),
    pytest.param(
        _edit("response: {}", "response: {min: true}"),
        "dims.response.min",
        "expected an integer, found a boolean true",
        id="free-dim-min-bool",
    ),
    pytest.param(
        _edit("response: {}", "response: {min: '3'}"),
        "dims.response.min",
        "expected an integer, found a string '3'",
        id="free-dim-min-string",
    ),
    pytest.param(
        _edit("response: {}", "response: {multiple_of: 0}"),
        "dims.response.multiple_of",
        "must be > 0, found 0",
        id="multiple-of-0",
    ),
    pytest.param(
        _edit("response: {}", f"response: {{multiple_of: {HUGE}}}"),
        "dims.response.multiple_of",
        "is larger than 2**63 - 1",
        id="multiple-of-2**70",
    ),
    pytest.param(
        _edit("response: {}", "response: {min: 3, max: 4, multiple_of: 5}"),
        "dims.response",
        "no size is >= 3, <= 4 and a multiple of 5",
        id="free-dim-unsatisfiable",
    ),
    pytest.param(
        _edit("[seq]", f"[{HUGE}]"),
        "fields.input_ids.shape[0]",
        f"the integer {HUGE} is larger than 2**63 - 1",
        id="shape-literal-2**70",
    ),
    pytest.param(
        _edit("[seq]", f"['seq * {HUGE}']"),
        "fields.input_ids.shape[0]",
        f"the integer {HUGE} is larger than 2**63 - 1",
        id="shape-expression-literal-2**70",
    ),
    pytest.param(
        _edit("seq: prompt + response", f"seq: prompt + {HUGE}"),
        "dims.seq",
        f"the integer {HUGE} is larger",
        id="derived-literal-2**70",
    ),
    pytest.param(
        _edit("[seq]", "[-3]"),
        "fields.input_ids.shape[0]",
        "a dim size cannot be negative, found -3",
        id="shape-negative",
    ),
    pytest.param(
        _edit("[seq]", "['-3']"),
        "fields.input_ids.shape[0]",
        "dim expression '-3' is always -3, not a size",
        id="shape-negative-expression",
    ),
    pytest.param(
        _edit("[seq]", "['2 - 5']"),
        "fields.input_ids.shape[0]",
        "is always -3, not a size",
        id="shape-constant-negative",
    ),
    pytest.param(
        _edit("[seq]", "['9223372036854775807 + 1']"),
        "fields.input_ids.shape[0]",
        "is always 9223372036854775808, not a size",
        id="shape-constant-overflow",
    ),
    pytest.param(
        _edit("[seq]", "[1.5]"),
        "fields.input_ids.shape[0]",
        "expected a dim name, expression or integer, found float 1.5",
        id="shape-float",
    ),
    pytest.param(_edit("[seq]", "[true]"), "fields.input_ids.shape[0]", "found True", id="shape-bool"),
    pytest.param(
        _edit("[seq]", "seq"), "fields.input_ids.shape", "expected a list, found a string 'seq'", id="shape-str"
    ),
    pytest.param(
        _edit("[seq]", "!!set {seq}"), "fields.input_ids.shape", "expected a list, found a set", id="shape-set"
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: '" + " + ".join(["prompt"] * 30) + "'"),
        "dims.seq",
        "a dim expression of 267 characters; the limit is 200",
        id="expression-too-long",
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  a: {}\n  b: '" + "a+" * 40 + "a'\n"),
        "dims.b",
        "nests more than 32 levels deep",
        id="expression-too-deep",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: '" + "-" * 50 + "prompt'"),
        "dims.seq",
        "nests more than 32 levels deep",
        id="expression-negations",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: prompt + respnse"),
        "dims.seq",
        "unknown dim 'respnse'; did you mean 'response'?",
        id="derived-unknown-dim",
    ),
    pytest.param(
        _edit(
            "  rope_rows: 4\n",
            "  rope_rows: 4\n" + "".join(f"  d{i}: d{i + 1} + 1\n" for i in range(40)) + "  d40: {}\n",
        ),
        "dims.d7",
        "derived dims chain more than 32 deep",
        id="derived-chain-40",
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  a: b\n  b: c\n  c: a\n"),
        "dims.a",
        "dims depend on each other in a cycle: a -> b -> c -> a",
        id="derived-cycle-3",
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  a: a + 1\n"),
        "dims.a",
        "dims depend on each other in a cycle: a -> a",
        id="derived-self",
    ),
    pytest.param(
        _edit("response: {}", "response: {max: 0}").replace("[seq]", "['response - 1']"),
        "fields.input_ids.shape[0]",
        "response - 1 is at most -1 for every size the dims allow; a size cannot be negative",
        id="shape-always-negative",
    ),
    pytest.param(
        _edit("response: {}", "response: {max: 1, multiple_of: 2}").replace("[seq]", "['2 * response - 1']"),
        "fields.input_ids.shape[0]",
        "2 * response - 1 is at most -1",
        id="shape-negative-for-the-only-allowed-size",
    ),
    pytest.param(
        _edit("seq: prompt + response", "seq: rope_rows - prompt - 4"),
        "dims.seq",
        "rope_rows - prompt - 4 is at most -1 for every size the dims allow",
        id="derived-always-negative",
    ),
    pytest.param("name: bad\ndims: [prompt]\n", "dims", "expected a mapping, found a list ['prompt']", id="dims-list"),
]


# ---------------------------------------------------------------------------
# Fields: dtypes, kinds, pad fills that a dtype cannot hold, pad rules

FIELD_ATTACKS = [
    # --- bounds written in dims and distinct slices (issue 16)
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, max: expert - 1"),
        "fields.x.max",
        "unknown dim 'expert'",
        id="dim-bound-unknown-dim",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, max: respons"),
        "fields.x.max",
        "did you mean 'response'?",
        id="dim-bound-did-you-mean",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, max: '5'"),
        "fields.x.max",
        "'5' names no dim; write the number 5 for a bound that never changes",
        id="dim-bound-without-a-dim",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 0, max: 'seq, 2'"),
        "fields.x.max",
        "contains a comma",
        id="dim-bound-with-a-comma",
    ),
    pytest.param(
        _field("kind: str, pad: uid, max: seq"),
        "fields.x.max",
        "max applies to tensors, int and float, not 'str'",
        id="dim-bound-on-a-str",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 5, min: 5, max: rope_rows - 1"),
        "fields.x.max",
        "max rope_rows - 1 is at most 3, below min 5, for every size the dims allow; no value passes",
        id="dim-bound-below-min",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: copy, min: prompt, max: prompt - 1"),
        "fields.x.max",
        "max prompt - 1 is below min prompt (by 1 or more) for every size the dims allow; no value passes",
        id="dim-bounds-that-cross",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: copy, min: 2 * seq, max: seq"),
        "fields.x.max",
        "max seq is below min 2 * seq (by 1 or more) for every size the dims allow",
        id="dim-bounds-that-cross-term-by-term",
    ),
    pytest.param(
        _field("shape: [seq], dtype: uint8, pad: 0, max: prompt + 300"),
        "fields.x.dtype",
        "uint8 cannot hold 301, the smallest value max prompt + 300 takes for the sizes the dims allow",
        id="dim-bound-beyond-every-dtype-value",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 9, max: rope_rows"),
        "fields.x.pad",
        "fill 9 breaks max rope_rows (at most 4) for every size the dims allow",
        id="dim-bound-breaks-the-fill",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: -1, min: prompt - 1"),
        "fields.x.pad",
        "fill -1 breaks min prompt - 1 (at least 0) for every size the dims allow",
        id="dim-bound-min-breaks-the-fill",
    ),
    pytest.param(
        _field("kind: int, pad: index, max: seq"),
        "fields.x.pad",
        "pad rule 'index' numbers padding samples 0, 1, 2, ... without bound, which max seq cannot keep to",
        id="dim-bound-index",
    ),
    pytest.param(
        _field("shape: [seq, rope_rows], dtype: int64, pad: 0, distinct: true"),
        "fields.x.pad",
        "fill 0 puts one value in every slot, which repeats along the last axis (rope_rows) when it has 2+ slots; "
        "spread ids over a dim instead (pad: {spread: experts})",
        id="distinct-constant-fill",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: eos, distinct: true"),
        "fields.x.pad",
        "pad rule 'eos' puts one value in every slot",
        id="distinct-eos",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: spread"),
        "fields.x.pad",
        "pad rule 'spread' needs the dim that counts the ids: write {spread: experts}",
        id="spread-without-its-dim",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: {spread: prompt}, min: 1"),
        "fields.x.pad",
        "pad rule {spread: prompt} fills 0, 1, 2, ..., and 0 breaks the field's value checks (be >= min 1)",
        id="spread-min-above-0",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: {spread: prompt}, values: [1, 2, 3]"),
        "fields.x.pad",
        "pad rule {spread: prompt} fills 0, 1, 2, ..., and 0 breaks the field's value checks (be in values [1, 2, 3])",
        id="spread-values-without-0",
    ),
    pytest.param(
        _field("shape: [seq, prompt], dtype: int64, pad: {spread: prompt}, min: prompt"),
        "fields.x.pad",
        "pad rule {spread: prompt} starts at 0, which breaks min prompt (at least 1) for every size the dims allow",
        id="spread-dim-min-above-0",
    ),
    pytest.param(
        _field("shape: [], dtype: int64, pad: copy, distinct: true"),
        "fields.x.distinct",
        "distinct applies along the last axis; a 0-d field has none",
        id="distinct-0d",
    ),
    pytest.param(
        _field("kind: int, pad: 0, distinct: true"),
        "fields.x.distinct",
        "distinct applies along a tensor's last axis, not to a 'int' field",
        id="distinct-non-tensor",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: copy, distinct: yes please"),
        "fields.x.distinct",
        "expected true or false",
        id="distinct-not-a-bool",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: [int64, int64]"),
        "fields.input_ids.dtype",
        "dtype int64 is listed twice",
        id="dtype-twice",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: [int64, torch.int64]"),
        "fields.input_ids.dtype",
        "dtype int64 is listed twice",
        id="dtype-twice-spelled-differently",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: [[int64]]"),
        "fields.input_ids.dtype[0]",
        "expected a torch dtype name, found a list ['int64']",
        id="dtype-nested-list",
    ),
    pytest.param(
        _edit("dtype: int64", "dtype: 64"),
        "fields.input_ids.dtype",
        "expected a torch dtype name, found an integer 64",
        id="dtype-int",
    ),
    pytest.param(
        _edit("{shape: [seq], ", "{kind: tensor, "),
        "fields.input_ids",
        "a tensor field needs both shape and dtype (shape is missing)",
        id="kind-tensor-without-shape",
    ),
    pytest.param(
        _edit("{shape: [seq], ", "{kind: Tensor, shape: [seq], "),
        "fields.input_ids.kind",
        "unknown kind 'Tensor'; did you mean 'tensor'?",
        id="kind-capitalised",
    ),
    pytest.param(
        BASE + "  x: 3\n", "fields.x", "expected a mapping (shape, dtype, pad, ...), found an integer 3", id="field-int"
    ),
    pytest.param("name: bad\nfields: [a]\n", "fields", "expected a mapping, found a list ['a']", id="fields-list"),
    pytest.param(
        _field("shape: [seq], dtype: int8, pad: 300"),
        "fields.x.pad",
        "fill 300 does not fit dtype int8: int8 holds -128..127",
        id="pad-300-int8",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 1.5"),
        "fields.x.pad",
        "fill 1.5 does not fit dtype int64: it is not an integer",
        id="pad-1.5-int64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: bool, pad: 2"),
        "fields.x.pad",
        "fill 2 does not fit dtype bool: bool holds only true and false, which equal 1 and 0",
        id="pad-2-bool",
    ),
    pytest.param(
        _field("shape: [seq], dtype: uint8, pad: -1"),
        "fields.x.pad",
        "fill -1 does not fit dtype uint8: uint8 holds 0..255",
        id="pad-minus-1-uint8",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float16, pad: 1.0e+40"),
        "fields.x.pad",
        "fill 1e+40 does not fit dtype float16: beyond float16's largest value 65504.0",
        id="pad-1e40-float16",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 1.0e+40"),
        "fields.x.pad",
        "fill 1e+40 does not fit dtype float32: beyond float32's largest value 3.4028234663852886e+38",
        id="pad-1e40-float32",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float16, pad: 65520.0"),
        "fields.x.pad",
        "beyond float16's largest value 65504.0",
        id="pad-rounds-to-inf-float16",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float16, pad: 1.0e-8"),
        "fields.x.pad",
        "fill 1e-08 does not fit dtype float16: not exactly a float16 value (the nearest is 0.0)",
        id="pad-underflows-float16",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 0.1"),
        "fields.x.pad",
        "fill 0.1 does not fit dtype float32: not exactly a float32 value (the nearest is 0.10000000149011612)",
        id="pad-0.1-float32",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: 16777217"),
        "fields.x.pad",
        "fill 16777217 does not fit dtype float32: not exactly a float32 value",
        id="pad-2**24+1-float32",
    ),
    pytest.param(
        _field("shape: [seq], dtype: bfloat16, pad: 257"),
        "fields.x.pad",
        "not exactly a bfloat16 value",
        id="pad-257-bfloat16",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: 9223372036854775808"),
        "fields.x.pad",
        "int64 holds -9223372036854775808..9223372036854775807",
        id="pad-2**63-int64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float64, pad: 18446744073709551616"),
        "fields.x.pad",
        "fill 18446744073709551616 is an integer beyond int64, which torch cannot take as a scalar; "
        "write it as a float (1.8446744073709552e+19)",
        id="pad-2**64-float64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: true"),
        "fields.x.pad",
        "fill true does not fit dtype int64: a boolean fills only a bool tensor; write 1 for the number",
        id="pad-true-int64",
    ),
    pytest.param(
        _field("shape: [seq], dtype: float32, pad: off"),
        "fields.x.pad",
        "fill false does not fit dtype float32: a boolean fills only a bool tensor; write 0",
        id="pad-yaml11-off-float32",
    ),
    pytest.param(
        _field("shape: [seq], dtype: [int16, int8], pad: 200"),
        "fields.x.pad",
        "fill 200 does not fit dtype int8",
        id="pad-fits-only-one-listed-dtype",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: [0]"),
        "fields.x.pad",
        "expected a number or a pad rule (eos, positions, uid, index, empty, copy), found a list [0]",
        id="pad-list",
    ),
    pytest.param(
        _field("shape: [seq], dtype: bool, pad: eos"),
        "fields.x.pad",
        "pad rule 'eos' fills integers, which a bool tensor cannot hold",
        id="eos-on-bool",
    ),
    pytest.param(
        _field("shape: [], dtype: int64, pad: positions"),
        "fields.x.pad",
        "pad rule 'positions' counts along the last dim; a 0-d field has none",
        id="positions-on-0d",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: positions, min: 1"),
        "fields.x.pad",
        "pad rule 'positions' fills 0, 1, 2, ..., and 0 breaks the field's value checks (be >= min 1)",
        id="positions-break-min",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int64, pad: positions, values: [1, 2]"),
        "fields.x.pad",
        "and 0 breaks the field's value checks (be in values [1, 2])",
        id="positions-break-values",
    ),
    pytest.param(
        _field("shape: [rope_rows], dtype: int64, pad: positions, max: 2"),
        "fields.x.pad",
        "pad rule 'positions' fills 0..3 (at the padding size), and 3 breaks max 2",
        id="positions-fixed-dim-break-max",
    ),
    pytest.param(
        _field("shape: [seq], dtype: int8, pad: positions") + "padding: {prompt: 127, response: 129}\n",
        "fields.x.pad",
        "pad rule 'positions' fills 0..255 (at the padding size), and 255 does not fit int8",
        id="positions-overflow-int8-at-padding-size",
    ),
    pytest.param(
        _field("shape: [rope_rows], dtype: int64, pad: positions, values: [0, 1, 3]"),
        "fields.x.pad",
        "fills 0..3 (at the padding size), and 2 is not in values",
        id="positions-values-gap",
    ),
    pytest.param(
        _field("kind: int, pad: index, values: [0, 1]"),
        "fields.x.pad",
        "pad rule 'index' numbers padding samples 0, 1, 2, ... without bound, which values cannot keep to",
        id="index-with-values",
    ),
    pytest.param(
        _field("kind: int, pad: index, max: 5"), "fields.x.pad", "which max 5 cannot keep to", id="index-with-max"
    ),
    pytest.param(
        _field("kind: int, pad: index, min: 1"),
        "fields.x.pad",
        "pad rule 'index' fills 0, 1, 2, ..., and 0 breaks the field's value checks (be >= min 1)",
        id="index-break-min",
    ),
    pytest.param(
        _field("kind: any, pad: empty, values: [0]"),
        "fields.x.pad",
        "pad rule 'empty' fills an empty mapping, which no number in values equals",
        id="empty-with-values",
    ),
    pytest.param(
        _field("kind: int, pad: 1.0"),
        "fields.x.pad",
        "an 'int' field needs an integer fill, found 1.0",
        id="int-fill-1.0",
    ),
    pytest.param(
        _field("kind: float, pad: true"),
        "fields.x.pad",
        "a 'float' field needs a number fill, found true",
        id="float-fill-bool",
    ),
    pytest.param(
        _field("kind: bool, pad: 1"), "fields.x.pad", "a 'bool' field needs true or false, found 1", id="bool-fill-1"
    ),
    pytest.param(
        _field("kind: bool, pad: true, values: [false]"),
        "fields.x.pad",
        "fill true must itself pass the field's value checks (be in values [false])",
        id="bool-fill-breaks-values",
    ),
    pytest.param(
        _field("shape: ['prompt - response'], dtype: int64, pad: 0") + "padding: {prompt: 1, response: 5}\n",
        "fields.x.shape[0]",
        "prompt - response is -4 with the padding sizes (prompt=1, response=5); padding needs a size >= 0",
        id="inline-shape-negative-at-padding-sizes",
    ),
    pytest.param(
        _edit("  rope_rows: 4\n", "  rope_rows: 4\n  d: prompt - response\n")
        + "  x: {shape: [d], dtype: int64, pad: 0}\npadding: {prompt: 1, response: 5}\n",
        "dims.d",
        "prompt - response is -4 with the padding sizes (prompt=1, response=5)",
        id="derived-dim-negative-at-padding-sizes",
    ),
]


# ---------------------------------------------------------------------------
# Tags, padding sizes, extra

TAG_AND_PADDING_ATTACKS = [
    pytest.param(
        BASE + "tags:\n  x: {equals: 'seq +'}\n",
        "tags.x.equals",
        "dim expression 'seq +' ends too early",
        id="equals-bad",
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: promt}\n",
        "tags.x.equals",
        "unknown dim 'promt'; did you mean 'prompt'?",
        id="equals-unknown-dim",
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: true}\n",
        "tags.x.equals",
        "expected a dim name, expression or integer, found True",
        id="equals-bool",
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: '-1'}\n", "tags.x.equals", "is always -1, not a size", id="equals-negative"
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: seq, kind: str}\n",
        "tags.x.kind",
        "a tag with equals holds a dim size, an int, not 'str'",
        id="equals-with-kind-str",
    ),
    pytest.param(
        BASE + "tags:\n  x: {equals: seq, default: 3}\n",
        "tags.x.default",
        "a tag with equals takes its value from the dims; drop default",
        id="equals-with-default",
    ),
    pytest.param(
        BASE + "tags:\n  x: {kind: int, default: abc}\n",
        "tags.x.default",
        "the tag is 'int' but its default is a string 'abc'",
        id="default-wrong-kind",
    ),
    pytest.param(
        BASE + "tags:\n  x: {kind: any, default: [1]}\n",
        "tags.x.default",
        "a tag default is a number, a boolean or a string, found a list [1]",
        id="default-list",
    ),
    pytest.param(
        BASE + "tags:\n  is_padding: {kind: int}\n",
        "tags.is_padding",
        "padding samples carry is_padding: true and real ones may omit it, so this tag is {kind: bool, default: false}",
        id="is-padding-int",
    ),
    pytest.param(
        BASE + "tags:\n  is_padding: {kind: bool, default: true}\n",
        "tags.is_padding",
        "this tag is {kind: bool, default: false}",
        id="is-padding-default-true",
    ),
    pytest.param(
        BASE + "tags:\n  x: {knd: int}\n", "tags.x", "unknown key 'knd'; did you mean 'kind'?", id="tag-unknown-key"
    ),
    pytest.param(
        BASE + "tags:\n  x: 3\n",
        "tags.x",
        "expected a mapping (kind, equals, default, ...), found an integer 3",
        id="tag-not-a-mapping",
    ),
    pytest.param(BASE + "tags:\n  x: {kind: tensor}\n", "tags.x.kind", "unknown kind 'tensor'", id="tag-kind-tensor"),
    pytest.param(
        BASE + "padding: {rope_rows: 4}\n",
        "padding.rope_rows",
        "only free dims take a padding size; 'rope_rows' is FixedDim",
        id="padding-fixed-dim",
    ),
    pytest.param(
        BASE + "padding: {seq: 4}\n",
        "padding.seq",
        "only free dims take a padding size; 'seq' is DerivedDim",
        id="padding-derived-dim",
    ),
    pytest.param(
        BASE + "padding: {prompt: true}\n",
        "padding.prompt",
        "expected a size (an integer >= 0), found a boolean true",
        id="padding-bool",
    ),
    pytest.param(
        BASE + "padding: {prompt: '3'}\n",
        "padding.prompt",
        "expected a size (an integer >= 0), found a string '3'",
        id="padding-string",
    ),
    pytest.param(
        BASE + "padding: {prompt: -1}\n",
        "padding.prompt",
        "a padding size cannot be negative, found -1",
        id="padding-negative",
    ),
    pytest.param(
        BASE + f"padding: {{prompt: {HUGE}}}\n",
        "padding.prompt",
        f"padding size {HUGE} is larger than 2**63 - 1",
        id="padding-2**70",
    ),
    pytest.param(
        BASE + "padding: [prompt]\n",
        "padding",
        "expected a mapping, found a list ['prompt']",
        id="padding-not-a-mapping",
    ),
    pytest.param(BASE + "extra: 3\n", "extra", "expected 'allow' or 'forbid', found an integer 3", id="extra-int"),
    pytest.param(
        BASE + "extra: Allow\n", "extra", "expected 'allow' or 'forbid', found a string 'Allow'", id="extra-capitalised"
    ),
    pytest.param(BASE + "extra: [allow]\n", "extra", "found a list ['allow']", id="extra-list"),
]


# ---------------------------------------------------------------------------
# Whole files: encodings, not-a-file, empty, scalar, size, YAML-level junk

FILE_ATTACKS = [
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
MALFORMED_FILES = [
    pytest.param(*row.values, id=f"{table}-{row.id}", marks=row.marks)
    for table, rows in {
        "malformed": MALFORMED,
        "yaml": YAML_ATTACKS,
        "nesting": NESTING_ATTACKS,
        "name": NAME_ATTACKS,
        "number": NUMBER_ATTACKS,
        "dim": DIM_ATTACKS,
        "field": FIELD_ATTACKS,
        "tag-and-padding": TAG_AND_PADDING_ATTACKS,
        "file": FILE_ATTACKS,
    }.items()
    for row in rows
]


@pytest.mark.parametrize(("text", "key_path", "problem"), MALFORMED_FILES)
def test_malformed_schema(tmp_path: Path, text: str | bytes, key_path: str, problem: str) -> None:
    """A SchemaDefinitionError at load time naming the file, the key path and the problem (``file: path: problem``)."""
    _check(tmp_path, text, key_path, problem)


def test_enough_malformed_cases() -> None:
    assert len(MALFORMED) >= 15


# Exact wording of the messages people read most (jaxtyping's test_messages idea).
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
# Files that are not schema text: a byte order mark, a directory, a FIFO, a malformed file on the path


def test_a_utf8_byte_order_mark_is_fine(tmp_path: Path) -> None:
    path = _write(tmp_path, "bom", b"\xef\xbb\xbfname: bom\nextends: [text]\n")
    assert ts.load_schema(path).name == "bom"


def test_a_directory_named_like_a_schema_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "x.yaml").mkdir()
    err = _load_error(tmp_path / "x.yaml")
    assert (err.source, err.path, err.problem) == (str(tmp_path / "x.yaml"), "", "is a directory, not a schema file")
    # On the search path a directory is not a schema: not listed, not found by name or by extends.
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    assert "x" not in ts.schema_names()
    with pytest.raises(ts.SchemaNotFoundError):
        ts.load_schema("x")
    child = _write(tmp_path, "child", "name: child\nextends: [x]\n")
    assert _load_error(child).problem == "unknown parent schema 'x'"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo")
def test_a_fifo_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")  # opening it for reading would block forever
    err = _load_error(tmp_path / "pipe.yaml")
    assert (err.path, err.problem) == ("", "is not a regular file (a FIFO)")


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
# The search path: a file or directory that cannot be read is named, never skipped or hung on


@contextlib.contextmanager
def _within(seconds: float):
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


def _unreadable_entries(directory: Path) -> dict[str, str]:
    """Entries named like schema files that cannot be read as one, with the problem each is reported with."""
    (directory / "dangling.yaml").symlink_to(directory / "nowhere.yaml")
    (directory / "loop.yaml").symlink_to(directory / "loop.yaml")
    (directory / "devnull.yaml").symlink_to(os.devnull)
    problems = {
        "dangling": f"is a symbolic link to {directory / 'nowhere.yaml'}, which does not exist",
        "loop": "is a symbolic link that never reaches a file (too many levels of symbolic links)",
        "devnull": "is not a regular file (a character device)",
    }
    if hasattr(os, "mkfifo"):
        os.mkfifo(directory / "pipe.yaml")
        problems["pipe"] = "is not a regular file (a FIFO)"
    return problems


needs_posix = pytest.mark.skipif(os.name != "posix", reason="needs symbolic links, FIFOs and SIGALRM")


@needs_posix
def test_a_file_on_the_path_that_cannot_be_read_is_named_when_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problems = _unreadable_entries(tmp_path)
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    with _within(10):
        assert set(problems) <= set(ts.schema_names())  # listed, as `trajschema list` shows them
        for name, problem in problems.items():
            with pytest.raises(ts.SchemaDefinitionError) as info:
                ts.load_schema(name)
            assert (info.value.source, info.value.path, info.value.problem) == (
                str(tmp_path / f"{name}.yaml"),
                "",
                problem,
            )
            # Given by path, the same.
            assert _load_error(tmp_path / f"{name}.yaml").problem == problem
        # Unrelated loads are untouched: by name, and through extends.
        assert ts.load_schema("vlm_mrope_moe").name == "vlm_mrope_moe"
        child = _write(tmp_path, "child", "name: child\nextends: [moe_routed]\n")
        assert ts.load_schema(child).lineage == ("child", "moe_routed", "text")


@needs_posix
def test_a_parent_that_cannot_be_read_is_named_not_skipped(tmp_path: Path) -> None:
    problems = _unreadable_entries(tmp_path)
    with _within(10):
        for name, problem in problems.items():
            child = _write(tmp_path, f"child_of_{name}", f"name: child_of_{name}\nextends: [{name}]\n")
            err = _load_error(child)
            assert (err.source, err.path, err.problem) == (str(tmp_path / f"{name}.yaml"), "", problem)


@needs_posix
def test_an_unreadable_file_shadows_the_packaged_schema_of_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken override is an error, not a silent fall back to the packaged schema it meant to replace."""
    (tmp_path / "text.yaml").symlink_to(tmp_path / "moved" / "text.yaml")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema("text")
    assert info.value.source == str(tmp_path / "text.yaml") and "which does not exist" in info.value.problem
    assert ts.load_schema("vlm_mrope").lineage[-1] == "text"  # packaged children find text beside them


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


def _unlistable(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """``directory`` cannot be listed, as without read permission (root reads anything, so chmod proves nothing)."""
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) == str(directory):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_a_directory_that_cannot_be_listed_is_looked_into_for_the_name_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    override = _write(tmp_path, "text", (ts.schema_search_path()[-1] / "text.yaml").read_text(encoding="utf-8"))
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    _unlistable(monkeypatch, tmp_path)
    assert ts.load_schema("text").source == str(override)  # found by name, without listing
    assert "text" in ts.schema_names()  # the packaged one
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema("nope")
    assert f"; {tmp_path} cannot be listed: Permission denied;" in str(info.value)
    with pytest.raises(ts.SchemaDefinitionError) as arch:  # it may hold a schema claiming the architecture
        ts.schema_for_architecture("LlamaForCausalLM")
    assert (arch.value.source, arch.value.path) == (str(tmp_path), "")
    assert arch.value.problem.startswith("cannot be listed: Permission denied; schema_for_architecture reads")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads directories whatever their mode")
def test_a_directory_without_permission_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    _write(locked, "mine", "name: mine\nextends: [text]\n")
    locked.chmod(0)
    try:
        monkeypatch.setenv("TRAJSCHEMA_PATH", str(locked))
        assert ts.load_schema("text").lineage == ("text",)
        with pytest.raises(ts.SchemaDefinitionError, match="Permission denied"):
            ts.schema_for_architecture("LlamaForCausalLM")
    finally:
        locked.chmod(0o755)


@needs_posix
@pytest.mark.parametrize("entry", ["file", "dangling", "loop"])
def test_a_search_path_entry_that_is_no_directory_is_reported_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    path = tmp_path / "entry"
    if entry == "file":
        path.write_text("name: mine\n")
        problem = "is not a directory (TRAJSCHEMA_PATH lists directories of schema files)"
    elif entry == "dangling":
        path.symlink_to(tmp_path / "gone")
        problem = f"is a symbolic link to {tmp_path / 'gone'}, which does not exist"
    else:
        path.symlink_to(path)
        problem = "is a symbolic link that never reaches a file (too many levels of symbolic links)"
    monkeypatch.setenv("TRAJSCHEMA_PATH", f"{tmp_path / 'missing'}{os.pathsep}{path}")
    with pytest.warns(UserWarning, match="does not exist"):
        assert ts.load_schema("text").name == "text"  # unrelated: a name lookup does not fail on it
    with pytest.raises(ts.SchemaNotFoundError, match=re.escape(f"; {path} {problem};")):
        ts.load_schema("nope")
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_for_architecture("LlamaForCausalLM")
    assert info.value.source == str(path)
    assert info.value.problem == f"{problem}; schema_for_architecture reads every schema file on the search path"


def test_a_missing_search_directory_is_skipped_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is there to be read, so lookups go on without it; the warning says so (a typo in TRAJSCHEMA_PATH)."""
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path / "missing"))
    with pytest.warns(UserWarning, match="does not exist"):
        assert ts.schema_for_architecture("LlamaForCausalLM").name == "text"
    assert ts.schema_names() == PACKAGED


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
# extends: the file named is the one whose declaration is at fault
#
# A check that reads entries of several files (a padding size against its dim's bounds, a
# shape over dims, a cycle of derived dims, positions against the padding size) names the
# newest of them. Before, a child that redeclared a packaged dim was blamed on the packaged
# file, and a problem among inherited entries on whichever file was being loaded.

TEXT_YAML = str((ts.schema_search_path()[-1] / "text.yaml").resolve())


def _child(directory: Path, body: str, name: str = "child", parents: str = "text") -> Path:
    return _write(directory, name, f"name: {name}\nextends: [{parents}]\n{body}")


@pytest.mark.parametrize(
    ("bounds", "dim", "size", "describe", "fits"),
    [
        pytest.param("{min: 2}", "response", 1, ">= 2", 2, id="min-above-the-padding-size"),
        pytest.param("{min: 1, max: 10}", "prompt", 127, ">= 1 and <= 10", 8, id="max-below-the-padding-size"),
        pytest.param("{multiple_of: 2}", "response", 1, "a multiple of 2", 4, id="multiple-of"),
    ],
)
def test_a_redeclared_dim_that_refuses_the_inherited_padding_size_names_the_child(
    tmp_path: Path, bounds: str, dim: str, size: int, describe: str, fits: int
) -> None:
    child = _child(tmp_path, f"dims:\n  {dim}: {bounds}\n")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), f"dims.{dim}")  # before: text.yaml, padding.<dim>
    assert err.problem == (
        f"this declaration breaks padding.{dim}, which 'text' declares ({TEXT_YAML}): padding size {size} "
        f"breaks the dim's bounds ({describe}); change dims.{dim} here, or redeclare padding.{dim} here too"
    )
    # The fix it names works.
    _child(tmp_path, f"dims:\n  {dim}: {bounds}\npadding:\n  {dim}: {fits}\n")
    _bump_mtime(child)
    assert ts.load_schema(child).padding_sizes[dim] == fits


def test_a_file_that_declares_both_sides_is_named_at_the_entry_checked(tmp_path: Path) -> None:
    child = _child(tmp_path, "dims:\n  response: {min: 2}\npadding:\n  response: 1\n")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "padding.response")
    assert err.problem == "padding size 1 breaks the dim's bounds (>= 2)"


def test_a_grandchild_that_changes_nothing_names_the_child_that_did(tmp_path: Path) -> None:
    child = _child(tmp_path, "dims:\n  response: {min: 2}\n")
    grandchild = _child(tmp_path, "description: adds nothing\n", name="grandchild", parents="child")
    err, direct = _load_error(grandchild), _load_error(child)
    assert (err.source, err.path, err.problem) == (direct.source, direct.path, direct.problem)


def test_a_padding_size_that_overflows_an_inherited_derived_dim_names_the_padding_size(tmp_path: Path) -> None:
    child = _child(tmp_path, f"padding:\n  prompt: {2**63 - 1}\n")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "padding.prompt")  # before: the child, at dims.seq (text's key)
    assert err.problem.startswith(f"this declaration breaks dims.seq, which 'text' declares ({TEXT_YAML}): ")
    assert "prompt + response is 9223372036854775808 with the padding sizes" in err.problem


def test_a_fixed_dim_that_makes_a_parents_shape_negative_names_the_child(tmp_path: Path) -> None:
    parent = _child(
        tmp_path, "dims:\n  k: {min: 1}\nfields:\n  gap: {shape: [k - 1], dtype: int64, pad: 0}\n", "parent"
    )
    child = _child(tmp_path, "dims:\n  k: 0\n", parents="parent")
    assert ts.load_schema(parent).dims["k"] == ts.FreeDim("k", 1)
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.k")  # before: parent.yaml, fields.gap.shape[0]
    assert err.problem.startswith(f"this declaration breaks fields.gap.shape[0], which 'parent' declares ({parent}): ")
    assert "k - 1 is at most -1 for every size the dims allow" in err.problem


def test_a_dim_that_makes_a_parents_derived_dim_negative_names_the_child(tmp_path: Path) -> None:
    parent = _child(tmp_path, "dims:\n  total: {min: 0}\n  used: {min: 0}\n  gap: total - used\n", "parent")
    child = _child(tmp_path, "dims:\n  total: {max: 5}\n  used: {min: 10}\n", parents="parent")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.total")
    assert err.problem.startswith(f"this declaration breaks dims.gap, which 'parent' declares ({parent}): ")


def test_a_cycle_closed_by_a_child_names_the_child_and_reads_from_its_dim(tmp_path: Path) -> None:
    parent = _child(tmp_path, "dims:\n  a: b + 1\n  b: {min: 0}\n", "parent")
    child = _child(tmp_path, "dims:\n  b: a - 1\n", parents="parent")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.b")  # before: parent.yaml, dims.a
    assert err.problem == "dims depend on each other in a cycle: b -> a -> b (a as 'parent' declares it)"
    assert ts.load_schema(parent).dims["b"] == ts.FreeDim("b", 0)


def test_a_chain_of_derived_dims_made_too_long_by_a_child_names_the_child(tmp_path: Path) -> None:
    dims = "".join(f"  d{i}: d{i - 1} + 1\n" for i in range(1, 33))
    parent = _child(tmp_path, f"dims:\n  d0: {{min: 0}}\n{dims}", "parent")
    assert len(ts.load_schema(parent).dims) == 3 + 33
    child = _child(tmp_path, "dims:\n  d0: e + 1\n  e: {min: 0}\n", parents="parent")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.d0")
    assert "derived dims chain more than 32 deep" in err.problem


def test_a_padding_size_that_breaks_a_parents_positions_field_names_the_padding_size(tmp_path: Path) -> None:
    parent = _child(tmp_path, "fields:\n  position_ids: {shape: [seq], dtype: int8, pad: positions}\n", "parent")
    child = _child(tmp_path, "padding:\n  prompt: 200\n", parents="parent")
    assert ts.load_schema(parent).padding_sizes["prompt"] == 127  # 0..127 fits int8
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "padding.prompt")
    assert "pad rule 'positions' fills 0..200 (at the padding size), and 200 does not fit int8" in err.problem


def test_in_a_diamond_the_parent_that_redeclared_is_named(tmp_path: Path) -> None:
    left = _child(tmp_path, "dims:\n  response: {min: 2}\n", "left")
    _child(tmp_path, "description: right\n", "right")
    child = _child(tmp_path, "", parents="left, right")
    err = _load_error(child)
    assert (err.source, err.path) == (str(left), "dims.response")
    assert _load_error(left).problem == err.problem


def test_parents_that_each_load_but_do_not_fit_together_name_the_schema_that_joins_them(tmp_path: Path) -> None:
    """left narrows response to at most 3, right pads it with 4: each loads; the child that extends both cannot."""
    left = _child(tmp_path, "dims:\n  response: {max: 3}\n", "left")
    right = _child(tmp_path, "padding:\n  response: 4\n", "right")
    assert ts.load_schema(left).padding_sizes["response"] == 1 and ts.load_schema(right).padding_sizes["response"] == 4
    child = _child(tmp_path, "", parents="left, right")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "padding.response")  # not left.yaml, which loads on its own
    assert err.problem == (
        "padding size 4 breaks the dim's bounds (<= 3): 'right' declares padding.response and 'left' declares "
        "dims.response, which 'child' extends together; declare padding.response in 'child' to choose"
    )


def test_a_cycle_made_of_parents_extended_side_by_side_names_the_schema_that_joins_them(tmp_path: Path) -> None:
    _child(tmp_path, "dims:\n  a: {min: 0}\n  b: {min: 0}\n", "base")
    _child(tmp_path, "dims:\n  a: b + 1\n", "left", parents="base")
    _child(tmp_path, "dims:\n  b: a - 1\n", "right", parents="base")
    child = _child(tmp_path, "", parents="left, right")
    err = _load_error(child)
    assert (err.source, err.path) == (str(child), "dims.a")
    assert err.problem == (
        "dims depend on each other in a cycle: a -> b -> a (a as 'left' declares it, b as 'right' declares it), "
        "which 'child' extends together; redeclare one of them in 'child'"
    )


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


def test_a_bad_parent_on_trajschema_path_is_named_where_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "path").mkdir()
    (tmp_path / "mine").mkdir()
    parent = _child(tmp_path / "path", "dims:\n  prompt: {max: 64}\n", "house")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path / "path"))
    child = _child(tmp_path / "mine", "description: mine\n", parents="house")
    err = _load_error(child)
    assert (err.source, err.path) == (str(parent), "dims.prompt")
    assert f"breaks padding.prompt, which 'text' declares ({TEXT_YAML})" in err.problem
    # ... and a file on the path that redeclares a packaged dim, loaded by name, is named itself.
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema("house")
    assert (info.value.source, info.value.path) == (str(parent), "dims.prompt")


_bounds = st.fixed_dictionaries(
    {}, optional={"min": st.integers(0, 6), "max": st.integers(0, 200), "multiple_of": st.integers(1, 3)}
)
_level = st.fixed_dictionaries(
    {},
    optional={
        "dims": st.fixed_dictionaries(
            {},
            optional={
                "prompt": _bounds,
                "response": _bounds,
                "seq": st.sampled_from(["prompt + response", "prompt + response - 3", "response - prompt", 7]),
                "k": st.sampled_from([0, 2, "prompt - 200", "seq", {"min": 1}]),
            },
        ),
        "padding": st.fixed_dictionaries(
            {}, optional={"prompt": st.integers(0, 200), "response": st.integers(0, 4), "k": st.integers(0, 3)}
        ),
        "fields": st.fixed_dictionaries(
            {},
            optional={
                "position_ids": st.fixed_dictionaries(
                    {
                        "shape": st.just(["seq"]),
                        "dtype": st.sampled_from(["int8", "int64"]),
                        "pad": st.just("positions"),
                    }
                ),
                "gap": st.fixed_dictionaries(
                    {"shape": st.sampled_from([["seq - 130"], ["response - 1"], ["k"]]), "dtype": st.just("int64")},
                    optional={"pad": st.just(0)},
                ),
            },
        ),
    },
)


def _declares(data: dict, path: str) -> bool:
    section, _, rest = path.partition(".")
    key = rest.split(".")[0].split("[")[0]
    return key in (data.get(section) or {})


@settings(suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(_level, st.none() | _level), min_size=1, max_size=3))
def test_the_file_named_is_where_the_entries_at_fault_first_meet(tmp_path_factory, levels) -> None:
    """A lineage text <- s0 <- s1 <- ..., each s<i> maybe extending a side parent too (a diamond
    over text). Whatever the leaf's error:

    1. it names a key that the file it names declares, or tells that file to declare it
       (entries of parents it extends side by side);
    2. that file fails to load on its own: a file that loads alone (the packaged text, a
       consistent ancestor or side parent) is never named;
    3. a child that adds nothing gets the very same error: the file being loaded is not
       named for what it inherits.
    """
    directory = tmp_path_factory.mktemp("lineage")
    files, declared = [], {}
    for i, (data, side) in enumerate(levels):
        parents = [f"s{i - 1}" if i else "text"]
        if side is not None:
            _write(directory, f"side{i}", yaml.safe_dump({"name": f"side{i}", "extends": ["text"], **side}))
            declared[str(directory / f"side{i}.yaml")] = (f"side{i}", side)
            parents.insert(0, f"side{i}")  # before s<i-1>: [text, side] has no C3 order
        files.append(_write(directory, f"s{i}", yaml.safe_dump({"name": f"s{i}", "extends": parents, **data})))
        declared[str(files[-1])] = (f"s{i}", data)
    try:
        ts.load_schema(files[-1])
    except ts.SchemaDefinitionError as exc:
        err = exc
    else:
        return
    assert err.source in declared, str(err)
    name, data = declared[err.source]
    assert _declares(data, err.path) or f"in {name!r} to choose" in err.problem or "extends together" in err.problem, (
        str(err)
    )
    with pytest.raises(ts.SchemaDefinitionError):
        ts.load_schema(err.source)
    neutral = _write(directory, "leaf", f"name: leaf\nextends: [s{len(levels) - 1}]\ndescription: nothing new\n")
    again = _load_error(neutral)
    assert (again.source, again.path, again.problem) == (err.source, err.path, err.problem)


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


DICT_ATTACKS = [
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


@pytest.mark.parametrize(("data", "key_path", "problem"), DICT_ATTACKS)
def test_dict_attack(data, key_path: str, problem: str) -> None:
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_from_dict(data)
    err = info.value
    assert err.source == "<mapping>"
    assert err.path == key_path
    assert problem in err.problem, err.problem


# ---------------------------------------------------------------------------
# What is accepted (decisions)


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


@pytest.mark.parametrize("name", ["a-b", "a.b", "import os", "x'); import os; ('", "日本", "_"])
def test_field_names_need_not_be_identifiers(name: str) -> None:
    """They are TransferQueue keys (any string); only empty, padded and control-character names are refused."""
    schema = ts.schema_from_dict({"name": "odd", "fields": {name: {"kind": "int", "pad": 0}}})
    assert schema.validate({name: 1}) == {}


def test_empty_sections_and_a_null_extra_are_fine(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine", "name: mine\nextends: [text]\ndims:\nfields:\ntags:\npadding:\nextra:\n")
    assert ts.load_schema(path).extra == "allow"


# ---------------------------------------------------------------------------
# Fuzz: whatever the text, only SchemaDefinitionError; whatever loads, pads and validates

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


_DTYPE_NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
_numbers = st.one_of(
    st.sampled_from([0, 1, -1, 2, 127, 128, 255, 256, 300, 2**31, 2**63 - 1, 2**63, 2**64, 0.5, 1.5, -0.0, 0.1]),
    st.sampled_from([65504.0, 65520.0, 1e40, 1e-8, math.inf, -math.inf, math.nan, True, False, 16777217, 1e300]),
    st.integers(-300, 300),
    st.floats(width=16),
)
_pads = st.one_of(_numbers, st.sampled_from(["eos", "positions", "uid", "index", "empty"]))
_checks = {"values": st.lists(_numbers, min_size=1, max_size=4), "min": _numbers, "max": _numbers}
_tensor_field = st.fixed_dictionaries(
    {
        "pad": _pads,
        "shape": st.sampled_from([["n"], ["n", 2], [], ["m"], ["n + m"], [3, "n"], ["2 * n - 1"]]),
        "dtype": st.one_of(
            st.sampled_from(_DTYPE_NAMES), st.lists(st.sampled_from(_DTYPE_NAMES), min_size=1, max_size=3)
        ),
    },
    optional={**_checks, "finite": st.booleans()},
)
_other_field = st.fixed_dictionaries(
    {"pad": _pads, "kind": st.sampled_from(["int", "float", "bool", "any", "str", "mapping"])},
    optional={**_checks, "finite": st.booleans(), "required": st.booleans()},
)
_free_dim = st.fixed_dictionaries(
    {}, optional={"min": st.integers(0, 5), "max": st.integers(0, 8), "multiple_of": st.integers(1, 4)}
)
_tag = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["int", "float", "bool", "str", "mapping", "any"]),
        "equals": st.sampled_from(["n", "m", "n + m", 3, "n - m"]),
        "default": _numbers,
    },
)


def _sizes(schema: ts.Schema) -> dict[str, int]:
    """A size for every free dim without a padding size: the smallest its bounds allow (>= 1 if they can)."""
    out = {}
    for name, d in schema.dims.items():
        if isinstance(d, ts.FreeDim) and name not in schema.padding_sizes:
            step = d.multiple_of or 1
            size = -(-max(d.min, 1) // step) * step
            out[name] = size if d.max is None or size <= d.max else -(-d.min // step) * step
    return out


def _pad_and_validate(schema: ts.Schema) -> None:
    try:
        pad = schema.padding(2, eos_token_id=1, dims=_sizes(schema))
    except ValueError as exc:
        # What the schema cannot decide: the caller's eos_token_id, and sizes the caller picks.
        if not any(s in str(exc) for s in ("eos_token_id=1", "< 0", "positions")):
            raise
        return
    free = {n: v for n, v in pad.dims.items() if isinstance(schema.dims.get(n), ts.FreeDim)}
    schema.validate_batch(pad.fields, tags=pad.tags, dims=free)


@settings(suppress_health_check=list(HealthCheck))
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.one_of(_tensor_field, _other_field), min_size=1, max_size=3),
    _free_dim,
    st.one_of(st.just(1), _free_dim),
    st.dictionaries(st.sampled_from(["t", "is_padding"]), _tag, max_size=2),
    st.fixed_dictionaries({}, optional={"n": st.integers(0, 9), "m": st.integers(0, 9)}),
)
def test_whatever_loads_pads_and_validates(fields, n, m, tags, padding) -> None:
    data = {"name": "fz", "dims": {"n": n, "m": m}, "fields": copy.deepcopy(fields), "tags": tags, "padding": padding}
    try:
        schema = ts.schema_from_dict(data)
    except ts.SchemaDefinitionError:
        return
    _pad_and_validate(schema)


# -- the interval check stays cheap (issue 15 §2) ---------------------------------------------

import time  # noqa: E402


def _squarings(x: dict, n: int = 30, top: str | None = None) -> dict:
    """``x``, then ``s0 = x * x``, ``s1 = s0 * s0``, ... : sizes of ``x**(2**n)`` were computed exactly."""
    dims: dict = {"x": x}
    prev = "x"
    for i in range(n):
        dims[f"s{i}"] = f"{prev} * {prev}"
        prev = f"s{i}"
    if top is not None:
        dims["top"] = top.format(prev=prev)
    shape = ["top" if top is not None else prev]
    return {"name": "squares", "dims": dims, "fields": {"t": {"shape": shape, "dtype": "int64", "pad": 0}}}


@pytest.mark.parametrize(
    "x",
    [
        pytest.param({"max": 2}, id="max-2"),
        pytest.param({"max": 2**62}, id="max-2**62"),
        pytest.param({"min": 3, "max": 2**62}, id="min-and-max"),
        pytest.param({"min": 2**40}, id="large-min-no-max"),
    ],
)
def test_a_chain_of_30_squarings_under_a_max_loads_in_well_under_a_second(x):
    """It took ~14 s at max 2 (and did not end at max 2**62): the check squared x**(2**29) exactly."""
    start = time.perf_counter()
    schema = ts.schema_from_dict(_squarings(x))
    assert time.perf_counter() - start < 2.0
    assert schema.dims["s29"].expr.names() == ("s28",)


def test_a_chain_of_squarings_still_refuses_what_is_negative_for_every_size():
    start = time.perf_counter()
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_from_dict(_squarings({"max": 2**62}, top="0 - {prev} - 1"))
    assert time.perf_counter() - start < 2.0
    assert info.value.path == "dims.top"
    assert "is at most -1 for every size the dims allow; a size cannot be negative" in info.value.problem
    ts.schema_from_dict(_squarings({"max": 2**62}, top="{prev} - 1"))  # s29 may be large: not refused


# --- bounds written in dims and distinct slices (issue 16): what loads, and what pinning refuses


def _moe(dtype: str = "[uint8, int16]", pad: str = "0", extra: str = "") -> ts.Schema:
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


def test_a_dim_bound_loads_into_the_fields_expressions():
    f = _moe(extra=", distinct: true", pad="copy").fields["routed_experts"]
    assert (f.min, f.max, str(f.max_expr), f.min_expr, f.distinct) == (0, None, "experts - 1", None, True)
    assert f.max_expr.names() == ("experts",)


def test_a_fill_that_breaks_a_dim_bound_at_some_sizes_only_loads_and_pinning_refuses_it():
    schema = _moe(pad="5", dtype="int16")  # 5 <= experts - 1 unless experts <= 5
    assert schema.with_dims({"experts": 6}).dims["experts"].size == 6
    with pytest.raises(ts.SchemaDefinitionError) as info:
        schema.with_dims({"experts": 4})
    assert info.value.path == "fields.routed_experts.pad"
    assert "fill 5 is not <= 3, as the field's bounds are at the pinned sizes (pinned: experts by dims)" in str(
        info.value
    )


@pytest.mark.parametrize("pad", ["{spread: experts}", "positions", "index"])
def test_a_counting_pad_rule_whose_0_breaks_a_dim_min_at_the_pinned_sizes_is_refused_by_pinning(pad):
    """Found by the to_yaml round trip: the pinned schema must be one the loader would load."""
    kind = "kind: int" if pad == "index" else "shape: [seq, topk], dtype: int64"
    schema = ts.schema_from_dict(
        {
            "name": "m",
            "dims": {"seq": {}, "topk": {"min": 1}, "experts": {"min": 1}},
            "fields": {"r": {**yaml.safe_load("{" + kind + "}"), "min": "experts - 1", "pad": yaml.safe_load(pad)}},
        }
    )
    assert schema.with_dims({"experts": 1}).dims["experts"].size == 1  # min 0: the 0 keeps to it
    with pytest.raises(ts.SchemaDefinitionError) as info:
        schema.with_dims({"experts": 2})
    assert info.value.path == "fields.r.pad"
    assert "starts at 0, which is not >= 1, as the field's bounds are at the pinned sizes" in str(info.value)


def test_pinning_more_experts_than_every_declared_dtype_holds_names_the_field_dtype_and_largest_id():
    schema = _moe(dtype="uint8")
    with pytest.raises(ts.SchemaDefinitionError) as info:
        schema.with_dims({"experts": 300}, sources={"experts": "config num_experts"})
    assert info.value.path == "fields.routed_experts.dtype"
    assert info.value.problem == (
        "no dtype of uint8 holds the bound: uint8 cannot hold 299, the largest value max experts - 1 allows "
        "(experts=300); uint8 holds 0..255; add a wider dtype (pinned: experts by config num_experts)"
    )
    assert schema.with_dims({"experts": 256}).dims["experts"].size == 256


def test_pinning_past_a_narrow_dtype_keeps_it_and_a_sample_in_it_is_a_dtype_violation_as_with_dims():
    schema = _moe()  # [uint8, int16]
    pinned = schema.with_dims({"experts": 300}, sources={"experts": "config num_experts"})
    assert pinned.dims["experts"].size == 300
    assert pinned.fields["routed_experts"].dtype_names == ("uint8", "int16")
    narrow = {"routed_experts": torch.zeros(4, 2, dtype=torch.uint8)}
    wide = {"routed_experts": torch.tensor([[0, 299]] * 4, dtype=torch.int16)}
    found = [(v.field, v.code, v.actual) for v in pinned.violations(narrow)]
    assert found == [("routed_experts", "dtype", "uint8")]
    assert found == [(v.field, v.code, v.actual) for v in schema.violations(narrow, dims={"experts": 300})]
    assert pinned.violations(wide) == []
    assert pinned.violations(narrow, dims=None) and not pinned.violations(wide)


def test_a_fixed_dim_too_large_for_the_dtype_is_refused_when_loaded():
    with pytest.raises(ts.SchemaDefinitionError, match="uint8 cannot hold 299"):
        ts.schema_from_dict(
            {
                "name": "r",
                "dims": {"seq": {"min": 1}, "experts": 300},
                "fields": {"r": {"shape": ["seq"], "dtype": "uint8", "max": "experts - 1", "pad": 0}},
            }
        )


def test_a_fill_that_breaks_a_dim_bound_at_the_padding_sizes_is_refused():
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_from_dict(
            {
                "name": "r",
                "dims": {"seq": {"min": 1}, "experts": {"min": 1}},
                "fields": {"r": {"shape": ["seq"], "dtype": "int64", "max": "experts - 1", "pad": 3}},
                "padding": {"experts": 2},
            }
        )
    assert info.value.path == "fields.r.pad"
    assert "fill 3 breaks max experts - 1 at the padding sizes (experts=2)" in info.value.problem


def test_a_schema_built_in_python_with_a_bound_over_an_undeclared_dim_is_refused():
    from trajschema.core import parse_expr

    schema = _moe(dtype="int16")
    bad = dataclasses.replace(schema.fields["routed_experts"], max_expr=parse_expr("nope - 1"))
    with pytest.raises(ValueError, match="uses dim 'nope'"):
        ts.Schema(
            name="x",
            description="",
            architectures=[],
            lineage=["x"],
            dims=dict(schema.dims),
            fields={"routed_experts": bad},
            tags={},
            padding_sizes={},
            extra="allow",
            source="",
        )


def test_pinning_sizes_at_which_two_dim_bounds_leave_no_value_is_refused():
    schema = ts.schema_from_dict(
        {
            "name": "r",
            "dims": {"seq": {"min": 1}, "topk": {"min": 1}, "experts": {"min": 1}},
            "fields": {
                "r": {"shape": ["seq", "topk"], "dtype": "int64", "min": "topk", "max": "experts - 1", "pad": "copy"}
            },
        }
    )
    assert schema.with_dims({"topk": 2, "experts": 3}).dims["experts"].size == 3
    with pytest.raises(ts.SchemaDefinitionError, match="min 2 is above max 1 at the pinned sizes; no value passes"):
        schema.with_dims({"topk": 2, "experts": 2})
