"""Schema.to_pandera() and `trajschema export NAME --format pandera`: one TensorDictSchema, as an object and as source.

What the export agrees with `schema.violations` on is measured by test_tensordict_agreement.py;
here: the source builds the object, a layout's dense batch passes, and bad input is named.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pandera.errors
import pytest
import torch
from hypothesis import given, settings
from pandera.tensordict import to_yaml
from tensordict import TensorDict

import trajschema as ts
from trajschema.export import pandera_schema, pandera_source
from trajschema.testing import dense_batches

LAYOUTS = [None, "verl_dataproto", "skyrl"]


def _exec(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<exported>", "exec", dont_inherit=True), namespace)  # not this file's __future__
    return namespace


def _accepts(checker: Any, td: Any) -> bool:
    try:
        checker.validate(td, lazy=True)
    except pandera.errors.SchemaErrors:
        return False
    return True


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", ts.schema_names())
def test_the_source_builds_the_object(name, layout):
    schema = ts.load_schema(name)
    made = schema.to_pandera(layout=layout)
    bound = schema._bound(layout)
    built = next(v for k, v in _exec(pandera_source(schema.plan, bound)).items() if k.endswith("_SCHEMA"))
    assert to_yaml(built) == to_yaml(made)
    assert (built.name, built.metadata, built.batch_size) == (made.name, made.metadata, made.batch_size)
    assert made.metadata["trajschema"]["schema"] == name
    assert made.metadata["trajschema"].get("layout") == layout


def test_the_header_says_what_only_trajschema_checks():
    source = pandera_source(ts.load_schema("moe_routed").plan)
    header = source[: source.index("import torch")]
    for said in (
        "seq in input_ids, position_ids, attention_mask, routed_experts",
        "seq = prompt + response",
        "prompt >= 1",
        "routed_experts (int16, int32, int64, uint8, uint16)",
        "routed_experts <= experts - 1",
        "distinct: routed_experts",
        "uid (str)",
        "a TransferQueue batch",
        "of 200 labelled invalid samples",
    ):
        assert said in header.replace("\n#       ", " "), said
    assert all(line.startswith("#") or not line for line in header.splitlines())
    assert max(map(len, header.splitlines())) <= 100


def test_value_checks_torch_cannot_run_are_left_out_and_said():
    made = ts.load_schema("moe_routed").to_pandera()
    assert made.keys["routed_experts"].checks == []  # torch has no uint16 >= 0
    assert made.metadata["trajschema"]["unchecked"]["torch ops"] == ["routed_experts >= 0 (on uint16)"]
    assert [c.name for c in made.keys["response_mask"].checks] == ["isin"]


def test_finite_is_an_open_range_nan_and_infinities_break():
    schema = ts.schema_from_dict(
        {
            "name": "f",
            "dims": {"n": {}},
            "fields": {"x": {"shape": ["n"], "dtype": "float32", "finite": True, "pad": 0.0}},
        }
    )
    checker = schema.to_pandera()
    for bad in (float("nan"), float("inf"), float("-inf")):
        td = TensorDict(x=torch.tensor([[1.0, bad]]), batch_size=[1])
        assert not _accepts(checker, td) and schema.violations({"x": td["x"][0]})
    assert _accepts(checker, TensorDict(x=torch.tensor([[1.0, -2.0]]), batch_size=[1]))


@pytest.mark.parametrize("layout", ["verl_dataproto", "skyrl"])
@pytest.mark.parametrize("name", ["text", "vlm_mrope", "moe_routed"])
def test_a_layouts_dense_batches_pass_and_broken_columns_do_not(name, layout):
    schema = ts.load_schema(name)
    checker = schema.to_pandera(layout=layout)

    @settings(max_examples=5, deadline=None)
    @given(dense_batches(schema, layout, max_len=6))
    def check(batch: Any) -> None:
        tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
        td = TensorDict(tensors, batch_size=[next(iter(tensors.values())).shape[0]])
        assert _accepts(checker, td)
        key = next(k for k, t in checker.keys.items() if t.dtype is not None)
        for broken in (td.exclude(key), _with(td, key, td[key].to(torch.float16)), _with(td, key, td[key][..., None])):
            assert not _accepts(checker, broken)
            assert schema.batch_violations(broken, layout=layout)

    check()


def _with(td: Any, key: str, value: torch.Tensor) -> Any:
    out = td.clone()
    del out[key]
    out[key] = value
    return out


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda s: s.to_pandera(layout="thd"), ValueError, "'thd' is a packed layout"),
        (lambda s: s.to_pandera(layout="no_such_layout"), ts.SchemaNotFoundError, "no_such_layout"),
        (lambda s: s.to_pandera(layout=3), TypeError, "layout"),
    ],
    ids=["packed layout", "unknown layout", "not a layout"],
)
def test_a_layout_it_cannot_take_is_named(call, error, words):
    with pytest.raises(error, match=words):
        call(ts.load_schema("text"))


@pytest.mark.parametrize("found", [None, "0.22.1"], ids=["not installed", "too old"])
def test_without_pandera_0_35_both_forms_raise_an_import_error_naming_it(monkeypatch, found):
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name != "pandera":
            return real(name)
        if found is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return found

    monkeypatch.setattr(importlib.metadata, "version", version)
    plan = ts.load_schema("text").plan
    for build in (pandera_schema, pandera_source):
        with pytest.raises(ImportError, match=r"needs pandera>=0\.35") as info:
            build(plan)
        assert ("not installed" if found is None else f"this is pandera {found}") in str(info.value)


def test_a_bound_a_float16_or_bfloat16_cannot_hold_exactly_is_not_claimed():
    """torch compares in the tensor's dtype (0.1 in bfloat16 is 0.10009765625): pandera cannot state
    trajschema's ``<= 0.1`` there, so the export leaves the check out and says so."""
    from trajschema.export.columns import tensordict_columns
    from trajschema.load import schema_from_dict

    s = schema_from_dict({"name": "bfx", "fields": {"x": {"shape": [3], "dtype": "bfloat16", "pad": 0, "max": 0.1}}})
    found = s.violations({"x": torch.tensor([0.1, 0.0, 0.05], dtype=torch.bfloat16)})
    assert [v.code for v in found] == ["value"]
    assert not any(tensordict_columns(s.plan).expresses(v, "pandera") for v in found)
    from trajschema.export import pandera_source

    assert "x <= 0.1 (not exact in bfloat16)" in pandera_source(s.plan)
