"""`trajschema.skyrl.workers` against SkyRL 0.3.0's own training step as the oracle.

Every run is SkyRL's own ``RayPPOTrainer._execute_training_step("policy", data)``:
``_normalize_advantages``, ``WorkerDispatch.stage_data`` / ``MeshDispatch.stage_chunks``,
``forward_backward_from_staged`` on every DP rank (``PolicyWorkerBase.forward_backward``, its
micro-batch iterators, ``_forward_backward_micro`` with SkyRL's loss functions and a tiny
real Llama in SkyRL's ``HFModelWrapper``), ``reduce_metrics`` and
``all_reduce_metrics``. Only Ray, the DP process group, FSDP and CUDA are replaced, as
``tests/skyrl/cluster.py`` says: the ranks run one after another in this process, the
all-reduce is computed over their records, the gradients are summed over ranks and
micro-batches in one shared model.

The oracle is SkyRL alone on a data-parallel size that needs no padding anywhere
(``MODES[...].never_padded``), with the very same micro-batches of real rows; the padded run
is the same data on a larger DP size (a power of two times it, so that SkyRL's weights scale
exactly), where ``stage_chunks`` adds padding rows and whole ranks hold only padding.
Micro-batches that mix real and padding rows have no never-padded twin on any DP size: they
are checked against SkyRL's own ``_forward_backward_micro`` on their real rows alone,
reduced by SkyRL's ``reduce_metrics`` (`never_padded_micro_batches`).
"""

from __future__ import annotations

import copy
import importlib.util
import math
import sys
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import trajschema as ts
import trajschema.skyrl as sk
from tests.skyrl.cluster import Cluster, config, patch_cluster, trainer
from tests.skyrl_support import routes, skyrl_batch, tokens

# SkyRL's workers autocast to CUDA, which the CPU build disables with a warning per micro-batch
pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")

#: SkyRL 0.3.0's registered policy losses (a test pins the registry to this list).
LOSSES = [
    "cispo",
    "clip_cov",
    "cross_entropy",
    "dppo",
    "dual_clip",
    "gspo",
    "importance_sampling",
    "kl_cov",
    "regular",
    "rollout_is",
    "sapo",
]
REDUCTIONS = ["token_mean", "token_mean_legacy", "sequence_mean", "seq_mean_token_sum_norm", "prompt_mean"]
ESTIMATORS = ["gae", "grpo", "maxrl", "reinforce++", "rloo"]

#: Per micro-batching mode: rows, the padded DP size, the never-padded one, and the micro-batch setting.
MODES = {
    # 12 rows on 8 ranks: 16 staged, 2 ranks all padding; pairs of rows per micro-batch, as on 2 ranks
    "sample": SimpleNamespace(rows=12, dp=8, never_padded=2, micro=2, max_tokens=-1),
    # 10 rows on 4 ranks: 12 staged; a token budget below any two rows: one row per micro-batch
    "token": SimpleNamespace(rows=10, dp=4, never_padded=2, micro=1, max_tokens=5),
}


def rollout(rows: int) -> Any:
    """``rows`` samples in groups of 2 as SkyRL's ``convert_to_training_input`` builds them, one
    with part of its response loss-masked, and log-probs off the model's so that ratios, clip
    ratios and the KL are not trivial."""
    g = torch.Generator().manual_seed(rows)
    p = [2 + (i * 3) % 5 for i in range(rows)]
    r = [1 + (i * 2) % 4 for i in range(rows)]
    scores = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.5, 1.0, 0.0, 1.0]
    batch = skyrl_batch(
        [tokens(x) for x in p],
        [tokens(x, 50) for x in r],
        loss_masks=[[0] + [1] * (x - 1) if i == 3 and x > 1 else [1] * x for i, x in enumerate(r)],
        rewards=[[0.0] * (x - 1) + [scores[i % len(scores)]] for i, x in enumerate(r)],
        logprobs=[(-5.5 + 0.3 * torch.randn(x, generator=g)).tolist() for x in r],
        uids=[f"q{i // 2}" for i in range(rows)],
    )
    shape = batch["response_mask"].shape
    mask = batch["response_mask"].float()
    batch["action_log_probs"] = (-5.5 + 0.3 * torch.randn(shape, generator=g)) * mask
    batch["base_action_log_probs"] = (-5.5 + 0.5 * torch.randn(shape, generator=g)) * mask
    batch["values"] = 0.1 * torch.randn(shape, generator=g) * mask
    batch.metadata.update(
        response_length=shape[1], avg_response_length=sum(r) / rows, is_padding=[False] * rows, pad_size=0
    )
    return batch


def after_advantages(skyrl, estimator: str, rows: int, cfg: Any) -> Any:
    """The batch ``train()`` hands ``train_critic_and_policy``: SkyRL's advantages, then its pops."""
    t = object.__new__(skyrl.trainer.RayPPOTrainer)
    t.cfg, t.all_metrics = cfg, {}
    data = t.compute_advantages_and_returns(rollout(rows))
    data.pop("rewards")
    uids = data.metadata.pop("uids")
    data.metadata.update(
        policy_mini_batch_boundaries=[(0, rows)],
        policy_prompt_boundaries=skyrl.preprocess.compute_prompt_boundaries(uids),
        global_step=1,
    )
    return data


def case_config(skyrl, loss: str, reduction: str, mode: str, estimator: str, normalize: bool) -> Any:
    m = MODES[mode]
    return config(
        skyrl,
        prompts=m.rows // 2,
        samples=2,
        mini_batch=m.rows // 2,
        micro=m.micro,
        max_tokens=m.max_tokens,
        advantage_estimator=estimator,
        advantage_batch_normalize=normalize,
        policy_loss_type=loss,
        loss_reduction=reduction,
        max_seq_len=16,
        use_kl_loss=True,
        kl_loss_coef=0.1,
        use_entropy_loss=True,
        entropy_loss_coef=0.01,
    )


def training_step(skyrl, models, cfg: Any, dp: int, data: Any, monkeypatch) -> tuple[dict[str, float], list[Any]]:
    """SkyRL's ``_execute_training_step("policy", data)`` on ``dp`` in-process ranks: its
    reduced metrics and the gradients of each optimizer step."""
    cluster = Cluster(skyrl, cfg, models, dp)
    with monkeypatch.context() as m:
        patch_cluster(m, cluster)
        torch.manual_seed(0)  # clip_cov draws a permutation per micro-batch
        metrics = trainer(cluster, None, [])._execute_training_step("policy", copy.deepcopy(data))
    return metrics, cluster.gradients["actor"]


#: Token-based batching's schedule per rank (micro-batches run, padding ones among them): they
#: describe the ranks' work, which another DP size changes, and stay SkyRL's.
SCHEDULE = ("num_microbatches", "num_padding_microbatches")


def assert_same_metrics(got: dict[str, float], want: dict[str, float]) -> None:
    """The same keys; each value within 1e-12 (relative) of the never-padded one: SkyRL's
    all-reduce averages rank means, so a run on more ranks sums in another order (and NCCL
    would round to float32 anyway). No NaN or infinity where the never-padded run has a number."""
    assert sorted(got) == sorted(want)
    for key, value in want.items():
        if key in SCHEDULE:
            continue
        assert math.isfinite(got[key]) or not math.isfinite(value), (key, got[key], value)
        assert math.isclose(got[key], value, rel_tol=1e-12, abs_tol=1e-15), (key, got[key], value)


def assert_same_gradients(got: list[Any], want: list[Any], factor: float, *, exact: bool) -> None:
    """The gradients once scaled by the DP sizes' ratio (a power of two: FSDP divides the sum
    over ranks by the DP size, and every weight of the padded run is ``factor`` times the
    never-padded run's). ``exact``: bit-identical, where both runs add the same micro-batches'
    gradients in the same order; else within 1e-5 of the tensor's largest entry, float32
    rounding (token-based packing orders a rank's micro-batches by length, so another DP size
    adds them in another order; a padding row counted in a weight moves them by percents)."""
    assert len(got) == len(want)
    for step_got, step_want in zip(got, want, strict=True):
        assert sorted(step_got) == sorted(step_want)
        for name, grad in step_want.items():
            if exact:
                assert torch.equal(step_got[name], grad * factor), name
            else:
                worst = float((step_got[name] - grad * factor).abs().max())
                assert worst <= 1e-5 * float((grad * factor).abs().max()), (name, worst)


CASES = [(loss, reduction, mode) for mode in MODES for loss in LOSSES for reduction in REDUCTIONS]


@pytest.mark.parametrize(("loss", "reduction", "mode"), CASES, ids=[f"{m}-{lo}-{r}" for lo, r, m in CASES])
def test_padded_step_equals_the_never_padded_one(skyrl, models, monkeypatch, loss, reduction, mode):
    i = CASES.index((loss, reduction, mode))
    estimator, normalize = ESTIMATORS[i % len(ESTIMATORS)], (i // len(ESTIMATORS)) % 2 == 0
    m = MODES[mode]
    cfg = case_config(skyrl, loss, reduction, mode, estimator, normalize)
    data = after_advantages(skyrl, estimator, m.rows, cfg)
    want, want_grads = training_step(skyrl, models, cfg, m.never_padded, data, monkeypatch)
    sk.install()
    try:
        got, got_grads = training_step(skyrl, models, cfg, m.dp, data, monkeypatch)
    finally:
        sk.uninstall()
    assert_same_metrics(got, want)
    assert_same_gradients(got_grads, want_grads, m.dp / m.never_padded, exact=mode == "sample")


@pytest.mark.parametrize(("mode", "loss"), [(m, lo) for m in MODES for lo in ("regular", "importance_sampling")])
def test_skyrl_alone_dilutes_the_means_and_the_kl_and_entropy_gradients(skyrl, models, monkeypatch, mode, loss):
    m = MODES[mode]
    cfg = case_config(skyrl, loss, "token_mean", mode, "grpo", False)
    data = after_advantages(skyrl, "grpo", m.rows, cfg)
    want, want_grads = training_step(skyrl, models, cfg, m.never_padded, data, monkeypatch)
    got, got_grads = training_step(skyrl, models, cfg, m.dp, data, monkeypatch)
    staged = m.rows + (-m.rows) % m.dp
    assert math.isclose(got["policy_entropy"], want["policy_entropy"] * m.rows / staged, rel_tol=1e-6)
    if loss == "importance_sampling":  # 0/0 on a micro-batch of padding rows
        assert math.isnan(got["loss_metrics/importance_ratio"]) and math.isfinite(want["loss_metrics/importance_ratio"])
    factor = m.dp / m.never_padded
    worst = max(
        float((got_grads[0][k] - factor * g).abs().max() / (factor * g).abs().max()) for k, g in want_grads[0].items()
    )
    assert worst > 0.05  # the KL and entropy terms weighted by len(micro) / len(chunk), padding included


# -- micro-batches with padding rows, and padding micro-batches -----------------------------------

#: Per mode, a layout where micro-batches mix real and padding rows and hold only padding: 10
#: rows on 4 ranks (12 staged). Pairs: rank 3 runs [row 9, padding] and [padding]. A 16-token
#: budget: rank 3 packs [padding, row 9] and [padding]; rank 0 packs one micro-batch and gets a
#: padding micro-batch to run as many as the others.
MIXED = {
    "sample": SimpleNamespace(rows=10, dp=4, micro=2, max_tokens=-1),
    "token": SimpleNamespace(rows=10, dp=4, micro=1, max_tokens=16),
}
MIXED_LOSSES = ["regular", "importance_sampling", "cross_entropy", "clip_cov"]
MIXED_CASES = [(mode, loss) for mode in MIXED for loss in MIXED_LOSSES]


def never_padded_micro_batches(skyrl, models, cfg, data, original, monkeypatch) -> tuple[dict[str, float], Any]:
    """SkyRL's own ``_forward_backward_micro`` (``original``) on the real rows of each micro-batch
    SkyRL's iterators make of the staged chunks, weighted ``len(real rows) / (real rows / dp)``
    (SkyRL's ``len(micro) / len(chunk)`` with the padding taken out), its metrics reduced by
    SkyRL's ``reduce_metrics`` over those micro-batches, as ranks of equal micro-batch counts
    would average them; and the gradients summed over them in the padded run's order."""
    m = MIXED["token" if cfg.trainer.max_tokens_per_microbatch > 0 else "sample"]
    cluster = Cluster(skyrl, cfg, models, m.dp)
    worker = cluster.worker("policy", 0)
    pooled: dict[str, list[float]] = {}
    with monkeypatch.context() as mp:
        patch_cluster(mp, cluster)
        normalized = trainer(cluster, None, [])._normalize_advantages(
            copy.deepcopy(data),
            data.metadata["policy_mini_batch_boundaries"],
            data.metadata["policy_prompt_boundaries"],
        )
        sk.install()
        try:
            chunks = skyrl.dispatch.MeshDispatch.stage_chunks(m.dp, normalized, [(0, m.rows)])[0]
        finally:
            sk.uninstall()
        cluster.chunks = chunks
        torch.manual_seed(0)
        for chunk in chunks:
            it = skyrl.wu.get_microbatch_iterator(chunk, m.micro, m.max_tokens)
            groups = (
                it._microbatches
                if m.max_tokens > 0
                else [range(i, min(i + m.micro, len(chunk))) for i in range(0, len(chunk), m.micro)]
            )
            for group in groups:
                real = [i for i in group if not chunk.metadata["is_padding"][i]]
                if not real:
                    continue
                micro = skyrl.wu.TokenBasedBatchIterator._create_microbatch_from_indices(it, real)
                experience = skyrl.wu.BaseBatchIterator.batch_to_experience(micro)
                metrics = original(worker, experience, m.dp * len(real) / m.rows)
                metrics.pop("loss_fn_outputs", None)
                for key, value in metrics.items():
                    pooled.setdefault(key, []).append(value)
    reduced = skyrl.wu.reduce_metrics(pooled, sum_loss_metrics=True)
    reduced = skyrl.wu.reduce_metrics({k: [v] for k, v in reduced.items()})
    skyrl.trainer.finalize_minibatch_rollout_logprob_diff_std(reduced)
    model = models.policy.model
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return reduced, grads


def mixed_config(skyrl, mode: str, loss: str) -> Any:
    m = MIXED[mode]
    return config(
        skyrl,
        prompts=m.rows // 2,
        samples=2,
        mini_batch=m.rows // 2,
        micro=m.micro,
        max_tokens=m.max_tokens,
        policy_loss_type=loss,
        use_kl_loss=True,
        kl_loss_coef=0.1,
        use_entropy_loss=True,
        entropy_loss_coef=0.01,
    )


@pytest.mark.parametrize(("mode", "loss"), MIXED_CASES, ids=[f"{m}-{lo}" for m, lo in MIXED_CASES])
def test_micro_batches_with_padding_rows_step_as_their_real_rows_alone(skyrl, models, monkeypatch, mode, loss):
    m = MIXED[mode]
    cfg = mixed_config(skyrl, mode, loss)
    data = after_advantages(skyrl, "grpo", m.rows, cfg)
    original = vars(skyrl.worker.PolicyWorkerBase)["_forward_backward_micro"]
    want, want_grads = never_padded_micro_batches(skyrl, models, cfg, data, original, monkeypatch)
    alone, _ = training_step(skyrl, models, cfg, m.dp, data, monkeypatch)
    sk.install()
    try:
        got, got_grads = training_step(skyrl, models, cfg, m.dp, data, monkeypatch)
    finally:
        sk.uninstall()
    assert_same_metrics({k: v for k, v in got.items() if k not in SCHEDULE}, want)
    assert_same_gradients(got_grads, [want_grads], 1.0, exact=True)
    if loss == "importance_sampling":  # SkyRL alone: 0/0 on a micro-batch of padding rows
        assert math.isnan(alone["loss_metrics/importance_ratio"]) and math.isfinite(
            want["loss_metrics/importance_ratio"]
        )


# -- stage_chunks ------------------------------------------------------------------------------


def routed(rows: int = 10) -> Any:
    """``rows`` routed (MoE) samples with advantages, as the trainer holds them before step 6's pops."""
    p = [2 + (i * 3) % 5 for i in range(rows)]
    r = [1 + (i * 2) % 4 for i in range(rows)]
    batch = skyrl_batch(
        [tokens(x) for x in p],
        [tokens(x, 50) for x in r],
        logprobs=[[-0.5] * x for x in r],
        experts=[routes(a + b, 2, 2, 8, seed=i) for i, (a, b) in enumerate(zip(p, r, strict=True))],
        uids=[f"q{i // 2}" for i in range(rows)],
    )
    batch["advantages"] = torch.randn(batch["rewards"].shape, generator=torch.Generator().manual_seed(rows))
    batch["returns"] = batch["advantages"].clone()
    batch.metadata["response_length"] = batch["response_mask"].shape[1]
    return batch


def without_uids(batch: Any) -> Any:
    """``batch`` after ``train()``'s step 6: ``rewards``, ``uids`` and ``is_last_step`` removed."""
    batch.pop("rewards")
    batch.metadata.pop("uids")
    batch.metadata.pop("is_last_step", None)
    return batch


def stage(skyrl, monkeypatch, data: Any, dp: int = 4) -> list[list[Any]]:
    monkeypatch.setattr(skyrl.dispatch, "ray", SimpleNamespace(put=lambda x: x))  # the object store: identity
    return skyrl.dispatch.MeshDispatch.stage_chunks(dp, data, [(0, 5), (5, 10)])


def test_skyrl_alone_stages_slices_whose_uids_are_the_whole_batchs(skyrl, monkeypatch):
    chunks = stage(skyrl, monkeypatch, routed())
    last = chunks[0][-1]
    assert len(last) == 2 and len(last.metadata["uids"]) == 10 + 3  # the whole batch's uids + pad0..2
    assert last["advantages"][1].abs().sum() > 0  # row 0's advantages on a padding row


@pytest.mark.parametrize("uids", [True, False], ids=["before-the-advantages", "after-train-removed-the-uids"])
def test_under_install_each_chunk_carries_its_own_rows_and_zero_padding(skyrl, monkeypatch, uids):
    data = routed() if uids else without_uids(routed())
    sk.install()
    try:
        chunks = stage(skyrl, monkeypatch, data)
    finally:
        sk.uninstall()
    rows = [c for mini in chunks for c in mini]
    assert [len(c) for c in rows] == [2] * 8
    assert all(len(c.metadata["is_padding"]) == 2 for c in rows)
    assert all(("uids" in c.metadata) == uids for c in rows)
    first = rows[:4]
    assert [f for c in first for f in c.metadata["is_padding"]] == [False] * 5 + [True] * 3
    if uids:
        assert [u for c in first for u in c.metadata["uids"]][:5] == data.metadata["uids"][:5]
    pad = first[-1]
    assert not pad["advantages"][1].any() and not pad["loss_mask"][1].any() and not pad["response_mask"][1].any()
    ts.load_schema("moe_routed").validate_batch(pad, layout=sk.pad.staged_layout(pad.metadata))
    stage_ = pad.metadata[sk.workers.STAGING]
    assert stage_["is_padding"] == [[False, False], [False, False], [False, True], [True, True]]
    assert stage_["tokens"] == [[int(c["attention_mask"][i].sum()) for i in range(2)] for c in first]


def test_skyrls_own_padding_adds_no_uids_to_a_batch_without_them(skyrl):
    # the oracle for the case above: SkyRL's pad_training_input_batch extends uids only if there are any
    padded = skyrl.tb.pad_training_input_batch(without_uids(routed()), 2)
    assert "uids" not in padded.metadata and padded.metadata["pad_size"] == 2


def test_a_forward_passs_column_selection_is_padded_with_its_batchs_padding_rows(skyrl, monkeypatch):
    # fwd_logprobs_values_reward stages training_input.select(["sequences", "attention_mask",
    # "rollout_expert_indices"], ["response_length"]): no masks, no uids, no schema reads it alone
    data = routed()
    keys = ["sequences", "attention_mask", "rollout_expert_indices"]
    sk.install()
    try:
        whole = stage(skyrl, monkeypatch, data)
        with pytest.raises(ts.SchemaError):
            stage(skyrl, monkeypatch, data.select(keys, ["response_length"]))
        token = sk.workers.forward_batch.set(data)
        try:
            chosen = stage(skyrl, monkeypatch, data.select(keys, ["response_length"]))
        finally:
            sk.workers.forward_batch.reset(token)
    finally:
        sk.uninstall()
    for mini_whole, mini_chosen in zip(whole, chosen, strict=True):
        for a, b in zip(mini_whole, mini_chosen, strict=True):
            assert sorted(b) == sorted(keys) and b.metadata["is_padding"] == a.metadata["is_padding"]
            assert all(torch.equal(a[k], b[k]) for k in keys)


# -- the micro-batch iterators -----------------------------------------------------------------


def iterator(skyrl, data: Any, padding: int) -> Any:
    it = skyrl.wu.TokenBasedBatchIterator(data, max_tokens_per_microbatch=20)
    it._num_padding_microbatches = padding  # what the DP all-reduce would give (no process group on CPU)
    return it


def test_the_padding_micro_batch_is_a_schema_padding_row(skyrl):
    data = routed()
    sk.install()
    try:
        ours = list(iterator(skyrl, data, 1))[-1]
    finally:
        sk.uninstall()
    assert ours.metadata["is_padding_batch"] is True and ours.metadata["is_padding"] == [True]
    assert ours["sequences"].shape == (1, data["sequences"].shape[1])
    assert ours["response_mask"].shape == (1, data.metadata["response_length"])
    for key in ("loss_mask", "response_mask", "advantages", "rewards"):
        assert not ours[key].any(), key
    routed_ = ours["rollout_expert_indices"]
    assert (routed_[..., 0] != routed_[..., 1]).all()
    ts.load_schema("moe_routed").validate_batch(ours, layout=sk.sliced_layout())


def test_skyrls_padding_micro_batch_has_a_response_mask_of_ones_and_every_token_on_expert_0(skyrl):
    theirs = list(iterator(skyrl, routed(), 1))[-1]
    assert theirs["response_mask"].all() and not theirs["rollout_expert_indices"].any()


STAGE = {"is_padding": [[False, False, False], [False, True, True]], "tokens": [[3, 8, 4], [7, 9, 9]]}


@pytest.mark.parametrize(
    ("stage", "sample_batch_size", "max_tokens", "expect"),
    [
        (STAGE, 1, 0, 4),
        (STAGE, 2, 0, 3),
        (STAGE, 3, 0, 2),
        (STAGE, 0, 16, 2),  # rank 0: [8, 4, 3] in one; rank 1: [padding 9, 7] and [padding 9]
        (STAGE, 0, 5, 4),  # one row per micro-batch
        ({"is_padding": [[False] * 3] * 2, "tokens": [[3, 8, 4], [7, 9, 9]]}, 2, 0, 4),
    ],
    ids=["sample-1", "sample-2", "sample-3", "token-16", "token-5", "nothing-padded"],
)
def test_real_micro_batches_are_counted_as_skyrls_iterators_split(skyrl, stage, sample_batch_size, max_tokens, expect):
    got = sk.workers.real_microbatches(stage, sample_batch_size=sample_batch_size, max_tokens=max_tokens)
    assert got == expect


@pytest.mark.parametrize(
    ("key", "summed", "expect"),
    [
        ("policy_loss", True, "sum"),
        ("final_loss", True, "sum"),
        ("loss", True, "sum"),
        ("mtp_loss", True, "mean"),
        ("critic_loss", False, "mean"),
        ("policy_entropy", True, "mean"),
        ("minibatch_rollout_logprobs_abs_diff_max", True, "max"),
        ("loss_metrics/is_ratio_min", True, "min"),
    ],
    ids=lambda v: str(v),
)
def test_metrics_reduce_as_skyrls_reduce_metrics_does(skyrl, key, summed, expect):
    assert sk.workers.reduction(key, summed=summed) == expect
    values = [1.0, 3.0]
    by_skyrl = skyrl.wu.reduce_metrics({key: values}, sum_loss_metrics=summed)[key]
    assert by_skyrl == {"sum": 4.0, "mean": 2.0, "max": 3.0, "min": 1.0}[expect]


@pytest.mark.parametrize(
    ("real", "expect"),
    [
        ((0, 2), {"policy_loss": 0.5, "policy_entropy": 3.0, "x_max": 2.0, "x_min": -1.0, "values_clipfrac": None}),
        (
            (),
            {"policy_loss": 0.0, "policy_entropy": 0.0, "x_max": -math.inf, "x_min": math.inf, "values_clipfrac": None},
        ),
    ],
    ids=["real-rows", "padding-only"],
)
def test_a_micro_batch_reports_scaled_means_and_neutral_figures_without_real_rows(skyrl, real, expect):
    plan = sk.workers.MicroPlan(real, 3, 0.5, 1.5)
    metrics = {"policy_loss": 0.5, "policy_entropy": 2.0, "x_max": 2.0, "x_min": -1.0, "values_clipfrac": None}
    metrics["loss_fn_outputs"] = [{"logprobs": [1.0]}, {"logprobs": [2.0]}] if real else [{"logprobs": []}] * 3
    got = plan.reported(metrics, summed=True)
    assert {k: v for k, v in got.items() if k != "loss_fn_outputs"} == expect
    want_outputs = [{"logprobs": [1.0]}, {"logprobs": []}, {"logprobs": [2.0]}] if real else [{"logprobs": []}] * 3
    assert got["loss_fn_outputs"] == want_outputs


def test_skyrls_model_wrapper_runs_here_without_flash_attn_and_leaves_no_stub(skyrl):
    # tests/skyrl_shim.py imports it with a flash_attn.bert_padding stub; nothing else may see the stub
    if importlib.util.find_spec("flash_attn") is not None:
        pytest.skip("flash-attn is installed: the wrapper imports it for real")
    assert "flash_attn" not in sys.modules and "flash_attn.bert_padding" not in sys.modules
    with pytest.raises(NotImplementedError, match="flash-attn is not installed"):
        skyrl.wrapper.unpad_input(torch.zeros(1, 2, 1), attention_mask=torch.ones(1, 2))
