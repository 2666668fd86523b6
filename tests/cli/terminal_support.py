"""Running the command line in process, piped or as a terminal of a given width, and reading what it printed.

`piped` runs ``main([...])`` with stdout a pipe, as a script reads it; `plain_environment`
clears what would colour, reshape or redirect that output. `in_terminal` runs it with
stdout taken for a terminal of ``columns`` columns (``COLUMNS``, which rich and argparse
both read), colour off unless asked. The checks name what a user copies from the output:
each token must stand whole on one line, and nothing may be cut with an ellipsis or run
past the width.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest

from trajschema.cli import output
from trajschema.cli.app import main

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: The variables `plain_environment` clears: colour forcing, debug re-raise, extra schema
#: directories, the terminal width.
STYLING = ("FORCE_COLOR", "NO_COLOR", "TRAJSCHEMA_DEBUG", "TRAJSCHEMA_PATH", "COLUMNS")


def plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clear `STYLING` for this test (a test sets what it needs after)."""
    for var in STYLING:
        monkeypatch.delenv(var, raising=False)


def piped(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    """Run ``trajschema *argv`` in process, stdout piped; returns (status, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def in_terminal(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *argv: str,
    columns: int = 80,
    color: bool = False,
) -> tuple[int, str, str]:
    """Run ``trajschema *argv`` as on a terminal ``columns`` wide; returns (status, stdout, stderr)."""
    monkeypatch.setattr(output, "is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    if color:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", "1")
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def plain(text: str) -> str:
    """``text`` without colour codes."""
    return ANSI.sub("", text)


def layout_problems(text: str, tokens: Iterable[str], *, columns: int = 80) -> list[str]:
    """What is wrong with ``text`` as shown ``columns`` wide: lines too long, ellipses, tokens not whole on a line."""
    lines = plain(text).splitlines()
    problems = [f"line {i} is {len(line)} columns: {line!r}" for i, line in enumerate(lines) if len(line) > columns]
    problems += [f"line {i} is cut with an ellipsis: {line!r}" for i, line in enumerate(lines) if "…" in line]
    problems += [f"{t!r} is not whole on any line" for t in tokens if not any(t in line for line in lines)]
    return problems
