"""The step audit (`trajschema.runtime.audit`): each figure 0 on inert padding and nonzero when
its fault is injected, the even-share bound against a plain count, strict mode, bad input."""

from __future__ import annotations

import math
import pickle
from collections import Counter

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from trajschema.padding import spread_ids
from trajschema.runtime import PaddingAuditError, audit_mode, audit_step, combine_audits, expert_count

REAL, PAD = 3, 2
PADDING = [False] * REAL + [True] * PAD


def inert_batch(experts: int = 8, layers: int = 2, topk: int = 2, seq: int = 6) -> dict[str, torch.Tensor]:
    """3 real rows then 2 padding rows as a drop-in makes them: masks 0, advantages 0, routes spread."""
    n = REAL + PAD
    attention = torch.ones(n, seq, dtype=torch.int64)
    attention[REAL:, :2] = 0  # padding rows: 4 left-padded tokens each
    loss = torch.ones(n, 3, dtype=torch.int64)
    loss[REAL:] = 0
    advantages = torch.randn(n, 3)
    advantages[REAL:] = 0
    routes = torch.zeros(n, seq, layers, topk, dtype=torch.uint8)
    routes[:REAL] = 7  # real rows may route anywhere: the audit reads padding rows only
    spread = spread_ids((PAD, seq - 2, layers, topk), experts, torch.uint8)
    routes[REAL:, 2:] = spread
    return {"attention_mask": attention, "loss_mask": loss, "advantages": advantages, "routes": routes}


def audit(batch, **kw):
    args = {
        "token_mask": batch["attention_mask"],
        "loss_masks": {"loss_mask": batch["loss_mask"]},
        "advantages": {"advantages": batch["advantages"]},
        "routes": batch["routes"],
        "experts": 8,
        **kw,
    }
    return audit_step(PADDING, **args)


def test_inert_padding_gives_the_counts_and_zeros():
    found = audit(inert_batch())
    assert found.faults == ()
    f = found.figures
    assert (f["trajschema/padding_rows"], f["trajschema/padding_tokens"]) == (2.0, 8.0)
    assert (
        f["trajschema/padding_loss_tokens"] == f["trajschema/padding_advantage_rows"] == f["trajschema/violations"] == 0
    )
    assert f["trajschema/padding_expert_load"] == 1.0  # 8 tokens x 2 slots over 8 experts: 2 each, the bound
    assert f["trajschema/seq_mean_scale_min"] == 1.0
    found.raise_if_broken()


def _loss_on_padding(b):
    b["loss_mask"][REAL, 0] = 1


def _advantage_on_padding(b):
    b["advantages"][-1, 2] = 0.5


def _all_on_expert_0(b):
    b["routes"][REAL:] = 0


def _id_past_the_experts(b):
    b["routes"][-1, -1, 0, 0] = 9


@pytest.mark.parametrize(
    ("inject", "figure", "value"),
    [
        (_loss_on_padding, "padding_loss_tokens", 1.0),
        (_advantage_on_padding, "padding_advantage_rows", 1.0),
        (_all_on_expert_0, "padding_expert_load", 8.0),  # 16 slots on one expert: 8x its share of 2
        (_id_past_the_experts, "padding_expert_load", math.inf),
    ],
    ids=["loss-mask", "advantage", "hot-expert", "no-such-expert"],
)
def test_each_figure_turns_nonzero_when_its_fault_is_injected(inject, figure, value):
    batch = inert_batch()
    inject(batch)
    found = audit(batch)
    assert found.figures[f"trajschema/{figure}"] == value
    assert len(found.faults) == 1 and found.faults[0].startswith(f"trajschema/{figure} = ")
    with pytest.raises(PaddingAuditError, match=f"trajschema/{figure}") as err:
        found.raise_if_broken()
    back = pickle.loads(pickle.dumps(err.value))
    assert back.faults == err.value.faults and back.figures == err.value.figures


def test_violations_are_counted_by_code_and_the_worst_seq_mean_scale_reported():
    v = [
        ts.Violation(0, "loss_mask", "dtype", "int64", "float32", "m"),
        ts.Violation(1, "loss_mask", "dtype", "int64", "float32", "m"),
        ts.Violation(None, "uid", "missing", "present", "absent", "m"),
    ]
    found = audit(inert_batch(), violations=v, seq_mean_scales=[1.0, 0.25, 0.5])
    f = found.figures
    assert (f["trajschema/violations"], f["trajschema/violations/dtype"], f["trajschema/violations/missing"]) == (
        3,
        2,
        1,
    )
    assert f["trajschema/seq_mean_scale_min"] == 0.25
    assert found.faults == ("trajschema/violations = 3 (schema violations in the step's batch: dtype 2, missing 1)",)


def test_no_padding_and_an_empty_batch_give_zeros():
    batch = inert_batch()
    none = audit_step([False] * 5, token_mask=batch["attention_mask"], routes=batch["routes"], experts=8)
    assert none.faults == () and none.figures["trajschema/padding_rows"] == 0
    empty = audit_step(torch.zeros(0, dtype=torch.bool), token_mask=torch.zeros(0, 4))
    assert empty.figures["trajschema/padding_tokens"] == 0 and empty.faults == ()


def test_uint16_routes_and_a_tensor_of_tags_are_read():
    batch = inert_batch()
    batch["routes"] = batch["routes"].to(torch.uint16)
    found = audit_step(torch.tensor(PADDING), token_mask=batch["attention_mask"], routes=batch["routes"], experts=8)
    assert found.figures["trajschema/padding_expert_load"] == 1.0


@pytest.mark.parametrize(("given_", "mode"), [(True, "report"), (False, "off"), ("strict", "strict")])
def test_audit_modes(given_, mode):
    assert audit_mode(given_) == mode


@pytest.mark.parametrize("bad", ["yes", 1, None, "Strict", 0.0])
def test_a_bad_audit_mode_is_a_value_error_naming_it(bad):
    with pytest.raises(ValueError, match=r"audit must be True, False or 'strict', found"):
        audit_mode(bad)


@given(
    pad=st.integers(1, 6),
    seq=st.integers(1, 7),
    layers=st.integers(1, 3),
    experts=st.integers(1, 12),
    data=st.data(),
)
def test_expert_load_against_a_plain_count(pad, seq, layers, experts, data):
    """Property: the load is the largest per-layer count of one id over the padding tokens, over
    ceil(tokens * topk / experts), counted here by plain Python loops."""
    topk = data.draw(st.integers(1, experts), label="topk")
    routes = torch.tensor(
        data.draw(
            st.lists(
                st.integers(0, experts - 1), min_size=pad * seq * layers * topk, max_size=pad * seq * layers * topk
            )
        )
    ).view(pad, seq, layers, topk)
    mask = torch.tensor(data.draw(st.lists(st.booleans(), min_size=pad * seq, max_size=pad * seq))).view(pad, seq)
    found = audit_step([True] * pad, token_mask=mask, routes=routes, experts=experts)
    tokens = [(r, t) for r in range(pad) for t in range(seq) if mask[r, t]]
    if not tokens:
        assert found.figures["trajschema/padding_expert_load"] == 0
        return
    worst = max(
        max(Counter(x for r, t in tokens for x in routes[r, t, layer].tolist()).values()) for layer in range(layers)
    )
    assert found.figures["trajschema/padding_expert_load"] == worst / math.ceil(len(tokens) * topk / experts)


def test_combined_audits_add_counts_keep_the_worst_load_and_the_smallest_scale():
    batch = inert_batch()
    clean = audit(batch, seq_mean_scales=[0.5])
    hot = inert_batch()
    _all_on_expert_0(hot)
    _loss_on_padding(hot)
    broken = audit(hot, violations=[ts.Violation(0, "uid", "missing", "present", "absent", "m")])
    both = combine_audits([clean, broken])
    f = both.figures
    assert (f["trajschema/padding_rows"], f["trajschema/padding_tokens"]) == (4.0, 16.0)
    assert (f["trajschema/padding_loss_tokens"], f["trajschema/padding_expert_load"]) == (1.0, 8.0)
    assert (f["trajschema/seq_mean_scale_min"], f["trajschema/violations/missing"]) == (0.5, 1.0)
    assert [x.split(" = ")[0] for x in both.faults] == [
        "trajschema/padding_loss_tokens",
        "trajschema/violations",
        "trajschema/padding_expert_load",
    ]
    assert "missing 1" in both.faults[1]
    assert combine_audits([clean]).figures == clean.figures and combine_audits([clean]).faults == ()
    assert combine_audits([]).figures["trajschema/padding_rows"] == 0


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int16, torch.int64, torch.uint16], ids=str)
def test_expert_count_is_the_pinned_size_else_the_largest_id_in_any_dtype(dtype):
    routes = torch.tensor([[[3, 9]], [[0, 5]]]).to(dtype)
    moe = ts.load_schema("moe_routed")
    assert expert_count(None, routes) == expert_count(moe, routes) == 10  # torch has no max for uint16
    assert expert_count(moe.with_dims({"experts": 64}), routes) == 64
    assert expert_count(moe, routes[:0]) is None and expert_count(moe, None) is None
