"""`trajschema.skyrl.install()` against SkyRL 0.3.0's own code as the oracle.

SkyRL's ``skyrl.train.trainer`` takes seconds to import: it is imported once, by the
module-scoped ``skyrl`` fixture. ``RayPPOTrainer.compute_advantages_and_returns`` is a
method of a trainer that needs Ray, a tokenizer, models and a config to build; it reads
only ``self.cfg`` and ``self.all_metrics``, so it runs here on ``object.__new__(RayPPOTrainer)``
with just those two, and SkyRL's own estimators (``ppo_utils``) and ``AlgorithmConfig``.
``stage_chunks`` runs with Ray's object store replaced by the identity (Ray is not what is
tested there); the worker's micro-batch loop is SkyRL's ``reduce_metrics`` over what
``_forward_backward_micro`` returns, with the model step replaced (no model on CPU).
"""

from __future__ import annotations

import copy
import functools
import inspect
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import trajschema as ts
import trajschema.skyrl as sk
from tests.skyrl_support import TRAINING_BATCH, import_skyrl, routes, skyrl_batch, tokens
from trajschema.skyrl.patch import parameters

ESTIMATORS = ["grpo", "rloo", "reinforce++", "maxrl"]
SCORES = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.5, 1.0]


@pytest.fixture(scope="module")
def skyrl() -> SimpleNamespace:
    import_skyrl(TRAINING_BATCH)  # the 3.11 shim runs before anything imports skyrl.backends
    mods = {
        "tb": TRAINING_BATCH,
        "trainer": "skyrl.train.trainer",
        "dispatch": "skyrl.backends.skyrl_train.distributed.dispatch",
        "wu": "skyrl.backends.skyrl_train.workers.worker_utils",
        "worker": "skyrl.backends.skyrl_train.workers.worker",
        "config": "skyrl.train.config",
    }
    return SimpleNamespace(**{k: import_skyrl(v) for k, v in mods.items()})


@pytest.fixture
def installed(skyrl):
    sk.install()
    yield skyrl
    sk.uninstall()


def rollout(n: int = 10, *, moe: bool = False) -> Any:
    """``n`` samples in groups of 2, with varied lengths and 0/1 rewards, as SkyRL builds them."""
    p = [2 + (i * 3) % 5 for i in range(n)]
    r = [1 + (i * 2) % 4 for i in range(n)]
    batch = skyrl_batch(
        [tokens(x) for x in p],
        [tokens(x, 50) for x in r],
        rewards=[[0.0] * (x - 1) + [SCORES[i % len(SCORES)]] for i, x in enumerate(r)],
        logprobs=[[-0.5] * x for x in r],
        experts=[routes(a + b, 2, 2, 8, seed=i) for i, (a, b) in enumerate(zip(p, r))] if moe else None,
        uids=[f"q{i // 2}" for i in range(n)],
    )
    batch["values"] = None
    batch.metadata["avg_response_length"] = sum(r) / n
    return batch


def trainer(skyrl, estimator: str) -> Any:
    """A ``RayPPOTrainer`` with only what ``compute_advantages_and_returns`` reads."""
    t = object.__new__(skyrl.trainer.RayPPOTrainer)
    algorithm = skyrl.config.AlgorithmConfig(advantage_estimator=estimator)
    t.cfg = SimpleNamespace(
        generator=SimpleNamespace(step_wise_trajectories=False), trainer=SimpleNamespace(algorithm=algorithm)
    )
    t.all_metrics = {}
    return t


def move_padding_to(batch: Any, order: list[int]) -> Any:
    """``batch``'s rows in ``order`` (padding anywhere), per-row metadata too."""
    index = torch.tensor(order)
    out = type(batch)({k: None if v is None else v[index] for k, v in batch.items()})
    out.metadata = {
        k: [v[i] for i in order] if k in ("uids", "is_padding", "is_last_step") else v
        for k, v in batch.metadata.items()
    }
    return out


# -- the pins ----------------------------------------------------------------------------


def test_every_signature_install_replaces_is_the_one_pinned(skyrl):
    # Fails loudly when SkyRL changes one of the functions install() replaces.
    for label, want in sk.SKYRL_SIGNATURES.items():
        module, _, qual = label.partition(":")
        owner: Any = __import__(module, fromlist=["_"])
        *path, name = qual.split(".")
        for part in path:
            owner = getattr(owner, part)
        assert parameters(vars(owner)[name]) == want, label
    assert str(inspect.signature(skyrl.tb.pad_training_input_batch).parameters["pad_size"]) == "pad_size: int"


def test_install_and_uninstall_put_back_the_very_same_objects(skyrl):
    before = (skyrl.trainer.pad_training_input_batch, vars(skyrl.dispatch.MeshDispatch)["stage_chunks"])
    methods = vars(skyrl.trainer.RayPPOTrainer)["compute_advantages_and_returns"]
    assert not sk.installed()
    sk.install()
    sk.install()  # re-installing starts from SkyRL's own
    try:
        assert sk.installed()
        assert skyrl.trainer.pad_training_input_batch is not before[0]
        assert skyrl.tb.pad_training_input_batch is not before[0]
    finally:
        assert sk.uninstall()
    assert not sk.uninstall() and not sk.installed()
    assert (skyrl.trainer.pad_training_input_batch, vars(skyrl.dispatch.MeshDispatch)["stage_chunks"]) == before
    assert vars(skyrl.trainer.RayPPOTrainer)["compute_advantages_and_returns"] is methods


def test_another_version_or_signature_or_binding_patches_nothing(skyrl, monkeypatch):
    import skyrl as package

    monkeypatch.setattr(package, "__version__", "0.3.1")
    with pytest.raises(RuntimeError, match=r"supports SkyRL 0\.3\.0; this is SkyRL 0\.3\.1, so nothing was patched"):
        sk.install()
    monkeypatch.undo()
    monkeypatch.setattr(skyrl.trainer.RayPPOTrainer, "compute_advantages_and_returns", lambda self, data, extra=1: data)
    with pytest.raises(RuntimeError, match=r"has the signature \(self, data, extra=1\), not the \(self, data\)"):
        sk.install()
    monkeypatch.undo()
    monkeypatch.setattr(skyrl.dispatch, "pad_training_input_batch", lambda unpadded_batch, pad_size: None)
    with pytest.raises(RuntimeError, match="something else replaced it"):
        sk.install()
    assert not sk.installed()
    with pytest.raises(ValueError, match="eos_token_id must be"):
        sk.install(eos_token_id=-1)
    with pytest.raises(TypeError, match="schema must be"):
        sk.install(schema="text")  # type: ignore[arg-type]


# -- advantages and the trainer's metrics --------------------------------------------------

METRICS = ("avg_final_rewards", "avg_response_length", "avg_advantages", "avg_advantages_abs")


def run(skyrl, estimator: str, batch: Any) -> tuple[Any, dict[str, Any]]:
    t = trainer(skyrl, estimator)
    out = skyrl.trainer.RayPPOTrainer.compute_advantages_and_returns(t, batch)
    return out, t.all_metrics


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_skyrl_alone_lets_padding_into_advantages(skyrl, estimator):
    _, clean = run(skyrl, estimator, rollout())
    padded, metrics = run(skyrl, estimator, skyrl.tb.pad_training_input_batch(rollout(), 2))
    pad_adv = padded["advantages"][10:]
    if estimator in ("grpo", "maxrl"):  # row 0's clones are a group of one with row 0's reward: not zero
        assert pad_adv.abs().sum() > 0
    if estimator == "reinforce++":  # whitened over the batch, padding included: the real rows move
        assert abs(metrics["loss/avg_raw_advantages"] - clean["loss/avg_raw_advantages"]) > 0.01


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_under_install_real_rows_are_bit_identical_and_padding_is_zero_wherever_it_sits(installed, estimator):
    skyrl = installed
    never, clean = run(skyrl, estimator, rollout())
    padded = skyrl.trainer.pad_training_input_batch(rollout(), 2)  # the trainer's binding: ours now
    assert padded.metadata["is_padding"] == [False] * 10 + [True] * 2
    order = [0, 10, 1, 2, 3, 4, 11, 5, 6, 7, 8, 9]  # padding in the middle
    out, metrics = run(skyrl, estimator, move_padding_to(padded, order))
    real = [i for i, o in enumerate(order) if o < 10]
    for key in ("advantages", "returns"):
        assert torch.equal(out[key][real], never[key]), key
        assert torch.equal(out[key][[1, 6]], torch.zeros_like(out[key][[1, 6]])), key
    for key in METRICS:
        assert out.metadata["metrics"][key] == never.metadata["metrics"][key], key
    assert clean["padding/samples"] == 0.0
    for key, value in clean.items():
        if not key.startswith("padding/"):
            assert metrics[key] == value, key
    tokens_ = float(padded["attention_mask"][10:].sum())
    assert {k: metrics[k] for k in ("padding/samples", "padding/tokens", "padding/share")} == {
        "padding/samples": 2.0,
        "padding/tokens": tokens_,
        "padding/share": 2 / 12,
    }


def test_convert_to_training_input_hands_the_tokenizers_ids_to_the_padding(installed):
    skyrl = installed
    seen = {}

    def spy(self, generator_output, uids):
        seen.update(sk.pad.token_ids.get() or {})
        return generator_output

    original = skyrl.trainer.RayPPOTrainer.convert_to_training_input
    wrapped = sk.patch._convert_for(spy)
    t = object.__new__(skyrl.trainer.RayPPOTrainer)
    t.tokenizer = SimpleNamespace(eos_token_id=151645, pad_token_id=151643)
    assert wrapped(t, "out", ["u"]) == "out" and seen == {"eos_token_id": 151645, "pad_token_id": 151643}
    assert original.__name__ == "convert_to_training_input" and sk.pad.token_ids.get() is None


# -- stage_chunks -------------------------------------------------------------------------


def stage(skyrl, monkeypatch, data: Any) -> list[list[Any]]:
    monkeypatch.setattr(skyrl.dispatch, "ray", SimpleNamespace(put=lambda x: x))  # the object store: identity
    return skyrl.dispatch.MeshDispatch.stage_chunks(4, data, [(0, 5), (5, 10)])


def with_advantages(batch: Any) -> Any:
    batch["advantages"] = torch.randn(batch["rewards"].shape)
    batch["returns"] = batch["advantages"].clone()
    batch.metadata["response_length"] = batch["response_mask"].shape[1]
    return batch


def test_skyrl_alone_stages_slices_whose_uids_are_the_whole_batchs(skyrl, monkeypatch):
    chunks = stage(skyrl, monkeypatch, with_advantages(rollout(moe=True)))
    last = chunks[0][-1]
    assert len(last) == 2 and len(last.metadata["uids"]) == 10 + 3  # the whole batch's uids + pad0..2
    assert last["advantages"][1].abs().sum() > 0  # row 0's advantages on a padding row


def test_under_install_each_chunk_carries_its_own_rows_and_zero_padding(installed, monkeypatch):
    data = with_advantages(rollout(moe=True))
    chunks = stage(installed, monkeypatch, data)
    assert [len(c) for mini in chunks for c in mini] == [2] * 8
    rows = [c for mini in chunks for c in mini]
    for chunk in rows:
        assert len(chunk.metadata["uids"]) == len(chunk.metadata["is_padding"]) == 2
    first = rows[:4]
    flags = [f for c in first for f in c.metadata["is_padding"]]
    assert flags == [False] * 5 + [True] * 3
    assert [u for c in first for u in c.metadata["uids"]][:5] == data.metadata["uids"][:5]
    pad = first[-1]
    assert not pad["advantages"][1].any() and not pad["loss_mask"][1].any() and not pad["response_mask"][1].any()
    ts.load_schema("moe_routed").validate_batch(pad, layout=sk.sliced_layout())


# -- the worker: padding micro-batch and its metrics -------------------------------------


def iterator(skyrl, data: Any, padding: int) -> Any:
    it = skyrl.wu.TokenBasedBatchIterator(data, max_tokens_per_microbatch=20)
    it._num_padding_microbatches = padding  # what the DP all-reduce would give (no process group on CPU)
    return it


def test_sft_trainers_tail_batch_pads_under_install_without_row_0(installed):
    sft = import_skyrl("skyrl.train.sft_trainer")
    examples = [
        {"input_ids": tokens(n, 7), "attention_mask": [1] * n, "num_actions": 2, "loss_mask": [1, 1]} for n in (4, 6, 3)
    ]
    collator = functools.partial(sft.collate_sft_batch, tokenizer=SimpleNamespace(pad_token_id=0))
    batch = sft.collate_sft_examples(
        examples, lambda ex, batch_size: collator(ex), batch_size=4, pad_to_batch_size=True
    )
    assert len(batch) == 4 and batch.metadata["is_padding"] == [False, False, False, True]
    assert not batch["loss_mask"][3].any() and batch["attention_mask"][3].tolist() == [0] * 5 + [1]
    assert not torch.equal(batch["sequences"][3], batch["sequences"][0])


def test_the_padding_micro_batch_is_a_schema_padding_row(installed):
    data = with_advantages(rollout(moe=True))
    ours = list(iterator(installed, data, 1))[-1]
    assert ours.metadata["is_padding_batch"] is True and ours.metadata["is_padding"] == [True]
    assert ours["sequences"].shape == (1, data["sequences"].shape[1])
    assert ours["response_mask"].shape == (1, data.metadata["response_length"])
    for key in ("loss_mask", "response_mask", "advantages", "rewards"):
        assert not ours[key].any(), key
    routed = ours["rollout_expert_indices"]
    assert (routed[..., 0] != routed[..., 1]).all()
    ts.load_schema("moe_routed").validate_batch(ours, layout=sk.sliced_layout())


def test_skyrls_padding_micro_batch_has_a_response_mask_of_ones_and_every_token_on_expert_0(skyrl):
    data = with_advantages(rollout(moe=True))
    theirs = list(iterator(skyrl, data, 1))[-1]
    assert theirs["response_mask"].all() and not theirs["rollout_expert_indices"].any()


def fake_micro(self, experience, microbatch_weight, loss_fn=None, loss_fn_config=None):
    """The model step's metrics, from the micro-batch (no model on CPU): a loss-masked mean and a max."""
    mask = experience.loss_mask.float()
    logp = experience.rollout_logprobs
    mean = float((logp * mask).sum() / mask.sum()) if mask.sum() > 0 else 0.0
    return {"policy_entropy": mean, "policy_loss": float((logp * mask).sum()), "ratio_max": float(mask.sum())}


def micro_metrics(skyrl, data: Any, padding: int) -> dict[str, float]:
    worker = object.__new__(skyrl.worker.PolicyWorkerBase)
    metrics: dict[str, list[float]] = {}
    for mb in iterator(skyrl, data, padding):
        exp = skyrl.wu.BaseBatchIterator.batch_to_experience(mb)
        for k, v in worker._forward_backward_micro(exp, 1.0).items():
            metrics.setdefault(k, []).append(v)
    return skyrl.wu.reduce_metrics(metrics, sum_loss_metrics=True)


def test_micro_batch_metrics_equal_the_never_padded_ones_only_under_install(skyrl, monkeypatch):
    monkeypatch.setattr(skyrl.worker.PolicyWorkerBase, "_forward_backward_micro", fake_micro)
    data = with_advantages(rollout())
    clean = micro_metrics(skyrl, data, 0)
    alone = micro_metrics(skyrl, data, 2)
    assert alone["policy_entropy"] != clean["policy_entropy"]  # SkyRL #1863: dragged toward 0
    sk.install()
    try:
        assert micro_metrics(skyrl, copy.deepcopy(data), 2) == clean
    finally:
        sk.uninstall()
