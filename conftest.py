"""Root conftest: names the docstring examples in trajschema/ may use (run as doctests)."""

import pytest


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    import torch

    import trajschema

    doctest_namespace["ts"] = trajschema
    doctest_namespace["torch"] = torch
