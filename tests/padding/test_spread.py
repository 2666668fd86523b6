"""Spread routes (``pad: {spread: experts}``): padding tokens spread evenly over the experts (issue 16).

The rule as the loader compiles it, the ids it writes (distinct per token, an even share per
expert and layer, deterministic, in range), where the number of experts comes from and the
refusal when nothing says it.
"""

from __future__ import annotations

import itertools
import math
import pickle
from collections import Counter

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from trajschema.core import SPREAD, PadRule
from trajschema.padding import PaddingSizeError, ids_seen, largest_id, resolve_padding, spread_ids
from trajschema.testing import tq_batch, verl_sample

ROUTES = {"shape": ["seq", "layers", "topk"], "dtype": ["int16", "int32", "int64"], "min": 0}


def spread_schema(pad=None, **routes) -> ts.Schema:
    """moe_routed with an ``experts`` dim and its routes padded by ``pad`` (spread over experts by default)."""
    field = {**ROUTES, "pad": {"spread": "experts"} if pad is None else pad, **routes}
    return ts.schema_from_dict(
        {
            "name": "moe_spread",
            "extends": ["moe_routed"],
            "dims": {"experts": {"min": 1}},
            "fields": {"routed_experts": field},
        }
    )


MOE = spread_schema()
DIMS = {"layers": 3, "topk": 2}


def routes_like(schema: ts.Schema = MOE, *, experts: int = 6, layers: int = 3, topk: int = 2, seq: int = 5) -> dict:
    """A real sample whose routes use experts ``0 .. experts - 1`` (the largest one included)."""
    like = verl_sample(schema, 3, seq - 3, layers=layers, topk=topk)
    ids = torch.arange(seq * layers * topk).remainder(experts).view(seq, layers, topk)
    like["routed_experts"] = ids.to(like["routed_experts"].dtype)
    return like


def reference_counts(routes: torch.Tensor) -> tuple[int, dict[tuple[int, ...], Counter]]:
    """The padding tokens of the batch, and how many slots each id gets in each layer, by plain loops."""
    shape = tuple(routes.shape)
    tokens_axes, layer_axes = (shape[:2], shape[2:-1]) if len(shape) > 2 else (shape[:1], ())
    per_layer: dict[tuple[int, ...], Counter] = {}
    for token in itertools.product(*map(range, tokens_axes)):
        for layer in itertools.product(*map(range, layer_axes)):
            per_layer.setdefault(layer, Counter()).update(routes[(*token, *layer)].tolist())
    return math.prod(tokens_axes), per_layer


def assert_spread(routes: torch.Tensor, experts: int) -> None:
    """The issue's two bounds, and the id range, checked against a plain count."""
    slots = routes.shape[-1]
    flat = routes.reshape(-1, slots).tolist() if routes.numel() else []
    assert all(len(set(s)) == len(s) for s in flat), "a token's slots repeat an id"
    assert all(0 <= x < experts for s in flat for x in s)
    tokens, per_layer = reference_counts(routes)
    share = math.ceil(tokens * slots / experts)
    for layer, counts in per_layer.items():
        assert max(counts.values(), default=0) <= share, (layer, counts.most_common(1), share)


# -- the ids written ---------------------------------------------------------------------------


@given(
    count=st.integers(0, 6),
    seq=st.integers(0, 9),
    layers=st.integers(1, 4),
    experts=st.integers(1, 40),
    data=st.data(),
)
def test_spread_ids_are_distinct_per_token_even_per_layer_and_in_range(count, seq, layers, experts, data):
    topk = data.draw(st.integers(0, experts), label="topk")
    dtype = data.draw(st.sampled_from([torch.int16, torch.int32, torch.int64, torch.uint8]), label="dtype")
    if dtype == torch.uint8 and experts > 256:
        return
    shape = (count, seq, layers, topk)
    routes = spread_ids(shape, experts, dtype)
    assert routes.shape == shape and routes.dtype == dtype and routes.is_contiguous()
    assert_spread(routes, experts)
    assert torch.equal(routes, spread_ids(shape, experts, dtype))  # deterministic


@given(
    count=st.integers(1, 5),
    axes=st.lists(st.integers(1, 4), min_size=0, max_size=3),
    experts=st.integers(1, 12),
    data=st.data(),
)
def test_spread_ids_hold_for_any_rank(count, axes, experts, data):
    topk = data.draw(st.integers(1, experts), label="topk")
    routes = spread_ids((count, *axes, topk), experts, torch.int64)
    assert_spread(routes, experts)


def test_every_slot_number_of_the_batch_in_turn():
    """The simple description: the batch's slots, token by token, numbered modulo the experts, in every layer."""
    routes = spread_ids((2, 3, 2, 4), 5, torch.int64)
    expected = (torch.arange(2 * 3 * 4) % 5).view(2, 3, 1, 4).expand(2, 3, 2, 4)
    assert torch.equal(routes, expected)


def test_the_period_remainder_is_filled():
    """128 experts, top-8: the pattern repeats every 16 tokens; 17 tokens leave one after the copies."""
    routes = spread_ids((1, 17, 2, 8), 128, torch.int16)
    assert routes[0, 16, 0].tolist() == list(range(8))
    assert routes[0, 15, 1].tolist() == list(range(120, 128))


def test_more_slots_than_ids_is_refused():
    with pytest.raises(ValueError, match="cannot spread 3 distinct ids per token over 2 ids"):
        spread_ids((1, 1, 3), 2, torch.int64)
    assert spread_ids((0, 4, 3), 2, torch.int64).shape == (0, 4, 3)  # nothing to fill: nothing refused


# -- the rule in a schema ------------------------------------------------------------------------


def test_the_rule_compiles_to_a_pad_rule_over_the_dim():
    f = MOE.fields["routed_experts"]
    assert f.pad == PadRule(SPREAD, over="experts")
    assert str(f.pad) == "{spread: experts}"


SPREAD_MISUSE = {
    "typo in the dim": (
        {**ROUTES, "pad": {"spread": "expert"}},
        "fields.routed_experts.pad.spread",
        "unknown dim 'expert'; did you mean 'experts'?",
    ),
    "not a dim name": (
        {**ROUTES, "pad": {"spread": 4}},
        "fields.routed_experts.pad.spread",
        "expected the name of the dim that counts the ids (experts), found",
    ),
    "typo in the key": (
        {**ROUTES, "pad": {"sprad": "experts"}},
        "fields.routed_experts.pad",
        "unknown pad rule 'sprad'; did you mean 'spread'?",
    ),
    "a second key": (
        {**ROUTES, "pad": {"spread": "experts", "seed": 1}},
        "fields.routed_experts.pad",
        "a pad mapping has exactly one key, spread",
    ),
    "no key": ({**ROUTES, "pad": {}}, "fields.routed_experts.pad", "a pad mapping has exactly one key, spread"),
    "float dtype": (
        {**ROUTES, "dtype": "float32", "pad": {"spread": "experts"}},
        "fields.routed_experts.pad",
        "fills integer ids, which dtype float32 does not hold",
    ),
    "bool dtype": (
        {**ROUTES, "dtype": ["int64", "bool"], "pad": {"spread": "experts"}},
        "fields.routed_experts.pad",
        "fills integer ids, which dtype bool does not hold",
    ),
    "0-d tensor": (
        {"shape": [], "dtype": "int64", "pad": {"spread": "experts"}},
        "fields.routed_experts.pad",
        "a 0-d field has none",
    ),
    "non-tensor field": (
        {"kind": "int", "pad": {"spread": "experts"}},
        "fields.routed_experts.pad",
        "a 'int' field has none",
    ),
}


@pytest.mark.parametrize(("field", "key_path", "problem"), list(SPREAD_MISUSE.values()), ids=list(SPREAD_MISUSE))
def test_a_misused_spread_rule_is_a_schema_error_naming_the_key(field, key_path, problem):
    data = {
        "name": "x",
        "extends": ["moe_routed"],
        "dims": {"experts": {"min": 1}},
        "fields": {"routed_experts": field},
    }
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_from_dict(data)
    assert info.value.path == key_path
    assert problem in str(info.value)


def test_a_schema_built_in_python_is_held_to_the_same_rule():
    base = MOE
    bad_dim = {**base.fields, "routed_experts": _with_pad(base.fields["routed_experts"], PadRule(SPREAD, over="nope"))}
    with pytest.raises(ValueError, match="spreads over dim 'nope', which dims does not declare"):
        _rebuild(base, fields=bad_dim)
    floats = _with_pad(base.fields["routed_experts"], PadRule(SPREAD, over="experts"), dtypes=(torch.float32,))
    with pytest.raises(ValueError, match="spreads integer ids along the last axis"):
        _rebuild(base, fields={**base.fields, "routed_experts": floats})


def _with_pad(f, pad, **changes):
    import dataclasses

    return dataclasses.replace(f, pad=pad, **changes)


def _rebuild(schema: ts.Schema, **changes) -> ts.Schema:
    kwargs = {
        k: getattr(schema, k)
        for k in ("name", "description", "architectures", "lineage", "dims", "fields", "tags", "extra", "source")
    }
    return ts.Schema(**{**kwargs, "padding_sizes": schema.padding_sizes, **changes})


# -- where the number of experts comes from ------------------------------------------------------


def test_experts_from_dims():
    pad = MOE.padding(4, eos_token_id=2, dims={**DIMS, "experts": 7})
    assert pad.dims["experts"] == 7 and pad.sources["experts"] == "dims"
    assert_spread(pad.fields["routed_experts"], 7)
    assert int(pad.fields["routed_experts"].max()) == 6  # every expert takes its share


def test_experts_from_a_pinned_schema():
    pad = MOE.with_dims({"experts": 9}).padding(4, eos_token_id=2, dims=DIMS)
    assert (pad.dims["experts"], pad.sources["experts"]) == (9, "schema")
    assert int(pad.fields["routed_experts"].max()) == 8


def test_experts_from_a_model_config_say_config():
    schema = MOE.with_dims({"experts": 8}, sources={"experts": "config: num_local_experts"})
    pad = schema.padding(2, eos_token_id=2, dims=DIMS)
    assert (pad.dims["experts"], pad.sources["experts"]) == (8, "config")


def test_experts_from_the_real_sample_its_largest_id_plus_one():
    like = routes_like(experts=6)
    pad = MOE.padding(3, eos_token_id=2, like=like)
    assert (pad.dims["experts"], pad.sources["experts"]) == (6, "like")
    assert_spread(pad.fields["routed_experts"], 6)


def test_dims_and_a_pinned_schema_win_over_the_real_sample():
    like = routes_like(experts=6)
    assert MOE.padding(1, eos_token_id=2, like=like, dims={"experts": 11}).dims["experts"] == 11
    assert MOE.with_dims({"experts": 12}).padding(1, eos_token_id=2, like=like).sources["experts"] == "schema"


def test_the_real_sample_wins_over_a_padding_default():
    schema = _with_padding_default(64)
    assert schema.padding(1, eos_token_id=2, dims=DIMS).sources["experts"] == "padding default"
    assert schema.padding(1, eos_token_id=2, dims=DIMS).dims["experts"] == 64
    assert schema.padding(1, eos_token_id=2, like=routes_like(experts=5)).dims["experts"] == 5


def _with_padding_default(size: int) -> ts.Schema:
    return _rebuild(MOE, padding_sizes={**MOE.padding_sizes, "experts": size})


def test_no_count_of_experts_is_refused_naming_the_three_ways():
    with pytest.raises(PaddingSizeError) as info:
        MOE.padding(2, eos_token_id=2, dims=DIMS)
    msg = str(info.value)
    assert "does not know how many ids routed_experts spreads its padding over (dim 'experts')" in msg
    for way in ("dims={'experts': <count>}", "ts.schema_for_config(config)", "with_dims", "like=<a real sample"):
        assert way in msg
    assert (info.value.dim, info.value.field) == ("experts", "routed_experts")
    back = pickle.loads(pickle.dumps(info.value))
    assert str(back) == msg and back.remedy == info.value.remedy


def test_resolve_padding_finds_the_same_count_without_building():
    like = routes_like(experts=6)
    sizes = resolve_padding(MOE.plan, 3, like=like)
    assert (sizes.dims["experts"], sizes.sources["experts"]) == (6, "like")
    assert sizes.fields["routed_experts"].rule == SPREAD
    with pytest.raises(PaddingSizeError, match="no real sample shows it"):
        resolve_padding(MOE.plan, 3, dims=DIMS)


def test_a_reference_without_a_count_to_read_gives_none():
    """Ids all negative (a broken buffer, caught at depth values) say no count: refused, never experts=0."""
    like = routes_like(seq=3)
    like["routed_experts"].fill_(-1)
    with pytest.raises(PaddingSizeError, match="no real sample shows it"):
        MOE.padding(1, eos_token_id=2, like=like)
    assert MOE.padding(1, eos_token_id=2, like=like, dims={"experts": 3}).dims["experts"] == 3


def test_a_meta_reference_is_not_read():
    like = routes_like()
    like["routed_experts"] = like["routed_experts"].to("meta")
    with pytest.raises(PaddingSizeError, match="no real sample shows it"):
        MOE.padding(1, eos_token_id=2, like=like)


# -- what padding refuses -------------------------------------------------------------------------


def test_fewer_experts_than_slots_is_refused_before_building():
    # the message says where the count came from, so the user knows which one to fix
    with pytest.raises(ValueError, match=r"experts=1 \(from dims=\) ids cannot fill 2 slots with .*at least 2"):
        MOE.padding(2, eos_token_id=2, dims={**DIMS, "experts": 1})
    like = routes_like(experts=2, topk=2)
    like["routed_experts"][..., 1] = 0  # a broken reference: largest id 0 -> one expert
    like["routed_experts"][..., 0] = 0
    with pytest.raises(ValueError, match=r"experts=1 \(from the like= sample: .*largest id \+ 1\) ids cannot fill 2"):
        MOE.padding(2, eos_token_id=2, like=like)
    pinned = MOE.with_dims({"experts": 1})
    with pytest.raises(ValueError, match=r"experts=1 \(from the schema's pinned size\) ids cannot fill 2 slots"):
        pinned.padding(2, eos_token_id=2, dims={k: v for k, v in DIMS.items() if k != "experts"})


def test_an_id_beyond_the_dtype_is_refused():
    schema = spread_schema(dtype="int8")
    with pytest.raises(ValueError, match=r"id 199 \(of experts=200\) does not fit dtype torch.int8"):
        schema.padding(1, eos_token_id=2, dims={**DIMS, "experts": 200})


def test_ids_that_break_a_literal_max_are_refused():
    schema = spread_schema(max=3)
    with pytest.raises(ValueError, match=r"with \{spread: experts\} \(experts=6\) breaks its value checks"):
        schema.padding(1, eos_token_id=2, dims={**DIMS, "experts": 6})
    assert schema.padding(1, eos_token_id=2, dims={**DIMS, "experts": 4}).fields["routed_experts"].max() == 3


def test_ids_that_break_a_min_are_refused():
    # Spread ids always start at 0: a min above 0 breaks at every size, so the loader refuses it.
    with pytest.raises(ts.SchemaDefinitionError, match=r"fills 0, 1, 2, \.\.\., and 0 breaks .* \(be >= min 1\)"):
        spread_schema(min=1)
    schema = spread_schema(max=3)  # ids up to experts - 1 break it only where experts > 4: at padding time
    schema.padding(1, eos_token_id=2, dims={**DIMS, "experts": 4})
    with pytest.raises(ValueError, match=r"breaks its value checks"):
        schema.padding(1, eos_token_id=2, dims={**DIMS, "experts": 6})


# -- the padding passes its own schema's checks ----------------------------------------------------


def test_spread_padding_passes_the_schemas_checks_with_distinct_and_a_dim_bound():
    schema = spread_schema(max="experts - 1", distinct=True)
    pad = schema.padding(4, eos_token_id=2, dims={**DIMS, "experts": 5})
    pinned = schema.with_dims({"experts": 5})
    for sample, tag in zip(pad.samples, pad.tags, strict=True):
        pinned.validate(sample, tag=tag)
    pinned.validate_batch(pad.fields, tags=pad.tags)
    pinned.validate_batch(tq_batch(pad.samples), tags=pad.tags)  # jagged, as TransferQueue returns it


def test_zero_padding_would_break_the_distinct_check():
    """The reason for the rule: zeros repeat an expert in every token (this test can fail)."""
    zeros = spread_schema(pad=0).padding(1, eos_token_id=2, dims=DIMS)
    spread = MOE.padding(1, eos_token_id=2, dims={**DIMS, "experts": 4})
    checked = spread_schema(distinct=True)
    assert "repeated" in {v.code for v in checked.violations(zeros.samples[0])}
    assert checked.violations(spread.samples[0]) == []


def packaged_spread_schemas() -> list[str]:
    return [n for n in ts.schema_names() if any(f.pad.rule == SPREAD for f in ts.load_schema(n).fields.values())]


@pytest.mark.parametrize(
    "name",
    packaged_spread_schemas()
    or [pytest.param("none", marks=pytest.mark.skip(reason="no packaged schema spreads yet"))],
)
def test_every_packaged_spread_schema_pads_within_its_checks(name):
    """Runs once a packaged schema says ``pad: {spread: ...}`` (moe_routed and those extending it)."""
    schema = ts.load_schema(name)
    like = verl_sample(schema, 20, 9, layers=6, topk=3)
    pad = schema.padding(5, eos_token_id=2, like=like)
    over = {f.pad.over for f in schema.fields.values() if f.pad.rule == SPREAD}
    pinned = schema.with_dims({d: pad.dims[d] for d in over})
    for sample, tag in zip(pad.samples, pad.tags, strict=True):
        pinned.validate(sample, tag=tag)
    pinned.validate_batch(tq_batch(pad.samples), tags=pad.tags)
    for f in schema.fields.values():
        if f.pad.rule == SPREAD:
            assert_spread(pad.fields[f.name], pad.dims[f.pad.over or ""])


# -- the number of experts from the whole batch (issue 27 §2) -----------------------------------


def _nested(*parts: torch.Tensor, layout=torch.jagged) -> torch.Tensor:
    return torch.nested.nested_tensor(list(parts), layout=layout)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (torch.tensor([[3, 7], [1, 2]]), 7),
        (torch.tensor([300, 2], dtype=torch.uint16), 300),  # torch has no max for uint16 on CPU
        (torch.tensor([65535], dtype=torch.uint16), 65535),
        (torch.tensor([[1, 5]], dtype=torch.uint8).expand(1000, 2), 5),
        (_nested(torch.tensor([1, 5]), torch.tensor([9])), 9),
        (_nested(torch.tensor([[1, 5]]), torch.tensor([[9, 2], [0, 1]]), layout=torch.strided), 9),
        ([torch.tensor([1]), torch.tensor([9, 0]), None, "x"], 9),
        ((torch.tensor([-4]),), -4),
        (torch.tensor([-1, -3]), -1),
        (torch.zeros(0, 2, dtype=torch.int64), None),
        ([], None),
        (torch.zeros(3, device="meta", dtype=torch.int64), None),
        (torch.tensor([0.5, 9.0]), None),
        (torch.tensor([True]), None),
        (7, None),
        ("routes", None),
    ],
    ids=[
        "dense", "uint16", "uint16-top", "expanded", "jagged", "strided-nested", "list", "tuple-negative",
        "negative", "empty", "empty-list", "meta", "float", "bool", "int", "str",
    ],
)  # fmt: skip
def test_largest_id_reads_every_form_by_reduction(value, expected):
    assert largest_id(value) == expected


def _batch_rows(experts_of_row: list[list[int]]) -> list[dict]:
    """Three real samples whose routes use exactly the given experts (row 0 only 0 and 1)."""
    rows = []
    for ids in experts_of_row:
        like = routes_like(seq=5)
        like["routed_experts"] = torch.tensor(ids * 15)[: 5 * 3 * 2].view(5, 3, 2).to(like["routed_experts"].dtype)
        rows.append(like)
    return rows


def test_experts_from_the_whole_batch_not_row_0():
    rows = _batch_rows([[0, 1], [2, 3], [7, 4]])
    only_row_0 = MOE.padding(4, eos_token_id=2, like=rows[0])
    assert (only_row_0.dims["experts"], only_row_0.sources["experts"]) == (2, "like")
    for batch in (rows, tq_batch(rows), {"routed_experts": torch.stack([r["routed_experts"] for r in rows])}):
        pad = MOE.padding(4, eos_token_id=2, like=rows[0], batch=batch)
        assert (pad.dims["experts"], pad.sources["experts"]) == (8, "batch")
        assert_spread(pad.fields["routed_experts"], 8)
        assert sorted(set(pad.fields["routed_experts"].flatten().tolist())) == list(range(8))
    assert ids_seen(MOE.plan, rows) == {"experts": 8}
    assert resolve_padding(MOE.plan, 1, like=rows[0], seen={"experts": 8}).sources["experts"] == "batch"


def test_dims_and_a_pinned_schema_still_win_over_the_batch():
    rows = _batch_rows([[0, 1], [7, 4]])
    assert MOE.padding(1, eos_token_id=2, like=rows[0], batch=rows, dims={"experts": 11}).sources["experts"] == "dims"
    pinned = MOE.with_dims({"experts": 12}, sources={"experts": "config: num_experts"})
    assert pinned.padding(1, eos_token_id=2, like=rows[0], batch=rows).sources["experts"] == "config"


def test_a_batch_without_ids_to_read_falls_back_to_like_then_the_default():
    rows = _batch_rows([[0, 5]])
    empty = [{**rows[0], "routed_experts": rows[0]["routed_experts"][:0]}]
    assert ids_seen(MOE.plan, empty) == {}
    assert MOE.padding(1, eos_token_id=2, like=rows[0], batch=empty).sources["experts"] == "like"
    assert ids_seen(ts.load_schema("text").plan, rows) == {}  # nothing spread: nothing read


def test_a_batch_that_is_no_batch_is_a_type_error():
    with pytest.raises(TypeError, match="a batch must be a list of sample mappings or a TensorDict"):
        MOE.padding(1, eos_token_id=2, like=routes_like(), batch=42)
