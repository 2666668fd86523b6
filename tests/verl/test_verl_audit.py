"""trajschema.verl.audit: ``install(audit=...)``'s figures in each step of verl 0.9.1's trainer.

Every test drives verl's own trainer methods under ``install()`` in the order its step
calls them (``tests/verl/step.py``: ``_balance_batch``, ``_compute_advantage``, the actor
update, ``_compute_metrics``) with the in-memory TransferQueue. 25 real rows, actor
mini-batch 3 x 4, 2 ranks: 11 padding rows of 127 + 1 tokens. Faults are written into
TransferQueue between two of the step's calls, as a broken padding or estimator would.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch

import trajschema as ts
import trajschema.verl as tv
from tests.verl.step import TIMING_RAW, installed_step, rollout, step_config, stub_trainer, write
from tests.verl_support import verl_module
from trajschema.runtime import PaddingAuditError, audit_step
from trajschema.tq import to_tq_fields
from trajschema.verl.patch import SCALE_MIN

pytestmark = pytest.mark.verl

ROWS, DP = 25, 2
PADDING_ROWS, PADDING_LEN = 11, 128  # 25 rows to a multiple of 12 (x 2 ranks): 36
#: Every figure that must be 0 on inert padding.
MUST_BE_ZERO = ("padding_loss_tokens", "padding_advantage_rows", "violations")
#: A Qwen3-MoE-shaped model config, as little of it as moe_routed reads, and the samples' matching dims.
MOE_CONFIG = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 4,
}
MOE_DIMS = {"layers": 4, "topk": 2, "experts": 8}


def audit_figures(metrics: dict[str, Any]) -> dict[str, float]:
    return {k.removeprefix("trajschema/"): v for k, v in metrics.items() if k.startswith("trajschema/")}


def with_model(config: Any, tmp_path: Path, model: dict[str, Any]) -> Any:
    """``config`` with ``actor_rollout_ref.model.path`` naming a directory that holds ``model`` as its config.json."""
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "config.json").write_text(json.dumps(model))
    config.actor_rollout_ref.model.path = str(tmp_path / "model")
    return config


def moe_step(tb, tq, tmp_path, mode: str = "token-mean", **kw: Any) -> tuple[Any, dict[str, Any], list]:
    """A step of moe_routed samples under a model config that pins 8 experts, top-2, 4 layers."""
    config = with_model(step_config("grpo", mode), tmp_path, MOE_CONFIG)
    return installed_step(tb, tq, config, DP, ROWS, schema="moe_routed", sample_dims=MOE_DIMS, **kw)


# -- inert padding ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize("schema", ["text", "moe_routed"])
def test_inert_padding_gives_the_counts_and_zeros(tb, tq, tmp_path, schema, mode):
    if schema == "moe_routed":
        meta, metrics, _ = moe_step(tb, tq, tmp_path, mode)
    else:
        meta, metrics, _ = installed_step(tb, tq, step_config("grpo", mode), DP, ROWS)
    found = audit_figures(metrics)
    assert {k: found[k] for k in MUST_BE_ZERO} == dict.fromkeys(MUST_BE_ZERO, 0.0)
    assert not [k for k in found if k.startswith("violations/")]
    padding = sum(ts.is_padding(t) for t in meta.tags)
    assert found["padding_rows"] == padding == metrics["padding/samples"] == PADDING_ROWS
    assert found["padding_tokens"] == metrics["padding/tokens"] == PADDING_ROWS * PADDING_LEN
    if schema == "moe_routed":
        assert found["padding_expert_load"] == 1.0  # 1408 tokens x 2 slots split evenly over 8 experts
    else:
        assert found["padding_expert_load"] == 0  # no routes
    assert found["seq_mean_scale_min"] == metrics[SCALE_MIN] == (1 / 12 if mode.startswith("seq-mean") else 1.0)


def test_a_step_without_padding_reads_nothing_and_reports_zero_padding(tb, tq):
    """24 rows are a multiple of 12: no padding, no read of TransferQueue for the audit."""
    reads: list[Any] = []

    def spy(tq, meta):
        real = tq.kv_batch_get
        tq.kv_batch_get = lambda **kw: reads.append(kw) or real(**kw)

    _, metrics, _ = installed_step(tb, tq, step_config("grpo", "token-mean"), DP, 24, after_advantage=spy)
    found = audit_figures(metrics)
    assert found["padding_rows"] == found["padding_tokens"] == found["violations"] == 0
    assert [kw for kw in reads if kw.get("select_fields") is None] == []


@pytest.mark.parametrize("audit", [True, False])
def test_the_audit_reads_the_padding_rows_alone(tb, tq, audit):
    """After the advantages: the one read that takes every field is the audit's, of the padding keys only."""
    reads: list[Any] = []

    def spy(tq, meta):
        real = tq.kv_batch_get
        tq.kv_batch_get = lambda **kw: reads.append(kw) or real(**kw)

    meta, _, _ = installed_step(tb, tq, step_config("grpo", "token-mean"), DP, ROWS, audit=audit, after_advantage=spy)
    padding = [k for k, t in zip(meta.keys, meta.tags, strict=True) if ts.is_padding(t)]
    whole_rows = [kw["keys"] for kw in reads if kw.get("select_fields") is None]
    assert whole_rows == ([padding] if audit else [])


# -- each fault turns its figure nonzero --------------------------------------------------------


def first_padding(meta: Any) -> str:
    return next(k for k, t in zip(meta.keys, meta.tags, strict=True) if ts.is_padding(t))


def overwrite(tq, meta: Any, keys: list[str], name: str, change) -> None:
    """Replace field ``name`` of ``keys`` by ``change(value)`` in TransferQueue."""
    got = tq.kv_batch_get(keys=keys, partition_id=meta.partition_id, select_fields=[name])[name]
    rows = [{name: change(v.clone())} for v in got.unbind()]
    tq.kv_batch_put(keys=keys, partition_id=meta.partition_id, fields=to_tq_fields(rows))


def _loss_mask_on(field: str):
    def inject(tq, meta):
        overwrite(tq, meta, [first_padding(meta)], field, torch.ones_like)

    return inject


def _advantage_on_padding(tq, meta):
    overwrite(tq, meta, [first_padding(meta)], "advantages", lambda a: a + 0.5)


def _all_on_expert_0(tq, meta):
    padding = [k for k, t in zip(meta.keys, meta.tags, strict=True) if ts.is_padding(t)]
    overwrite(tq, meta, padding, "routed_experts", torch.zeros_like)


def _nan_score_on_padding(tq, meta):
    overwrite(tq, meta, [first_padding(meta)], "rm_scores", lambda s: s.fill_(math.nan))


#: 1408 padding tokens x 2 slots on expert 0, over the even share ceil(2816 / 8) of 8 experts.
HOT = PADDING_ROWS * PADDING_LEN * 2 / math.ceil(PADDING_ROWS * PADDING_LEN * 2 / 8)

#: id -> (when to inject: "balance" or "advantage", the fault, {figure: value} it gives).
FAULTS = {
    "response-mask-on-padding": ("balance", _loss_mask_on("response_mask"), {"padding_loss_tokens": 1.0}),
    "loss-mask-on-padding": ("balance", _loss_mask_on("loss_mask"), {"padding_loss_tokens": 1.0}),
    "advantage-on-padding": ("advantage", _advantage_on_padding, {"padding_advantage_rows": 1.0}),
    # each token's top-2 on one expert also breaks the schema's distinct ids
    "routes-all-on-expert-0": (
        "balance",
        _all_on_expert_0,
        {"padding_expert_load": HOT, "violations": PADDING_ROWS, "violations/repeated": PADDING_ROWS},
    ),
    "padding-row-breaks-the-schema": ("balance", _nan_score_on_padding, {"violations": 1.0, "violations/value": 1.0}),
}


@pytest.mark.parametrize(("when", "inject", "expected"), list(FAULTS.values()), ids=list(FAULTS))
def test_each_figure_turns_nonzero_when_its_fault_is_injected_and_strict_raises(
    tb, tq, tmp_path, when, inject, expected
):
    hook = {"after_balance" if when == "balance" else "after_advantage": inject}
    meta, metrics, _ = moe_step(tb, tq, tmp_path, **hook)
    found = audit_figures(metrics)
    for figure, value in expected.items():
        assert found[figure] == value, (figure, found)
    broken = {k for k in (*MUST_BE_ZERO, "padding_expert_load") if k in expected}
    hot = {"padding_expert_load"} if found["padding_expert_load"] > 1 else set()
    assert {k for k in MUST_BE_ZERO if found[k]} | hot == broken
    tq.kv_clear(keys=meta.keys, partition_id=meta.partition_id)  # as verl's fit() does after each step

    strict: dict[str, Any] = {}
    with pytest.raises(PaddingAuditError) as err:
        moe_step(tb, tq, tmp_path, audit="strict", metrics=strict, **hook)
    assert {f.split(" = ")[0] for f in err.value.faults} == {f"trajschema/{k}" for k in broken}
    assert all(f"trajschema/{k}" in str(err.value) for k in broken)
    assert audit_figures(strict) == found == {k.removeprefix("trajschema/"): v for k, v in err.value.figures.items()}


def test_strict_lets_an_inert_step_through(tb, tq, tmp_path):
    _, metrics, _ = moe_step(tb, tq, tmp_path, audit="strict")
    assert audit_figures(metrics)["padding_rows"] == PADDING_ROWS


# -- audit=False and bad values -------------------------------------------------------------------


def test_audit_false_adds_no_figure(tb, tq):
    _, metrics, _ = installed_step(tb, tq, step_config("grpo", "token-mean"), DP, ROWS, audit=False)
    assert audit_figures(metrics) == {}
    assert metrics["padding/samples"] == PADDING_ROWS  # the drop-in's own metrics stay


@pytest.mark.parametrize("bad", ["yes", "Strict", "report", 1, 0, None, 0.0])
def test_a_bad_audit_value_is_a_value_error_and_patches_nothing(tb, bad):
    verl_module("verl")
    names = ("_balance_batch", "_compute_advantage", "_compute_metrics")
    verls = {n: vars(tb.PPOTrainer)[n] for n in names}
    with pytest.raises(ValueError, match=r"^audit must be True, False or 'strict', found "):
        tv.install(audit=bad)
    assert not tv.installed() and {n: vars(tb.PPOTrainer)[n] for n in names} == verls
    tv.install()  # installed: a bad re-install leaves it as it was
    try:
        ours = {n: vars(tb.PPOTrainer)[n] for n in names}
        with pytest.raises(ValueError, match=r"^audit must be"):
            tv.install(audit=bad)
        assert tv.installed() and {n: vars(tb.PPOTrainer)[n] for n in names} == ours
    finally:
        tv.uninstall()


# -- a 384-expert model through the drop-in -------------------------------------------------------


@pytest.mark.parametrize(
    ("experts", "dtype"), [(384, torch.int16), (512, torch.uint16)], ids=["384-int16", "512-uint16"]
)
def test_a_large_moe_model_pads_over_all_its_experts_and_audits_clean(tb, tq, tmp_path, experts, dtype):
    """A DeepSeek-V3-architecture config with Kimi K2's 384 routed experts (and 512, uint16 ids): the padding
    spreads over every expert within the even share, and the audit is clean."""
    model = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "n_routed_experts": experts,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 61,
        "first_k_dense_replace": 1,
    }
    assert ts.schema_for_config(model).dims["experts"].size == experts

    config = with_model(step_config("grpo", "token-mean"), tmp_path, model)
    dims = {"layers": 60, "topk": 8, "experts": experts, "routes_dtype": dtype}
    meta, metrics, _ = installed_step(tb, tq, config, DP, ROWS, schema="moe_routed", sample_dims=dims)
    found = audit_figures(metrics)
    assert found["violations"] == 0 and 0 < found["padding_expert_load"] <= 1
    padding = [k for k, t in zip(meta.keys, meta.tags, strict=True) if ts.is_padding(t)]
    routes = tq.kv_batch_get(keys=padding, partition_id=meta.partition_id, select_fields=["routed_experts"])
    assert routes["routed_experts"].dtype == dtype
    ids = torch.cat(list(routes["routed_experts"].unbind())).to(torch.int64)  # (tokens, 60, 8)
    slots = PADDING_ROWS * PADDING_LEN * 8
    for layer in (0, 59):
        counts = torch.bincount(ids[:, layer].flatten(), minlength=experts)
        assert len(counts) == experts and bool((counts > 0).all()) and int(counts.max()) <= math.ceil(slots / experts)


# -- parameter_sync_step > 1: several padding calls in one step's batch ---------------------------


def test_each_padding_call_of_a_multi_local_step_batch_is_measured_on_its_own(tb, tq, tmp_path):
    """verl's step() with parameter_sync_step 2: two _balance_batch calls, each padding on its own (11 and 10
    rows over 3 experts, top-1), then one _compute_metrics on the combined batch. Each call is within its even
    share; the two together are not (both calls start their numbering at expert 0), so the load is per call."""
    model = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "num_experts": 3,
        "num_experts_per_tok": 1,
        "num_hidden_layers": 2,
    }
    config = with_model(step_config("grpo", "seq-mean-token-mean"), tmp_path, model)
    tv.install(audit="strict")
    t = stub_trainer(tb, config, DP)
    local: list[dict[str, Any]] = []
    metas = []
    for prefix, rows in (("a", 25), ("b", 14)):
        keys, samples, tags = rollout(rows, "moe_routed", layers=2, topk=1, experts=3)
        local.append({})
        meta = t._balance_batch(write(tq, "padded", [prefix + k for k in keys], samples, tags, "moe_routed"), local[-1])
        metas.append(t._compute_advantage(meta, local[-1]))
    combined = type(metas[0])(
        keys=[k for m in metas for k in m.keys], tags=[t for m in metas for t in m.tags], partition_id="padded"
    )
    metrics: dict[str, Any] = {}
    t._compute_metrics(combined, metrics, dict(TIMING_RAW), 1, 0)  # strict: raises if a figure is broken
    found = audit_figures(metrics)
    assert found["padding_rows"] == 11 + 10 and found["violations"] == 0
    assert found["padding_expert_load"] == 1.0
    assert found["seq_mean_scale_min"] == min(m[SCALE_MIN] for m in local) == 1 / 12  # 25 = 12 + 12 + 1
    padding = [k for k, tag in zip(combined.keys, combined.tags, strict=True) if ts.is_padding(tag)]
    got = tq.kv_batch_get(keys=padding, partition_id="padded", select_fields=["routed_experts", "attention_mask"])
    union = audit_step(
        [True] * len(padding),
        token_mask=got["attention_mask"].to_padded_tensor(0),
        routes=got["routed_experts"].to_padded_tensor(0),
        experts=3,
    )
    assert union.figures["trajschema/padding_expert_load"] > 1
