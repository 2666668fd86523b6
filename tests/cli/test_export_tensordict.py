"""`trajschema export NAME --format pandera|typed-tensordict [--layout LAYOUT]`: the export room's source, printed."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

import trajschema as ts
from tests.cli.terminal_support import piped as run
from trajschema.export import pandera_source, typed_tensordict_source

HAS_TYPED = tuple(int(p) for p in importlib.metadata.version("tensordict").split(".")[:2]) >= (0, 12)
FORMATS = [
    "pandera",
    pytest.param("typed-tensordict", marks=pytest.mark.skipif(not HAS_TYPED, reason="tensordict < 0.12")),
]
SOURCE = {"pandera": pandera_source, "typed-tensordict": typed_tensordict_source}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("layout", [None, "verl_dataproto"])
def test_export_prints_the_export_rooms_source(capsys, fmt, layout):
    schema = ts.load_schema("vlm_mrope_moe")
    code, out, _ = run(capsys, "export", "vlm_mrope_moe", "--format", fmt, *(["--layout", layout] if layout else []))
    assert code == 0 and out == SOURCE[fmt](schema.plan, schema._bound(layout))
    code, out, _ = run(
        capsys, "export", "vlm_mrope_moe", "--format", fmt, "--json", *(["--layout", layout] if layout else [])
    )
    report = json.loads(out)
    assert (report["format"], report["layout"]) == (fmt, layout) and report["output"].startswith("# ")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--format", "yaml", "--layout", "skyrl"],
            "--layout applies to --format pandera and typed-tensordict, not yaml",
        ),
        (["--format", "pandera", "--layout", "thd"], "--layout 'thd' is a packed layout"),
        (["--format", "pandera", "--layout", "nope"], "nope"),
    ],
    ids=["layout with yaml", "packed layout", "unknown layout"],
)
def test_a_layout_the_export_cannot_take_exits_2_naming_it(capsys, argv, message):
    code, out, err = run(capsys, "export", "text", *argv)
    assert code == 2 and not out and message in err and err.startswith("trajschema export: error: ")


def test_without_pandera_the_pandera_format_exits_2_saying_what_to_install(capsys, monkeypatch):
    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "pandera":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    code, out, err = run(capsys, "export", "text", "--format", "pandera")
    assert code == 2 and not out
    assert "needs pandera>=0.35, which is not installed: pip install 'pandera>=0.35'" in err
    assert len(err.strip().splitlines()) == 1
