"""verl 0.9.1's rollout-correction metrics under padding, with verl's own code as the oracle.

With ``algorithm.rollout_correction`` set and not in bypass mode (verl's generated
default config sets it so), verl's ``_compute_advantage`` runs
``compute_rollout_correction_and_add_to_batch`` over every row of a batch that has
``rollout_log_probs``: importance weights, rejection sampling (a rewritten
``response_mask``) and the ``rollout_corr/*`` metrics. Several of those metrics are
plain means, minima and maxima over the rows, padding rows included.

The stub trainer of ``test_verl_trainer`` runs verl's real ``_balance_batch`` and
``_compute_advantage`` on a real local TransferQueue, for 10 rollout samples that a
step pads to 12, three times per setting: never padded, padded by verl alone, and
padded under ``trajschema.verl.install()``. Between the two calls a stand-in for the
actor's ``compute_log_prob`` writes ``old_log_probs`` for every row, padding included,
as verl's ``_compute_old_log_prob`` does. The last test gives the padding rows a NaN
log-prob there.
"""

from __future__ import annotations

import math
import zlib
from importlib import resources
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import trajschema as ts
import trajschema.verl as tv

# The stub trainer of test_verl_trainer, its config, rollout and fixtures (see ``oracle``).
from tests.integration.test_verl_trainer import (  # noqa: F401
    _never_left_installed,
    config,
    partitions,
    real_keys,
    rollout,
    same,
    tb,
    trainer,
    write,
)
from tests.verl_support import verl_module
from trajschema.tq import to_tq_fields

pytestmark = [pytest.mark.tq, pytest.mark.verl]

PREFIX = "rollout_corr/"
#: verl's own settings, built in the test from its ``RolloutCorrectionConfig`` (verl is imported lazily).
SETTINGS = ("generated_default", "token_tis", "token_tis_geo_rs", "seq_tis_seq_rs")
#: Settings that write ``rollout_is_weights``, and those that reject (rewrite ``response_mask``).
WEIGHTS = {"token_tis", "token_tis_geo_rs", "seq_tis_seq_rs"}
REJECTS = {"token_tis_geo_rs", "seq_tis_seq_rs"}

#: Means over rows, and minima / maxima / fractions over rows, with no mask of the empty (padding) rows:
#: only these may move under padding. Every other ``rollout_corr/*`` metric is masked per token.
PER_ROW = {
    "training_ppl", "training_log_ppl", "rollout_ppl", "rollout_log_ppl", "ppl_ratio", "chi2_seq",
    "log_ppl_diff", "log_ppl_abs_diff", "log_ppl_diff_max", "log_ppl_diff_min",
    "rollout_is_seq_mean", "rollout_is_seq_std", "rollout_is_seq_max", "rollout_is_seq_min",
    "rollout_is_seq_max_deviation", "rollout_is_seq_fraction_high", "rollout_is_seq_fraction_low",
    "rollout_rs_seq_masked_fraction",
    # sequence-level weights: the padding row's log-ratio sum (0, so weight 1) is in these
    "rollout_is_max", "rollout_is_min", "rollout_is_ratio_fraction_high", "rollout_is_ratio_fraction_low",
}  # fmt: skip
#: Float32 rounding: a per-token mean over the wider padded tensor sums in another order.
ROUNDING = 1e-5
#: What padding must move in this data (each real row has a per-token log-prob below 0):
#: a padding row's masked per-row log-prob mean is 0, so its perplexity is 1, below every real row's,
#: and its per-row mean weight is 0, below every real row's (and below the lower threshold).
MUST_MOVE = {"training_ppl", "training_log_ppl", "rollout_ppl", "rollout_log_ppl"}
MUST_MOVE_WITH_WEIGHTS = {"rollout_is_seq_mean", "rollout_is_seq_min", "rollout_is_seq_fraction_low"}


def setting(name: str) -> Any:
    """``algorithm.rollout_correction`` for ``name``, from verl's own config dataclass and presets."""
    algorithm = verl_module("verl.trainer.config.algorithm")
    omegaconf = pytest.importorskip("omegaconf")
    rc = algorithm.RolloutCorrectionConfig
    if name == "generated_default":  # what verl's trainer runs with unless told otherwise
        path = resources.files("verl") / "trainer" / "config" / "_generated_ppo_trainer.yaml"
        found = omegaconf.OmegaConf.load(str(path)).algorithm.rollout_correction
        assert not found.bypass_mode and found.rollout_is is None, "verl's generated default changed"
        return found
    presets = {
        "token_tis": lambda: rc.decoupled_token_is(threshold=2.0),
        # Token TIS with geometric-mean rejection, bounds wide enough that some rows stay.
        "token_tis_geo_rs": lambda: rc.decoupled_geo_rs_token_tis(is_threshold=2.0, rs_threshold="0.8_1.25"),
        "seq_tis_seq_rs": lambda: rc.decoupled_seq_is_rs(),
    }
    return omegaconf.OmegaConf.structured(presets[name]())


def corr_config(name: str) -> Any:
    cfg = config("grpo")
    cfg.algorithm.rollout_correction = setting(name)
    return cfg


def samples() -> tuple[list[str], list[dict], list[dict]]:
    """10 rollout samples (2 prompts) with the rollout engine's per-token log-probs."""
    keys, found, tags = rollout(prompts=2, seed=0)
    for key, sample in zip(keys, found, strict=True):
        g = torch.Generator().manual_seed(zlib.crc32(f"rollout {key}".encode()))
        sample["rollout_log_probs"] = -torch.rand(sample["responses"].shape[0], generator=g) * 3
    assert len(keys) == 10
    return keys, found, tags


def actor_log_probs(tq, meta, *, padding_value: float | None = None) -> None:
    """Stand-in for the actor's ``compute_log_prob``: ``old_log_probs`` for every row of ``meta``.

    A row's values depend on its key and its ``rollout_log_probs`` only, so a row gets the
    same ones in every run. ``padding_value`` replaces the padding rows' values.
    """
    got = tq.kv_batch_get(keys=meta.keys, partition_id=meta.partition_id, select_fields=["rollout_log_probs"])
    rows = []
    for i, (key, tag) in enumerate(zip(meta.keys, meta.tags, strict=True)):
        rollout_lp = got["rollout_log_probs"][i]
        g = torch.Generator().manual_seed(zlib.crc32(f"actor {key}".encode()))
        old = (rollout_lp + 0.5 * torch.randn(rollout_lp.shape, generator=g)).clamp(max=0.0)
        if padding_value is not None and ts.is_padding(tag):
            old = torch.full_like(old, padding_value)
        rows.append({"old_log_probs": old})
    tq.kv_batch_put(keys=meta.keys, partition_id=meta.partition_id, fields=to_tq_fields(rows))


@pytest.fixture
def oracle(tq_client, tb, partitions):  # noqa: F811 (the fixtures imported from test_verl_trainer)
    """The real TransferQueue, verl's ``trainer_base`` module and a factory of fresh partition ids."""
    return SimpleNamespace(tq=tq_client, tb=tb, new_partition=partitions)


def run(oracle, cfg, meta, *, balance: bool, padding_value: float | None = None) -> tuple[Any, dict[str, Any]]:
    """verl's ``_balance_batch`` (optional), the actor stand-in, then verl's ``_compute_advantage``."""
    t, metrics = trainer(oracle.tb, cfg), {}
    if balance:
        meta = t._balance_batch(meta, metrics)
    actor_log_probs(oracle.tq, meta, padding_value=padding_value)
    meta = t._compute_advantage(meta, metrics)
    return meta, {k: v for k, v in metrics.items() if k.startswith(PREFIX)}


def padded_and_baseline(oracle, name: str, *, installed: bool, padding_value: float | None = None):
    """The padded run (verl alone or under ``install()``) and the never-padded run in its order."""
    keys, found, tags = samples()
    cfg, tq = corr_config(name), oracle.tq
    meta = write(tq, oracle.new_partition(), keys, found, tags)
    if installed:
        tv.install()
    try:
        padded, metrics = run(oracle, cfg, meta, balance=True, padding_value=padding_value)
    finally:
        tv.uninstall()
    assert len(padded.keys) == 12, "the rollout must need padding: 10 samples, a batch multiple of 12"
    by_key = {k: (s, t) for k, s, t in zip(keys, found, tags, strict=True)}
    order = real_keys(padded)
    meta = write(tq, oracle.new_partition(), order, [by_key[k][0] for k in order], [by_key[k][1] for k in order])
    base, base_metrics = run(oracle, cfg, meta, balance=False)
    return padded, metrics, base, base_metrics


def rows(tq, meta, keys: list[str], field: str) -> list[torch.Tensor]:
    got = tq.kv_batch_get(keys=keys, partition_id=meta.partition_id, select_fields=[field])
    return [got[field][i] for i in range(len(keys))]


def moved(metrics: dict[str, Any], base: dict[str, Any], *, rel: float = 0.0) -> set[str]:
    """The metrics (without the prefix) of ``base`` that ``metrics`` lacks or differs in by more than ``rel``."""

    def kept(name: str) -> bool:
        if name not in metrics:
            return False
        a, b = float(metrics[name]), float(base[name])
        return same(a, b) or abs(a - b) <= rel * max(abs(a), abs(b))

    return {k.removeprefix(PREFIX) for k in base if not kept(k)}


def assert_real_rows_bit_identical(tq, padded, base, name: str) -> None:
    order = real_keys(padded)
    fields = ["response_mask", *(["rollout_is_weights"] if name in WEIGHTS else [])]
    for field in fields:
        for key, a, b in zip(order, rows(tq, padded, order, field), rows(tq, base, order, field), strict=True):
            assert a.dtype == b.dtype and torch.equal(a, b), f"{name}: real sample {key}'s {field} changed by padding"


def padding_keys(meta) -> list[str]:
    return [k for k, tag in zip(meta.keys, meta.tags, strict=True) if ts.is_padding(tag)]


@pytest.mark.parametrize("name", SETTINGS)
def test_under_install_every_rollout_corr_metric_equals_the_never_padded_runs(oracle, name):
    padded, metrics, base, base_metrics = padded_and_baseline(oracle, name, installed=True)
    assert len(base_metrics) >= 13, f"{name}: verl reported only {sorted(base_metrics)}"
    assert metrics.keys() == base_metrics.keys()
    assert moved(metrics, base_metrics) == set()
    assert_real_rows_bit_identical(oracle.tq, padded, base, name)
    # The padding rows: still fully masked, and exact zeros for the weights verl wrote.
    pad = padding_keys(padded)
    masks = rows(oracle.tq, padded, pad, "response_mask")
    assert all(m.numel() == 1 and not m.any() for m in masks)
    if name in WEIGHTS:
        for key, w, m in zip(pad, rows(oracle.tq, padded, pad, "rollout_is_weights"), masks, strict=True):
            assert w.shape == m.shape and w.dtype == torch.float32 and not w.any(), f"padding {key}: {w}"


@pytest.mark.parametrize("name", SETTINGS)
def test_verl_alone_averages_the_padding_rows_into_rollout_corr_metrics(oracle, name):
    padded, metrics, base, base_metrics = padded_and_baseline(oracle, name, installed=False)
    must = MUST_MOVE | (MUST_MOVE_WITH_WEIGHTS if name in WEIGHTS else set())
    if name in REJECTS:
        rejected = [not m.all() for m in rows(oracle.tq, base, real_keys(padded), "response_mask")]
        assert any(rejected) and not all(rejected), f"{name}: the data must reject some real rows, not all"
        must |= {"rollout_rs_seq_masked_fraction"}
    # Beyond float32 rounding (the per-token means sum a wider padded tensor in another order).
    shifted = moved(metrics, base_metrics, rel=ROUNDING)
    found = f"{len(moved(metrics, base_metrics))} of {len(base_metrics)} moved, {sorted(shifted)} beyond rounding"
    assert must <= shifted, f"{name}: padding no longer moves {sorted(must - shifted)}; {found} (update docs/verl.md)"
    assert shifted <= PER_ROW, f"{name}: padding moves a per-token metric; {found}"
    # The weights and masks of the real rows are per row: verl alone keeps them.
    assert_real_rows_bit_identical(oracle.tq, padded, base, name)


@pytest.mark.parametrize("installed", [False, True], ids=["verl_alone", "install"])
def test_a_nan_log_prob_on_a_padding_row(oracle, installed):
    """The actor's log-prob of a padding row's one masked token reaches verl's rollout correction."""
    padded, metrics, _, base_metrics = padded_and_baseline(
        oracle, "token_tis", installed=installed, padding_value=float("nan")
    )
    weights = rows(oracle.tq, padded, padding_keys(padded), "rollout_is_weights")
    if installed:
        assert moved(metrics, base_metrics) == set()
        assert all(w.numel() == 1 and not w.any() for w in weights), weights
    else:  # verl's masked sums keep the NaN out of its metrics, but it writes the NaN weights
        assert all(math.isfinite(v) for v in metrics.values()), metrics
        assert all(w.isnan().all() for w in weights), f"verl 0.9.1 no longer writes NaN weights: {weights}"
