"""The ``trajschema`` command line: the parser, dispatch to the subcommands, one-line errors and exit codes.

The subcommands live in `trajschema.cli.schemas` (list, show, export, infer, diff),
`trajschema.cli.check`, `trajschema.cli.plan`, `trajschema.cli.pad` and
`trajschema.cli.completion`, with `trajschema.cli.bundles` for what ``check`` and ``show``
do with a bundle; none imports this module. ``demo`` is registered here and imports its
runner only when it runs.

Start-up is part of the interface: building the parser imports no torch, tensordict or
rich (`tests/cli/test_startup.py` pins it), so ``--help``, ``--version`` and ``plan``
answer at once. A misspelt command, option or choice value gets one "did you mean"; no
command at all lists the commands, on stderr with exit status 2.

Exit status: 0 success, 1 a negative answer (invalid data, a breaking change, a schema
file that does not load), 2 unusable input. Every error is one line on stderr,
``trajschema <command>: error: <what>``, argparse's usage errors included; an unexpected
exception says so in one line and re-raises with ``TRAJSCHEMA_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import warnings
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

from trajschema.cli.args import FORMATTER, add_shared, non_negative_int, printable, uncoloured
from trajschema.cli.check import add_check
from trajschema.cli.completion import add_completion
from trajschema.cli.output import make_console
from trajschema.cli.pad import add_pad
from trajschema.cli.plan import add_plan
from trajschema.cli.schemas import add_diff, add_export, add_infer, add_list, add_show
from trajschema.core import VERSION as __version__
from trajschema.core import SchemaDefinitionError, SchemaError, SchemaMatchError, SchemaNotFoundError, did_you_mean

if TYPE_CHECKING:
    from _typeshed import SupportsWrite
    from rich.console import Console

__all__ = ["DEBUG_VAR", "DEMO_JSON_HELP", "build_parser", "main"]

#: Set to 1 to see the traceback of an unexpected error instead of its one-line summary.
DEBUG_VAR = "TRAJSCHEMA_DEBUG"

#: Errors of bad input: reported in one line with exit status 2. Anything else is a bug.
_EXPECTED: tuple[type[BaseException], ...] = (ValueError, TypeError, OSError, SchemaNotFoundError, ImportError)

#: How a write to stdout fails when the stream cannot take it (EPIPE is a reader that left).
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EIO, errno.EBADF, errno.EFBIG, errno.EDQUOT})

#: The status of a process killed by SIGPIPE (128 + 13), as shells report it.
_EXIT_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (``trajschema check: error: ...``) with exit status 2.

    Options must be spelled out: argparse would otherwise take ``--dp-siz`` (or ``--d``)
    for ``--dp-size``, so a typo would pass, and a script using a prefix would break as
    soon as a second option shares it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        # argparse's own message lists the choices but does not guess; name the likely one.
        choices = action.choices
        if choices is None or value in choices:
            return
        hint = did_you_mean(value, [str(c) for c in choices])
        if isinstance(action, argparse._SubParsersAction):
            raise argparse.ArgumentError(None, f"unknown command {value!r}{hint} (commands: {', '.join(choices)})")
        listed = ", ".join(map(str, choices))
        raise argparse.ArgumentError(action, f"invalid choice: {value!r}{hint} (choose from {listed})")

    def _print_message(self, message: str, file: SupportsWrite[str] | None = None) -> None:
        # argparse swallows write errors here, so `--help > /dev/full` would exit 0 with
        # nothing written; let them reach main(), which reports them like any other output.
        if message:
            (file or sys.stderr).write(message)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``trajschema`` and all its subcommands (the CLI reference is generated from it)."""
    parser = _Parser(
        prog="trajschema",
        description=(
            "Typed schemas, validation and padding for reinforcement-learning trajectories of\n"
            "large language models. Run `trajschema COMMAND --help` for a command's options and\n"
            "an example."
        ),
        epilog=(
            "Exit status: 0 success; 1 a negative answer (invalid samples, a breaking schema\n"
            "change, a schema file that does not load); 2 unusable input or a usage error. Errors\n"
            f"are one line on stderr; set {DEBUG_VAR}=1 for the traceback of an unexpected one.\n\n"
            "Example:\n"
            "  trajschema check rollout.pt --schema auto"
        ),
        formatter_class=FORMATTER,
    )
    parser.add_argument("--version", action="version", version=f"trajschema {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands", required=True)
    adders = (add_list, add_show, add_check, add_plan, add_pad, add_infer, add_export, add_diff, _add_demo)
    for add in (*adders, add_completion):
        add(sub)
    for command_parser in sub.choices.values():
        command_parser.set_defaults(command_parser=command_parser, root_parser=parser)
    return parser


#: The shape of ``demo --json`` (`trajschema.cli.demo.report_json`), for the command's epilog.
DEMO_JSON_HELP = (
    '--json prints one object: version (1), command ("demo"), ok, the arguments (schema,\n'
    "prompts, rollout_n, dp_size, actor_mini_batch_size, seed), trajectories_per_prompt\n"
    "(fewest, most), real_samples (written), required_multiple, padding_samples (added by\n"
    "pad_to_multiple), total_samples (read back), invalid_samples, problems (the first few\n"
    "violations), metrics (per metric: real, its value over the real samples, and all,\n"
    "padding included), seconds (start, write, pad, read, validate, stop, total) and\n"
    "processes_left (null when not checked). Nothing else is printed."
)


def _add_demo(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the end-to-end demo on a local Ray + TransferQueue",
        description=(
            "Run one PPO/GRPO step's data path on an embedded local Ray + TransferQueue: generate a\n"
            "realistic multi-trajectory rollout (PROMPTS GRPO groups of 1 to 2 x ROLLOUT_N - 1\n"
            "trajectories each), write it through the validating writer, pad it to the multiple the\n"
            "step needs, read it back, check every sample, compute metrics with and without the\n"
            "padding filter, stop everything and print a report. The arguments are checked before\n"
            "anything starts."
        ),
        epilog=(
            f"{DEMO_JSON_HELP}\n\n"
            "Exit status: 0 when every step succeeds, 1 when one fails.\n\n"
            "Example:\n  trajschema demo --prompts 45"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("--schema", default="vlm_mrope_moe", metavar="NAME", help="the schema (default: vlm_mrope_moe)")
    add_shared(p, "prompts", default=45)
    add_shared(p, "rollout_n", default=8)
    add_shared(p, "dp_size", default=2)
    add_shared(p, "actor_mini_batch_size", default=15, aliases=("--mini-batch-size",))
    p.add_argument(
        "--seed", type=_seed, default=0, metavar="SEED", help="random seed of the samples, 0 to 2**32-1 (default 0)"
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object (and no progress)")
    p.set_defaults(run=_run_demo)


def _seed(text: str) -> int:
    from trajschema.cli.demo import MAX_SEED  # the demo's module imports torch: only when a seed is given

    seed = non_negative_int(text)
    if seed > MAX_SEED:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2**32-1, found {text}")
    return seed


def _run_demo(args: argparse.Namespace, console: Console) -> int:
    from trajschema.cli.demo import check_arguments, report_json, run_demo
    from trajschema.cli.output import emit_json

    # Bad sizes and an unknown schema fail here, before anything is built or Ray starts.
    check_arguments(
        schema=args.schema,
        prompts=args.prompts,
        rollout_n=args.rollout_n,
        dp_size=args.dp_size,
        mini_batch_size=args.actor_mini_batch_size,
        seed=args.seed,
    )
    report = run_demo(
        schema=args.schema,
        prompts=args.prompts,
        rollout_n=args.rollout_n,
        dp_size=args.dp_size,
        mini_batch_size=args.actor_mini_batch_size,
        seed=args.seed,
        console=None if args.json else getattr(console, "made", console),  # rich's progress wants the console itself
        progress=not args.json and console.is_terminal,
        show=not args.json,
    )
    if args.json:
        emit_json("demo", report_json(report))
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``) and return its exit status."""
    with warnings.catch_warnings():
        # Said on first use of nested tensors in every run; not news to a command-line user.
        warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors is in prototype stage")
        warnings.showwarning = _show_warning
        return _run(argv)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    _fail("trajschema", f"{category.__name__}: {one_line(str(message))}", label="warning")


def _run(argv: list[str] | None) -> int:
    command = "trajschema"
    if sys.stdout is None:  # started with stdout closed (`trajschema list >&-`)
        _fail(command, "standard output is closed; nothing could be written")
        return 2
    try:
        parser = build_parser()
        if not (sys.argv[1:] if argv is None else argv):  # as ruff does: the commands, and a usage error
            parser.print_help(sys.stderr)
            return 2
        try:
            args = _parse(parser, argv)
        except SystemExit as exc:  # argparse: --help, --version and usage errors (already printed)
            status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
        else:
            command = args.command_parser.prog
            status = int(args.run(args, cast("Console", _LazyConsole())))
        sys.stdout.flush()  # a closed pipe shows here at the latest, not in the interpreter's exit
        return status
    except BrokenPipeError:  # `trajschema ... | head`: the reader left; say nothing more
        _discard_stdout()
        return _EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        _fail(command, "interrupted")
        return 130
    except OSError as exc:
        # Files the commands read or write fail with their own message (and file name); an
        # error number alone is the output stream failing: a full disk, a closed descriptor.
        output = exc.filename is None and exc.errno in _OUTPUT_ERRNOS
        _fail(command, f"cannot write the output: {exc.strerror}" if output else error_line(exc))
        if output:
            _discard_stdout()  # or the interpreter's own flush at exit fails again, with a traceback
        return 2
    except _EXPECTED as exc:
        first, *rest = error_lines(exc)
        _fail(command, first, more=rest)
        return 2
    except Exception as exc:
        if os.environ.get(DEBUG_VAR, "") not in ("", "0"):
            raise
        _fail(command, f"unexpected {type(exc).__name__}: {error_line(exc)} (set {DEBUG_VAR}=1 for the traceback)")
        return 2


class _LazyConsole:
    """The console of `make_console`, made on first use: a command that prints no table (``plan``,
    ``--json``) never imports rich, which costs a fifth of a second."""

    def __init__(self) -> None:
        self._made: Console | None = None

    @property
    def made(self) -> Console:
        if self._made is None:
            self._made = make_console()
        return self._made

    def __getattr__(self, name: str) -> Any:
        return getattr(self.made, name)


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    argv = sys.argv[1:] if argv is None else list(argv)
    _check_option_names(parser, argv)
    args, extra = parser.parse_known_args(argv)
    if extra:  # blame the subcommand, whose usage the user is typing
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _check_option_names(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Refuse a misspelled ``--option`` with a suggestion, before argparse parses.

    Left to argparse, ``plan --dp-siz 2`` would first fail for the missing ``--dp-size``,
    and ``trajschema --verison`` for the missing command, and the typo would only show up
    in a second run. An option before the command is one of ``trajschema``'s own; after
    it, one of the command's.
    """
    # argparse has no public way to list a subcommand's options: read its tables.
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    at = next((i for i, a in enumerate(argv) if a in sub.choices), len(argv))
    for token in argv[:at]:  # nothing but trajschema's own options comes before the command
        if token == "--":
            return
        if token.startswith("-"):
            _check_option(parser, token)
    if at == len(argv):
        return
    command_parser = sub.choices[argv[at]]
    for token in argv[at + 1 :]:
        if token == "--":
            break
        if token.startswith("--"):
            _check_option(command_parser, token)


def _check_option(parser: argparse.ArgumentParser, token: str) -> None:
    name = token.partition("=")[0]
    actions = parser._option_string_actions
    if name in actions:
        return
    shown = [k for k, action in actions.items() if action.help != argparse.SUPPRESS]  # no hidden alias
    parser.error(f"unrecognized option {name!r}{did_you_mean(name, shown)}")


def one_line(text: str) -> str:
    """``text`` as one line: colour codes dropped, its lines joined with ``; ``, other control characters escaped."""
    text = uncoloured(text)
    return printable("; ".join(line.strip() for line in text.splitlines() if line.strip()))


def error_line(exc: BaseException) -> str:
    """The one line an error is reported as.

    A [`SchemaError`][trajschema.SchemaError] is shown by its count and first violation.
    """
    if isinstance(exc, SchemaError) and not isinstance(exc, SchemaMatchError) and exc.violations:
        n = len(exc.violations)
        where = f" of schema {exc.schema_name!r}" if exc.schema_name else ""
        return f"{n} violation{'s' if n != 1 else ''}{where}; first: {exc.violations[0]}"
    return one_line(str(exc)) or type(exc).__name__


def error_lines(exc: BaseException) -> list[str]:
    """The lines an error is reported as: `error_line`, or for a schema file with several
    problems its header line, then one indented ``file:line:col: path: problem`` line each."""
    if isinstance(exc, SchemaDefinitionError) and len(exc.errors) > 1:
        return [printable(line) for line in str(exc).splitlines() if line.strip()]
    return [error_line(exc)]


def _fail(command: str, message: str, *, label: str = "error", more: list[str] | None = None) -> None:
    try:
        sys.stderr.write(f"{command}: {label}: {message}\n" + "".join(f"{line}\n" for line in more or ()))
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr is closed too (or None): nothing left to tell
        pass


def _discard_stdout() -> None:
    # Python flushes stdout again at exit; pointing it at /dev/null keeps that flush from
    # raising a second BrokenPipeError (the recipe of the `signal` module's documentation).
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (an in-process caller's stream)
        pass
