"""start_local_transfer_queue's argument checks: refused before Ray or TransferQueue is started (or imported)."""

from __future__ import annotations

import math

import pytest

import trajschema as ts

BAD = [
    ("units-str", {"storage_units": "2"}, "storage_units must be a positive int"),
    ("units-bool", {"storage_units": True}, "storage_units must be a positive int"),
    ("units-float", {"storage_units": 1.5}, "storage_units must be a positive int"),
    ("units-zero", {"storage_units": 0}, "storage_units must be a positive int"),
    ("cpus-bool", {"num_cpus": True}, "num_cpus must be a positive int"),
    ("cpus-zero", {"num_cpus": 0}, "num_cpus must be a positive int"),
    ("timeout-nan", {"timeout_s": math.nan}, "timeout_s must be a positive, finite number"),
    ("timeout-inf", {"timeout_s": math.inf}, "timeout_s must be a positive, finite number"),
    ("timeout-none", {"timeout_s": None}, r"timeout_s must be a positive, finite number .*found None"),
    ("timeout-bool", {"timeout_s": True}, "timeout_s must be a positive, finite number"),
]


@pytest.mark.parametrize(("kw", "match"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_arguments_are_refused_before_anything_starts(kw, match, monkeypatch):
    def no_import():
        raise AssertionError("Ray/TransferQueue was imported before the arguments were checked")

    monkeypatch.setattr("trajschema.tq.local.import_tq", no_import)
    with pytest.raises(ValueError, match=match), ts.start_local_transfer_queue(**kw):
        pass
