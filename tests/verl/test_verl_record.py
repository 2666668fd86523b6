"""trajschema.verl.record: ``install(record=DIR, keep=N, every=K)`` in verl 0.9.1's own trainer step.

Every test drives verl's own trainer methods under ``install()`` in the order its step calls
them (``tests/verl/step.py``), with the in-memory TransferQueue, and injects a fault the way
``tests/verl/test_verl_audit.py`` does: a padding row made non-inert between two of the
step's calls. 25 real ``moe_routed`` rows on 2 ranks: 11 padding rows, 36 in all.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import trajschema as ts
import trajschema.verl as tv
from tests.bundle.examples import hold_to_example
from tests.verl.step import driven_step, installed_step, step_config, stub_trainer
from tests.verl.test_verl_audit import (
    DP,
    MOE_CONFIG,
    PADDING_ROWS,
    ROWS,
    _loss_mask_on,
    _nan_score_on_padding,
    first_padding,
    moe_step,
    with_model,
)
from tests.verl_support import verl_module
from trajschema.runtime import PaddingAuditError

pytestmark = pytest.mark.verl

NAN_SCORE = "trajschema/violations = 1 (schema violations in the step's batch: value 1)"


def bundles(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def row_of(meta: Any, key: str) -> int:
    return list(meta.keys).index(key)


# -- a broken step leaves its bundle -------------------------------------------------------------


def test_a_broken_step_leaves_its_whole_batch_with_the_defect_at_its_row(tb, tq, tmp_path):
    meta, metrics, _ = moe_step(tb, tq, tmp_path, after_balance=_nan_score_on_padding, record=tmp_path / "b", keep=2)
    assert metrics["trajschema/violations"] == 1 and bundles(tmp_path / "b") == ["step-00000001"]
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    assert (got.step, got.trainer, got.manifest["trainer_version"]) == (1, "verl", "0.9.1")
    assert got.manifest["reason"] == NAN_SCORE
    assert got.schema.name == "moe_routed" and got.schema.dims["experts"].size == 8  # pinned by the model config
    assert got.layout is None and got.tags == meta.tags
    assert (got.manifest["rows"], got.manifest["padding_rows"]) == (ROWS + PADDING_ROWS, PADDING_ROWS)
    assert {"advantages", "returns", "input_ids", "routed_experts"} <= set(got.batch.keys())  # every field
    found = [(v.sample, v.field, v.code) for v in got.violations()]
    assert found == [(row_of(meta, first_padding(meta)), "rm_scores", "value")]


def test_a_fault_the_schema_does_not_see_shows_in_the_recorded_batch(tb, tq, tmp_path):
    """A response mask of ones on a padding row: the audit counts its loss tokens, the bundle holds the row."""
    meta, _, _ = moe_step(tb, tq, tmp_path, after_balance=_loss_mask_on("response_mask"), record=tmp_path / "b")
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    assert got.manifest["reason"].startswith("trajschema/padding_loss_tokens = ")
    row = row_of(meta, first_padding(meta))
    masks = got.batch["response_mask"].unbind()
    assert got.tags[row]["is_padding"] and bool((masks[row] == 1).all())
    assert all(not bool(m.any()) for i, m in enumerate(masks) if i != row and got.tags[i].get("is_padding"))


def test_keep_prunes_the_older_bundles_over_three_broken_steps(tb, tq, tmp_path):
    config = with_model(step_config("grpo", "token-mean"), tmp_path, MOE_CONFIG)
    tv.install(record=tmp_path / "b", keep=2)
    t = stub_trainer(tb, config, DP)
    for step in (1, 2, 3):
        meta, _, _ = driven_step(
            tq, t, DP, ROWS, schema="moe_routed", sample_dims={"layers": 4, "topk": 2, "experts": 8},
            after_balance=_nan_score_on_padding, global_steps=step,
        )  # fmt: skip
        tq.kv_clear(keys=meta.keys, partition_id=meta.partition_id)  # as verl's fit() does after each step
        assert bundles(tmp_path / "b")[-1] == f"step-{step:08d}"
    assert bundles(tmp_path / "b") == ["step-00000002", "step-00000003"]
    assert [ts.load_bundle(tmp_path / "b" / n).step for n in bundles(tmp_path / "b")] == [2, 3]


def test_strict_records_the_step_then_raises(tb, tq, tmp_path):
    with pytest.raises(PaddingAuditError) as err:
        moe_step(tb, tq, tmp_path, after_balance=_nan_score_on_padding, audit="strict", record=tmp_path / "b")
    assert bundles(tmp_path / "b") == ["step-00000001"]
    assert ts.load_bundle(tmp_path / "b" / "step-00000001").manifest["reason"] == "; ".join(err.value.faults)


# -- clean steps ------------------------------------------------------------------------------------


def test_a_clean_step_without_every_records_nothing_and_reads_nothing(tb, tq, tmp_path):
    reads: list[Any] = []

    def spy(tq, meta):
        real = tq.kv_batch_get
        tq.kv_batch_get = lambda **kw: reads.append(kw) or real(**kw)

    meta, _, _ = moe_step(tb, tq, tmp_path, after_advantage=spy, record=tmp_path / "b")
    assert bundles(tmp_path / "b") == [] and not (tmp_path / "b").exists()
    padding = [k for k, t in zip(meta.keys, meta.tags, strict=True) if ts.is_padding(t)]
    assert [kw["keys"] for kw in reads if kw.get("select_fields") is None] == [padding]  # the audit's read alone


def test_every_records_clean_steps_too(tb, tq, tmp_path):
    meta, _, _ = moe_step(tb, tq, tmp_path, record=tmp_path / "b", every=1)
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    assert got.manifest["reason"] == "every 1 steps" and got.step == 1
    assert got.violations() == [] and got.tags == meta.tags  # the real rows and the padding, clean


def test_every_counts_verls_global_steps(tb, tq, tmp_path):
    tv.install(record=tmp_path / "b", every=2)
    t = stub_trainer(tb, step_config("grpo", "token-mean"), DP)
    for step in (1, 2, 3):
        meta, _, _ = driven_step(tq, t, DP, ROWS, global_steps=step)
        tq.kv_clear(keys=meta.keys, partition_id=meta.partition_id)
    assert bundles(tmp_path / "b") == ["step-00000002"]


def test_a_step_without_padding_is_recorded_with_its_first_rows_schema(tb, tq, tmp_path):
    """24 rows are a multiple of 12: no padding, so no padding schema; the first real row's is chosen."""
    installed_step(tb, tq, step_config("grpo", "token-mean"), DP, 24, record=tmp_path / "b", every=1)
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    assert got.schema.name == "text" and got.manifest["padding_rows"] == 0 and got.violations() == []


# -- recording never breaks the step ----------------------------------------------------------------


def test_a_read_that_fails_is_logged_and_the_step_goes_on(tb, tq, tmp_path, caplog):
    def failing(tq, meta):
        real = tq.kv_batch_get

        def get(**kw):
            if len(kw["keys"]) == len(meta.keys) and kw.get("select_fields") is None:
                raise ConnectionError("TransferQueue went away")
            return real(**kw)

        tq.kv_batch_get = get

    with caplog.at_level(logging.WARNING, logger="trajschema.bundle"):
        _, metrics, _ = moe_step(
            tb, tq, tmp_path, after_balance=_nan_score_on_padding, after_advantage=failing, record=tmp_path / "b"
        )
    assert metrics["trajschema/violations"] == 1 and bundles(tmp_path / "b") == []
    assert "reading step 1 to record it" in caplog.text and "TransferQueue went away" in caplog.text


# -- the arguments ------------------------------------------------------------------------------------

#: id -> (install's keyword arguments, the error, its message).
BAD = {
    "record-int": ({"record": 3}, TypeError, r"^record must be a directory path or None, found int 3"),
    "record-empty": ({"record": ""}, TypeError, r"^record must be a directory path"),
    "keep-0": ({"record": "b", "keep": 0}, ValueError, r"^keep must be a positive int, found 0"),
    "keep-bool": ({"record": "b", "keep": True}, ValueError, r"^keep must be a positive int, found True"),
    "keep-0-without-record": ({"keep": 0}, ValueError, r"^keep must be a positive int, found 0"),
    "every-0": ({"record": "b", "every": 0}, ValueError, r"^every must be a positive int, found 0"),
    "every-float": ({"record": "b", "every": 2.0}, ValueError, r"^every must be a positive int, found 2.0"),
    "every-without-record": ({"every": 2}, ValueError, r"^every= needs record="),
    "record-without-audit": ({"record": "b", "audit": False}, ValueError, r"^record= .* needs audit=True"),
}


@pytest.mark.parametrize(("kwargs", "error", "match"), list(BAD.values()), ids=list(BAD))
def test_a_bad_record_argument_is_refused_and_patches_nothing(tb, tmp_path, monkeypatch, kwargs, error, match):
    verl_module("verl")
    monkeypatch.chdir(tmp_path)  # where record="b" would go
    names = ("_balance_batch", "_compute_advantage", "_compute_metrics")
    verls = {n: vars(tb.PPOTrainer)[n] for n in names}
    with pytest.raises(error, match=match):
        tv.install(**kwargs)
    assert not tv.installed() and {n: vars(tb.PPOTrainer)[n] for n in names} == verls
    tv.install()  # installed: a bad re-install leaves it as it was
    try:
        ours = {n: vars(tb.PPOTrainer)[n] for n in names}
        with pytest.raises(error, match=match):
            tv.install(**kwargs)
        assert tv.installed() and {n: vars(tb.PPOTrainer)[n] for n in names} == ours
    finally:
        tv.uninstall()
    assert list(tmp_path.iterdir()) == []


# -- the CLI reads what the drop-in recorded ---------------------------------------------------------


def test_trajschema_check_reads_the_recorded_bundles(tb, tq, tmp_path):
    meta, _, _ = moe_step(tb, tq, tmp_path, after_balance=_nan_score_on_padding, record=tmp_path / "b")
    tq.kv_clear(keys=meta.keys, partition_id=meta.partition_id)
    broken = subprocess.run(
        [sys.executable, "-m", "trajschema", "check", str(tmp_path / "b" / "step-00000001")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert broken.returncode == 1, broken.stderr
    assert "rm_scores" in broken.stdout and str(row_of(meta, first_padding(meta))) in broken.stdout
    installed_step(tb, tq, step_config("grpo", "token-mean"), DP, ROWS, record=tmp_path / "c", every=1)
    clean = subprocess.run(
        [sys.executable, "-m", "trajschema", "check", str(tmp_path / "c" / "step-00000001")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_the_recorded_batch_reads_back_bit_exact(tb, tq, tmp_path):
    meta, _, _ = moe_step(tb, tq, tmp_path, record=tmp_path / "b", every=1)
    got = ts.load_bundle(tmp_path / "b" / "step-00000001")
    stored = tq.kv_batch_get(keys=meta.keys, partition_id=meta.partition_id)
    for name in ("input_ids", "routed_experts", "advantages"):
        for a, b in zip(stored[name].unbind(), got.batch[name].unbind(), strict=True):
            assert a.dtype == b.dtype and torch.equal(a, b), name


# -- the example bundle the docs read ----------------------------------------------------------------


def test_the_example_bundle_is_what_verls_broken_step_records(tb, tq, tmp_path):
    """``examples/bundles/verl-step-00000001``: this step's recording (tests/bundle/examples.py)."""
    moe_step(tb, tq, tmp_path, after_balance=_nan_score_on_padding, record=tmp_path / "b")
    hold_to_example(tmp_path / "b" / "step-00000001", "verl-step-00000001")
