"""The example bundles (``examples/bundles/``, recorded by the verl and SkyRL drop-ins in their own
broken steps: tests/bundle/examples.py) as the regression tests the docs show: read with the
``trajschema_bundle`` fixture, their defect found at its row, the rest of the batch valid, and
the command line agreeing. Neither trainer is needed."""

from __future__ import annotations

import json

import pytest

from tests.bundle.examples import EXAMPLES, found
from trajschema.cli.app import main
from trajschema.testing import assert_bundle_valid

VERL = "../../examples/bundles/verl-step-00000001"  # relative to this file, as the fixture reads it
SKYRL = "../../examples/bundles/skyrl-step-00000001"


def test_verls_broken_step_holds_its_nan_score_on_a_padding_row(trajschema_bundle):
    bundle = trajschema_bundle(VERL)
    assert (bundle.trainer, bundle.manifest["trainer_version"], bundle.step) == ("verl", "0.9.1", 1)
    assert (bundle.rows, bundle.manifest["padding_rows"], bundle.schema.name, bundle.layout) == (
        36,
        11,
        "moe_routed",
        None,
    )
    assert found(bundle) == [(12, "rm_scores", "value")] and bundle.tags[12]["is_padding"]
    with pytest.raises(AssertionError, match=r"rm_scores") as err:
        assert_bundle_valid(bundle)
    assert [(v.sample, v.code) for v in err.value.violations] == [(12, "value")]


def test_skyrls_broken_mini_batch_holds_its_nan_log_prob_on_a_padding_row(trajschema_bundle):
    bundle = trajschema_bundle(SKYRL)
    assert (bundle.trainer, bundle.manifest["trainer_version"], bundle.step) == ("SkyRL", "0.3.0", 1)
    assert (bundle.rows, bundle.manifest["padding_rows"], bundle.layout.name) == (12, 2, "skyrl")
    assert bundle.batch.metadata["is_padding"] == [False] * 10 + [True, True]
    assert found(bundle) == [(10, "rollout_logprobs", "padded")]


def test_each_example_holds_only_its_one_defect(trajschema_bundle):
    """Mended where the step broke, each recorded batch is valid: the recording holds nothing else wrong."""
    verl = trajschema_bundle(VERL)
    verl.batch["rm_scores"].values().nan_to_num_(0.0)
    assert_bundle_valid(verl)
    skyrl = trajschema_bundle(SKYRL)
    skyrl.batch["rollout_logprobs"][10:].nan_to_num_(0.0)
    assert_bundle_valid(skyrl)


@pytest.mark.parametrize(("name", "rows", "padding"), [("verl-step-00000001", 36, 11), ("skyrl-step-00000001", 12, 2)])
def test_the_command_line_reads_each_example(capsys, name, rows, padding):
    assert main(["show", str(EXAMPLES / name), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["rows"], summary["padding_rows"]) == (rows, padding)
    assert main(["check", str(EXAMPLES / name), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["totals"]["samples"], report["totals"]["violations"]) == (rows, 1)
