"""Importing a trainer (verl, SkyRL) for the oracle tests only if it is really installed (no pytest here).

A folder named after a trainer is importable under that name whenever the folder above
it is on ``sys.path``: ``tests/verl/`` as ``verl`` once ``tests/`` is there (pytest's
``prepend`` import mode put it there while ``tests/`` was no package), a namespace
package if it has no ``__init__.py``. Then ``import verl`` succeeds on a machine without
verl, and the test fails on ``verl.trainer`` instead of skipping. `import_installed`
refuses a trainer that resolves to a namespace package or into this test suite, so the
callers (``tests/verl_support.py``, ``tests/skyrl_shim.py``) skip, saying where it
resolved.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

__all__ = ["TESTS", "import_installed"]

#: The test suite's folder: nothing in it is an installed trainer.
TESTS = Path(__file__).resolve().parent


def import_installed(name: str) -> ModuleType:
    """``importlib.import_module(name)``, once the top-level package of ``name`` is known to be installed.

    >>> import_installed("json.decoder").__name__
    'json.decoder'

    Raises:
        ImportError: the package is not importable, or it resolves to a namespace package
            (a folder without ``__init__.py``) or into ``tests/``: "verl resolves to
            /repo/tests/verl (a namespace package), not an installed verl".
    """
    top = name.partition(".")[0]
    package = importlib.import_module(top)
    file = getattr(package, "__file__", None)
    if file is None:
        where = f"{', '.join(getattr(package, '__path__', [])) or '?'} (a namespace package)"
    elif Path(file).resolve().is_relative_to(TESTS):
        where = file
    else:
        return importlib.import_module(name)
    raise ImportError(f"{top} resolves to {where}, not an installed {top}", name=top)
