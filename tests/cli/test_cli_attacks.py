"""The command line under hostile input: each test pins a finding of an attack on it (and the fix).

Every unusable input must end in one line on stderr with the documented exit status,
never a traceback, an ``unexpected`` error, an out-of-memory kill or code run from a file.
"""

from __future__ import annotations

import errno
import json
import math
import os
import pickle
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict

import trajschema as ts
from trajschema.cli import data as _cli_data
from trajschema.cli.app import main
from trajschema.testing import tq_batch, verl_sample

SCHEMAS = ts.schema_names()
FREE_DIMS = {"layers": 3, "topk": 2, "teacher_topk": 2}  # free dims the packaged schemas give no padding size
PAD = ["--eos-token-id", "2"]


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    for var in ("FORCE_COLOR", "TRAJSCHEMA_DEBUG", "TRAJSCHEMA_PATH", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)


def run(capsys, *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    prefix = f"trajschema {command}: error: " if command else "trajschema: error: "
    assert lines[0].startswith(prefix), lines[0]
    assert "Traceback" not in err and "unexpected" not in err, err
    return lines[0]


def sample_of(name: str, p: int = 5, r: int = 3, **kw: Any) -> dict[str, Any]:
    schema = ts.load_schema(name)
    return verl_sample(schema, p, r, **{k: v for k, v in FREE_DIMS.items() if k in schema.dims}, **kw)


def save(path: Path, obj: Any) -> Path:
    torch.save(obj, path)
    return path


# -- layouts of a TensorDict file ----------------------------------------------------------------


def _column(rows: list[dict[str, Any]], key: str, layout: str) -> Any:
    first = rows[0][key]
    if not isinstance(first, torch.Tensor):
        return NonTensorStack(*(NonTensorData(r[key]) for r in rows))
    if layout == "dense" or first.dim() == 0:
        return torch.stack([r[key] for r in rows])
    return torch.nested.as_nested_tensor([r[key] for r in rows], layout=getattr(torch, layout))


def layout_file(tmp_path: Path, name: str, layout: str) -> Path:
    """Two valid samples of schema ``name`` saved as a TensorDict laid out as ``layout``."""
    same = layout in ("dense", "consolidated", "nontensordata")
    rows = [sample_of(name, 5, 3), sample_of(name, 5, 3, uid="q1") if same else sample_of(name, 4, 6, uid="q1")]
    if layout == "lazy":  # torch.stack of TensorDicts of other shapes: rows kept apart
        tds = [
            TensorDict({k: NonTensorData(v) if not isinstance(v, torch.Tensor) else v for k, v in r.items()})
            for r in rows
        ]
        td: Any = LazyStackedTensorDict.lazy_stack(tds, 0)
    elif layout == "tq":
        td = tq_batch(rows)
    elif layout == "nontensordata":  # one value for the whole column, as some writers store a constant
        td = TensorDict({k: _column(rows, k, "dense") for k in rows[0] if isinstance(rows[0][k], torch.Tensor)}, [2])
        for k in rows[0]:
            if isinstance(rows[0][k], (str, int)) and rows[0][k] == rows[1][k]:
                td[k] = NonTensorData(rows[0][k], batch_size=[2])
            elif not isinstance(rows[0][k], torch.Tensor):
                td[k] = _column(rows, k, "dense")
    else:
        td = TensorDict({k: _column(rows, k, "dense" if layout == "consolidated" else layout) for k in rows[0]}, [2])
        if layout == "consolidated":
            td = td.consolidate()
    return save(tmp_path / f"{name}_{layout}.pt", td)


LAYOUTS = ["dense", "jagged", "strided", "lazy", "consolidated", "tq", "nontensordata"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("depth", ["shapes", "values"])
def test_check_reads_every_tensordict_layout(capsys, tmp_path, layout, depth):
    # A lazy stack of ragged rows used to crash the meta-tensor note after the table: its
    # columns cannot be get() as one tensor.
    path = layout_file(tmp_path, "vlm_mrope_moe", layout)
    code, out, err = run(capsys, "check", path, "--schema", "vlm_mrope_moe", "--depth", depth)
    assert (code, err) == (0, ""), err
    assert out.startswith(f"valid: {path}: all 2 samples follow schema 'vlm_mrope_moe' at depth {depth}")


def test_check_of_an_invalid_lazy_stack_prints_the_table_and_exits_1(capsys, tmp_path):
    rows = [sample_of("text", 5, 3), sample_of("text", 4, 6, uid="q1")]
    rows[1]["loss_mask"] = torch.full((6,), 7)
    tds = [TensorDict({k: v for k, v in r.items() if isinstance(v, torch.Tensor)}) for r in rows]
    path = save(tmp_path / "lazy.pt", LazyStackedTensorDict.lazy_stack(tds, 0))
    code, out, err = run(capsys, "check", path, "--schema", "text")
    assert (code, err) == (1, "")
    assert "loss_mask" in out and out.splitlines()[-1].startswith(f"invalid: {path}:")


@pytest.mark.parametrize("name", SCHEMAS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pad_like_a_file_of_each_layout_writes_what_check_accepts_without_trust(capsys, tmp_path, name, layout):
    like = layout_file(tmp_path, name, layout)
    out_path = tmp_path / "pad.pt"
    code, out, err = run(capsys, "pad", name, "--count", 3, *PAD, "--like", like, "--out", out_path)
    assert (code, err) == (0, ""), err
    loaded = torch.load(out_path, weights_only=True)
    assert len(loaded["samples"]) == 3
    code, out, err = run(capsys, "check", out_path, "--schema", name)
    assert (code, err) == (0, "") and out.startswith("valid:"), out


# -- sizes on the command line ---------------------------------------------------------------------

BAD_NUMBERS = {
    # id: (argv, fragment of the one error line)
    "count too big for torch": (["pad", "text", "--count", "99999999999999999999", *PAD], "argument --count: expected"),
    "eos too big for torch": (["pad", "text", "--count", "1", "--eos-token-id", str(2**63)], "argument --eos-token-id"),
    "dim too big for torch": (["pad", "text", "--count", "1", *PAD, "--dim", f"prompt={2**63}"], "at most 2**63-1"),
    "count with underscores": (["pad", "text", "--count", "1_0", *PAD], "expected a positive integer, found '1_0'"),
    "count in arabic digits": (["pad", "text", "--count", "\u0661", *PAD], "expected a positive integer"),
    "dim with underscores": (["pad", "text", "--count", "1", *PAD, "--dim", "prompt=1_27"], "must be an integer"),
    "dim in float syntax": (["pad", "moe_routed", "--count", "1", *PAD, "--dim", "layers=1e3"], "must be an integer"),
    "dim nan": (["pad", "text", "--count", "1", *PAD, "--dim", "prompt=nan"], "must be an integer"),
    "dim empty name": (["pad", "text", "--count", "1", *PAD, "--dim", "=3"], "expected NAME=SIZE"),
    "dim empty size": (["pad", "text", "--count", "1", *PAD, "--dim", "a="], "must be an integer, found ''"),
    "dim lone =": (["pad", "text", "--count", "1", *PAD, "--dim", "="], "expected NAME=SIZE"),
    "plan batch nan": (
        ["plan", "--dp-size", "2", "--batch-size", "nan", "--rollout-n", "2", "--actor-mini-batch-size", "3"],
        "argument --batch-size",
    ),
}


@pytest.mark.parametrize(("argv", "fragment"), list(BAD_NUMBERS.values()), ids=list(BAD_NUMBERS))
def test_numbers_are_plain_decimal_and_fit_torch(capsys, tmp_path, argv, fragment):
    code, out, err = run(capsys, *argv, *(["--out", tmp_path / "p.pt"] if argv[0] == "pad" else []))
    assert code == 2 and out == ""
    assert fragment in error_line(err, argv[0])
    assert not (tmp_path / "p.pt").exists()


@pytest.fixture
def no_padding(monkeypatch):
    """Fail loudly if Schema.padding runs: the sizes must be refused before any tensor is allocated."""

    def refuse(*args, **kwargs):
        raise AssertionError("Schema.padding ran")

    monkeypatch.setattr(ts.Schema, "padding", refuse)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["text", "--count", "100000000"], "--count 100000000: 100000000 padding samples of schema 'text'"),
        (["text", "--count", "1", "--dim", "prompt=1000000000000"], "(prompt=1000000000000, response=1)"),
        (["moe_routed", "--count", "1", "--dim", f"layers={2**63 - 1}", "--dim", f"topk={2**63 - 1}"], "2**1"),
    ],
    ids=["huge count", "huge dim", "dims at the int64 edge"],
)
def test_pad_refuses_sizes_that_would_exhaust_memory(capsys, tmp_path, no_padding, argv, fragment):
    # These used to reach torch.full and end in the kernel's OOM killer (no message at all).
    code, out, err = run(capsys, "pad", *argv, *PAD, "--out", tmp_path / "p.pt")
    line = error_line(err, "pad")
    assert code == 2 and out == "" and fragment in line
    assert "of memory" in line and "pad writes at most 2.0 GiB" in line
    assert list(tmp_path.iterdir()) == []


def test_pad_counts_the_tensors_a_copied_mapping_holds(capsys, tmp_path, no_padding):
    # `pad: copy` deep-copies the reference's value into every padding sample: 300 copies
    # of a mapping holding 8 MiB of pixels are 2.3 GiB, though no tensor field says so.
    schema = tmp_path / "copying.yaml"
    schema.write_text(
        "name: copying\nextends: [vlm_mrope]\nfields:\n  multi_modal_inputs: {kind: mapping, pad: copy}\n"
    )
    like = sample_of("vlm_mrope")
    like["multi_modal_inputs"] = {"pixel_values": [torch.zeros(2**21)], "image_grid_thw": torch.tensor([[1, 2, 2]])}
    path = save(tmp_path / "like.pt", [like])
    code, _, err = run(capsys, "pad", schema, "--count", 300, *PAD, "--like", path, "--out", tmp_path / "p.pt")
    line = error_line(err, "pad")
    assert code == 2 and "would take about 2.3 GiB of memory, 8.0 MiB of tensors each" in line


@pytest.mark.parametrize("name", SCHEMAS)
@pytest.mark.parametrize("with_like", [False, True])
def test_the_memory_estimate_bounds_what_padding_really_holds(tmp_path, name, with_like):
    schema = ts.load_schema(name)
    like = sample_of(name, 9, 4) if with_like else None
    if like is not None:
        like["extra_undeclared"] = torch.zeros(5, 7)  # copied into every padding sample
    dims = {} if like is not None else {k: v for k, v in FREE_DIMS.items() if k in schema.dims}
    estimate, sizes = _cli_data.padding_bytes(schema, like, dims)
    pad = schema.padding(1, eos_token_id=2, like=like, dims=dims or None)
    held = sum(v.numel() * v.element_size() for v in pad.samples[0].values() if isinstance(v, torch.Tensor))
    assert held <= estimate <= 2 * held + 64
    assert {k: v for k, v in sizes.items() if k in pad.dims} == pad.dims


@pytest.fixture
def no_demo_run(monkeypatch):
    """A stand-in for the demo's runner: these arguments must be refused before it (and Ray) starts."""
    calls: list[Any] = []
    import trajschema.cli.demo as demo  # its argument checks stay real; only the run is replaced

    monkeypatch.setattr(demo, "run_demo", lambda **kw: calls.append(kw) or types.SimpleNamespace(ok=True))
    return calls


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--prompts", "1000000000"], "--prompts 1000000000 x up to 15 trajectories"),
        (["--rollout-n", "100000"], "x up to 199999 trajectories"),
        (["--dp-size", "1000000007"], "padded to a multiple of 120000000840"),
        (["--seed", str(2**64)], "argument --seed: expected an integer from 0 to 2**32-1"),
    ],
    ids=["huge prompts", "huge rollout n", "huge dp size", "seed past torch"],
)
def test_demo_refuses_sizes_it_could_not_build_before_anything_starts(capsys, no_demo_run, argv, fragment):
    # The rollout is built in memory before Ray starts, and the padding inside the step:
    # such sizes ended in an out-of-memory kill (or torch's "Overflow when unpacking long long").
    code, out, err = run(capsys, "demo", *argv)
    line = error_line(err, "demo")
    assert code == 2 and out == "" and fragment in line and no_demo_run == []


def test_demo_at_the_size_limit_still_runs(capsys, no_demo_run):
    from trajschema.cli.demo import DEMO_MAX_SAMPLES

    prompts = (DEMO_MAX_SAMPLES - 119) // 15  # rollout n 8: up to 15 trajectories a prompt; multiple 120
    code, _, err = run(capsys, "demo", "--prompts", prompts, "--seed", 2**32 - 1)
    assert (code, err) == (0, "")
    assert [(c["prompts"], c["seed"]) for c in no_demo_run] == [(prompts, 2**32 - 1)]
    code, _, err = run(capsys, "demo", "--prompts", prompts + 1)
    assert code == 2 and f"the demo writes at most {DEMO_MAX_SAMPLES:,}" in error_line(err, "demo")


# -- options ---------------------------------------------------------------------------------------

PLAN = ["--batch-size", "10", "--rollout-n", "2", "--actor-mini-batch-size", "3"]
OPTIONS = {
    # id: (argv, the whole error line after "error: ")
    "prefix of an option": (["plan", "--dp", "2", *PLAN], "unrecognized arguments: --dp; did you mean --dp-size?"),
    "truncated option": (["plan", "--dp-siz", "2", *PLAN], "unrecognized arguments: --dp-siz; did you mean --dp-size?"),
    "shorter option": (
        ["plan", "--dp-size", "2", "--batch", "10", "--rollout-n", "2", "--actor-mini-batch-size", "3"],
        "unrecognized arguments: --batch; did you mean --batch-size?",
    ),
    "typo with =": (
        ["check", "f.pt", "--schema=text", "--dpeth=shapes"],
        "unrecognized arguments: --dpeth; did you mean --depth?",
    ),
    "no --trust suggested": (["check", "f.pt", "--schema", "text", "--strict"], "unrecognized arguments: --strict"),
    "option of another command": (["show", "text", "--format", "yaml"], "unrecognized arguments: --format"),
}


@pytest.mark.parametrize(("argv", "message"), list(OPTIONS.values()), ids=list(OPTIONS))
def test_options_must_be_spelled_out_and_typos_get_a_suggestion(capsys, argv, message):
    # argparse took any unambiguous prefix, so `--dp-siz 2` passed as --dp-size; a typo
    # of a required option was reported as the option missing.
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert error_line(err, argv[0]) == f"trajschema {argv[0]}: error: {message}"


def test_an_option_value_may_start_with_dashes_after_a_double_dash(capsys):
    code, _, err = run(capsys, "show", "--", "--not-an-option")
    assert code == 2 and "no schema '--not-an-option'" in error_line(err, "show")


def test_infer_refuses_an_empty_base_and_names_the_name_option(capsys, tmp_path):
    path = save(tmp_path / "s.pt", [sample_of("text")])
    code, out, err = run(capsys, "infer", path, "--name", "x", "--base", "")
    assert code == 2 and out == "" and "no schema ''" in error_line(err, "infer")  # it used to draft without a base
    code, out, err = run(capsys, "infer", path, "--name", "")
    assert code == 2 and error_line(err, "infer") == "trajschema infer: error: --name '': an empty schema name"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_pad_never_renames_over_a_device_or_fifo(capsys, tmp_path):
    # pad wrote beside --out and renamed over it: `--out /dev/full` (or /dev/null) replaced
    # the device node itself with a regular file, as root. A FIFO stands in for the device.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, out, err = run(capsys, "pad", "text", "--count", 1, *PAD, "--out", fifo)
    assert code == 2 and out == "" and "is not a regular file" in error_line(err, "pad")
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_pad_writes_through_a_symlink(capsys, tmp_path):
    (tmp_path / "real").mkdir()
    link = tmp_path / "pad.pt"
    link.symlink_to(tmp_path / "real" / "pad.pt")  # dangling until pad writes its target
    code, _, err = run(capsys, "pad", "text", "--count", 2, *PAD, "--out", link)
    assert (code, err) == (0, "")
    assert link.is_symlink() and len(torch.load(link, weights_only=True)["samples"]) == 2


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["pad", "text", "--count", "1", *PAD, "--out", ""], "--out: an empty path"),
        (["pad", "text", "--count", "1", *PAD, "--like", "", "--out", "p.pt"], "an empty file name"),
        (["check", "", "--schema", "text"], "an empty file name"),
        (["infer", " ", "--name", "x"], "an empty file name"),
    ],
    ids=["empty out", "empty like", "empty check file", "blank infer file"],
)
def test_an_empty_path_is_not_the_current_directory(capsys, tmp_path, monkeypatch, argv, fragment):
    # Path("") is ".", so an empty --out was "a directory" and an empty --like was no --like at all.
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and fragment in error_line(err, argv[0])
    assert list(tmp_path.iterdir()) == []


# -- files that are not what they claim -------------------------------------------------------------


class RunsACommand:
    """Unpickling this runs ``os.system``: the classic malicious checkpoint."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("where", ["sample", "tags"])
@pytest.mark.parametrize("command", ["check", "infer", "pad"])
def test_a_pickle_that_runs_code_is_not_run_without_trust(capsys, tmp_path, monkeypatch, command, where):
    marker = tmp_path / "ran"
    payload = RunsACommand(marker)
    obj = [{"x": payload}] if where == "sample" else {"samples": [sample_of("text")], "tags": [{"t": payload}]}
    path = save(tmp_path / "evil.pt", obj)
    calls: list[Any] = []
    real_load = torch.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    argv = {"check": ["check", path, "--schema", "text"], "infer": ["infer", path, "--name", "x"]}
    argv["pad"] = ["pad", "text", "--count", "1", *PAD, "--like", path, "--out", tmp_path / "p.pt"]
    code, out, err = run(capsys, *argv[command])
    line = error_line(err, command)
    assert code == 2 and out == "" and not marker.exists()
    assert calls == [True]  # one restricted load, never the full unpickler
    assert f"holds an object of type {os.system.__module__}.system" in line and "rerun with --trust" in line
    # The flag is the only gate: with it the file's code runs (and its result is no sample).
    run(capsys, *argv[command], "--trust")
    assert marker.exists() and calls == [True, True, False]


def test_a_pickle_protocol_the_safe_loader_cannot_read_is_named(capsys, tmp_path):
    # torch.save(..., pickle_protocol=4) of plain data: the refusal is about an opcode,
    # not about "Python objects", and --trust is what reads it.
    path = tmp_path / "p4.pt"
    torch.save([sample_of("text")], path, pickle_protocol=4)
    code, _, err = run(capsys, "check", path, "--schema", "text")
    line = error_line(err, "check")
    assert code == 2 and "pickle_protocol above 2" in line and "Python objects" not in line
    code, out, err = run(capsys, "check", path, "--schema", "text", "--trust")
    assert (code, err) == (0, "") and out.startswith("valid:")
    plain = tmp_path / "plain.pkl"
    plain.write_bytes(pickle.dumps([{"a": 1}]))
    code, _, err = run(capsys, "check", plain, "--schema", "text", "--trust")
    assert code == 2 and "not a readable torch.save file, even with --trust" in error_line(err, "check")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"hello\n", "neither a zip archive, as torch.save writes, nor a legacy torch.save file"),
        (b"PK\x03\x04 truncated", "PytorchStreamReader failed reading zip archive"),
        (b"", "(EOFError)"),
    ],
    ids=["text", "truncated zip", "empty"],
)
def test_an_unreadable_file_says_what_it_is(capsys, tmp_path, content, fragment):
    path = tmp_path / "f.pt"
    path.write_bytes(content)
    code, _, err = run(capsys, "check", path, "--schema", "text")
    assert code == 2 and fragment in error_line(err, "check")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_one_line(capsys, tmp_path):
    path = save(tmp_path / "s.pt", [sample_of("text")])
    path.chmod(0)
    code, _, err = run(capsys, "check", path, "--schema", "text")
    assert code == 2 and "Permission denied" in error_line(err, "check")


# -- what data files put on the screen ---------------------------------------------------------


def test_control_characters_from_a_file_are_escaped_in_the_table(capsys, tmp_path, monkeypatch):
    # An undeclared key under extra: forbid is reported by name: its escape sequence used to
    # reach the terminal raw, and its newline split the table row.
    schema = tmp_path / "strict.yaml"
    schema.write_text("name: strict\nextends: [text]\nextra: forbid\n")
    sample = dict(sample_of("text"), **{"\x1b[2J\x1b[31mred\nrow": 1})
    path = save(tmp_path / "s.pt", [sample])
    code, out, err = run(capsys, "check", path, "--schema", schema)
    assert (code, err) == (1, "")
    assert "\x1b" not in out and "\\x1b[2J\\x1b[31mred\\nrow" in out
    assert len(out.splitlines()) == 4  # header, rule, one row, summary
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    (tmp_path / "odd\x1b[1m.yaml").write_text("name: odd\nfeilds: {}\n")
    code, out, _ = run(capsys, "list")
    assert code == 1 and "\x1b" not in out and "odd\\x1b[1m" in out


def test_check_json_is_strict_json_with_odd_values(capsys, tmp_path):
    schema = tmp_path / "odd.yaml"
    schema.write_text(
        "name: odd\nextends: [text]\nextra: forbid\nfields:\n"
        "  日本: {kind: float, min: 0, pad: 0}\n  score: {shape: [], dtype: bfloat16, finite: true, pad: 0}\n"
    )
    bad = dict(sample_of("text"), 日本=math.nan, score=torch.tensor(math.inf, dtype=torch.bfloat16))
    bad["\x1b\n"] = 1
    worse = dict(sample_of("text"), 日本=-math.inf, score=torch.tensor(math.nan, dtype=torch.bfloat16))
    path = save(tmp_path / "s.pt", {"samples": [bad, worse], "tags": [{"seq_len": math.nan}, {"seq_len": 2**80}]})
    found = {}
    for depth in ("shapes", "values"):
        code, out, err = run(capsys, "check", path, "--schema", schema, "--json", "--depth", depth)
        assert (code, err) == (1, "")

        def no_constants(name: str) -> None:
            raise AssertionError(f"{name} is not JSON")

        report = json.loads(out, parse_constant=no_constants)
        found[depth] = {(v["sample"], v["field"], v["code"]) for v in report["violations"]}
    assert (0, "\x1b\n", "extra") in found["shapes"] and (1, "seq_len", "tag") in found["shapes"]
    assert {(0, "日本", "value"), (1, "score", "value")} <= found["values"] - found["shapes"]
    assert found["shapes"] < found["values"]


# -- output streams ----------------------------------------------------------------------------


class FullDevice:
    """stdout on a full disk: every write fails as /dev/full does."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        raise OSError(errno.EBADF, "no descriptor")


@pytest.mark.parametrize(
    "argv", [["--help"], ["--version"], ["check", "--help"], ["list"], ["plan", "--dp-size", "2", *PLAN]]
)
def test_output_to_a_full_disk_is_an_error(capsys, monkeypatch, argv):
    # argparse swallowed the failed write of --help and --version: exit 0 with nothing written.
    monkeypatch.setattr(sys, "stdout", FullDevice())
    code = main(argv)
    err = capsys.readouterr().err
    command = "" if {"--help", "--version"} & set(argv) else argv[0]  # argparse prints these while parsing
    assert code == 2
    assert error_line(err, command).endswith("error: cannot write the output: No space left on device")


@pytest.mark.parametrize("argv", [["list"], ["--help"], ["show", "text"]])
def test_a_closed_stdout_is_one_line(capsys, monkeypatch, argv):
    monkeypatch.setattr(sys, "stdout", None)  # what Python sets when started with fd 1 closed
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err == "trajschema: error: standard output is closed; nothing could be written\n"


@pytest.mark.slow
def test_a_program_started_with_stdout_closed_fails_in_one_line():
    done = subprocess.run(
        [sys.executable, "-m", "trajschema", "list"],
        preexec_fn=lambda: os.close(1),  # as the shell's `trajschema list >&-`
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == "trajschema: error: standard output is closed; nothing could be written\n"


# -- schema files ------------------------------------------------------------------------------

BROKEN_YAML = {
    "duplicate key": ("name: dup\nname: dup2\n", "key 'name' is given twice (lines 1 and 2)"),
    "self-extends": ("name: bad\nextends: [bad]\n", "cycle in extends: bad -> bad"),
    "binary": (b"\xff\xfe\x00", "not UTF-8 text"),
    "python tag": ("!!python/object/apply:os.system ['true']\n", "could not determine a constructor"),
    "two documents": ("name: a\n---\nname: b\n", "expected a single document"),
    "empty": ("", "found an empty file"),
}


@pytest.mark.parametrize(("content", "fragment"), list(BROKEN_YAML.values()), ids=list(BROKEN_YAML))
@pytest.mark.parametrize("command", ["show", "export", "diff old", "diff new", "check"])
def test_a_broken_schema_file_given_by_path_is_one_line(capsys, tmp_path, command, content, fragment):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    good = save(tmp_path / "s.pt", [sample_of("text")])
    argv = {
        "show": ["show", path],
        "export": ["export", path, "--format", "json-schema"],
        "diff old": ["diff", path, "text"],
        "diff new": ["diff", "text", path],
        "check": ["check", good, "--schema", path],
    }[command]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and fragment in error_line(err, argv[0])


def test_a_cycle_through_two_files_is_one_line(capsys, tmp_path):
    (tmp_path / "cyca.yaml").write_text("name: cyca\nextends: [cycb]\n")
    (tmp_path / "cycb.yaml").write_text("name: cycb\nextends: [cyca]\n")
    for command in ("show", "export"):
        code, _, err = run(capsys, command, tmp_path / "cyca.yaml")
        assert code == 2 and "cycle in extends: cyca -> cycb -> cyca" in error_line(err, command)


def test_list_goes_on_past_every_kind_of_broken_file(capsys, tmp_path, monkeypatch):
    for i, (content, _) in enumerate(BROKEN_YAML.values()):
        (tmp_path / f"bad{i}.yaml").write_bytes(content if isinstance(content, bytes) else content.encode())
    (tmp_path / "a_dir.yaml").mkdir()
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "nowhere.yaml")
    monkeypatch.setenv("TRAJSCHEMA_PATH", f"{tmp_path / 'missing'}{os.pathsep}{tmp_path}")
    code, out, err = run(capsys, "list")
    assert (code, err) == (1, "")
    rows = {line.split()[0]: line for line in out.splitlines()[2:-1] if line.strip()}
    assert set(SCHEMAS) < set(rows)
    broken = {n for n, line in rows.items() if "error: " in line}
    # Every broken file, the dangling link too (a search-path file that cannot be read is listed with its reason).
    assert broken == {f"bad{i}" for i in range(len(BROKEN_YAML))} | {"dangling"}
    assert out.splitlines()[-1] == f"{len(broken)} of {len(rows)} schema files do not load (see the error rows)"


# -- diff gates ---------------------------------------------------------------------------------


def _text_copy(tmp_path: Path, name: str, old: str, new: str) -> Path:
    text = Path(ts.load_schema("text").source).read_text()
    assert old in text
    path = tmp_path / f"{name}.yaml"
    path.write_text(text.replace(old, new))
    return path


LOSS_MASK = "loss_mask:         {shape: [response], dtype: int64,"
EDITS = {
    # id: (old text, new text, exit status per mode backward, forward, full)
    "loss_mask narrowed to int32": (LOSS_MASK, LOSS_MASK.replace("int64", "int32"), (1, 1, 1)),
    "loss_mask widened": (LOSS_MASK, LOSS_MASK.replace("int64", "[int64, int32]"), (0, 1, 1)),
    "rm_scores made required": (
        "finite: true, pad: 0.0, required: false}\n  num",
        "finite: true, pad: 0.0}\n  num",
        (1, 0, 1),
    ),
    "optional field added": ("\ntags:", "\n  score: {kind: float, pad: 0.0, required: false}\ntags:", (0, 0, 0)),
}


@pytest.mark.parametrize(("old", "new", "statuses"), list(EDITS.values()), ids=list(EDITS))
def test_diff_gates_an_edit_of_text_in_every_mode(capsys, tmp_path, old, new, statuses):
    edited = _text_copy(tmp_path, "edited", old, new)
    original = Path(ts.load_schema("text").source)
    for mode, status in zip(("backward", "forward", "full"), statuses, strict=True):
        code, out, err = run(capsys, "diff", original, edited, "--mode", mode)
        assert (code, err) == (status, ""), (mode, out)
        lines = out.splitlines()
        assert lines[-1].startswith(("incompatible" if status else "compatible") + f" ({mode}): ")
        for line in lines[:-1]:
            # An ok line never reads as a failure of the mode asked for.
            if line.startswith("ok ") and "can fail under" in line:
                assert f"compatible {mode}; breaks " in line, line
    code, out, _ = run(capsys, "diff", edited, edited)
    assert (code, out) == (0, "no changes\n")


@pytest.mark.parametrize("value", [torch.tensor([8, 8]), torch.tensor([])], ids=["two elements", "empty"])
def test_a_tensor_in_an_any_tag_with_equals_is_a_violation(capsys, tmp_path, value):
    # `v != want` on such a tensor raised inside validation: `check` said "unexpected RuntimeError".
    schema = ts.schema_from_dict(
        {"name": "anytag", "extends": ["text"], "tags": {"seq_len": {"kind": "any", "equals": "seq"}}}
    )
    found = schema.violations(sample_of("text"), tag={"seq_len": value})
    assert [v.code for v in found] == ["tag"]
    path = save(tmp_path / "s.pt", {"samples": [sample_of("text")], "tags": [{"seq_len": value}]})
    source = tmp_path / "anytag.yaml"
    source.write_text(schema.to_yaml())
    code, out, err = run(capsys, "check", path, "--schema", source)
    assert (code, err) == (1, "") and "seq_len" in out
