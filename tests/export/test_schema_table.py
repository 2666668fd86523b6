"""The display rows shared by ``trajschema show`` and the generated docs pages."""

from __future__ import annotations

import pytest

import trajschema as ts
from trajschema.export.table import dim_rows, extends, field_rows, tag_rows, value_checks


@pytest.mark.parametrize("name", ts.schema_names())
def test_rows_cover_every_declaration_in_order(name):
    schema = ts.load_schema(name)
    assert [r.name for r in field_rows(schema.plan)] == list(schema.fields)
    assert [r.name for r in dim_rows(schema.plan)] == list(schema.dims)
    assert [r.name for r in tag_rows(schema.plan)] == list(schema.tags)
    assert extends(schema.plan) == list(schema.lineage[1:])


def test_field_rows_read_like_the_yaml():
    schema = ts.load_schema("vlm_mrope_moe")
    rows = {r.name: r for r in field_rows(schema.plan)}
    assert rows["position_ids"].shape == "[rope_rows, seq]"
    assert rows["position_ids"].dtype == "int64"
    assert rows["position_ids"].pad == "positions"
    assert rows["routed_experts"].dtype == "int16 | int32 | int64 | uint8 | uint16"
    assert rows["routed_experts"].checks in ("min 0", "min 0; max experts - 1; distinct")  # before / after issue 16
    assert rows["response_mask"].checks == "values [0, 1]"
    assert rows["response_mask"].pad == "0"
    assert rows["attention_mask"].required == "no"
    assert rows["uid"].shape == "" and rows["uid"].dtype == "str" and rows["uid"].pad == "uid"
    assert rows["rollout_log_probs"].checks == "finite"


def test_dim_rows_give_kind_bounds_and_padding_default():
    rows = {r.name: r for r in dim_rows(ts.load_schema("vlm_mrope").plan)}
    assert (rows["rope_rows"].kind, rows["rope_rows"].definition) == ("fixed", "4")
    assert (rows["prompt"].kind, rows["prompt"].definition, rows["prompt"].padding_default) == ("free", ">= 1", "127")
    assert (rows["seq"].kind, rows["seq"].definition, rows["seq"].padding_default) == (
        "derived",
        "prompt + response",
        "",
    )


def test_tag_rows_and_value_checks_of_a_dict_schema():
    schema = ts.schema_from_dict(
        {
            "name": "t",
            "dims": {"n": {"min": 2, "max": 9}},
            "fields": {
                "x": {
                    "shape": ["n"],
                    "dtype": ["float32", "bfloat16"],
                    "min": -1.5,
                    "max": 2,
                    "finite": True,
                    "pad": 0.0,
                }
            },
            "tags": {"is_padding": {"kind": "bool", "default": False}, "n_len": {"equals": "n"}},
        }
    )
    (x,) = field_rows(schema.plan)
    assert x.dtype == "float32 | bfloat16" and x.checks == "min -1.5; max 2; finite"
    assert value_checks(schema.fields["x"]) == x.checks
    tags = {r.name: r for r in tag_rows(schema.plan)}
    assert (tags["is_padding"].kind, tags["is_padding"].default, tags["is_padding"].equals) == ("bool", "False", "")
    assert tags["n_len"].equals == "n"
    assert dim_rows(schema.plan)[0].definition == ">= 2 and <= 9"


def _routes(**changes) -> ts.Schema:
    """moe_routed with ``experts`` declared and ``routed_experts`` changed by hand."""
    import dataclasses

    from trajschema.core import FreeDim, parse_expr

    base = ts.load_schema("moe_routed")
    field = dataclasses.replace(base.fields["routed_experts"], **changes)
    return ts.Schema(
        name="routes",
        description="",
        architectures=(),
        lineage=("routes",),
        dims={**base.dims, "experts": FreeDim("experts", 1, from_config=(parse_expr("num_experts"),))},
        fields={**base.fields, "routed_experts": field},
        tags=base.tags,
        padding_sizes=base.padding_sizes,
        extra=base.extra,
        source="<test>",
    )


def test_bounds_in_dims_distinct_and_spread_read_like_the_yaml():
    from trajschema.core import PadRule, parse_expr

    schema = _routes(max_expr=parse_expr("experts - 1"), distinct=True, pad=PadRule("spread", over="experts"))
    rows = {r.name: r for r in field_rows(schema.plan)}
    assert rows["routed_experts"].checks == "min 0; max experts - 1; distinct"
    assert rows["routed_experts"].pad == "{spread: experts}"
    pinned = {r.name: r for r in field_rows(schema.with_dims({"experts": 128}).plan)}
    assert pinned["routed_experts"].checks == "min 0; max experts - 1 (= 127); distinct"
    both = _routes(
        min=None, min_expr=parse_expr("experts - experts"), max=255, max_expr=parse_expr("experts - 1"), distinct=False
    )
    assert value_checks(both.fields["routed_experts"]) == "min experts - experts; max 255; max experts - 1"
    assert value_checks(both.fields["routed_experts"], {"experts": 8}) == (
        "min experts - experts (= 0); max 255; max experts - 1 (= 7)"
    )
