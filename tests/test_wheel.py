"""The built wheel carries every packaged schema, and a non-editable install finds them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCHEMA_FILES = sorted((REPO / "schemas").glob("*.yaml"))
LAYOUT_FILES = sorted((REPO / "layouts").glob("*.yaml"))

pytestmark = pytest.mark.slow


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False, **kwargs)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # --no-isolation builds with the hatchling of this environment (no network); CI must
    # have it installed next to `build`.
    pytest.importorskip("hatchling", reason="hatchling is needed to build the wheel without isolation")
    pytest.importorskip("build", reason="the `build` frontend is in the dev extra")
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(REPO)])
    wheels = list(out.glob("trajschema-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_repository_has_schemas() -> None:
    assert {p.stem for p in SCHEMA_FILES} >= {"text", "vlm_mrope", "moe_routed", "vlm_mrope_moe", "distill"}


def test_every_schema_is_inside_the_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        for path in SCHEMA_FILES:
            member = f"trajschema/schemas/{path.name}"
            assert member in names, f"{member} missing from {wheel.name}"
            assert zf.read(member) == path.read_bytes()
        packaged = {n for n in names if n.startswith("trajschema/schemas/")}
    assert packaged == {f"trajschema/schemas/{p.name}" for p in SCHEMA_FILES}
    assert "trajschema/__init__.py" in names
    assert "trajschema/py.typed" in names  # type checkers read the package's annotations
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)  # the Apache-2.0 text ships
    # The schemas live inside the package, not as a stray top-level directory.
    assert not any(n.startswith("schemas/") for n in names)


def test_every_layout_is_inside_the_wheel(wheel: Path) -> None:
    assert {p.stem for p in LAYOUT_FILES} >= {"verl_dataproto", "skyrl"}
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        packaged = {n for n in names if n.startswith("trajschema/layouts/")}
        assert packaged == {f"trajschema/layouts/{p.name}" for p in LAYOUT_FILES}
        for path in LAYOUT_FILES:
            assert zf.read(f"trajschema/layouts/{path.name}") == path.read_bytes()
    assert not any(n.startswith("layouts/") for n in names)


PROBE = """
import json, trajschema as ts
from trajschema.files.paths import packaged_dir
names = ts.schema_names()
print(json.dumps({
    "file": ts.__file__,
    "packaged_dir": str(packaged_dir()),
    "names": names,
    "loaded": [ts.load_schema(n).name for n in names],
    "vlm_mrope_moe": list(ts.load_schema("vlm_mrope_moe").lineage),
    "layouts": [ts.load_layout(n).name for n in ts.layout_names()],
}))
"""


def test_a_non_editable_install_finds_every_schema(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    # torch, pydantic, ... come from this environment. A .pth line only appends the directory
    # to sys.path (its own .pth files, including the editable-install hook, are not run), and
    # after the new venv's site-packages, so the wheel's trajschema is the one imported.
    (site / "_dev_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)])

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRAJSCHEMA_PATH", "PYTHONHOME")}
    done = _run([str(python), "-c", PROBE], cwd=elsewhere, env=env)
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert Path(report["file"]).resolve().is_relative_to(site.resolve()), report["file"]
    assert Path(report["packaged_dir"]).resolve() == (site / "trajschema" / "schemas").resolve()
    assert report["names"] == sorted(p.stem for p in SCHEMA_FILES)
    assert report["loaded"] == report["names"]
    assert report["vlm_mrope_moe"] == ["vlm_mrope_moe", "vlm_mrope", "moe_routed", "text"]
    assert report["layouts"] == sorted(p.stem for p in LAYOUT_FILES)
