"""The CLI reference page, written from the ``trajschema`` argument parser.

`command_docs` reads an `argparse.ArgumentParser` into plain
`CommandDoc` records (the only code here that touches argparse's private
attributes); `cli_page` renders them as Markdown: one section per subcommand with
its usage, description, options table and example.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import textwrap
from collections.abc import Sequence

from docs_hooks.schema_pages import code, prose, table

#: Width of the usage lines, so the page does not depend on the builder's terminal.
USAGE_WIDTH = 78


@dataclasses.dataclass(frozen=True)
class OptionDoc:
    """One argument: ``flags`` empty for a positional; ``value`` its metavar as usage prints it."""

    flags: tuple[str, ...]
    name: str
    value: str
    default: str
    required: bool
    help: str


@dataclasses.dataclass(frozen=True)
class CommandDoc:
    """A command or subcommand: ``path`` is the words typed, e.g. ``("trajschema", "show")``."""

    path: tuple[str, ...]
    summary: str  # the one-line help its parent lists
    description: str
    usage: str
    epilog: str
    options: tuple[OptionDoc, ...]
    subcommands: tuple[CommandDoc, ...]

    @property
    def anchor(self) -> str:
        return "-".join(self.path[1:]) or "top"


def _option(action: argparse.Action, formatter: argparse.HelpFormatter) -> OptionDoc:
    default_metavar = action.dest.upper() if action.option_strings else action.dest
    value = "" if action.nargs == 0 else formatter._format_args(action, default_metavar)
    # An empty list is what an append option starts from, not a default worth listing.
    takes_default = action.nargs != 0 and action.default not in (None, argparse.SUPPRESS, [])
    return OptionDoc(
        flags=tuple(action.option_strings),
        name=action.dest,
        value=value,
        default=str(action.default) if takes_default else "",
        required=bool(action.required),
        help=formatter._expand_help(action) if action.help else "",
    )


def command_docs(parser: argparse.ArgumentParser, path: Sequence[str] = (), summary: str = "") -> CommandDoc:
    """``parser`` and its subcommands (recursively) as plain records.

    Argparse has no public API for walking subcommands or formatting one argument, so
    this is the one place that reads ``_actions``, ``_choices_actions`` and the help
    formatter's private methods.
    """
    path = tuple(path) or (parser.prog,)
    formatter = parser.formatter_class(prog=parser.prog, width=USAGE_WIDTH)  # type: ignore[call-arg]
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    options, children = [], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # aliases map to the same parser
                    seen.add(id(sub))
                    children.append(command_docs(sub, (*path, name), helps.get(name, "")))
        elif not isinstance(action, argparse._HelpAction) and action.help is not argparse.SUPPRESS:
            options.append(_option(action, formatter))
    return CommandDoc(
        path=path,
        summary=summary,
        description=parser.description or "",
        usage=formatter.format_help().strip(),
        epilog=parser.epilog or "",
        options=tuple(options),
        subcommands=tuple(children),
    )


def all_commands(doc: CommandDoc) -> list[CommandDoc]:
    """``doc`` and every subcommand below it, depth first."""
    return [doc, *(c for sub in doc.subcommands for c in all_commands(sub))]


def _options_table(options: Sequence[OptionDoc]) -> str:
    rows = []
    for o in options:
        name = ", ".join(code(f) for f in o.flags) if o.flags else code(o.value or o.name)
        value = code(o.value) if o.flags else "positional"
        help_text = prose(o.help) + (" **(required)**" if o.required and o.flags else "")
        rows.append([name, value, code(o.default), help_text])
    return table(["argument", "value", "default", "description"], rows)


_COMMAND_LINE = re.compile(r"^(\w+=\S*\s+)*trajschema\b")


def help_text(text: str) -> list[str]:
    """Help text as Markdown: its paragraphs as prose, its indented lines as a code block.

    A block of ``trajschema ...`` command lines is highlighted as bash.

    >>> help_text("Example:\\n  trajschema show text")
    ['Example:', '', '```bash', 'trajschema show text', '```', '']
    """
    out: list[str] = []
    lines = text.strip("\n").splitlines()
    i = 0
    while i < len(lines):
        j = i
        if lines[i][:1].isspace():
            while j < len(lines) and (lines[j][:1].isspace() or not lines[j]):
                j += 1
            block = textwrap.dedent("\n".join(lines[i:j])).strip("\n").splitlines()
            lang = "bash" if all(_COMMAND_LINE.match(ln) for ln in block) else "text"
            out += [f"```{lang}", *block, "```", ""]
        elif lines[i].strip():
            while j < len(lines) and lines[j].strip() and not lines[j][:1].isspace():
                j += 1
            out += [prose(" ".join(lines[i:j])), ""]
        else:
            j += 1
        i = j
    return out


def _section(doc: CommandDoc, level: int) -> list[str]:
    lines = [f"{'#' * level} {code(' '.join(doc.path))} {{#{doc.anchor}}}", ""]
    lines += help_text(doc.description or doc.summary)
    lines += ["```text", doc.usage, "```", ""]
    if doc.options:
        lines += [_options_table(doc.options), ""]
    if doc.subcommands:
        rows = [[f"[{code(' '.join(c.path))}](#{c.anchor})", prose(c.summary)] for c in doc.subcommands]
        lines += [table(["subcommand", "what it does"], rows), ""]
    lines += help_text(doc.epilog)
    return lines


def cli_page(doc: CommandDoc) -> str:
    """The whole CLI reference: the top-level command, then each subcommand in its own section."""
    lines = [
        "# CLI reference",
        "",
        f"Installing the package installs the {code(doc.path[0])} command. This page is generated "
        "from its argument parser when the site is built; `--help` on any command prints the same. "
        "What the commands print is on [CLI by example](cli-by-example.md).",
        "",
    ]
    lines += _section(doc, 2)[2:]  # the top-level command needs no heading of its own
    for sub in all_commands(doc)[1:]:
        lines += _section(sub, 2)
    return "\n".join(lines)
