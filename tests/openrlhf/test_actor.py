"""`trajschema.openrlhf.actor`: OpenRLHF 0.11.2's own ``ActorPPOTrainer.ppo_train`` on the
experiences its own ``train_step`` stored, padded and never padded (``ActorFit`` in
``tests/openrlhf_support.py`` says what stands in for DeepSpeed and the GPU).

The oracle is OpenRLHF's ``ppo_train`` on the real experiences alone: with ``install()``,
the same experiences with padding rows among them log the same figures.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

import trajschema.openrlhf as to
from tests.openrlhf_support import ActorFit, TrainStep, actor_args, args_for, rollout
from trajschema.openrlhf.actor import guarded_batch_info, real_metrics

LENGTHS = [(3, 2), (2, 4), (4, 1), (2, 3)]
REWARDS = [1.0, 0.0, 0.5, 0.25]
#: Kept from the last micro-batch, not averaged (the same in every run here).
LAST = ("actor_lr", "actor_grad_norm")


def _real(openrlhf, monkeypatch) -> list[Any]:
    """The experiences OpenRLHF's own train_step (under ``install()``, so tagged real) sends to
    one actor, before its replay buffer splits them; the drop-in uninstalled again."""
    to.install()
    step = TrainStep(openrlhf, args_for(actors=1), monkeypatch)
    step.run(rollout(openrlhf, LENGTHS, REWARDS))
    to.uninstall()
    for e in step.made:  # the reference model's and vLLM's log-probs, as TrainStep's model actors stand in for theirs
        e.base_action_log_probs = e.action_log_probs * 1.01
        e.rollout_log_probs = e.action_log_probs * torch.linspace(0.4, 1.6, e.action_mask.shape[1])
    return step.made


def _interleaved(real: list[Any]) -> list[Any]:
    padding = to.padding_experiences(real[0], len(real))
    return [e for pair in zip(real, padding, strict=True) for e in pair]


def _same(a: dict[str, float], b: dict[str, float]) -> list[str]:
    keys = (set(a) | set(b)) - set(LAST)
    return sorted(
        k for k in keys if k not in a or k not in b or not math.isclose(a[k], b[k], rel_tol=1e-5, abs_tol=1e-6)
    )


@pytest.mark.parametrize(
    ("kl_loss", "is_level"),
    [(True, "off"), (False, "off"), (True, "token"), (True, "seq")],
    ids=["kl-loss", "kl-reward", "is-token", "is-seq"],
)
def test_the_actors_figures_equal_a_never_padded_fit(openrlhf, monkeypatch, kl_loss, is_level) -> None:
    real = _real(openrlhf, monkeypatch)
    fit = ActorFit(openrlhf, actor_args(kl_loss=kl_loss, is_level=is_level), micro=2, window=1)
    never, _ = fit.run(real, monkeypatch)
    to.install()
    padded, _ = fit.run(_interleaved(real), monkeypatch)
    assert never.pop("is_padding") == 0.0  # OpenRLHF logs the tag as a figure
    assert _same(never, padded) == []
    assert "is_padding" not in padded and not any(math.isnan(v) for v in padded.values())
    assert ("is_filter_ratio" in padded) == (is_level != "off")


def test_openrlhf_alone_counts_padding_rows_as_samples(openrlhf, monkeypatch) -> None:
    real = _real(openrlhf, monkeypatch)
    fit = ActorFit(openrlhf, actor_args(), micro=2, window=1)
    never, _ = fit.run(real, monkeypatch)
    alone, _ = fit.run(_interleaved(real), monkeypatch)
    assert {"response_length", "total_length", "reward", "is_padding"} <= set(_same(never, alone)), _same(never, alone)
    assert alone["is_padding"] == 0.5  # the padding share, logged as if a figure of the samples
    assert alone["response_length"] == pytest.approx(never["response_length"] / 2)


def test_an_all_padding_window_trains_nothing_instead_of_a_nan_gradient(openrlhf, monkeypatch) -> None:
    real = _real(openrlhf, monkeypatch)
    padded = [*real, *to.padding_experiences(real[0], 2)]  # the last micro-batch (and window): padding only
    fit = ActorFit(openrlhf, actor_args(), micro=2, window=1)
    with pytest.raises(ZeroDivisionError):  # OpenRLHF's metric merge: no action token on any rank
        fit.run(padded, monkeypatch)
    assert any(g.isnan().any() for g in fit.engine.gradients[-1].values())  # 0/0: a NaN gradient, stepped
    to.install()
    with pytest.raises(ZeroDivisionError):  # still: ppo_train's own merge, after the step (documented)
        fit.run(padded, monkeypatch)
    assert all(bool((g == 0).all()) for g in fit.engine.gradients[-1].values())  # normalised by 1: no update


def test_a_micro_batch_without_action_tokens_logs_zeros_where_a_masked_mean_is_nan() -> None:
    status = {
        "metrics": {
            "ppo_kl": torch.tensor(float("nan")),
            "reward": torch.tensor([0.0, 0.0]),
            "is_padding": torch.tensor([1.0, 1.0]),
        },
        "weights": {"ppo_kl": "token", "reward": "sample", "is_padding": "sample"},
        "num_samples": 2.0,
        "num_action_tokens": 0.0,
    }
    out = real_metrics(status, [True, True])
    assert out["metrics"]["ppo_kl"].item() == 0.0 and out["num_samples"] == 0.0
    assert "is_padding" not in out["metrics"] and "is_padding" not in out["weights"]
    assert out["metrics"]["reward"].tolist() == [0.0]  # a micro-batch of no real row weighs 0


def test_a_window_of_no_token_is_normalised_by_one() -> None:
    info = {"batch_num_tokens": torch.tensor(0.0), "global_batch_size": 0, "dp_size": 1}
    guarded = guarded_batch_info(info)
    assert guarded["batch_num_tokens"].item() == 1.0 and guarded["global_batch_size"] == 1
    assert info["batch_num_tokens"].item() == 0.0  # the caller's dict is not changed
    assert guarded_batch_info(None) is None


@pytest.mark.parametrize("loss_agg_mode", ["token-mean", "seq-mean-token-mean"])
def test_one_optimizer_step_over_padded_micro_batches_has_the_never_padded_gradient(
    openrlhf, monkeypatch, loss_agg_mode
) -> None:
    real = _real(openrlhf, monkeypatch)
    args = actor_args(loss_agg_mode=loss_agg_mode)
    _, never = ActorFit(openrlhf, args, micro=2, window=2).run(real, monkeypatch)
    to.install()
    _, padded = ActorFit(openrlhf, args, micro=2, window=4).run(_interleaved(real), monkeypatch)
    [want], [got] = never.gradients, padded.gradients
    assert want.keys() == got.keys()
    for name, grad in want.items():
        torch.testing.assert_close(got[name], grad, rtol=1e-4, atol=1e-7, msg=name)
