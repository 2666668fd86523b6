"""The command line's shared argument vocabulary: argument types, shared options, the help layout, `CommandError`.

Every subcommand module builds its options from here, so the same thing is spelled and
checked the same way everywhere. Light on purpose: importing it imports no torch,
tensordict, Ray or rich, so ``--help`` and ``--version`` start fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import textwrap
from collections.abc import Callable
from typing import Any

from trajschema.core import MAX_SIZE

__all__ = [
    "FORMATTER",
    "SHARED_OPTIONS",
    "CommandError",
    "SharedOption",
    "add_shared",
    "dim_setting",
    "non_negative_int",
    "positive_int",
    "positive_size",
    "printable",
    "size_int",
    "uncoloured",
    "write",
]


class HelpFormatter(argparse.HelpFormatter):
    """Help laid out for the terminal it is shown on (argparse reads its width from ``COLUMNS``).

    Descriptions and epilogs are written as paragraphs separated by blank lines; each is
    re-flowed to the width, never splitting a word. An indented line (an example command,
    a list item) is kept as written; an example too long for the width goes on several
    lines joined by `` \\``, so that it can still be copied into a shell whole.
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(reflow(text, width, indent))

    def _split_lines(self, text: str, width: int) -> list[str]:
        # argparse's own wrap breaks a word longer than the width (an option's example, a path).
        return textwrap.wrap(" ".join(text.split()), width, break_long_words=False, break_on_hyphens=False)

    # An option with choices shows as ``--format FORMAT`` and its help names the choices:
    # argparse's ``{yaml,json-schema,jaxtyping}`` cannot wrap, and runs past a narrow terminal.
    def _metavar_formatter(self, action: argparse.Action, default_metavar: str) -> Callable[[int], tuple[str, ...]]:
        if _choices_hidden(action):
            return lambda size: (action.dest.upper(),) * size
        return super()._metavar_formatter(action, default_metavar)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        if text and _choices_hidden(action) and not all(str(c) in text for c in action.choices or ()):
            text += "; one of " + ", ".join(map(str, action.choices or ()))
        return text


def _choices_hidden(action: argparse.Action) -> bool:
    return action.metavar is None and action.choices is not None and bool(action.option_strings)


#: How every command's help is laid out (see `HelpFormatter`).
FORMATTER = HelpFormatter


def reflow(text: str, width: int, indent: str = "") -> list[str]:
    """The lines of help ``text`` at ``width`` columns (see `HelpFormatter`).

    A run of lines that start at the margin is a paragraph, re-flowed. An indented line
    starts an item, and the lines indented deeper below it continue it: an item that fits
    is kept as written; one too wide is re-flowed under its own hanging indent, or, when
    it is a command, broken into shell continuation lines that still paste whole.

    Examples:
        >>> reflow("A paragraph\\nhand-wrapped.\\n\\nExample:\\n  trajschema plan --dp-size 2", 40)
        ['A paragraph hand-wrapped.', '', 'Example:', '  trajschema plan --dp-size 2']
        >>> reflow("  trajschema pad text --count 2 --out pad.pt", 30)
        ['  trajschema pad text \\\\', '      --count 2 --out pad.pt']
        >>> reflow("  yaml   the schema as a YAML file\\n         (inherited entries restated)", 30)
        ['  yaml   the schema as a YAML', '         file (inherited', '         entries restated)']
    """
    width = max(width, 20)
    lines: list[str] = []
    for block in _blocks(text.splitlines()):
        if not block[0].strip():
            lines.append("")
        elif not block[0][0].isspace():
            lines += _fill(" ".join(block), width, indent, indent)
        elif all(len(indent + line.rstrip()) <= width for line in block):
            lines += [indent + line.rstrip() for line in block]
        elif block[0].split()[0] in _COMMANDS:
            lines += [part for line in block for part in _continued(indent + line.rstrip(), width)]
        else:
            lines += _item(block, width, indent)
    return lines


def _item(block: list[str], width: int, indent: str) -> list[str]:
    """An indented item too wide for ``width``, re-flowed under its hanging indent.

    A term set apart by two or more blanks, with the lines below it starting where its
    text starts (``  yaml   the schema as ...``), keeps its blanks: the text re-flows in
    its own column, so the terms of a list stay lined up.
    """
    term = _TERM.match(block[0])
    column = term.end() if term else 0
    if term and column <= width // 2 and all(_margin(line) == column for line in block[1:]):
        text = " ".join([block[0][column:], *block[1:]])
        return _fill(text, width, indent + block[0][:column], indent + " " * column)
    first, rest = _margin(block[0]), (_margin(block[1]) if len(block) > 1 else _margin(block[0]) + 2)
    return _fill(" ".join(block), width, indent + " " * first, indent + " " * rest)


#: The term of a definition-list item: its indent, the term, and the two or more blanks before its text.
_TERM = re.compile(r"\s+\S+(?: \S+)*? {2,}(?=\S)")


#: The first words of an indented line that make it a command to copy (wrapped with `` \\``).
_COMMANDS = frozenset({"trajschema", "eval", "python", "pip", "$"})


def _margin(line: str) -> int:
    return len(line) - len(line.lstrip())


def _blocks(lines: list[str]) -> list[list[str]]:
    """Blank lines, paragraphs (runs of lines at the margin) and items (an indented line and deeper ones)."""
    blocks: list[list[str]] = []
    for line in lines:
        last = blocks[-1] if blocks else None
        at_margin = bool(line.strip()) and not line[0].isspace()
        if last is not None and line.strip() and last[0].strip():
            if at_margin and not last[0][0].isspace():
                last.append(line)  # the paragraph goes on
                continue
            if not at_margin and last[0][0].isspace() and _margin(line) > _margin(last[0]):
                last.append(line)  # the item goes on, indented deeper
                continue
        blocks.append([line])
    return blocks


def _fill(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(
        " ".join(text.split()),
        width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _continued(line: str, width: int) -> list[str]:
    """A command line wider than ``width`` as shell continuation lines (each but the last ends in `` \\``)."""
    if len(line) <= width:
        return [line]
    margin = _margin(line)
    words = line.split()
    out: list[str] = []
    current = " " * margin + words[0]
    for word in words[1:]:
        if len(current) + 1 + len(word) + 2 > width:  # room for the trailing " \\"
            out.append(current + " \\")
            current = " " * (margin + 4) + word
        else:
            current += " " + word
    return [*out, current]


@dataclasses.dataclass(frozen=True)
class SharedOption:
    """One option several commands take: one spelling, one metavar, one help, one type.

    A metavar says what the value is: a size named as verl's config names it (``DP_SIZE``,
    ``ROLLOUT_N``), or for a count what it counts (``PROMPTS``, ``SAMPLES``), so
    ``--actor-mini-batch-size PROMPTS`` says the unit verl counts mini-batches in.
    """

    flag: str
    metavar: str
    help: str
    type: Callable[[str], int]


def _shared_options() -> dict[str, SharedOption]:
    option = SharedOption
    return {
        "dp_size": option("--dp-size", "DP_SIZE", "data-parallel ranks", positive_int),
        "batch_size": option(
            "--batch-size", "SAMPLES", "samples (trajectories) in the batch, before padding", positive_int
        ),
        "rollout_n": option(
            "--rollout-n", "ROLLOUT_N", "the rollout's n: responses (trajectories) per prompt", positive_int
        ),
        "actor_mini_batch_size": option(
            "--actor-mini-batch-size", "PROMPTS", "the actor's ppo_mini_batch_size, in prompts", positive_int
        ),
        "critic_mini_batch_size": option(
            "--critic-mini-batch-size", "PROMPTS", "the critic's ppo_mini_batch_size, in prompts", positive_int
        ),
        "tp_size": option("--tp-size", "TP_SIZE", "tensor-parallel size", positive_int),
        "cp_size": option("--cp-size", "CP_SIZE", "context-parallel size", positive_int),
        "prompts": option("--prompts", "PROMPTS", "GRPO groups (prompts) in the rollout", positive_int),
        "count": option("--count", "SAMPLES", "how many padding samples", positive_size),
        "eos_token_id": option("--eos-token-id", "TOKEN_ID", "the EOS token id for 'pad: eos' fields", size_int),
    }


def add_shared(
    parser: argparse.ArgumentParser,
    name: str,
    *,
    required: bool = False,
    default: Any = None,
    note: str = "",
    aliases: tuple[str, ...] = (),
    type: Callable[[str], Any] | None = None,
) -> argparse.Action:
    """Add the shared option ``name`` (a key of `SHARED_OPTIONS`) to ``parser``.

    The help says the default when there is one, and ``note`` after the shared help.
    ``aliases`` are old spellings: still accepted, never shown in help or suggested.
    ``type`` replaces the shared type where a command allows a narrower range.
    """
    option = SHARED_OPTIONS[name]
    text = option.help + (f" {note}" if note else "") + (f" (default {default})" if default is not None else "")
    kind = type or option.type
    action = parser.add_argument(
        option.flag, dest=name, type=kind, metavar=option.metavar, required=required, default=default, help=text
    )
    if aliases and required:
        raise ValueError(
            f"{option.flag}: a required option cannot take hidden aliases (argparse would not accept them)"
        )
    for alias in aliases:  # its own action: an error names the spelling the user typed
        parser.add_argument(alias, dest=name, type=kind, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    return action


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


#: The options several commands share, by the name of the value they set (see `SharedOption`).
SHARED_OPTIONS: dict[str, SharedOption] = _shared_options()


def uncoloured(text: str) -> str:
    """``text`` without terminal colour codes (torch and rich colour parts of their messages)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def printable(text: str) -> str:
    """``text`` with control characters written as escapes (``\\n``, ``\\x1b``), so it prints as one inert line.

    Field names and values come from data files: a key holding a newline or a terminal
    escape sequence must not split a table row or recolour the user's terminal.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
