"""OpenRLHF 0.11.2's own ``BasePPOTrainer.train_step``, driven on CPU from the rollout to each
actor's replay buffer (``tests/openrlhf_support.py`` says what stands in for GPU and Ray),
with and without ``trajschema.openrlhf.install()``.

The oracle is OpenRLHF itself: the never-padded run of the same rollout (its split, its
``compute_advantages_and_returns`` for every estimator, its ``_compute_rollout_stats``),
and what its replay buffers and ``drop_last`` DataLoaders hold afterwards.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trajschema.openrlhf as to
from tests.openrlhf_support import TrainStep, args_for, async_fit, rollout

LENGTHS = [(3, 2), (2, 4), (4, 1), (2, 2), (3, 3), (5, 2), (1, 3)]
REWARDS = [1.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.25]


def _by_prompt(items: list[Any]) -> dict[str, Any]:
    return {i.prompts[0]: i for i in items if not bool(i.info.get("is_padding", False))}


def _real_prompts(stored: list[list[Any]]) -> list[str]:
    return sorted(i.prompts[0] for a in stored for i in a if not bool(i.info.get("is_padding", False)))


def _step(openrlhf, monkeypatch, n: int, **kw: Any) -> tuple[TrainStep, dict[str, Any]]:
    step = TrainStep(openrlhf, args_for(**kw), monkeypatch)
    status = step.run(rollout(openrlhf, LENGTHS[:n], REWARDS[:n]))
    return step, status


@pytest.mark.parametrize("n", [5, 6, 7])
@pytest.mark.parametrize("dynamic", [False, True], ids=["split", "dynamic-batch"])
def test_every_actor_gets_the_same_count_and_no_real_sample_is_lost(openrlhf, monkeypatch, n, dynamic) -> None:
    to.install()
    step, _ = _step(openrlhf, monkeypatch, n, actors=4, dynamic=dynamic)
    counts = [len(a) for a in step.stored()]
    assert len(set(counts)) == 1 and counts[0] >= 1, counts
    assert _real_prompts(step.stored()) == sorted(f"prompt {i}" for i in range(n))  # each exactly once


@pytest.mark.parametrize(("n", "split"), [(5, [2, 2, 1, 0]), (6, [2, 2, 2, 0]), (7, [2, 2, 2, 1])])
def test_openrlhf_alone_splits_unevenly(openrlhf, monkeypatch, n, split) -> None:
    step, _ = _step(openrlhf, monkeypatch, n, actors=4)
    assert [len(a) for a in step.stored()] == split


def test_openrlhf_alone_refuses_fewer_samples_than_actors_and_install_pads_them(openrlhf, monkeypatch) -> None:
    with pytest.raises(ValueError, match="Insufficient batch size"):
        _step(openrlhf, monkeypatch, 3, actors=4)
    to.install()
    step, _ = _step(openrlhf, monkeypatch, 1, actors=4)
    assert [len(a) for a in step.stored()] == [1, 1, 1, 1]
    assert _real_prompts(step.stored()) == ["prompt 0"]


def test_openrlhf_alone_drops_samples_in_its_micro_batches(openrlhf, monkeypatch) -> None:
    """5 samples on 4 actors in micro-batches of 2: the actor holding 1 sample trains on none."""
    step, _ = _step(openrlhf, monkeypatch, 5, actors=4, train_mbs=2)
    assert sum(len(mb.sequences) for a in step.trained(openrlhf, 2) for mb in a) == 4
    to.install()
    step, _ = _step(openrlhf, monkeypatch, 5, actors=4, train_mbs=2)
    trained = [mb for a in step.trained(openrlhf, 2) for mb in a]
    real = [p for mb in trained for p, pad in zip(mb.prompts, mb.info["is_padding"], strict=True) if not bool(pad)]
    assert sorted(real) == [f"prompt {i}" for i in range(5)]


ESTIMATORS = ["reinforce", "rloo", "reinforce_baseline", "group_norm", "dr_grpo", "flash_reinforce", "gae"]


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize(("rollout_mbs", "train_mbs"), [(1, 1), (2, 1), (1, 3)])
def test_advantages_returns_and_metrics_equal_a_never_padded_run(
    openrlhf, monkeypatch, estimator, rollout_mbs, train_mbs
) -> None:
    """The never-padded run is on one actor (OpenRLHF alone refuses 3 batches for 4 actors):
    its advantage step and statistics run over the whole rollout, whatever the actors."""
    kw = {"estimator": estimator, "n_samples": 2, "rollout_mbs": rollout_mbs, "train_mbs": train_mbs}
    kw["critic"] = estimator == "gae"
    plain, plain_status = _step(openrlhf, monkeypatch, 6, actors=1, **kw)
    to.install()
    padded, status = _step(openrlhf, monkeypatch, 6, actors=4, **kw)
    want = _by_prompt([i for a in plain.stored() for i in a])
    got = _by_prompt([i for a in padded.stored() for i in a])
    assert sorted(got) == sorted(want) and len(want) == 6
    for prompt, item in want.items():
        for name in ("advantages", "returns", "rewards", "action_mask", "sequences"):
            torch.testing.assert_close(getattr(got[prompt], name), getattr(item, name), rtol=0, atol=0)
        for key in ("return", "reward", "kl"):
            torch.testing.assert_close(got[prompt].info[key], item.info[key], rtol=0, atol=0)
    rollout_stats = {k: v for k, v in plain_status.items() if k.startswith("rollout/")}
    assert {k: status[k] for k in rollout_stats} == rollout_stats
    pads = [i for a in padded.stored() for i in a if bool(i.info["is_padding"])]
    assert pads and status["padding/samples"] == float(len(pads))
    for item in pads:  # exact zeros where OpenRLHF's losses and logs read
        assert not item.action_mask.any() and not item.advantages.any() and not item.returns.any()
        assert float(item.rewards) == 0.0 and float(item.info["return"]) == 0.0
    assert status["trajschema/padding_loss_tokens"] == 0 and status["trajschema/padding_advantage_rows"] == 0


def test_openrlhf_alone_would_whiten_padding_into_the_real_advantages(openrlhf, monkeypatch) -> None:
    """Padding samples appended without the drop-in's advantage step shift the real advantages:
    the step install() replaces is what keeps them equal."""
    kw = {"actors": 4, "estimator": "flash_reinforce", "n_samples": 1}
    plain, _ = _step(openrlhf, monkeypatch, 5, **kw)
    to.install()
    maker = openrlhf.experience_maker.RemoteExperienceMaker
    own = to.installed() and maker.compute_advantages_and_returns
    monkeypatch.setattr(maker, "compute_advantages_and_returns", _OWN[0])
    padded, _ = _step(openrlhf, monkeypatch, 5, **kw)
    monkeypatch.setattr(maker, "compute_advantages_and_returns", own)
    want = _by_prompt([i for a in plain.stored() for i in a])
    got = _by_prompt([i for a in padded.stored() for i in a])
    assert any(not torch.equal(got[p].advantages, want[p].advantages) for p in want)


#: OpenRLHF's own advantage step, read before any install (filled by the fixture below).
_OWN: list[Any] = []


@pytest.fixture(autouse=True)
def _own_advantages(openrlhf) -> None:
    if not _OWN:
        _OWN.append(openrlhf.experience_maker.RemoteExperienceMaker.compute_advantages_and_returns)


def test_rollout_with_no_real_sample_is_refused(openrlhf, monkeypatch) -> None:
    to.install()
    step = TrainStep(openrlhf, args_for(actors=2), monkeypatch)
    samples = rollout(openrlhf, LENGTHS[:2], REWARDS[:2])
    for s in samples:
        s.info["is_padding"] = torch.ones(1, dtype=torch.bool)
    with pytest.raises(ValueError, match="first sample must be a real one"):
        step.run(samples)
    assert step.stored() == [[], []]


def test_a_padding_sample_before_a_real_one_is_refused_before_any_forward(openrlhf, monkeypatch) -> None:
    to.install(mode="never")
    step = TrainStep(openrlhf, args_for(actors=2), monkeypatch)
    samples = rollout(openrlhf, LENGTHS[:3], REWARDS[:3])
    samples[1].info["is_padding"] = torch.ones(1, dtype=torch.bool)
    with pytest.raises(ValueError, match="comes after padding"):
        step.run(samples)
    assert step.made == []


def test_balancing_skips_an_experience_with_no_row(openrlhf) -> None:
    to.install()
    real = rollout(openrlhf, LENGTHS[:1], REWARDS[:1])[0]
    empty = openrlhf.experience.Experience(sequences=torch.zeros(0, 5, dtype=torch.long), info={})
    balanced = openrlhf.experience.balance_experiences([empty, real], args_for(actors=2))
    assert sum(int(e.sequences.shape[0]) for e in balanced) == 2  # the real row and one padding row


def test_a_router_loss_is_warned_about_once(openrlhf, monkeypatch, caplog) -> None:
    to.install()
    args = args_for(actors=2)
    args.actor.aux_loss_coef = 0.01
    with caplog.at_level("WARNING", logger="trajschema.openrlhf"):
        TrainStep(openrlhf, args, monkeypatch).run(rollout(openrlhf, LENGTHS[:3], REWARDS[:3]))
        TrainStep(openrlhf, args, monkeypatch).run(rollout(openrlhf, LENGTHS[:3], REWARDS[:3]))
    said = [r.getMessage() for r in caplog.records if "aux_loss_coef" in r.getMessage()]
    assert len(said) == 1 and "padding is not inert" in said[0]


def test_the_async_trainers_loop_pads_every_rollout_it_takes_from_its_queue(openrlhf, monkeypatch) -> None:
    to.install()
    rollouts = [rollout(openrlhf, LENGTHS[:n], REWARDS[:n]) for n in (5, 7)]
    step, logged = async_fit(openrlhf, args_for(actors=4), monkeypatch, rollouts)
    assert [len(a) for a in step.stored()] == [4, 4, 4, 4]  # two steps of 8 rows: 2 each per step
    assert _real_prompts(step.stored()) == sorted(f"prompt {i}" for n in (5, 7) for i in range(n))
    assert [s["padding/samples"] for s in logged] == [3.0, 1.0]
    assert [s["rollout/num_samples"] for s in logged] == [5.0, 7.0]
