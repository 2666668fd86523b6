"""How the command line prints: the console, tables, and the versioned JSON shape of ``--json``.

Light on purpose (rich is imported on first use), like `trajschema.cli.args`.
"""

from __future__ import annotations

import errno
import json
import sys
from typing import TYPE_CHECKING, Any

from trajschema.cli.args import write

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["JSON_VERSION", "emit_json", "is_terminal", "make_console", "print_table", "table"]

#: The version of every ``--json`` shape; bumped only when a key changes meaning or goes away.
JSON_VERSION = 1


def emit_json(command: str, report: dict[str, Any]) -> None:
    """Print ``report`` as one JSON object, after ``"version"`` and ``"command"`` keys."""
    write(json.dumps({"version": JSON_VERSION, "command": command, **report}, indent=2))


def is_terminal() -> bool:
    """Whether stdout is a terminal (tests replace this to render as a terminal would)."""
    return sys.stdout.isatty()


def make_console() -> Console:
    """The console every command prints through."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # Newer rich exits with status 1 here; report it as any other write to a closed pipe.
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    tty = is_terminal()
    # Off a terminal (a pipe, a file, a test) no colour or control codes, and no width
    # limit: a table row stays one line however long, so it can be grepped.
    return _Console(
        markup=False,
        highlight=False,
        emoji=False,
        force_terminal=tty,
        color_system="auto" if tty else None,
        width=None if tty else 4000,
    )


def print_table(console: Console, table: Any) -> None:
    """Print a rich table without the blanks rich pads its last column with."""
    with console.capture() as captured:
        console.print(table)
    write("\n".join(line.rstrip() for line in captured.get().splitlines()))


def table(title: str | None, columns: list[str], *, right: tuple[str, ...] = ()) -> Any:
    """A rich table of plain cells: a header rule, no outer edge."""
    from rich import box
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for column in columns:
        t.add_column(column, justify="right" if column in right else "left")
    return t
