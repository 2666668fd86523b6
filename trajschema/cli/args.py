"""The command line's shared argument vocabulary: argument types, the help layout, `CommandError`.

Every subcommand module builds its options from here, so the same thing is spelled and
checked the same way everywhere. Light on purpose: importing it imports no torch,
tensordict, Ray or rich, so ``--help`` and ``--version`` start fast.
"""

from __future__ import annotations

import argparse
import re
import sys

from trajschema.core.types import MAX_SIZE

__all__ = [
    "FORMATTER",
    "CommandError",
    "dim_setting",
    "non_negative_int",
    "positive_int",
    "positive_size",
    "printable",
    "size_int",
    "write",
]

#: How a subcommand's help is laid out: descriptions and epilogs keep their line breaks.
FORMATTER = argparse.RawDescriptionHelpFormatter


class CommandError(ValueError):
    """Input the command line cannot use; its message is the one line printed after ``error:``."""


def write(text: str) -> None:
    """Print ``text`` to stdout as it is (YAML, JSON, source code: nothing rich may rewrap)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


# -- argument types (argparse reports their errors as one usage line) -----------------------


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


def positive_size(text: str) -> int:
    """An argparse type: an integer from 1 to ``2**63 - 1`` (a count torch can hold)."""
    return _int_at_least(text, 1, "a positive integer", MAX_SIZE)


def size_int(text: str) -> int:
    """An argparse type: an integer from 0 to ``2**63 - 1`` (a size or token id torch can hold)."""
    return _int_at_least(text, 0, "an integer >= 0", MAX_SIZE)


def _decimal(text: str) -> int | None:
    # int() also takes "1_000", non-ASCII digits ("١٢") and inner blanks; a command line wants plain digits.
    text = text.strip()
    return int(text, 10) if re.fullmatch(r"[+-]?[0-9]+", text) else None


def _int_at_least(text: str, minimum: int, what: str, maximum: int | None = None) -> int:
    value = _decimal(text)
    if value is None or value < minimum:
        raise argparse.ArgumentTypeError(f"expected {what}, found {text!r}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"expected {what} up to 2**63-1 (a torch size), found {text}")
    return value


def dim_setting(text: str) -> tuple[str, int]:
    """An argparse type: ``NAME=SIZE`` with SIZE an integer from 0 to ``2**63 - 1`` (``prompt=15``)."""
    name, sep, size = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=SIZE (e.g. prompt=15), found {text!r}")
    value = _decimal(size)
    if value is None:
        raise argparse.ArgumentTypeError(f"size of dim {name!r} must be an integer, found {size!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"size of dim {name!r} must be >= 0, found {value}")
    if value > MAX_SIZE:
        raise argparse.ArgumentTypeError(f"size of dim {name!r} must be at most 2**63-1 (a torch size), found {value}")
    return name, value


def printable(text: str) -> str:
    """``text`` with control characters written as escapes (``\\n``, ``\\x1b``), so it prints as one inert line.

    Field names and values come from data files: a key holding a newline or a terminal
    escape sequence must not split a table row or recolour the user's terminal.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
