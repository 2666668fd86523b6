"""The fast commands import nothing heavy: `--version`, `--help`, each `COMMAND --help`, `plan`, `completion`;
and the commands that only read schemas (`list`, `show`, `diff`, `export`) import no torch, tensordict,
numpy, Ray or rich (they read YAML, with PyYAML and pydantic, and nothing else).

Every command used to take 4 to 6 seconds because importing the package imported torch
and tensordict. Nothing here is timed (a loaded machine would make that flaky); what
is pinned is the cause: the modules these commands import. All of them run in ONE
fresh interpreter, in order, each checked against everything imported so far, so a
command is blamed only for what it loaded itself; a meta-test shows the check fails
when a heavy import is forced.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trajschema.cli.app import build_parser

# Not one of these for a command that prints help, a version, plan's numbers or a script.
HEAVY = (
    "torch",
    "tensordict",
    "numpy",
    "ray",
    "transfer_queue",
    "rich",
    "pydantic",
    "yaml",
    "jaxtyping",
    "beartype",
    "hypothesis",
)

PLAN = ["plan", "--dp-size", "2", "--batch-size", "353", "--rollout-n", "8", "--actor-mini-batch-size", "15"]


def _commands() -> list[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices)


FAST = {
    "--version": ["--version"],
    "--help": ["--help"],
    **{f"{name} --help": [name, "--help"] for name in _commands()},
    "plan": PLAN,
    "plan --json": [*PLAN, "--json"],
    "plan usage error": ["plan", "--dp-size", "0"],
    "unknown command": ["plann"],
    "completion bash": ["completion", "bash"],
    "completion zsh": ["completion", "zsh"],
    "completion fish": ["completion", "fish"],
}

# What reading schemas may not import: reading YAML takes PyYAML and pydantic, nothing else.
TENSOR_HEAVY = tuple(h for h in HEAVY if h not in ("pydantic", "yaml"))

CONFIG = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "qwen3-moe")

#: Every command that only reads schemas, in each form that needs no tensor (piped: no rich).
SCHEMA_ONLY = {
    "list": ["list"],
    "list --json": ["list", "--json"],
    "show": ["show", "vlm_mrope_moe"],
    "show --json": ["show", "moe_routed", "--json"],
    "show --config": ["show", "moe_routed", "--config", CONFIG],
    "diff": ["diff", "moe_routed", "vlm_mrope_moe"],
    "diff --json": ["diff", "text", "moe_routed", "--json"],
    "export yaml": ["export", "vlm_mrope_moe", "--format", "yaml"],
    "export json-schema": ["export", "moe_routed", "--format", "json-schema"],
    "export jaxtyping": ["export", "vlm_mrope_moe", "--format", "jaxtyping"],
    "show a missing schema": ["show", "no_such_schema"],
}

# Runs each (id, argv) through main() in one interpreter and prints, per id, the heavy
# modules loaded so far and the status. Output goes to a buffer: only the JSON is printed.
_PROBE = """
import contextlib, io, json, sys
def heavy():
    loaded = [m for m, v in list(sys.modules.items()) if v is not None]
    return sorted(h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in loaded))
results = {}
for step, code in PRELUDE:
    exec(code, {})
    results[step] = {"heavy": heavy(), "status": None}
from trajschema.cli.app import main
for step, argv in STEPS:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = main(argv)
    results[step] = {"heavy": heavy(), "status": status}
print(json.dumps(results))
"""


def _probe(
    tmp_path: Any, steps: dict[str, list[str]], prelude: dict[str, str] | None = None, heavy: tuple[str, ...] = HEAVY
) -> dict[str, Any]:
    code = f"HEAVY = {heavy!r}\nPRELUDE = {list((prelude or {}).items())!r}\nSTEPS = {list(steps.items())!r}\n{_PROBE}"
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,  # not the checkout: the installed package, as a user runs it
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _blame(results: dict[str, Any]) -> dict[str, list[str]]:
    """For each step, the heavy modules loaded after it (the first step to load one is the culprit)."""
    return {step: seen["heavy"] for step, seen in results.items() if seen["heavy"]}


@pytest.fixture(scope="module")
def fast_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _probe(tmp_path_factory.mktemp("cwd"), FAST)


@pytest.mark.slow
def test_the_fast_commands_import_nothing_heavy(fast_results: dict[str, Any]) -> None:
    assert _blame(fast_results) == {}
    assert set(fast_results) == set(FAST)  # every step ran


@pytest.mark.slow
def test_the_fast_commands_really_ran(fast_results: dict[str, Any]) -> None:
    statuses = {step: seen["status"] for step, seen in fast_results.items()}
    assert statuses == {**dict.fromkeys(FAST, 0), "plan usage error": 2, "unknown command": 2}


@pytest.mark.slow
def test_the_check_sees_a_forced_heavy_import(tmp_path: Any) -> None:
    # rich stands in for any heavy module: forcing it first must blame that step, and every
    # step after it, as the check would if a command imported it.
    results = _probe(tmp_path, {"--version": ["--version"]}, prelude={"forced": "import rich.console"})
    assert _blame(results) == {"forced": ["rich"], "--version": ["rich"]}
    assert results["--version"]["status"] == 0


@pytest.fixture(scope="module")
def schema_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _probe(tmp_path_factory.mktemp("cwd"), SCHEMA_ONLY, heavy=TENSOR_HEAVY)


@pytest.mark.slow
def test_the_schema_only_commands_import_no_tensor_library(schema_results: dict[str, Any]) -> None:
    assert _blame(schema_results) == {}
    assert set(schema_results) == set(SCHEMA_ONLY)


@pytest.mark.slow
def test_the_schema_only_commands_really_ran(schema_results: dict[str, Any]) -> None:
    statuses = {step: seen["status"] for step, seen in schema_results.items()}
    # diff exits 1 on a breaking change (both pairs have one); a missing schema is unusable input
    assert statuses == {**dict.fromkeys(SCHEMA_ONLY, 0), "diff": 1, "diff --json": 1, "show a missing schema": 2}


@pytest.mark.slow
def test_the_schema_check_sees_a_forced_torch_import(tmp_path: Any) -> None:
    results = _probe(tmp_path, {"list": ["list"]}, prelude={"forced": "import torch"}, heavy=TENSOR_HEAVY)
    assert _blame(results)["list"] == _blame(results)["forced"] and "torch" in _blame(results)["list"]
