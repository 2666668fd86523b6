"""`trajschema.skyrl.trainer` against SkyRL 0.3.0's own ``RayPPOTrainer`` as the oracle.

The loop tests run SkyRL's own ``RayPPOTrainer.train()`` for one step, every step in its
order (generate, ``postprocess_generator_output``, ``convert_to_training_input``,
``fwd_logprobs_values_reward``, ``apply_reward_kl_penalty``, ``compute_advantages_and_returns``,
the removal of ``rewards``, ``uids`` and ``is_last_step``, ``train_critic_and_policy``), on
the in-process cluster of ``tests/skyrl/cluster.py``: SkyRL's dispatch, workers, loss
functions and tiny real models; only Ray, the DP process group, FSDP, CUDA and the inference
engines are replaced (that file says how). The oracle is SkyRL alone on a DP size that needs no
padding; the padded run is the same rollout on twice as many ranks under ``install()``.

The step tests call one ``RayPPOTrainer`` method on ``object.__new__(RayPPOTrainer)`` with
what it reads (``cfg``, ``all_metrics``): SkyRL's own estimators, ``AlgorithmConfig`` and loss
reductions, on a batch padded by ``pad_training_input_batch`` (as the trainer pads it) and
on the same batch never padded.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import trajschema.skyrl as sk
from tests.skyrl.cluster import (
    Cluster,
    FixedGenerator,
    config,
    patch_cluster,
    train_one_step,
    trainer,
)
from tests.skyrl_support import skyrl_batch, tokens
from trajschema.skyrl.trainer import realigned

pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")

ESTIMATORS = ["gae", "grpo", "maxrl", "reinforce++", "rloo"]
REDUCTIONS = ["token_mean", "token_mean_legacy", "sequence_mean", "seq_mean_token_sum_norm", "prompt_mean"]
SCORES = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.5, 1.0]


# -- train(): one step of SkyRL's own loop ------------------------------------------------------


def generator_output(rows: int) -> dict[str, Any]:
    """What SkyRL's generator returns for ``rows`` rollouts: varied lengths, 0/1 rewards."""
    p = [2 + (i * 3) % 5 for i in range(rows)]
    r = [1 + (i * 2) % 4 for i in range(rows)]
    return {
        "prompt_token_ids": [tokens(x) for x in p],
        "response_ids": [tokens(x, 50) for x in r],
        "rewards": [SCORES[i % len(SCORES)] for i in range(rows)],
        "loss_masks": [[1] * x for x in r],
        "rollout_logprobs": [[-5.5 + 0.1 * (j % 3) for j in range(x)] for x in r],
        "stop_reasons": ["stop"] * rows,
    }


#: The 4 prompts of the step's one batch, as SkyRL's dataloader yields them.
PROMPTS = [
    {"prompt": [{"role": "user", "content": "q"}], "env_class": "gsm8k", "env_extras": {}, "uid": f"p{i}"}
    for i in range(4)
]

#: One step of 4 prompts x 5 samples in 2 mini-batches of 10 rows: on 4 ranks ``stage_chunks``
#: pads each to 12; on 2 ranks nothing is padded. A token budget below any two rows keeps one
#: row per micro-batch on both.
LOOPS = {
    "grpo-kl_loss-sample": {"advantage_estimator": "grpo", "use_kl_loss": True, "kl_loss_coef": 0.1},
    "gae-critic-kl_in_reward-normalized-sample": {
        "advantage_estimator": "gae",
        "critic": True,
        "use_kl_loss": False,
        "use_kl_in_reward": True,
        "kl_loss_coef": 0.1,
        "advantage_batch_normalize": True,
    },
    "rloo-kl_loss-entropy-token": {
        "advantage_estimator": "rloo",
        "max_tokens": 5,
        "use_kl_loss": True,
        "kl_loss_coef": 0.1,
        "use_entropy_loss": True,
    },
}

#: Logged figures a DP size changes by itself: timings, throughput per GPU, the token-based schedule.
_PER_DP = ("timing/", "trainer/tokens_per_second_per_gpu", "policy/num_microbatches", "policy/num_padding_microbatches")


def run_loop(skyrl, models, case: str, dp: int, monkeypatch) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """One step of SkyRL's ``train()`` on ``dp`` ranks: what it logged, and the gradients."""
    settings = dict(LOOPS[case])
    cfg = config(skyrl, prompts=4, samples=5, mini_batch=2, **settings)
    cluster = Cluster(skyrl, cfg, models, dp)
    with monkeypatch.context() as m:
        patch_cluster(m, cluster)
        logged = train_one_step(trainer(cluster, FixedGenerator(generator_output(20)), PROMPTS))
    return logged, cluster.gradients


@pytest.mark.parametrize("case", list(LOOPS))
def test_train_runs_a_padded_step_and_logs_what_the_never_padded_step_logs(skyrl, models, monkeypatch, case):
    want, want_grads = run_loop(skyrl, models, case, 2, monkeypatch)
    sk.install()
    try:
        got, got_grads = run_loop(skyrl, models, case, 4, monkeypatch)
    finally:
        sk.uninstall()
    keys = [k for k in want if not k.startswith(_PER_DP)]
    audit = {k.removeprefix("trajschema/"): v for k, v in got.items() if k.startswith("trajschema/")}
    # the step audit (install's default): 2 padding rows in each of the 2 mini-batches, per model trained
    models_trained = 2 if LOOPS[case].get("critic") else 1
    assert audit == {
        "padding_rows": 4.0 * models_trained,
        "padding_tokens": audit["padding_tokens"],
        "padding_loss_tokens": 0.0,
        "padding_advantage_rows": 0.0,
        "padding_expert_load": 0.0,  # no routes
        "seq_mean_scale_min": 1.0,
        "violations": 0.0,
    }
    assert audit["padding_tokens"] > 0
    assert {k for k in got if not k.startswith(_PER_DP) and not k.startswith("trajschema/")} == {
        *keys,
        "padding/samples",
        "padding/tokens",
        "padding/share",
    }
    for key in keys:
        if isinstance(want[key], float):
            assert math.isclose(got[key], want[key], rel_tol=1e-12, abs_tol=1e-15), (key, got[key], want[key])
        else:
            assert got[key] == want[key], key
    assert got["padding/samples"] == 0.0  # non-step-wise: SkyRL trims the batch to the DP size; only mini-batches pad
    for name, steps in want_grads.items():
        assert len(got_grads[name]) == len(steps) == 2, name
        # the policy's, sample-based: the same micro-batches added in the same order, weights
        # doubled exactly; else another order (token-based packing) or a fractional count (critic)
        exact = name == "actor" and "max_tokens" not in LOOPS[case]
        for got_step, want_step in zip(got_grads[name], steps, strict=True):
            for param, grad in want_step.items():
                worst = float((got_step[param] - 2 * grad).abs().max())
                assert worst <= (0.0 if exact else 1e-5) * float((2 * grad).abs().max()), (name, param, worst)


def test_skyrl_alone_logs_other_figures_on_more_ranks(skyrl, models, monkeypatch):
    # The same step on 4 ranks, without install(): the padding rows (row 0's clones) dilute
    # every per-micro-batch mean by 10/12, and the old log-probs of the second mini-batch land
    # on the wrong rows (each mini-batch's outputs include its 2 padding rows).
    want, want_grads = run_loop(skyrl, models, "grpo-kl_loss-sample", 2, monkeypatch)
    got, got_grads = run_loop(skyrl, models, "grpo-kl_loss-sample", 4, monkeypatch)
    for key in ("policy_entropy", "policy_kl", "minibatch_rollout_logprobs_abs_diff_mean"):
        assert math.isclose(got[f"policy/{key}"], want[f"policy/{key}"] * 10 / 12, rel_tol=1e-6), key
    assert want["policy/loss_metrics/clip_ratio"] == 0.0 < got["policy/loss_metrics/clip_ratio"]
    assert got["policy/rollout_train_logprobs_abs_diff_mean"] != want["policy/rollout_train_logprobs_abs_diff_mean"]
    second_got, second_want = got_grads["actor"][1], want_grads["actor"][1]
    worst = max(float((second_got[k] - 2 * g).abs().max() / (2 * g).abs().max()) for k, g in second_want.items())
    assert worst > 1.0  # trained against other rows' old log-probs


# -- the advantage step ---------------------------------------------------------------------------


def rollout(n: int = 10) -> Any:
    """``n`` samples in groups of 2, with varied lengths, 0/1 rewards and critic values."""
    p = [2 + (i * 3) % 5 for i in range(n)]
    r = [1 + (i * 2) % 4 for i in range(n)]
    batch = skyrl_batch(
        [tokens(x) for x in p],
        [tokens(x, 50) for x in r],
        rewards=[[0.0] * (x - 1) + [SCORES[i % len(SCORES)]] for i, x in enumerate(r)],
        logprobs=[[-0.5] * x for x in r],
        uids=[f"q{i // 2}" for i in range(n)],
    )
    g = torch.Generator().manual_seed(n)
    batch["values"] = 0.1 * torch.randn(batch["response_mask"].shape, generator=g) * batch["response_mask"]
    batch.metadata["avg_response_length"] = sum(r) / n
    batch.metadata["response_length"] = batch["response_mask"].shape[1]
    return batch


def step_trainer(skyrl, estimator: str = "grpo", **algorithm: Any) -> Any:
    """A ``RayPPOTrainer`` with only what its advantage, KL and normalization steps read."""
    t = object.__new__(skyrl.trainer.RayPPOTrainer)
    t.cfg = config(skyrl, prompts=5, samples=2, mini_batch=5, advantage_estimator=estimator, **algorithm)
    t.all_metrics = {}
    t.reward_kl_controller = None
    return t


def advantages(skyrl, estimator: str, batch: Any, **algorithm: Any) -> tuple[Any, dict[str, Any]]:
    t = step_trainer(skyrl, estimator, **algorithm)
    out = t.compute_advantages_and_returns(batch)
    return out, t.all_metrics


def move_padding_to(batch: Any, order: list[int]) -> Any:
    """``batch``'s rows in ``order`` (padding anywhere), per-row metadata too."""
    index = torch.tensor(order)
    out = type(batch)({k: None if v is None else v[index] for k, v in batch.items()})
    out.metadata = {
        k: [v[i] for i in order] if k in ("uids", "is_padding", "is_last_step") else v
        for k, v in batch.metadata.items()
    }
    return out


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_skyrl_alone_lets_padding_into_advantages(skyrl, estimator):
    _, clean = advantages(skyrl, estimator, rollout())
    padded, metrics = advantages(skyrl, estimator, skyrl.tb.pad_training_input_batch(rollout(), 2))
    if estimator in ("grpo", "maxrl"):  # row 0's clones are a group of one with row 0's reward: not zero
        assert padded["advantages"][10:].abs().sum() > 0
    if estimator == "reinforce++":  # whitened over the batch, padding included: the real rows move
        assert abs(metrics["loss/avg_raw_advantages"] - clean["loss/avg_raw_advantages"]) > 0.01


METRICS = ("avg_final_rewards", "avg_response_length", "avg_advantages", "avg_advantages_abs")


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_under_install_real_rows_are_bit_identical_and_padding_is_zero_wherever_it_sits(skyrl, estimator):
    never, clean = advantages(skyrl, estimator, rollout())
    sk.install()
    try:
        padded = skyrl.trainer.pad_training_input_batch(rollout(), 2)  # the trainer's binding: ours now
        order = [0, 10, 1, 2, 3, 4, 11, 5, 6, 7, 8, 9]  # padding in the middle
        out, metrics = advantages(skyrl, estimator, move_padding_to(padded, order))
    finally:
        sk.uninstall()
    assert padded.metadata["is_padding"] == [False] * 10 + [True] * 2
    real = [i for i, o in enumerate(order) if o < 10]
    for key in ("advantages", "returns"):
        assert torch.equal(out[key][real], never[key]), key
        assert not out[key][[1, 6]].any(), key
    for key in METRICS:
        assert out.metadata["metrics"][key] == never.metadata["metrics"][key], key
    assert {k: v for k, v in metrics.items() if not k.startswith("padding/")} == clean
    tokens_ = float(padded["attention_mask"][10:].sum())
    assert {k: metrics[k] for k in ("padding/samples", "padding/tokens", "padding/share")} == {
        "padding/samples": 2.0,
        "padding/tokens": tokens_,
        "padding/share": 2 / 12,
    }


# -- advantage_batch_normalize and the loss reductions -----------------------------------------


def normalized(skyrl, estimator: str, reduction: str, normalize: bool, pad: int) -> tuple[Any, Any]:
    """SkyRL's advantage step, then ``_normalize_advantages`` as ``_execute_training_step`` calls it."""
    algorithm = {
        "loss_reduction": reduction,
        "advantage_batch_normalize": normalize,
        "max_seq_len": 16,
    }
    t = step_trainer(skyrl, estimator, **algorithm)
    batch = rollout()
    uids = list(batch.metadata["uids"])
    if pad:
        batch = skyrl.trainer.pad_training_input_batch(batch, pad)
    data = t.compute_advantages_and_returns(batch)
    raw = data["advantages"].clone()
    prompts = skyrl.preprocess.compute_prompt_boundaries(uids)
    return t._normalize_advantages(data, [(0, 6), (6, 10)], prompts), raw


CASES = [(e, r, n) for e in ESTIMATORS for r in REDUCTIONS for n in (True, False)]


@pytest.mark.parametrize(
    ("estimator", "reduction", "normalize"),
    CASES,
    ids=[f"{e}-{r}-{'normalized' if n else 'raw'}" for e, r, n in CASES],
)
def test_normalized_advantages_of_real_rows_are_bit_identical(skyrl, estimator, reduction, normalize):
    never, _ = normalized(skyrl, estimator, reduction, normalize, 0)
    sk.install()
    try:
        padded, _ = normalized(skyrl, estimator, reduction, normalize, 3)
    finally:
        sk.uninstall()
    assert torch.equal(padded["advantages"][:10], never["advantages"])
    assert not padded["advantages"][10:].any()


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_skyrl_alone_normalizes_over_the_padding_rows(skyrl, estimator):
    never, _ = normalized(skyrl, estimator, "token_mean", True, 0)
    padded, _ = normalized(skyrl, estimator, "token_mean", True, 3)
    moved = float((padded["advantages"][:10] - never["advantages"]).abs().max())
    assert moved > 0.05 * float(never["advantages"].abs().max())  # 3 padding rows on 10: by 7.8% to 23%


# -- the KL penalty in the reward ---------------------------------------------------------------


def with_log_probs(batch: Any) -> Any:
    g = torch.Generator().manual_seed(3)
    shape, mask = batch["response_mask"].shape, batch["response_mask"].float()
    batch["action_log_probs"] = (-5.5 + 0.3 * torch.randn(shape, generator=g)) * mask
    batch["base_action_log_probs"] = (-5.5 + 0.5 * torch.randn(shape, generator=g)) * mask
    return batch


def kl_penalty(skyrl, batch: Any) -> tuple[Any, dict[str, Any]]:
    t = step_trainer(skyrl, use_kl_in_reward=True, use_kl_loss=False, kl_loss_coef=0.1)
    out = t.apply_reward_kl_penalty(batch)
    return out, t.all_metrics


def test_the_kl_penalty_sees_real_rows_only_under_install(skyrl):
    never, clean = kl_penalty(skyrl, with_log_probs(rollout()))
    _, diluted = kl_penalty(skyrl, skyrl.tb.pad_training_input_batch(with_log_probs(rollout()), 2))
    assert math.isclose(diluted["loss/avg_kl"], clean["loss/avg_kl"] * 10 / 12, rel_tol=1e-6)
    sk.install()
    try:
        out, metrics = kl_penalty(skyrl, skyrl.trainer.pad_training_input_batch(with_log_probs(rollout()), 2))
    finally:
        sk.uninstall()
    assert torch.equal(out["rewards"][:10], never["rewards"]) and not out["rewards"][10:].any()
    assert metrics == clean
    assert out.metadata["metrics"] == never.metadata["metrics"]


# -- the forward passes' outputs back on their rows --------------------------------------------


@pytest.mark.parametrize(
    ("boundaries", "dp", "rows", "expect"),
    [
        ([(0, 4), (4, 8)], 4, 8, list(range(8))),
        ([(0, 3), (3, 6)], 4, 6, [0, 1, 2, 4, 5, 6]),
        ([(0, 3), (3, 6)], 4, 8, [0, 1, 2, 4, 5, 6, None, None]),
        ([(0, 5)], 2, 6, [0, 1, 2, 3, 4, 5]),
    ],
    ids=["nothing-padded", "each-mini-batch-padded", "trainer-padding-too", "already-on-their-rows"],
)
def test_forward_outputs_go_back_to_their_rows(boundaries, dp, rows, expect):
    staged = sum(e - s + (-(e - s)) % dp for s, e in boundaries)
    out = torch.arange(1, staged + 1, dtype=torch.float32)[:, None].repeat(1, 3)
    got = realigned(out, boundaries, dp, rows)
    assert [int(row[0]) - 1 if row.any() else None for row in got] == expect
    assert (got is out) == (expect == list(range(rows)))


def test_convert_to_training_input_hands_the_tokenizers_ids_to_the_padding(skyrl):
    seen = {}

    def spy(self, generator_output, uids):
        seen.update(sk.pad.token_ids.get() or {})
        return generator_output

    wrapped = sk.trainer.convert_for(spy)
    t = object.__new__(skyrl.trainer.RayPPOTrainer)
    t.tokenizer = SimpleNamespace(eos_token_id=151645, pad_token_id=151643)
    assert wrapped(t, "out", ["u"]) == "out" and seen == {"eos_token_id": 151645, "pad_token_id": 151643}
    assert sk.pad.token_ids.get() is None
