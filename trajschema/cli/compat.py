"""Schema compatibility as the command line reports it: ``diff``'s report, which ``check``
gives too before it checks a bundle against another schema than the one it was recorded with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trajschema.cli.args import printable
from trajschema.cli.output import fold, print_styled, terminal_width

if TYPE_CHECKING:
    from rich.console import Console

    from trajschema.schema import Schema

__all__ = ["compatibility_report", "print_changes"]


def _change_record(c: Any) -> dict[str, Any]:
    return {
        "path": c.path,
        "kind": c.kind,
        "breaking": c.breaking,
        "backward_breaking": c.backward_breaking,
        "forward_breaking": c.forward_breaking,
        "message": c.message,
        "what": c.what,
        "why": c.why,
    }


def compatibility_report(old: Schema, new: Schema, mode: str) -> tuple[list[Any], dict[str, Any]]:
    """The changes from ``old`` to ``new`` in ``mode``, and what ``diff --json`` prints of them
    (after ``version`` and ``command``): old, new, mode, compatible, changes. ``check``
    reports a bundle's recorded schema against ``--schema`` with it."""
    changes = old.compatibility(new, mode=mode)
    report = {
        "old": old.name,
        "new": new.name,
        "mode": mode,
        "compatible": not any(c.breaking for c in changes),
        "changes": [_change_record(c) for c in changes],
    }
    return changes, report


def _print_change(console: Console, c: Any, width: int | None) -> None:
    """``BREAKING fields.x.dtype  int64 -> int32``, and why: under it on a terminal, in parentheses piped."""
    mark, style = ("BREAKING", "bold red") if c.breaking else ("ok", "green")
    path, what, why = printable(c.path), printable(c.what), printable(c.why)
    if width is None:
        print_styled(console, [(mark, style), (f" {path}  ", "bold"), (f"{what}  ({why})", None)])
        return
    # WHAT wraps lined up under itself; the path, one word, is never split.
    first, *rest = fold(what, width, indent=0, first=f"{mark} {path}  ")
    print_styled(console, [(mark, style), (f" {path}", "bold"), (first[len(mark) + 1 + len(path) :], None)])
    for line in rest:
        print_styled(console, [(line, None)])
    for line in fold(why, width):
        print_styled(console, [(line, "dim")])


def print_changes(console: Console, changes: list[Any], mode: str) -> None:
    """What ``diff`` prints of ``changes``: a line each, then compatible, incompatible or no changes."""
    width = terminal_width(console)
    for c in changes:
        _print_change(console, c, width)
    n = len(changes)
    breaking = sum(1 for c in changes if c.breaking)
    if breaking:
        summary = f"incompatible ({mode}): {breaking} breaking of {n} change{'s' if n != 1 else ''}"
        print_styled(console, [(summary, "bold red")])
    elif changes:
        print_styled(console, [(f"compatible ({mode}): {n} non-breaking change{'s' if n != 1 else ''}", "green")])
    else:
        print_styled(console, [("no changes", None)])
