"""Schema.to_yaml(): every schema writes a document the loader compiles back to an equal schema."""

from __future__ import annotations

import pickle

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import trajschema as ts
from trajschema.export.yaml import render


@pytest.mark.parametrize("name", ts.schema_names())
def test_packaged_schema_round_trips_by_dict_and_by_path(name, tmp_path):
    schema = ts.load_schema(name)
    text = schema.to_yaml()
    assert ts.schema_from_dict(yaml.safe_load(text)) == schema
    # A file beside the packaged ones under another name: same declarations and lineage tail.
    path = tmp_path / f"{name}_copy.yaml"
    path.write_text(text.replace(f"name: {name}\n", f"name: {name}_copy\n", 1))
    again = ts.load_schema(path)
    assert (again.dims, again.fields, again.tags, again.padding_sizes, again.extra) == (
        schema.dims,
        schema.fields,
        schema.tags,
        schema.padding_sizes,
        schema.extra,
    )
    assert again.lineage[1:] == schema.lineage[1:]


def test_a_multi_parent_lineage_is_reproduced():
    schema = ts.load_schema("vlm_mrope_moe")
    again = ts.schema_from_dict(yaml.safe_load(schema.to_yaml()))
    assert again.lineage == schema.lineage == ("vlm_mrope_moe", "vlm_mrope", "moe_routed", "text")


_name = st.text(st.characters(codec="utf-8"), min_size=1, max_size=8).filter(
    lambda s: s.isprintable() and s.strip() == s
)
_desc = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@settings(deadline=None)
@given(
    field=_name,
    desc=_desc,
    lo=st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False, width=64),
    fill=st.sampled_from([0, 0.0, -0.0, 1.5, float("inf")]),
    dim_desc=_desc,
    size=st.integers(0, 2**40),
)
def test_odd_names_numbers_and_descriptions_round_trip(field, desc, lo, fill, dim_desc, size):
    """Quoting: field names like '#', 'a: b', 'null', unicode; huge ints, -0.0, inf; multi-line descriptions."""
    doc = {
        "name": "odd",
        "description": desc,
        "dims": {"n": {"min": 1, "description": dim_desc}, "k": size, "m": "n + k"},
        "fields": {
            field: {"shape": ["m", 2], "dtype": "float64", "pad": fill, "description": desc},
            "count": {"kind": "float", "min": lo, "pad": lo},
        },
        "tags": {"t": {"kind": "str", "default": desc}, "len": {"equals": "n * 2"}},
        "padding": {"n": 3},
        "extra": "forbid",
    }
    schema = ts.schema_from_dict(doc)
    text = schema.to_yaml()
    again = ts.schema_from_dict(yaml.safe_load(text))
    assert again == schema
    assert pickle.loads(pickle.dumps(again)) == schema


def test_comments_are_written_on_their_lines_and_stay_one_line():
    text = render({"name": "x", "fields": {"a": {"kind": "int", "pad": 0}}}, {"fields.a": "two\nlines", "": "top"})
    assert text.splitlines() == ["# top", "name: x", "fields:", "  a: {kind: int, pad: 0}  # two lines"]
    assert yaml.safe_load(text) == {"name": "x", "fields": {"a": {"kind": "int", "pad": 0}}}


def test_an_expression_dim_keeps_its_text_and_an_empty_section_is_left_out():
    schema = ts.schema_from_dict({"name": "e", "dims": {"a": {}, "b": "a * 2 + 1"}, "fields": {}})
    text = schema.to_yaml()
    assert "b: a * 2 + 1" in text and "fields:" not in text and "tags:" not in text
    assert ts.schema_from_dict(yaml.safe_load(text)) == schema


@pytest.mark.parametrize("text", ["\x85", "a\u2028b", "c\u2029", "é ☃"])
def test_descriptions_with_characters_yaml_folds_round_trip(text):
    """PyYAML writes NEL and U+2028/9 raw and folds them on reading: to_yaml escapes them (found by hypothesis)."""
    schema = ts.schema_from_dict(
        {
            "name": "odd",
            "description": text,
            "dims": {"n": {"min": 0, "description": text}},
            "fields": {"x": {"shape": ["n"], "dtype": "int64", "pad": 0, "description": text}},
        }
    )
    again = ts.schema_from_dict(yaml.safe_load(schema.to_yaml()))
    assert again == schema and again.dims["n"].description == text and again.fields["x"].description == text


@pytest.mark.parametrize("name", ts.schema_names())
def test_a_copied_or_rebuilt_schema_writes_the_same_document(name):
    """Read-only declarations (and a directly built Schema) export like the loaded one, yaml's safe dumper too."""
    import copy

    schema = ts.load_schema(name)
    rebuilt = ts.Schema(
        **{
            k: getattr(schema, k)
            for k in (
                "name",
                "description",
                "architectures",
                "lineage",
                "dims",
                "fields",
                "tags",
                "padding_sizes",
                "extra",
                "source",
            )
        }
    )
    for other in (copy.deepcopy(schema), pickle.loads(pickle.dumps(schema)), rebuilt):
        assert other.to_yaml() == schema.to_yaml()
    assert yaml.safe_load(yaml.safe_dump(dict(schema.padding_sizes))) == schema.padding_sizes
