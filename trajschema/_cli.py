"""The ``trajschema`` command line: the parser, dispatch to the subcommands, one-line errors and exit codes.

The subcommands live in :mod:`trajschema._cli_schemas` (list, show, export, infer, diff)
and :mod:`trajschema._cli_data` (check, plan, pad), which never import this module;
``demo`` is registered here and imports its runner only when it runs.

Exit status: 0 success, 1 a negative answer (invalid data, a breaking change, a schema
file that does not load), 2 unusable input. Every error is one line on stderr,
``trajschema <command>: error: <what>``, argparse's usage errors included; an unexpected
exception says so in one line and re-raises with ``TRAJSCHEMA_DEBUG=1``.
"""

from __future__ import annotations

import argparse
import errno
import os
import re
import sys
import warnings
from typing import TYPE_CHECKING, Any, NoReturn, TextIO

from . import __version__
from ._cli_data import FORMATTER, add_check, add_pad, add_plan, non_negative_int, positive_int
from ._cli_schemas import add_diff, add_export, add_infer, add_list, add_show
from ._errors import SchemaError, SchemaMatchError, SchemaNotFoundError
from ._loading import load_schema

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["DEBUG_VAR", "build_parser", "main"]

#: Set to 1 to see the traceback of an unexpected error instead of its one-line summary.
DEBUG_VAR = "TRAJSCHEMA_DEBUG"

#: Errors of bad input: reported in one line with exit status 2. Anything else is a bug.
_EXPECTED: tuple[type[BaseException], ...] = (ValueError, TypeError, OSError, SchemaNotFoundError, ImportError)

#: The status of a process killed by SIGPIPE (128 + 13), as shells report it.
_EXIT_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (``trajschema check: error: ...``) with exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


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
    for add in (add_list, add_show, add_check, add_plan, add_pad, add_infer, add_export, add_diff, _add_demo):
        add(sub)
    for command_parser in sub.choices.values():
        command_parser.set_defaults(command_parser=command_parser)
    return parser


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
        epilog="Exit status: 0 when every step succeeds, 1 when one fails.\n\nExample:\n  trajschema demo --prompts 45",
        formatter_class=FORMATTER,
    )
    p.add_argument("--schema", default="vlm_mrope_moe", metavar="NAME", help="the schema (default: vlm_mrope_moe)")
    p.add_argument("--prompts", type=positive_int, default=45, help="GRPO groups in the rollout (default 45)")
    p.add_argument(
        "--rollout-n", type=positive_int, default=8, help="the rollout's n: trajectories per prompt (default 8)"
    )
    p.add_argument("--dp-size", type=positive_int, default=2, metavar="N", help="data-parallel ranks (default 2)")
    p.add_argument(
        "--mini-batch-size",
        type=positive_int,
        default=15,
        metavar="M",
        help="the actor's ppo_mini_batch_size, in prompts (default 15)",
    )
    p.add_argument("--seed", type=non_negative_int, default=0, help="random seed of the samples (default 0)")
    p.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace, console: Console) -> int:
    load_schema(args.schema)  # an unknown schema fails here, before Ray starts
    from ._demo import run_demo

    report = run_demo(
        schema=args.schema,
        prompts=args.prompts,
        rollout_n=args.rollout_n,
        dp_size=args.dp_size,
        mini_batch_size=args.mini_batch_size,
        seed=args.seed,
        console=console,
        progress=console.is_terminal,
    )
    return 0 if report.ok else 1


def _console() -> Console:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # Newer rich exits with status 1 here; report it as any other write to a closed pipe.
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    tty = sys.stdout.isatty()
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
    try:
        try:
            args = _parse(build_parser(), argv)
        except SystemExit as exc:  # argparse: --help, --version and usage errors (already printed)
            status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
        else:
            command = args.command_parser.prog
            status = int(args.run(args, _console()))
        sys.stdout.flush()  # a closed pipe shows here at the latest, not in the interpreter's exit
        return status
    except BrokenPipeError:  # `trajschema ... | head`: the reader left; say nothing more
        _discard_stdout()
        return _EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        _fail(command, "interrupted")
        return 130
    except _EXPECTED as exc:
        _fail(command, error_line(exc))
        return 2
    except Exception as exc:
        if os.environ.get(DEBUG_VAR, "") not in ("", "0"):
            raise
        _fail(command, f"unexpected {type(exc).__name__}: {error_line(exc)} (set {DEBUG_VAR}=1 for the traceback)")
        return 2


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args, extra = parser.parse_known_args(argv)
    if extra:  # blame the subcommand, whose usage the user is typing
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def one_line(text: str) -> str:
    """``text`` as one line: colour codes dropped, its lines joined with ``; ``."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def error_line(exc: BaseException) -> str:
    """The one line an error is reported as (a :class:`SchemaError` by its count and first violation)."""
    if isinstance(exc, SchemaError) and not isinstance(exc, SchemaMatchError) and exc.violations:
        n = len(exc.violations)
        where = f" of schema {exc.schema_name!r}" if exc.schema_name else ""
        return f"{n} violation{'s' if n != 1 else ''}{where}; first: {exc.violations[0]}"
    return one_line(str(exc)) or type(exc).__name__


def _fail(command: str, message: str, *, label: str = "error") -> None:
    try:
        sys.stderr.write(f"{command}: {label}: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr is closed too: nothing left to tell
        pass


def _discard_stdout() -> None:
    # Python flushes stdout again at exit; pointing it at /dev/null keeps that flush from
    # raising a second BrokenPipeError (the recipe of the `signal` module's documentation).
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # no real file descriptor (an in-process caller's stream)
        pass
