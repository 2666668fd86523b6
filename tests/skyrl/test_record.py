"""trajschema.skyrl.record: ``install(record=DIR, keep=N, every=K)`` inside SkyRL's own ``train()`` step.

The steps run on the in-process cluster of ``tests/skyrl/cluster.py`` (SkyRL's own trainer,
dispatch, workers and losses), as ``tests/skyrl/test_audit.py`` runs them: 4 prompts x 5
samples, 2 mini-batches of 10 rows on 4 ranks, each padded to 12 by ``stage_chunks``, a
fault injected into each padded mini-batch's first padding row (row 10). SkyRL pads only
the mini-batches there, so the mini-batch that broke is what is recorded.
"""

from __future__ import annotations

import asyncio
import logging
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import tests.skyrl.test_trainer as loop
import trajschema as ts
import trajschema.skyrl as sk
from tests.bundle.examples import hold_to_example
from tests.skyrl.cluster import Cluster, FixedGenerator, config, patch_cluster, trainer
from tests.skyrl.test_audit import CASE, _advantage_on_padding, _nan_logprob, audited_step, inject
from tests.skyrl_support import skyrl_batch, tokens
from trajschema.skyrl.audit import train_step_for

pytestmark = pytest.mark.filterwarnings("ignore:CUDA is not available:UserWarning")  # SkyRL asks for CUDA autocast

#: The first padding row of each padded mini-batch (10 real rows, then 2 padding rows).
ROW = 10
NAN_LOGPROB = (
    "the mini-batch of rows 0:10, padded to 12 rows: "
    "trajschema/violations = 1 (schema violations in the step's batch: padded 1)"
)


def bundles(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def train_steps(skyrl, models, monkeypatch, steps: int, fault=None, **install: Any) -> list[dict[str, Any]]:
    """``steps`` steps of SkyRL's own ``train()`` under one ``install(**install)`` (global steps 1, 2, ...),
    ``fault`` applied to each padded mini-batch; what each step logged."""
    with monkeypatch.context() as m:
        if fault is not None:
            inject(m, fault)
        cfg = config(skyrl, prompts=4, samples=5, mini_batch=2, **loop.LOOPS[CASE])
        cluster = Cluster(skyrl, cfg, models, 4)
        patch_cluster(m, cluster)
        t = trainer(cluster, FixedGenerator(loop.generator_output(20)), loop.PROMPTS)
        t.train_dataloader, t.total_training_steps = [loop.PROMPTS] * steps, steps
        sk.install(**install)
        try:
            asyncio.run(t.train())
        finally:
            sk.uninstall()
    return t.tracker.logged


# -- a broken step leaves its bundle -------------------------------------------------------------


def test_a_broken_step_leaves_the_mini_batch_that_broke_with_the_defect_at_its_row(
    skyrl, models, monkeypatch, tmp_path
):
    found = audited_step(skyrl, models, monkeypatch, _nan_logprob, record=tmp_path / "b", keep=2)
    assert found["violations"] == 2 and bundles(tmp_path / "b") == ["step-00000001"]
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    assert (got.step, got.trainer, got.manifest["trainer_version"]) == (1, "SkyRL", "0.3.0")
    assert got.manifest["reason"] == NAN_LOGPROB and got.manifest["rows"] == 12
    assert got.schema.name == "text" and got.layout.name == "skyrl" and got.tags is None
    assert type(got.batch).__name__ == "TrainingInputBatch"  # SkyRL imports here (through the 3.11 shim)
    assert got.batch.metadata["is_padding"] == [False] * ROW + [True, True]
    assert math.isnan(float(got.batch["rollout_logprobs"][ROW, -1]))
    assert [(v.sample, v.field, v.code) for v in got.violations()] == [(ROW, "rollout_logprobs", "padded")]


def test_a_fault_the_schema_does_not_see_shows_in_the_recorded_batch(skyrl, models, monkeypatch, tmp_path):
    audited_step(skyrl, models, monkeypatch, _advantage_on_padding, record=tmp_path / "b")
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    assert got.manifest["reason"].startswith("the mini-batch of rows 0:10, padded to 12 rows: trajschema/padding_adv")
    assert float(got.batch["advantages"][ROW, -1]) == 0.5 and not got.batch["advantages"][ROW + 1].any()


def test_the_recorded_mini_batch_is_as_it_was_staged(skyrl, models, monkeypatch, tmp_path):
    """A copy taken as it is staged: what the workers do to its tensors afterwards does not reach the bundle."""

    def fault_then_overwrite(batch, first):
        _nan_logprob(batch, first)
        seen.append(batch)

    seen: list[Any] = []
    audited_step(skyrl, models, monkeypatch, fault_then_overwrite, record=tmp_path / "b")
    seen[0]["rollout_logprobs"][ROW, -1] = 7.0  # after the step: the staged batch's own tensor
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    assert math.isnan(float(got.batch["rollout_logprobs"][ROW, -1]))


def test_keep_prunes_the_older_bundles_over_three_broken_steps(skyrl, models, monkeypatch, tmp_path):
    logged = train_steps(skyrl, models, monkeypatch, 3, _nan_logprob, record=tmp_path / "b", keep=2)
    assert [step["trajschema/violations"] for step in logged] == [2, 2, 2]
    assert bundles(tmp_path / "b") == ["step-00000002", "step-00000003"]
    assert [ts.load_bundle(tmp_path / "b" / n).step for n in bundles(tmp_path / "b")] == [2, 3]


def test_strict_records_the_step_then_raises(skyrl, models, monkeypatch, tmp_path):
    with pytest.raises(ts.PaddingAuditError) as err:
        audited_step(skyrl, models, monkeypatch, _nan_logprob, audit="strict", record=tmp_path / "b")
    assert "trajschema/violations = 2" in str(err.value)
    assert ts.load_bundle(tmp_path / "b" / "step-00000001").manifest["reason"] == NAN_LOGPROB


# -- clean steps ------------------------------------------------------------------------------------


def test_a_clean_step_without_every_records_nothing(skyrl, models, monkeypatch, tmp_path):
    found = audited_step(skyrl, models, monkeypatch, record=tmp_path / "b")
    assert found["padding_rows"] == 4 and found["violations"] == 0
    assert not (tmp_path / "b").exists()


def test_every_records_the_trainers_batch_of_clean_steps(skyrl, models, monkeypatch, tmp_path):
    audited_step(skyrl, models, monkeypatch, record=tmp_path / "b", every=1)
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    assert got.manifest["reason"] == "every 1 steps" and got.step == 1
    assert got.manifest["rows"] == 20 and got.batch.metadata["is_padding"] == [False] * 20  # SkyRL pads no row of it
    assert got.violations() == []


def test_every_counts_skyrls_global_steps(skyrl, models, monkeypatch, tmp_path):
    train_steps(skyrl, models, monkeypatch, 3, record=tmp_path / "b", every=2)
    assert bundles(tmp_path / "b") == ["step-00000002"]


# -- the trainer's own batch, and a trainer without global_step ---------------------------------------


def padded_batch() -> Any:
    """A 3-row batch padded to 5 as ``convert_to_training_input`` pads in step-wise training."""
    p, r = [3, 5, 2], [4, 2, 3]
    return sk.pad_training_input_batch(skyrl_batch([tokens(x) for x in p], [tokens(x, 50) for x in r]), 2)


def test_a_broken_trainers_batch_is_recorded_itself_and_a_trainer_without_steps_is_counted(skyrl, tmp_path):
    """Step-wise training pads the trainer's batch: its padding broke, so it is recorded; with no
    ``global_step`` the recorder numbers the bundles by its own count."""
    sk.install(record=tmp_path / "b", every=2)
    try:
        step = train_step_for(lambda self, data: {"ok": True})
        t = SimpleNamespace(all_metrics={})
        for _ in range(3):
            data = padded_batch()
            data["loss_mask"][3] = 1.0  # a loss on the first padding row
            assert step(t, data) == {"ok": True}
    finally:
        sk.uninstall()
    assert bundles(tmp_path / "b") == ["step-00000001", "step-00000002", "step-00000003"]
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    assert got.step is None and got.manifest["reason"].startswith("the trainer's batch: trajschema/padding_loss_tokens")
    assert [(v.sample, v.field, v.code) for v in got.violations()] == [(3, "loss_mask", "mask")]


# -- recording never breaks the step ----------------------------------------------------------------


def test_a_recording_that_fails_is_logged_and_the_step_goes_on(skyrl, models, monkeypatch, tmp_path, caplog):
    (tmp_path / "b").write_text("a file where the directory should be")
    with caplog.at_level(logging.WARNING, logger="trajschema.bundle"):
        found = audited_step(skyrl, models, monkeypatch, _nan_logprob, record=tmp_path / "b")
    assert found["violations"] == 2 and "recording the batch of step 1" in caplog.text


# -- the arguments ------------------------------------------------------------------------------------

#: id -> (install's keyword arguments, the error, its message).
BAD = {
    "record-int": ({"record": 3}, TypeError, r"^record must be a directory path or None, found int 3"),
    "keep-0": ({"record": "b", "keep": 0}, ValueError, r"^keep must be a positive int, found 0"),
    "keep-str": ({"record": "b", "keep": "2"}, ValueError, r"^keep must be a positive int, found '2'"),
    "every-0": ({"record": "b", "every": 0}, ValueError, r"^every must be a positive int, found 0"),
    "every-without-record": ({"every": 2}, ValueError, r"^every= needs record="),
    "record-without-audit": ({"record": "b", "audit": False}, ValueError, r"^record= .* needs audit=True"),
}


@pytest.mark.parametrize(("kwargs", "error", "match"), list(BAD.values()), ids=list(BAD))
def test_a_bad_record_argument_is_refused_and_patches_nothing(skyrl, tmp_path, monkeypatch, kwargs, error, match):
    monkeypatch.chdir(tmp_path)  # where record="b" would go
    train = vars(skyrl.trainer.RayPPOTrainer)["train_critic_and_policy"]
    with pytest.raises(error, match=match):
        sk.install(**kwargs)
    assert not sk.installed() and vars(skyrl.trainer.RayPPOTrainer)["train_critic_and_policy"] is train
    sk.install()
    try:
        ours = vars(skyrl.trainer.RayPPOTrainer)["train_critic_and_policy"]
        with pytest.raises(error, match=match):
            sk.install(**kwargs)
        assert sk.installed() and vars(skyrl.trainer.RayPPOTrainer)["train_critic_and_policy"] is ours
    finally:
        sk.uninstall()
    assert list(tmp_path.iterdir()) == []


# -- the CLI reads what the drop-in recorded ---------------------------------------------------------


def test_trajschema_check_reads_the_recorded_bundle(skyrl, models, monkeypatch, tmp_path):
    """In a fresh process SkyRL 0.3.0 does not import on Python 3.11: the batch reads back as a dict with metadata."""
    audited_step(skyrl, models, monkeypatch, _nan_logprob, record=tmp_path / "b")
    done = subprocess.run(
        [sys.executable, "-m", "trajschema", "check", str(tmp_path / "b" / "step-00000001")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{ROW}\trollout_logprobs\tpadded" in done.stdout and "in layout 'skyrl'" in done.stdout


# -- the example bundle the docs read ----------------------------------------------------------------


def test_the_example_bundle_is_what_skyrls_broken_step_records(skyrl, models, monkeypatch, tmp_path):
    """``examples/bundles/skyrl-step-00000001``: this step's recording (tests/bundle/examples.py)."""
    audited_step(skyrl, models, monkeypatch, _nan_logprob, record=tmp_path / "b")
    hold_to_example(tmp_path / "b" / "step-00000001", "skyrl-step-00000001")
