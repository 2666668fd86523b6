"""Layout files: the packaged ones load, every malformed file gets a file-and-key-path error, and
binding a layout to a schema refuses what the layout cannot hold."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest
import torch

import trajschema as ts
from trajschema.dense import bind_layout
from trajschema.files import layout_from_dict

SKYRL = {
    "name": "mine",
    "axes": {"seq": {"pad_side": "left", "length": "max"}},
    "sizes": {"seq": "attention_mask"},
}


def _refused(data: dict, path: str, words: str) -> None:
    with pytest.raises(ts.LayoutDefinitionError) as err:
        layout_from_dict(data, source="mine.yaml")
    assert err.value.source == "mine.yaml" and err.value.path == path, str(err.value)
    assert words in err.value.problem, str(err.value)
    assert isinstance(err.value, ts.SchemaDefinitionError)


def test_the_packaged_layouts_load_and_bind_to_every_packaged_schema() -> None:
    assert {"verl_dataproto", "skyrl"} <= set(ts.layout_names())
    for name in ("verl_dataproto", "skyrl"):
        layout = ts.load_layout(name)
        assert layout.name == name and layout.description
        for schema in ts.schema_names():
            bound = bind_layout(layout, ts.load_schema(schema).plan)
            assert set(bound.placed) == set(ts.load_schema(schema).fields)


def test_the_packaged_layouts_say_what_the_trainers_do() -> None:
    verl, skyrl = ts.load_layout("verl_dataproto"), ts.load_layout("skyrl")
    assert [(b.dim, b.pad_side) for b in verl.axes["seq"].blocks] == [("prompt", "left"), ("response", "right")]
    assert skyrl.axes["seq"].blocks[0].holds == ("prompt", "response")
    assert skyrl.axes["response"].blocks[0].pad_side == "left"  # response tensors right-aligned
    assert skyrl.fields["input_ids"].key == "sequences" and skyrl.fields["uid"].key == "metadata.uids"
    assert skyrl.fields["position_ids"].held == "absent"
    assert verl.fields["loss_mask"].held == "same_as" and verl.fields["loss_mask"].source == "response_mask"
    vlm = ts.load_schema("vlm_mrope_moe")
    assert verl.entry("position_ids", vlm.lineage).pad == 1  # the vlm_mrope override reaches its children
    assert verl.entry("position_ids", ts.load_schema("text").lineage).pad == "edge"


def test_a_layout_is_a_value_that_pickles_and_hashes() -> None:
    layout = ts.load_layout("skyrl")
    again = pickle.loads(pickle.dumps(layout))
    assert again == layout and hash(again) == hash(layout)
    pinned = layout.with_pad_token(7)
    assert pinned.pad_token_id == 7 and layout.pad_token_id is None and pinned != layout
    for bad in (-1, 1.5, True, "0"):
        with pytest.raises(ValueError, match="pad_token_id"):
            layout.with_pad_token(bad)


def test_a_layout_file_by_path_and_on_the_search_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (Path(ts.load_layout("skyrl").source)).read_text().replace("name: skyrl", "name: mine")
    (tmp_path / "mine.yaml").write_text(text)
    assert ts.load_layout(tmp_path / "mine.yaml").name == "mine"
    monkeypatch.setenv("TRAJSCHEMA_LAYOUT_PATH", str(tmp_path))
    assert "mine" in ts.layout_names() and ts.load_layout("mine").name == "mine"
    (tmp_path / "other.yaml").write_text(text)
    with pytest.raises(ts.LayoutDefinitionError, match="declares name 'mine'"):
        ts.load_layout("other")


def test_a_layout_is_read_once_and_again_when_its_file_changes(tmp_path: Path) -> None:
    """Loaded layouts are shared (a drop-in names one per padding call); an edited file is read again."""
    assert ts.load_layout("skyrl") is ts.load_layout("skyrl")
    text = (Path(ts.load_layout("skyrl").source)).read_text().replace("name: skyrl", "name: mine")
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    first = ts.load_layout(path)
    assert ts.load_layout(path) is first
    path.write_text(text.replace("description: >-\n", "description: >-\n  edited.\n", 1))
    again = ts.load_layout(path)
    assert again is not first and again.description.startswith("edited.")
    path.write_text("name: mine\naxes: 3\n")
    with pytest.raises(ts.LayoutDefinitionError):
        ts.load_layout(path)


def test_unknown_names_and_wrong_arguments() -> None:
    with pytest.raises(ts.SchemaNotFoundError, match="did you mean 'skyrl'"):
        ts.load_layout("skyr")
    with pytest.raises(ts.SchemaNotFoundError, match="no layout file"):
        ts.load_layout("/nowhere/x.yaml")
    with pytest.raises(TypeError, match="layout name or a path"):
        ts.load_layout(3)  # type: ignore[arg-type]


def test_malformed_yaml_is_refused_with_the_file(tmp_path: Path) -> None:
    cases = {
        "dup.yaml": "name: a\nname: b\n",
        "alias.yaml": "name: a\naxes: &x {seq: *x}\n",
        "list.yaml": "- 1\n- 2\n",
        "empty.yaml": "",
        "tab.yaml": "name: [\n",
    }
    for file, text in cases.items():
        (tmp_path / file).write_text(text)
        with pytest.raises(ts.LayoutDefinitionError) as err:
            ts.load_layout(tmp_path / file)
        assert err.value.source.endswith(file), str(err.value)


@pytest.mark.parametrize(
    ("change", "path", "words"),
    [
        ({"axes": {"seq": {"pad_side": "middle"}}}, "axes.seq.pad_side", "left or right"),
        ({"axes": {"seq": {"pad_side": "left", "length": "longest"}}}, "axes.seq.length", "max"),
        ({"axes": {"seq": {"pad_side": "left", "side": "x"}}}, "axes.seq.side", "did you mean 'pad_side'"),
        ({"axes": {"seq": {"concat": ["prompt", "response"]}}}, "axes.seq.concat[0]", "not a padded block"),
        ({"axes": {"seq": {"pad_side": "left", "holds": ["prompt"]}}}, "axes.seq.holds", "at least two"),
        ({"axes": {"seq": {"pad_side": "left", "holds": ["a", "a"]}}}, "axes.seq.holds", "listed twice"),
        ({"axes": {"se q": {"pad_side": "left"}}}, "axes.se q", "not an identifier"),
        ({"sizes": {"prompt": "attention_mask"}}, "sizes.prompt", "no axis holds"),
        ({"sizes": {"seq": 3}}, "sizes.seq", "non-empty string"),
        ({"fields": {"x": {"pad": True}}}, "fields.x.pad", "a number, pad_token, edge or any"),
        ({"fields": {"x": {"pad": "eos"}}}, "fields.x.pad", "a number, pad_token, edge or any"),
        ({"fields": {"x": {"dtype": "float"}}}, "fields.x.dtype", "dtype name"),
        ({"fields": {"x": {"key": "a", "slice_of": "b"}}}, "fields.x", "not slice_of and key"),
        ({"fields": {"x": {"gather": []}}}, "fields.x.gather", "list of batch keys"),
        ({"fields": {"x": "missing"}}, "fields.x", "expected a mapping"),
        ({"fields": {"x": {"keys": "a"}}}, "fields.x.keys", "did you mean 'key'"),
        ({"overrides": {"vlm": {"x": {"pad": "eos"}}}}, "overrides.vlm.x.pad", "pad_token"),
        ({"fields": {"x": {"broadcast": "yes"}}}, "fields.x.broadcast", "true or false"),
        ({"shared": "pixel_values"}, "shared", "list of batch keys"),
        ({"adds": {"m": {"shape": "prompt", "dtype": "int64"}}}, "adds.m.shape", "list of dim names"),
        ({"adds": {"m": {"shape": ["a b"], "dtype": "int64"}}}, "adds.m.shape", "list of dim names"),
        ({"adds": {"m": {"shape": [], "dtype": "int"}}}, "adds.m.dtype", "dtype name"),
        ({"adds": {"m": {"shape": [], "dtype": "int64", "values": [0, "1"]}}}, "adds.m.values", "list of numbers"),
        ({"adds": {"m": {"shape": [], "dtype": "int64", "max": "0"}}}, "adds.m.max", "a number"),
        ({"adds": {"m": {"shape": [], "dtype": "int64", "finite": 1}}}, "adds.m.finite", "true or false"),
        ({"adds": {"m": {"shape": [], "dtype": "int64", "pad": 0}}}, "adds.m.pad", "unknown key"),
        ({"adds": {"m n": {"shape": [], "dtype": "int64"}}}, "adds.m n", "not an identifier"),
        ({"colour": 1}, "colour", "unknown key"),
        ({"name": ""}, "name", "non-empty string"),
    ],
)
def test_every_malformed_key_is_named(change: dict, path: str, words: str) -> None:
    _refused({**SKYRL, **change}, path, words)


def test_required_sections() -> None:
    _refused({"name": "a", "sizes": {"seq": "m"}}, "axes", "missing required key 'axes'")
    _refused({"name": "a", "axes": SKYRL["axes"]}, "sizes", "missing required key 'sizes'")
    _refused([1, 2], "", "expected a mapping at the top level")  # type: ignore[arg-type]


def _bind_refused(schema_yaml: str, layout: dict, path: str, words: str, tmp_path: Path) -> None:
    file = tmp_path / "s.yaml"
    file.write_text(textwrap.dedent(schema_yaml))
    schema = ts.load_schema(file)
    with pytest.raises(ts.LayoutDefinitionError) as err:
        bind_layout(layout_from_dict(layout, source="mine.yaml"), schema.plan)
    assert err.value.path == path and words in err.value.problem, str(err.value)
    assert "schema 's'" in str(err.value)


BASE = """
name: s
dims: {prompt: {min: 1}, response: {min: 0}, seq: prompt + response, k: {min: 1}}
padding: {prompt: 1, response: 1}
fields:
  input_ids: {shape: [seq], dtype: int64, pad: eos}
  attention_mask: {shape: [seq], dtype: int64, values: [0, 1], pad: 1}
  response_mask: {shape: [response], dtype: int64, values: [0, 1], pad: 0}
"""
HOLDS = {
    "name": "l",
    "axes": {
        "seq": {"pad_side": "left", "length": "max", "holds": ["prompt", "response"]},
        "response": {"pad_side": "left"},
    },
    "sizes": {"seq": "attention_mask", "response": "response_mask"},
}


def test_binding_refuses_what_the_layout_cannot_hold(tmp_path: Path) -> None:
    _bind_refused(
        BASE + "  pairs: {shape: [seq, response], dtype: int64, pad: 0}\n",
        HOLDS,
        "fields.pairs",
        "two padded dims",
        tmp_path,
    )
    _bind_refused(
        BASE + "  sq: {shape: [seq + 1], dtype: int64, pad: 0}\n",
        HOLDS,
        "fields.sq",
        "built from padded dims",
        tmp_path,
    )
    _bind_refused(
        BASE + "  prompts: {shape: [prompt], dtype: int64, pad: 0}\n", HOLDS, "fields.prompts", "slice_of", tmp_path
    )
    sliced = {**HOLDS, "fields": {"prompts": {"slice_of": "nothing"}}}
    _bind_refused(
        BASE + "  prompts: {shape: [prompt], dtype: int64, pad: 0}\n", sliced, "fields.prompts", "not a field", tmp_path
    )
    same = {**HOLDS, "fields": {"loss_mask": {"same_as": "input_ids"}}}
    _bind_refused(
        BASE + "  loss_mask: {shape: [response], dtype: int64, pad: 0}\n", same, "fields.loss_mask", "same_as", tmp_path
    )
    unmasked = BASE.replace("values: [0, 1], pad: 1}", "pad: 1}")
    _bind_refused(unmasked, HOLDS, "sizes.seq", "values: [0, 1]", tmp_path)
    gathered = {**HOLDS, "fields": {"input_ids": {"gather": ["a"]}}}
    _bind_refused(BASE, gathered, "fields.input_ids", "gather builds a mapping", tmp_path)
    tagged = {**HOLDS, "tags": {"is_padding": "metadata.is_padding"}}
    _bind_refused(BASE, tagged, "tags.is_padding", "no tag", tmp_path)


def test_a_dense_batch_copy_keeps_its_metadata_and_shares_no_key_table() -> None:
    """Was: ``DenseBatch.copy()`` returned a plain dict (the metadata lost) and ``copy.copy``
    shared the metadata dict with the original."""
    import copy

    d = ts.DenseBatch({"a": torch.ones(2)}, metadata={"uids": ["x", "y"]})
    for e in (d.copy(), copy.copy(d), copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
        assert type(e) is ts.DenseBatch and e.metadata == {"uids": ["x", "y"]} and torch.equal(e["a"], d["a"])
        e.metadata["uids"] = []
        e["b"] = 1
        assert d.metadata == {"uids": ["x", "y"]} and list(d) == ["a"]


def test_binding_refuses_added_fields_the_schema_cannot_take(tmp_path: Path) -> None:
    clash = {**HOLDS, "adds": {"response_mask": {"shape": ["response"], "dtype": "int64"}}}
    _bind_refused(BASE, clash, "adds.response_mask", "declares a field 'response_mask' already", tmp_path)
    stray = {**HOLDS, "adds": {"logps": {"shape": ["respons"], "dtype": "float32"}}}
    _bind_refused(BASE, stray, "adds.logps.shape", "did you mean 'response'", tmp_path)


def test_added_fields_join_the_bound_plan_once() -> None:
    layout = ts.load_layout("trl_grpo")
    plan = ts.load_schema("text").plan
    bound = bind_layout(layout, plan)
    assert set(layout.adds) <= set(bound.plan.fields) and not set(layout.adds) & set(plan.fields)
    assert bind_layout(layout, bound.plan).plan is bound.plan  # a bound plan is not extended twice
    assert list(bound.plan.fields)[: len(plan.fields)] == list(plan.fields)
