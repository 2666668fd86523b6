"""`trajschema.dropin.patches.Patches`: the bookkeeping both drop-ins (verl, SkyRL) install through."""

from __future__ import annotations

import threading
import types

import pytest

from trajschema.dropin.patches import Patches


def _target() -> tuple[types.SimpleNamespace, object, object]:
    a, b = object(), object()
    return types.SimpleNamespace(f=a, g=b), a, b


def test_replace_then_restore_puts_back_the_very_same_objects():
    owner, a, b = _target()
    p = Patches()
    assert not p.active and p.restore() is False
    p.replace([(owner, "f", a), (owner, "g", b)], ["F", "G"])
    assert p.active and (owner.f, owner.g) == ("F", "G")
    assert p.restore() is True and owner.f is a and owner.g is b
    assert not p.active and p.restore() is False


def test_replacing_twice_never_records_a_replacement_as_an_original():
    owner, a, _ = _target()
    p = Patches()
    p.replace([(owner, "f", a)], ["first"])
    p.replace([(owner, "f", owner.f)], ["second"])  # a careless caller reads the live attribute
    assert owner.f == "second"
    p.restore()
    assert owner.f == "first"  # what the second call was told was original; see the next test for install()


def test_restore_before_reading_the_originals_is_how_a_reinstall_stays_clean():
    owner, a, _ = _target()
    p = Patches()
    for value in ("first", "second"):
        with p.lock:
            p.restore()
            p.replace([(owner, "f", owner.f)], [value])
    p.restore()
    assert owner.f is a


def test_mismatched_lengths_are_refused_and_patch_nothing():
    owner, a, b = _target()
    p = Patches()
    with pytest.raises(ValueError):
        p.replace([(owner, "f", a), (owner, "g", b)], ["F"])
    assert owner.f is a and owner.g is b and not p.active


def test_threads_installing_at_once_leave_one_consistent_record():
    owner, a, _ = _target()
    p = Patches()

    def install(i: int) -> None:
        for _ in range(200):
            with p.lock:
                p.restore()
                p.replace([(owner, "f", owner.f)], [i])

    threads = [threading.Thread(target=install, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert p.restore() and owner.f is a
