"""Without a trainer installed, its oracle tests skip, saying why: no test folder stands in for it.

The trap: pytest's default ``prepend`` import mode puts on ``sys.path`` the first folder
above a test file (or a ``conftest.py``) that is no package. While ``tests/`` was none,
``tests/conftest.py`` put ``tests/`` there, so ``tests/verl/`` imported as a namespace
package ``verl``: ``pytest.importorskip("verl")`` passed on a machine without verl and
the test failed on ``verl.trainer`` instead of skipping (6 failed on a fresh clone). CI
installs verl and never saw it. Two defences, each pinned here:

* every test folder is a package (``tests/__init__.py`` says why), so pytest puts the
  repository root on ``sys.path`` and imports ``tests.verl.test_...``;
* the helpers that import a trainer (``tests/trainer_import.py``, through
  ``verl_support.verl_module`` and ``skyrl_shim.import_skyrl_module``) refuse one that
  resolves to a namespace package or into ``tests/``.

The subprocess runs reproduce a machine without the trainers: a plugin (`HIDER`, loaded
with ``-p``) finds ``verl`` and ``skyrl`` only on the ``sys.path`` entries outside
site-packages, so path-based discovery, and with it the trap, works as it would there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

import tests.skyrl_support as skyrl_support
import tests.trl_support as trl_support
import tests.verl_support as verl_support
from tests.trainer_import import TESTS, import_installed

ROOT = TESTS.parent

#: The test files that need a trainer (tests/integration, which starts Ray, left out).
TRAINER_TESTS = [
    "tests/verl",
    "tests/skyrl",
    "tests/trl",
    "tests/openrlhf",
    "tests/dense/test_oracle_verl.py",
    "tests/dense/test_oracle_skyrl.py",
]

#: A pytest plugin hiding the installed verl, SkyRL and TRL; a top-level ``verl``, ``skyrl`` or ``trl`` is
#: still found on the other ``sys.path`` entries, as on a machine where none is installed.
HIDER = """\
import importlib.machinery
import sys

HIDDEN = ("verl", "skyrl", "trl", "openrlhf")


class HideInstalledTrainers:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in HIDDEN:
            return None
        entries = [p for p in sys.path if "site-packages" not in p and "dist-packages" not in p]
        spec = importlib.machinery.PathFinder.find_spec(name, entries)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return spec


sys.meta_path.insert(0, HideInstalledTrainers)
"""
HIDER_NAME = "trajschema_hide_trainers"


def unpackaged_folders(root: Path) -> list[str]:
    """The folders under ``root`` (itself included) holding a ``test_*.py`` but no ``__init__.py``."""
    folders = {p.parent for p in root.rglob("test_*.py")}
    return sorted(f.relative_to(root).as_posix() for f in folders if not (f / "__init__.py").is_file())


@pytest.fixture(scope="module")
def hider(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding the `HIDER` plugin, for ``PYTHONPATH``."""
    folder = tmp_path_factory.mktemp("hider")
    (folder / f"{HIDER_NAME}.py").write_text(HIDER, encoding="utf-8")
    return folder


def run_hidden(hider: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """``python -m pytest -q -rs`` in ``cwd`` with the trainers hidden and not required."""
    required = (
        "TRAJSCHEMA_REQUIRE_VERL",
        "TRAJSCHEMA_REQUIRE_SKYRL",
        "TRAJSCHEMA_REQUIRE_OPENRLHF",
        "TRAJSCHEMA_REQUIRE_TRL",
    )
    env = {k: v for k, v in os.environ.items() if k not in required}
    env["PYTHONPATH"] = os.pathsep.join([str(hider), *filter(None, [os.environ.get("PYTHONPATH")])])
    # What is pinned is which tests skip, not how thoroughly the others search: the quick profile.
    env["TRAJSCHEMA_HYPOTHESIS_PROFILE"] = "dev"
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", HIDER_NAME, *args]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


# -- every test folder is a package ------------------------------------------------------------


def test_every_test_folder_is_a_package() -> None:
    assert (TESTS / "__init__.py").is_file()
    assert unpackaged_folders(TESTS) == []


def test_a_test_folder_without_init_is_found(tmp_path: Path) -> None:
    for folder, init in [("", True), ("verl", False), ("verl/deep", True), ("skyrl", False), ("data", False)]:
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        if folder != "data":
            (tmp_path / folder / "test_x.py").write_text("", encoding="utf-8")
        if init:
            (tmp_path / folder / "__init__.py").write_text("", encoding="utf-8")
    assert unpackaged_folders(tmp_path) == ["skyrl", "verl"]


# -- the helpers refuse a trainer that is no installed one ------------------------------------


def _namespace(name: str, folder: Path) -> ModuleType:
    """What ``import name`` gives for a folder without ``__init__.py``: a module without ``__file__``."""
    module = ModuleType(name)
    module.__file__ = None
    module.__path__ = [str(folder)]
    return module


def test_import_installed_refuses_a_namespace_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "faketrainer" / "sub").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ImportError) as info:
            import_installed("faketrainer.sub")
    finally:
        sys.modules.pop("faketrainer", None)
    assert str(info.value) == (
        f"faketrainer resolves to {tmp_path / 'faketrainer'} (a namespace package), not an installed faketrainer"
    )
    assert "faketrainer.sub" not in sys.modules  # refused before the submodule is imported


def test_import_installed_refuses_a_package_inside_tests() -> None:
    with pytest.raises(ImportError, match=r"^tests resolves to .*tests/__init__\.py, not an installed tests$"):
        import_installed("tests.trainer_import")


def test_import_installed_imports_an_installed_module_and_names_a_missing_one() -> None:
    assert import_installed("email.mime.text").__name__ == "email.mime.text"
    with pytest.raises(ModuleNotFoundError, match="no_such_trainer"):
        import_installed("no_such_trainer.trainer")


@pytest.mark.parametrize(
    ("required", "outcome"),
    [(False, pytest.skip.Exception), (True, pytest.fail.Exception)],
    ids=["skips", "fails-when-required"],
)
@pytest.mark.parametrize(
    ("top", "helper", "name", "says"),
    [
        ("verl", verl_support.verl_module, "verl.trainer", "verl 0.9.1 is not importable"),
        ("skyrl", skyrl_support.import_skyrl, skyrl_support.TRAINING_BATCH, "SkyRL 0.3.0 is not importable"),
        ("trl", trl_support.import_trl, "trl", "TRL 1.16.0 is not importable"),
    ],
    ids=["verl_module", "import_skyrl", "import_trl"],
)
def test_a_trainer_resolving_to_a_test_folder_skips_saying_where(
    monkeypatch: pytest.MonkeyPatch, top, helper, name, says, required, outcome
) -> None:
    monkeypatch.setitem(sys.modules, top, _namespace(top, TESTS / top))
    monkeypatch.setattr(sys.modules[helper.__module__], "REQUIRED", required)
    with pytest.raises(outcome) as info:
        helper(name)
    where = re.escape(f"{top} resolves to {TESTS / top} (a namespace package), not an installed {top}")
    assert re.search(f"{re.escape(says)} \\({where}\\)", str(info.value)), str(info.value)
    assert ("=1 but " in str(info.value)) == required


# -- the README's test command on a machine without the trainers -------------------------------


@pytest.mark.slow
def test_without_trainers_their_tests_skip_and_none_fails(hider: Path) -> None:
    done = run_hidden(hider, ROOT, *TRAINER_TESTS)
    out = done.stdout
    assert done.returncode == 0, out[-6000:] + done.stderr[-3000:]
    summary = out.strip().splitlines()[-1]
    assert " skipped" in summary and "failed" not in summary and "error" not in summary, summary
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    # Not found at all: no folder of tests/ stood in for them (then the reason would say "resolves to").
    verl = [s for s in skipped if "verl 0.9.1 is not importable (No module named 'verl')" in s]
    skyrl = [s for s in skipped if "SkyRL 0.3.0 is not importable (No module named 'skyrl')" in s]
    trl = [s for s in skipped if "TRL 1.16.0 is not importable (No module named 'trl')" in s]
    openrlhf = [s for s in skipped if "OpenRLHF 0.11.2 is not importable (No module named 'openrlhf')" in s]
    assert verl and skyrl and trl and openrlhf, "\n".join(skipped)
    assert [s for s in skipped if "resolves to" in s] == []
    # Every test marked verl skipped (tests/conftest.py counts them).
    assert re.search(r"verl-oracle tests \(marked verl\): 0 ran, [1-9]\d* skipped", out), out[-3000:]


#: The old layout in miniature: tests/conftest.py, and a test folder named after the trainer.
MINIATURE = {
    "pytest.ini": "[pytest]\n",
    "tests/conftest.py": "",
    "tests/verl/test_a.py": """\
        import pytest


        def test_a():
            pytest.importorskip("verl")
            import verl.trainer  # noqa: F401
        """,
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("packages", "outcome", "code"),
    [(False, "1 failed", 1), (True, "1 skipped", 0)],
    ids=["old-layout-fails", "packages-skip"],
)
def test_the_check_can_fail_on_the_old_layout(hider: Path, tmp_path: Path, packages, outcome, code) -> None:
    for name, text in MINIATURE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(textwrap.dedent(text), encoding="utf-8")
    if packages:
        (tmp_path / "tests" / "__init__.py").write_text("", encoding="utf-8")
        (tmp_path / "tests" / "verl" / "__init__.py").write_text("", encoding="utf-8")
    done = run_hidden(hider, tmp_path, "tests")
    assert done.returncode == code and outcome in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    if not packages:
        assert "No module named 'verl.trainer'" in done.stdout
