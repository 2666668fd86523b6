"""`trajschema export NAME --format jaxtyping`: the exported dataclass checks every field it declares.

The oracle is the schema itself: every sample the class refuses, ``schema.violations(sample,
depth="shapes")`` refuses too, and every kind of bad sample the issue lists is refused by both.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable
from typing import Any

import jaxtyping
import pytest
import torch
from beartype import beartype
from hypothesis import given, settings
from hypothesis import strategies as st
from jaxtyping import jaxtyped

import trajschema as ts
from trajschema.export import jaxtyping_source
from trajschema.testing import verl_sample


def _exec(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<exported>", "exec", dont_inherit=True), namespace)  # not this file's __future__
    return namespace


@functools.cache
def _packaged(name: str) -> dict[str, Any]:
    return _exec(jaxtyping_source(ts.load_schema(name).plan))


def _checker(namespace: dict[str, Any]) -> Callable[[Any], Any]:
    return next(v for k, v in namespace.items() if k.startswith("check_"))


def _accepts(check: Callable[[Any], Any], sample: Any) -> bool:
    """Whether ``check`` takes ``sample``; a refusal must be a TypeError (jaxtyping's TypeCheckError is one)."""
    try:
        check(sample)
    except TypeError:
        return False
    return True


def _good(schema: ts.Schema, p: int = 6, r: int = 3) -> dict[str, Any]:
    return verl_sample(schema, p, r, **{k: 2 for k in ("layers", "topk", "teacher_topk") if k in schema.dims})


def _seq_axes(schema: ts.Schema) -> list[tuple[str, int]]:
    return [
        (f.name, i) for f in schema.fields.values() if f.is_tensor for i, e in enumerate(f.shape) if str(e) == "seq"
    ]


def _resize_seq(schema: ts.Schema, sample: dict[str, Any], delta: int) -> dict[str, Any]:
    """Every field along ``seq`` one token longer (``delta=1``, its first token repeated) or ``-delta`` shorter."""
    out = dict(sample)
    for name, axis in _seq_axes(schema):
        if name in out:
            t = out[name]
            grown = torch.cat([t, t.narrow(axis, 0, 1)], dim=axis)
            out[name] = grown if delta > 0 else t.narrow(axis, -delta, t.shape[axis] + delta)
    return out


def _without(sample: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in sample.items() if k != key}


def _float_and_truncated(sample: dict[str, Any]) -> dict[str, Any]:
    out = {k: v.float() if isinstance(v, torch.Tensor) else v for k, v in sample.items()}
    return {**out, "responses": out["responses"][:-1]}


def _zero_prompt(schema: ts.Schema, sample: dict[str, Any]) -> dict[str, Any]:
    """The sample with its prompt tokens gone from every field: sizes that agree, but a prompt of 0."""
    return {**_resize_seq(schema, sample, -sample["prompts"].shape[0]), "prompts": sample["prompts"][:0]}


#: id -> (the field the bad sample needs, how it is made from a schema and a good sample).
BAD_SAMPLES: dict[str, tuple[str, Callable[[ts.Schema, dict[str, Any]], Any]]] = {
    "empty": ("input_ids", lambda s, g: {}),
    "missing input_ids": ("input_ids", lambda s, g: _without(g, "input_ids")),
    "missing uid": ("uid", lambda s, g: _without(g, "uid")),
    "input_ids None": ("input_ids", lambda s, g: {**g, "input_ids": None}),
    "input_ids a str": ("input_ids", lambda s, g: {**g, "input_ids": "nope"}),
    "input_ids a float": ("input_ids", lambda s, g: {**g, "input_ids": 1.5}),
    "input_ids int32": ("input_ids", lambda s, g: {**g, "input_ids": g["input_ids"].int()}),
    "a float, truncated sample": ("responses", lambda s, g: _float_and_truncated(g)),
    "truncated response": ("responses", lambda s, g: {**g, "responses": g["responses"][:-1]}),
    "responses with a batch axis": ("responses", lambda s, g: {**g, "responses": g["responses"][None]}),
    "response_mask one longer": (
        "response_mask",
        lambda s, g: {**g, "response_mask": torch.ones(4, dtype=torch.int64)},
    ),
    "seq one longer than prompt + response": ("input_ids", lambda s, g: _resize_seq(s, g, 1)),
    "seq one shorter than prompt + response": ("input_ids", lambda s, g: _resize_seq(s, g, -1)),
    "prompt of 0 tokens": ("prompts", _zero_prompt),
    "optional attention_mask short": ("attention_mask", lambda s, g: {**g, "attention_mask": g["attention_mask"][1:]}),
    "float64 rollout_log_probs": (
        "rollout_log_probs",
        lambda s, g: {**g, "rollout_log_probs": g["rm_scores"].double()},
    ),
    "num_turns a bool": ("num_turns", lambda s, g: {**g, "num_turns": True}),
    "num_turns a float": ("num_turns", lambda s, g: {**g, "num_turns": 1.0}),
    "uid an int": ("uid", lambda s, g: {**g, "uid": 3}),
    "session_id a str": ("session_id", lambda s, g: {**g, "session_id": "0"}),
    "multi_modal_inputs a list": ("multi_modal_inputs", lambda s, g: {**g, "multi_modal_inputs": [1]}),
    "not a mapping": ("input_ids", lambda s, g: list(g.items())),
}
#: Bad samples of one schema family: mrope position ids, routed experts, teacher top-k.
BAD_BY_SHAPE: dict[str, tuple[Callable[[ts.Schema], bool], Callable[[ts.Schema, dict[str, Any]], Any]]] = {
    "mrope (3, S) instead of (4, S)": (
        lambda s: len(s.fields["position_ids"].shape) == 2,
        lambda s, g: {**g, "position_ids": g["position_ids"][1:]},
    ),
    "mrope (S, 4): rows last": (
        lambda s: len(s.fields["position_ids"].shape) == 2,
        lambda s, g: {**g, "position_ids": g["position_ids"].T.contiguous()},
    ),
    "routes (B, 3, S)": (
        lambda s: "routed_experts" in s.fields,
        lambda s, g: {**g, "routed_experts": torch.zeros(1, 3, g["input_ids"].shape[0], dtype=torch.int16)},
    ),
    "routes int8": (
        lambda s: "routed_experts" in s.fields,
        lambda s, g: {**g, "routed_experts": g["routed_experts"].to(torch.int8)},
    ),
    "routes a token short": (
        lambda s: "routed_experts" in s.fields,
        lambda s, g: {**g, "routed_experts": g["routed_experts"][:-1]},
    ),
    "teacher top-k widths disagree": (
        lambda s: "teacher_ids" in s.fields,
        lambda s, g: {**g, "teacher_ids": g["teacher_ids"][:, :1]},
    ),
}


def _cases() -> list[Any]:
    out = []
    for name in ts.schema_names():
        schema = ts.load_schema(name)
        out += [
            pytest.param(name, make, id=f"{name}-{what}")
            for what, (f, make) in BAD_SAMPLES.items()
            if f in schema.fields
        ]
        out += [
            pytest.param(name, make, id=f"{name}-{what}") for what, (ok, make) in BAD_BY_SHAPE.items() if ok(schema)
        ]
    return out


@pytest.mark.parametrize(("name", "make"), _cases())
def test_each_packaged_schemas_class_refuses_each_kind_of_bad_sample(name, make):
    schema = ts.load_schema(name)
    bad = make(schema, _good(schema))
    if isinstance(bad, dict):
        assert schema.violations(bad, depth="shapes"), "the oracle finds nothing wrong: a bad case that is not bad"
    assert not _accepts(_checker(_packaged(name)), bad)


@pytest.mark.parametrize("name", ts.schema_names())
def test_each_packaged_schemas_class_takes_its_valid_samples(name):
    schema = ts.load_schema(name)
    check = _checker(_packaged(name))
    good = _good(schema)
    required = {k: v for k, v in good.items() if schema.fields[k].required}
    for sample in (good, _good(schema, 1, 0), required, {**good, "not_declared": object()}):
        assert schema.violations(sample, depth="shapes") == []
        assert _accepts(check, sample)
    made = check(good)
    assert made.input_ids is good["input_ids"] and check(required).attention_mask is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.uid = "other"  # type: ignore[misc]


def test_the_issues_example_a_function_taking_the_class_refuses_what_the_typed_dict_took():
    ns = _packaged("vlm_mrope_moe")
    schema, cls, check = ts.load_schema("vlm_mrope_moe"), ns["VlmMropeMoeSample"], ns["check_vlm_mrope_moe"]

    def train_step(sample):
        return sample.input_ids.shape[0]

    train_step.__annotations__ = {"sample": cls, "return": int}  # not a string: this file's annotations are
    train_step = jaxtyped(typechecker=beartype)(train_step)
    assert train_step(check(_good(schema))) == 9
    for bad in ({}, {"input_ids": "nope"}, _float_and_truncated(_good(schema))):
        with pytest.raises(jaxtyping.TypeCheckError):
            train_step(bad)  # a dict is no VlmMropeMoeSample: it must go through check_vlm_mrope_moe
        assert not _accepts(check, bad)


def test_the_class_writes_seq_as_the_sum_it_is_and_the_other_kinds_as_checked_types():
    source = jaxtyping_source(ts.load_schema("vlm_mrope_moe").plan)
    declared = dict(re.findall(r"^    (\w+): (.*)$", source, re.M))
    assert declared["input_ids"] == 'Int64[torch.Tensor, "prompt+response"]'
    assert declared["position_ids"] == 'Int64[torch.Tensor, "4 prompt+response"]'
    routes = 'Int16OrInt32OrInt64OrUInt8OrUInt16[torch.Tensor, "prompt+response layers topk"]'
    assert declared["routed_experts"] == routes
    assert declared["attention_mask"] == 'Int64[torch.Tensor, "prompt+response"] | None = None'
    assert declared["num_turns"] == "IntKind" and declared["multi_modal_inputs"] == "Mapping[Any, Any]"
    fields = ts.load_schema("vlm_mrope_moe").fields.values()
    required_tensors = [f.name for f in fields if f.is_tensor and f.required]
    assert list(declared)[: len(required_tensors)] == required_tensors  # they bind prompt and response first


# -- check_<name>: what it says --------------------------------------------------------------------

STRICT = {"name": "strict_text", "extends": ["text"], "extra": "forbid"}


def _strict() -> tuple[ts.Schema, Callable[[Any], Any]]:
    schema = ts.schema_from_dict(STRICT)
    return schema, _checker(_exec(jaxtyping_source(schema.plan)))


def test_undeclared_keys_are_refused_when_the_schema_forbids_them_and_left_out_when_it_allows_them():
    schema, check = _strict()
    good = _good(schema)
    assert _accepts(check, good)
    bad = {**good, "zzz": 1, 3: 2, "k" * 50: 0}
    assert [v.code for v in schema.violations(bad, depth="shapes")] == ["extra"] * 3
    with pytest.raises(TypeError) as info:
        check(bad)
    assert str(info.value) == (
        "check_strict_text: schema 'strict_text' forbids keys it does not declare; found 'zzz', int, " + repr("k" * 40)
    )
    with pytest.raises(TypeError, match=r"found 'x0', 'x1', 'x2', 'x3', 'x4' and 2 more$"):
        check({**good, **{f"x{i}": i for i in range(7)}})
    assert _accepts(_checker(_packaged("text")), {**good, "zzz": 1, 3: 2})


@pytest.mark.parametrize(
    ("sample", "message"),
    [
        ([1], "check_text: a sample maps field names to values, found list"),
        (None, "check_text: a sample maps field names to values, found NoneType"),
        (
            {"uid": "u", "prompts": None},  # a None counts as absent, as validate says
            "check_text: the sample has no 'prompts', 'responses', 'input_ids', 'position_ids', 'response_mask', "
            "'loss_mask', 'num_turns' (schema 'text' requires them)",
        ),
    ],
    ids=["list", "none", "missing"],
)
def test_check_names_what_is_wrong(sample, message):
    with pytest.raises(TypeError) as info:
        _checker(_packaged("text"))(sample)
    assert type(info.value) is TypeError and str(info.value) == message


def test_a_dim_bound_is_a_type_check_error_naming_the_rule_and_the_sizes():
    schema = ts.load_schema("text")
    with pytest.raises(
        jaxtyping.TypeCheckError, match=r"^TextSample: prompt >= 1 does not hold \(prompt=0, response=3\)$"
    ):
        _checker(_packaged("text"))(_zero_prompt(schema, _good(schema, 1, 3)))


# -- what no annotation can say: __post_init__ ------------------------------------------------------

#: ``s = a + b`` where ``a`` is bound only by an optional field, ``b`` bounded, and an inline expression.
LATE = {
    "name": "late",
    "dims": {"a": {}, "b": {"min": 2, "max": 6, "multiple_of": 2}, "s": "a + b"},
    "fields": {
        "x": {"shape": ["s", "b + 1"], "dtype": "int64", "pad": 0},
        "z": {"shape": ["b"], "dtype": "int64", "pad": 0},
        "y": {"shape": ["a"], "dtype": "int64", "pad": 0, "required": False},
        "w": {"shape": ["a * 2"], "dtype": "int64", "pad": 0, "required": False},
    },
}


def _late(s: int, b: int, a: int | None, x_b: int | None = None, w: int | None = None) -> dict[str, torch.Tensor]:
    out = {
        "x": torch.zeros(s, (x_b if x_b is not None else b) + 1, dtype=torch.int64),
        "z": torch.zeros(b, dtype=torch.int64),
    }
    if a is not None:
        out["y"] = torch.zeros(a, dtype=torch.int64)
    if w is not None:
        out["w"] = torch.zeros(w, dtype=torch.int64)
    return out


@pytest.mark.parametrize(
    ("sample", "ok"),
    [
        (_late(5, 2, 3), True),
        (_late(5, 2, None), True),  # a unknown: s cannot be checked, and is not
        (_late(7, 2, None), True),
        (_late(6, 2, 3), False),  # s != a + b
        (_late(5, 2, 3, w=6), True),
        (_late(5, 2, 3, w=5), False),  # w is a * 2
        (_late(5, 2, 3, x_b=4), False),  # x's second axis is b + 1
        (_late(5, 4, 1), True),
        (_late(4, 3, 1), False),  # b a multiple of 2
        (_late(8, 8, 0), False),  # b <= 6
        (_late(0, 0, 0), False),  # b >= 2
    ],
    ids=lambda v: "" if isinstance(v, (dict, bool)) else str(v),
)
def test_sizes_no_required_field_binds_first_are_checked_after_the_annotations(sample, ok):
    schema = ts.schema_from_dict(LATE)
    source = jaxtyping_source(schema.plan)
    assert '    x: Int64[torch.Tensor, "s _"]' in source and '    w: Int64[torch.Tensor, "_"] | None = None' in source
    assert (schema.violations(sample, depth="shapes") == []) is ok
    assert _accepts(_checker(_exec(source)), sample) is ok


def test_the_limit_a_dim_no_present_field_names_is_not_solved_for():
    """validate solves a = s - b from x and z; the class reads only the sizes fields name, so it skips w."""
    schema = ts.schema_from_dict(LATE)
    sample = _late(5, 2, None, w=5)
    assert [v.code for v in schema.violations(sample, depth="shapes")] == ["dim_mismatch"]
    assert _accepts(_checker(_exec(jaxtyping_source(schema.plan))), sample)
    assert not _accepts(
        _checker(_exec(jaxtyping_source(schema.plan))), {**sample, "y": torch.zeros(3, dtype=torch.int64)}
    )


# -- odd names -------------------------------------------------------------------------------------

#: Field names a class body would misread: keywords, private, dunder and NFKC-normalized names,
#: names of what the source itself defines, and keys that are no identifiers.
ODD_NAMES = ["class", "None", "__x", "__init__", "__post_init__", "ﬁ", "fi", "a-b", 'q"d', "a\\b", "torch", "Any"]
ODD_NAMES += ["IntKind", "_sizes", "self", "n", "sample", "check_t", "TSample", "_T_KEYS", "1st", "日本"]


def test_every_odd_field_name_gets_an_attribute_and_the_sample_keeps_its_keys():
    fields = {k: {"shape": ["n"], "dtype": "int64", "pad": 0, "required": i % 2 == 0} for i, k in enumerate(ODD_NAMES)}
    fields["a-b"] = {"kind": "int", "pad": 0}
    schema = ts.schema_from_dict({"name": "t", "dims": {"n": {}}, "fields": fields, "extra": "forbid"})
    ns = _exec(jaxtyping_source(schema.plan))
    check, keys = ns["check_t"], ns["_T_KEYS"]
    assert set(keys) == set(ODD_NAMES) and len(set(keys.values())) == len(ODD_NAMES)
    assert all(a.isidentifier() and not a.startswith("__") for a in keys.values())
    sample = {k: (3 if k == "a-b" else torch.zeros(2, dtype=torch.int64)) for k in ODD_NAMES}
    made = check(sample)
    assert all(getattr(made, keys[k]) is v for k, v in sample.items())
    assert not _accepts(check, {**sample, "torch": torch.zeros(3, dtype=torch.int64)})  # n disagrees
    assert not _accepts(check, {**sample, "a-b": "3"})


# -- the class refuses only what the schema refuses (property) -------------------------------------

_AXES = ["a", "b", "s", "k", 2, "a + 1", "s - b", "2 * k", "a * b"]
_KINDS = {
    "int": (3, 3.5),
    "float": (0.5, "x"),
    "bool": (True, 1),
    "str": ("u", 1),
    "mapping": ({}, []),
    "any": ("x", None),
}


@st.composite
def schemas_with_samples(draw):
    """A schema over ``a``, ``b``, ``k``, ``s = a + b`` and a sample that is right or one step off."""
    fields = {}
    for i in range(draw(st.integers(1, 4))):
        required = draw(st.booleans())
        if draw(st.integers(0, 3)) == 0:
            fields[f"f{i}"] = {"kind": draw(st.sampled_from(sorted(_KINDS))), "pad": "copy", "required": required}
            continue
        shape = draw(st.lists(st.sampled_from(_AXES), max_size=3))
        dtype = draw(st.lists(st.sampled_from(["int64", "float32", "bool"]), min_size=1, max_size=2, unique=True))
        fields[f"f{i}"] = {"shape": shape, "dtype": dtype, "pad": 0, "required": required}
    if draw(st.booleans()):  # a required field naming a and b: then nothing goes unchecked
        at = draw(st.integers(0, len(fields)))
        items = list(fields.items())
        fields = dict([*items[:at], ("base", {"shape": ["a", "b"], "dtype": "int64", "pad": 0}), *items[at:]])
    dims = {"a": {"min": 1}, "b": {"max": 2}, "k": 3, "s": "a + b"}
    schema = ts.schema_from_dict({"name": "t", "dims": dims, "fields": fields})
    env = {"a": draw(st.integers(0, 3)), "b": draw(st.integers(0, 3)), "k": 3}
    env["s"] = env["a"] + env["b"]
    sample = {}
    for name, f in schema.fields.items():
        if not f.required and draw(st.booleans()):
            continue
        if f.is_tensor:
            shape = [e.evaluate(env) + draw(st.sampled_from([0, 0, 0, 1])) for e in f.shape]
            sample[name] = torch.zeros(shape, dtype=draw(st.sampled_from([*f.dtypes, torch.int32])))
        else:
            sample[name] = _KINDS[f.kind][draw(st.sampled_from([0, 0, 1]))]
    return schema, sample


@settings(deadline=None)
@given(schemas_with_samples())
def test_the_class_refuses_only_what_the_schema_refuses_and_all_of_it_when_a_required_field_names_every_dim(case):
    schema, sample = case
    valid = schema.violations(sample, depth="shapes") == []
    accepted = _accepts(_checker(_exec(jaxtyping_source(schema.plan))), sample)
    if valid:
        assert accepted
    if "base" in schema.fields:
        assert accepted == valid
