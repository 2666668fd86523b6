"""Schema compatibility: one test per rule, each break shown real with a sample validation itself judges."""

from __future__ import annotations

import copy
import math
import pickle

import pytest
import torch

import trajschema as ts
from trajschema.evolution.changes import CHANGE_KINDS, COMPAT_MODES, Change, compatibility
from trajschema.evolution.rules import expansions
from trajschema.testing import verl_sample

TEXT = ts.load_schema("text").to_yaml()


def text_dict(name: str = "t2") -> dict:
    import yaml

    d = yaml.safe_load(TEXT)
    d["name"] = name
    return d


def build(d: dict) -> ts.Schema:
    return ts.schema_from_dict(d)


def one(name: str = "s", extra: str = "allow", **field) -> ts.Schema:
    """A schema with one free dim ``n`` and one field ``x``."""
    field.setdefault("pad", "copy")
    return build({"name": name, "dims": {"n": {}}, "fields": {"x": field}, "extra": extra})


def flags(old: ts.Schema, new: ts.Schema) -> list[tuple[str, str, bool, bool]]:
    return [(c.kind, c.path, c.backward_breaking, c.forward_breaking) for c in old.compatibility(new, "full")]


def valid(schema: ts.Schema, sample: dict, tag: dict | None = None) -> bool:
    return schema.violations(sample, tag=tag, depth="values") == []


def breaks(src: ts.Schema, tgt: ts.Schema, sample: dict, tag: dict | None = None) -> None:
    """``sample`` is a real counterexample: valid under ``src``, invalid under ``tgt``."""
    assert valid(src, sample, tag), src.violations(sample, tag=tag)
    assert not valid(tgt, sample, tag)


# -- the front door ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", COMPAT_MODES)
@pytest.mark.parametrize("name", ts.schema_names())
def test_every_packaged_schema_is_compatible_with_itself(name, mode):
    s = ts.load_schema(name)
    assert s.compatibility(s, mode) == []
    assert s.compatibility(pickle.loads(pickle.dumps(s)), mode) == []
    import yaml

    again = build(yaml.safe_load(s.to_yaml()))  # flattened: no extends, the same declarations
    assert s.compatibility(again, mode) == [] and again.compatibility(s, mode) == []


def test_description_and_architectures_are_not_reported():
    d = text_dict()
    d["description"] = "something else"
    d["architectures"] = ["OtherForCausalLM"]
    d["dims"]["prompt"] = {"min": 1, "description": "another description"}
    assert ts.load_schema("text").compatibility(build(d), "full") == []


def test_method_delegates_to_the_function():
    old, new = ts.load_schema("text"), ts.load_schema("vlm_mrope")
    for mode in COMPAT_MODES:
        assert old.compatibility(new, mode) == compatibility(old.plan, new.plan, mode)
    assert old.compatibility(new) == compatibility(old.plan, new.plan, "backward")


@pytest.mark.parametrize("mode", ["Backward", "both", "", None, 1])
def test_a_bad_mode_is_a_value_error_naming_the_modes(mode):
    s = ts.load_schema("text")
    with pytest.raises(ValueError, match=r"mode must be one of 'backward', 'forward', 'full', found") as e:
        s.compatibility(s, mode)
    assert repr(mode) in str(e.value)


@pytest.mark.parametrize("other", ["text", {"name": "text"}, None, 3], ids=["str", "dict", "None", "int"])
def test_new_must_be_a_schema(other):
    with pytest.raises(TypeError, match=f"new must be a trajschema Schema, found {type(other).__name__}"):
        ts.load_schema("text").compatibility(other)
    with pytest.raises(TypeError, match=f"old must be a schema's plan, found {type(other).__name__}"):
        compatibility(other, ts.load_schema("text").plan)


def test_change_is_a_picklable_one_line_record():
    old = ts.load_schema("vlm_mrope")
    new = build({"name": "m3", "extends": ["vlm_mrope"], "dims": {"rope_rows": 3}})
    (c,) = old.compatibility(new)
    assert isinstance(c, Change)
    assert pickle.loads(pickle.dumps(c)) == c
    assert "\n" not in str(c) and "\n" not in c.message
    assert str(c).startswith("BREAKING dim_bounds_changed dims.rope_rows: rope_rows: 4 -> 3; ")
    with pytest.raises(ValueError, match="Change kind must be one of"):
        Change("x", "renamed", False, "m")
    with pytest.raises(AttributeError):
        c.breaking = False  # type: ignore[misc]


def test_breaking_follows_the_mode_and_full_is_the_union():
    old = ts.load_schema("text")
    d = text_dict()
    d["dims"]["prompt"] = {"min": 0}  # backward fine, forward breaks
    d["fields"]["extra_ids"] = {"shape": ["seq"], "dtype": "int64", "pad": 0}  # backward breaks
    new = build(d)
    by_mode = {m: old.compatibility(new, m) for m in COMPAT_MODES}
    assert [c.path for c in by_mode["backward"]] == [c.path for c in by_mode["full"]]
    for b, f, full in zip(by_mode["backward"], by_mode["forward"], by_mode["full"], strict=True):
        assert b.breaking == b.backward_breaking and f.breaking == f.forward_breaking
        assert full.breaking == (b.breaking or f.breaking)
        assert (b.backward_breaking, b.forward_breaking) == (full.backward_breaking, full.forward_breaking)
    assert {c.path: c.breaking for c in by_mode["backward"]} == {"dims.prompt": False, "fields.extra_ids": True}
    assert {c.path: c.breaking for c in by_mode["forward"]} == {"dims.prompt": True, "fields.extra_ids": False}


def test_order_is_dims_fields_tags_extra_padding_in_declaration_order():
    old = ts.load_schema("text")
    d = text_dict()
    d["extra"] = "forbid"
    d["padding"] = {"prompt": 1, "response": 1}
    d["tags"]["seq_len"] = {"kind": "any", "equals": "seq"}
    d["fields"]["loss_mask"]["dtype"] = ["int64", "int32"]
    d["fields"]["prompts"]["required"] = False
    d["fields"]["aaa_new"] = {"kind": "int", "pad": 0, "required": False}
    d["dims"]["response"] = {"min": 1}
    d["dims"]["zz"] = 2
    paths = [c.path for c in old.compatibility(build(d), "full")]
    assert paths == [
        "dims.response",
        "dims.zz",
        "fields.prompts.required",
        "fields.loss_mask.dtype",
        "fields.aaa_new",
        "tags.seq_len",
        "extra",
        "padding.prompt",
    ]
    assert paths == [c.path for c in old.compatibility(build(d), "full")]  # deterministic


def test_kinds_and_modes_are_exported_tuples():
    assert len(set(CHANGE_KINDS)) == len(CHANGE_KINDS) >= 19
    assert COMPAT_MODES == ("backward", "forward", "full")


# -- packaged schemas ----------------------------------------------------------------------


PAIRS = [(a, b) for a in ts.schema_names() for b in ts.schema_names() if a != b]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}->{b}" for a, b in PAIRS])
def test_verdicts_between_packaged_schemas_agree_with_a_realistic_sample(a, b):
    old, new = ts.load_schema(a), ts.load_schema(b)
    compatible = not any(c.backward_breaking for c in old.compatibility(new, "full"))
    sample = verl_sample(old, 5, 3)
    assert valid(old, sample)
    assert valid(new, sample) == compatible


def test_vlm_mrope_with_three_rope_rows_breaks_both_ways():
    old = ts.load_schema("vlm_mrope")
    new = build({"name": "m3", "extends": ["vlm_mrope"], "dims": {"rope_rows": 3}})
    assert flags(old, new) == [("dim_bounds_changed", "dims.rope_rows", True, True)]
    (c,) = old.compatibility(new)
    assert "rope_rows: 4 -> 3" in c.message and "rope_rows=4" in c.message and "rope_rows=3" in c.message
    four = verl_sample(old, 5, 3)
    breaks(old, new, four)
    three = dict(four, position_ids=four["position_ids"][:3])
    breaks(new, old, three)


def test_text_to_vlm_mrope():
    old, new = ts.load_schema("text"), ts.load_schema("vlm_mrope")
    assert flags(old, new) == [
        ("dim_added", "dims.rope_rows", False, False),
        ("shape_changed", "fields.position_ids.shape", True, True),
        ("required_changed", "fields.multi_modal_inputs.required", True, False),
    ]
    breaks(old, new, verl_sample(old, 4, 2))
    breaks(new, old, verl_sample(new, 4, 2))


def test_moe_routed_adds_a_required_field_and_two_dims():
    old, new = ts.load_schema("text"), ts.load_schema("moe_routed")
    experts = [("dim_added", "dims.experts", False, False)] if "experts" in new.dims else []  # issue 16
    assert flags(old, new) == [
        ("dim_added", "dims.layers", False, False),
        ("dim_added", "dims.topk", False, False),
        *experts,
        ("field_added", "fields.routed_experts", True, False),
    ]
    breaks(old, new, verl_sample(old, 4, 2))
    assert valid(old, verl_sample(new, 4, 2))


def test_text_plus_a_required_field():
    old = ts.load_schema("text")
    d = text_dict()
    d["fields"]["reward"] = {"kind": "float", "pad": 0.0}
    new = build(d)
    (c,) = old.compatibility(new)
    assert (c.kind, c.path, c.breaking, c.forward_breaking) == ("field_added", "fields.reward", True, False)
    assert "old samples may lack it" in c.message
    sample = verl_sample(old, 3, 2)
    breaks(old, new, sample)
    assert valid(old, dict(sample, reward=0.5))


# -- fields --------------------------------------------------------------------------------


def test_an_optional_field_added_breaks_nothing_unless_old_forbids_extra_fields():
    d = text_dict()
    d["fields"]["reward"] = {"kind": "float", "pad": 0.0, "required": False}
    old, new = ts.load_schema("text"), build(d)
    ((kind, _, b, f),) = flags(old, new)
    assert (kind, b, f) == ("field_added", False, False)
    assert "assumes old samples carry no undeclared field 'reward'" in old.compatibility(new)[0].message
    strict = text_dict("strict")
    strict["extra"] = "forbid"
    d["extra"] = "forbid"
    old, new = build(strict), build(d)
    assert flags(old, new) == [("field_added", "fields.reward", False, True)]
    breaks(new, old, dict(verl_sample(old, 3, 2), reward=1.0))


def test_field_removed():
    old = ts.load_schema("text")
    d = text_dict()
    del d["fields"]["rm_scores"]  # optional: fine both ways while new allows extra fields
    assert flags(old, build(d)) == [("field_removed", "fields.rm_scores", False, False)]
    d["extra"] = "forbid"
    assert flags(old, build(d))[0] == ("field_removed", "fields.rm_scores", True, False)
    breaks(old, build(d), verl_sample(old, 3, 2))  # verl_sample carries rm_scores
    d = text_dict()
    del d["fields"]["num_turns"]  # required in old: new samples may lack it
    assert flags(old, build(d)) == [("field_removed", "fields.num_turns", False, True)]
    sample = verl_sample(old, 3, 2)
    del sample["num_turns"]
    breaks(build(d), old, sample)


def test_removing_the_only_field_that_binds_a_dim_cannot_be_proved():
    old = ts.load_schema("text")
    d = text_dict()
    del d["fields"]["prompts"]  # prompt must then be solved from seq - response
    (c,) = old.compatibility(build(d), "full")
    assert (c.kind, c.backward_breaking, c.forward_breaking) == ("field_removed", True, True)
    assert "cannot prove" in c.message and "prompt" in c.message


def test_required_changed():
    old = ts.load_schema("text")
    d = text_dict()
    d["fields"]["session_id"]["required"] = True
    d["fields"]["num_turns"]["required"] = False
    new = build(d)
    assert flags(old, new) == [
        ("required_changed", "fields.num_turns.required", False, True),
        ("required_changed", "fields.session_id.required", True, False),
    ]
    sample = verl_sample(old, 3, 2)
    sample.pop("session_id", None)
    breaks(old, new, sample)
    new_sample = dict(sample, session_id=1)
    del new_sample["num_turns"]
    breaks(new, old, new_sample)


@pytest.mark.parametrize(
    ("a", "b", "back", "fwd"),
    [
        ({"kind": "int"}, {"kind": "float"}, False, True),
        ({"kind": "float"}, {"kind": "int"}, True, False),
        ({"kind": "int", "min": 0}, {"kind": "float", "min": 0.5}, True, True),
        ({"kind": "bool"}, {"kind": "int"}, True, True),
        ({"kind": "str"}, {"kind": "any"}, False, True),
        ({"kind": "str"}, {"kind": "any", "values": [1]}, True, True),
        ({"kind": "bool"}, {"kind": "any", "values": [0, 1]}, False, True),
        ({"kind": "mapping"}, {"kind": "str"}, True, True),
        ({"shape": ["n"], "dtype": "int64"}, {"kind": "any"}, False, True),
        ({"shape": ["n"], "dtype": "int64"}, {"kind": "any", "values": [0]}, True, True),
        ({"shape": [], "dtype": "int64"}, {"kind": "int"}, True, True),
    ],
    ids=lambda v: str(v),
)
def test_kind_changed(a, b, back, fwd):
    old, new = one(**a), one(**b)
    ((kind, path, bb, ff),) = [x for x in flags(old, new) if x[0] != "pad_changed"]
    assert (kind, path, bb, ff) == ("kind_changed", "fields.x.kind", back, fwd)


@pytest.mark.parametrize(
    ("a", "b", "kind", "back", "fwd"),
    [
        (["int64"], ["int64", "int32"], "dtype_widened", False, True),
        (["int64", "int32"], ["int32"], "dtype_narrowed", True, False),
        (["int8"], ["bfloat16"], "dtype_changed", True, True),
        (["int64", "int32"], ["int32", "int64"], "dtype_changed", False, False),
        (["bool"], ["bool", "uint8"], "dtype_widened", False, True),
    ],
)
def test_dtype_sets(a, b, kind, back, fwd):
    old, new = one(shape=["n"], dtype=a), one(shape=["n"], dtype=b)
    assert flags(old, new) == [(kind, "fields.x.dtype", back, fwd)]
    for src, tgt, broken in ((old, new, back), (new, old, fwd)):
        for d in src.fields["x"].dtypes:
            sample = {"x": torch.zeros(2, dtype=d)}
            assert valid(src, sample)
            if d not in tgt.fields["x"].dtypes:
                assert broken and not valid(tgt, sample)


def test_shape_changes():
    base = {"dims": {"p": {}, "r": {}, "s": "p + r"}, "extra": "allow"}

    def schema(*shape):
        f = {
            "a": {"shape": ["p"], "dtype": "int64", "pad": 0},
            "b": {"shape": ["r"], "dtype": "int64", "pad": 0},
            "x": {"shape": list(shape), "dtype": "int64", "pad": 0},
        }
        return build({"name": "s", **base, "fields": f})

    old = schema("s")
    assert flags(old, schema("s")) == []
    assert flags(schema("p + r"), schema("r+p")) == []  # one polynomial, spelled two ways
    (c,) = old.compatibility(schema("r + p"), "full")  # named vs inline: the same sizes, provably bound alike
    assert (c.kind, c.backward_breaking, c.forward_breaking) == ("shape_changed", False, False)
    assert flags(old, schema("s", "p")) == [("shape_changed", "fields.x.shape", True, True)]
    assert flags(old, schema("p + r + 1")) == [("shape_changed", "fields.x.shape", True, True)]
    sample = {"a": torch.zeros(2), "b": torch.zeros(3), "x": torch.zeros(5)}
    sample = {k: v.long() for k, v in sample.items()}
    breaks(old, schema("p + r + 1"), sample)
    breaks(old, schema("s", "p"), sample)
    assert valid(schema("r + p"), sample)


# -- dims ---------------------------------------------------------------------------------


def dims_schema(n) -> ts.Schema:
    return build({"name": "d", "dims": {"n": n}, "fields": {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}}})


@pytest.mark.parametrize(
    ("a", "b", "back", "fwd"),
    [
        ({"min": 1}, {}, False, True),
        ({}, {"min": 1}, True, False),
        ({"max": 8}, {"max": 7}, True, False),
        ({"multiple_of": 4}, {"multiple_of": 2}, False, True),
        ({"multiple_of": 2}, {"multiple_of": 3}, True, True),
        ({"min": 4, "max": 4}, 4, False, False),
        (4, 3, True, True),
        (4, {"min": 1, "max": 8, "multiple_of": 4}, False, True),
        ({"min": 3, "max": 9, "multiple_of": 3}, {"min": 2, "max": 10, "multiple_of": 3}, False, False),
        ({"min": 3, "max": 9, "multiple_of": 3}, {"min": 1, "max": 10, "multiple_of": 1}, False, True),
        ({"min": 0, "max": 0}, 0, False, False),
    ],
    ids=lambda v: str(v),
)
def test_dim_bounds_are_compared_as_sets_of_sizes(a, b, back, fwd):
    old, new = dims_schema(a), dims_schema(b)
    ((kind, path, bb, ff),) = flags(old, new)
    assert (kind, path, bb, ff) == ("dim_bounds_changed", "dims.n", back, fwd)
    for src, tgt, broken in ((old, new, bb), (new, old, ff)):
        allowed = [k for k in range(13) if valid(src, {"x": torch.zeros(k, dtype=torch.long)})]
        refused = [k for k in allowed if not valid(tgt, {"x": torch.zeros(k, dtype=torch.long)})]
        assert bool(refused) == broken, (allowed, refused)


def test_a_dim_no_field_uses_breaks_nothing():
    old = build({"name": "d", "dims": {"n": {}, "k": 3}, "fields": {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}}})
    new = build({"name": "d", "dims": {"n": {}, "k": 4}, "fields": {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}}})
    assert flags(old, new) == [("dim_bounds_changed", "dims.k", False, False)]


def test_derived_dims():
    old = ts.load_schema("text")
    d = text_dict()
    d["dims"]["seq"] = "response + prompt"
    assert flags(old, build(d)) == []
    d["dims"]["seq"] = "prompt + response + 1"
    assert flags(old, build(d)) == [("dim_changed", "dims.seq", True, True)]
    breaks(old, build(d), verl_sample(old, 3, 2))
    d["dims"]["seq"] = {"min": 1}
    assert flags(old, build(d)) == [("dim_changed", "dims.seq", True, True)]


def test_a_derived_chain_with_equal_expansion_is_not_proved_compatible():
    # a: b + c with b: 2 * x solves b = a - c = 3, and then holds b to its own definition: 2 * x is never 3.
    # It once never checked b against x, so old accepted what new (solving a: 2 * x + c for x) refused.
    f = {"F1": {"shape": ["a"], "dtype": "int64", "pad": 0}, "F2": {"shape": ["c"], "dtype": "int64", "pad": 0}}
    old = build({"name": "o", "dims": {"x": {}, "c": {}, "b": "2 * x", "a": "b + c"}, "fields": f})
    new = build({"name": "n", "dims": {"x": {}, "c": {}, "a": "2 * x + c"}, "fields": f})
    odd = {"F1": torch.zeros(5, dtype=torch.long), "F2": torch.zeros(2, dtype=torch.long)}
    assert not valid(old, odd) and not valid(new, odd)  # the two schemas agree on it now
    even = {"F1": torch.zeros(6, dtype=torch.long), "F2": torch.zeros(2, dtype=torch.long)}
    assert old.validate(even) == {"x": 2, "c": 2, "b": 4, "a": 6} and new.validate(even) == {"x": 2, "c": 2, "a": 6}
    changes = old.compatibility(new, "full")
    assert ("dim_changed", "dims.a", True, True) in [
        (c.kind, c.path, c.backward_breaking, c.forward_breaking) for c in changes
    ]
    assert "cannot prove" in str(changes)


def test_reordering_derived_dims_that_must_be_solved_cannot_be_proved():
    # r1 solves u, then r2 has one unknown (w); in the other order r2 meets two unknowns.
    f = {
        "A": {"shape": ["r1"], "dtype": "int64", "pad": 0},
        "B": {"shape": ["r2"], "dtype": "int64", "pad": 0},
        "C": {"shape": ["a"], "dtype": "int64", "pad": 0},
    }
    dims = {"a": {}, "u": {}, "w": {}}
    old = build({"name": "o", "dims": {**dims, "r1": "u + a", "r2": "u + w + a"}, "fields": f})
    new = build({"name": "n", "dims": {**dims, "r2": "u + w + a", "r1": "u + a"}, "fields": f})
    sample = {"A": torch.zeros(3, dtype=torch.long), "B": torch.zeros(5, dtype=torch.long), "C": torch.zeros(1)}
    sample["C"] = sample["C"].long()
    breaks(old, new, sample)
    changes = old.compatibility(new, "full")
    assert [(c.kind, c.path, c.backward_breaking) for c in changes] == [("dim_changed", "dims", True)]


def test_fixed_to_free_with_the_same_size_is_fine_where_a_required_field_binds_it():
    old = ts.load_schema("vlm_mrope")
    new = build({"name": "m", "extends": ["vlm_mrope"], "dims": {"rope_rows": {"min": 4, "max": 4}}})
    assert flags(old, new) == [("dim_bounds_changed", "dims.rope_rows", False, False)]


def test_a_fixed_dim_made_free_under_a_tag_cannot_be_proved():
    f = {"x": {"shape": ["k"], "dtype": "int64", "pad": 0, "required": False}}
    tags = {"k_len": {"equals": "k"}}
    old = build({"name": "o", "dims": {"k": 4}, "fields": f, "tags": tags})
    new = build({"name": "n", "dims": {"k": {"min": 4, "max": 4}}, "fields": f, "tags": tags})
    # Forward really breaks; backward holds, but the rules cannot prove it: conservative.
    assert flags(old, new) == [("dim_bounds_changed", "dims.k", True, True)]
    breaks(new, old, {}, {"k_len": 7})  # under new, k is unbound without x, so k_len goes unchecked


# -- values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "back", "fwd"),
    [
        ({"dtype": "int64", "min": 0}, {"dtype": "int64", "min": 1}, True, False),
        ({"dtype": "int64", "min": 1}, {"dtype": "int64", "min": 0.5}, False, False),
        ({"dtype": "int8", "min": -128}, {"dtype": "int8"}, False, False),
        ({"dtype": "int8", "max": 127}, {"dtype": "int8", "max": 126}, True, False),
        ({"dtype": "uint8", "min": 0}, {"dtype": "uint8", "min": -1000}, False, False),
        ({"dtype": "float16", "min": 0.1}, {"dtype": "float16", "min": 0.1000001}, False, False),
        ({"dtype": "float32", "min": 0.1}, {"dtype": "float32", "min": 0.1000001}, True, False),
        ({"dtype": "bfloat16", "max": 65504.0}, {"dtype": "bfloat16", "max": 65280.0}, False, False),
        ({"dtype": "float32"}, {"dtype": "float32", "finite": True}, True, False),
        ({"dtype": "float32", "min": 0.0, "max": 1.0}, {"dtype": "float32", "finite": True}, False, True),
        ({"dtype": "float32", "min": 0.0}, {"dtype": "float32", "finite": True}, True, True),
        ({"dtype": "float64", "values": [0, 1]}, {"dtype": "float64", "finite": True}, False, True),
        ({"dtype": "bool"}, {"dtype": "bool", "values": [True, False]}, False, False),
        ({"dtype": "bool"}, {"dtype": "bool", "values": [False]}, True, False),
        ({"dtype": "bool", "values": [True]}, {"dtype": "bool", "min": 1}, False, False),
        ({"dtype": "int64", "values": [0, 1, 2]}, {"dtype": "int64", "min": 0, "max": 2}, False, False),
        ({"dtype": "int64", "values": [0, 1, 3]}, {"dtype": "int64", "min": 0, "max": 2}, True, True),
        ({"dtype": "int16", "values": [0, 1.0]}, {"dtype": "int16", "values": [1, 0]}, False, False),
        (
            {"dtype": ["int8", "float32"], "values": [0, 0.5]},
            {"dtype": ["int8", "float32"], "values": [0]},
            True,
            False,
        ),
        ({"dtype": "float16", "min": 0.0, "max": 0.0}, {"dtype": "float16", "values": [0]}, False, False),
        (
            {"dtype": "float16", "min": 0.0, "max": 0.001},
            {"dtype": "float16", "values": [0, 0.0009765625]},
            True,
            False,
        ),
    ],
    ids=lambda v: str(v),
)
def test_tensor_value_checks(a, b, back, fwd):
    old, new = one(shape=["n"], **a), one(shape=["n"], **b)
    ((kind, path, bb, ff),) = flags(old, new)
    assert (kind, path, bb, ff) == ("values_changed", "fields.x.values", back, fwd)
    for src, tgt, broken in ((old, new, back), (new, old, fwd)):
        witness = _witness_from(src, tgt)
        assert (witness is not None) == broken
        if witness is not None:
            breaks(src, tgt, witness)


def _witness_from(src: ts.Schema, tgt: ts.Schema) -> dict | None:
    """Try edge values of every dtype of ``src``'s field ``x``: one ``src`` accepts and ``tgt`` refuses."""
    f = src.fields["x"]
    for dtype in f.dtypes:
        if dtype == torch.bool:
            cands = [False, True]
        elif dtype.is_floating_point:
            info = torch.finfo(dtype)
            cands = [math.nan, math.inf, -math.inf, info.max, -info.max, 0.0, 1.0, 0.5, 2.0, 3.0, -1.0, info.tiny]
            cands += [0.1, 0.10000000149011612, 0.0009765625, 0.00048828125]
        else:
            info = torch.iinfo(dtype)
            cands = [info.min, info.max, 0, 1, 2, 3, -1, 126, 127]
        for v in cands:
            try:
                t = torch.tensor([v], dtype=dtype)
            except (RuntimeError, OverflowError):
                continue
            if t.item() != v and not (isinstance(v, float) and math.isnan(v)):
                continue  # not exactly representable
            s = {"x": t}
            if valid(src, s) and not valid(tgt, s):
                return s
    return None


@pytest.mark.parametrize(
    ("a", "b", "back", "fwd"),
    [
        ({"kind": "int", "min": 0}, {"kind": "int", "min": 1}, 0, None),
        ({"kind": "int", "values": [1, 2]}, {"kind": "int", "min": 1}, None, 3),
        ({"kind": "float"}, {"kind": "float", "min": -1.0e300}, math.nan, None),
        ({"kind": "float", "min": 0, "max": 1}, {"kind": "float", "values": [0, 1]}, 0.5, None),
        ({"kind": "float", "finite": True}, {"kind": "float", "min": -1.0e308}, -(10**309), math.inf),
        ({"kind": "float", "min": 0.5}, {"kind": "float", "min": 0.5000000000000001}, 0.5, None),
        ({"kind": "any"}, {"kind": "any", "values": [1]}, "x", None),
        ({"kind": "any", "values": [1, 3]}, {"kind": "any", "values": [3.0, True, 5]}, None, 5),
        ({"kind": "bool"}, {"kind": "bool", "values": [True]}, False, None),
    ],
    ids=lambda v: str(v),
)
def test_scalar_value_checks(a, b, back, fwd):
    """``back``/``fwd``: a value the source accepts and the target refuses, or ``None`` when there is none."""
    old, new = one(**a), one(**b)
    assert [x for x in flags(old, new) if x[0] != "pad_changed"] == [
        ("values_changed", "fields.x.values", back is not None, fwd is not None)
    ]
    for src, tgt, witness in ((old, new, back), (new, old, fwd)):
        if witness is not None:
            breaks(src, tgt, {"x": witness})


def test_the_same_values_written_otherwise_are_not_reported():
    assert flags(one(kind="any", values=[1]), one(kind="any", values=[1.0])) == []
    assert flags(one(kind="any", values=[1, 2]), one(kind="any", values=[True, 2.0])) == []
    assert flags(one(shape=["n"], dtype="int8", min=0), one(shape=["n"], dtype="int8", min=0.0)) == []


def test_values_without_a_common_dtype_are_judged_in_each_sides_dtypes():
    """The dtype change breaks already, but the narrowing breaks on its own: revert the dtype and it still would."""
    old = one(shape=["n"], dtype="int8", values=[0, 1])
    new = one(shape=["n"], dtype="float32", min=0.5)
    assert flags(old, new) == [
        ("dtype_changed", "fields.x.dtype", True, True),
        ("values_changed", "fields.x.values", True, True),
    ]
    (values,) = [c for c in old.compatibility(new, mode="full") if c.kind == "values_changed"]
    assert "old allows 0 in int8, new does not" in values.message
    assert "new allows 0.5 in float32, old does not" in values.message


def test_a_narrowing_beside_a_dtype_change_is_breaking_and_a_widening_is_not():
    """Issue 19: ``int64 [0, 100] -> int32 [0, 50]`` labelled the narrowing ``ok``."""
    old = one(shape=["n"], dtype="int64", min=0, max=100)
    narrowed = one(shape=["n"], dtype="int32", min=0, max=50)
    widened = one(shape=["n"], dtype="int32", min=0, max=200)
    (c,) = [c for c in old.compatibility(narrowed) if c.kind == "values_changed"]
    assert (c.breaking, c.backward_breaking, c.forward_breaking) == (True, True, False)
    assert str(c).startswith("BREAKING") and "old allows 51 in int64, new does not" in c.message
    # Each schema alone: the narrowing's witness fails the narrowed schema at depth='values'.
    breaks(one(shape=["n"], dtype="int32", min=0, max=100), narrowed, {"x": torch.tensor([51], dtype=torch.int32)})
    (w,) = [c for c in old.compatibility(widened) if c.kind == "values_changed"]
    assert (w.breaking, w.backward_breaking, w.forward_breaking) == (False, False, True)


# -- pad, padding, extra, tags ---------------------------------------------------------


def test_pad_rules_and_padding_sizes_never_break():
    old = ts.load_schema("text")
    d = text_dict()
    d["fields"]["prompts"]["pad"] = 0
    d["padding"] = {"prompt": 1}
    assert flags(old, build(d)) == [
        ("pad_changed", "fields.prompts.pad", False, False),
        ("padding_default_changed", "padding.prompt", False, False),
        ("padding_default_changed", "padding.response", False, False),
    ]


def test_extra_changed():
    old = ts.load_schema("text")
    d = text_dict()
    d["extra"] = "forbid"
    new = build(d)
    assert flags(old, new) == [("extra_changed", "extra", True, False)]
    assert flags(new, old) == [("extra_changed", "extra", False, True)]
    breaks(old, new, dict(verl_sample(old, 3, 2), undeclared=1))


def test_tags():
    old = ts.load_schema("text")
    d = text_dict()
    d["tags"]["status"] = {"kind": "str"}  # added
    del d["tags"]["prompt_len"]  # removed
    d["tags"]["response_len"] = {"kind": "any"}  # loses its equals: forward breaks
    d["tags"]["is_padding"] = {"kind": "bool"}  # default dropped: not checked by validation
    new = build(d)
    assert flags(old, new) == [
        ("tag_changed", "tags.is_padding", False, False),
        ("tag_removed", "tags.prompt_len", False, False),
        ("tag_changed", "tags.response_len", False, True),
        ("tag_added", "tags.status", False, False),
    ]
    sample = verl_sample(old, 3, 2)
    breaks(new, old, sample, {"response_len": 7})


@pytest.mark.parametrize(
    ("a", "b", "back", "fwd"),
    [
        ({"kind": "int"}, {"kind": "float"}, None, 0.5),
        ({"kind": "float"}, {"kind": "int"}, 0.5, None),
        ({}, {"kind": "bool"}, 1, None),
        ({"kind": "str"}, {"kind": "any"}, None, 1),
        ({"kind": "int"}, {"equals": "n"}, 9, None),
        ({"equals": "n"}, {"equals": "n + 1"}, 1, 2),
        ({"kind": "int", "default": 1}, {"kind": "int", "default": 2}, None, None),
    ],
    ids=lambda v: str(v),
)
def test_tag_changed(a, b, back, fwd):
    """``back``/``fwd``: a tag value the source accepts (with ``n`` = 1) and the target refuses."""

    def schema(t):
        x = {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}}
        return build({"name": "t", "dims": {"n": {}}, "fields": x, "tags": {"t": t}})

    old, new = schema(a), schema(b)
    assert flags(old, new) == [("tag_changed", "tags.t", back is not None, fwd is not None)]
    for src, tgt, tag in ((old, new, back), (new, old, fwd)):
        if tag is not None:
            breaks(src, tgt, {"x": torch.zeros(1, dtype=torch.long)}, {"t": tag})


def test_the_same_tag_expression_spelled_another_way_is_not_reported():
    x = {"x": {"shape": ["n"], "dtype": "int64", "pad": 0}}
    old = build({"name": "t", "dims": {"n": {}}, "fields": x, "tags": {"t": {"equals": "n + n"}}})
    new = build({"name": "t", "dims": {"n": {}}, "fields": x, "tags": {"t": {"equals": "2 * n"}}})
    assert flags(old, new) == []


# -- sizes and spellings the rules must survive: products too large to expand, long values lists


def test_a_long_chain_of_products_gives_up_instead_of_exploding():
    dims = {"x": {}}  # unbounded: the loader's own interval check would compute 2**(2**30) for max 2
    prev = "x"
    for i in range(30):
        dims[f"d{i}"] = f"{prev} * {prev}"
        prev = f"d{i}"
    f = {"y": {"shape": ["x"], "dtype": "int64", "pad": 0}}
    old = build({"name": "o", "dims": dims, "fields": f})
    dims2 = copy.deepcopy(dims)
    dims2["d29"] = "d28 * d27 * d27"  # the same x**(2**30), too large to expand
    new = build({"name": "n", "dims": dims2, "fields": f})
    changes = old.compatibility(new, "full")
    assert [(c.kind, c.path) for c in changes] == [("dim_changed", "dims.d29")]
    assert not changes[0].backward_breaking  # nothing uses d29: it can never refuse a sample
    assert expansions(old.plan.dim_plan.dims)["d29"] is None  # gave up: x**(2**30)
    f = {"y": {"shape": ["d29"], "dtype": "int64", "pad": 0}}
    old, new = build({"name": "o", "dims": dims, "fields": f}), build({"name": "n", "dims": dims2, "fields": f})
    ((kind, path, b, fw),) = flags(old, new)
    assert (kind, path, b, fw) == ("dim_changed", "dims.d29", True, True)
    assert "cannot prove" in old.compatibility(new)[0].message


def test_a_huge_values_list_against_an_interval():
    old = one(shape=["n"], dtype="int16", min=0, max=999)
    new = one(shape=["n"], dtype="int16", values=list(range(1000)))
    assert flags(old, new) == [("values_changed", "fields.x.values", False, False)]
    new = one(shape=["n"], dtype="int16", values=[v for v in range(1000) if v != 517])
    ((_, _, b, f),) = flags(old, new)
    assert (b, f) == (True, False)
    assert "517" in old.compatibility(new)[0].message


def test_messages_stay_on_one_line_when_an_expression_spans_lines():
    old = ts.load_schema("text")
    d = text_dict()
    d["dims"]["seq"] = "prompt +\n  response + 1"
    (c,) = old.compatibility(build(d))
    assert "\n" not in c.message and "prompt + response + 1" in c.message


def test_a_removed_binder_under_extra_forbid_is_one_change():
    old = ts.load_schema("text")
    d = text_dict()
    del d["fields"]["prompts"]
    d["extra"] = "forbid"
    assert [(c.kind, c.path) for c in old.compatibility(build(d), "full")] == [
        ("field_removed", "fields.prompts"),
        ("extra_changed", "extra"),
    ]


# -- two spellings of one sum, and the direction a change breaks --------------------------------


def _sums(name: str, order: str) -> ts.Schema:
    fields = {
        "x": {"shape": ["p + r"], "dtype": "int64", "pad": "copy"},
        "y": {"shape": ["2 * r"], "dtype": "int64", "pad": "copy", "required": False},
        "z": {"shape": ["r + p"], "dtype": "int64", "pad": "copy", "required": False},
    }
    return build({"name": name, "dims": {"p": {}, "r": {}}, "fields": {k: fields[k] for k in order}})


def test_reordering_fields_over_two_spellings_of_one_sum_changes_binding():
    # `p + r` and `r + p` are two inline dims, bound in field order. With x first, binding
    # meets x's sum before y has given r, and refuses; with z first, z's sum (absent) goes
    # first, y solves r, then x solves p. Both orders looked alike, so this was reported
    # as no change at all.
    old, new = _sums("old", "xyz"), _sums("new", "zyx")
    sample = {"x": torch.zeros(14, dtype=torch.int64), "y": torch.zeros(16, dtype=torch.int64)}
    assert new.violations(sample) == [] and [v.code for v in old.violations(sample)] == ["dim_mismatch"]
    changes = old.compatibility(new, "full")
    assert [(c.kind, c.path) for c in changes] == [("dim_changed", "dims")]
    assert changes[0].forward_breaking and "cannot prove" in changes[0].message
    assert old.compatibility(_sums("same", "xyz")) == []  # the same order is still no change


@pytest.mark.parametrize("mode", COMPAT_MODES)
def test_an_ok_line_says_which_direction_breaks(mode):
    old = one(shape=["n"], dtype="int64")
    widened = one(shape=["n"], dtype=["int64", "int32"])
    (c,) = old.compatibility(widened, mode)  # breaks forward only
    assert c.breaking == (mode != "backward")
    assert "new samples can fail under old: new allows int32, old does not" in c.message
    assert ("compatible backward; breaks forward only: " in c.message) == (mode == "backward")
    (c,) = widened.compatibility(old, mode)  # breaks backward only
    assert ("compatible forward; breaks backward only: " in c.message) == (mode == "forward")
    assert str(c).startswith("ok " if mode == "forward" else "BREAKING ")


# -- arguments (issue 14) -------------------------------------------------------------------


class _RaisingRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr of a hostile value")


@pytest.mark.parametrize(
    ("mode", "shown"),
    [
        pytest.param("backwards", "'backwards'", id="typo"),
        pytest.param(["full"], "['full']", id="list"),
        pytest.param(("full",), "('full',)", id="tuple"),
        pytest.param({"full": 1}, "{'full': 1}", id="unhashable"),
        pytest.param(__import__("numpy").array(["full", "forward"]), "array(", id="array-compares-elementwise"),
        pytest.param(_RaisingRepr(), "_RaisingRepr", id="raising-repr"),
        pytest.param("full " * 40, "str '", id="long"),
    ],
)
def test_any_mode_but_the_three_is_a_value_error_showing_it(mode, shown):
    s = ts.load_schema("text")
    with pytest.raises(ValueError) as info:
        s.compatibility(s, mode)
    assert type(info.value) is ValueError
    assert str(info.value).startswith("mode must be one of 'backward', 'forward', 'full', found ")
    assert shown in str(info.value)


@pytest.mark.parametrize(
    ("other", "found"),
    [
        pytest.param(ts.load_schema("text").fields, "found ReadOnlyDict with", id="its-fields"),
        pytest.param(b"text", "found bytes", id="bytes"),
        pytest.param(_RaisingRepr(), "found", id="raising-repr"),
    ],
)
def test_new_must_be_a_schema_whatever_it_is_instead(other, found):
    with pytest.raises(TypeError, match=f"^compatibility: new must be a trajschema Schema, {found}"):
        ts.load_schema("text").compatibility(other)


# -- issue 16: from_config, bounds in dims, distinct -----------------------------------------


def _cfg(*keys: str, lo: int = 1) -> ts.Schema:
    entry: dict = {"min": lo}
    if keys:
        entry["from_config"] = list(keys)
    return build(
        {
            "name": "cfg",
            "dims": {"experts": entry, "topk": {"min": 1}},
            "fields": {"x": {"shape": ["topk"], "dtype": "int64", "pad": 0}},
        }
    )


@pytest.mark.parametrize(
    ("a", "b"),
    [((), ("num_experts",)), (("num_experts",), ()), (("num_experts",), ("num_experts", "n_routed_experts"))],
    ids=str,
)
def test_a_change_of_from_config_alone_is_its_own_safe_kind(a, b):
    old, new = _cfg(*a), _cfg(*b)
    (c,) = old.compatibility(new, "full")
    assert (c.kind, c.path, c.breaking, c.backward_breaking, c.forward_breaking) == (
        "dim_source_changed",
        "dims.experts.from_config",
        False,
        False,
        False,
    )
    shown = [("[" + ", ".join(k) + "]") if k else "none" for k in (a, b)]
    assert c.message == (
        f"experts: from_config {shown[0]} -> {shown[1]}; from_config says which model-config keys "
        "schema_for_config reads the size from, not which sizes validation allows"
    )


def test_from_config_and_bounds_changed_together_are_two_changes():
    assert flags(_cfg("num_experts", lo=1), _cfg("n_routed_experts", lo=2)) == [
        ("dim_bounds_changed", "dims.experts", False, False),  # no field uses experts: no size is checked
        ("dim_source_changed", "dims.experts.from_config", False, False),
    ]
    assert [c.kind for c in _cfg("num_experts").compatibility(_cfg("num_experts").with_dims({"experts": 4}))] == [
        "dim_bounds_changed"
    ]


def hand(base: ts.Schema, dims: dict | None = None, **changes) -> ts.Schema:
    """``base`` with field ``x`` changed by hand (bounds in dims, distinct) and ``dims`` added."""
    import dataclasses

    return ts.Schema(
        name=base.name,
        description="",
        architectures=(),
        lineage=(base.name,),
        dims={**base.dims, **(dims or {})},
        fields={**base.fields, "x": dataclasses.replace(base.fields["x"], **changes)},
        tags=base.tags,
        padding_sizes=base.padding_sizes,
        extra=base.extra,
        source="<test>",
    )


def _routes(pin: int | None = None, dtype: str = "int64", **changes) -> ts.Schema:
    """``x[n, topk]`` with a free ``experts`` dim no shape uses (``pin``: fixed at that size)."""
    from trajschema.core import FixedDim, FreeDim, parse_expr

    for side in ("min_expr", "max_expr"):
        if isinstance(changes.get(side), str):
            changes[side] = parse_expr(changes[side])
    base = build(
        {
            "name": "r",
            "dims": {"n": {}, "topk": {"min": 1}},
            "fields": {"x": {"shape": ["n", "topk"], "dtype": dtype, "pad": 0}},
        }
    )
    experts = FreeDim("experts", 1) if pin is None else FixedDim("experts", pin)
    return hand(base, {"experts": experts}, **changes)


_NONE: dict = {}
_MAX = {"max_expr": "experts - 1"}


@pytest.mark.parametrize(
    ("a", "b", "path", "back", "fwd", "why"),
    [
        (_NONE, _MAX, "max", True, False, "old allows values above experts - 1, which new refuses"),
        (_MAX, _NONE, "max", False, True, "new allows values above experts - 1, which old refuses"),
        (
            _MAX,
            {"max_expr": "experts"},
            "max",
            False,
            True,
            "new allows values up to experts, old stops at experts - 1",
        ),
        (
            {"max_expr": "experts"},
            _MAX,
            "max",
            True,
            False,
            "old allows values up to experts, new stops at experts - 1",
        ),
        (
            _MAX,
            {"max_expr": "experts - topk"},
            "max",
            True,
            True,
            "cannot prove: max experts - 1 and max experts - topk",
        ),
        ({"min_expr": "topk"}, {"min_expr": "topk + 1"}, "min", True, False, "old allows values down to topk"),
        ({"min_expr": "topk"}, {"min_expr": "topk - 2"}, "min", False, True, "new allows values down to topk - 2"),
        ({"max": 127}, _MAX, "max", True, False, "a literal bound and a bound in dims cannot be compared exactly"),
        ({"max": 0}, {"max": 0, **_MAX}, None, False, False, None),  # experts >= 1: max 0 is the tighter one
        (_MAX, {"max_expr": "(experts - 1) * 1"}, None, False, False, None),  # the same polynomial
    ],
    ids=lambda v: str(v),
)
def test_bounds_in_dims_compare_by_their_polynomials(a, b, path, back, fwd, why):
    old, new = _routes(**a), _routes(**b)
    mine = [c for c in old.compatibility(new, "full") if c.path.endswith((".min", ".max"))]
    if path is None:
        assert all(not c.backward_breaking and not c.forward_breaking for c in mine)
        return
    (c,) = mine
    assert (c.kind, c.path, c.backward_breaking, c.forward_breaking) == (
        "values_changed",
        f"fields.x.{path}",
        back,
        fwd,
    )
    assert why in c.message


def test_a_pinned_bound_in_dims_is_compared_exactly_as_a_number():
    old, new = _routes(pin=8, **_MAX), _routes(pin=8, max=7)
    assert flags(old, new) == []  # max experts - 1 with experts = 8 is max 7
    assert flags(_routes(pin=8, **_MAX), _routes(pin=9, **_MAX)) == [
        ("dim_bounds_changed", "dims.experts", False, False),
        ("values_changed", "fields.x.values", False, True),
    ]
    (c,) = [c for c in _routes(pin=8, **_MAX).compatibility(_routes(pin=9, **_MAX)) if c.path == "fields.x.values"]
    assert "new allows 8 in int64, old does not" in c.message


def test_a_bound_in_dims_breaks_a_real_sample_once_its_dims_are_given():
    old, new = _routes(), _routes(**_MAX)
    (c,) = [c for c in old.compatibility(new) if c.path == "fields.x.max"]
    assert c.breaking
    sample = {"x": torch.tensor([[0, 5]])}
    assert old.violations(sample, dims={"experts": 4}, depth="values") == []
    assert [v.code for v in new.violations(sample, dims={"experts": 4}, depth="values")] == ["value"]


@pytest.mark.parametrize(
    ("a", "b", "back", "fwd"),
    [(False, True, True, False), (True, False, False, True)],
    ids=["added", "dropped"],
)
def test_distinct_added_narrows_and_dropped_widens(a, b, back, fwd):
    old, new = _routes(distinct=a), _routes(distinct=b)
    (c,) = old.compatibility(new, "full")
    assert (c.kind, c.path, c.backward_breaking, c.forward_breaking) == (
        "values_changed",
        "fields.x.distinct",
        back,
        fwd,
    )
    src = "old" if back else "new"
    assert f"{src} allows a value repeated along the last axis ([0, 0] in int64)" in c.message
    repeated = {"x": torch.tensor([[0, 0]])}
    if back:
        breaks(old, new, repeated)
    else:
        breaks(new, old, repeated)


def test_distinct_on_a_last_axis_of_one_value_changes_nothing():
    base = build({"name": "r", "dims": {"n": {}}, "fields": {"x": {"shape": ["n", 1], "dtype": "int64", "pad": 0}}})
    (c,) = base.compatibility(hand(base, distinct=True), "full")
    assert (c.path, c.breaking) == ("fields.x.distinct", False)
    assert "no slice along the last axis holds two values" in c.message
    small = build(
        {
            "name": "r",
            "dims": {"n": {}, "k": {"max": 1}},
            "fields": {"x": {"shape": ["n", "k"], "dtype": "int8", "pad": 0}},
        }
    )
    assert not any(c.breaking for c in small.compatibility(hand(small, distinct=True), "full"))


def test_a_bound_in_dims_that_may_pass_the_dtype_refuses_it_and_that_is_reported():
    """uint8 ids up to experts - 1: validation refuses the dtype at experts = 300 (prime-rl #3051)."""
    old, new = _routes(dtype="uint8", **_MAX), _routes(dtype="uint8", max=255, **_MAX)
    assert flags(old, new) == [
        ("values_changed", "fields.x.values", False, False),  # max 255 is every uint8 value
        ("values_changed", "fields.x.max", False, True),
    ]
    (_, c) = old.compatibility(new, "forward")
    assert "cannot prove: old holds uint8 to max experts - 1, which may pass 255" in c.message
    sample = {"x": torch.tensor([[0, 1]], dtype=torch.uint8)}
    assert new.violations(sample, dims={"experts": 300}, depth="values") == []
    assert [v.code for v in old.violations(sample, dims={"experts": 300}, depth="values")] == ["dtype"]
    # on int64 no size a dim can take passes the dtype: nothing to report
    assert flags(_routes(**_MAX), _routes(max=255, **_MAX)) == [("values_changed", "fields.x.values", True, False)]
