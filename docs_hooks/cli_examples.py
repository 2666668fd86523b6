"""The "CLI by example" page: the real output of the commands a new user runs.

Nothing on the page is written by hand. At build time `examples_page` writes a few
sample files to a temporary directory (with `trajschema.testing.verl_sample` and
`torch.save`), runs each example's ``trajschema.cli.app.main([...])`` in this process
as on an 80-column terminal without colour, and prints the command and what it printed
(stdout and stderr, in order). A command whose exit status is not the one the example
expects fails the build, so the page cannot drift from the command line. The build
machine's absolute paths are rewritten (`portable`): the page shows ``<repo>/schemas/…``,
never where the site happened to be built.

The "Machine output" section shows ``--json`` for every command whose parser has that
option, so a command that gains ``--json`` appears there with no edit here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

#: The terminal the examples are shown on.
COLUMNS = 80

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

#: The checkout the site is built from; the page shows it as ``<repo>``.
REPO = Path(__file__).resolve().parents[1]

#: Environment variables a build machine may set that would change what the commands print.
_ENV = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TRAJSCHEMA_PATH", "TRAJSCHEMA_DEBUG")


class ExampleError(RuntimeError):
    """An example's command exited with a status other than the one the page says."""


@dataclasses.dataclass(frozen=True)
class Example:
    """One command on the page: the heading it sits under, a sentence before it, its words, its exit status."""

    title: str
    intro: str
    argv: tuple[str, ...]
    status: int = 0

    @property
    def command(self) -> str:
        return " ".join(("trajschema", *(f"'{a}'" if " " in a else a for a in self.argv)))


@dataclasses.dataclass(frozen=True)
class Run:
    """What a command did: its exit status, everything it printed (stdout and stderr, in order), its stdout."""

    example: Example
    status: int
    output: str
    stdout: str


class _Tee(io.StringIO):
    """A stream that also copies what it is given to ``both`` (stdout and stderr interleaved)."""

    def __init__(self, both: io.StringIO) -> None:
        super().__init__()
        self.both = both

    def write(self, text: str) -> int:
        self.both.write(text)
        return super().write(text)


PLAN = ("plan", "--dp-size", "2", "--batch-size", "353", "--rollout-n", "8", "--actor-mini-batch-size", "15")

EXAMPLES: tuple[Example, ...] = (
    Example("Which schemas are there", "Every schema on the search path, and the architectures it claims:", ("list",)),
    Example(
        "What a schema declares",
        "A schema's fields, dims and tags, inherited entries included:",
        ("show", "text"),
    ),
    Example(
        "How much padding a batch needs",
        "For 353 trajectories on 2 data-parallel ranks, with `rollout.n` 8 and an actor mini-batch of 15:",
        PLAN,
    ),
    Example(
        "Checking a rollout file",
        "`rollout.pt` holds 8 samples written with `torch.save`; all of them follow `text` (exit status 0):",
        ("check", "rollout.pt", "--schema", "text"),
    ),
    Example(
        "Checking a rollout file",
        "`broken.pt` is the same rollout with a truncated mask, a float `input_ids` and three masks "
        "holding 2s; every violation is listed, then a summary (exit status 1):",
        ("check", "broken.pt", "--schema", "text"),
        status=1,
    ),
    Example(
        "Comparing two schemas",
        "What changes from `text` to `moe_routed`, and which change breaks readers of old samples (exit status 1):",
        ("diff", "text", "moe_routed"),
        status=1,
    ),
    Example(
        "Writing padding samples",
        "Three padding samples derived from the schema's pad rules, saved as a file `check` reads:",
        ("pad", "text", "--count", "3", "--eos-token-id", "2", "--out", "padding.pt"),
    ),
    Example(
        "Writing padding samples",
        "They validate, tags included:",
        ("check", "padding.pt", "--schema", "text"),
    ),
    Example(
        "Drafting a schema from data",
        "A draft schema for the samples of `rollout.pt`, to review before use:",
        ("infer", "rollout.pt", "--name", "my_text"),
    ),
    Example(
        "Exporting a schema",
        "The resolved `moe_routed` as one YAML file, with what it inherits from `text` restated "
        "(`--format json-schema` and `--format jaxtyping` derive other forms from the same declaration):",
        ("export", "moe_routed"),
    ),
)

#: For "Machine output": the example whose arguments each command's ``--json`` form reuses.
_JSON_ARGS: dict[str, tuple[str, ...]] = {
    "list": ("list",),
    "show": ("show", "text"),
    "plan": PLAN,
    "check": ("check", "broken.pt", "--schema", "text"),
    "diff": ("diff", "text", "moe_routed"),
    "pad": ("pad", "text", "--count", "3", "--eos-token-id", "2", "--out", "padding.pt"),
    "infer": ("infer", "rollout.pt", "--name", "my_text"),
    "export": ("export", "moe_routed"),
}


def write_samples(directory: Path) -> None:
    """The files the examples read: ``rollout.pt`` (8 valid ``text`` samples) and ``broken.pt``."""
    import torch

    from trajschema.testing import verl_sample

    samples = [verl_sample("text", 20, 5, uid=f"q{i // 4}", seed=i) for i in range(8)]
    torch.save(samples, directory / "rollout.pt")
    broken = [dict(s) for s in samples]
    broken[2]["response_mask"] = broken[2]["response_mask"][:-1]
    broken[5]["input_ids"] = broken[5]["input_ids"].float()
    for i in (1, 4, 6):
        broken[i]["loss_mask"] = broken[i]["loss_mask"] * 2
    torch.save(broken, directory / "broken.pt")


@contextlib.contextmanager
def _terminal(directory: Path) -> Iterator[tuple[io.StringIO, io.StringIO]]:
    """Inside ``directory``, an 80-column terminal without colour: (stdout and stderr together, stdout)."""
    from trajschema.cli import output

    saved_env = {k: os.environ.get(k) for k in _ENV}
    saved_cwd, saved_is_terminal = Path.cwd(), output.is_terminal
    for key in _ENV:
        os.environ.pop(key, None)
    os.environ.update(COLUMNS=str(COLUMNS), LINES="24", NO_COLOR="1")
    output.is_terminal = lambda: True
    both = io.StringIO()
    out, err = _Tee(both), _Tee(both)
    try:
        os.chdir(directory)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield both, out
    finally:
        os.chdir(saved_cwd)
        output.is_terminal = saved_is_terminal
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def portable(text: str, directory: Path, repo: Path = REPO, home: Path | None = None) -> str:
    """``text`` without the build machine's absolute paths.

    The examples' working ``directory`` becomes ``.``, the ``repo`` checkout ``<repo>``
    and the ``home`` directory (default: the user's) ``~``; the longest path is replaced
    first, so a checkout inside the home directory is still ``<repo>``.

    >>> portable("source: /home/me/trajschema/schemas/text.yaml, /home/me2, /home/me/x, /tmp/x1/pad.pt",
    ...          Path("/tmp/x1"), repo=Path("/home/me/trajschema"), home=Path("/home/me"))
    'source: <repo>/schemas/text.yaml, /home/me2, ~/x, ./pad.pt'
    """
    home = Path.home() if home is None else home
    places = {".": directory, "<repo>": repo, "~": home}
    # A path may print in its resolved form too (a temporary directory behind a symbolic link).
    found = {str(p): shown for shown, place in places.items() for p in {place, place.resolve()}}
    for path in sorted((p for p in found if p.strip("/")), key=len, reverse=True):
        # A whole path only: ``/home/me`` is not the start of ``/home/me2``.
        text = re.sub(re.escape(path) + r"(?![\w.-])", found[path], text)
    return text


def run(example: Example, directory: Path) -> Run:
    """Run one example in ``directory``; `ExampleError` when its exit status is not the expected one."""
    from trajschema.cli.app import main

    with _terminal(directory) as (both, out):
        status = main(list(example.argv))
    printed = portable(_ANSI.sub("", both.getvalue()), directory)
    if status != example.status:
        raise ExampleError(
            f"CLI by example: `{example.command}` exited with status {status}, not {example.status}: "
            + (printed.strip().splitlines() or ["(no output)"])[-1]
        )
    shown = "\n".join(line.rstrip() for line in printed.rstrip("\n").splitlines())
    return Run(example, status, shown, portable(_ANSI.sub("", out.getvalue()), directory))


def json_commands(parser: argparse.ArgumentParser) -> list[str]:
    """The subcommands whose parser has a ``--json`` option, in the order `_JSON_ARGS` lists them."""
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    has_json = {
        name for name, sub in subparsers.choices.items() if any("--json" in a.option_strings for a in sub._actions)
    }
    return [name for name in _JSON_ARGS if name in has_json]


def json_examples(parser: argparse.ArgumentParser) -> list[Example]:
    """One ``--json`` example per command that has the option."""
    found = []
    for name in json_commands(parser):
        argv = (*_JSON_ARGS[name], "--json")
        status = next((e.status for e in EXAMPLES if e.argv == _JSON_ARGS[name]), 0)
        found.append(Example(f"`trajschema {name} --json`", "", argv, status))
    return found


def console_block(r: Run) -> list[str]:
    """A ``console`` block: the command after a ``$`` prompt, then what it printed.

    The fence is longer than any run of backticks in the output, so output cannot close it.

    >>> console_block(Run(Example("t", "", ("export", "x")), 0, "```python\\nx\\n```", ""))
    ['````console', '$ trajschema export x', '```python', 'x', '```', '````', '']
    """
    fence = "`" * max(3, 1 + max(map(len, re.findall(r"`+", r.output)), default=0))
    return [f"{fence}console", f"$ {r.example.command}", *r.output.splitlines(), fence, ""]


def _section(runs: Sequence[Run]) -> list[str]:
    lines: list[str] = []
    title = ""
    for r in runs:
        if r.example.title != title:
            title = r.example.title
            lines += [f"## {title}", ""]
        lines += [r.example.intro, "", *console_block(r)]
    return lines


def _machine_section(runs: Sequence[Run]) -> list[str]:
    lines = [
        "## Machine output",
        "",
        "With `--json` a command prints one JSON object instead of text, for scripts and CI. "
        'Every object starts with the same two keys: `"version"`, the version of its shape '
        '(`1`; a change that removes or renames a key raises it), and `"command"`, the '
        "command that printed it. The exit status is the same as without `--json`.",
        "",
    ]
    for r in runs:
        _check_envelope(r)
        lines += [f"### {r.example.title}", "", *console_block(r)]
    return lines


def _check_envelope(r: Run) -> None:
    """A ``--json`` example must print (on stdout) one JSON object starting with ``version`` and ``command``."""
    try:
        report: Any = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise ExampleError(f"CLI by example: `{r.example.command}` did not print one JSON object: {e}") from None
    if not isinstance(report, dict) or list(report)[:2] != ["version", "command"]:
        raise ExampleError(f"CLI by example: `{r.example.command}` printed JSON without the version/command envelope")


def examples_page() -> str:
    """The whole page, from fresh runs of every example."""
    from trajschema.cli.app import build_parser

    with tempfile.TemporaryDirectory(prefix="trajschema-cli-examples-") as tmp:
        directory = Path(tmp)
        write_samples(directory)
        runs = [run(e, directory) for e in EXAMPLES]
        machine = [run(e, directory) for e in json_examples(build_parser())]
    lines = [
        "# CLI by example",
        "",
        "What the `trajschema` command prints, on an 80-column terminal. The outputs on this page "
        "are not written by hand: the site build runs each command on sample files it writes "
        "(8 `text` samples from `trajschema.testing.verl_sample`, saved with `torch.save`), so "
        "they are what this version prints; `<repo>` stands for the checkout of the repository. "
        "Every option is on the [CLI reference](cli.md).",
        "",
        *_section(runs),
        *_machine_section(machine),
    ]
    return "\n".join(lines)
