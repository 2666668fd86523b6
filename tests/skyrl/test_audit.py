"""The SkyRL step audit (`trajschema.skyrl.audit`): inside SkyRL's own ``train()`` step, every
figure 0 on the padding install() makes, and each one nonzero when its fault is injected into
the mini-batch padding; ``audit="strict"`` raises, ``audit=False`` adds nothing; on a MoE batch
the expert load against a plain count.

The step runs on the in-process cluster of ``tests/skyrl/cluster.py`` (SkyRL's own trainer,
dispatch, workers and losses; Ray, the process group, FSDP and the inference engine replaced).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

import tests.skyrl.test_trainer as loop
import trajschema as ts
import trajschema.skyrl as sk
from tests.skyrl_support import routes, skyrl_batch, tokens
from trajschema.skyrl import workers
from trajschema.skyrl.audit import skyrl_step_audit

CASE = "grpo-kl_loss-sample"
pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")  # SkyRL asks for CUDA autocast


def inject(monkeypatch, fault) -> None:
    """Apply ``fault(batch, first padding row)`` to each mini-batch ``stage_chunks`` pads for training."""
    pad = workers.pad_training_input_batch

    def faulty(batch, size, **kw):
        out = pad(batch, size, **kw)
        if out.get("advantages") is not None:  # a training mini-batch, not a forward pass's selection
            fault(out, len(out) - size)
        return out

    monkeypatch.setattr(workers, "pad_training_input_batch", faulty)


def audited_step(skyrl, models, monkeypatch, fault=None, **install) -> dict[str, Any]:
    """One padded ``train()`` step under ``install(**install)``, ``fault`` applied to each padded mini-batch."""
    if fault is not None:
        inject(monkeypatch, fault)
    sk.install(**install)
    try:
        logged, _ = loop.run_loop(skyrl, models, CASE, 4, monkeypatch)
    finally:
        sk.uninstall()
    return {k.removeprefix("trajschema/"): v for k, v in logged.items() if k.startswith("trajschema/")}


def _loss_on_padding(batch, first):
    batch["loss_mask"][first, -1] = 1


def _advantage_on_padding(batch, first):
    batch["advantages"][first, -1] = 0.5


def _nan_logprob(batch, first):
    batch["rollout_logprobs"][first, -1] = math.nan  # in the padded region, which must be 0


@pytest.mark.parametrize(
    ("fault", "figure"),
    [
        (_loss_on_padding, "padding_loss_tokens"),
        (_advantage_on_padding, "padding_advantage_rows"),
        (_nan_logprob, "violations"),
    ],
    ids=["loss-mask", "advantage", "schema-violation"],
)
def test_each_figure_turns_nonzero_when_its_fault_is_injected_and_strict_raises(
    skyrl, models, monkeypatch, fault, figure
):
    clean = audited_step(skyrl, models, monkeypatch)
    assert clean["padding_rows"] == 4 and clean[figure] == 0
    found = audited_step(skyrl, models, monkeypatch, fault)
    assert found[figure] == 2  # one injected row in each of the 2 padded mini-batches
    with pytest.raises(ts.PaddingAuditError, match=f"trajschema/{figure}"):
        audited_step(skyrl, models, monkeypatch, fault, audit="strict")


def test_audit_false_adds_nothing_and_a_bad_value_installs_nothing(skyrl, models, monkeypatch):
    assert audited_step(skyrl, models, monkeypatch, audit=False) == {}
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="audit must be True, False or 'strict'"):
            sk.install(audit=bad)
        assert not sk.installed()


def moe_padded(experts: int, pad: int) -> Any:
    p, r = [3, 5, 2], [4, 2, 3]
    batch = skyrl_batch(
        [tokens(x) for x in p],
        [tokens(x, 50) for x in r],
        experts=[routes(a + b, 2, 2, experts, seed=i) for i, (a, b) in enumerate(zip(p, r, strict=True))],
    )
    return sk.pad_training_input_batch(batch, pad)


def test_the_expert_load_of_moe_padding_is_within_its_share_and_a_hot_expert_shows():
    padded = moe_padded(8, 5)
    real = [not x for x in padded.metadata["is_padding"]]
    found = skyrl_step_audit(padded, real)
    tokens_ = int(padded["attention_mask"][3:].sum())
    share = math.ceil(tokens_ * 2 / 8)
    counts = torch.bincount(
        padded["rollout_expert_indices"][3:][padded["attention_mask"][3:].bool()][:, 0].reshape(-1).long()
    )
    assert found.figures["trajschema/padding_expert_load"] == int(counts.max()) / share == 1.0
    assert found.faults == ()
    padded["rollout_expert_indices"][3:] = torch.tensor([0, 1], dtype=padded["rollout_expert_indices"].dtype)
    hot = skyrl_step_audit(padded, real)
    assert hot.figures["trajschema/padding_expert_load"] == tokens_ / share == 35 / 9  # docs/skyrl.md
    assert any(f.startswith("trajschema/padding_expert_load") for f in hot.faults)


@pytest.mark.parametrize("experts", [384, 512])
def test_a_schema_pinned_to_a_384_or_512_expert_config_pads_end_to_end(experts):
    """Kimi K2's 384 routed experts (DeepSeek-V3's architecture), 512 (Qwen3-MoE's): install()'s schema
    pinned from the config pads a SkyRL batch with routes spread over every expert, and the step
    audit reads it clean."""
    from tests.load.test_config import large_moe

    schema = ts.schema_for_config(large_moe(experts))
    layers, topk = schema.dims["layers"].size, schema.dims["topk"].size
    p, r = [40, 30], [8, 12]
    experts_of = [routes(a + b, layers, topk, experts, seed=i).to(torch.int16) for i, (a, b) in enumerate(zip(p, r))]
    batch = skyrl_batch([tokens(x) for x in p], [tokens(x, 50) for x in r], experts=experts_of)
    sk.install(schema=schema)
    try:
        out = sk.pad_training_input_batch(batch, 6)
        found = skyrl_step_audit(out, [True, True] + [False] * 6)
    finally:
        sk.uninstall()
    ids = out["rollout_expert_indices"][2:][out["attention_mask"][2:].bool()].long()
    assert ids.shape[0] * topk >= experts and sorted(set(ids[:, 0].flatten().tolist())) == list(range(experts))
    assert found.faults == () and found.figures["trajschema/padding_expert_load"] <= 1
