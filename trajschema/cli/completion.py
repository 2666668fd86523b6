"""``trajschema completion bash|zsh|fish``: a shell completion script generated from the parser.

The script knows the commands, their options and the values of options with choices;
for a schema name it asks ``trajschema completion --list-schemas`` when TAB is pressed,
so a schema added to ``TRAJSCHEMA_PATH`` completes without regenerating the script.
Where a bundle directory may stand instead of a schema (``show``), directories complete
beside the names; a FILE (``check``) completes to files and directories alike.
Nothing here imports torch or rich: the script is generated at shell start-up
(``eval "$(trajschema completion bash)"``) and must be quick.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, Any

from trajschema.cli.args import FORMATTER, CommandError, write

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["BUNDLE_ARGUMENTS", "SCHEMA_ARGUMENTS", "SHELLS", "add_completion", "completion_script", "run_completion"]

SHELLS = ("bash", "zsh", "fish")

#: The arguments that take a schema name (command, argparse dest); files complete too where a path is allowed.
SCHEMA_ARGUMENTS = frozenset(
    {
        ("show", "name"),
        ("export", "name"),
        ("pad", "name"),
        ("diff", "old"),
        ("diff", "new"),
        ("check", "schema"),
        ("infer", "base"),
        ("demo", "schema"),
    }
)

#: The schema arguments that also take a bundle directory: directories complete beside the schema names.
BUNDLE_ARGUMENTS = frozenset({("show", "name")})

#: Metavars of arguments that take a file or directory path.
_PATH_METAVARS = frozenset({"FILE", "PATH", "DIR"})


def add_completion(sub: Any) -> None:
    """Register ``trajschema completion``."""
    p = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh, fish)",
        description=(
            "Print a completion script for SHELL: commands, options, the values of options with "
            "choices, and schema names (asked of trajschema when TAB is pressed, so schemas added "
            "to TRAJSCHEMA_PATH complete too)."
        ),
        epilog=(
            "Exit status: 0 printed, 2 a usage error.\n\n"
            "Example:\n"
            "  trajschema completion bash > ~/.local/share/bash-completion/completions/trajschema\n"
            "  trajschema completion zsh > ~/.zfunc/_trajschema\n"
            "  trajschema completion fish > ~/.config/fish/completions/trajschema.fish\n\n"
            "(zsh reads ~/.zfunc when ~/.zshrc has fpath+=(~/.zfunc) before compinit.) "
            "Or load it as each shell starts, in ~/.bashrc or ~/.zshrc:\n"
            '  eval "$(trajschema completion bash)"'
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("shell", nargs="?", choices=SHELLS, metavar="SHELL", help="bash, zsh or fish")
    # What the scripts call for schema names: not for people, so not in the help.
    p.add_argument("--list-schemas", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(run=run_completion)


def run_completion(args: argparse.Namespace, console: Console) -> int:
    if args.list_schemas:
        from trajschema.load import schema_names

        write("\n".join(schema_names()))
        return 0
    if args.shell is None:
        raise CommandError("expected a shell: bash, zsh or fish (e.g. trajschema completion bash)")
    write(completion_script(args.root_parser, args.shell))
    return 0


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script of ``parser`` (the ``trajschema`` parser) for ``shell``."""
    commands = _commands(parser)
    if shell == "bash":
        return _bash(commands)
    if shell == "zsh":
        return _zsh(commands)
    if shell == "fish":
        return _fish(commands)
    raise CommandError(f"unknown shell {shell!r}: expected bash, zsh or fish")


# -- what the parser declares ------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Option:
    flags: tuple[str, ...]
    help: str
    value: str | None  # None: a flag; "schema", "bundle", "path", "choice" or "any": what its value is
    choices: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class _Command:
    name: str
    help: str
    options: tuple[_Option, ...]
    positional: str | None  # what its positionals complete to: "schema", "bundle", "path", "choice" or None
    choices: tuple[str, ...] = ()


def _value_kind(command: str, action: argparse.Action) -> str:
    if (command, action.dest) in BUNDLE_ARGUMENTS:
        return "bundle"
    if (command, action.dest) in SCHEMA_ARGUMENTS:
        return "schema"
    if action.choices is not None:
        return "choice"
    return "path" if action.metavar in _PATH_METAVARS else "any"


def _commands(parser: argparse.ArgumentParser) -> list[_Command]:
    # argparse has no public way to walk its subcommands and options: read its tables.
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: str(c.help or "") for c in sub._choices_actions}
    commands = [_Command("", "", _options("", parser), None)]
    for name, command_parser in sub.choices.items():
        positionals = [a for a in command_parser._actions if not a.option_strings]
        first = positionals[0] if positionals else None
        commands.append(
            _Command(
                name,
                helps.get(name, ""),
                _options(name, command_parser),
                _value_kind(name, first) if first is not None else None,
                tuple(map(str, first.choices or ())) if first is not None else (),
            )
        )
    return commands


def _options(command: str, parser: argparse.ArgumentParser) -> tuple[_Option, ...]:
    options = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue  # a positional, or a hidden alias (still accepted, never offered)
        value = None if action.nargs == 0 else _value_kind(command, action)
        choices = tuple(map(str, action.choices or ()))
        options.append(_Option(tuple(action.option_strings), " ".join(str(action.help or "").split()), value, choices))
    return tuple(options)


# -- bash --------------------------------------------------------------------------------


def _words(items: Any) -> str:
    return " ".join(items)


def _bash(commands: list[_Command]) -> str:
    top, subcommands = commands[0], commands[1:]
    cases = []
    for c in subcommands:
        value_cases = "\n".join(
            f"                {'|'.join(o.flags)}) _trajschema_value {o.value} '{_words(o.choices)}'; return ;;"
            for o in c.options
            if o.value is not None
        )
        flags = _words(f for o in c.options for f in o.flags)
        cases.append(
            f"        {c.name})\n"
            f'            case "$prev" in\n{value_cases}\n            esac\n'
            f"            if [[ \"$cur\" == -* ]]; then _trajschema_value choice '{flags}'; "
            f"else _trajschema_value {c.positional or 'none'} '{_words(c.choices)}'; fi ;;"
        )
    names = _words(c.name for c in subcommands)
    top_flags = _words(f for o in top.options for f in o.flags)
    return _BASH.format(commands=names, top_flags=top_flags, cases="\n".join(cases))


_BASH = """\
# bash completion for trajschema, generated by `trajschema completion bash`.
_trajschema_value() {{
    # $1: what the word is (schema, bundle, path, choice, any, none); $2: the choices.
    local IFS=$'\\n'
    case "$1" in
        choice) COMPREPLY=($(IFS=' ' compgen -W "$2" -- "$cur")) ;;
        schema|bundle)
            if [[ "$cur" == */* ]]; then COMPREPLY=($(compgen -f -- "$cur"))
            else COMPREPLY=($(compgen -W "$("${{COMP_WORDS[0]}}" completion --list-schemas 2>/dev/null)" -- "$cur"))
                if [[ "$1" == bundle ]]; then
                    # A bundle is a directory: offer those too, shown with a / and no space after.
                    COMPREPLY+=($(compgen -d -- "$cur"))
                    compopt -o filenames 2>/dev/null
                fi
            fi ;;
        path) COMPREPLY=($(compgen -f -- "$cur")) ;;
        *) COMPREPLY=() ;;
    esac
}}

_trajschema() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" command="" i
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ "${{COMP_WORDS[i]}}" != -* ]]; then command="${{COMP_WORDS[i]}}"; break; fi
    done
    case "$command" in
        "")
            if [[ "$cur" == -* ]]; then _trajschema_value choice '{top_flags}'
            else _trajschema_value choice '{commands}'; fi ;;
{cases}
    esac
}}
complete -o default -F _trajschema trajschema
"""


# -- zsh ---------------------------------------------------------------------------------


def _zsh_text(text: str) -> str:
    """``text`` inside a single-quoted zsh ``_arguments`` spec: no quote, bracket or colon left bare."""
    return text.replace("'", "'\\''").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")


def _zsh_action(kind: str | None, choices: tuple[str, ...]) -> str:
    return {
        "schema": "_trajschema_schemas",
        "bundle": "_trajschema_schemas",  # its _files offers directories too
        "path": "_files",
        "choice": f"({' '.join(choices)})",
        "any": " ",
    }.get(kind or "", " ")


def _zsh_spec(o: _Option) -> str:
    exclusive = f"({' '.join(o.flags)})" if len(o.flags) > 1 else ""
    flags = "{" + ",".join(o.flags) + "}" if len(o.flags) > 1 else o.flags[0]
    spec = f"'{exclusive}'{flags}" if exclusive else ""
    value = "" if o.value is None else f":{o.flags[-1].lstrip('-')}:{_zsh_action(o.value, o.choices)}"
    body = f"[{_zsh_text(o.help)}]{value}"
    return f"{spec}'{body}'" if exclusive else f"'{flags}{body}'"


def _zsh(commands: list[_Command]) -> str:
    top, subcommands = commands[0], commands[1:]
    described = "\n".join(f"        '{c.name}:{_zsh_text(c.help)}'" for c in subcommands)
    cases = []
    for c in subcommands:
        specs = [_zsh_spec(o) for o in c.options]
        if c.positional is not None:
            specs.append(f"'*:{c.name}:{_zsh_action(c.positional, c.choices)}'")
        cases.append(f"        {c.name}) _arguments -s \\\n            " + " \\\n            ".join(specs) + " ;;")
    top_specs = " \\\n        ".join(_zsh_spec(o) for o in top.options)
    return _ZSH.format(described=described, cases="\n".join(cases), top_specs=top_specs)


_ZSH = """\
#compdef trajschema
# zsh completion for trajschema, generated by `trajschema completion zsh`.
_trajschema_schemas() {{
    local -a names
    names=(${{(f)"$("${{words[1]}}" completion --list-schemas 2>/dev/null)"}})
    _describe -t schemas 'schema' names
    _files -g '*.(yaml|yml)'
}}

_trajschema() {{
    local context state state_descr line
    typeset -A opt_args
    _arguments -C \\
        {top_specs} \\
        '1:command:->command' \\
        '*::argument:->argument'
    case $state in
    command)
        local -a commands
        commands=(
{described}
        )
        _describe -t commands 'command' commands ;;
    argument)
        case $line[1] in
{cases}
        esac ;;
    esac
}}

if [[ "$funcstack[1]" == "_trajschema" ]]; then
    _trajschema "$@"
else
    compdef _trajschema trajschema
fi
"""


# -- fish --------------------------------------------------------------------------------


def _fish_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_value(kind: str | None, choices: tuple[str, ...]) -> str:
    if kind == "choice":
        return f"-x -a {_fish_text(' '.join(choices))}"
    if kind in ("schema", "bundle"):  # -F offers files and directories beside the names
        return "-r -F -a '(__trajschema_schemas)'"
    if kind == "path":
        return "-r -F"
    return "-x" if kind == "any" else ""


def _fish(commands: list[_Command]) -> str:
    top, subcommands = commands[0], commands[1:]
    lines = [
        "# fish completion for trajschema, generated by `trajschema completion fish`.",
        "function __trajschema_schemas",
        "    trajschema completion --list-schemas 2>/dev/null",
        "end",
        "complete -c trajschema -f",
    ]
    for o in top.options:
        lines.append(f"complete -c trajschema -n __fish_use_subcommand {_fish_flags(o)} -d {_fish_text(o.help)}")
    for c in subcommands:
        lines.append(f"complete -c trajschema -n __fish_use_subcommand -a {c.name} -d {_fish_text(c.help)}")
    for c in subcommands:
        when = f"-n '__fish_seen_subcommand_from {c.name}'"
        for o in c.options:
            value = _fish_value(o.value, o.choices)
            lines.append(f"complete -c trajschema {when} {_fish_flags(o)} {value} -d {_fish_text(o.help)}".rstrip())
        if c.positional is not None:
            lines.append(f"complete -c trajschema {when} {_fish_value(c.positional, c.choices)}")
    return "\n".join(lines) + "\n"


def _fish_flags(o: _Option) -> str:
    parts = []
    for flag in o.flags:
        parts.append(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}")
    return " ".join(parts)
