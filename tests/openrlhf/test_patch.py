"""``trajschema.openrlhf.install`` / ``uninstall`` / ``installed`` against OpenRLHF 0.11.2's modules:
the signature pins, the by-name binding in ``ppo_trainer``, refusals that patch nothing."""

from __future__ import annotations

import importlib
import pickle

import pytest

import trajschema as ts
import trajschema.openrlhf as to
from trajschema.dropin import parameters


def _attr(label: str):
    module, _, qual = label.partition(":")
    owner = importlib.import_module(module)
    *path, name = qual.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name


def test_every_pin_matches_the_installed_openrlhf(openrlhf) -> None:
    """Fails loudly, naming the function, when OpenRLHF changes a signature the drop-in wraps."""
    for label, want in to.OPENRLHF_SIGNATURES.items():
        owner, name = _attr(label)
        assert parameters(vars(owner)[name]) == want, label


def test_install_replaces_and_uninstall_puts_back_the_very_same_objects(openrlhf) -> None:
    before = {label: vars(_attr(label)[0])[_attr(label)[1]] for label in to.OPENRLHF_SIGNATURES}
    bound = openrlhf.ppo_trainer.balance_experiences
    to.install()
    to.install(audit="strict")  # re-install: no wrapper around a wrapper
    assert to.installed()
    for label, obj in before.items():
        owner, name = _attr(label)
        assert vars(owner)[name] is not obj and vars(owner)[name].__name__ == name
    for module in (openrlhf.ppo_trainer, openrlhf.experience):  # where it is defined and where it is bound
        assert module.balance_experiences is not bound and module.balance_experiences.__name__ == "balance_experiences"
    assert to.uninstall() is True and to.uninstall() is False and not to.installed()
    for label, obj in before.items():
        owner, name = _attr(label)
        assert vars(owner)[name] is obj
    assert openrlhf.ppo_trainer.balance_experiences is bound


def test_a_changed_signature_is_refused_and_nothing_is_patched(openrlhf, monkeypatch) -> None:
    maker = openrlhf.experience_maker.RemoteExperienceMaker
    own = maker.split_rollout_samples
    monkeypatch.setattr(maker, "compute_advantages_and_returns", lambda self, experiences, extra: None)
    with pytest.raises(
        RuntimeError, match=r"compute_advantages_and_returns has the signature \(self, experiences, extra\)"
    ):
        to.install()
    assert not to.installed() and maker.split_rollout_samples is own


def test_a_replaced_binding_is_refused(openrlhf, monkeypatch) -> None:
    monkeypatch.setattr(openrlhf.ppo_trainer, "balance_experiences", lambda experiences, args: experiences)
    with pytest.raises(RuntimeError, match=r"openrlhf.trainer.ppo_trainer.balance_experiences is not OpenRLHF's"):
        to.install()
    assert not to.installed()


def test_another_version_is_refused(openrlhf, monkeypatch) -> None:
    import trajschema.dropin.base as base

    monkeypatch.setattr(base, "_distribution_version", lambda package: "0.11.3")
    with pytest.raises(
        RuntimeError, match=r"supports OpenRLHF 0.11.2; this is OpenRLHF 0.11.3, so nothing was patched"
    ):
        to.install()
    assert not to.installed()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"schema": 3}, TypeError, "schema must be a trajschema.Schema or a schema name, found int"),
        ({"schema": "nope"}, ts.SchemaNotFoundError, "no schema 'nope'"),
        ({"eos_token_id": -1}, ValueError, "eos_token_id must be an int"),
        ({"audit": "loud"}, ValueError, "audit must be True, False or 'strict'"),
        ({"mode": "sometimes"}, ValueError, "expected one of 'always', 'once', 'never'"),
        ({"strict": "yes"}, TypeError, "strict must be a bool"),
        ({"depth": "deep"}, ValueError, "depth must be one of 'shapes', 'values'"),
    ],
    ids=["schema-int", "schema-unknown", "negative-eos", "audit-word", "mode-word", "strict-str", "depth-word"],
)
def test_bad_arguments_are_refused_before_anything_is_patched(openrlhf, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        to.install(**kwargs)
    assert not to.installed()


def test_an_eos_no_tensor_can_hold_is_refused_at_install(openrlhf) -> None:
    with pytest.raises(ValueError, match="eos_token_id"):
        to.install(eos_token_id=2**64)
    assert not to.installed()


def test_the_replaced_methods_pickle_by_reference_as_openrlhfs_own(openrlhf) -> None:
    maker = openrlhf.experience_maker.RemoteExperienceMaker
    to.install()
    assert pickle.loads(pickle.dumps(maker.split_rollout_samples)) is maker.split_rollout_samples
    assert (
        pickle.loads(pickle.dumps(openrlhf.experience.balance_experiences)) is openrlhf.experience.balance_experiences
    )
