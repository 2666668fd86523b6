"""The package's front door: ``__all__``, public module paths, and cheap imports."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import trajschema

PUBLIC_CLASSES = [n for n in trajschema.__all__ if isinstance(getattr(trajschema, n), type)]

# `import trajschema` must not pull these in (they are optional extras or dev tools).
HEAVY = ("ray", "transfer_queue", "hypothesis", "rich")


def test_all_is_sorted_and_unique() -> None:
    assert trajschema.__all__ == sorted(trajschema.__all__)
    assert len(set(trajschema.__all__)) == len(trajschema.__all__)


@pytest.mark.parametrize("name", trajschema.__all__)
def test_every_name_in_all_is_importable(name: str) -> None:
    namespace: dict = {}
    exec(f"from trajschema import {name}", namespace)  # the import statement is the point
    assert namespace[name] is getattr(trajschema, name)


def _defined_in_trajschema(obj: object) -> bool:
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return False
    module = getattr(obj, "__module__", "") or ""
    return module == "trajschema" or module.startswith("trajschema.")


def test_every_public_class_and_function_is_in_all() -> None:
    public = {
        name for name, obj in vars(trajschema).items() if not name.startswith("_") and _defined_in_trajschema(obj)
    }
    assert public - set(trajschema.__all__) == set()
    # ... and __all__ holds nothing else (no re-exported modules or stray values) but the
    # type aliases of the public signatures.
    assert set(trajschema.__all__) - public == TYPE_ALIASES


TYPE_ALIASES = {"Batch", "Depth", "ViolationCode"}


def test_the_type_aliases_are_the_ones_the_signatures_use() -> None:
    import typing

    hints = typing.get_type_hints(trajschema.Schema.validate_batch)
    assert hints["batch"] == trajschema.Batch and hints["depth"] == trajschema.Depth
    assert typing.get_type_hints(trajschema.Violation)["code"] == trajschema.ViolationCode


def test_the_public_api_is_not_empty() -> None:
    assert {"load_schema", "Schema", "SchemaError", "SchemaDefinitionError"} <= set(trajschema.__all__)
    assert PUBLIC_CLASSES


@pytest.mark.parametrize("name", PUBLIC_CLASSES)
def test_public_classes_report_the_package_module(name: str) -> None:
    assert getattr(trajschema, name).__module__ == "trajschema"


def test_version() -> None:
    assert isinstance(trajschema.__version__, str)
    assert trajschema.__version__.count(".") >= 1


# ---------------------------------------------------------------------------
# Cheap imports, checked in a fresh interpreter


def _modules_after(code: str, watch: tuple[str, ...], cwd: Path) -> set[str]:
    """Which of ``watch`` (or their submodules) are in sys.modules after running ``code``.

    Reports with plain prints so the check itself imports nothing that could be watched.
    """
    probe = (
        f"{code}\n"
        "import sys\n"
        f"for _w in {watch!r}:\n"
        "    if any(m == _w or m.startswith(_w + '.') for m in sys.modules):\n"
        "        print(_w)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


@pytest.fixture(scope="module")
def after_import(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """The watched modules a fresh ``import trajschema`` loads (one subprocess for the module)."""
    return _modules_after("import trajschema", (*HEAVY, "torch", "yaml"), tmp_path_factory.mktemp("cwd"))


@pytest.mark.slow
def test_import_does_not_pull_in_heavy_optional_modules(after_import: set[str]) -> None:
    assert after_import & set(HEAVY) == set()


@pytest.mark.slow
def test_the_import_check_can_fail(after_import: set[str], tmp_path: Path) -> None:
    # A direct import is seen ...
    assert _modules_after("import json", ("json",), tmp_path) == {"json"}
    assert _modules_after("import json.decoder", ("json",), tmp_path) == {"json"}
    # ... and so are the ones trajschema makes itself, so the check would catch Ray or rich.
    assert {"torch", "yaml"} <= after_import
    # Nothing is seen when nothing is imported.
    assert _modules_after("pass", ("json", "torch"), tmp_path) == set()
