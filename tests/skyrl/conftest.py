"""The fixtures of the tests that run SkyRL's own trainer and workers in process (``cluster.py``).

``tests/skyrl/test_patch.py`` defines a ``skyrl`` fixture of its own (SkyRL's modules by
role), which overrides this one there.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tests.skyrl.cluster import skyrl_modules, tiny_models


@pytest.fixture(scope="module")
def skyrl() -> SimpleNamespace:
    return skyrl_modules()


@pytest.fixture(scope="module")
def models(skyrl) -> Iterator[Any]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is faster, and steady on a shared machine
    yield tiny_models(skyrl)
    torch.set_num_threads(threads)
