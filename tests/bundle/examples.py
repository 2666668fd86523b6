"""The example bundles in ``examples/bundles/``: a broken verl step and a broken SkyRL step, each
recorded by its drop-in's ``install(record=...)`` in the trainer's own step (the tests
``tests/verl/test_verl_record.py`` and ``tests/skyrl/test_record.py`` record them again and hold
them to the committed ones). The docs' "Record, replay and share a batch" reads them, and
``tests/bundle/test_examples.py`` turns them into regression tests that need neither trainer.

To record them again after a deliberate change: ``TRAJSCHEMA_WRITE_EXAMPLES=1 python -m pytest
-k example_bundle tests/verl/test_verl_record.py tests/skyrl/test_record.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch

import trajschema as ts
from trajschema.bundle.codec import encode

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "bundles"

#: What a recording must hold as the example does (the rest: ``created`` and the package's version).
SAME = ("format", "version", "step", "trainer", "trainer_version", "reason", "rows", "padding_rows", "schema", "layout")


def hold_to_example(recorded: Path, name: str) -> None:
    """Assert the bundle at ``recorded`` holds what ``examples/bundles/<name>`` holds: the same
    manifest entries (`SAME`), the same structure and non-tensor values (the padding rows' uids,
    fresh per step, aside), every integer and bool
    tensor equal and every float one equal up to float rounding (a model's forward on another CPU).
    With ``TRAJSCHEMA_WRITE_EXAMPLES=1`` the example is replaced by the recording first."""
    example = EXAMPLES / name
    if os.environ.get("TRAJSCHEMA_WRITE_EXAMPLES") == "1":
        shutil.rmtree(example, ignore_errors=True)
        shutil.copytree(recorded, example)
    got, want = ts.load_bundle(recorded), ts.load_bundle(example)
    for key in SAME:
        assert got.manifest.get(key) == want.manifest.get(key), f"manifest {key}"
    assert got.tags == want.tags and got.extras == want.extras
    (got_tensors, got_tree), (want_tensors, want_tree) = encode(got.batch), encode(want.batch)
    assert _fresh(got_tree) == _fresh(want_tree), "the batch's structure or non-tensor values differ"
    for key, a in got_tensors.items():
        b = want_tensors[key]
        assert (a.dtype, a.shape) == (b.dtype, b.shape), key
        if a.dtype.is_floating_point:
            assert torch.allclose(a.double(), b.double(), rtol=1e-5, atol=1e-6, equal_nan=True), key
        else:
            assert torch.equal(a, b), key


def _fresh(tree: Any) -> str:
    """``tree`` as JSON with each padding uid (``pad`` + a fresh uuid4's hex) the same."""
    return re.sub(r"pad[0-9a-f]{32}", "pad<fresh>", json.dumps(tree, sort_keys=True))


def found(bundle: Any) -> list[tuple[int | None, str, str]]:
    return [(v.sample, v.field, v.code) for v in bundle.violations()]
