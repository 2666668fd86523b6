"""The pandera and TypedTensorDict exports agree with ``schema.violations`` wherever they can say the check.

For every packaged schema, the corpus of `tests.export.tensordict_corpus` (valid samples and
TensorDicts of samples, labelled invalid samples alone and twice over): every valid case is
accepted, every invalid one with a violation the export expresses is rejected, and the tallies
are the figures `trajschema.export.measured` prints in the exports' headers and the docs.
"""

from __future__ import annotations

import importlib.metadata

import hypothesis
import pytest

import trajschema as ts
from tests.export.tensordict_corpus import measure, pandera_accepts, typed_accepts
from trajschema.export.measured import HYPOTHESIS_VERSION, MEASURED, Measured

TENSORDICT = importlib.metadata.version("tensordict")
NO_TYPED = tuple(int(p) for p in TENSORDICT.split(".")[:2]) < (0, 12)
typed = pytest.mark.skipif(NO_TYPED, reason=f"TypedTensorDict came in tensordict 0.12; this is {TENSORDICT}")


def _figures(found: Measured, export: str, name: str) -> None:
    """The figures the headers print are the ones measured, on the hypothesis that drew them."""
    if hypothesis.__version__ != HYPOTHESIS_VERSION:
        pytest.skip(f"figures drawn with hypothesis {HYPOTHESIS_VERSION}, this is {hypothesis.__version__}")
    assert found == MEASURED[(export, name)], "re-measure: python -m tests.export.tensordict_corpus"


@pytest.mark.parametrize("name", ts.schema_names())
def test_the_pandera_export_agrees_with_the_schema_on_the_corpus(name):
    _figures(measure(name, "pandera", pandera_accepts(name)), "pandera", name)


@typed
@pytest.mark.parametrize("name", ts.schema_names())
def test_the_typed_tensordict_export_agrees_with_the_schema_on_the_corpus(name):
    _figures(measure(name, "typed-tensordict", typed_accepts(name)), "typed-tensordict", name)


def test_every_packaged_schema_has_its_figures():
    assert set(MEASURED) == {(e, n) for e in ("pandera", "typed-tensordict") for n in ts.schema_names()}
