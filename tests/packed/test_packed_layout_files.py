"""Packed layout files: the packaged ones load and bind to every schema; every malformed file
gets a file-and-key-path error; binding refuses what a packed layout cannot hold."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import trajschema as ts
from trajschema.files import layout_from_dict
from trajschema.packed import bind_packed

THD: dict[str, Any] = {
    "name": "mine",
    "kind": "packed",
    "tokens": "seq",
    "parts": ["prompt", "response"],
    "offsets": "cu",
}


def _refused(data: dict, path: str, words: str) -> None:
    with pytest.raises(ts.LayoutDefinitionError) as err:
        layout_from_dict(data, source="mine.yaml")
    assert err.value.source == "mine.yaml" and err.value.path == path, str(err.value)
    assert words in err.value.problem, str(err.value)


@pytest.mark.parametrize("name", ["thd", "verl_nopad"])
def test_the_packaged_packed_layouts_load_bind_and_pickle(name: str) -> None:
    layout = ts.load_layout(name)
    assert isinstance(layout, ts.PackedLayout) and layout.description
    for schema in ts.schema_names():
        plan = ts.load_schema(schema).plan
        assert set(bind_packed(layout, plan).placed) == set(plan.fields)
    assert pickle.loads(pickle.dumps(layout)) == layout


def test_verl_nests_the_teacher_fields_only_as_a_pair() -> None:
    lay = ts.load_layout("verl_nopad")
    assert isinstance(lay, ts.PackedLayout)
    assert bind_packed(lay, ts.load_schema("distill").plan).placed["teacher_ids"].held == "nested"
    lone = ts.load_schema("distill").plan
    import dataclasses

    fields = {n: f for n, f in lone.fields.items() if n != "teacher_logprobs"}
    from trajschema.check import build_plan

    one = build_plan(**{**lone.declarations, "fields": fields})
    assert bind_packed(lay, one).placed["teacher_ids"].held == "dense"
    assert dataclasses.is_dataclass(lay)


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"kind": "ragged"}, "kind", "dense"),
        ({"tokens": 3}, "tokens", "dim name"),
        ({"offsets": ""}, "offsets", "non-empty"),
        ({"alignment": 0}, "alignment", "1..2**63-1"),
        ({"alignment": True}, "alignment", "1..2**63-1"),
        ({"alignment": 2**63}, "alignment", "1..2**63-1"),
        ({"parts": ["prompt"]}, "parts", "two dim names"),
        ({"fields": {"input_ids": "flat"}}, "fields.input_ids", "expected one of"),
        ({"fields": {"input_ids": {"held": "nestd"}}}, "fields.input_ids.held", "nested"),
        ({"fields": {"loss_mask": {"span": "answer"}}}, "fields.loss_mask.span", "parts"),
        ({"fields": {"loss_mask": {"pad": [0]}}}, "fields.loss_mask.pad", "a number"),
        ({"fields": {"loss_mask": {"pad": "edge"}}}, "fields.loss_mask.pad", "a number"),
        ({"fields": {"loss_mask": {"nested_with": "x"}}}, "fields.loss_mask.nested_with", "list"),
        ({"fields": {"loss_mask": {"colour": 1}}}, "fields.loss_mask.colour", "unknown key"),
        ({"fields": {"input_ids": "nested"}}, "fields.input_ids", "offsets: nested"),
        ({"fields": {"input_ids": "dense"}}, "fields.input_ids", "dense:"),
        ({"fields": {"loss_mask": {"held": "alias"}}}, "fields.loss_mask", "alias:"),
        ({"metadata": {"indices": "where"}}, "metadata.indices", "index or width"),
        ({"sizes": {}}, "sizes", "unknown key"),
    ],
)
def test_malformed_packed_layouts_name_the_key(change: dict, path: str, words: str) -> None:
    _refused({**THD, **change}, path, words)


def test_binding_refuses_what_the_layout_cannot_hold() -> None:
    plan = ts.load_schema("text").plan
    for change, words in [
        ({"tokens": "nope"}, "no dim"),
        ({"parts": ["response", "prompt"]}, r"is not response \+ prompt \(found seq: prompt \+ response\)"),
        ({"fields": {"uid": "tokens"}}, "no single 'seq' axis"),
        ({"fields": {"uid": "jagged"}}, "no per-sample dim"),
        ({"fields": {"loss_mask": {"alias": "nothing_here"}}}, "no batch key"),
    ]:
        layout = layout_from_dict({**THD, **change}, source="mine.yaml")
        assert isinstance(layout, ts.PackedLayout)
        with pytest.raises(ts.LayoutDefinitionError, match=words):
            bind_packed(layout, plan)


def test_a_dense_function_refuses_a_packed_layout_and_back() -> None:
    s = ts.load_schema("text")
    with pytest.raises(ValueError, match="packed"):
        s.from_dense({}, layout="thd")
    with pytest.raises(ValueError, match="dense"):
        s.from_packed({}, layout="skyrl")
    with pytest.raises(TypeError, match="layout"):
        s.batch_violations({}, layout=3)  # type: ignore[arg-type]
