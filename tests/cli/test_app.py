"""The parser of ``trajschema``: suggestions, the shared option vocabulary, help at the terminal's width, completion."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.terminal_support import in_terminal, layout_problems
from trajschema.cli.app import build_parser, main
from trajschema.cli.args import SHARED_OPTIONS, reflow
from trajschema.cli.completion import SCHEMA_ARGUMENTS, completion_script


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("FORCE_COLOR", "TRAJSCHEMA_DEBUG", "TRAJSCHEMA_PATH", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **sub.choices}


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (code, out)
    assert len(err.splitlines()) == 1, err
    return err.rstrip("\n")


# -- suggestions ---------------------------------------------------------------------------

COMMANDS_LINE = "(commands: list, show, check, plan, pad, infer, export, diff, demo, completion)"
FORMATS_LINE = "(choose from yaml, json-schema, jaxtyping, pandera, typed-tensordict)"
SUGGESTIONS = {
    # id: (argv, the whole error line)
    "command typo": (["plann"], f"trajschema: error: unknown command 'plann'; did you mean 'plan'? {COMMANDS_LINE}"),
    "command missing a letter": (
        ["chek", "f.pt"],
        f"trajschema: error: unknown command 'chek'; did you mean 'check'? {COMMANDS_LINE}",
    ),
    "command prefix": (
        ["comp", "bash"],
        f"trajschema: error: unknown command 'comp'; did you mean 'completion'? {COMMANDS_LINE}",
    ),
    "unknown command, no guess": (["frobnicate"], f"trajschema: error: unknown command 'frobnicate' {COMMANDS_LINE}"),
    "depth value": (
        ["check", "f.pt", "--schema", "text", "--depth", "value"],
        "trajschema check: error: argument --depth: invalid choice: 'value'; did you mean 'values'? "
        "(choose from shapes, values)",
    ),
    "mode typo": (
        ["diff", "a", "b", "--mode", "bakward"],
        "trajschema diff: error: argument --mode: invalid choice: 'bakward'; did you mean 'backward'? "
        "(choose from backward, forward, full)",
    ),
    "format without dash": (
        ["export", "text", "--format", "jsonschema"],
        f"trajschema export: error: argument --format: invalid choice: 'jsonschema'; did you mean 'json-schema'? "
        f"{FORMATS_LINE}",
    ),
    "format in capitals with _": (
        ["export", "text", "--format=JSON_Schema"],
        f"trajschema export: error: argument --format: invalid choice: 'JSON_Schema'; did you mean 'json-schema'? "
        f"{FORMATS_LINE}",
    ),
    "format, no guess": (
        ["export", "text", "--format", "xml"],
        f"trajschema export: error: argument --format: invalid choice: 'xml' {FORMATS_LINE}",
    ),
    "shell typo": (
        ["completion", "bsh"],
        "trajschema completion: error: argument SHELL: invalid choice: 'bsh'; did you mean 'bash'? "
        "(choose from bash, zsh, fish)",
    ),
    "option with _": (
        ["plan", "--dp_size", "2"],
        "trajschema plan: error: unrecognized option '--dp_size'; did you mean '--dp-size'?",
    ),
    "top-level option typo": (
        ["--verison"],
        "trajschema: error: unrecognized option '--verison'; did you mean '--version'?",
    ),
    "top-level option typo before a command": (
        ["--verison", "list"],
        "trajschema: error: unrecognized option '--verison'; did you mean '--version'?",
    ),
    "top-level option prefix": (
        ["--vers"],
        "trajschema: error: unrecognized option '--vers'; did you mean '--version'?",
    ),
    "top-level short option": (["-V"], "trajschema: error: unrecognized option '-V'"),
}


@pytest.mark.parametrize(("argv", "expected"), list(SUGGESTIONS.values()), ids=list(SUGGESTIONS))
def test_a_misspelling_gets_one_line_with_the_likely_word(capsys, argv, expected):
    assert _error(capsys, *argv) == expected


def test_a_hidden_alias_is_accepted_but_never_suggested(capsys):
    line = _error(capsys, "demo", "--mini-batch-sise", "3")
    assert "--mini-batch-size" not in line and line.startswith("trajschema demo: error: unrecognized option")


def test_no_command_lists_the_commands_on_stderr(capsys):
    code = main([])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    summaries = {choice.dest: choice.help for choice in sub._choices_actions}
    assert list(summaries) == list(sub.choices)  # every command has its summary
    words = " ".join(err.split())  # argparse may put a long command's summary on the next line
    for command, summary in summaries.items():
        assert f"{command} {summary}" in words, command
    assert err.startswith("usage: trajschema ")


# -- one vocabulary --------------------------------------------------------------------------


def test_a_shared_option_is_spelled_the_same_in_every_command():
    seen: dict[str, set[str]] = {}
    for command, parser in _subparsers().items():
        for action in parser._actions:
            shared = SHARED_OPTIONS.get(action.dest)
            if shared is None or action.help == argparse.SUPPRESS:
                continue
            assert (action.option_strings[0], action.metavar) == (shared.flag, shared.metavar), (command, action.dest)
            assert action.help.startswith(shared.help), (command, action.dest)
            seen.setdefault(action.dest, set()).add(command)
        for action in parser._actions:  # and no command spells a shared flag its own way
            for flag in action.option_strings:
                owner = next((name for name, o in SHARED_OPTIONS.items() if o.flag == flag), None)
                assert owner in (None, action.dest), (command, flag)
    assert {"dp_size", "rollout_n", "actor_mini_batch_size"} <= {d for d, cs in seen.items() if {"plan", "demo"} <= cs}


@pytest.mark.parametrize("flag", ["--actor-mini-batch-size", "--mini-batch-size"])
def test_demo_takes_the_old_spelling_too(flag):
    args = build_parser().parse_args(["demo", flag, "5"])
    assert args.actor_mini_batch_size == 5
    assert build_parser().parse_args(["demo"]).actor_mini_batch_size == 15


def test_the_old_spelling_is_not_shown_and_its_errors_name_it(capsys, monkeypatch):
    code, out, _ = in_terminal(monkeypatch, capsys, "demo", "--help")
    assert code == 0 and "--actor-mini-batch-size PROMPTS" in out and "--mini-batch-size" not in out
    line = _error(capsys, "demo", "--mini-batch-size", "0")
    assert line == "trajschema demo: error: argument --mini-batch-size: expected a positive integer, found '0'"


def test_plan_and_demo_show_the_same_metavars(capsys, monkeypatch):
    for command in ("plan", "demo"):
        _, out, _ = in_terminal(monkeypatch, capsys, command, "--help", columns=100)
        for words in ("--dp-size DP_SIZE", "--rollout-n ROLLOUT_N", "--actor-mini-batch-size PROMPTS"):
            assert words in out, (command, words)


def test_the_readme_names_exactly_the_commands_that_take_json():
    parsers = {command: parser for command, parser in _subparsers().items() if command}
    taking = [c for c, parser in parsers.items() if "--json" in parser._option_string_actions]
    assert sorted(set(parsers) - set(taking)) == ["completion"]  # it prints a script
    readme = " ".join((Path(__file__).resolve().parents[2] / "README.md").read_text().split())
    sentence = readme[: readme.index(" take `--json`")]
    sentence = sentence[sentence.rindex("). ") + 3 :]  # from the sentence's start
    named = re.findall(r"`([a-z]+)`", sentence)
    assert sorted(named) == sorted(taking), (named, taking)
    assert "`completion`, which prints a shell script, does not" in readme


# -- help at the terminal's width ------------------------------------------------------------


def _words_of(parser: argparse.ArgumentParser) -> list[str]:
    texts = [parser.description or "", parser.epilog or ""]
    texts += [str(a.help) for a in parser._actions if a.help and a.help != argparse.SUPPRESS]
    return sorted({w for text in texts for w in text.split() if "%(" not in w})


def _examples(parser: argparse.ArgumentParser) -> list[str]:
    lines = (parser.epilog or "").splitlines()
    return [
        " ".join(line.split()) for line in lines if line.startswith("  ") and line.split()[0] in ("trajschema", "eval")
    ]


def _margin(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _terms(text: str) -> list[tuple[str, int, int]]:
    """The items of a definition list in help ``text``: ``(term, its indent, the column its text starts at)``.

    An item is an indented term, two or more blanks, then its text, with the lines under
    it starting at that column (``  yaml         the resolved schema ...``).
    """
    lines = text.splitlines()
    found = []
    for line, below in zip(lines, [*lines[1:], ""]):
        item = re.match(r" +(\S+) {2,}(?=\S)", line)
        if item and (not below.strip() or _margin(below) in (item.end(), _margin(line))):
            found.append((item[1], _margin(line), item.end()))
    return found


def _lost_columns(parser: argparse.ArgumentParser, out: str) -> list[str]:
    """The definition-list items of the help whose text no longer starts in its own column, or wraps out of it."""
    lines = out.splitlines()
    lost = []
    for text in (parser.description or "", parser.epilog or ""):
        for term, indent, column in _terms(text):
            at = next(i for i, line in enumerate(lines) if _margin(line) == indent and line.split()[:1] == [term])
            head = lines[at]
            if len(head) <= column or head[column - 1] != " " or head[column] == " ":
                lost.append(f"{term!r}: its text does not start at column {column}: {head!r}")
            for line in lines[at + 1 :]:
                if not line.strip() or _margin(line) <= indent:
                    break
                if _margin(line) != column:
                    lost.append(f"{term!r}: a line of its text is not at column {column}: {line!r}")
    return lost


@pytest.mark.parametrize("columns", [120, 80, 60])
@pytest.mark.parametrize("command", list(_subparsers()))
def test_help_fits_the_terminal_without_splitting_a_word(capsys, monkeypatch, command, columns):
    parser = _subparsers()[command]
    argv = [command, "--help"] if command else ["--help"]
    code, out, err = in_terminal(monkeypatch, capsys, *argv, columns=columns)
    assert (code, err) == (0, "")
    assert layout_problems(out, _words_of(parser), columns=columns) == []
    assert _lost_columns(parser, out) == []
    pasted = re.sub(r" \\\n\s+", " ", out)  # what a shell reads of the continuation lines
    for example in _examples(parser):
        assert example in pasted, example
    assert _examples(parser) or not command or command == "list" or "Example" in out


def test_help_keeps_its_paragraphs_and_examples_apart():
    text = "First paragraph,\nhand-wrapped.\n\nSecond.\n\nExample:\n  trajschema plan --dp-size 2\n    indented deeper"
    assert reflow(text, 80) == [
        "First paragraph, hand-wrapped.",
        "",
        "Second.",
        "",
        "Example:",
        "  trajschema plan --dp-size 2",
        "    indented deeper",
    ]


@pytest.mark.parametrize("width", [78, 60, 40])  # 78: what argparse leaves of an 80-column terminal
def test_a_definition_list_keeps_its_column_when_re_flowed(width):
    text = (
        "Formats:\n"
        "  yaml         the resolved schema as a YAML file that load_schema accepts\n"
        "               (inherited entries restated);\n"
        "  json-schema  a JSON Schema (2020-12) document describing one sample, with each\n"
        "               tensor written as {'shape': [...], 'dtype': ...}"
    )
    lines = reflow(text, width)
    heads = [line for line in lines if _margin(line) != 15]
    assert heads[0] == "Formats:" and heads[1].startswith("  yaml         the ") and len(heads) == 3
    assert heads[2].startswith("  json-schema  a ")
    assert " ".join(lines).split() == text.split() and max(map(len, lines)) <= width


def test_a_word_longer_than_the_width_stays_whole():
    word = "x" * 50
    assert reflow(f"a {word} b", 30) == ["a", word, "b"]


def test_a_long_example_pastes_into_bash_as_one_command():
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    example = "trajschema pad moe_routed --count 2 --eos-token-id 2 --config ~/models/Qwen3-30B-A3B --out pad.pt"
    lines = reflow("  " + example, 40)
    assert len(lines) > 2 and all(len(line) <= 40 for line in lines)
    # A stand-in `trajschema` prints the words the shell gave it, one a line.
    done = subprocess.run(
        [bash, "-c", "trajschema() { printf '%s\\n' \"$@\"; }\n" + "\n".join(lines)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={**os.environ, "HOME": "/home"},
    )
    assert done.stdout.split() == example.replace("~", "/home").split()[1:]


# -- shell completion --------------------------------------------------------------------------


def _script(shell: str) -> str:
    return completion_script(build_parser(), shell)


def test_completion_prints_the_script_and_refuses_no_shell(capsys):
    assert main(["completion", "bash"]) == 0
    assert capsys.readouterr().out == _script("bash") + ("" if _script("bash").endswith("\n") else "\n")
    line = _error(capsys, "completion")
    assert line == "trajschema completion: error: expected a shell: bash, zsh or fish (e.g. trajschema completion bash)"


def test_completion_lists_the_schema_names(capsys):
    import trajschema as ts

    assert main(["completion", "--list-schemas"]) == 0
    assert capsys.readouterr().out.split() == ts.schema_names()


def test_every_schema_argument_is_in_the_parser():
    parsers = _subparsers()
    for command, dest in SCHEMA_ARGUMENTS:
        assert any(a.dest == dest for a in parsers[command]._actions), (command, dest)


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path, Path]:
    """bash, the script, and a directory holding a stand-in `trajschema` that answers the call for schema names."""
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    bin_dir = tmp_path_factory.mktemp("bin")
    stub = bin_dir / "trajschema"
    stub.write_text('#!/bin/sh\n[ "$1 $2" = "completion --list-schemas" ] && printf "text\\nvlm_mrope_moe\\n"\n')
    stub.chmod(0o755)
    path = tmp_path_factory.mktemp("script") / "trajschema.bash"
    path.write_text(_script("bash"))
    return bash, path, bin_dir


def _complete(bash_script: tuple[str, Path, Path], line: str, cwd: Path | None = None) -> list[str]:
    """What the script offers for ``line`` with the cursor at its end (bash's COMPREPLY), in ``cwd``
    (by default the script's own directory, so that no directory of the checkout is offered)."""
    bash, script, bin_dir = bash_script
    words = " ".join(f"'{w}'" for w in line.split(" "))
    program = f"source {script}\nCOMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n"
    program += '_trajschema; printf "%s\\n" "${COMPREPLY[@]}"'
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(
        [bash, "-c", program],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
        cwd=cwd or script.parent,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return [w for w in done.stdout.splitlines() if w]


def test_the_bash_script_parses(bash_script):
    bash, script, _ = bash_script
    done = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("trajschema pl", ["plan"]),
        ("trajschema c", ["check", "completion"]),
        ("trajschema check --de", ["--depth"]),
        ("trajschema check f.pt --depth ", ["shapes", "values"]),
        ("trajschema export text --format j", ["json-schema", "jaxtyping"]),
        ("trajschema show te", ["text"]),
        ("trajschema check f.pt --schema vlm", ["vlm_mrope_moe"]),
        ("trajschema demo --mini", []),  # the hidden alias is not offered
        ("trajschema completion ", ["bash", "zsh", "fish"]),
        ("trajschema --ver", ["--version"]),
    ],
)
def test_bash_completes(bash_script, line, expected):
    assert _complete(bash_script, line) == expected


def test_show_completes_bundle_directories_beside_schema_names_and_check_files_too(bash_script, tmp_path):
    (tmp_path / "step-00000012").mkdir()
    (tmp_path / "text_runs").mkdir()
    (tmp_path / "step.pt").write_bytes(b"")
    assert _complete(bash_script, "trajschema show st", tmp_path) == ["step-00000012"]
    assert sorted(_complete(bash_script, "trajschema show te", tmp_path)) == ["text", "text_runs"]
    assert sorted(_complete(bash_script, "trajschema check st", tmp_path)) == ["step-00000012", "step.pt"]
    assert _complete(bash_script, "trajschema export te", tmp_path) == ["text"]  # a schema only: no directory


@pytest.mark.parametrize(("shell", "check"), [("zsh", ["-n"]), ("fish", ["--no-execute"])])
def test_the_zsh_and_fish_scripts_parse(tmp_path, shell, check):
    program = shutil.which(shell)
    if program is None:
        pytest.skip(f"{shell} is not installed")
    path = tmp_path / f"trajschema.{shell}"
    path.write_text(_script(shell))
    done = subprocess.run([program, *check, str(path)], capture_output=True, text=True, timeout=30, check=False)
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_every_visible_option_is_in_each_script_and_no_hidden_alias(shell):
    script = _script(shell)
    for command, parser in _subparsers().items():
        assert command in script
        for action in parser._actions:
            for flag in action.option_strings:
                fish = f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}"
                offered = re.search(rf"(?<![\w-])({re.escape(flag)}|{re.escape(fish)})(?![\w-])", script)
                hidden = action.help == argparse.SUPPRESS and action.dest in SHARED_OPTIONS
                assert bool(offered) is not hidden, (shell, command, flag)
