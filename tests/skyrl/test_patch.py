"""`trajschema.skyrl.install()` against SkyRL 0.3.0: what it replaces, the gate, and the bindings.

SkyRL's ``skyrl.train.trainer`` takes seconds to import: it is imported once, by the
module-scoped ``skyrl`` fixture. What the replacements do is tested against SkyRL's own code
in ``test_trainer.py`` (the ``RayPPOTrainer`` steps, ``train()`` itself) and
``test_workers.py`` (``stage_chunks``, the micro-batches, the workers' metrics and gradients).
"""

from __future__ import annotations

import functools
import inspect
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import trajschema as ts
import trajschema.skyrl as sk
from tests.skyrl_support import TRAINING_BATCH, import_skyrl, skyrl_batch, tokens
from trajschema.skyrl.patch import parameters


@pytest.fixture(scope="module")
def skyrl() -> SimpleNamespace:
    import_skyrl(TRAINING_BATCH)  # the 3.11 shim runs before anything imports skyrl.backends
    mods = {
        "tb": TRAINING_BATCH,
        "trainer": "skyrl.train.trainer",
        "dispatch": "skyrl.backends.skyrl_train.distributed.dispatch",
        "wu": "skyrl.backends.skyrl_train.workers.worker_utils",
        "worker": "skyrl.backends.skyrl_train.workers.worker",
        "config": "skyrl.train.config",
    }
    return SimpleNamespace(**{k: import_skyrl(v) for k, v in mods.items()})


@pytest.fixture
def installed(skyrl):
    sk.install()
    yield skyrl
    sk.uninstall()


# -- the pins ----------------------------------------------------------------------------


def test_every_signature_install_replaces_is_the_one_pinned(skyrl):
    # Fails loudly when SkyRL changes one of the functions install() replaces.
    for label, want in sk.SKYRL_SIGNATURES.items():
        module, _, qual = label.partition(":")
        owner: Any = __import__(module, fromlist=["_"])
        *path, name = qual.split(".")
        for part in path:
            owner = getattr(owner, part)
        assert parameters(vars(owner)[name]) == want, label
    assert str(inspect.signature(skyrl.tb.pad_training_input_batch).parameters["pad_size"]) == "pad_size: int"


def targets() -> dict[str, Any]:
    """Every attribute install() replaces (``module:qualname``), as it is now."""
    found = {}
    labels = [*sk.SKYRL_SIGNATURES, *(f"{m}:pad_training_input_batch" for m in sk.patch.BINDINGS)]
    for label in labels:
        module, _, qual = label.partition(":")
        owner: Any = __import__(module, fromlist=["_"])
        *path, name = qual.split(".")
        for part in path:
            owner = getattr(owner, part)
        found[label] = vars(owner)[name]
    return found


def test_install_replaces_everything_and_uninstall_puts_back_the_very_same_objects(skyrl):
    before = targets()
    assert not sk.installed()
    sk.install()
    sk.install()  # re-installing starts from SkyRL's own
    try:
        assert sk.installed()
        during = targets()
        assert [k for k, v in during.items() if v is before[k]] == []
    finally:
        assert sk.uninstall()
    assert not sk.uninstall() and not sk.installed()
    after = targets()
    assert [k for k, v in after.items() if v is not before[k]] == []


def test_another_version_or_signature_or_binding_patches_nothing(skyrl, monkeypatch):
    import skyrl as package

    monkeypatch.setattr(package, "__version__", "0.3.1")
    with pytest.raises(RuntimeError, match=r"supports SkyRL 0\.3\.0; this is SkyRL 0\.3\.1, so nothing was patched"):
        sk.install()
    monkeypatch.undo()
    monkeypatch.setattr(skyrl.trainer.RayPPOTrainer, "compute_advantages_and_returns", lambda self, data, extra=1: data)
    with pytest.raises(RuntimeError, match=r"has the signature \(self, data, extra=1\), not the \(self, data\)"):
        sk.install()
    monkeypatch.undo()
    monkeypatch.setattr(skyrl.dispatch, "pad_training_input_batch", lambda unpadded_batch, pad_size: None)
    with pytest.raises(RuntimeError, match="something else replaced it"):
        sk.install()
    assert not sk.installed()
    with pytest.raises(ValueError, match="eos_token_id must be"):
        sk.install(eos_token_id=-1)
    with pytest.raises(TypeError, match="schema must be"):
        sk.install(schema="text")  # type: ignore[arg-type]


# -- the bindings ------------------------------------------------------------------------


def test_sft_trainers_tail_batch_pads_under_install_without_row_0(installed):
    sft = import_skyrl("skyrl.train.sft_trainer")
    examples = [
        {"input_ids": tokens(n, 7), "attention_mask": [1] * n, "num_actions": 2, "loss_mask": [1, 1]} for n in (4, 6, 3)
    ]
    collator = functools.partial(sft.collate_sft_batch, tokenizer=SimpleNamespace(pad_token_id=0))
    batch = sft.collate_sft_examples(
        examples, lambda ex, batch_size: collator(ex), batch_size=4, pad_to_batch_size=True
    )
    assert len(batch) == 4 and batch.metadata["is_padding"] == [False, False, False, True]
    assert not batch["loss_mask"][3].any() and batch["attention_mask"][3].tolist() == [0] * 5 + [1]
    assert not torch.equal(batch["sequences"][3], batch["sequences"][0])


def uid_free_batch() -> Any:
    batch = skyrl_batch([tokens(3), tokens(5), tokens(2)], [tokens(2, 50), tokens(4, 50), tokens(1, 50)])
    del batch.metadata["uids"]
    return batch


def test_slices_pad_without_uids_where_skyrl_has_none_but_the_trainer_needs_them(skyrl):
    # The Tinker backend's batches and the mini-batches after the advantage step carry no
    # uids; SkyRL's own pad_training_input_batch then adds none, and neither does ours.
    backend = import_skyrl("skyrl.backends.skyrl_train_backend")
    assert "uids" not in skyrl.tb.pad_training_input_batch(uid_free_batch(), 1).metadata
    sk.install()
    try:
        padded = backend.pad_training_input_batch(uid_free_batch(), 1)
        with pytest.raises(ts.SchemaError, match=r"metadata\.uids"):
            skyrl.trainer.pad_training_input_batch(uid_free_batch(), 1)  # before the advantages: GRPO's groups
    finally:
        sk.uninstall()
    assert "uids" not in padded.metadata and padded.metadata["is_padding"] == [False] * 3 + [True]
    ts.load_schema("text").validate_batch(padded, layout=sk.pad.staged_layout(padded.metadata))
