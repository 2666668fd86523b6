"""trajschema.verl.minibatch: the actor's mini-batches and their seq-mean loss scale, with verl 0.9.1 as the oracle.

The step tests drive verl's own trainer methods under ``install()`` (``tests/verl/step.py``) in the order
``PPOTrainer._step_once`` calls them (``_balance_batch``, ``_compute_advantage``, the
actor update, then ``fit``'s ``_compute_metrics``) on a stub trainer, with the in-memory
TransferQueue standing in for the ``transfer_queue`` module (no Ray). The actor update
is what verl's worker does with the batch, without a model: TransferQueue's
``KVBatchMeta.chunk`` gives each data-parallel rank its rows, verl's
``tensordict_utils.make_iterator`` splits them into mini-batches, and verl's
``compute_policy_loss_vanilla`` (``agg_loss`` inside) gives each rank's loss with the
global sizes verl's engine passes.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import trajschema as ts
from tests.verl.step import installed_step, rollout, step_config, stub_trainer, write
from tests.verl_support import verl_module
from trajschema.verl import VerlConfigError
from trajschema.verl.minibatch import (
    actor_mini_batches,
    actor_seq_mean_scales,
    mini_batches,
    seq_mean_loss_scales,
)
from trajschema.verl.patch import SCALE_MIN

#: verl 0.9.1's registered estimators that run on CPU with no critic and no extra config.
CPU_ESTIMATORS = (
    "gpg",
    "grpo",
    "grpo_passk",
    "grpo_vectorized",
    "opo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "rloo",
    "rloo_vectorized",
)


# -- the split, without verl ------------------------------------------------------------------


def _brute_force(rows: int, dp: int, size: int, epochs: int) -> list[list[int]]:
    """Contiguous rank chunks, each cut into consecutive local mini-batches; global j = the j-th of every rank."""
    per_rank, local = rows // dp, size // dp
    chunks = [list(range(r * per_rank, (r + 1) * per_rank)) for r in range(dp)]
    one_epoch = [[i for chunk in chunks for i in chunk[j * local : (j + 1) * local]] for j in range(per_rank // local)]
    return one_epoch * epochs


@pytest.mark.parametrize("dp", [1, 2, 3, 4])
@pytest.mark.parametrize("size_per_rank", [1, 2, 5])
@pytest.mark.parametrize("steps", [1, 3])
@pytest.mark.parametrize("epochs", [1, 2])
def test_mini_batches_in_order_are_contiguous_slices_of_every_rank(dp, size_per_rank, steps, epochs):
    size = dp * size_per_rank
    rows = size * steps
    got = mini_batches(rows, dp_size=dp, mini_batch_size=size, epochs=epochs)
    assert got == _brute_force(rows, dp, size, epochs)
    assert all(sorted(b) == b and len(b) == size for b in got)


#: id -> (keyword arguments, message regex): what verl's workers cannot split, named before anything is read.
SPLIT_ERRORS = {
    "size-not-a-multiple-of-dp": ({"rows": 12, "dp_size": 4, "mini_batch_size": 6}, r"cannot split 12 rows over 4"),
    "rows-not-a-multiple-of-dp": ({"rows": 13, "dp_size": 2, "mini_batch_size": 2}, r"cannot split 13 rows"),
    "rank-rows-not-a-multiple": ({"rows": 12, "dp_size": 2, "mini_batch_size": 8}, r"each rank's 6 rows .* its 4"),
    "dp-zero": ({"rows": 12, "dp_size": 0, "mini_batch_size": 4}, r"^dp_size must be a positive int, found 0$"),
    "size-bool": ({"rows": 12, "dp_size": 1, "mini_batch_size": True}, r"^mini_batch_size must be a positive int"),
    "rows-negative": ({"rows": -4, "dp_size": 1, "mini_batch_size": 4}, r"^rows must be an int >= 0, found -4$"),
    "epochs-zero": ({"rows": 4, "dp_size": 1, "mini_batch_size": 4, "epochs": 0}, r"^epochs must be a positive int"),
    "shuffle-without-verl": ({"rows": 4, "dp_size": 1, "mini_batch_size": 4, "shuffle": True}, r"make_iterator"),
}


@pytest.mark.parametrize(("kwargs", "match"), list(SPLIT_ERRORS.values()), ids=list(SPLIT_ERRORS))
def test_a_batch_verls_workers_cannot_split_is_named(kwargs, match):
    rows = kwargs.pop("rows")
    with pytest.raises(ValueError, match=match):
        mini_batches(rows, **kwargs)


def test_seq_mean_loss_scales_count_real_rows_over_the_global_size():
    real = [True, False, True, True, False, False]
    assert seq_mean_loss_scales(real, [[0, 1, 2], [3, 4, 5]], 3) == [2 / 3, 1 / 3]
    assert seq_mean_loss_scales(real, [[4, 5]], 2) == [0.0]  # a mini-batch of padding alone


def _actor_config(**actor: Any) -> dict[str, Any]:
    return {"actor_rollout_ref": {"rollout": {"n": 4}, "actor": {"ppo_mini_batch_size": 3, **actor}}}


#: id -> (actor keys changed, the dotted key the error names).
ACTOR_CONFIG_ERRORS = {
    "shuffle-a-string": ({"shuffle": "yes"}, "config.actor_rollout_ref.actor.shuffle must be true or false"),
    "shuffle-none": ({"shuffle": None}, "config.actor_rollout_ref.actor.shuffle must be true or false"),
    "seed-none": ({"data_loader_seed": None}, "config.actor_rollout_ref.actor.data_loader_seed must be an int"),
    "seed-a-float": ({"data_loader_seed": 4.0}, "config.actor_rollout_ref.actor.data_loader_seed must be an int"),
    "epochs-zero": ({"ppo_epochs": 0}, "config.actor_rollout_ref.actor.ppo_epochs must be an int >= 1"),
    "no-mini-batch-size": ({"ppo_mini_batch_size": None}, "config.actor_rollout_ref.actor.ppo_mini_batch_size must"),
}


@pytest.mark.parametrize(("actor", "message"), list(ACTOR_CONFIG_ERRORS.values()), ids=list(ACTOR_CONFIG_ERRORS))
def test_a_bad_actor_config_is_a_verl_config_error_naming_the_key(actor, message):
    with pytest.raises(VerlConfigError, match=message.replace(".", r"\.")):
        actor_mini_batches(_actor_config(**actor), 12, 2)
    with pytest.raises(VerlConfigError, match=message.replace(".", r"\.")):
        actor_seq_mean_scales(_actor_config(**actor), [True] * 12, 2)


def test_scales_are_one_outside_seq_mean_modes_and_nan_where_verl_cannot_split():
    real = [True] * 7 + [False] * 5
    assert actor_seq_mean_scales(_actor_config(loss_agg_mode="token-mean"), real, 2) == [1.0]
    assert actor_seq_mean_scales(_actor_config(loss_agg_mode="seq-mean-token-sum"), real, 2) == [7 / 12]
    assert actor_seq_mean_scales(_actor_config(), real, 2) == [1.0]  # verl's default is token-mean
    # 12 rows over 5 ranks: verl's worker asserts; the metric says it cannot tell, and does not raise first
    (nan,) = actor_seq_mean_scales(_actor_config(loss_agg_mode="seq-mean-token-sum"), real, 5)
    assert math.isnan(nan)


# -- the split, against verl's own dispatch and worker iterator --------------------------------


@pytest.fixture(scope="module")
def make_iterator():
    return verl_module("verl.utils.tensordict_utils").make_iterator


def _verls_split(rows: int, dp: int, size: int, epochs: int, shuffle: bool, seed: int, make_iterator) -> list:
    """Global mini-batches as verl forms them: TransferQueue's chunk per rank, verl's iterator on each rank."""
    kv_batch_meta = verl_module("transfer_queue").KVBatchMeta
    meta = kv_batch_meta(keys=[str(i) for i in range(rows)], tags=[{}] * rows, partition_id="train")
    per_rank = []
    for rank, chunk in enumerate(meta.chunk(dp)):
        positions = torch.tensor([int(k) for k in chunk.keys])
        data = verl_module("tensordict").TensorDict({"position": positions}, batch_size=[len(positions)])
        it = make_iterator(data, size // dp, epochs, seed=seed + rank, dataloader_kwargs={"shuffle": shuffle})
        per_rank.append([b["position"].tolist() for b in it])
    return [[i for rank in per_rank for i in rank[j]] for j in range(len(per_rank[0]))]


@pytest.mark.verl
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize(
    ("rows", "dp", "size", "epochs", "seed"), [(36, 2, 12, 1, 42), (48, 3, 12, 2, 7), (8, 1, 4, 3, 0)]
)
def test_mini_batches_are_verls(make_iterator, rows, dp, size, epochs, seed, shuffle):
    """Our split equals the one verl's dispatch (chunk per rank) and worker (make_iterator, seed + rank) make."""
    got = mini_batches(
        rows, dp_size=dp, mini_batch_size=size, epochs=epochs, shuffle=shuffle, seed=seed, make_iterator=make_iterator
    )
    assert got == _verls_split(rows, dp, size, epochs, shuffle, seed, make_iterator)


@st.composite
def _balanced_steps(draw) -> tuple[list[bool], int, int]:
    """A padded batch in the order verl's _balance_batch gives it: real rows of drawn lengths, then 128-token padding.

    Returns the real flags in balanced order, dp and the global mini-batch size.
    """
    dp = draw(st.integers(1, 4))
    size = dp * draw(st.integers(1, 6))
    lengths = draw(st.lists(st.integers(2, 400), min_size=1, max_size=60))
    padding = -len(lengths) % size
    seqlens = lengths + [128] * padding
    balancing = verl_module("verl.utils.seqlen_balancing")
    workload = balancing.calculate_workload(torch.tensor(seqlens, dtype=torch.int64))
    partitions = balancing.get_seqlen_balanced_partitions(workload, k_partitions=dp, equal_size=True)
    order = [j for partition in partitions for j in partition]
    return [j < len(lengths) for j in order], dp, size


@pytest.mark.verl
@settings(deadline=None)
@given(step=_balanced_steps())
def test_the_worst_mini_batch_holds_at_least_r_mod_m_real_rows(step):
    """docs/verl.md's bound, over verl's own balancing of random lengths: padding last on every rank, and the
    worst scale (R mod M) / M at least, exactly that when every rank's padding fits in its last mini-batch."""
    real, dp, size = step
    per_rank = len(real) // dp
    for r in range(dp):
        flags = real[r * per_rank : (r + 1) * per_rank]
        assert flags == sorted(flags, reverse=True)  # real rows first, then padding
    worst = min(seq_mean_loss_scales(real, mini_batches(len(real), dp_size=dp, mini_batch_size=size), size))
    remainder = sum(real) % size
    assert worst >= remainder / size
    if all(per_rank == size // dp or real[(r + 1) * per_rank - size // dp - 1] for r in range(dp)):
        assert worst == (remainder or size) / size


# -- verl's trainer step under install() -----------------------------------------------------------


def _never_padded_advantages(tb, tq, config: Any, order: list[str], rows: int) -> list[torch.Tensor]:
    """verl's own _compute_advantage of the real rows alone, in the order the padded step holds them."""
    keys, samples, tags = rollout(rows)
    by_key = {k: (s, t) for k, s, t in zip(keys, samples, tags, strict=True)}
    meta = write(tq, "never-padded", order, [by_key[k][0] for k in order], [by_key[k][1] for k in order])
    stub_trainer(tb, config, 1)._compute_advantage(meta, {})
    got = tq.kv_batch_get(keys=order, partition_id="never-padded", select_fields=["advantages"])
    return list(got["advantages"].unbind())


SEQ_MEAN = ("seq-mean-token-sum", "seq-mean-token-sum-norm", "seq-mean-token-mean")


def _real_rows_bit_identical(tb, tq, config: Any, meta: Any, rows: int) -> None:
    real = [k for k, t in zip(meta.keys, meta.tags, strict=True) if not ts.is_padding(t)]
    got = tq.kv_batch_get(keys=real, partition_id="padded", select_fields=["advantages"])["advantages"].unbind()
    want = _never_padded_advantages(tb, tq, config, real, rows)
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(got, want, strict=True))


def _assert_scales(losses: list[tuple[float, float, int]], mode: str, size: int, reported: float) -> list[float]:
    """Each mini-batch's padded loss is its real rows' own loss times real / size (seq-mean) or 1; the min reported.

    Returns the measured ratios (padded / real rows' own) of the mini-batches that hold a real row."""
    scales = [n_real / size for _, _, n_real in losses]
    ratios = []
    for (padded, alone, n_real), scale in zip(losses, scales, strict=True):
        if n_real == 0:  # padding alone: its loss is 0, or 0 / 0 tokens in token-mean
            assert padded == 0 or (math.isnan(padded) and mode == "token-mean"), losses
            continue
        ratios.append(padded / alone)
        assert math.isclose(ratios[-1], scale if mode in SEQ_MEAN else 1.0, rel_tol=1e-5), (losses, scales)
    assert reported == (min(scales) if mode in SEQ_MEAN else 1.0)
    return ratios


@pytest.mark.verl
@pytest.mark.parametrize("estimator", CPU_ESTIMATORS)
@pytest.mark.parametrize("mode", ["token-mean", "token-sum", *SEQ_MEAN])
def test_each_mini_batchs_loss_is_scaled_as_reported_and_real_rows_are_bit_identical(tb, tq, estimator, mode):
    """25 real rows, actor mini-batch 3 x 4 = 12, dp 2: the issue's run (scale 1/12 in the last mini-batch, mean 0.694).

    Real rows' advantages are bit-identical to a never-padded run's, for every estimator;
    verl's loss of each mini-batch is its real rows' never-padded loss times real / 12 in
    the seq-mean modes (times 1 in the token modes), and the smallest of those is
    padding/seq_mean_loss_scale_min, beside the mean the step reported before.
    """
    config = step_config(estimator, mode)
    meta, metrics, losses = installed_step(tb, tq, config, dp=2, rows=25)
    _real_rows_bit_identical(tb, tq, config, meta, 25)
    ratios = _assert_scales(losses, mode, 12, metrics[SCALE_MIN])
    if mode in SEQ_MEAN:
        assert [n for *_, n in losses] == [12, 12, 1]  # the padding sits in the last mini-batch
        assert math.isclose(metrics[SCALE_MIN], min(ratios), rel_tol=1e-5)
        assert metrics["padding/seq_mean_loss_scale"] == 25 / 36  # the mean over mini-batches, as before
    else:
        assert metrics["padding/seq_mean_loss_scale"] == metrics[SCALE_MIN] == 1.0


#: id -> (actor keys, critic mini-batch size or None, dp, real rows, real rows per actor mini-batch).
SPLITS = {
    "shuffled": ({"shuffle": True}, None, 2, 25, [7, 10, 8]),
    "shuffled-two-epochs-dp3": ({"shuffle": True, "ppo_epochs": 2, "data_loader_seed": 5}, None, 3, 37, None),
    "in-order-dp3": ({}, None, 3, 37, [12, 12, 12, 1]),
    "critic-mini-batch-8": ({}, 2, 2, 25, [12, 12, 1, 0]),
}


@pytest.mark.verl
@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
@pytest.mark.parametrize(("actor", "critic", "dp", "rows", "counts"), list(SPLITS.values()), ids=list(SPLITS))
def test_the_scale_follows_verls_split(tb, tq, mode, actor, critic, dp, rows, counts):
    """verl's own shuffling (seed + rank, every epoch), other dp sizes, and a critic whose mini-batch of 2 x 4
    makes the batch a multiple of 24: the actor's last mini-batch of 12 is then padding alone (scale 0, and
    verl's token-mean loss 0 / 0 tokens = NaN there)."""
    config = step_config("grpo", mode, **actor)
    if critic is not None:
        config.critic.enable, config.critic.ppo_mini_batch_size = True, critic
    meta, metrics, losses = installed_step(tb, tq, config, dp=dp, rows=rows)
    _real_rows_bit_identical(tb, tq, config, meta, rows)
    _assert_scales(losses, mode, 12, metrics[SCALE_MIN])
    if counts is not None:
        assert [n for *_, n in losses] == counts
    if critic is not None and mode == "token-mean":
        assert math.isnan(losses[-1][0]) and metrics[SCALE_MIN] == 1.0  # not a seq-mean mode: not reported


@pytest.mark.verl
@pytest.mark.parametrize(("dp", "rows"), [(1, 25), (2, 25), (3, 37), (4, 13)])
def test_padding_rows_come_last_on_every_rank_after_verls_balancing(tb, tq, dp, rows):
    """What docs/verl.md says fixes the padding's mini-batches: each rank's chunk ends with its padding rows."""
    meta, _, _ = installed_step(tb, tq, step_config("grpo", "token-mean"), dp=dp, rows=rows)
    for chunk in meta.chunk(dp):
        flags = [ts.is_padding(t) for t in chunk.tags]
        assert flags == sorted(flags), flags  # real rows (False) first, then padding (True)


@pytest.mark.verl
def test_verls_metrics_aggregator_keeps_the_worst_over_parameter_sync_steps():
    """With parameter_sync_step > 1 each local step's metrics are reduced by verl: ours by min, as its name says."""
    aggregator = verl_module("verl.trainer.ppo.v1.utils").MetricsAggregator()
    for scale, samples in ((0.5, 30), (1 / 12, 10), (0.75, 20)):
        aggregator.add_step_metrics({SCALE_MIN: scale}, sample_count=samples)
    assert aggregator.get_aggregated_metrics()[SCALE_MIN] == 1 / 12
