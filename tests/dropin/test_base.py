"""`trajschema.dropin.DropIn`: the version gate, the pins, the bindings, and whole-or-nothing installs.

The trainer here is a module made for the test (``fake_trainer``, in ``sys.modules``):
what it checks is the base's bookkeeping, which the verl and SkyRL drop-ins' own tests
then check against the real trainers.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from trajschema.dropin import DropIn, Target, parameters

TRAINER = "fake_trainer"
USER = "fake_trainer_user"


@pytest.fixture
def trainer() -> Iterator[types.ModuleType]:
    module = types.ModuleType(TRAINER)
    module.__version__ = "1.0"  # type: ignore[attr-defined]

    def pad(batch, size):
        return batch

    class Trainer:
        def step(self, data, metrics=None):
            return data

        @classmethod
        def make(cls, n):
            return n

    module.pad, module.Trainer = pad, Trainer  # type: ignore[attr-defined]
    user = types.ModuleType(USER)
    user.pad = pad  # type: ignore[attr-defined]  # ``from fake_trainer import pad``
    sys.modules[TRAINER], sys.modules[USER] = module, user
    yield module
    del sys.modules[TRAINER], sys.modules[USER]


def dropin(**pins: str) -> DropIn:
    signatures = {"pad": "(batch, size)", "Trainer.step": "(self, data, metrics=None)", "Trainer.make": "(cls, n)"}
    signatures.update(pins)
    return DropIn("trajschema.fake", "Fake", TRAINER, ("1.0",), signatures, module=TRAINER, bindings={"pad": [USER]})


def marked(target: Target) -> object:
    def replacement(*args: object) -> object:
        return ("ours", target.label)

    return replacement


def current(module: types.ModuleType) -> list[object]:
    return [vars(module)["pad"], vars(module.Trainer)["step"], vars(module.Trainer)["make"], sys.modules[USER].pad]


def test_install_replaces_every_pinned_attribute_and_binding_and_uninstall_puts_back_the_same_objects(trainer):
    base, before = dropin(), current(trainer)
    seen: list[str] = []
    base.install(lambda t: seen.append(t.label) or marked(t), then=lambda: seen.append("then"))
    assert base.installed()
    assert seen == ["pad", "Trainer.step", "Trainer.make", f"{USER}:pad", "then"]
    assert [a is b for a, b in zip(current(trainer), before, strict=True)] == [False] * 4
    assert sys.modules[USER].pad() == ("ours", f"{USER}:pad")
    base.install(marked)  # again: over the trainer's own, not over the first replacements
    assert base.uninstall() is True and not base.installed()
    assert [a is b for a, b in zip(current(trainer), before, strict=True)] == [True] * 4
    assert base.uninstall() is False


def test_parameters_drops_annotations_and_reads_classmethods_and_staticmethods():
    def f(self, data: int, *args: str, key: str = "x", **kw: object) -> None: ...

    assert parameters(f) == "(self, data, *args, key='x', **kw)"
    assert parameters(classmethod(f)) == parameters(staticmethod(f)) == parameters(f)


def test_another_version_is_refused_naming_both_and_patches_nothing(trainer):
    trainer.__version__ = "1.1"
    base, before = dropin(), current(trainer)
    with pytest.raises(RuntimeError, match=r"trajschema\.fake\.install\(\) supports Fake 1\.0; this is Fake 1\.1"):
        base.install(marked)
    assert not base.installed() and current(trainer) == before


def test_a_missing_trainer_is_an_import_error_with_the_install_command():
    base = DropIn("trajschema.fake", "Fake", "no_such_trainer_here", ("2.0",), {})
    with pytest.raises(ImportError, match=r"needs Fake 2\.0 installed \(pip install no_such_trainer_here==2\.0\)"):
        base.version()


@pytest.mark.parametrize("label", ["pad", "Trainer.step", "Trainer.make"])
def test_a_changed_signature_is_refused_naming_it_and_an_earlier_install_is_put_back(trainer, label):
    base, before = dropin(), current(trainer)
    base.install(marked)
    base.signatures = {**base.signatures, label: "(changed)"}
    with pytest.raises(RuntimeError, match=rf"Fake's {label} has the signature .*, not the \(changed\)"):
        base.install(marked)
    assert not base.installed() and current(trainer) == before


def test_a_binding_holding_something_else_is_refused_and_nothing_is_patched(trainer):
    sys.modules[USER].pad = lambda batch, size: None
    base = dropin()
    with pytest.raises(RuntimeError, match=rf"{USER}\.pad is not Fake's {TRAINER}\.pad \(something else replaced it\)"):
        base.install(marked)
    assert not base.installed() and vars(trainer)["pad"].__name__ == "pad"


def test_a_replacement_that_fails_leaves_nothing_patched(trainer):
    base, before = dropin(), current(trainer)

    def failing(target: Target) -> object:
        if target.name == "make":
            raise ValueError("cannot make this one")
        return marked(target)

    with pytest.raises(ValueError, match="cannot make"):
        base.install(failing)
    assert not base.installed() and current(trainer) == before
