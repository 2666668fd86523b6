"""How the command line prints: the console, colour, tables, and the versioned JSON shape of ``--json``.

On a terminal a table is laid out at the terminal's width: the cells a user copies (names,
shapes, dtypes) are never cut or split, long cells wrap between words, and what still does
not fit (descriptions first) moves under its row. Off a terminal (a pipe, a file) every
table is plain records: its title line (if it has a title), a header line, then one
tab-separated line per row, with no padding, so ``grep``, ``cut -f`` and ``awk -F'\\t'``
read it.

Colour follows no-color.org and force-color.org: ``NO_COLOR`` (set and not empty) turns it
off, even on a terminal; otherwise ``FORCE_COLOR`` (set and not empty) turns it on, even off
one; otherwise a terminal gets colour and anything else does not.

Light on purpose (rich is imported on first use), like `trajschema.cli.args`.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import textwrap
import unicodedata
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from trajschema.cli.args import printable, write

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "JSON_VERSION",
    "PIPED",
    "STYLES",
    "Table",
    "cells",
    "color_wanted",
    "emit_json",
    "fold",
    "is_terminal",
    "make_console",
    "print_styled",
    "print_table",
    "table",
    "terminal_width",
]

#: The version of every ``--json`` shape; bumped only when a key changes meaning or goes away.
JSON_VERSION = 1

#: How a table prints, for the help of every command that prints one.
PIPED = (
    "On a terminal the tables fit its width (long cells wrap, descriptions go under their\n"
    "row); piped or redirected, each table is a header line (after its title line, for a\n"
    "table with a title, such as show's sections) and one tab-separated line per row,\n"
    "never cut or padded (cut -f, awk -F'\\t')."
)

#: Styles of verdicts and counts on a terminal (rich drops them under NO_COLOR and off a terminal).
STYLES = {"valid": "bold green", "invalid": "bold red", "unusable": "bold red", "code": "yellow", "count": "bold"}

#: Blanks between two columns of a table on a terminal.
_GAP = 2

#: How far a line moved under its row (a description, a cell that did not fit) is indented.
INDENT = 4


def emit_json(command: str, report: dict[str, Any]) -> None:
    """Print ``report`` as one JSON object, after ``"version"`` and ``"command"`` keys."""
    write(json.dumps({"version": JSON_VERSION, "command": command, **report}, indent=2))


def is_terminal() -> bool:
    """Whether stdout is a terminal (tests replace this to render as a terminal would)."""
    return sys.stdout.isatty()


def color_wanted(tty: bool) -> bool:
    """Whether to colour: ``NO_COLOR`` wins, then ``FORCE_COLOR``, then whether stdout is a terminal."""
    if os.environ.get("NO_COLOR", ""):
        return False
    if os.environ.get("FORCE_COLOR", ""):
        return True
    return tty


def make_console() -> Console:
    """The console every command prints through."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # Newer rich exits with status 1 here; report it as any other write to a closed pipe.
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    tty = is_terminal()
    color = color_wanted(tty)
    # Off a terminal no control codes (colour only if forced) and no width limit: a line
    # stays one line however long, so it can be grepped. Colour is decided here, not by
    # rich's own reading of the environment, so that every command agrees.
    return _Console(
        markup=False,
        highlight=False,
        emoji=False,
        force_terminal=tty,
        no_color=not color,
        color_system=("auto" if tty else "standard") if color else None,
        width=None if tty else 4000,
    )


def terminal_width(console: Console) -> int | None:
    """The width to lay lines out at: the terminal's, or ``None`` off a terminal (one record a line)."""
    return console.width if is_terminal() else None


def fold(text: str, width: int | None, *, indent: int = INDENT, first: str = "") -> list[str]:
    """``text`` wrapped between words to ``width`` columns, ``indent`` blanks in; one line when ``width`` is None.

    ``first`` starts the first line (a label such as ``"checks: "``); the lines after it
    line up under the text. Words are never split: a word longer than the line stands alone.
    """
    lead = " " * indent
    if width is None:
        return [f"{lead}{first}{text}"]
    return textwrap.wrap(
        text,
        max(width, indent + len(first) + 1),
        initial_indent=lead + first,
        subsequent_indent=lead + " " * len(first),
        break_long_words=False,
        break_on_hyphens=False,
    ) or [lead + first.rstrip()]


def print_styled(console: Console, parts: Iterable[tuple[str, str | None]]) -> None:
    """Print one line made of ``(text, style)`` parts (style as rich spells it: ``"bold red"``), uncut.

    Without colour (piped, or ``NO_COLOR``) the line is written as it is, so that the
    commands that print nothing else through rich (``diff``) never import it.
    """
    if not color_wanted(is_terminal()):
        write("".join(text for text, _ in parts))
        return
    from rich.text import Text

    console.print(Text.assemble(*((t, s or "") for t, s in parts)), soft_wrap=True)


def cells(text: str) -> int:
    """The columns ``text`` takes on a terminal: two for a wide (East Asian) character, none for a combining one."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int, right: bool) -> str:
    blanks = " " * max(0, width - cells(text))
    return blanks + text if right else text + blanks


class Table:
    """Rows of plain cells, laid out for a terminal of a given width or as tab-separated records.

    ``whole`` columns are never wrapped (what a user copies); the others wrap between
    words. ``notes`` columns are printed under their row on a terminal, unlabelled (a
    description). When a row still does not fit, the rightmost wrapping column and then
    the rightmost whole one (never the first) move under the row as ``header: value`` lines.
    """

    def __init__(
        self,
        title: str | None,
        columns: Sequence[str],
        *,
        right: Sequence[str] = (),
        whole: Sequence[str] | None = None,
        notes: Sequence[str] = (),
    ) -> None:
        self.title = title
        self.columns = list(columns)
        self.right = set(right)
        self.whole = set(self.columns[:-1] if whole is None else whole)
        self.notes = set(notes)
        self.rows: list[list[str]] = []

    def add_row(self, *values: str) -> None:
        """Add a row; each cell is made one inert line (control characters escaped)."""
        if len(values) != len(self.columns):
            raise ValueError(f"table row has {len(values)} cells, the table {len(self.columns)} columns")
        self.rows.append([printable(v) for v in values])

    def records(self) -> list[str]:
        """The table off a terminal: the title, the header, then one tab-separated line per row."""
        lines = [self.title] if self.title else []
        return lines + ["\t".join(row) for row in [self.columns, *self.rows]]

    def lines(self, width: int) -> list[str]:
        """The table laid out ``width`` columns wide."""
        inline = [i for i, c in enumerate(self.columns) if c not in self.notes]
        widths = self._fit(inline, width)
        while widths is None and len(inline) > 1:
            movable = [i for i in inline[1:] if self.columns[i] not in self.whole] or inline[1:]
            inline.remove(movable[-1])
            widths = self._fit(inline, width)
        if widths is None:  # the first column alone is wider than the terminal: it still stays whole
            widths = {inline[0]: self._natural(inline[0])}
        out = [self.title] if self.title else []
        out.append(self._join(inline, widths, self.columns).rstrip())
        out.append((" " * _GAP).join("─" * widths[i] for i in inline))
        for row in self.rows:
            out += self._row_lines(row, inline, widths, width)
        return out

    def _natural(self, i: int) -> int:
        return max(cells(self.columns[i]), *(cells(r[i]) for r in self.rows)) if self.rows else len(self.columns[i])

    def _least(self, i: int) -> int:
        if self.columns[i] in self.whole:
            return self._natural(i)
        words = [cells(w) for r in self.rows for w in r[i].split()]
        return max(cells(self.columns[i]), *words) if words else cells(self.columns[i])

    def _fit(self, inline: list[int], width: int) -> dict[int, int] | None:
        """Column widths that fit ``width``, wrapping columns narrowed as needed; None when none do."""
        room = width - _GAP * (len(inline) - 1)
        widths = {i: self._least(i) for i in inline}
        if sum(widths.values()) > room:
            return None
        spare = room - sum(widths.values())
        # The columns nearest their natural width first: a short list left unwrapped reads
        # better than every cell wrapped a little.
        for i in sorted(inline, key=lambda i: self._natural(i) - widths[i]):
            grow = min(spare, self._natural(i) - widths[i])
            widths[i] += grow
            spare -= grow
        return widths

    def _join(self, inline: list[int], widths: dict[int, int], row: Sequence[str]) -> str:
        return (" " * _GAP).join(_pad(row[i], widths[i], self.columns[i] in self.right) for i in inline)

    def _row_lines(self, row: list[str], inline: list[int], widths: dict[int, int], width: int) -> list[str]:
        wrapped = {
            i: [row[i]] if self.columns[i] in self.whole or not row[i] else fold(row[i], widths[i], indent=0)
            for i in inline
        }
        height = max(len(w) for w in wrapped.values())
        lines = []
        for k in range(height):
            line = [wrapped[i][k] if i in wrapped and k < len(wrapped[i]) else "" for i in range(len(row))]
            lines.append(self._join(inline, widths, line).rstrip())
        for i, cell in enumerate(row):
            if i in inline or not cell:
                continue
            label = "" if self.columns[i] in self.notes else f"{self.columns[i]}: "
            lines += fold(cell, width, first=label)
        return lines


def table(
    title: str | None,
    columns: list[str],
    *,
    right: tuple[str, ...] = (),
    whole: Sequence[str] | None = None,
    notes: Sequence[str] = (),
) -> Table:
    """A `Table` of plain cells; see there for ``whole`` and ``notes``."""
    return Table(title, columns, right=right, whole=whole, notes=notes)


def print_table(console: Console, t: Table) -> None:
    """Print ``t`` at the terminal's width, or as tab-separated records off a terminal."""
    width = terminal_width(console)
    write("\n".join(t.records() if width is None else t.lines(width)))
