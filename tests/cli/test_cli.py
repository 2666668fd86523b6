"""The ``trajschema`` command line: every subcommand in process (``main([...])``), plus a few subprocess runs."""

from __future__ import annotations

import errno
import json
import math
import os
import pickle
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorData, NonTensorStack, TensorDict

import trajschema as ts
from tests.cli.terminal_support import piped as run
from tests.schema_texts import MOE_ROUTED as _MOE_ROUTED
from trajschema.cli import app as _cli
from trajschema.cli import args as _cli_args
from trajschema.cli import pad as _cli_pad
from trajschema.cli.app import build_parser, main
from trajschema.testing import tq_batch, verl_sample

SCHEMAS = ts.schema_names()
COMMANDS = ["list", "show", "check", "plan", "pad", "infer", "export", "diff", "demo", "completion"]
# free dims the packaged schemas give no padding size
FREE_DIMS = {"layers": 3, "topk": 2, "experts": 8, "teacher_topk": 2}


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    """No colour forcing, no debug re-raise, no extra schema directories unless a test sets them."""
    for var in ("FORCE_COLOR", "TRAJSCHEMA_DEBUG", "TRAJSCHEMA_PATH", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)


def sample_of(schema: ts.Schema | str, p: int = 5, r: int = 3, **kw: Any) -> dict[str, Any]:
    schema = ts.load_schema(schema) if isinstance(schema, str) else schema
    return verl_sample(schema, p, r, **{k: v for k, v in FREE_DIMS.items() if k in schema.dims}, **kw)


def save(tmp_path: Path, obj: Any, name: str = "samples.pt") -> Path:
    path = tmp_path / name
    torch.save(obj, path)
    return path


def one_error_line(err: str, command: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith(f"trajschema {command}: error: ") if command else lines[0].startswith("trajschema: ")
    return lines[0]


class Unpicklable:
    """A class only full unpickling can rebuild (torch's weights_only loader refuses it)."""


# -- the parser -----------------------------------------------------------------------------


def _subparsers(parser) -> dict[str, Any]:
    import argparse

    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_the_parser_has_every_command_with_prose_and_an_example():
    parser = build_parser()
    subs = _subparsers(parser)
    assert list(subs) == COMMANDS
    assert "Example:" in parser.epilog
    for name, sub in subs.items():
        assert sub.description and len(sub.description) > 60, name
        assert "Example:\n  trajschema " + name in sub.epilog, name
        for action in sub._actions:
            assert action.help, (name, action.dest)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_of_each_command_is_full_and_exits_0(capsys, command):
    code, out, err = run(capsys, command, "--help")
    assert code == 0 and err == ""
    assert out.startswith(f"usage: trajschema {command}")
    assert "Example:" in out and "options:" in out


def test_top_level_help_and_version(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and all(c in out for c in COMMANDS)
    code, out, _ = run(capsys, "--version")
    assert (code, out.strip()) == (0, f"trajschema {ts.__version__}")


# -- list -----------------------------------------------------------------------------------


def test_list_shows_every_packaged_schema_with_its_architectures(capsys):
    code, out, err = run(capsys, "list")
    assert code == 0 and err == ""
    rows = {line.split("\t")[0]: line for line in out.splitlines()[1:] if line.strip()}  # piped: a header, then rows
    assert set(rows) == set(SCHEMAS)
    for name in SCHEMAS:
        schema = ts.load_schema(name)
        assert rows[name].rstrip().endswith("packaged")
        # The whole row stays on one line, even past 80 columns.
        assert all(a in rows[name] for a in schema.architectures)
    assert max(len(line) for line in out.splitlines()) > 80
    assert "\x1b[" not in out
    assert all(line == line.rstrip() for line in out.splitlines())


def test_list_reports_a_broken_schema_file_as_a_row_and_goes_on(capsys, tmp_path, monkeypatch):
    (tmp_path / "broken.yaml").write_text("name: broken\nfeilds: {}\n")
    (tmp_path / "mine.yaml").write_text("name: mine\nextends: [text]\narchitectures: [MineForCausalLM]\n")
    (tmp_path / "text.yaml").write_text((Path(ts.load_schema("text").source)).read_text())  # overrides the packaged
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    code, out, err = run(capsys, "list")
    assert code == 1 and err == ""
    rows = {line.split("\t")[0]: line for line in out.splitlines()[1:] if line.strip() and not line[0].isdigit()}
    assert "error: " in rows["broken"] and "unknown key 'feilds'; did you mean 'fields'?" in rows["broken"]
    assert rows["mine"].split("\t")[1] == "text" and "MineForCausalLM" in rows["mine"]
    assert str(tmp_path) in rows["mine"] and str(tmp_path) in rows["text"]
    assert rows["vlm_mrope"].rstrip().endswith("packaged")
    assert "1 of 7 schema files do not load" in out


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs symbolic links and FIFOs")
def test_list_reports_every_file_it_cannot_read_with_its_reason(capsys, tmp_path, monkeypatch):
    """Before: dangling and looping links, FIFOs and devices were dropped from the listing silently."""
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "nowhere.yaml")
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    (tmp_path / "devnull.yaml").symlink_to(os.devnull)
    os.mkfifo(tmp_path / "pipe.yaml")  # listing must not open it: that would block
    (tmp_path / "latin.yaml").write_bytes("name: latin\ndescription: caf\xe9\n".encode("latin-1"))
    (tmp_path / "a_dir.yaml").mkdir()  # a directory is not a schema file: not listed
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    code, out, err = run(capsys, "list")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    rows = {line.split("\t")[0]: line for line in lines[1:-1]}
    reasons = {
        "dangling": f"{tmp_path / 'dangling.yaml'}: is a symbolic link to {tmp_path / 'nowhere.yaml'}, which does not",
        "loop": f"{tmp_path / 'loop.yaml'}: is a symbolic link that never reaches a file",
        "devnull": f"{tmp_path / 'devnull.yaml'}: is not a regular file (a character device)",
        "pipe": f"{tmp_path / 'pipe.yaml'}: is not a regular file (a FIFO)",
        "latin": f"{tmp_path / 'latin.yaml'}:2:17: not UTF-8 text: byte 0xe9",
    }
    for name, reason in reasons.items():
        assert f"error: {reason}" in rows[name], rows[name]
        assert rows[name].rstrip().endswith(str(tmp_path))
    assert set(rows) == set(SCHEMAS) | set(reasons)
    assert lines[-1] == f"{len(reasons)} of {len(rows)} schema files do not load (see the error rows)"


def test_list_reports_a_search_path_entry_it_cannot_list(capsys, tmp_path, monkeypatch):
    locked, a_file, gone = tmp_path / "locked", tmp_path / "a_file", tmp_path / "gone"
    locked.mkdir()
    a_file.write_text("name: mine\n")
    (tmp_path / "link").symlink_to(gone)
    real = os.scandir

    def scandir(path="."):  # without read permission, as root cannot be made to see it
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    entries = [locked, tmp_path / "missing", a_file, tmp_path / "link"]
    monkeypatch.setenv("TRAJSCHEMA_PATH", os.pathsep.join(map(str, entries)))
    code, out, err = run(capsys, "list")
    assert (code, err) == (1, "")  # the missing entry is a row, not a warning on stderr too
    lines = out.splitlines()
    assert [line.split("\t")[0] for line in lines[1:5]] == ["-", "-", "-", "-"]  # first, in search order
    assert lines[1].split("\t")[-1] == str(locked)
    assert f"error: {locked}: cannot be listed: Permission denied" in lines[1]
    missing = f"warning: search path entry {tmp_path / 'missing'} does not exist; schemas are looked up without it"
    assert missing in lines[2] and lines[2].split("\t")[-1] == str(tmp_path / "missing")
    assert f"error: {a_file}: is not a directory (TRAJSCHEMA_PATH lists directories of schema files)" in lines[3]
    assert f"error: {tmp_path / 'link'}: is a symbolic link to {gone}, which does not exist" in lines[4]
    assert {line.split("\t")[0] for line in lines[5:-1]} == set(SCHEMAS)
    assert lines[-1] == "3 search path entries cannot be listed (see the error rows)"  # a missing one is no error


def test_list_of_a_path_with_only_a_missing_directory_succeeds_and_shows_it(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path / "missing"))
    code, out, err = run(capsys, "list")
    assert (code, err) == (0, "") and "error" not in out
    lines = out.splitlines()
    assert lines[1].startswith("-") and f"warning: search path entry {tmp_path / 'missing'} does not exist" in lines[1]
    assert {line.split("\t")[0] for line in lines[2:]} == set(SCHEMAS)  # no summary line: nothing is broken


# -- show -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMAS)
def test_show_prints_every_field_dim_and_tag(capsys, name):
    schema = ts.load_schema(name)
    code, out, err = run(capsys, "show", name)
    assert code == 0 and err == ""
    assert out.startswith(f"schema {name}\n")
    lines = out.splitlines()
    for title, names in (("fields", schema.fields), ("dims", schema.dims), ("tags", schema.tags)):
        start = lines.index(title)
        body = [line.split("\t")[0] for line in lines[start + 2 :] if line.strip()][: len(names)]  # title, header
        assert body == list(names), title
    assert f"extends: {', '.join(schema.lineage[1:]) or '-'}" in out
    if "routed_experts" in schema.fields:
        row = next(line for line in lines if line.startswith("routed_experts\t"))
        assert "[seq, layers, topk]" in row and "int16 | int32 | int64" in row and "min 0" in row


def test_show_accepts_a_path(capsys, tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("name: mine\nextends: [text]\nfields:\n  extra_ids: {shape: [seq], dtype: int32, pad: 0}\n")
    code, out, _ = run(capsys, "show", path)
    assert code == 0 and "extra_ids" in out and "int32" in out


# -- check ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMAS)
@pytest.mark.parametrize("layout", ["list", "tensordict", "envelope", "single"])
def test_check_accepts_valid_files_in_every_layout(capsys, tmp_path, name, layout):
    samples = [sample_of(name, p, r, uid=f"q{p}") for p, r in [(5, 3), (7, 1), (4, 6)]]
    content = {
        "list": samples,
        "tensordict": tq_batch(samples),
        "envelope": {"samples": samples, "tags": [{"seq_len": s["input_ids"].shape[-1]} for s in samples]},
        "single": samples[0],
    }[layout]
    path = save(tmp_path, content)
    code, out, err = run(capsys, "check", path, "--schema", name)
    assert (code, err) == (0, ""), out
    n = 1 if layout == "single" else 3
    assert out.strip() == (
        f"valid: {path}: {'its sample follows' if n == 1 else 'all 3 samples follow'} schema {name!r} at depth values"
    )


def _bad_batch() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    good = sample_of("text", 5, 3)
    bad = dict(sample_of("text", 6, 2, uid="q1"))
    bad["input_ids"] = bad["input_ids"][:-1]
    bad["loss_mask"] = torch.full((2,), 7)
    del bad["uid"]
    worse = dict(sample_of("text", 4, 4, uid="q2"))
    worse["position_ids"] = worse["position_ids"].float()
    return [good, bad, worse], [{}, {"seq_len": 3}, {}]


def test_check_prints_every_violation_then_a_summary(capsys, tmp_path):
    samples, tags = _bad_batch()
    path = save(tmp_path, {"samples": samples, "tags": tags})
    expected = ts.load_schema("text").batch_violations(samples, tags=tags)
    code, out, err = run(capsys, "check", path, "--schema", "text")
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["sample", "field", "code", "message"]
    rows = lines[1:-1]  # off a terminal: a header, then one tab-separated record a row (no group summary: 5 groups)
    assert len(rows) == len(expected) == 5
    for row, v in zip(rows, expected):
        assert row.split()[:3] == [str(v.sample), v.field, v.code] and row.endswith(v.message)
    assert lines[-1] == f"invalid: {path}: 5 violations in 2 of 3 samples of schema 'text' at depth values"


def test_check_depth_shapes_skips_value_checks(capsys, tmp_path):
    samples, tags = _bad_batch()
    path = save(tmp_path, {"samples": samples, "tags": tags})
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--depth", "shapes", "--json")
    report = json.loads(out)
    assert code == 1 and "value" not in {v["code"] for v in report["files"][0]["violations"]}
    assert report["depth"] == "shapes"


def test_check_json_is_one_object_with_every_violation(capsys, tmp_path):
    samples, tags = _bad_batch()
    path = save(tmp_path, {"samples": samples, "tags": tags})
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--json")
    report = json.loads(out)
    expected = ts.load_schema("text").batch_violations(samples, tags=tags)
    assert code == 1
    (file,) = report["files"]
    assert report["valid"] is False and {k: file[k] for k in ("schema", "samples")} == {"schema": "text", "samples": 3}
    assert [(v["sample"], v["field"], v["code"], v["message"]) for v in file["violations"]] == [
        (v.sample, v.field, v.code, v.message) for v in expected
    ]
    code, out, _ = run(capsys, "check", save(tmp_path, samples[:1], "good.pt"), "--schema", "text", "--json")
    assert code == 0 and json.loads(out)["valid"] is True and json.loads(out)["files"][0]["violations"] == []


@pytest.mark.parametrize("name", SCHEMAS)
def test_check_auto_picks_the_schema_of_the_sample(capsys, tmp_path, name):
    samples = [sample_of(name, 5, 3), sample_of(name, 3, 2, uid="q1")]
    path = save(tmp_path, samples)
    code, out, _ = run(capsys, "check", path, "--schema", "auto")
    assert code == 0
    assert f"schema {ts.schema_for_sample(samples[0]).name!r} (chosen by --schema auto" in out


def test_check_accepts_a_schema_file_path(capsys, tmp_path):
    path = tmp_path / "strict.yaml"
    path.write_text("name: strict\nextends: [text]\nextra: forbid\n")
    sample = sample_of("text")
    sample["surprise"] = torch.zeros(2)
    code, out, _ = run(capsys, "check", save(tmp_path, [sample]), "--schema", path)
    assert code == 1 and "surprise" in out and "extra" in out


def test_check_needs_trust_for_files_with_python_objects(capsys, tmp_path):
    sample = sample_of("text")
    sample["note"] = types.SimpleNamespace(a=1)  # a class weights_only cannot load
    path = save(tmp_path, [sample])
    code, _, err = run(capsys, "check", path, "--schema", "text")
    line = one_error_line(err, "check")
    assert code == 2 and "types.SimpleNamespace" in line and "rerun with --trust if you trust the file" in line
    code, out, err = run(capsys, "check", path, "--schema", "text", "--trust")
    assert (code, err) == (0, "") and out.startswith("valid:")


def test_check_says_when_meta_tensors_had_no_values_to_check(capsys, tmp_path):
    sample = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in sample_of("text").items()}
    path = save(tmp_path, [sample])
    code, out, _ = run(capsys, "check", path, "--schema", "text")
    assert code == 0 and out.rstrip().endswith("its meta tensors have no values, so only their shapes were checked")
    _, out, _ = run(capsys, "check", path, "--schema", "text", "--depth", "shapes")
    assert "meta tensors" not in out


# -- plan -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dp", "batch", "n", "actor", "critic", "tp", "cp"),
    [(2, 353, 8, 15, None, 1, 1), (4, 1000, 5, 7, 3, 8, 16), (3, 6, 1, 2, None, 2, 1), (1, 1, 1, 1, 1, 1, 1)],
)
def test_plan_matches_verls_rule(capsys, dp, batch, n, actor, critic, tp, cp):
    argv = ["plan", "--dp-size", dp, "--batch-size", batch, "--rollout-n", n, "--actor-mini-batch-size", actor]
    argv += ["--tp-size", tp, "--cp-size", cp] + (["--critic-mini-batch-size", critic] if critic else [])
    code, out, _ = run(capsys, *argv, "--json")
    report = json.loads(out)
    # The reference: verl's lcm rule and the smallest multiple of 2*tp*cp that is >= 128.
    multiple = math.lcm(dp, actor * n, *([critic * n] if critic else []))
    pad = -batch % multiple
    length = -(-128 // (2 * tp * cp)) * (2 * tp * cp)
    assert code == 0
    assert (report["required_multiple"], report["padding_samples"], report["padding_length"]) == (multiple, pad, length)
    assert report["padding_share"] == pytest.approx(pad / (batch + pad))
    assert report["padding_dims"] == {"prompt": length - 1, "response": 1}
    code, out, _ = run(capsys, *argv)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 4
    assert lines[0].split()[:3] == ["required", "multiple", str(multiple)]
    assert lines[2].split()[:3] == ["padding", "samples", str(pad)]
    assert f"{pad / (batch + pad):.1%} of the padded batch of {batch + pad}" in lines[2]
    assert lines[3].split()[:3] == ["padding", "length", str(length)]


# -- pad ------------------------------------------------------------------------------------


def _pad_args(name: str) -> list[str]:
    schema = ts.load_schema(name)
    return [a for k, v in FREE_DIMS.items() if k in schema.dims for a in ("--dim", f"{k}={v}")]


def _only_plain(value: Any) -> bool:
    if type(value) is torch.Tensor:
        return not value.is_nested and value.layout == torch.strided
    if type(value) is dict:
        return all(type(k) is str and _only_plain(v) for k, v in value.items())
    if type(value) is list:
        return all(_only_plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


@pytest.mark.parametrize("name", SCHEMAS)
@pytest.mark.parametrize("reference", ["dims", "like list", "like tensordict"])
def test_pad_writes_plain_samples_that_check_accepts_without_trust(capsys, tmp_path, name, reference):
    out_path = tmp_path / "pad.pt"
    real = [sample_of(name, 5, 3), sample_of(name, 2, 6, uid="q1")]
    if reference == "dims":
        extra = _pad_args(name)
    else:
        like = save(tmp_path, real if reference == "like list" else tq_batch(real), "real.pt")
        extra = ["--like", like]
    code, out, err = run(capsys, "pad", name, "--count", 4, "--eos-token-id", 2, *extra, "--out", out_path)
    assert (code, err) == (0, ""), err
    assert out.startswith(f"wrote 4 padding samples of schema {name!r} to {out_path}")
    loaded = torch.load(out_path, weights_only=True)
    assert set(loaded) == {"samples", "tags"} and len(loaded["samples"]) == len(loaded["tags"]) == 4
    assert _only_plain(loaded)
    assert all(t["is_padding"] is True for t in loaded["tags"])
    assert len({s["uid"] for s in loaded["samples"]}) == 1
    if reference != "dims":
        assert loaded["samples"][0].keys() >= {k for k in real[0] if k in ts.load_schema(name).fields}
    ts.load_schema(name).validate_batch(loaded["samples"], tags=loaded["tags"])
    code, out, err = run(capsys, "check", out_path, "--schema", name)
    assert (code, err) == (0, "") and out.startswith("valid:")
    code, out, _ = run(capsys, "check", out_path, "--schema", name, "--json")
    assert json.loads(out)["totals"]["samples"] == 4


def test_pad_dims_set_the_padding_sizes(capsys, tmp_path):
    out_path = tmp_path / "pad.pt"
    code, out, _ = run(
        capsys, "pad", "text", "--count", 2, "--eos-token-id", 7, "--dim", "prompt=9", "--dim", "response=3",
        "--out", out_path,
    )  # fmt: skip
    sample = torch.load(out_path, weights_only=True)["samples"][0]
    assert code == 0 and "prompt=9, response=3, seq=12" in out
    assert sample["input_ids"].shape == (12,) and set(sample["prompts"].tolist()) == {7}


def test_pad_keeps_tensors_of_the_reference_mapping_plain(capsys, tmp_path):
    like = sample_of("vlm_mrope")
    like["multi_modal_inputs"] = {"image_grid_thw": torch.tensor([[1, 2, 2]]), "pixel_values": torch.ones(4, 3)}
    path = save(tmp_path, [like], "like.pt")
    out_path = tmp_path / "pad.pt"
    code, _, err = run(capsys, "pad", "vlm_mrope", "--count", 2, "--eos-token-id", 2, "--like", path, "--out", out_path)
    assert (code, err) == (0, "")
    assert _only_plain(torch.load(out_path, weights_only=True))


def test_plain_conversion_refuses_what_weights_only_cannot_load():
    with pytest.raises(_cli_args.CommandError, match="padding sample 0, 'x': a SimpleNamespace"):
        _cli_pad._plain({"x": types.SimpleNamespace()}, "padding sample 0")
    nested = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)], layout=torch.jagged)
    with pytest.raises(_cli_args.CommandError, match="cannot be written as plain data"):
        _cli_pad._plain([nested], "s")
    with pytest.raises(_cli_args.CommandError, match="is not a str or an int"):
        _cli_pad._plain({(1, 2): 0}, "s")
    converted = _cli_pad._plain({"a": (1, 2.0, torch.arange(3)[1:]), "b": {"c": None}}, "s")
    assert _only_plain(converted) and converted["a"][2].tolist() == [1, 2]


def test_pad_failure_leaves_no_file(capsys, tmp_path, monkeypatch):
    def boom(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", boom)
    code, _, err = run(capsys, "pad", "text", "--count", 1, "--eos-token-id", 2, "--out", tmp_path / "p.pt")
    assert code == 2 and "No space left on device" in one_error_line(err, "pad")
    assert list(tmp_path.iterdir()) == []


# The padding's own refusals, worded for the command line from the errors' fields (issue 15).


def _padding_refusal(schema: str, count: int, **kwargs: Any) -> Exception:
    from trajschema.padding import resolve_padding

    try:
        resolve_padding(ts.load_schema(schema).plan, count, **kwargs).check_memory(_cli_pad.PAD_MEMORY_LIMIT)
    except ValueError as exc:
        return exc
    raise AssertionError("padding accepted it")


def test_pad_words_a_memory_refusal_from_the_padding_errors_fields(capsys, tmp_path):
    code, out, err = run(capsys, "pad", "text", "--count", 10**8, "--eos-token-id", 2, "--out", tmp_path / "p.pt")
    exc = _padding_refusal("text", 10**8)
    assert code == 2 and out == "" and list(tmp_path.iterdir()) == []
    assert one_error_line(err, "pad") == (
        f"trajschema pad: error: --count 100000000: {exc.estimate}; pad writes at most 2.0 GiB; lower --count "
        "or the --dim sizes (a batch needs fewer padding samples than its required multiple; see `trajschema plan`)"
    )
    assert "most in input_ids" in exc.estimate and "count=" not in err and "dims=" not in err


def test_pad_names_the_machines_memory_when_it_has_less_than_pad_allows(capsys, tmp_path, monkeypatch):
    from trajschema.padding import samples as _padding

    monkeypatch.setattr(_padding, "_memory_limit", lambda: 2**20)
    code, _, err = run(capsys, "pad", "text", "--count", 1000, "--eos-token-id", 2, "--out", tmp_path / "p.pt")
    line = one_error_line(err, "pad")
    assert code == 2 and "; more than this machine has (1.0 MiB); lower --count or the --dim sizes" in line
    assert "pad writes at most" not in line


@pytest.mark.parametrize("name", [n for n in SCHEMAS if any(d in ts.load_schema(n).dims for d in FREE_DIMS)])
def test_pad_says_what_to_type_for_a_dim_padding_cannot_size(capsys, tmp_path, name):
    code, _, err = run(capsys, "pad", name, "--count", 1, "--eos-token-id", 2, "--out", tmp_path / "p.pt")
    exc = _padding_refusal(name, 1)
    assert code == 2 and exc.dim in FREE_DIMS
    assert one_error_line(err, "pad") == (
        f"trajschema pad: error: {exc.problem}; pass --like FILE (a real sample) or --dim {exc.dim}=SIZE"
    )


def test_pad_says_what_to_type_for_a_copy_field_without_a_reference(capsys, tmp_path):
    schema = tmp_path / "copying.yaml"
    schema.write_text("name: copying\nextends: [text]\nfields:\n  extra: {kind: mapping, pad: copy}\n")
    code, _, err = run(capsys, "pad", schema, "--count", 1, "--eos-token-id", 2, "--out", tmp_path / "p.pt")
    assert code == 2
    assert one_error_line(err, "pad") == (
        "trajschema pad: error: field 'extra' pads by copying the reference sample; pass --like FILE (a real sample)"
    )


# The padding words its refusals for a Python caller (dims=, like=, eos_token_id=); pad names the flags typed.

_MOE_SIZES = ["--dim", "prompt=3", "--dim", "response=2", "--dim", "layers=2", "--dim", "topk=4"]
PAD_REFUSALS = {
    # id: (schema: a name, or the YAML of one; the arguments after it; the whole error line after "error: ")
    "dim below its bound": ("text", ["--dim", "prompt=0"], "--dim prompt=0 breaks the dim's bounds (>= 1)"),
    "expert count below its bound": (
        "moe_routed",
        [*_MOE_SIZES, "--dim", "experts=0"],
        "--dim experts=0 breaks the dim's bounds (>= 1)",
    ),
    "derived dim": (
        "text",
        ["--dim", "seq=5"],
        "--dim seq: seq is derived (seq = prompt + response); set --dim prompt=SIZE and --dim response=SIZE instead",
    ),
    "fixed dim": (
        "vlm_mrope",
        ["--dim", "prompt=3", "--dim", "response=2", "--dim", "rope_rows=2"],
        "--dim rope_rows=2: rope_rows is fixed at 4 by schema 'vlm_mrope'",
    ),
    "fewer experts than slots": (
        "moe_routed",
        [*_MOE_SIZES, "--dim", "experts=2"],
        "schema 'moe_routed': padding field 'routed_experts' with {spread: experts}: experts=2 (from --dim) ids "
        "cannot fill 4 slots with distinct ids (the last axis, topk=4); experts must be at least 4",
    ),
    "eos beyond the dtype": (
        "name: small\nextends: [text]\nfields:\n  tiny: {shape: [response], dtype: int8, pad: eos}\n",
        ["--dim", "prompt=2", "--dim", "response=1", "--eos-token-id", "300"],
        "schema 'small': padding field 'tiny' with --eos-token-id 300 does not fit dtype torch.int8",
    ),
    "eos outside the values": (
        "name: capped\nextends: [text]\nfields:\n  capped: {shape: [response], dtype: int64, values: [0, 1], "
        "pad: eos}\n",
        ["--dim", "prompt=2", "--dim", "response=1", "--eos-token-id", "300"],
        "schema 'capped': padding field 'capped' with --eos-token-id 300 breaks its value checks (values [0, 1], "
        "min None, max None, finite False)",
    ),
    "like sample off the schema": (
        "text",
        ["--like", "{like}"],
        "--like {like}: sample 0 breaks schema 'text' (1 violation; first: input_ids: --like sample: on input_ids, "
        "position_ids, attention_mask agree on 8 but seq = prompt + response = 7 (prompt=4, response=3))",
    ),
}


@pytest.mark.parametrize(("schema", "args", "message"), list(PAD_REFUSALS.values()), ids=list(PAD_REFUSALS))
def test_pad_refusals_name_the_flags_typed(capsys, tmp_path, schema, args, message):
    if "\n" in schema:
        path = tmp_path / "schema.yaml"
        path.write_text(schema)
        schema = str(path)
    like = sample_of("text")
    like["prompts"] = like["prompts"][:-1]  # one prompt token short of its input_ids
    like_file = str(saved(tmp_path / "like.pt", [like]))
    args = [a.replace("{like}", like_file) for a in args]
    eos = [] if "--eos-token-id" in args else ["--eos-token-id", "2"]
    code, out, err = run(capsys, "pad", schema, "--count", 2, *eos, *args, "--out", tmp_path / "p.pt")
    line = error_line(err, "pad")
    assert (code, out) == (2, "") and not (tmp_path / "p.pt").exists()
    assert line == "trajschema pad: error: " + message.replace("{like}", like_file)
    for python in ("dims=", "dims[", "like=", "eos_token_id", "count="):
        assert python not in line


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("padding size prompt=0 (from dims=) breaks the dim's bounds (>= 1)", "--dim prompt=0 breaks"),
        ("dims['rope_rows']=2: rope_rows is fixed at 4", "--dim rope_rows=2: rope_rows is fixed at 4"),
        ('dims["a b"]: a b is derived (a b = x + y); set x, y instead', "--dim a b: a b is derived (a b = x + y); "
         "set --dim x=SIZE and --dim y=SIZE instead"),
        ("padding sizes give field 'x' a negative axis (n - 2=-1); pass other dims=", "pass other --dim sizes"),
        ("field 'extra' of like= is nested too deeply", "field 'extra' of the --like sample is nested"),
        ("spread over experts=8 (from the like= sample: its shapes)", "(from the --like sample: its shapes)"),
        ("a message with no argument in it", "a message with no argument in it"),
    ],
)  # fmt: skip
def test_cli_words_translates_each_python_argument_name(message, expected):
    assert expected in _cli_pad.cli_words(message)


# -- infer ----------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["list", "tensordict"])
def test_infer_prints_a_loadable_draft(capsys, tmp_path, layout):
    samples = [sample_of("vlm_mrope_moe", p, r, uid=f"q{p}") for p, r in [(5, 3), (8, 2), (3, 7)]]
    path = save(tmp_path, samples if layout == "list" else tq_batch(samples))
    code, out, err = run(capsys, "infer", path, "--name", "drafted")
    assert code == 0 and err.startswith("trajschema infer: note: these samples match packaged schema 'vlm_mrope_moe'")
    draft_file = tmp_path / "drafted.yaml"
    draft_file.write_text(out)
    draft = ts.load_schema(draft_file)
    assert draft.name == "drafted" and str(draft.dims["seq"].expr) == "prompt + response"
    draft.validate_batch(samples)
    code, out, _ = run(capsys, "infer", path, "--name", "drafted2", "--base", "vlm_mrope_moe")
    assert code == 0 and "extends: [vlm_mrope_moe]" in out


# -- export ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMAS)
def test_export_yaml_and_json_schema_are_the_schemas_own(capsys, tmp_path, name):
    schema = ts.load_schema(name)
    code, out, _ = run(capsys, "export", name, "--format", "yaml")
    assert code == 0 and out == schema.to_yaml().rstrip("\n") + "\n"
    (tmp_path / f"{name}.yaml").write_text(out)
    assert ts.load_schema(tmp_path / f"{name}.yaml") == schema
    code, out, _ = run(capsys, "export", name, "--format", "json-schema")
    assert code == 0 and json.loads(out) == schema.to_json_schema()


def _exec_source(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<exported>", "exec", dont_inherit=True), namespace)  # not this file's __future__
    return namespace


@pytest.mark.parametrize("name", SCHEMAS)
def test_export_jaxtyping_source_runs_and_checks_a_sample_as_the_schema_does(capsys, name):
    import dataclasses

    schema = ts.load_schema(name)
    code, out, _ = run(capsys, "export", name, "--format", "jaxtyping")
    namespace = _exec_source(out)
    cls, check = namespace[_class_name(name)], namespace[f"check_{name}"]
    declared = {f.name: f for f in dataclasses.fields(cls)}
    assert code == 0 and set(declared) == set(schema.fields)  # packaged field names are Python names
    no_default = {k for k, f in declared.items() if f.default is dataclasses.MISSING}
    assert no_default == {f.name for f in schema.fields.values() if f.required}
    sample = sample_of(schema)
    assert check(sample).input_ids is sample["input_ids"]
    for field, t in sample.items():
        if schema.fields[field].is_tensor:
            wrong = t.to(torch.int8) if t.is_floating_point() else t.to(torch.float64)
            with pytest.raises(TypeError):
                check({**sample, field: wrong})
    with pytest.raises(TypeError, match=rf"^check_{name}: the sample has no 'prompts'"):
        check({})


def _class_name(schema_name: str) -> str:
    return "".join(w[0].upper() + w[1:] for w in schema_name.split("_")) + "Sample"


def test_export_jaxtyping_handles_odd_names_and_dtype_sets(capsys, tmp_path):
    path = tmp_path / "odd.yaml"
    path.write_text(
        textwrap.dedent("""\
        name: odd-schema.v2
        dims: {n: {min: 1}, k: 3}
        fields:
          a-b: {shape: [n], dtype: [bool, uint8, bfloat16], pad: 0}
          class: {shape: [k, n], dtype: int8, pad: 0, required: false}
          'quote"d': {kind: str, pad: uid}
        """)
    )
    code, out, _ = run(capsys, "export", path, "--format", "jaxtyping")
    namespace = _exec_source(out)
    check = namespace["check_odd_schema_v2"]
    assert code == 0 and namespace["_ODD_SCHEMA_V2_KEYS"] == {"a-b": "a_b", 'quote"d': "quote_d", "class": "class_"}
    good = {"a-b": torch.zeros(4, dtype=torch.bfloat16), 'quote"d': "u"}
    made = check({**good, "class": torch.zeros(3, 4, dtype=torch.int8)})
    assert made.a_b is good["a-b"] and made.quote_d == "u" and check(good).class_ is None
    for bad in (
        {**good, "a-b": torch.zeros(4, dtype=torch.int64)},  # not in the dtype set
        {**good, "class": torch.zeros(3, 5, dtype=torch.int8)},  # n disagrees with a-b's
        {**good, "a-b": torch.zeros(0, dtype=torch.bool)},  # n >= 1
    ):
        with pytest.raises(TypeError):
            check(bad)


# -- diff -----------------------------------------------------------------------------------


def _diff_pair(tmp_path: Path) -> tuple[Path, Path, Path]:
    old = tmp_path / "old.yaml"
    old.write_text("name: old\nextends: [text]\n")
    added_required = tmp_path / "new_required.yaml"
    added_required.write_text(
        "name: new_required\nextends: [text]\nfields:\n  extra_ids: {shape: [seq], dtype: int64, pad: 0}\n"
    )
    added_optional = tmp_path / "new_optional.yaml"
    added_optional.write_text(
        "name: new_optional\nextends: [text]\nfields:\n"
        "  extra_ids: {shape: [seq], dtype: int64, pad: 0, required: false}\n"
    )
    return old, added_required, added_optional


def test_diff_flags_a_new_required_field_as_breaking_backward(capsys, tmp_path):
    old, required, optional = _diff_pair(tmp_path)
    code, out, err = run(capsys, "diff", old, required, "--mode", "backward")
    assert code == 1 and err == ""
    assert "extra_ids" in out and out.splitlines()[-1].startswith("incompatible (backward): ")
    expected = ts.load_schema(old).compatibility(ts.load_schema(required), mode="backward")
    marks = ["BREAKING" if c.breaking else "ok" for c in expected]
    assert out.splitlines()[:-1] == [f"{m} {c.path}  {c.what}  ({c.why})" for m, c in zip(marks, expected, strict=True)]
    assert any(line.startswith("BREAKING") and "extra_ids" in line for line in out.splitlines())
    code, out, _ = run(capsys, "diff", old, optional, "--mode", "backward")
    assert code == 0 and out.splitlines()[-1].startswith("compatible (backward): ")


def test_diff_of_a_schema_with_itself_is_no_changes(capsys):
    code, out, _ = run(capsys, "diff", "text", "text")
    assert (code, out.strip()) == (0, "no changes")


def test_diff_json_lists_every_change(capsys, tmp_path):
    old, required, _ = _diff_pair(tmp_path)
    code, out, _ = run(capsys, "diff", old, required, "--mode", "full", "--json")
    report = json.loads(out)
    expected = ts.load_schema(old).compatibility(ts.load_schema(required), mode="full")
    assert code == 1 and report["compatible"] is False and report["mode"] == "full"
    assert [(c["path"], c["kind"], c["breaking"]) for c in report["changes"]] == [
        (c.path, c.kind, c.breaking) for c in expected
    ]


# -- bad input: one line on stderr, exit 2, for every command ------------------------------------


def _files(tmp_path: Path) -> dict[str, Path]:
    """A set of unusable inputs (made once per test: each case uses some of them)."""
    files = {
        "missing": tmp_path / "missing.pt",
        "dir": tmp_path,
        "text": tmp_path / "notes.txt",
        "empty": tmp_path / "empty.pt",
        "truncated": tmp_path / "truncated.pt",
        "tensor": tmp_path / "tensor.pt",
        "no_samples": tmp_path / "no_samples.pt",
        "bad_tags": tmp_path / "bad_tags.pt",
        "not_samples": tmp_path / "not_samples.pt",
        "objects": tmp_path / "objects.pt",
        "fits_none": tmp_path / "fits_none.pt",
        "good": tmp_path / "good.pt",
        "moe": tmp_path / "moe.pt",
        "bad_like": tmp_path / "bad_like.pt",
        "bad_yaml": tmp_path / "bad.yaml",
        "out_dir_missing": tmp_path / "nowhere" / "pad.pt",
        "td_2d": tmp_path / "td_2d.pt",
        "td_objects": tmp_path / "td_objects.pt",
        "int_keys": tmp_path / "int_keys.pt",
        "with_none": tmp_path / "with_none.pt",
        "envelope_str": tmp_path / "envelope_str.pt",
        "envelope_tags_str": tmp_path / "envelope_tags_str.pt",
        "fifo": tmp_path / "fifo",
    }
    files["text"].write_text("hello\n")
    files["empty"].write_bytes(b"")
    torch.save([sample_of("text")], files["good"])
    files["truncated"].write_bytes(files["good"].read_bytes()[:200])
    torch.save(torch.zeros(3), files["tensor"])
    torch.save([], files["no_samples"])
    torch.save({"samples": [sample_of("text")], "tags": [{}, {}]}, files["bad_tags"])
    torch.save([1, 2], files["not_samples"])
    torch.save([{"x": types.SimpleNamespace()}], files["objects"])
    torch.save([{"foo": torch.zeros(3)}], files["fits_none"])
    torch.save([sample_of("vlm_mrope_moe")], files["moe"])
    torch.save([{**sample_of("text"), "loss_mask": torch.ones(4, dtype=torch.int64)}], files["bad_like"])
    torch.save(TensorDict({"a": torch.zeros(2, 3)}, batch_size=[2, 3]), files["td_2d"])
    with_objects = tq_batch([sample_of("text"), sample_of("text", uid="q1")])
    with_objects["note"] = NonTensorData(types.SimpleNamespace(a=1), batch_size=[2])
    torch.save(with_objects, files["td_objects"])
    torch.save({1: torch.zeros(2)}, files["int_keys"])
    torch.save([sample_of("text"), None], files["with_none"])
    torch.save({"samples": "abc"}, files["envelope_str"])
    torch.save({"samples": [sample_of("text")], "tags": "x"}, files["envelope_tags_str"])
    os.mkfifo(files["fifo"])
    files["bad_yaml"].write_text("name: bad\ndims: {n: {}}\nfields:\n  x: {shape: [n], dtype: int, pad: 0}\n")
    return files


PAD = ["--count", "1", "--eos-token-id", "2"]
PLAN = ["--batch-size", "10", "--rollout-n", "2", "--actor-mini-batch-size", "3"]
BAD_INPUT = {
    # id: (argv, a fragment of the error line). {name} is replaced by the path of _files()[name].
    "misspelt top option": (["--verison"], "unrecognized option '--verison'; did you mean '--version'?"),
    "unknown command": (["chek"], "unknown command 'chek'; did you mean 'check'?"),
    "unknown top option": (["--colour"], "unrecognized option '--colour'"),
    "list extra argument": (["list", "now"], "unrecognized arguments: now"),
    "show unknown schema": (["show", "txet"], "did you mean 'text'?"),
    "show missing name": (["show"], "required: NAME"),
    "show missing file": (["show", "{missing}.yaml"], "no schema file"),
    "show malformed schema": (["show", "{bad_yaml}"], "fields.x.dtype"),
    "check missing file": (["check", "{missing}", "--schema", "text"], "no such file"),
    "check directory": (["check", "{dir}", "--schema", "text"], "no bundle here (no manifest.json)"),
    "check text file": (["check", "{text}", "--schema", "text"], "looks like text, not samples; check reads"),
    "check empty file": (["check", "{empty}", "--schema", "text"], "is empty; check reads torch.save files"),
    "check truncated file": (["check", "{truncated}", "--schema", "text"], "not a readable torch.save file"),
    "check a tensor": (["check", "{tensor}", "--schema", "text"], "holds a Tensor; expected"),
    "check no samples": (["check", "{no_samples}", "--schema", "text"], "holds no samples"),
    "check tags length": (["check", "{bad_tags}", "--schema", "text"], "'tags' has 2 entries for 1 samples"),
    "check list of ints": (["check", "{not_samples}", "--schema", "text"], "item 0 is an int, not a sample"),
    "check needs trust": (["check", "{objects}", "--schema", "text"], "rerun with --trust"),
    "check 2-d tensordict": (["check", "{td_2d}", "--schema", "text"], "needs one batch dim, found [2, 3]"),
    "check tensordict with objects": (["check", "{td_objects}", "--schema", "text"], "types.SimpleNamespace"),
    "check int keys": (["check", "{int_keys}", "--schema", "text"], "keys are not all field names"),
    "check None sample": (["check", "{with_none}", "--schema", "text"], "item 1 is None, not a sample"),
    "check envelope of a str": (["check", "{envelope_str}", "--schema", "text"], "holds a str; expected"),
    "check envelope tags str": (["check", "{envelope_tags_str}", "--schema", "text"], "'tags' must be a list"),
    "check a fifo": (["check", "{fifo}", "--schema", "text"], "is not a regular file"),
    "check unknown schema": (["check", "{good}", "--schema", "nope"], "no schema 'nope'"),
    "check auto fits none": (["check", "{fits_none}", "--schema", "auto"], "no schema fits the sample"),
    "check bad depth": (["check", "{good}", "--schema", "text", "--depth", "deep"], "invalid choice: 'deep'"),
    "check missing schema": (["check", "{good}"], "is no bundle, and a file of samples is checked against a schema"),
    "check unknown option": (["check", "{good}", "--schema", "text", "--strict"], "unrecognized option '--strict'"),
    "completion without a shell": (["completion"], "expected a shell: bash, zsh or fish"),
    "completion unknown shell": (["completion", "tcsh"], "invalid choice: 'tcsh'"),
    "plan zero dp": (["plan", "--dp-size", "0", *PLAN], "argument --dp-size: expected a positive integer, found '0'"),
    "plan negative batch": (["plan", "--dp-size", "2", *PLAN[:1], "-3", *PLAN[2:]], "argument --batch-size"),
    "plan text tp": (["plan", "--dp-size", "2", *PLAN, "--tp-size", "x"], "argument --tp-size"),
    "plan zero cp": (["plan", "--dp-size", "2", *PLAN, "--cp-size", "0"], "argument --cp-size"),
    "plan missing rollout": (
        ["plan", "--dp-size", "2", "--batch-size", "3", "--actor-mini-batch-size", "1"],
        "--rollout-n",
    ),
    "pad dim without =": (["pad", "text", *PAD, "--dim", "prompt", "--out", "{out_dir_missing}"], "expected NAME=SIZE"),
    "pad dim not int": (["pad", "text", *PAD, "--dim", "prompt=x", "--out", "p.pt"], "must be an integer"),
    "pad dim negative": (["pad", "text", *PAD, "--dim", "prompt=-1", "--out", "p.pt"], "must be >= 0"),
    "pad unknown dim": (["pad", "text", *PAD, "--dim", "promt=3", "--out", "p.pt"], "did you mean 'prompt'?"),
    "pad derived dim": (["pad", "text", *PAD, "--dim", "seq=3", "--out", "p.pt"], "seq is derived"),
    "pad dim out of bounds": (["pad", "text", *PAD, "--dim", "prompt=0", "--out", "p.pt"], "bounds"),
    "pad dim given twice": (["pad", "text", *PAD, "--dim", "prompt=3", "--dim", "prompt=4", "--out", "p.pt"], "twice"),
    "pad free dim unsized": (
        ["pad", "moe_routed", *PAD, "--out", "p.pt"],
        "pass --like FILE (a real sample) or --dim layers=SIZE",
    ),
    "pad zero count": (["pad", "text", "--count", "0", "--eos-token-id", "2", "--out", "p.pt"], "--count"),
    "pad negative eos": (["pad", "text", "--count", "1", "--eos-token-id", "-2", "--out", "p.pt"], "--eos-token-id"),
    "pad unknown schema": (["pad", "nope", *PAD, "--out", "p.pt"], "no schema 'nope'"),
    "pad missing out": (["pad", "text", *PAD], "required: --out"),
    "pad out dir missing": (["pad", "text", *PAD, "--out", "{out_dir_missing}"], "does not exist"),
    "pad out is a directory": (["pad", "text", *PAD, "--out", "{dir}"], "is a directory"),
    "pad like missing": (["pad", "text", *PAD, "--like", "{missing}", "--out", "p.pt"], "no such file"),
    "pad like breaks schema": (["pad", "text", *PAD, "--like", "{bad_like}", "--out", "p.pt"], "breaks schema 'text'"),
    "pad like another family": (["pad", "text", *PAD, "--like", "{moe}", "--out", "p.pt"], None),
    # numbers are plain decimal and fit torch's int64 (found by attacks; each reached torch or passed)
    "count too big for torch": (
        ["pad", "text", "--count", "99999999999999999999", *PAD[2:], "--out", "p.pt"],
        "argument --count: expected",
    ),
    "eos too big for torch": (
        ["pad", "text", "--count", "1", "--eos-token-id", str(2**63), "--out", "p.pt"],
        "argument --eos-token-id",
    ),
    "dim too big for torch": (["pad", "text", *PAD, "--dim", f"prompt={2**63}", "--out", "p.pt"], "at most 2**63-1"),
    "count with underscores": (
        ["pad", "text", "--count", "1_0", *PAD[2:], "--out", "p.pt"],
        "expected a positive integer, found '1_0'",
    ),
    "count in arabic digits": (
        ["pad", "text", "--count", "\u0661", *PAD[2:], "--out", "p.pt"],
        "expected a positive integer",
    ),
    "dim with underscores": (["pad", "text", *PAD, "--dim", "prompt=1_27", "--out", "p.pt"], "must be an integer"),
    "dim in float syntax": (["pad", "moe_routed", *PAD, "--dim", "layers=1e3", "--out", "p.pt"], "must be an integer"),
    "dim nan": (["pad", "text", *PAD, "--dim", "prompt=nan", "--out", "p.pt"], "must be an integer"),
    "dim empty name": (["pad", "text", *PAD, "--dim", "=3", "--out", "p.pt"], "expected NAME=SIZE"),
    "dim empty size": (["pad", "text", *PAD, "--dim", "a=", "--out", "p.pt"], "must be an integer, found ''"),
    "dim lone =": (["pad", "text", *PAD, "--dim", "=", "--out", "p.pt"], "expected NAME=SIZE"),
    "plan batch nan": (
        ["plan", "--dp-size", "2", "--batch-size", "nan", "--rollout-n", "2", "--actor-mini-batch-size", "3"],
        "argument --batch-size",
    ),
    "infer missing name": (["infer", "{good}"], "required: --name"),
    "infer bad file": (
        ["infer", "{text}", "--name", "x"],
        "looks like text, not samples; this command reads torch.save",
    ),
    "infer unknown base": (["infer", "{good}", "--name", "x", "--base", "nope"], "no schema 'nope'"),
    "infer bad name": (["infer", "{good}", "--name", " padded "], "name"),
    "export bad format": (["export", "text", "--format", "toml"], "invalid choice: 'toml'"),
    "export unknown schema": (["export", "nope"], "no schema 'nope'"),
    "export malformed schema": (["export", "{bad_yaml}", "--format", "jaxtyping"], "fields.x.dtype"),
    "diff unknown old": (["diff", "nope", "text"], "no schema 'nope'"),
    "diff missing new": (["diff", "text"], "required: NEW"),
    "diff bad mode": (["diff", "text", "text", "--mode", "sideways"], "invalid choice: 'sideways'"),
    "demo zero prompts": (["demo", "--prompts", "0"], "argument --prompts: expected a positive integer, found '0'"),
    "demo text rollout": (["demo", "--rollout-n", "many"], "argument --rollout-n"),
    "demo negative seed": (["demo", "--seed", "-1"], "argument --seed"),
    "demo unknown schema": (["demo", "--schema", "nope"], "no schema 'nope'"),
}


@pytest.fixture
def no_demo_run(monkeypatch):
    """Record any call of run_demo: bad input must be refused before the demo (and Ray) starts."""
    calls: list[Any] = []
    import trajschema.cli.demo as demo  # its argument checks stay real; only the run is replaced

    monkeypatch.setattr(demo, "run_demo", lambda **kw: calls.append(kw))
    return calls


@pytest.mark.parametrize(("argv", "fragment"), list(BAD_INPUT.values()), ids=list(BAD_INPUT))
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, monkeypatch, no_demo_run, argv, fragment):
    monkeypatch.chdir(tmp_path)
    files = _files(tmp_path)
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in argv]
    code, out, err = run(capsys, *argv)
    command = next((a for a in argv if a in COMMANDS), "")
    line = one_error_line(err, command)
    assert code == 2, err
    assert fragment is None or fragment in line, line
    assert out == "" and no_demo_run == []
    assert "unexpected" not in line  # every case is anticipated, none reaches the catch-all
    assert not (tmp_path / "p.pt").exists()


def test_every_command_has_a_bad_input_case():
    assert {argv[0] for argv, _ in BAD_INPUT.values() if argv and argv[0] in COMMANDS} == set(COMMANDS)


# -- unexpected errors, pipes, colour ---------------------------------------------------------


def test_an_unexpected_error_is_one_line_with_a_debug_hint(capsys, monkeypatch):
    def bug(*args, **kwargs):
        raise KeyError("oops")

    monkeypatch.setattr("trajschema.padding.padding_needed", bug)
    argv = ["plan", "--dp-size", "2", *PLAN]
    code, _, err = run(capsys, *argv)
    line = one_error_line(err, "plan")
    assert code == 2 and "unexpected KeyError: 'oops'" in line and "set TRAJSCHEMA_DEBUG=1 for the traceback" in line
    monkeypatch.setenv("TRAJSCHEMA_DEBUG", "1")
    with pytest.raises(KeyError, match="oops"):
        main(argv)


def test_a_broken_pipe_ends_quietly(capsys, monkeypatch):
    class ClosedPipe:
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

        def isatty(self) -> bool:
            return False

    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    code = main(["export", "text", "--format", "json-schema"])
    err = capsys.readouterr().err
    assert code == 141 and err == ""


def test_warnings_are_one_line(capsys, monkeypatch):
    import warnings

    def warn_then_plan(*args, **kwargs):
        warnings.warn("something to know\nacross lines", UserWarning, stacklevel=1)
        return 3

    monkeypatch.setattr("trajschema.padding.padding_needed", warn_then_plan)
    code, _, err = run(capsys, "plan", "--dp-size", "2", *PLAN)
    assert code == 0 and err == "trajschema: warning: UserWarning: something to know; across lines\n"


@pytest.mark.parametrize("env", [{}, {"FORCE_COLOR": "1", "NO_COLOR": "1"}], ids=["plain", "NO_COLOR over FORCE_COLOR"])
def test_no_colour_codes_off_a_terminal(capsys, tmp_path, monkeypatch, env):
    # FORCE_COLOR alone does colour a pipe (force-color.org): see tests/cli/test_output.py.
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    samples, tags = _bad_batch()
    path = save(tmp_path, {"samples": samples, "tags": tags})
    for argv in (["list"], ["show", "vlm_mrope_moe"], ["check", path, "--schema", "text"]):
        _, out, _ = run(capsys, *argv)
        assert out and "\x1b[" not in out, argv


def test_the_subcommand_modules_do_not_import_the_front_module():
    modules = ("args", "output", "read", "check", "bundles", "plan", "pad", "schemas", "completion")
    for module in modules:
        source = (Path(_cli.__file__).parent / f"{module}.py").read_text()
        imports = [line for line in source.splitlines() if line.lstrip().startswith(("import ", "from "))]
        assert not [line for line in imports if "cli.app" in line or "cli import app" in line], module


# -- as a program ---------------------------------------------------------------------------


def _program(*argv: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TRAJSCHEMA_PATH", "TRAJSCHEMA_DEBUG", "FORCE_COLOR")}
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=120, env=env, check=False, **kw)


@pytest.mark.slow
def test_python_dash_m_help():
    done = _program(sys.executable, "-m", "trajschema", "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: trajschema") and done.stderr == ""


@pytest.mark.slow
def test_the_console_script_runs_and_fails_in_one_line(tmp_path):
    script = Path(sys.executable).with_name("trajschema")
    assert script.exists(), "the package is installed with its console script"
    done = _program(str(script), "plan", "--dp-size", "2", "--batch-size", "353", "--rollout-n", "8",
                    "--actor-mini-batch-size", "15")  # fmt: skip
    assert done.returncode == 0 and "padding samples      7" in done.stdout
    done = _program(str(script), "check", str(tmp_path / "missing.pt"), "--schema", "text")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"trajschema check: error: {tmp_path / 'missing.pt'}: no such file\n"


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["export", "vlm_mrope_moe", "--format", "json-schema"], ["show", "vlm_mrope_moe"]])
def test_output_into_a_closed_pipe_has_no_traceback(argv):
    # The reader closes its end before the program writes anything (plain writes, then rich's).
    proc = subprocess.Popen([sys.executable, "-m", "trajschema", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141
    assert err == ""


# -- search-path honesty (issue 15) -----------------------------------------------------------


def test_check_auto_leaves_out_an_unrelated_broken_file_and_says_so_once(capsys, tmp_path, monkeypatch):
    """Before: exit 2, because someone's broken file on TRAJSCHEMA_PATH could not be read."""
    shelf = tmp_path / "shelf"
    shelf.mkdir()
    (shelf / "wip.yaml").write_text("name: wip\nfeilds: {}\n")
    (shelf / "typo3.yaml").write_text("name: other\nextends: [text]\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(shelf))
    path = save(tmp_path, [sample_of("vlm_mrope_moe"), sample_of("vlm_mrope_moe", 4, 2)])
    code, out, err = run(capsys, "check", path, "--schema", "auto")
    assert code == 0 and "schema 'vlm_mrope_moe' (chosen by --schema auto from sample 0)" in out
    (line,) = err.splitlines()
    assert line.startswith("trajschema check: warning: --schema auto left out what does not load: ")
    assert f"{shelf / 'typo3.yaml'}: name: this file is found as 'typo3' (its file name) but declares name" in line
    assert f"{shelf / 'wip.yaml'}:" in line and "unknown key 'feilds'" in line
    # Naming the schema involves no other file, so nothing is said.
    code, _, err = run(capsys, "check", path, "--schema", "vlm_mrope_moe")
    assert (code, err) == (0, "")


def test_check_auto_exits_2_only_when_nothing_on_the_path_loads(capsys, tmp_path, monkeypatch):
    for name in SCHEMAS:  # every packaged name shadowed by a broken file
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\nfeilds: {{}}\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    path = save(tmp_path, [sample_of(ts.load_schema(ts.schema_search_path()[-1] / "text.yaml"))])
    code, _, err = run(capsys, "check", path, "--schema", "auto")
    line = one_error_line(err, "check")
    assert code == 2 and line.endswith("; no schema on the search path loads")


def test_a_file_found_by_name_must_declare_it_in_list_show_and_export(capsys, tmp_path, monkeypatch):
    """Before: `list` showed typo3, `show typo3` printed 'schema other' and `show other` failed."""
    (tmp_path / "typo3.yaml").write_text("name: other\nextends: [text]\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    code, out, _ = run(capsys, "list")
    row = next(line for line in out.splitlines() if line.startswith("typo3\t"))
    assert code == 1 and "error: " in row and "declares name 'other'" in row
    for argv in (["show", "typo3"], ["export", "typo3"], ["diff", "text", "typo3"]):
        code, out, err = run(capsys, *argv)
        line = one_error_line(err, argv[0])
        assert code == 2 and out == "" and "is found as 'typo3' (its file name) but declares name 'other'" in line
    code, _, err = run(capsys, "show", tmp_path / "typo3.yaml")  # by path it is schema 'other'
    assert code == 0 and err == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["show", "{long}"],
        ["export", "{long}", "--format", "jaxtyping"],
        ["diff", "text", "{long}"],
        ["check", "{file}", "--schema", "{long}"],
        ["infer", "{file}", "--name", "draft", "--base", "{long}"],
        ["pad", "{long}", "--count", "1", "--eos-token-id", "2", "--out", "{file}.pad"],
    ],
    ids=lambda a: a[0],
)
def test_a_long_unknown_name_is_echoed_cut(capsys, tmp_path, argv):
    long = "y" * 5000
    file = save(tmp_path, [sample_of("text")])
    code, _, err = run(capsys, *(a.format(long=long, file=file) for a in argv))
    line = one_error_line(err, argv[0])
    assert code == 2 and f"{'y' * 60!r}…(5000 chars)" in line and "y" * 61 not in line


def test_infer_echoes_a_long_bad_draft_name_cut(capsys, tmp_path):
    file = save(tmp_path, [sample_of("text")])
    code, _, err = run(capsys, "infer", file, "--name", " " + "z" * 5000)
    line = one_error_line(err, "infer")
    assert code == 2 and line.startswith(f"trajschema infer: error: --name {(' ' + 'z' * 59)!r}…(5001 chars): ")
    assert "z" * 60 not in line and line.endswith("has leading or trailing whitespace")


def test_a_missing_search_path_entry_is_one_warning_line_on_stderr(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path / "typo"))
    code, out, err = run(capsys, "show", "text")
    assert code == 0 and out.startswith("schema text")
    assert err == (
        f"trajschema: warning: UserWarning: search path entry {tmp_path / 'typo'} does not exist; "
        "schemas are looked up without it (check TRAJSCHEMA_PATH)\n"
    )


def test_export_jaxtyping_prints_the_export_rooms_source(capsys):
    from trajschema.export import jaxtyping_source

    for name in SCHEMAS:
        code, out, _ = run(capsys, "export", name, "--format", "jaxtyping")
        assert code == 0 and out == jaxtyping_source(ts.load_schema(name).plan)


# ---------------------------------------------------------------------------------------------
# Unusable input on the command line. Each test pins a finding (and the fix): every
# unusable input ends in one line on stderr with the documented exit status, never a traceback,
# an `unexpected` error, an out-of-memory kill or code run from a file.

EOS = ["--eos-token-id", "2"]


def saved(path: Path, obj: Any) -> Path:
    torch.save(obj, path)
    return path


def error_line(err: str, command: str) -> str:
    """The one error line (as `one_error_line` finds it), with its exact prefix, and never the catch-all's."""
    line = one_error_line(err, command)
    assert line.startswith(f"trajschema {command}: error: " if command else "trajschema: error: "), line
    assert "unexpected" not in err, err
    return line


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
    return saved(tmp_path / f"{name}_{layout}.pt", td)


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
    path = saved(tmp_path / "lazy.pt", LazyStackedTensorDict.lazy_stack(tds, 0))
    code, out, err = run(capsys, "check", path, "--schema", "text")
    assert (code, err) == (1, "")
    assert "loss_mask" in out and out.splitlines()[-1].startswith(f"invalid: {path}:")


@pytest.mark.parametrize("name", SCHEMAS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_pad_like_a_file_of_each_layout_writes_what_check_accepts_without_trust(capsys, tmp_path, name, layout):
    like = layout_file(tmp_path, name, layout)
    out_path = tmp_path / "pad.pt"
    code, out, err = run(capsys, "pad", name, "--count", 3, *EOS, "--like", like, "--out", out_path)
    assert (code, err) == (0, ""), err
    loaded = torch.load(out_path, weights_only=True)
    assert len(loaded["samples"]) == 3
    code, out, err = run(capsys, "check", out_path, "--schema", name)
    assert (code, err) == (0, "") and out.startswith("valid:"), out


# -- sizes on the command line ---------------------------------------------------------------------


@pytest.fixture
def no_padding(monkeypatch):
    """Fail loudly if Schema.padding runs: the sizes must be refused before any tensor is allocated."""

    def refuse(*args, **kwargs):
        raise AssertionError("Schema.padding ran")

    monkeypatch.setattr(ts.Schema, "padding", refuse)


E = 2**63 - 1  # the int64 edge


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["text", "--count", "100000000"], "--count 100000000: 100000000 padding samples of schema 'text'"),
        (["text", "--count", "1", "--dim", "prompt=1000000000000"], "(prompt=1000000000000, response=1)"),
        (
            ["moe_routed", "--count", "1", *(a for d in ("layers", "topk", "experts") for a in ("--dim", f"{d}={E}"))],
            "2**1",
        ),
    ],
    ids=["huge count", "huge dim", "dims at the int64 edge"],
)
def test_pad_refuses_sizes_that_would_exhaust_memory(capsys, tmp_path, no_padding, argv, fragment):
    # These used to reach torch.full and end in the kernel's OOM killer (no message at all).
    code, out, err = run(capsys, "pad", *argv, *EOS, "--out", tmp_path / "p.pt")
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
    path = saved(tmp_path / "like.pt", [like])
    code, _, err = run(capsys, "pad", schema, "--count", 300, *EOS, "--like", path, "--out", tmp_path / "p.pt")
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
    estimate, sizes = _cli_pad.padding_bytes(schema, like, dims)
    pad = schema.padding(1, eos_token_id=2, like=like, dims=dims or None)
    held = sum(v.numel() * v.element_size() for v in pad.samples[0].values() if isinstance(v, torch.Tensor))
    assert held <= estimate <= 2 * held + 64
    assert {k: v for k, v in sizes.items() if k in pad.dims} == pad.dims


@pytest.fixture
def demo_stand_in(monkeypatch):
    """A stand-in for the demo's runner that succeeds: these arguments must be refused before it (and Ray) starts."""
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
def test_demo_refuses_sizes_it_could_not_build_before_anything_starts(capsys, demo_stand_in, argv, fragment):
    # The rollout is built in memory before Ray starts, and the padding inside the step:
    # such sizes ended in an out-of-memory kill (or torch's "Overflow when unpacking long long").
    code, out, err = run(capsys, "demo", *argv)
    line = error_line(err, "demo")
    assert code == 2 and out == "" and fragment in line and demo_stand_in == []


def test_demo_at_the_size_limit_still_runs(capsys, demo_stand_in):
    from trajschema.cli.demo import DEMO_MAX_SAMPLES

    prompts = (DEMO_MAX_SAMPLES - 119) // 15  # rollout n 8: up to 15 trajectories a prompt; multiple 120
    code, _, err = run(capsys, "demo", "--prompts", prompts, "--seed", 2**32 - 1)
    assert (code, err) == (0, "")
    assert [(c["prompts"], c["seed"]) for c in demo_stand_in] == [(prompts, 2**32 - 1)]
    code, _, err = run(capsys, "demo", "--prompts", prompts + 1)
    assert code == 2 and f"the demo writes at most {DEMO_MAX_SAMPLES:,}" in error_line(err, "demo")


# -- options ---------------------------------------------------------------------------------------

OPTIONS = {
    # id: (argv, the whole error line after "error: ")
    "prefix of an option": (["plan", "--dp", "2", *PLAN], "unrecognized option '--dp'; did you mean '--dp-size'?"),
    "truncated option": (
        ["plan", "--dp-siz", "2", *PLAN],
        "unrecognized option '--dp-siz'; did you mean '--dp-size'?",
    ),
    "shorter option": (
        ["plan", "--dp-size", "2", "--batch", "10", "--rollout-n", "2", "--actor-mini-batch-size", "3"],
        "unrecognized option '--batch'; did you mean '--batch-size'?",
    ),
    "typo with =": (
        ["check", "f.pt", "--schema=text", "--dpeth=shapes"],
        "unrecognized option '--dpeth'; did you mean '--depth'?",
    ),
    "no --trust suggested": (["check", "f.pt", "--schema", "text", "--strict"], "unrecognized option '--strict'"),
    "option of another command": (["show", "text", "--format", "yaml"], "unrecognized option '--format'"),
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
    path = saved(tmp_path / "s.pt", [sample_of("text")])
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
    code, out, err = run(capsys, "pad", "text", "--count", 1, *EOS, "--out", fifo)
    assert code == 2 and out == "" and "is not a regular file" in error_line(err, "pad")
    assert fifo.is_fifo() and sorted(p.name for p in tmp_path.iterdir()) == ["fifo"]


def test_pad_writes_through_a_symlink(capsys, tmp_path):
    (tmp_path / "real").mkdir()
    link = tmp_path / "pad.pt"
    link.symlink_to(tmp_path / "real" / "pad.pt")  # dangling until pad writes its target
    code, _, err = run(capsys, "pad", "text", "--count", 2, *EOS, "--out", link)
    assert (code, err) == (0, "")
    assert link.is_symlink() and len(torch.load(link, weights_only=True)["samples"]) == 2


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["pad", "text", "--count", "1", *EOS, "--out", ""], "--out: an empty path"),
        (["pad", "text", "--count", "1", *EOS, "--like", "", "--out", "p.pt"], "an empty file name"),
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
    path = saved(tmp_path / "evil.pt", obj)
    calls: list[Any] = []
    real_load = torch.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    argv = {"check": ["check", path, "--schema", "text"], "infer": ["infer", path, "--name", "x"]}
    argv["pad"] = ["pad", "text", "--count", "1", *EOS, "--like", path, "--out", tmp_path / "p.pt"]
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
        (b"\x00\x01\xfe binary\n", "neither a zip archive, as torch.save writes, nor a legacy torch.save file"),
        (b"hello\n", "looks like text, not samples; check reads torch.save files (.pt) and JSON Lines"),
        (b"PK\x03\x04 truncated", "PytorchStreamReader failed reading zip archive"),
        (b"", "is empty; check reads torch.save files"),
    ],
    ids=["binary", "text", "truncated zip", "empty"],
)
def test_an_unreadable_file_says_what_it_is(capsys, tmp_path, content, fragment):
    path = tmp_path / "f.pt"
    path.write_bytes(content)
    code, _, err = run(capsys, "check", path, "--schema", "text")
    assert code == 2 and fragment in error_line(err, "check")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_one_line(capsys, tmp_path):
    path = saved(tmp_path / "s.pt", [sample_of("text")])
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
    path = saved(tmp_path / "s.pt", [sample])
    code, out, err = run(capsys, "check", path, "--schema", schema)
    assert (code, err) == (1, "")
    assert "\x1b" not in out and "\\x1b[2J\\x1b[31mred\\nrow" in out
    assert len(out.splitlines()) == 3  # piped: header, one row, summary
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
    path = saved(tmp_path / "s.pt", {"samples": [bad, worse], "tags": [{"seq_len": math.nan}, {"seq_len": 2**80}]})
    found = {}
    for depth in ("shapes", "values"):
        code, out, err = run(capsys, "check", path, "--schema", schema, "--json", "--depth", depth)
        assert (code, err) == (1, "")

        def no_constants(name: str) -> None:
            raise AssertionError(f"{name} is not JSON")

        report = json.loads(out, parse_constant=no_constants)
        found[depth] = {(v["sample"], v["field"], v["code"]) for v in report["files"][0]["violations"]}
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
    good = saved(tmp_path / "s.pt", [sample_of("text")])
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
    # Schema files only: a search path entry (the missing directory) may have a row of its own, named "-".
    rows = {line.split()[0]: line for line in out.splitlines()[2:-1] if line.strip() and line.split()[0] != "-"}
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
    path = saved(tmp_path / "s.pt", {"samples": [sample_of("text")], "tags": [{"seq_len": value}]})
    source = tmp_path / "anytag.yaml"
    source.write_text(schema.to_yaml())
    code, out, err = run(capsys, "check", path, "--schema", source)
    assert (code, err) == (1, "") and "seq_len" in out


# -- --config: dims from a model config (issue 16 §3) --------------------------------------------

CONFIGS = Path(__file__).resolve().parent.parent / "fixtures" / "configs"


def _moe_routed_on_path(text: str, tmp_path, monkeypatch) -> None:
    """``text`` as the moe_routed.yaml that TRAJSCHEMA_PATH finds first."""
    d = tmp_path / "schemas"
    d.mkdir()
    (d / "moe_routed.yaml").write_text(text)
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(d))


@pytest.fixture
def moe_with_config(tmp_path, monkeypatch):
    _moe_routed_on_path(_MOE_ROUTED, tmp_path, monkeypatch)


def _row(out: str, section: str, name: str) -> str:
    """The line of ``show``'s ``section`` (dims, fields) that describes ``name``."""
    lines = out.splitlines()
    start = lines.index(section)
    return next(line for line in lines[start:] if line.split()[:1] == [name])


def _dim_row(out: str, name: str) -> str:
    return _row(out, "dims", name)


def test_show_config_pins_the_dims_and_names_each_key(capsys, moe_with_config):
    code, out, err = run(capsys, "show", "moe_routed", "--config", CONFIGS / "deepseek-v3")
    assert (code, err) == (0, "")
    assert f"model config: {CONFIGS / 'deepseek-v3'}" in out
    assert _dim_row(out, "experts").split()[1:4] == ["fixed", "256", "(pinned"]
    assert "256 (pinned by config: n_routed_experts)" in _dim_row(out, "experts")
    assert "58 (pinned by config: num_hidden_layers - first_k_dense_replace)" in _dim_row(out, "layers")
    # without --config the same rows say where the sizes would come from
    code, out, _ = run(capsys, "show", "moe_routed")
    assert code == 0 and "free" in _dim_row(out, "topk") and "(from config: num_experts_per_tok)" in out


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ("Qwen/Qwen3-30B-A3B", "nothing is there (only local files are read"),
        ("{oops", "not JSON"),
        (
            '{"architectures": ["MixtralForCausalLM"], "num_local_experts": "8"}',
            "num_local_experts: expected an integer",
        ),
        ('{"num_local_experts": 8, "num_hidden_layers": 2}', "num_experts_per_tok: the config gives no"),
    ],
)
def test_show_and_pad_refuse_a_config_in_one_line_naming_it(capsys, tmp_path, moe_with_config, config, fragment):
    if config.startswith("{"):
        path = tmp_path / "m" / "config.json"
        path.parent.mkdir()
        path.write_text(config)
        config = str(path.parent)
    code, _, err = run(capsys, "show", "moe_routed", "--config", config)
    assert code == 2 and fragment in one_error_line(err, "show")
    out_path = tmp_path / "pad.pt"
    code, _, err = run(
        capsys, "pad", "moe_routed", "--count", 2, "--eos-token-id", 2, "--config", config, "--out", out_path
    )
    assert code == 2 and fragment in one_error_line(err, "pad") and not out_path.exists()


def test_pad_config_sizes_the_padding_without_like_or_dims(capsys, tmp_path, moe_with_config):
    out_path = tmp_path / "pad.pt"
    code, out, err = run(
        capsys, "pad", "moe_routed", "--count", 3, "--eos-token-id", 2, "--config", CONFIGS / "mixtral",
        "--out", out_path,
    )  # fmt: skip
    assert (code, err) == (0, ""), err
    assert "topk=2, layers=32" in out
    loaded = torch.load(out_path, weights_only=True)
    assert loaded["samples"][0]["routed_experts"].shape == (128, 32, 2)
    code, out, err = run(capsys, "check", out_path, "--schema", "moe_routed")
    assert (code, err) == (0, "") and out.startswith("valid:")


@pytest.mark.parametrize(
    ("fixture", "key", "experts"), [("deepseek-v3", "n_routed_experts", 384), ("qwen3-moe", "num_experts", 512)]
)
def test_show_and_pad_config_of_the_largest_moe_models(capsys, tmp_path, fixture, key, experts):
    """Kimi K2's 384 routed experts on DeepSeek-V3's architecture, 512 on Qwen3-MoE's: the packaged
    moe_routed (uint8 among its dtypes) pins, shows and pads with routes spread over every expert."""
    config = tmp_path / "model" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps({**json.loads((CONFIGS / fixture / "config.json").read_text()), key: experts}))
    code, out, err = run(capsys, "show", "moe_routed", "--config", config.parent)
    assert (code, err) == (0, ""), err
    assert f"{experts} (pinned by config: {key})" in _dim_row(out, "experts")
    out_path = tmp_path / "pad.pt"
    code, out, err = run(
        capsys, "pad", "moe_routed", "--count", 2, "--eos-token-id", 2, "--config", config.parent,
        "--dim", "prompt=300", "--dim", "response=4", "--out", out_path,
    )  # fmt: skip
    assert (code, err) == (0, ""), err
    routes = torch.stack([s["routed_experts"] for s in torch.load(out_path, weights_only=True)["samples"]])
    assert int(routes.max()) == experts - 1  # 2 x 304 tokens x 8 slots reach every expert


def test_pad_refuses_a_dim_the_config_gives_another_size(capsys, tmp_path, moe_with_config):
    out_path = tmp_path / "pad.pt"
    argv = ["pad", "moe_routed", "--count", 1, "--eos-token-id", 2, "--config", CONFIGS / "mixtral", "--out", out_path]
    code, _, err = run(capsys, *argv, "--dim", "topk=3")
    assert code == 2 and not out_path.exists()
    assert (
        "--dim topk=3: --config" in one_error_line(err, "pad") and "gives topk = 2 (config: num_experts_per_tok)" in err
    )
    code, out, err = run(capsys, *argv, "--dim", "topk=2", "--dim", "prompt=5")  # the same size is no conflict
    assert (code, err) == (0, "") and "prompt=5" in out


def test_a_schema_that_reads_nothing_from_the_config_is_shown_and_padded_as_it_is(capsys, tmp_path):
    code, out, err = run(capsys, "show", "text", "--config", CONFIGS / "qwen3-moe")
    assert (code, err) == (0, "")
    _, plain, _ = run(capsys, "show", "text")
    assert out.replace(f"  model config: {CONFIGS / 'qwen3-moe'}\n", "") == plain


#: moe_routed with every check of issue 16 on routed_experts (bounds in dims, distinct, spread padding).
_MOE_ROUTES = _MOE_ROUTED.replace(
    "min: 0, pad: 0}", "min: 0, max: experts - 1, distinct: true, pad: {spread: experts}}"
)


@pytest.fixture
def moe_routes(tmp_path, monkeypatch):
    _moe_routed_on_path(_MOE_ROUTES, tmp_path, monkeypatch)


def test_show_prints_the_expert_checks_and_with_config_their_value(capsys, moe_routes):
    code, out, err = run(capsys, "show", "moe_routed")
    assert (code, err) == (0, "")
    assert "{spread: experts}" in out and "max experts - 1" in out and "distinct" in out
    assert "(from config: num_experts | n_routed_experts | num_local_experts)" in _dim_row(out, "experts")
    code, out, err = run(capsys, "show", "moe_routed", "--config", CONFIGS / "qwen3-moe")
    assert (code, err) == (0, "")
    assert "128 (pinned by config: num_experts)" in _dim_row(out, "experts")
    assert "max experts - 1 (= 127)" in out


def test_pad_says_where_the_expert_count_came_from(capsys, tmp_path, moe_routes):
    out_path = tmp_path / "pad.pt"
    argv = ["pad", "moe_routed", "--count", 2, "--eos-token-id", 2, "--out", out_path]
    code, out, err = run(capsys, *argv, "--config", CONFIGS / "mixtral")
    assert (code, err) == (0, ""), err
    assert (
        "routed_experts: padding ids spread over experts=8 (from the model config (config: num_local_experts))" in out
    )
    routes = torch.load(out_path, weights_only=True)["samples"][0]["routed_experts"]
    assert routes.shape[-1] == 2 and bool((routes[..., 0] != routes[..., 1]).all()) and int(routes.max()) <= 7
    code, out, err = run(capsys, *argv, "--dim", "experts=16", "--dim", "topk=4", "--dim", "layers=2")
    assert (code, err) == (0, ""), err
    assert "spread over experts=16 (from --dim)" in out
