"""trajschema.testing.verl_sample: realistic samples, routed experts a valid routing."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import trajschema as ts
from trajschema.core.dims import FreeDim, parse_expr
from trajschema.schema import Schema
from trajschema.testing import verl_sample

MOE = [n for n in ts.schema_names() if "routed_experts" in ts.load_schema(n).fields]


def _repeats(t: torch.Tensor) -> int:
    rows = t.reshape(-1, t.shape[-1]).tolist() if t.numel() else []
    return sum(len(set(r)) != len(r) for r in rows)


def _strict(schema: Schema) -> Schema:
    """``schema`` with ``routed_experts`` declaring ``max: experts - 1`` and ``distinct`` (whatever its file says)."""
    f = dataclasses.replace(schema.fields["routed_experts"], max_expr=parse_expr("experts - 1"), distinct=True)
    dims = dict(schema.dims)
    dims.setdefault("experts", FreeDim("experts", min=1))
    return Schema(
        name=schema.name,
        description=schema.description,
        architectures=schema.architectures,
        lineage=schema.lineage,
        dims=dims,
        fields={**schema.fields, "routed_experts": f},
        tags=schema.tags,
        padding_sizes=schema.padding_sizes,
        extra=schema.extra,
        source=schema.source,
    )


def test_moe_schemas_are_found():
    assert {"moe_routed", "vlm_mrope_moe"} <= set(MOE)


@pytest.mark.parametrize("name", MOE)
@pytest.mark.parametrize(("layers", "topk"), [(4, 2), (48, 8), (1, 1), (2, 64)])
def test_routed_experts_are_a_valid_routing(name, layers, topk):
    s = verl_sample(name, 17, 9, layers=layers, topk=topk, seed=3)
    r = s["routed_experts"]
    assert r.shape == (26, layers, topk) and r.dtype == torch.int16
    assert _repeats(r) == 0
    assert int(r.min()) >= 0 and int(r.max()) < max(topk, 64)


@pytest.mark.parametrize("name", MOE)
def test_samples_validate_with_the_expert_checks(name):
    strict = _strict(ts.load_schema(name))
    s = verl_sample(strict, 30, 12, layers=6, topk=8, experts=16, seed=1)
    assert strict.violations(s, dims={"experts": 16}) == []
    assert int(s["routed_experts"].max()) < 16


def test_the_expert_count_comes_from_the_schema_when_it_pins_one():
    pinned = _strict(ts.load_schema("moe_routed")).with_dims({"experts": 10})
    r = verl_sample(pinned, 40, 40, layers=3, topk=10)["routed_experts"]
    assert (r.sort(dim=-1).values == torch.arange(10)).all()  # 10 distinct of 10: each token names them all


def test_many_experts_need_int32():
    r = verl_sample("moe_routed", 3, 2, topk=2, experts=40_000)["routed_experts"]
    assert r.dtype == torch.int32 and _repeats(r) == 0


def test_deterministic_for_one_seed():
    a, b = (verl_sample("moe_routed", 5, 4, seed=9) for _ in range(2))
    assert torch.equal(a["routed_experts"], b["routed_experts"])
    assert not torch.equal(a["routed_experts"], verl_sample("moe_routed", 5, 4, seed=10)["routed_experts"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"topk": 9, "experts": 8}, "topk=9 is more than experts=8"),
        ({"experts": 0}, r"experts=\.\.\.\) must be a positive int, found 0"),
        ({"experts": True}, r"experts=\.\.\.\) must be a positive int, found True"),
    ],
    ids=["topk-above-experts", "zero", "bool"],
)
def test_refuses_impossible_routings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        verl_sample("moe_routed", 3, 2, **kwargs)


def test_schemas_without_routes_ignore_experts():
    assert "routed_experts" not in verl_sample("text", 3, 2, experts=4, topk=9)


def test_a_schema_pinned_from_a_model_config_gives_the_moe_sizes():
    """verl_sample(schema_for_config(...), P, R) fits the pinned schema without repeating its sizes."""
    config = {"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 16, "num_experts_per_tok": 4}
    schema = ts.schema_for_config({**config, "num_hidden_layers": 3})
    sample = verl_sample(schema, 6, 2)
    assert tuple(sample["routed_experts"].shape) == (8, 3, 4)
    assert int(sample["routed_experts"].max()) < 16
    schema.validate(sample)
    # explicit sizes still win (and a pinned schema then reports them)
    assert tuple(verl_sample(schema, 6, 2, layers=2, topk=1)["routed_experts"].shape) == (8, 2, 1)
    # an unpinned schema keeps the old defaults
    assert tuple(verl_sample("moe_routed", 6, 2)["routed_experts"].shape) == (8, 4, 2)
