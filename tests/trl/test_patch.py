"""`trajschema.trl.install()` against TRL 1.16.0: its own step runs with the check in, and its
own ``train()`` and ``log`` carry the figures.

A mistake inside TRL's step is made by wrapping TRL's own ``pad`` as the grpo trainer module
binds it (``trl.trainer.grpo_trainer.pad``) so that it pads ``completion_mask`` on the left,
the way a user's processor padding the wrong side would; everything else is TRL's.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import trajschema as ts
import trajschema.trl as tt
from tests.trl.conftest import PROMPTS
from tests.trl_support import PAD, grpo_batch, import_trl, make_trainer
from trajschema.cli.app import main
from trajschema.dropin import parameters

GRPO = "trl.trainer.grpo_trainer"


@pytest.fixture
def trainer(folders: Any) -> Any:
    made = make_trainer(folders[False], max_steps=2)
    made.model.train()  # as inside train(): TRL files the step's metrics under "train"
    return made


@pytest.fixture
def installed() -> Any:
    yield tt
    tt.uninstall()


def wrong_side(original: Any) -> Any:
    """TRL's ``pad``, padding the completion mask (``padding_value=0``, right, int64) on the left."""

    def pad(tensors: Any, padding_value: Any = 0, padding_side: str = "right", pad_to_multiple_of: Any = None) -> Any:
        mask = padding_value == 0 and padding_side == "right" and tensors[0].dtype == torch.long
        return original(tensors, padding_value, "left" if mask else padding_side, pad_to_multiple_of)

    return pad


@pytest.fixture
def left_padded_completion_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    grpo = import_trl(GRPO)
    monkeypatch.setattr(grpo, "pad", wrong_side(grpo.pad))


def checks_recorded(trainer: Any, mode: str = "train") -> list[float]:
    return list(trainer._metrics[mode]["trajschema/violations"])


def test_install_replaces_the_step_and_uninstall_puts_it_back(installed):
    grpo = import_trl(GRPO)
    own = grpo.GRPOTrainer.__dict__["_generate_and_score_completions"]
    installed.install()
    assert installed.installed()
    assert grpo.GRPOTrainer.__dict__["_generate_and_score_completions"] is not own
    installed.install(mode="once")  # re-installing wraps TRL's own, not the wrapper
    assert grpo.GRPOTrainer.__dict__["_generate_and_score_completions"].__wrapped__ is own
    assert installed.uninstall() is True
    assert grpo.GRPOTrainer.__dict__["_generate_and_score_completions"] is own
    assert not installed.installed() and installed.uninstall() is False


def test_train_logs_the_figures_of_every_batch(trainer, installed):
    installed.install()
    trainer.train()
    logged = [h for h in trainer.state.log_history if "trajschema/violations" in h]
    assert logged, "no logged step carries the check's figures"
    assert all(h["trajschema/violations"] == 0.0 and h["trajschema/bad_samples"] == 0.0 for h in logged)
    assert all(h["trajschema/check_ms"] > 0 for h in logged)


def test_a_broken_batch_is_reported_not_raised(trainer, installed, left_padded_completion_mask, caplog):
    installed.install()
    with caplog.at_level(logging.WARNING, logger="trajschema.trl"):
        batch = grpo_batch(trainer, PROMPTS)
    short = int((batch["completion_mask"].sum(1) < batch["completion_mask"].shape[1]).sum())
    assert short > 0
    assert trainer._metrics["train"]["trajschema/bad_samples"] == [float(short)]
    assert trainer._metrics["train"]["trajschema/violations/mask"] == [float(short)]
    assert "completion_mask row" in caplog.text


def test_strict_raises_after_recording(trainer, installed, left_padded_completion_mask):
    installed.install(strict=True)
    with pytest.raises(ts.SchemaError) as caught:
        grpo_batch(trainer, PROMPTS)
    assert {v.field for v in caught.value.violations} == {"completion_mask"}
    assert "trajschema.trl" in "".join(getattr(caught.value, "__notes__", []))
    assert checks_recorded(trainer) == [float(len(caught.value.violations))]


@pytest.mark.parametrize(("mode", "calls"), [("always", 2), ("once", 1), ("never", 0)])
def test_modes(trainer, installed, mode, calls):
    installed.install(mode=mode)
    for _ in range(2):
        grpo_batch(trainer, PROMPTS)
    assert len(checks_recorded(trainer)) == calls


def test_once_checks_again_after_a_failure(trainer, installed, monkeypatch):
    installed.install(mode="once")
    grpo = import_trl(GRPO)
    original = grpo.pad
    monkeypatch.setattr(grpo, "pad", wrong_side(original))
    grpo_batch(trainer, PROMPTS)  # fails: checked
    monkeypatch.setattr(grpo, "pad", original)
    grpo_batch(trainer, PROMPTS)  # passes: checked
    grpo_batch(trainer, PROMPTS)  # not checked
    assert [v > 0 for v in checks_recorded(trainer)] == [True, False]


def test_the_check_mode_in_force_applies_without_a_mode(trainer, installed):
    installed.install()
    with ts.checks("never"):
        grpo_batch(trainer, PROMPTS)
    grpo_batch(trainer, PROMPTS)
    assert len(checks_recorded(trainer)) == 1


def test_eval_batches_go_to_the_eval_metrics(trainer, installed):
    installed.install()
    trainer.model.eval()
    grpo_batch(trainer, PROMPTS)
    assert checks_recorded(trainer, "eval") == [0.0] and checks_recorded(trainer, "train") == []


# -- the step never dies of the check (strict=False): TRL's step replaced by one returning a given batch ----


@pytest.fixture
def step(monkeypatch: pytest.MonkeyPatch, installed: Any) -> Any:
    """``step(trainer, batch)``: TRL's step replaced (same parameters) by one returning ``batch``;
    the test installs the check around it. ``monkeypatch`` is set up first so that it puts
    TRL's own back after ``installed`` has uninstalled; a test asks for ``batch`` before it,
    so that the batch is TRL's own."""
    grpo = import_trl(GRPO)

    def _generate_and_score_completions(self: Any, inputs: Any) -> Any:
        return inputs

    monkeypatch.setattr(grpo.GRPOTrainer, "_generate_and_score_completions", _generate_and_score_completions)
    return lambda trainer, batch: grpo.GRPOTrainer._generate_and_score_completions(trainer, batch)


def stand_in(pad: Any = PAD) -> Any:
    """What the check reads of a trainer: its tokenizer's pad id, its settings, its model's mode, its metrics."""
    return SimpleNamespace(
        processing_class=SimpleNamespace(pad_token_id=pad),
        mask_truncated_completions=False,
        model=SimpleNamespace(training=True),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
    )


@pytest.mark.parametrize("pad", [-1, True, 2**64, "0"], ids=["minus-one", "bool", "too-big", "str"])
def test_a_pad_id_that_is_no_token_id_is_taken_as_unknown(batch, step, installed, caplog, pad):
    installed.install(mode="always", strict=True)
    trainer = stand_in(pad)
    with caplog.at_level(logging.WARNING, logger="trajschema.trl"):
        for _ in range(2):
            assert step(trainer, batch) is batch
    assert checks_recorded(trainer) == [0.0, 0.0]  # TRL's batch, its padding one value throughout
    said = [r.getMessage() for r in caplog.records if r.name == "trajschema.trl"]
    assert len(said) == 1 and f"pad_token_id {pad!r} is not a token id" in said[0]  # once, not every step


def test_a_batch_the_check_cannot_read_is_reported_not_raised(batch, step, installed, caplog):
    installed.install(mode="always")
    batch["token_type_ids"] = torch.zeros(len(batch["advantages"]), 5, dtype=torch.long)  # not P + C wide
    trainer = stand_in()
    with caplog.at_level(logging.WARNING, logger="trajschema.trl"):
        assert step(trainer, batch) is batch
    assert trainer._metrics["train"]["trajschema/violations/shape"] == [1.0]
    assert "token_type_ids" in caplog.text and "shape int64[8,5]" in caplog.text


@pytest.mark.parametrize("strict", [False, True])
def test_an_error_of_the_check_itself_is_logged_unless_strict(batch, step, installed, caplog, monkeypatch, strict):
    def broken(*_: Any) -> Any:
        raise RuntimeError("the check broke")

    monkeypatch.setattr("trajschema.trl.patch.check_metrics", broken)
    installed.install(mode="always", strict=strict)
    trainer = stand_in()
    if strict:
        with pytest.raises(RuntimeError, match="the check broke"):
            step(trainer, batch)
        return
    with caplog.at_level(logging.WARNING, logger="trajschema.trl"):
        assert step(trainer, batch) is batch
    assert "checking the batch TRL built failed" in caplog.text and "RuntimeError: the check broke" in caplog.text


def test_metrics_held_in_plain_dicts(batch, step, installed):
    installed.install(mode="always")
    trainer = stand_in()
    trainer._metrics = {"train": {}, "eval": {}}  # not TRL's defaultdicts
    step(trainer, batch)
    assert checks_recorded(trainer) == [0.0] and trainer._metrics["eval"] == {}


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"mode": "sometimes"}, ValueError),
        ({"strict": "yes"}, TypeError),
        ({"depth": "deep"}, ValueError),
        ({"schema": 3}, TypeError),
        ({"record": 3}, TypeError),
        ({"record": "x", "keep": 0}, ValueError),
        ({"every": 2}, ValueError),
    ],
    ids=["mode", "strict", "depth", "schema", "record-int", "keep-0", "every-without-record"],
)
def test_bad_arguments_patch_nothing(installed, kwargs, error):
    with pytest.raises(error):
        installed.install(**kwargs)
    assert not installed.installed()


def test_another_trl_version_is_refused(installed, monkeypatch):
    monkeypatch.setattr(import_trl(), "__version__", "1.15.0")
    with pytest.raises(RuntimeError, match=r"supports TRL 1\.16\.0; this is TRL 1\.15\.0"):
        installed.install()
    assert not installed.installed()


def test_another_signature_is_refused(installed, monkeypatch):
    grpo = import_trl(GRPO)

    def _generate_and_score_completions(self, inputs, extra=None):  # a TRL that changed
        return {}

    monkeypatch.setattr(grpo.GRPOTrainer, "_generate_and_score_completions", _generate_and_score_completions)
    with pytest.raises(RuntimeError, match=r"signature \(self, inputs, extra=None\), not the \(self, inputs\)"):
        installed.install()
    assert not installed.installed()
    assert grpo.GRPOTrainer._generate_and_score_completions is _generate_and_score_completions


def test_the_pin_matches_this_trl():
    for label, want in tt.TRL_SIGNATURES.items():
        module, _, qual = label.partition(":")
        owner, name = qual.split(".")
        assert parameters(vars(getattr(import_trl(module), owner))[name]) == want


def test_importable_without_trl():
    code = (
        "import sys; sys.modules['trl'] = None\n"
        "import trajschema.trl as tt\n"
        "assert tt.grpo_layout().name == 'trl_grpo'\n"
        "try:\n    tt.install()\nexcept ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "trajschema.trl.install() needs TRL 1.16.0 installed (pip install trl==1.16.0)" in out


def test_a_broken_batch_is_recorded_before_strict_raises(trainer, installed, left_padded_completion_mask, tmp_path):
    installed.install(strict=True, record=tmp_path, keep=2)
    with pytest.raises(ts.SchemaError) as caught:
        grpo_batch(trainer, PROMPTS)
    [path] = list(tmp_path.iterdir())
    bundle = ts.load_bundle(path)
    assert bundle.trainer == "TRL" and bundle.manifest["trainer_version"] == "1.16.0"
    assert bundle.layout.name == "trl_grpo" and bundle.layout.pad_token_id == PAD
    assert "completion_mask mask" in bundle.manifest["reason"]
    assert main(["check", str(path), "--quiet"]) == 1  # the command line finds the same violations
    assert sorted(map(_where, bundle.violations(depth="shapes"))) == sorted(map(_where, caught.value.violations))


def _where(v: ts.Violation) -> tuple[int | None, str, str]:
    return (v.sample, v.field, v.code)


def test_clean_batches_are_recorded_only_every_k_steps_and_the_newest_kept(trainer, installed, tmp_path):
    installed.install(record=tmp_path / "none")
    grpo_batch(trainer, PROMPTS)
    assert not (tmp_path / "none").exists() or list((tmp_path / "none").iterdir()) == []
    installed.install(record=tmp_path / "all", every=1, keep=2)
    for step in range(3):
        trainer.state.global_step = step
        grpo_batch(trainer, PROMPTS)
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == ["step-00000001", "step-00000002"]
    bundle = ts.load_bundle(tmp_path / "all" / "step-00000002")
    assert bundle.step == 2 and bundle.manifest["reason"] == "every 1 steps" and bundle.violations() == []
